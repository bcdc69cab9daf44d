#!/bin/bash
# rust_echo_bench (haraldh, built outside the repo) at c=1000, 512 B:
# ringkit-uring against tokio, interleaved rounds, server CPU 0, client CPU 1.
ulimit -n 20000
RK=/work/main/target/release/ringkit
PEER=/work/main/target/release/ringkit-peer
EB=/tmp/reb/target/release/echo_bench
ROUNDS=${ROUNDS:-10}; SECS=${SECS:-5}; C=${C:-1000}
OUT=/tmp/reb/results.txt; : > $OUT
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for r in $(seq 1 $ROUNDS); do
  order="uring tokio"; [ $((r % 2)) = 0 ] && order="tokio uring"
  for s in $order; do
    port=$((7100 + r * 2 + (s == "tokio") )) 2>/dev/null
    [ $s = uring ] && port=$((7100 + r*2)) || port=$((7101 + r*2))
    addr=127.0.0.1:$port
    if [ $s = uring ]; then taskset -c 0 $RK echo --backend uring --addr $addr > /tmp/reb/srv.log 2>&1 &
    else taskset -c 0 $PEER tokio-echo $addr > /tmp/reb/srv.log 2>&1 & fi
    pid=$!; sleep 0.5
    c0=$(cpu $pid)
    res=$(taskset -c 1 $EB -a $addr -l 512 -c $C -t $SECS 2>&1 | grep -E "Speed|Responses" | tr "\n" " ")
    c1=$(cpu $pid)
    kill $pid; wait $pid 2>/dev/null
    echo "round $r $s cpu_ticks $((c1 - c0)) $res" | tee -a $OUT
  done
done
