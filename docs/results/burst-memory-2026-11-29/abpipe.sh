#!/bin/bash
# usage: abpipe.sh rounds secs conns backend
R=$1; S=$2; C=$3; B=$4
ulimit -n 20000
for r in $(seq $R); do
  for v in old new; do
    taskset -c 0 /tmp/ringkit-$v serve /tmp/www --addr 127.0.0.1:18090 --backend $B >/dev/null 2>&1 & P=$!
    sleep 0.4
    t0=$(awk '{print $14+$15}' /proc/$P/stat)
    out=$(taskset -c 1 wrk -t1 -c$C -d${S}s -s /tmp/pipe.lua http://127.0.0.1:18090/ 2>&1)
    t1=$(awk '{print $14+$15}' /proc/$P/stat)
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    echo "$r $v $rps $((t1-t0))"
    kill $P; wait $P 2>/dev/null
  done
done
