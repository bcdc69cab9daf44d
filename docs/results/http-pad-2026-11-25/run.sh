#!/bin/bash
BIN=/work/main/target/release/ringkit
for round in 1 2 3 4 5 6 7 8; do
  for pad in 0 39; do
    port=$((18500 + round*2 + (pad>0)))
    taskset -c 0 $BIN http --addr 127.0.0.1:$port --backend uring --pad $pad 2>/dev/null &
    pid=$!
    sleep 0.3
    t0=$(awk '{print $14+$15}' /proc/$pid/stat)
    out=$(taskset -c 1 wrk -t1 -c100 -d3s http://127.0.0.1:$port/ 2>/dev/null)
    t1=$(awk '{print $14+$15}' /proc/$pid/stat)
    kill -TERM $pid; wait $pid 2>/dev/null
    req=$(echo "$out" | awk '/requests in/{print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
    echo "round $round pad=$pad ticks=$((t1-t0)) requests=$req rps=$rps us_per_req=$(python3 -c "print(round(($t1-$t0)*10000/$req,3))")"
  done
done
