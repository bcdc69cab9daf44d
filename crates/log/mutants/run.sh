#!/usr/bin/env bash
# Plant each hand-made durability mutant (the .patch files beside this
# script) in turn and run against it the log's unit tests (the pipeline's
# rules, without a runtime) and tests/log.rs, then the crash-state
# explorer's tests. Say which caught it: the unit tests that failed, and
# how many seconds after the explorer's tests started their first failure
# was printed (compile time excluded). The tree must be clean; each patch
# is reverted before the next.
#
#   crates/log/mutants/run.sh            # every mutant
#   crates/log/mutants/run.sh 2 5u       # the ones whose names start so
#   KEEP=/tmp/out crates/log/mutants/run.sh   # keep each test output there
set -u
cd "$(dirname "$0")/../../.."
if ! git diff --quiet; then
    echo "run.sh: the tree has changes; commit or stash them first" >&2
    exit 2
fi
pats=()
if [ $# -eq 0 ]; then
    pats=(crates/log/mutants/*.patch)
else
    for m in "$@"; do pats+=(crates/log/mutants/"$m"-*.patch); done
fi
current=""
trap '[ -n "$current" ] && git apply -R "$current"' EXIT
for p in "${pats[@]}"; do
    name=$(basename "$p" .patch)
    git apply "$p" || { echo "$name: does not apply"; continue; }
    current=$p
    if ! cargo test -q -p ringkit-log --lib --test log --test crashcheck --no-run 2>/dev/null; then
        echo "$name: does not compile"
    else
        # The unit tests and the log's own tests first (seconds). Passing
        # tests panic on purpose, so a failure is what cargo lists as failed.
        unit=$(mktemp)
        if ! cargo test -q -p ringkit-log --lib --test log >"$unit" 2>&1; then
            printf '%s: killed by the unit tests:' "$name"
            sed -n '/^failures:$/,/^test result/p' "$unit" |
                grep '^    [a-z]' | tr -d ' ' | tr '\n' ' '
            echo
        fi
        rm -f "$unit"
        log=$(mktemp)
        start=$(date +%s.%N)
        timeout 900 cargo test -q -p ringkit-log --test crashcheck -- --nocapture >"$log" 2>&1 &
        pid=$!
        first=""
        while kill -0 "$pid" 2>/dev/null; do
            if [ -z "$first" ] && grep -q "panicked at" "$log"; then
                first=$(echo "$(date +%s.%N) - $start" | bc)
            fi
            sleep 0.5
        done
        wait "$pid"
        rc=$?
        total=$(echo "$(date +%s.%N) - $start" | bc)
        if [ "$rc" -ne 0 ]; then
            failed=$(grep -o "[0-9]* failed;" "$log" | tail -1 | cut -d' ' -f1)
            printf '%s: killed by the explorer, first failure at %.1f s (%s tests failed, run %.0f s)\n' \
                "$name" "${first:-$total}" "$failed" "$total"
            grep -m1 -A2 "panicked at" "$log" | sed 's/^/    /' | cut -c1-300
        else
            printf '%s: SURVIVED the explorer (run %.0f s)\n' "$name" "$total"
        fi
        [ -n "${KEEP:-}" ] && cp "$log" "$KEEP/$name.log"
        rm -f "$log"
    fi
    git apply -R "$p"
    current=""
done
