#!/bin/bash
# Interleaved rounds: each server on CPU 0, wrk -t1 on CPU 1, server CPU from /proc.
ulimit -n 20000
RK=/work/main/target/release/ringkit
ROUNDS=${ROUNDS:-3}; SECS=${SECS:-4}; FILE=${FILE:-1k.bin}; CONNS=${CONNS:-100}
start() {
  case $1 in
    nginx) taskset -c 0 /usr/sbin/nginx -c /tmp/sb/nginx.conf -p /tmp/sb/ & ;;
    rk-uring) taskset -c 0 $RK serve /tmp/sb --addr 127.0.0.1:18080 --backend uring 2>/dev/null & ;;
    rk-uring-nocache) taskset -c 0 $RK serve /tmp/sb --addr 127.0.0.1:18080 --backend uring --open-file-cache 0 2>/dev/null & ;;
    rk-epoll) taskset -c 0 $RK serve /tmp/sb --addr 127.0.0.1:18080 --backend epoll 2>/dev/null & ;;
    rk-uring-copy) taskset -c 0 $RK serve /tmp/sb --addr 127.0.0.1:18080 --backend uring --zero-copy off 2>/dev/null & ;;
    rk-epoll-copy) taskset -c 0 $RK serve /tmp/sb --addr 127.0.0.1:18080 --backend epoll --zero-copy off 2>/dev/null & ;;
  esac
  PID=$!
  for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18080/$FILE && break; sleep 0.05; done
}
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for r in $(seq $ROUNDS); do
  for s in $SERVERS; do
    start $s
    c0=$(cpu $PID)
    out=$(taskset -c 1 wrk -t1 -c$CONNS -d${SECS}s http://127.0.0.1:18080/$FILE 2>&1)
    c1=$(cpu $PID)
    kill -TERM $PID; wait $PID 2>/dev/null
    req=$(echo "$out" | awk '/requests in/{print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
    non2xx=$(echo "$out" | awk '/Non-2xx/{print $NF}')
    tck=$(getconf CLK_TCK)
    us=$(python3 -c "print(round(($c1-$c0)/$tck*1e6/max($req,1),2))")
    echo "round=$r server=$s file=$FILE conns=$CONNS rps=$rps cpu_us_per_req=$us non2xx=${non2xx:-0}"
    sleep 0.5
  done
done
