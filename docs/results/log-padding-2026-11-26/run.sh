#!/bin/bash
# Interleaved rounds: format 1 (before, db23fc1) and format 2 (after), O_DIRECT, 4 KiB records.
set -u
declare -A BIN=([before]=/tmp/before-target/release/ringkit [after]=/work/main/target/release/ringkit)
OUT=/tmp/padbench.txt
: > $OUT
for w in 64 1; do
  for round in 1 2 3 4 5 6 7 8; do
    if [ $((round % 2)) = 1 ]; then order="before after"; else order="after before"; fi
    for which in $order; do
      d=/tmp/padbench-$which-$w-$round
      rm -rf "$d"
      line=$(${BIN[$which]} log bench --direct --writers $w --record 4096 --secs 3 --cpu 0 --json --dir "$d" 2>&1 | tail -1)
      echo "$which w=$w round=$round $line" >> $OUT
      rm -rf "$d"
    done
  done
done
echo finished >> $OUT
