//! nginx as the HTTP study's peer: where it lives, its configuration for a
//! sample, its version.

use std::path::Path;
use std::process::Command;

/// Where Debian's nginx lives.
pub const NGINX: &str = "/usr/sbin/nginx";

/// nginx's configuration for one sample: one worker that is the process we
/// start (no master, no daemon), epoll, `return 200;`, everything in `dir`.
pub fn nginx_conf(dir: &Path, port: &str) -> String {
    let d = dir.display();
    format!(
        "worker_processes 1;
daemon off;
master_process off;
worker_rlimit_nofile 20000;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{
    worker_connections 4096;
    use epoll;
}}
http {{
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port} reuseport;
        location / {{
            return 200;
        }}
    }}
}}
"
    )
}

pub(crate) fn nginx_version() -> Option<String> {
    let o = Command::new(NGINX).arg("-v").output().ok()?;
    let s = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
    s.lines().next().map(|l| l.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_conf_has_the_essentials() {
        let c = nginx_conf(Path::new("/tmp/x"), "8080");
        for want in [
            "worker_processes 1;",
            "daemon off;",
            "master_process off;",
            "error_log /tmp/x/error.log;",
            "pid /tmp/x/nginx.pid;",
            "worker_connections 4096;",
            "use epoll;",
            "access_log off;",
            "keepalive_requests 100000000;",
            "listen 127.0.0.1:8080 reuseport;",
            "return 200;",
            "worker_rlimit_nofile 20000;",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
    }
}
