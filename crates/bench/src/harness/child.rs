//! Child processes: the one place that prepares, and stops, every process
//! a study or the torture starts (contender servers, the torture's server
//! under test, PostgreSQL, Redis). Each is pinned before `exec` if asked,
//! stopped by its own pid (never by name), and reaped.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Before `exec`, pin the child to `cpu` and, if `raise_nofile`, raise its
/// soft `RLIMIT_NOFILE` to the hard limit (for peers that do not). A pin
/// that fails (a CPU outside the cgroup's set) fails the start when
/// `strict_pin` (a measured contender), else the child runs unpinned (a
/// service such as PostgreSQL).
pub fn prepare(cmd: &mut Command, cpu: Option<usize>, raise_nofile: bool, strict_pin: bool) {
    // SAFETY: the closure runs in the forked child before exec and only
    // makes async-signal-safe syscalls (sched_setaffinity, get/setrlimit)
    // on stack data.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(cpu) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
                    && strict_pin
                {
                    return Err(io::Error::last_os_error());
                }
            }
            if raise_nofile {
                let mut r = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
                    r.rlim_cur = r.rlim_max;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &r);
                }
            }
            Ok(())
        });
    }
}

/// Set the child's soft and hard `RLIMIT_NOFILE` to `n` before `exec`.
pub fn limit_nofile(cmd: &mut Command, n: u64) {
    // SAFETY: the closure runs in the forked child before exec and only
    // calls setrlimit (async-signal-safe) on stack data.
    unsafe {
        cmd.pre_exec(move || {
            let r = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Stop `child` by its pid: send `signal`, wait up to `grace` for it to
/// exit, then `SIGKILL`; it is reaped either way.
pub fn stop(child: &mut Child, signal: i32, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // SAFETY: signalling our own child by its pid; it has not been reaped.
    unsafe { libc::kill(child.id() as i32, signal) };
    let start = Instant::now();
    while start.elapsed() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Wait until `addr` accepts connections (up to `limit`).
pub fn wait_for_port(addr: SocketAddr, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A free loopback address (bound, then released: the child binds it next),
/// never one this process handed out before. Tests run side by side: two
/// that drew the same port would start two servers on it, and ringkit's
/// listeners use `SO_REUSEPORT`, so the kernel would share one test's
/// connections with the other's server (and break them when it stops).
pub fn free_addr() -> io::Result<SocketAddr> {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    for _ in 0..64 {
        let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&addr.port()) {
            given.push(addr.port());
            return Ok(addr);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        "no loopback port not handed out before in 64 tries",
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_addresses_are_never_handed_out_twice() {
        let mut seen: Vec<u16> = (0..500)
            .map(|_| super::free_addr().unwrap().port())
            .collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 500);
    }
}
