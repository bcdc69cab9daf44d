#!/usr/bin/env bash
# Paired A/B of the log before (cb0ce35: a task and oneshot per batch) and
# after (the sans-I/O pipeline, batches' I/O polled by the flusher):
# `ringkit log bench`, pinned to CPU 0, rounds interleaved, order
# alternating. Usage: ab.sh BEFORE_BIN AFTER_BIN ROUNDS OUT
set -u
before=$1 after=$2 rounds=$3 out=$4
: > "$out"
scratch=/work/ab-log/scratch
for r in $(seq 1 "$rounds"); do
  for cfg in "64 --direct" "1 --direct" "64"; do
    set -- $cfg
    w=$1; shift
    if [ $((r % 2)) -eq 0 ]; then order="before after"; else order="after before"; fi
    for which in $order; do
      bin=$before; [ "$which" = after ] && bin=$after
      rm -rf "$scratch"
      line=$("$bin" log bench --dir "$scratch" --writers "$w" --record 4096 --secs 3 \
             --segment-mib 256 --cpu 0 "$@" --json 2>/dev/null | tail -1)
      echo "$r $which w$w${1:+-direct} $line" >> "$out"
    done
  done
done
rm -rf "$scratch"
