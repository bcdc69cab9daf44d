//! nginx as the HTTP and static-file studies' peer: where it lives, its
//! configuration for a sample, its version.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's nginx lives.
pub const NGINX: &str = "/usr/sbin/nginx";

/// nginx's `open_file_cache_valid` (the docs' example), in seconds. The
/// ringkit servers get the same (`--open-file-cache-valid`), so both caches
/// look a path up again equally often: ringkit's default is 1 s, and at
/// 10 000 files and ~20 000 requests a second that made about half of its
/// hits a fresh lookup where nginx's were one in sixty.
pub const CACHE_VALID_SECS: u64 = 30;

/// What nginx serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Site {
    /// `return 200;` (the HTTP study).
    Return200,
    /// The files under `root`, in nginx's best documented configuration for
    /// static files: `sendfile on`, `tcp_nopush on`, and `open_file_cache`
    /// large enough for `cache_max` files (the docs' example otherwise:
    /// `inactive=20s`, `open_file_cache_valid 30s`, errors cached).
    Files {
        /// Document root.
        root: PathBuf,
        /// `open_file_cache max=`.
        cache_max: usize,
        /// Serve TLS 1.3 with this PEM certificate and key.
        tls: Option<(PathBuf, PathBuf)>,
    },
}

impl Site {
    fn location(&self) -> String {
        match self {
            // No Content-Type on an empty 200 (as ringkit and hyper send
            // none); what nginx still adds is in every report's sizes.
            Site::Return200 => {
                "location / {\n            default_type \"\";\n            return 200;\n        }"
                    .into()
            }
            Site::Files {
                root,
                cache_max,
                tls,
            } => format!(
                "{}root {};
        sendfile on;
        tcp_nopush on;
        open_file_cache max={cache_max} inactive=20s;
        open_file_cache_valid {CACHE_VALID_SECS}s;
        open_file_cache_min_uses 1;
        open_file_cache_errors on;
        location / {{
        }}",
                tls.as_ref().map_or(String::new(), |(cert, key)| format!(
                    "ssl_certificate {};
        ssl_certificate_key {};
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384;
        ",
                    cert.display(),
                    key.display()
                )),
                root.display()
            ),
        }
    }
}

/// nginx's configuration for one sample: one worker that is the process we
/// start (no master, no daemon), epoll, serving `site`, everything in `dir`.
pub fn nginx_conf(dir: &Path, port: &str, site: &Site) -> String {
    let d = dir.display();
    let location = site.location();
    let ssl = match site {
        Site::Files { tls: Some(_), .. } => " ssl",
        _ => "",
    };
    format!(
        "worker_processes 1;
daemon off;
master_process off;
worker_rlimit_nofile 20000;
error_log {d}/error.log;
pid {d}/nginx.pid;
events {{
    worker_connections 16384;
    use epoll;
}}
http {{
    access_log off;
    server_tokens off;
    keepalive_requests 100000000;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port}{ssl} reuseport;
        {location}
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
        let c = nginx_conf(Path::new("/tmp/x"), "8080", &Site::Return200);
        for want in [
            "worker_processes 1;",
            "daemon off;",
            "master_process off;",
            "error_log /tmp/x/error.log;",
            "pid /tmp/x/nginx.pid;",
            "worker_connections 16384;",
            "use epoll;",
            "access_log off;",
            "keepalive_requests 100000000;",
            "listen 127.0.0.1:8080 reuseport;",
            "return 200;",
            "worker_rlimit_nofile 20000;",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
        let site = Site::Files {
            root: "/srv/www".into(),
            cache_max: 10_000,
            tls: None,
        };
        let c = nginx_conf(Path::new("/tmp/x"), "8080", &site);
        for want in [
            "root /srv/www;",
            "sendfile on;",
            "tcp_nopush on;",
            "open_file_cache max=10000 inactive=20s;",
            "open_file_cache_valid 30s;",
            "location / {",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
        assert!(!c.contains("return 200"));
        let site = Site::Files {
            root: "/srv/www".into(),
            cache_max: 10,
            tls: Some(("/k/cert.pem".into(), "/k/key.pem".into())),
        };
        let c = nginx_conf(Path::new("/tmp/x"), "8443", &site);
        for want in [
            "listen 127.0.0.1:8443 ssl reuseport;",
            "ssl_certificate /k/cert.pem;",
            "ssl_certificate_key /k/key.pem;",
            "ssl_protocols TLSv1.3;",
            "sendfile on;",
        ] {
            assert!(c.contains(want), "missing {want:?} in\n{c}");
        }
    }
}
