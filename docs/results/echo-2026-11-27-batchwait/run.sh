#!/bin/bash
# rust_echo_bench c=1000 512B: variants interleaved, server CPU 0, client CPU 1.
ulimit -n 20000
RK=/work/main/target/release/ringkit
PEER=/work/main/target/release/ringkit-peer
EB=/tmp/reb/target/release/echo_bench
ROUNDS=${ROUNDS:-6}; SECS=${SECS:-5}; C=${C:-1000}
VARIANTS=${VARIANTS:-"uring bw tokio"}
OUT=${OUT:-/tmp/ab3/results.txt}  # uring = --batch-wait auto (the default when these rounds ran), nowait = off; : > $OUT
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
port=7300
for r in $(seq 1 $ROUNDS); do
  set -- $VARIANTS; n=$#; order=""
  for i in $(seq 0 $((n-1))); do j=$(( (i + r) % n + 1 )); order="$order ${!j}"; done
  for s in $order; do
    port=$((port+1)); addr=127.0.0.1:$port
    case $s in
      uring) taskset -c 0 $RK echo --backend uring --addr $addr --batch-wait auto > /tmp/ab3/srv.log 2>&1 & ;;
      nowait) taskset -c 0 $RK echo --backend uring --addr $addr --batch-wait off > /tmp/ab3/srv.log 2>&1 & ;;
      bw) taskset -c 0 $RK echo --backend uring --addr $addr --batch-wait 32:50 > /tmp/ab3/srv.log 2>&1 & ;;
      bw20) taskset -c 0 $RK echo --backend uring --addr $addr --batch-wait 32:20 > /tmp/ab3/srv.log 2>&1 & ;;
      adapt) taskset -c 0 $RK echo --backend uring --addr $addr $ADAPT_ARGS > /tmp/ab3/srv.log 2>&1 & ;;
      tokio) taskset -c 0 $PEER tokio-echo $addr > /tmp/ab3/srv.log 2>&1 & ;;
    esac
    pid=$!; sleep 0.5
    c0=$(cpu $pid)
    res=$(taskset -c 1 $EB -a $addr -l 512 -c $C -t $SECS 2>&1 | grep -E "Speed|Responses" | tr "\n" " ")
    c1=$(cpu $pid)
    kill $pid; wait $pid 2>/dev/null
    echo "round $r $s cpu_ticks $((c1 - c0)) $res" | tee -a $OUT
  done
done
