#!/usr/bin/env bash
# Where does an echo server's CPU go per request? For each server: start it
# pinned to CPU 0, drive it from CPU 1 with `ringkit bench echo`, sample CPU 0
# with `perf record`, read the server's CPU time from /proc, and print the
# microseconds per request in each bucket (scripts/perf_categories.py).
#
#   scripts/profile-echo.sh [CONNS] [SECS]      (default 50 connections, 6 s)
#
# Needs perf (Debian: apt-get install linux-perf) and a release build
# (cargo build --release; the tokio row needs cargo build --release -p ringkit-peers).
# The runs are sequential and perf sampling adds ~20-30% to every figure: read
# the split (shares), and take ratios between servers from `ringkit compare`.
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-50}
secs=${2:-6}
bin=target/release/ringkit
peer=target/release/ringkit-peer
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 2; }
[ -x "$bin" ] || cargo build --release
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
servers=("ringkit-uring|$bin echo --backend uring --addr"
         "ringkit-epoll|$bin echo --backend epoll --recv single --addr")
[ -x "$peer" ] && servers+=("tokio|$peer tokio-echo")
port=7300
for s in "${servers[@]}"; do
  name=${s%%|*}; cmd=${s#*|}; port=$((port + 1)); addr=127.0.0.1:$port
  taskset -c 0 $cmd $addr >"$tmp/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  "$bin" bench echo -a "$addr" -c "$conns" -t "$secs" --cpu 1 >"$tmp/$name.load" 2>&1 &
  load=$!
  sleep 1.5
  t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
  perf record -q -C 0 -o "$tmp/$name.data" -- sleep $((secs - 3)) 2>/dev/null
  t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
  wait $load || true
  kill $pid; wait $pid 2>/dev/null || true
  rps=$(grep -oP 'Speed: \K[0-9]+' "$tmp/$name.load")
  hz=$(getconf CLK_TCK)
  per_req=$(python3 -c "print(($t1 - $t0) / $hz * 1e6 / ($rps * ($secs - 3)))")
  python3 scripts/perf_categories.py "$tmp/$name.data" "$per_req" "$name"
done
