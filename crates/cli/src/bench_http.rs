//! `ringkit bench http URL`: the verifying HTTP load generator, wrk-like output.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Args;
use ringkit::Backend;
use ringkit_bench::http::load::{self, HttpLoadConfig, HttpLoadResult, Target};

/// `ringkit bench http URL`: a verifying HTTP load generator.
#[derive(Args, Debug)]
pub struct BenchHttpArgs {
    /// http://HOST:PORT/PATH (loopback or any reachable address; no TLS).
    url: String,
    /// Connections (keep-alive), or requests in flight (--close).
    #[arg(short = 'c', long = "connections", default_value_t = 100)]
    conns: usize,
    /// Measured seconds (after all connections are up).
    #[arg(short = 't', long = "duration", default_value_t = 10.0)]
    secs: f64,
    /// A new connection per request, with `Connection: close`.
    #[arg(long)]
    close: bool,
    /// Keep-alive: write N requests at once on each connection, then read
    /// and check their N responses in order (HTTP/1.1 pipelining).
    #[arg(long, default_value_t = 1, conflicts_with = "close")]
    pipeline: usize,
    /// Open loop: send this many requests per second in all, each at its
    /// scheduled moment whether or not earlier responses are back
    /// (pipelined on each keep-alive connection, as many in flight as the
    /// schedule needs), and count latency from that moment (free of
    /// coordinated omission). Requests unanswered or unsent at the window's
    /// end count with their wait up to the end. Not with --close or
    /// --pipeline. Default: closed loop
    #[arg(long)]
    rate: Option<f64>,
    /// Status every response must have.
    #[arg(long, default_value_t = 200)]
    status: u16,
    /// Body length every response must have (default: the first response's).
    #[arg(long, conflicts_with = "paths")]
    body_len: Option<usize>,
    /// Ask for paths picked at random from FILE instead of URL's path: one
    /// `PATH BODY_LEN` per line; each response must have its path's body
    /// length (`ringkit compare static` writes such a list as mix.txt).
    #[arg(long, value_name = "FILE")]
    paths: Option<std::path::PathBuf>,
    /// Seed of the random picks (--paths).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Pin the generator to this CPU.
    #[arg(long)]
    cpu: Option<usize>,
    /// Backend of the generator itself.
    #[arg(long, default_value = "auto")]
    backend: Backend,
    /// Print the result as JSON too.
    #[arg(long)]
    json: bool,
}

/// Split `http://host:port/path` into (host header, address, path).
fn parse_url(url: &str) -> std::io::Result<(String, SocketAddr, String)> {
    let bad = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("bad URL {url:?}: {why}"),
        )
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("only http:// is supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        return Err(bad("no host"));
    }
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| {
        !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !authority.ends_with(']')
    }) {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| bad("host does not resolve"))?;
    Ok((authority.to_string(), addr, path.to_string()))
}

fn fmt_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{us:.2}us")
    }
}

fn fmt_bytes(b: f64) -> String {
    let units = ["B", "KB", "MB", "GB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.2}{}", units[i])
}

/// Run `ringkit bench http`.
pub fn bench_http(a: BenchHttpArgs) -> std::io::Result<()> {
    let (host, addr, path) = parse_url(&a.url)?;
    let mix = match &a.paths {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|e| {
                std::io::Error::new(e.kind(), format!("--paths {}: {e}", file.display()))
            })?;
            let list = Target::parse_list(&text).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("--paths {}: {e}", file.display()),
                )
            })?;
            Some(list.into())
        }
        None => None,
    };
    if let Some(cpu) = a.cpu {
        ringkit::pin_to_cpu(cpu)?;
    }
    let what = match &mix {
        Some(m) => {
            let m: &std::sync::Arc<[Target]> = m;
            format!("{} paths from {} at random", m.len(), a.url)
        }
        None => a.url.clone(),
    };
    let cfg = HttpLoadConfig {
        addr,
        host,
        path,
        conns: a.conns.max(1),
        duration: Duration::from_secs_f64(a.secs.max(0.01)),
        close: a.close,
        expect_status: a.status,
        expect_body_len: a.body_len,
        expect_crc32c: None,
        backend: a.backend,
        mix,
        seed: a.seed,
        pipeline: a.pipeline.max(1),
        rate: a.rate,
    };
    println!(
        "Running {}s test @ {}\n  1 thread and {} connections ({}){}",
        a.secs,
        what,
        cfg.conns,
        if a.close {
            "Connection: close, a new connection per request".to_string()
        } else if cfg.pipeline > 1 {
            format!(
                "keep-alive, {} pipelined requests in flight each",
                cfg.pipeline
            )
        } else if let Some(r) = cfg.rate {
            format!("keep-alive, open loop at {r} req/s in all, pipelined as the schedule needs")
        } else {
            "keep-alive, one request in flight each".to_string()
        },
        a.cpu
            .map(|c| format!(", pinned to CPU {c}"))
            .unwrap_or_default()
    );
    let r = load::run_load(&cfg, &mut |_| {})?;
    print_result(&r, cfg.mix.is_some());
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    }
    if !r.ok() {
        return Err(std::io::Error::other(format!(
            "run FAILED: {} errors{}",
            r.errors(),
            r.first_error
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        )));
    }
    Ok(())
}

fn print_result(r: &HttpLoadResult, mix: bool) {
    println!(
        "  Latency   p50 {}  p90 {}  p99 {}  p99.9 {}  mean {}  max {}",
        fmt_us(r.p50_us),
        fmt_us(r.p90_us),
        fmt_us(r.p99_us),
        fmt_us(r.p999_us),
        fmt_us(r.mean_us),
        fmt_us(r.max_us)
    );
    if r.most_in_flight > 0 {
        // An open loop: the schedule fixes each connection's share.
        println!(
            "  Open loop {} unanswered and {} unsent at the window's end (in the latencies up to the end); at most {} in flight on one connection",
            r.unanswered, r.unsent, r.most_in_flight
        );
    } else {
        println!(
            "  Fairness  responses per connection min {} / median {} / max {}, Jain's index {:.3}",
            r.conn_min, r.conn_median, r.conn_max, r.jain
        );
    }
    println!(
        "  {} requests in {:.2}s, {} read (window after {:.3}s of connecting)",
        r.responses,
        r.secs,
        fmt_bytes(r.bytes as f64),
        r.connect_secs
    );
    println!(
        "  Checked: status, body length {}; generator on {}",
        match r.expected_body_len {
            _ if mix => "each path's own".to_string(),
            Some(b) => format!("{b} bytes"),
            None => "-".to_string(),
        },
        r.backend
    );
    if r.connect_errors + r.read_errors + r.write_errors + r.timeouts > 0 {
        println!(
            "  Socket errors: connect {}, read {}, write {}, timeout {}",
            r.connect_errors, r.read_errors, r.write_errors, r.timeouts
        );
    }
    if r.bad_status > 0 {
        println!("  Bad status responses: {}", r.bad_status);
    }
    if r.bad_body > 0 || r.malformed > 0 {
        println!(
            "  Wrong body length: {}, malformed: {}",
            r.bad_body, r.malformed
        );
    }
    println!("Requests/sec: {:>10.2}", r.rps());
    println!(
        "Transfer/sec: {:>10}",
        fmt_bytes(if r.secs > 0.0 {
            r.bytes as f64 / r.secs
        } else {
            0.0
        })
    );
    println!("Errors:       {:>10}", r.errors());
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls() {
        let (h, a, p) = parse_url("http://127.0.0.1:8080/x?y").unwrap();
        assert_eq!(
            (h.as_str(), a.port(), p.as_str()),
            ("127.0.0.1:8080", 8080, "/x?y")
        );
        let (_, a, p) = parse_url("http://127.0.0.1").unwrap();
        assert_eq!((a.port(), p.as_str()), (80, "/"));
        let (_, a, _) = parse_url("http://[::1]:9/").unwrap();
        assert_eq!(a.port(), 9);
        assert!(parse_url("https://x/").is_err());
    }
}
