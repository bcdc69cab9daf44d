//! The `ringkit` command reads `RINGKIT_BACKEND` as the fallback of
//! `--backend` (the libraries themselves read no environment), and the
//! flag wins over the variable.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// Start `ringkit echo` with `args` and `env`; its first stderr line
/// (the listening line), then SIGTERM and a clean exit.
fn first_line(args: &[&str], env: Option<&str>) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringkit"));
    cmd.args(["echo", "--addr", "127.0.0.1:0"])
        .args(args)
        .env_remove("RINGKIT_BACKEND")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(v) = env {
        cmd.env("RINGKIT_BACKEND", v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    err.read_line(&mut line).unwrap();
    // SAFETY: signalling our own, not yet reaped, child by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // Read on, so the server's last lines do not meet a closed pipe.
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    let st = child.wait().unwrap();
    assert!(st.success(), "{st}: {line}");
    line
}

#[test]
fn the_backend_variable_is_the_flags_fallback() {
    let line = first_line(&[], Some("epoll"));
    assert!(
        line.contains("listening on") && line.contains("epoll"),
        "{line}"
    );
    let line = first_line(&["--backend", "epoll"], Some("bogus"));
    assert!(line.contains("epoll"), "the flag must win: {line}");
    let out = Command::new(env!("CARGO_BIN_EXE_ringkit"))
        .args(["echo", "--addr", "127.0.0.1:0"])
        .env("RINGKIT_BACKEND", "bogus")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bogus"),
        "a bad value is named"
    );
}
