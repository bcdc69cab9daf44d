#!/usr/bin/env bash
# Paired A/B of two `ringkit` binaries' HTTP servers (`ringkit http`, one
# thread on CPU 0, given backend) under wrk (1 thread, CONNS connections,
# CPU 1), interleaved, order alternating each round. Server CPU is
# utime+stime from /proc/PID/stat over wrk's run.
# usage: ab-http.sh BEFORE AFTER ROUNDS SECS CONNS BACKEND OUT
set -u
B=$1 A=$2 R=$3 S=$4 C=$5 BK=$6 OUT=$7
port=$((20000 + RANDOM % 8000))
for r in $(seq 1 "$R"); do
  if (( r % 2 )); then order="before after"; else order="after before"; fi
  for which in $order; do
    bin=$B; [ "$which" = after ] && bin=$A
    port=$((port + 1))
    taskset -c 0 "$bin" http --addr 127.0.0.1:$port --backend "$BK" --threads 1 >/dev/null 2>>"$OUT.server-stderr" &
    pid=$!
    sleep 0.4
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    rps=$(taskset -c 1 wrk -t1 -c"$C" -d"${S}s" http://127.0.0.1:$port/ 2>/dev/null | awk '/Requests\/sec/ {print $2}')
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill $pid; wait $pid 2>/dev/null
    echo "$r $which $C $BK $((t1 - t0)) $rps" >> "$OUT"
  done
done
