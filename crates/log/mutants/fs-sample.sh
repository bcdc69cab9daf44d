#!/usr/bin/env bash
# cargo-mutants' mutants of ringkit::fs (crates/rt/src/fs), one shard of
# them, each planted in this tree in turn and tested with the crash-state
# explorer's dense sweeps (`cargo test -p ringkit-log --test crashcheck
# dense`), then with the rest of ringkit-log's tests if those miss it.
# `cargo mutants -p ringkit` itself rebuilds every one of ringkit's test
# binaries per mutant, hours for a shard on a 2-core machine; this builds
# only what the log's tests need. The tree must be clean; each mutant is
# reverted before the next.
#
#   crates/log/mutants/fs-sample.sh            # shard 1/20 (11 mutants)
#   crates/log/mutants/fs-sample.sh 2/20
#   TIMEOUT=3600 crates/log/mutants/fs-sample.sh   # a slow machine
set -u
cd "$(dirname "$0")/../../.."
if ! git diff --quiet; then
    echo "fs-sample.sh: the tree has changes; commit or stash them first" >&2
    exit 2
fi
shard=${1:-1/20}
tmp=$(mktemp -d)
cargo mutants -p ringkit -f 'crates/rt/src/fs/**' --list --diff --json \
    --shard "$shard" --sharding round-robin >"$tmp/list.json" || exit 2
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$tmp/list.json")
echo "shard $shard: $n mutants of crates/rt/src/fs"
current=""
trap '[ -n "$current" ] && patch -s -R "${current%%|*}" <"${current#*|}"' EXIT
rest=(--lib --test edit --test log --test pipeline --test recovery --test crash --test example)
for i in $(seq 0 $((n - 1))); do
    read -r file name < <(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))[int(sys.argv[2])]
open(sys.argv[3], "w").write(m["diff"])
print(m["file"], m["name"])' "$tmp/list.json" "$i" "$tmp/m.diff")
    patch -s "$file" <"$tmp/m.diff" || { echo "does not apply: $name"; continue; }
    current="$file|$tmp/m.diff"
    if ! cargo test -q -p ringkit-log --test crashcheck --no-run >/dev/null 2>&1; then
        echo "unviable: $name"
    elif ! timeout "${TIMEOUT:-600}" cargo test -q -p ringkit-log --test crashcheck dense >"$tmp/out" 2>&1; then
        echo "caught (explorer): $name"
        grep -m1 -A1 "panicked at" "$tmp/out" | sed 's/^/    /' | cut -c1-240
    elif ! timeout "${TIMEOUT:-900}" cargo test -q -p ringkit-log "${rest[@]}" >"$tmp/out" 2>&1; then
        echo "caught (log tests): $name"
        grep -m1 -A1 "panicked at" "$tmp/out" | sed 's/^/    /' | cut -c1-240
    else
        echo "MISSED: $name"
    fi
    patch -s -R "$file" <"$tmp/m.diff"
    current=""
done
rm -rf "$tmp"
