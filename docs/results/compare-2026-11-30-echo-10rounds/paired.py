import json,statistics as st,sys
d=json.load(open(sys.argv[1]))
def walk(o):
    if isinstance(o,dict):
        if isinstance(o.get('samples'),list): return o['samples']
        for v in o.values():
            r=walk(v)
            if r: return r
    if isinstance(o,list):
        for v in o:
            r=walk(v)
            if r: return r
S=walk(d); by={}; names=[]
for s in S:
    if s['error']: continue
    l=s['load']; cpu=s['cpu_user_s']+s['cpu_sys_s']
    by[(s['contender'],s['conns'],s['round'])]=(l['responses']/l['secs'], cpu*1e6/l['responses'])
    if s['contender'] not in names: names.append(s['contender'])
skip=set(int(x) for x in sys.argv[2].split(',')) if len(sys.argv)>2 else set()
for c in sorted(set(k[1] for k in by)):
    for a in names:
        for b in names:
            if a==b: continue
            rs=[r for r in range(100) if (a,c,r) in by and (b,c,r) in by and r not in skip]
            rr=[by[(a,c,r)][0]/by[(b,c,r)][0] for r in rs]; cr=[by[(a,c,r)][1]/by[(b,c,r)][1] for r in rs]
            print(f"c={c} {a}/{b}: req/s {st.median(rr):.2f}x ({min(rr):.2f}-{max(rr):.2f}), CPU/req {st.median(cr):.2f}x ({min(cr):.2f}-{max(cr):.2f}) [{len(rs)} rounds]")
