#!/usr/bin/env bash
# Each log lever alone, paired per round: `ringkit log bench` (4 KiB
# records, O_DIRECT, pinned to CPU 0) with two binaries built from
# neighbouring commits (OLD, NEW: the acknowledgement table), and with
# one binary at --batches-in-flight 1 and 2 (framing the next batch while
# the last one syncs). Rounds interleave the variants; each line is one
# sample as JSON.
#
#   OLD=/path/ringkit-before NEW=/path/ringkit-after ROUNDS=8 ./run.sh > samples.txt
set -eu
: "${OLD:?the binary before}" "${NEW:?the binary after}"
ROUNDS=${ROUNDS:-8}
SECS=${SECS:-3}
dir=$(mktemp -d /var/tmp/log-levers.XXXXXX)
trap 'rm -rf "$dir"' EXIT
one() { # label binary args...
    local label=$1 bin=$2
    shift 2
    rm -rf "$dir/log"
    echo "$label $("$bin" log bench --dir "$dir/log" --direct --record 4096 --secs "$SECS" --cpu 0 --json "$@" | grep '^{')"
}
for r in $(seq 1 "$ROUNDS"); do
    for w in 64 1; do
        one "$r w$w ack-channel" "$OLD" --writers "$w"
        one "$r w$w ack-table" "$NEW" --writers "$w"
        one "$r w$w depth-1" "$NEW" --writers "$w" --batches-in-flight 1
    done
done
