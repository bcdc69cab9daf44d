import socket, sys, time, selectors
port=int(sys.argv[1]); pid=int(sys.argv[2]); n=int(sys.argv[3]); path=sys.argv[4] if len(sys.argv)>4 else "/f16k"
def rss():
    for l in open(f"/proc/{pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
r0=rss()
conns=[socket.create_connection(("127.0.0.1",port)) for i in range(n)]
time.sleep(0.5); r1=rss()
req=(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"*64).encode()
for s in conns: s.sendall(req)
time.sleep(1.0); rpeak=rss()
sel=selectors.DefaultSelector()
state={}
for s in conns:
    s.setblocking(False); sel.register(s, selectors.EVENT_READ); state[s]=[b"",0]
left=n
while left:
    for key,_ in sel.select(timeout=10):
        s=key.fileobj; st=state[s]
        d=s.recv(1<<20)
        if not d: raise SystemExit("closed")
        st[0]+=d
        while True:
            buf=st[0]; i=buf.find(b"\r\n\r\n")
            if i<0: break
            cl=0
            for l in buf[:i].decode().split("\r\n"):
                if l.lower().startswith("content-length:"): cl=int(l.split(":")[1])
            if len(buf)<i+4+cl: break
            st[0]=buf[i+4+cl:]; st[1]+=1
        if st[1]==64: sel.unregister(s); left-=1
time.sleep(1.0); r2=rss()
for s in conns: s.close()
time.sleep(2.0); r3=rss()
print(f"n={n} start={r0} KiB fresh=+{(r1-r0)/n:.1f} KiB/conn peak(unread)=+{(rpeak-r0)/1024:.1f} MiB after_burst=+{(r2-r0)/n:.1f} KiB/conn after_close=+{(r3-r0)/1024:.1f} MiB")
