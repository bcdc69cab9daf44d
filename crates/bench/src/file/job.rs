//! The job grammar (`randread,bs=4k,qd=32,direct=1,batch=1`) and the
//! engine names (`uring-fixed-sqpoll`, `rt-epoll`, `fio-libaio`, ...).

use ringkit::Backend;
use serde::Serialize;

use super::fio::FioEngine;

/// Direction and pattern of a job (fio's `--rw` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Rw {
    /// Sequential read.
    Read,
    /// Sequential write.
    Write,
    /// Random read.
    RandRead,
    /// Random write.
    RandWrite,
}

impl Rw {
    /// fio's name.
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::RandRead => "randread",
            Rw::RandWrite => "randwrite",
        }
    }
    /// Writes?
    pub fn is_write(self) -> bool {
        matches!(self, Rw::Write | Rw::RandWrite)
    }
    /// Random offsets?
    pub fn is_random(self) -> bool {
        matches!(self, Rw::RandRead | Rw::RandWrite)
    }
}

/// One job: what to do, not how long or on which file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Job {
    /// Direction and pattern.
    pub rw: Rw,
    /// Block size, bytes.
    pub bs: u32,
    /// Queue depth (operations in flight).
    pub qd: u32,
    /// `O_DIRECT` (else buffered).
    pub direct: bool,
    /// Submit once this many operations are queued (fio's
    /// `iodepth_batch_submit`): 1, the default as in fio, submits each
    /// operation the moment it is queued; `qd` submits in batches, with one
    /// `io_uring_enter` per reap. Batching costs fewer syscalls but on some
    /// devices more latency (a plugged batch reaches a virtio disk in one
    /// kick): the study shows both.
    pub batch: u32,
}

/// A size with an optional binary suffix: `4096`, `4k`, `256m`, `1g`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t
        .strip_suffix("ib")
        .or_else(|| t.strip_suffix('b'))
        .unwrap_or(&t);
    let (num, mul) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("bad size {s:?} (e.g. 4096, 4k, 256m, 1g)"))
}

impl Job {
    /// Parse `RW[,bs=SIZE][,qd=N][,direct=0|1][,batch=N]`, e.g.
    /// `randread,bs=4k,qd=32`. Defaults: bs 4k, qd 32, direct 1, batch 1.
    /// `iodepth=` is accepted for `qd=`, `iodepth_batch_submit=` for
    /// `batch=`; a batch above `qd` is cut to `qd`.
    pub fn parse(s: &str) -> Result<Job, String> {
        let mut parts = s.split(',').map(str::trim);
        let rw = match parts.next().unwrap_or("") {
            "read" => Rw::Read,
            "write" => Rw::Write,
            "randread" => Rw::RandRead,
            "randwrite" => Rw::RandWrite,
            other => {
                return Err(format!(
                    "job {s:?}: unknown direction {other:?} (read, write, randread, randwrite)"
                ))
            }
        };
        let mut job = Job {
            rw,
            bs: 4096,
            qd: 32,
            direct: true,
            batch: 1,
        };
        for p in parts.filter(|p| !p.is_empty()) {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("job {s:?}: {p:?} is not key=value"))?;
            match k {
                "bs" => {
                    let bs = parse_size(v)?;
                    job.bs = u32::try_from(bs)
                        .ok()
                        .filter(|b| b % 512 == 0)
                        .ok_or_else(|| {
                            format!("job {s:?}: bs must be a multiple of 512 below 4 GiB")
                        })?;
                }
                "qd" | "iodepth" => {
                    job.qd = v
                        .parse::<u32>()
                        .ok()
                        .filter(|q| (1..=4096).contains(q))
                        .ok_or_else(|| format!("job {s:?}: qd must be 1..=4096"))?;
                }
                "direct" => {
                    job.direct = match v {
                        "1" | "true" | "yes" => true,
                        "0" | "false" | "no" => false,
                        _ => return Err(format!("job {s:?}: direct=0 or 1")),
                    }
                }
                "batch" | "iodepth_batch_submit" => {
                    job.batch = v
                        .parse::<u32>()
                        .ok()
                        .filter(|b| (1..=4096).contains(b))
                        .ok_or_else(|| format!("job {s:?}: batch must be 1..=4096"))?;
                }
                _ => {
                    return Err(format!(
                        "job {s:?}: unknown key {k:?} (bs, qd, direct, batch)"
                    ))
                }
            }
        }
        job.batch = job.batch.min(job.qd);
        Ok(job)
    }

    /// `randread 4k qd32 direct`.
    pub fn label(&self) -> String {
        let bs = if self.bs % 1024 == 0 {
            format!("{}k", self.bs / 1024)
        } else {
            self.bs.to_string()
        };
        let batch = if self.batch > 1 {
            format!(" batch{}", self.batch)
        } else {
            String::new()
        };
        format!(
            "{} {bs} qd{} {}{batch}",
            self.rw.name(),
            self.qd,
            if self.direct { "direct" } else { "buffered" }
        )
    }
}

/// How the I/O is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Engine {
    /// Directly on `ringkit-uring`.
    Uring {
        /// Registered buffer + registered file.
        fixed: bool,
        /// SQPOLL on another CPU.
        sqpoll: bool,
        /// IOPOLL.
        iopoll: bool,
        /// Reap by spinning on the completion ring (fio's design under
        /// SQPOLL) instead of sleeping in `io_uring_enter`.
        spin: bool,
    },
    /// ringkit tasks on this backend.
    Rt(#[serde(with = "crate::harness::backend_serde")] Backend),
    /// glommio tasks on its `DmaFile` (`O_DIRECT` only).
    Glommio,
    /// fio.
    Fio(FioEngine),
}

impl Engine {
    /// Short name (also what `--engines` takes).
    pub fn name(self) -> String {
        match self {
            Engine::Uring {
                fixed,
                sqpoll,
                iopoll,
                spin,
            } => {
                let mut s = "uring".to_string();
                for (on, n) in [
                    (fixed, "-fixed"),
                    (sqpoll, "-sqpoll"),
                    (iopoll, "-iopoll"),
                    (spin, "-spin"),
                ] {
                    if on {
                        s.push_str(n);
                    }
                }
                s
            }
            Engine::Rt(b) => format!("rt-{b}"),
            Engine::Glommio => "glommio".into(),
            Engine::Fio(f) => f.name(),
        }
    }

    pub(crate) fn sqpoll(self) -> bool {
        matches!(
            self,
            Engine::Uring { sqpoll: true, .. }
                | Engine::Fio(FioEngine::IoUring { sqpoll: true, .. })
        )
    }

    pub(crate) fn iopoll(self) -> bool {
        matches!(
            self,
            Engine::Uring { iopoll: true, .. }
                | Engine::Fio(FioEngine::IoUring { hipri: true, .. })
        )
    }

    /// The fio row this engine is judged against (same options).
    pub fn fio_peer(self) -> Option<Engine> {
        match self {
            Engine::Uring {
                fixed,
                sqpoll,
                iopoll,
                ..
            } => Some(Engine::Fio(FioEngine::IoUring {
                fixed,
                sqpoll,
                hipri: iopoll,
            })),
            Engine::Rt(Backend::Epoll) => Some(Engine::Fio(FioEngine::Psync)),
            Engine::Rt(_) | Engine::Glommio => Some(Engine::Fio(FioEngine::IoUring {
                fixed: false,
                sqpoll: false,
                hipri: false,
            })),
            Engine::Fio(_) => None,
        }
    }

    /// Queue depth this engine really keeps for a job of depth `qd`.
    pub fn effective_qd(self, qd: u32) -> u32 {
        match self {
            Engine::Rt(Backend::Epoll) | Engine::Fio(FioEngine::Psync) => 1,
            _ => qd,
        }
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        let flags = |rest: &str| -> Option<(bool, bool, bool, bool)> {
            let (mut f, mut sq, mut io, mut spin) = (false, false, false, false);
            for p in rest.split('-').filter(|p| !p.is_empty()) {
                match p {
                    "fixed" => f = true,
                    "sqpoll" => sq = true,
                    "iopoll" => io = true,
                    "spin" => spin = true,
                    _ => return None,
                }
            }
            Some((f, sq, io, spin))
        };
        let bad = || {
            format!(
                "unknown engine {s:?}: uring[-fixed][-sqpoll][-iopoll][-spin], rt-uring, rt-epoll, \
                 glommio, fio-io_uring[-fixed][-sqpoll][-iopoll], fio-libaio, fio-psync"
            )
        };
        match s {
            "rt-uring" => Ok(Engine::Rt(Backend::Uring)),
            "rt-epoll" => Ok(Engine::Rt(Backend::Epoll)),
            "glommio" => Ok(Engine::Glommio),
            "fio-libaio" => Ok(Engine::Fio(FioEngine::Libaio)),
            "fio-psync" => Ok(Engine::Fio(FioEngine::Psync)),
            _ => {
                if let Some(rest) = s.strip_prefix("fio-io_uring") {
                    let (fixed, sqpoll, hipri, spin) = flags(rest).ok_or_else(bad)?;
                    if spin {
                        return Err(format!(
                            "{s:?}: fio chooses how it reaps (-spin is ringkit's)"
                        ));
                    }
                    Ok(Engine::Fio(FioEngine::IoUring {
                        fixed,
                        sqpoll,
                        hipri,
                    }))
                } else if let Some(rest) = s.strip_prefix("uring") {
                    let (fixed, sqpoll, iopoll, spin) = flags(rest).ok_or_else(bad)?;
                    if spin && !sqpoll {
                        // Without SQPOLL completions are posted only by an
                        // enter (DEFER_TASKRUN): spinning is a syscall loop.
                        return Err(format!("{s:?}: -spin needs -sqpoll"));
                    }
                    Ok(Engine::Uring {
                        fixed,
                        sqpoll,
                        iopoll,
                        spin,
                    })
                } else {
                    Err(bad())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_jobs() {
        let j = Job::parse("randread,bs=4k,qd=32,direct=1").unwrap();
        assert_eq!(
            j,
            Job {
                rw: Rw::RandRead,
                bs: 4096,
                qd: 32,
                direct: true,
                batch: 1
            }
        );
        assert_eq!(j.label(), "randread 4k qd32 direct");
        let j = Job::parse("write, bs=128KiB, iodepth=1, direct=0").unwrap();
        assert_eq!(
            (j.rw, j.bs, j.qd, j.direct),
            (Rw::Write, 128 << 10, 1, false)
        );
        assert_eq!(Job::parse("read").unwrap().qd, 32);
        for bad in [
            "",
            "readwrite",
            "read,bs=100",
            "read,qd=0",
            "read,direct=2",
            "read,x=1",
            "read,bs",
        ] {
            assert!(Job::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn parses_batches() {
        let j = Job::parse("randread,qd=16,batch=8").unwrap();
        assert_eq!((j.qd, j.batch), (16, 8));
        assert_eq!(j.label(), "randread 4k qd16 direct batch8");
        // Cut to the queue depth; 1 is not shown.
        assert_eq!(Job::parse("read,qd=4,batch=64").unwrap().batch, 4);
        assert_eq!(
            Job::parse("read,iodepth_batch_submit=1").unwrap().label(),
            "read 4k qd32 direct"
        );
        assert!(Job::parse("read,batch=0").is_err());
        assert!(Job::parse("read,batch=x").is_err());
    }

    #[test]
    fn parses_sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("4x").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn engine_names_round_trip() {
        for n in [
            "uring",
            "uring-fixed",
            "uring-sqpoll",
            "uring-fixed-sqpoll",
            "uring-iopoll",
            "uring-sqpoll-spin",
            "rt-uring",
            "rt-epoll",
            "fio-io_uring",
            "fio-io_uring-fixed",
            "fio-io_uring-sqpoll",
            "fio-libaio",
            "fio-psync",
        ] {
            let e: Engine = n.parse().unwrap();
            assert_eq!(e.name(), n);
        }
        assert!("uring-fast".parse::<Engine>().is_err());
        assert!("fio-spdk".parse::<Engine>().is_err());
        // Spinning is ringkit's engine's, and only with SQPOLL.
        assert!("uring-spin".parse::<Engine>().is_err());
        assert!("fio-io_uring-sqpoll-spin".parse::<Engine>().is_err());
        let e: Engine = "uring-sqpoll-spin".parse().unwrap();
        assert_eq!(e.fio_peer().unwrap().name(), "fio-io_uring-sqpoll");
        let e: Engine = "uring-fixed".parse().unwrap();
        assert_eq!(e.fio_peer().unwrap().name(), "fio-io_uring-fixed");
        assert_eq!(Engine::Rt(Backend::Epoll).effective_qd(32), 1);
    }
}
