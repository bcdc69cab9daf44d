#!/usr/bin/env bash
# Paired A/B of two `ringkit` binaries' echo servers (io_uring, one
# thread on CPU 0) under `ringkit bench echo` on CPU 1, interleaved, the
# order alternating each round. Server CPU is utime+stime from
# /proc/PID/stat over the client's run.
# usage: ab.sh BEFORE AFTER ROUNDS SECS CONNS OUT
set -u
B=$1 A=$2 R=$3 S=$4 C=$5 OUT=$6
port=$((20000 + RANDOM % 8000))
for r in $(seq 1 "$R"); do
  if (( r % 2 )); then order="before after"; else order="after before"; fi
  for which in $order; do
    bin=$B; [ "$which" = after ] && bin=$A
    port=$((port + 1))
    taskset -c 0 "$bin" echo --addr 127.0.0.1:$port --backend uring --threads 1 >/dev/null 2>>"$OUT.server-stderr" &
    pid=$!
    sleep 0.4
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    line=$(taskset -c 1 "$A" bench echo -a 127.0.0.1:$port -c "$C" -t "$S" --cpu 1 --json 2>/dev/null | tail -1)
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill $pid; wait $pid 2>/dev/null
    echo "$r $which $C $((t1 - t0)) $line" >> "$OUT"
  done
done
