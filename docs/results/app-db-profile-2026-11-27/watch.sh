#!/bin/bash
# Attach perf to every axum_app server process that appears (not the seeder).
seen=" "
while true; do
  for pid in $(pgrep -f "axum_app --addr"); do
    case "$seen" in *" $pid "*) continue;; esac
    seen="$seen$pid "
    cmd=$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null)
    echo "$(date +%T.%N) $pid $cmd" >> /tmp/prof/pids.log
    perf stat -e raw_syscalls:sys_enter,task-clock,context-switches -p $pid -o /tmp/prof/$pid.stat >/dev/null 2>&1 &
    perf record -F 1999 -g -p $pid -o /tmp/prof/$pid.data >/dev/null 2>&1 &
  done
  sleep 0.2
done
