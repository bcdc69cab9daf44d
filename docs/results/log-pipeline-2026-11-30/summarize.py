#!/usr/bin/env python3
"""Paired after/before ratios per round of `ab.sh`'s output: commits/s
(higher is better) and CPU per commit (lower is better)."""
import json, sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    r, which, cfg, js = line.split(' ', 3)
    j = json.loads(js)
    rows.setdefault((cfg, r), {})[which] = j
for cfg in sorted({k[0] for k in rows}):
    rate, cpu, p99 = [], [], []
    for (c, r), v in sorted(rows.items()):
        if c != cfg or len(v) != 2:
            continue
        a, b = v['after'], v['before']
        ra, rb = a['commits'] / a['secs'], b['commits'] / b['secs']
        rate.append(ra / rb)
        cpu.append((a['cpu_s'] / a['commits']) / (b['cpu_s'] / b['commits']))
        p99.append(a['p99_us'] / b['p99_us'])
    f = lambda v: f"{st.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
    print(f"{cfg}: {len(rate)} rounds; after/before commits/s {f(rate)}; CPU per commit {f(cpu)}; p99 {f(p99)}")
