#!/usr/bin/env bash
# Where does an echo server's CPU go per request? For each server: start it
# pinned to CPU 0, drive it from CPU 1 with `ringkit bench echo`, sample CPU 0
# with `perf record`, read the server's CPU time from /proc over the same
# wall-clock span, and print the microseconds per request in each bucket
# (scripts/perf_categories.py).
#
#   scripts/profile-echo.sh [CONNS] [SECS] [CLIENT]
#       (default 50 connections, 6 s, SECS >= 4; CLIENT ringkit (one thread,
#       every connection a task) or threads (one blocking OS thread per
#       connection, rust_echo_bench's design))
#
# Needs perf (Debian: apt-get install linux-perf) and a release build
# (cargo build --release; the tokio row needs cargo build --release -p ringkit-peers).
# The runs are sequential and perf sampling adds ~20-30% to every figure: read
# the split (shares), and take ratios between servers from `ringkit compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-50}
secs=${2:-6}
client=${3:-ringkit}
[[ $secs =~ ^[0-9]+$ && $secs -ge 4 ]] || { echo "SECS must be an integer >= 4" >&2; exit 2; }
bin=target/release/ringkit
peer=target/release/ringkit-peer
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 2; }
[ -x "$bin" ] || cargo build --release
tmp=$(mktemp -d)
pid=""
load=""
cleanup() {
  [ -n "$load" ] && kill "$load" 2>/dev/null || true
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
servers=("ringkit-uring|$bin echo --backend uring --addr"
         "ringkit-epoll|$bin echo --backend epoll --recv single --addr")
[ -x "$peer" ] && servers+=("tokio|$peer tokio-echo")
port=7300
for s in "${servers[@]}"; do
  name=${s%%|*}; cmd=${s#*|}; port=$((port + 1)); addr=127.0.0.1:$port
  taskset -c 0 $cmd "$addr" >"$tmp/$name.log" 2>&1 &
  pid=$!
  up=""
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then up=1; break; fi
    sleep 0.1
  done
  if [ -z "$up" ] || ! kill -0 "$pid" 2>/dev/null; then
    echo "$name did not start listening on $addr:" >&2; cat "$tmp/$name.log" >&2; exit 1
  fi
  "$bin" bench echo -a "$addr" -c "$conns" -t "$secs" --cpu 1 --client "$client" >"$tmp/$name.load" 2>&1 &
  load=$!
  sleep 1.5
  w0=$(now); c0=$(cpu_ticks "$pid")
  perf record -q --no-buildid -C 0 -o "$tmp/$name.data" -- sleep $((secs - 3))
  w1=$(now); c1=$(cpu_ticks "$pid")
  wait "$load" || { echo "$name: load failed:" >&2; cat "$tmp/$name.load" >&2; exit 1; }
  load=""
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rps=$(grep -oP '[0-9]+(?= response/sec)' "$tmp/$name.load")
  per_req=$(python3 -c "print(($c1 - $c0) / $(getconf CLK_TCK) * 1e6 / ($rps * ($w1 - $w0)))")
  python3 scripts/perf_categories.py "$tmp/$name.data" "$per_req" "$pid" "$name"
  pid=""
done
