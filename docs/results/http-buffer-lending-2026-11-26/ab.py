import subprocess, time, re, sys, statistics, json, os, signal
OLD = "/tmp/oldmain-target/release/ringkit"
NEW = "/work/main/target/release/ringkit"
ROUNDS = int(os.environ.get("ROUNDS", "6"))
SECS = os.environ.get("SECS", "5")
W = [
  ("static f16 c50", ["serve", "/tmp/ab/www"], "/f16.bin", None),
  ("static f16 c50 pipelined x16", ["serve", "/tmp/ab/www"], "/f16.bin", "/tmp/ab/pipeline.lua"),
  ("http GET / c50", ["http"], "/", None),
  ("http GET / c50 pipelined x16", ["http"], "/", "/tmp/ab/pipeline.lua"),
]
def run(exe, args, path, lua):
    port = 18900
    srv = subprocess.Popen(["taskset", "-c", "0", exe] + args + ["--addr", f"127.0.0.1:{port}", "--backend", "uring"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cmd = ["taskset", "-c", "1", "wrk", "-t1", "-c50", f"-d{SECS}s", f"http://127.0.0.1:{port}{path}"]
    if lua: cmd += ["-s", lua]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    srv.send_signal(signal.SIGKILL); srv.wait()
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    return float(m.group(1)) if m else 0.0
res = {w[0]: [] for w in W}
for r in range(ROUNDS):
    for name, args, path, lua in W:
        order = [("old", OLD), ("new", NEW)] if r % 2 == 0 else [("new", NEW), ("old", OLD)]
        got = {}
        for tag, exe in order:
            got[tag] = run(exe, args, path, lua)
        res[name].append((got["old"], got["new"]))
        print(r, name, got, "new/old %.3f" % (got["new"] / got["old"]), flush=True)
print()
for name, pairs in res.items():
    ratios = [n / o for o, n in pairs]
    print(f"{name}: new/old req/s median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}); old median {statistics.median([o for o,_ in pairs]):.0f}, new median {statistics.median([n for _,n in pairs]):.0f}")
json.dump(res, open("/tmp/ab/ab.json", "w"))
