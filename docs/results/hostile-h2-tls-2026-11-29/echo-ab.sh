#!/bin/bash
# A/B: old (before the receive byte limit and the per-4-KiB budget) vs new ringkit echo.
OLD=/tmp/oldexe/ringkit; NEW=/work/main/target/release/ringkit; CLI=/work/main/target/release/ringkit
port=17100
for round in 1 2 3 4 5 6; do
 for cfg in "uring 65536" "epoll 65536" "uring 512" "epoll 512"; do
  set -- $cfg; be=$1; len=$2
  for which in old new; do
   bin=$OLD; [ $which = new ] && bin=$NEW
   port=$((port+1))
   taskset -c 0 $bin echo --addr 127.0.0.1:$port --backend $be > /dev/null 2>&1 & pid=$!
   sleep 0.3
   t0=$(awk '{print $14+$15}' /proc/$pid/stat)
   out=$($CLI bench echo -a 127.0.0.1:$port -c 50 -l $len -t 2 --cpu 1 --json 2>/dev/null | tail -1)
   t1=$(awk '{print $14+$15}' /proc/$pid/stat)
   kill $pid; wait $pid 2>/dev/null
   resp=$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["responses"])')
   echo "$round $be $len $which $resp $((t1-t0))"
  done
 done
done
