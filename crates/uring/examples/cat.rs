//! `cat` on the bare ring: READV through ringkit-uring, write to stdout.
//!
//! Each file is opened with std, sized with `metadata()` (only to pick the
//! buffer size: files in /proc report 0 and still have data), then read with
//! READV over a few iovecs, one SQE in flight at a time, until a read returns
//! 0 (EOF). A short read just moves the offset on and reads again. `-` is
//! stdin. Errors name the file; the exit status is 1 if any file failed.
//!
//! `cargo run -p ringkit-uring --example cat -- FILE...`

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::process::ExitCode;

use ringkit_uring::opcode::{self, Target};
use ringkit_uring::IoUring;

/// iovecs per READV.
const IOVECS: usize = 4;
/// Largest and smallest buffer behind one iovec.
const MAX_IOV_LEN: usize = 64 * 1024;
const MIN_IOV_LEN: usize = 4 * 1024;

fn usage() -> ExitCode {
    eprintln!("usage: cat FILE...");
    eprintln!("  Concatenate FILEs to stdout, reading with IORING_OP_READV on ringkit-uring.");
    eprintln!("  '-' reads stdin.");
    ExitCode::from(2)
}

/// Why copying one file stopped.
enum CatError {
    /// Reading (or opening) the input failed: report, go on with the next file.
    Input(io::Error),
    /// Writing stdout failed: report and stop.
    Output(io::Error),
    /// `io_uring_enter` itself failed: the READV may still be queued, so its
    /// buffers were leaked on purpose; report and stop.
    Ring(io::Error),
}

/// How one READV ended.
enum ReadvError {
    /// The CQE carried an error (`-errno`): the operation is over.
    Op(io::Error),
    /// Submitting or waiting failed: the SQE may still be in the kernel's hands.
    Ring(io::Error),
}

/// One READV of up to `IOVECS` buffers at `offset` (`u64::MAX`: the file
/// position). Returns the byte count (0 at EOF).
fn readv(
    ring: &mut IoUring,
    fd: RawFd,
    iov: &[libc::iovec],
    offset: u64,
) -> Result<usize, ReadvError> {
    let e = opcode::Readv::new(Target::Fd(fd), iov.as_ptr(), iov.len() as u32)
        .offset(offset)
        .build()
        .user_data(1);
    // SAFETY: `iov` and the buffers it points to stay valid and untouched until
    // the CQE is reaped below; if we return before that (an enter error), the
    // caller leaks them. One READV is in flight at a time, so the SQ has room.
    unsafe { ring.push(e.sqe()) }.map_err(|e| ReadvError::Ring(io::Error::other(e)))?;
    loop {
        match ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ReadvError::Ring(e)),
        }
        if let Some(cqe) = ring.next_cqe().map_err(ReadvError::Ring)? {
            debug_assert_eq!(cqe.user_data, 1);
            return cqe.result().map(|n| n as usize).map_err(ReadvError::Op);
        }
        // The SQE was submitted; the wait was cut short: wait again without resubmitting.
    }
}

/// Copy `fd` to `out` until EOF.
fn copy_fd(
    ring: &mut IoUring,
    fd: RawFd,
    size_hint: u64,
    seekable: bool,
    out: &mut impl Write,
) -> Result<(), CatError> {
    let iov_len = ((size_hint as usize).div_ceil(IOVECS))
        .next_power_of_two()
        .clamp(MIN_IOV_LEN, MAX_IOV_LEN);
    let mut buf = vec![0u8; iov_len * IOVECS];
    let iov: Vec<libc::iovec> = buf
        .chunks_mut(iov_len)
        .map(|c| libc::iovec {
            iov_base: c.as_mut_ptr().cast(),
            iov_len: c.len(),
        })
        .collect();
    // Regular files: explicit offsets (like preadv). Pipes, ttys: the file position.
    let mut offset: u64 = 0;
    loop {
        let off = if seekable { offset } else { u64::MAX };
        let n = match readv(ring, fd, &iov, off) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(ReadvError::Op(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(ReadvError::Op(e)) => return Err(CatError::Input(e)),
            Err(ReadvError::Ring(e)) => {
                // The kernel may still write into these buffers: never free them.
                std::mem::forget(buf);
                std::mem::forget(iov);
                return Err(CatError::Ring(e));
            }
        };
        offset += n as u64;
        // The kernel filled the iovecs in order; a short read fills a prefix.
        out.write_all(&buf[..n]).map_err(CatError::Output)?;
    }
}

fn main() -> ExitCode {
    let paths: Vec<String> = std::env::args().skip(1).collect();
    if paths.is_empty() || paths.iter().any(|p| p == "-h" || p == "--help") {
        return usage();
    }
    let mut ring = match IoUring::new(8) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cat: io_uring setup failed: {e}");
            eprintln!("  {}", ringkit_uring::explain_setup_error(&e));
            return ExitCode::FAILURE;
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut failed = false;
    for path in &paths {
        let file;
        let (fd, size, seekable) = if path == "-" {
            (libc::STDIN_FILENO, 0, false)
        } else {
            file = match File::open(path) {
                Ok(f) => f,
                Err(e) => {
                    eprintln!("cat: {path}: {e}");
                    failed = true;
                    continue;
                }
            };
            let meta = match file.metadata() {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("cat: {path}: stat: {e}");
                    failed = true;
                    continue;
                }
            };
            if meta.is_dir() {
                eprintln!("cat: {path}: Is a directory");
                failed = true;
                continue;
            }
            (file.as_raw_fd(), meta.len(), meta.is_file())
        };
        match copy_fd(&mut ring, fd, size, seekable, &mut out) {
            Ok(()) => {}
            Err(CatError::Input(e)) => {
                eprintln!("cat: {path}: read: {e}");
                failed = true;
            }
            Err(CatError::Output(e)) => {
                eprintln!("cat: write error: {e}");
                return ExitCode::FAILURE;
            }
            Err(CatError::Ring(e)) => {
                eprintln!("cat: {path}: io_uring_enter: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if let Err(e) = out.flush() {
        eprintln!("cat: write error: {e}");
        return ExitCode::FAILURE;
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
