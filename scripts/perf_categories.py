#!/usr/bin/env python3
"""Group a `perf record` profile of the server CPU into where the time goes.

Usage: perf_categories.py PERF_DATA CPU_US_PER_REQ PID [NAME]

Reads `perf report` (flat, by symbol) for the server process PID (softirq
work done while it runs is charged to it, as /proc charges its CPU time) and
sorts every sample into one bucket by its symbol name: the kernel's TCP/IP,
socket and memory work (the same for every server), io_uring's own
bookkeeping, the syscall and epoll layer, the scheduler, user space, and
other kernel work. Prints each
bucket's share and, given the server's CPU microseconds per request (from
`ringkit compare` or the script that calls this), its microseconds per request.
Symbol-name buckets are an approximation: a symbol is charged to the bucket
of its name, not of its caller.
"""
import re
import subprocess
import sys

BUCKETS = [
    ("io_uring", r"^(__)?io_|io_uring|^llist_|^tctx_|task_work"),
    ("syscall+epoll", r"^(__)?(ep_|do_epoll|epoll|__x64_sys|x64_sys_call|__sys_|do_syscall|entry_SYSCALL|syscall_|fdget|__fget|fget|fput|sockfd_lookup|sock_poll|__fdget)"),
    ("sched", r"schedule|task_switch|_task_fair|_entity|select_task_rq|try_to_wake_up|ttwu|psi_|update_curr|update_load|pick_next|enqueue_|dequeue_|hrtimer|finish_task|switch_|cpuacct|resched"),
    ("net+mm", r"tcp|ip_|ipv4|inet|skb|backlog|_deliver|eth_type|(^|_)sk_|sock|net|napi|dev_|loopback|bbr|copy|check_object|kfree|kmem|slab|alloc|page_frag|raw_spin|rcu|_bh|softirq|read_tsc|ktime|dst|csum|nf_|mod_timer|fib|memcg|refill|virt_addr"),
]


def buckets(path, pid):
    out = subprocess.run(
        ["perf", "report", "-i", path, "--pid", pid, "--no-children", "--sort", "comm,dso,sym",
         "-q", "-g", "none", "--percent-limit", "0"],
        capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+(\S+)\s+\[(.)\]\s+(\S+)", line)
        if not m:
            continue
        pct, comm, kind, sym = float(m[1]), m[2], m[4], m[5]
        if comm == "swapper":
            continue
        if kind == ".":
            k = "user"
        else:
            k = next((name for name, rx in BUCKETS if re.search(rx, sym)), "other kernel")
        got[k] = got.get(k, 0.0) + pct
    return got


def main():
    path, per_req, pid = sys.argv[1], float(sys.argv[2]), sys.argv[3]
    name = sys.argv[4] if len(sys.argv) > 4 else path
    got = buckets(path, pid)
    busy = sum(got.values()) or 1.0
    order = ["net+mm", "io_uring", "syscall+epoll", "sched", "user", "other kernel"]
    cells = [f"{k} {100 * got.get(k, 0) / busy:4.1f}% {per_req * got.get(k, 0) / busy:5.2f}us" for k in order]
    print(f"{name:<14} {per_req:5.2f} us/req = " + " | ".join(cells))


if __name__ == "__main__":
    main()
