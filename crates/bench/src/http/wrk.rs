//! wrk as the load generator: run it pinned, parse its report.
//!
//! What wrk checks: every response is framed by its HTTP parser (a malformed
//! response or a body cut short by the connection closing counts as a read
//! error); statuses above 399 count as "Non-2xx or 3xx responses"; requests
//! slower than `--timeout` (2 s) count as timeouts. It does not compare body
//! lengths with an expected value (that needs a Lua `response()` callback,
//! which slows wrk down); the built-in generator does.

use std::io;
use std::process::{Command, Stdio};

use serde::Serialize;

/// Where wrk lives (Debian package).
pub const WRK: &str = "/usr/bin/wrk";

/// What wrk reported.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct WrkResult {
    /// Requests completed over the whole run.
    pub requests: u64,
    /// The run's duration as wrk printed it, seconds.
    pub secs: f64,
    /// `Requests/sec`.
    pub rps: f64,
    /// Latency p50, µs (`--latency`).
    pub p50_us: f64,
    /// p75.
    pub p75_us: f64,
    /// p90.
    pub p90_us: f64,
    /// p99.
    pub p99_us: f64,
    /// Mean latency, µs.
    pub mean_us: f64,
    /// Max latency, µs.
    pub max_us: f64,
    /// Socket errors: connect.
    pub connect_errors: u64,
    /// Socket errors: read.
    pub read_errors: u64,
    /// Socket errors: write.
    pub write_errors: u64,
    /// Socket errors: timeout.
    pub timeouts: u64,
    /// `Non-2xx or 3xx responses`.
    pub non_2xx_3xx: u64,
}

impl WrkResult {
    /// All errors wrk counted.
    pub fn errors(&self) -> u64 {
        self.connect_errors
            + self.read_errors
            + self.write_errors
            + self.timeouts
            + self.non_2xx_3xx
    }
    /// Any error, or no request, makes the run failed.
    pub fn ok(&self) -> bool {
        self.errors() == 0 && self.requests > 0
    }
}

/// wrk's time (`812.00us`, `1.23ms`, `2.00s`, `1.50m`, `1.00h`) in µs.
fn time_us(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mul = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "m" => 60e6,
        "h" => 3600e6,
        _ => return None,
    };
    Some(v * mul)
}

/// Parse wrk's report (`--latency` output).
pub fn parse(text: &str) -> Result<WrkResult, String> {
    let mut r = WrkResult::default();
    let mut have_requests = false;
    let mut have_rps = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["Latency", avg, _stdev, max, ..] => {
                r.mean_us = time_us(avg).ok_or_else(|| format!("bad latency line: {line}"))?;
                r.max_us = time_us(max).unwrap_or(0.0);
            }
            [pct, t] if pct.ends_with('%') => {
                let v = time_us(t).ok_or_else(|| format!("bad percentile line: {line}"))?;
                match *pct {
                    "50%" => r.p50_us = v,
                    "75%" => r.p75_us = v,
                    "90%" => r.p90_us = v,
                    "99%" => r.p99_us = v,
                    _ => {}
                }
            }
            [n, "requests", "in", secs, ..] => {
                r.requests = n
                    .parse()
                    .map_err(|_| format!("bad requests line: {line}"))?;
                r.secs = time_us(secs.trim_end_matches(',')).unwrap_or(0.0) / 1e6;
                have_requests = true;
            }
            ["Socket", "errors:", rest @ ..] => {
                // connect N, read N, write N, timeout N
                for pair in rest.join(" ").split(',') {
                    let kv: Vec<&str> = pair.split_whitespace().collect();
                    if let [k, v] = kv.as_slice() {
                        let v: u64 = v.parse().map_err(|_| format!("bad errors line: {line}"))?;
                        match *k {
                            "connect" => r.connect_errors = v,
                            "read" => r.read_errors = v,
                            "write" => r.write_errors = v,
                            "timeout" => r.timeouts = v,
                            _ => {}
                        }
                    }
                }
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                r.non_2xx_3xx = n.parse().map_err(|_| format!("bad line: {line}"))?;
            }
            ["Requests/sec:", v] => {
                r.rps = v.parse().map_err(|_| format!("bad line: {line}"))?;
                have_rps = true;
            }
            _ => {}
        }
    }
    if !have_requests || !have_rps {
        return Err("no `requests in` / `Requests/sec:` line in wrk's output".into());
    }
    Ok(r)
}

/// `wrk --version`'s first line.
pub fn version() -> Option<String> {
    let o = Command::new(WRK).arg("--version").output().ok()?;
    let s = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    s.lines().next().map(|l| l.trim().to_string())
}

/// The wrk command line for one run (1 thread, `--latency`).
pub fn command(url: &str, conns: usize, secs: u64, close: bool) -> Vec<String> {
    let mut v: Vec<String> = vec![
        WRK.into(),
        "-t1".into(),
        format!("-c{conns}"),
        format!("-d{secs}s"),
        "--latency".into(),
    ];
    if close {
        v.extend(["-H".into(), "Connection: close".into()]);
    }
    v.push(url.into());
    v
}

/// Run `cmd` (from [`command`]) pinned to `cpu`; its report and output.
pub fn run(cmd: &[String], cpu: usize) -> io::Result<(WrkResult, String)> {
    let mut c = Command::new(&cmd[0]);
    c.args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    crate::harness::child::prepare(&mut c, Some(cpu), false, true);
    let out = c.output()?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "wrk failed ({}): {text}",
            out.status
        )));
    }
    let r = parse(&text).map_err(io::Error::other)?;
    Ok((r, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLEAN: &str = "Running 1s test @ http://127.0.0.1:18082/
  1 threads and 100 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.88ms    1.19ms   8.28ms   61.64%
    Req/Sec    19.27k   658.64    19.96k    80.00%
  Latency Distribution
     50%    1.63ms
     75%    2.74ms
     90%    3.47ms
     99%    5.47ms
  19254 requests in 1.01s, 1.73MB read
Requests/sec:  19111.98
Transfer/sec:      1.71MB
";

    #[test]
    fn clean_run() {
        let r = parse(CLEAN).unwrap();
        assert_eq!(r.requests, 19254);
        assert!((r.secs - 1.01).abs() < 1e-9);
        assert!((r.rps - 19111.98).abs() < 1e-9);
        assert!((r.p50_us - 1630.0).abs() < 1e-6);
        assert!((r.p99_us - 5470.0).abs() < 1e-6);
        assert!((r.mean_us - 1880.0).abs() < 1e-6);
        assert!((r.max_us - 8280.0).abs() < 1e-6);
        assert_eq!(r.errors(), 0);
        assert!(r.ok());
    }

    #[test]
    fn errors_and_units() {
        let t = "  10 threads and 1000 connections
    Latency   812.00us    1.00s     2.00m   99.00%
     50%  500.00us
     99%    1.50s
  1234567 requests in 10.00s, 100.00MB read
  Socket errors: connect 3, read 14, write 0, timeout 7
  Non-2xx or 3xx responses: 42
Requests/sec: 123456.70
";
        let r = parse(t).unwrap();
        assert_eq!(r.requests, 1_234_567);
        assert_eq!(
            (
                r.connect_errors,
                r.read_errors,
                r.write_errors,
                r.timeouts,
                r.non_2xx_3xx
            ),
            (3, 14, 0, 7, 42)
        );
        assert!((r.mean_us - 812.0).abs() < 1e-9);
        assert!((r.max_us - 120e6).abs() < 1e-3);
        assert!((r.p99_us - 1.5e6).abs() < 1e-3);
        assert_eq!(r.errors(), 66);
        assert!(!r.ok());
    }

    #[test]
    fn not_a_report() {
        assert!(parse("unable to connect to 127.0.0.1:1 Connection refused\n").is_err());
        assert!(time_us("12xs").is_none());
    }

    #[test]
    fn command_line() {
        assert_eq!(
            command("http://127.0.0.1:1/", 100, 10, true).join(" "),
            "/usr/bin/wrk -t1 -c100 -d10s --latency -H Connection: close http://127.0.0.1:1/"
        );
    }
}
