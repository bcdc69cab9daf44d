import json,statistics as st,sys,glob,os
def echo(f):
    rows={}
    for line in open(f):
        parts=line.split(' ',4)
        r,which,ticks=parts[0],parts[1],int(parts[3])
        j=json.loads(parts[4])
        rows.setdefault(r,{})[which]=(j['responses']/j['secs'], ticks/100/max(j['responses'],1)*1e6, j['responses'], j['mismatches'])
    return rows
def http(f):
    rows={}
    for line in open(f):
        r,which,c,bk,ticks,rps=line.split()
        rps=float(rps); n=rps*5
        rows.setdefault(r,{})[which]=(rps, int(ticks)/100/n*1e6, n, 0)
    return rows
for f in sorted(glob.glob('*.txt')):
    rows=echo(f) if f.startswith('echo') else http(f)
    rows={k:v for k,v in rows.items() if 'before' in v and 'after' in v and v['before'][2]>0 and v['after'][2]>0}
    rr=[v['after'][0]/v['before'][0] for v in rows.values()]
    cr=[v['after'][1]/v['before'][1] for v in rows.values()]
    print('%-22s rounds %2d  req/s before %8.0f after %8.0f  paired req/s after/before %.3f (%.3f-%.3f)  CPU/req after/before %.3f (%.3f-%.3f)'%(
        f,len(rows),st.median([v['before'][0] for v in rows.values()]),st.median([v['after'][0] for v in rows.values()]),
        st.median(rr),min(rr),max(rr),st.median(cr),min(cr),max(cr)))
