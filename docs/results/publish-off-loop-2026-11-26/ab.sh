#!/bin/bash
# Paired A/B: the counters file written on the serving loop every 50 ms
# (old, 9cee2a6) against written off the loop on request (new).
# Usage: ab.sh ROUNDS ECHO_RATE HTTP_RATE SECS
set -u
OLD=/tmp/wt-target/release/ringkit
NEW=/work/main/target/release/ringkit
GEN=$NEW
R=${1:-6}; ER=${2:-25000}; HR=${3:-20000}; S=${4:-5}
OUT=/work/ab/out; mkdir -p $OUT; : > $OUT/rows.tsv
port=7900
run() { # which kind round
  local which=$1 kind=$2 round=$3 bin
  [ $which = old ] && bin=$OLD || bin=$NEW
  port=$((port+1))
  local st=/work/ab/stats-$which-$kind-$round; rm -f $st.*
  if [ $kind = echo ]; then
    taskset -c 0 $bin echo --addr 127.0.0.1:$port --backend uring --threads 1 --recv multishot --stats $st >/dev/null 2>&1 &
    local pid=$!; sleep 0.5
    local j=$($GEN bench echo --address 127.0.0.1:$port -c 1000 -l 512 --duration $S --rate $ER --cpu 1 --json 2>/dev/null | tail -1)
  else
    taskset -c 0 $bin http --addr 127.0.0.1:$port --backend uring --threads 1 --stats $st >/dev/null 2>&1 &
    local pid=$!; sleep 0.5
    local j=$($GEN bench http http://127.0.0.1:$port/ -c 1000 --duration $S --rate $HR --cpu 1 --json 2>/dev/null | tail -1)
  fi
  kill $pid; wait $pid 2>/dev/null
  echo "$j" | python3 -c "import json,sys; d=json.load(sys.stdin); print('\t'.join(map(str,['$kind','$which',$round,round(d['responses']/d['secs']),d['p50_us'],d['p99_us'],d['p999_us'],d['max_us']])))" >> $OUT/rows.tsv
}
for round in $(seq 1 $R); do
  for kind in echo http; do
    if [ $((round % 2)) = 1 ]; then run old $kind $round; run new $kind $round; else run new $kind $round; run old $kind $round; fi
  done
done
cat $OUT/rows.tsv
