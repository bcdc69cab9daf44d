import sys,statistics as st,collections
rows=collections.defaultdict(dict)
for l in open(sys.argv[1]):
    if l.startswith("#"): continue
    f=l.split()
    r=int(f[1]); v=f[2]; ticks=int(f[4]); resp=int(f[f.index('Responses:')+1]); rps=int(f[f.index('Speed:')+1])
    rows[r][v]=(rps, ticks*10000/resp)
vs=sorted({v for r in rows.values() for v in r})
for v in vs:
    print(v, "rps med", st.median(rows[r][v][0] for r in rows), "cpu/resp med %.2f"%st.median(rows[r][v][1] for r in rows))
base=sys.argv[2]
for v in vs:
    if v==base: continue
    rr=[rows[r][v][0]/rows[r][base][0] for r in rows]; cc=[rows[r][v][1]/rows[r][base][1] for r in rows]
    print(f"{v}/{base}: rps {st.median(rr):.2f}x ({min(rr):.2f}-{max(rr):.2f}) cpu/resp {st.median(cc):.2f}x ({min(cc):.2f}-{max(cc):.2f})")
