#!/usr/bin/env python3
"""Paired ratios per round from a `compare echo` results.json (rust_echo_bench
client): responses over the whole run, server CPU per response, and the
tool's own figure; then per contender the tool's figure, the whole-run rate,
how long past -t the run took, and the client's CPU share.

Usage: paired.py results.json
"""
import json, statistics as st, sys

d = json.load(open(sys.argv[1]))
samples = [s for sec in d if isinstance(sec, dict) for s in sec.get("samples", [])] if isinstance(d, list) else None
if not samples:
    def walk(o):
        if isinstance(o, dict):
            if isinstance(o.get("samples"), list):
                return o["samples"]
            for v in o.values():
                r = walk(v)
                if r:
                    return r
        if isinstance(o, list):
            for v in o:
                r = walk(v)
                if r:
                    return r
    samples = walk(d)
by, names, conns, rounds = {}, [], set(), set()
for s in samples:
    if s["error"]:
        continue
    l = s["load"]
    cpu = s["cpu_user_s"] + s["cpu_sys_s"]
    by[(s["contender"], s["conns"], s["round"])] = dict(
        rps=l["responses"] / l["secs"], cpu=cpu * 1e6 / l["responses"], tool=l["tool_rps"],
        secs=l["secs"], past=l["connect_secs"], dead=l.get("dead_conns", 0),
        failed=l["failed_conns"], client=l["client_cpu_s"] / l["secs"])
    if s["contender"] not in names:
        names.append(s["contender"])
    conns.add(s["conns"]); rounds.add(s["round"])
fmt = lambda v: "%.2fx (%.2f-%.2f)" % (st.median(v), min(v), max(v))
for c in sorted(conns):
    print(f"c={c}")
    for a in names:
        for b in names:
            if a == b:
                continue
            rs = [r for r in sorted(rounds) if (a, c, r) in by and (b, c, r) in by]
            q = lambda k: [by[(a, c, r)][k] / by[(b, c, r)][k] for r in rs]
            print(f"  {a} / {b}: req/s over the run {fmt(q('rps'))}, CPU per response {fmt(q('cpu'))}, its own figure {fmt(q('tool'))}")
    for n in names:
        v = [by[(n, c, r)] for r in sorted(rounds) if (n, c, r) in by]
        m = lambda k: st.median([x[k] for x in v])
        print(f"  {n}: its own figure {m('tool'):.0f}, over the run {m('rps'):.0f} req/s, run {m('secs'):.1f} s "
              f"({m('past'):.2f} s past -t, {min(x['past'] for x in v):.2f}-{max(x['past'] for x in v):.2f}), "
              f"CPU {m('cpu'):.2f} us/response, threads that gave up {sum(x['dead'] for x in v)}, "
              f"failed {sum(x['failed'] for x in v)}, client CPU share {m('client'):.2f}")
