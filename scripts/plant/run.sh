#!/usr/bin/env bash
# Measure what `ringkit torture raft` catches: plant each bug of
# scripts/plant/*.patch, one at a time, in a copy of the committed tree
# (a git worktree), build it, and run the default torture on it. A bug is
# CAUGHT when the run reports a violation (its round and time are
# printed), MISSED when the run passes.
#
#   scripts/plant/run.sh                 # every bug, seed 1, io_uring
#   scripts/plant/run.sh leader-restore-on callback-before-sync
#   SEED=7 BACKEND=epoll ROUNDS=20 scripts/plant/run.sh
#
# The bugs: ack-before-commit (a write not committed in 100 ms is
# acknowledged anyway), local-read-any-node and local-read-on-leader
# (reads served from the node's own map, on any node or on one that
# believes it leads), callback-before-write and callback-before-sync
# (openraft told entries are durable before they are written, or once
# written and never synced: only power loss catches that one),
# client-resends-unknown (a write of unknown outcome sent again),
# leader-restore-on (openraft's default back), node-zombie (a node whose
# Raft core stopped keeps serving).
#
# scripts/plant/missed/ holds bugs a review planted that the default run
# does NOT catch (faults only hit a steady cluster; see crates/cli/src/nemesis.rs):
#   scripts/plant/run.sh missed/vote-not-awaited
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
seed=${SEED:-1}
backend=${BACKEND:-uring}
rounds=${ROUNDS:-20}
target="$repo/target/plant"
work=$(mktemp -d)
trap 'for w in "$work"/*/; do git -C "$repo" worktree remove --force "$w" 2>/dev/null || true; done; rm -rf "$work"' EXIT

if [ "$#" -gt 0 ]; then
    bugs=("$@")
else
    bugs=()
    for p in "$repo"/scripts/plant/*.patch; do bugs+=("$(basename "$p" .patch)"); done
fi

printf '%-24s %-7s %s\n' bug verdict "first violation"
for bug in "${bugs[@]}"; do
    name=${bug//\//-}
    tree="$work/$name"
    git -C "$repo" worktree add -q --detach "$tree" HEAD
    git -C "$tree" apply "$repo/scripts/plant/$bug.patch"
    CARGO_TARGET_DIR="$target" cargo build --release -q -p ringkit-cli \
        --manifest-path "$tree/Cargo.toml"
    out="$work/$name.log"
    t0=$(date +%s)
    # CAUGHT only with a violation reported: a run that fails for any
    # other reason (the harness itself) is an ERROR, not a catch.
    if "$target/release/ringkit" torture raft --seed "$seed" --backend "$backend" \
        --rounds "$rounds" --port 7250 >"$out" 2>&1; then
        verdict=MISSED
    elif grep -q 'first violation after round' "$out"; then
        verdict=CAUGHT
    else
        verdict=ERROR
    fi
    secs=$(( $(date +%s) - t0 ))
    first=$(grep -o 'first violation after round [0-9]*, [0-9.]* s' "$out" | head -1 || true)
    what=$(grep -m1 '^VIOLATION' "$out" | cut -c1-150 || true)
    printf '%-24s %-7s %s (run %s s) %s\n' "$bug" "$verdict" "${first:-none}" "$secs" "$what"
    cp "$out" "$repo/target/plant-$name.log"
    git -C "$repo" worktree remove --force "$tree"
done
