//! The file study's engines run on this thread: the raw ring
//! ([`crate::raw::file`]) and the runtime (`qd` ringkit tasks looping on
//! `read_at`/`write_at`); glommio's on an executor thread of its own,
//! pinned to the same CPU. The engines share one offset stream per job,
//! as fio does, so "sequential" is one sequential stream.

use std::cell::RefCell;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::rc::Rc;

use ringkit::buf::AlignedBuf;
use ringkit::Backend;

use super::job::Job;
use super::spec::FileConfig;
use super::testfile::open_std;
use crate::harness::latency::{now_ns, process_cpu};
use crate::harness::rng::Rng;
use crate::raw::file::{Measured, RingJob};

/// Offsets of a job: random blocks, or sequential and wrapping.
struct Offsets {
    rng: Rng,
    random: bool,
    next: u64,
    blocks: u64,
    bs: u64,
}

impl Offsets {
    fn new(job: &Job, size: u64, seed: u64) -> Offsets {
        let bs = u64::from(job.bs);
        Offsets {
            rng: Rng::new(seed),
            random: job.rw.is_random(),
            next: 0,
            blocks: (size / bs).max(1),
            bs,
        }
    }
    #[inline]
    fn next(&mut self) -> u64 {
        let b = if self.random {
            self.rng.range(0, self.blocks - 1)
        } else {
            let b = self.next;
            self.next = (self.next + 1) % self.blocks;
            b
        };
        b * self.bs
    }
}

/// The raw ringkit-uring engine.
pub(crate) fn run_uring(
    cfg: &FileConfig,
    path: &Path,
    job: &Job,
    (fixed, sqpoll, iopoll, spin): (bool, bool, bool, bool),
) -> io::Result<Measured> {
    let file = open_std(path, job)?;
    let mut offs = Offsets::new(job, cfg.size, now_ns());
    let ring_job = RingJob {
        write: job.rw.is_write(),
        bs: job.bs,
        qd: job.qd,
        batch: job.batch,
        fixed,
        sqpoll_cpu: sqpoll.then_some(cfg.sq_cpu as u32),
        iopoll,
        spin,
        secs: cfg.secs,
    };
    crate::raw::file::run(&ring_job, file.as_raw_fd(), || offs.next())
}

/// The runtime engine: `qd` tasks looping on read_at/write_at.
pub(crate) fn run_rt(
    cfg: &FileConfig,
    path: &Path,
    job: &Job,
    backend: Backend,
) -> io::Result<Measured> {
    let rt = ringkit::Builder::new()
        .backend(backend)
        .build()
        .map_err(|e| crate::harness::err::unsupported(e.to_string()))?;
    let setup = rt.backend_report().to_string();
    let job = *job;
    let (size, secs) = (cfg.size, cfg.secs);
    let path = path.to_path_buf();
    rt.block_on(async move {
        let file = Rc::new(
            ringkit::fs::OpenOptions::new()
                .read(true)
                .write(job.rw.is_write())
                .direct(job.direct)
                .open(&path)
                .await?,
        );
        let m0 = ringkit::metrics();
        let cpu0 = process_cpu();
        let t_start = now_ns();
        let deadline = t_start + (secs * 1e9) as u64;
        // One offset stream shared by every task, as the raw engine and
        // fio have: sequential means one sequential stream, not qd tasks
        // walking the same blocks side by side.
        let offs = Rc::new(RefCell::new(Offsets::new(&job, size, now_ns())));
        let handles: Vec<_> = (0..job.qd)
            .map(|_| {
                let (file, offs) = (file.clone(), offs.clone());
                ringkit::spawn(async move {
                    let bs = job.bs as usize;
                    let mut buf = AlignedBuf::new(bs, 4096);
                    let mut lat = Vec::new();
                    loop {
                        let t0 = now_ns();
                        if t0 >= deadline {
                            return Ok::<_, io::Error>(lat);
                        }
                        let off = offs.borrow_mut().next();
                        let (res, b) = if job.rw.is_write() {
                            file.write_at(buf, off).await
                        } else {
                            file.read_at(buf, off).await
                        };
                        buf = b;
                        let n = res?;
                        if n != bs {
                            return Err(io::Error::other(format!("short I/O: {n} of {bs}")));
                        }
                        let t1 = now_ns();
                        if t1 < deadline {
                            lat.push(t1 - t0);
                        }
                    }
                })
            })
            .collect();
        let mut lat = Vec::new();
        for h in handles {
            lat.extend(
                h.await
                    .map_err(|e| io::Error::other(format!("task: {e:?}")))??,
            );
        }
        let cpu1 = process_cpu();
        let m1 = ringkit::metrics().since(&m0);
        Ok(Measured {
            lat,
            secs: (secs).min((now_ns() - t_start) as f64 / 1e9),
            cpu: (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
            enters: (backend == Backend::Uring).then_some(m1.uring_enters),
            setup,
        })
    })
}

/// glommio's `DmaFile` (`O_DIRECT` only, as glommio intends it): `qd`
/// tasks on one executor pinned to the measuring CPU, each looping on
/// `read_at_aligned` or on `write_at` from a buffer of glommio's registered
/// I/O memory (`alloc_dma_buffer`, its idiom: one per write). CPU is the
/// whole process's, as for the other engines.
pub(crate) fn run_glommio(cfg: &FileConfig, path: &Path, job: &Job) -> io::Result<Measured> {
    use glommio::io::OpenOptions;
    use glommio::{LocalExecutorBuilder, Placement};
    if !job.direct {
        return Err(crate::harness::err::unsupported(
            "glommio's DmaFile is O_DIRECT only",
        ));
    }
    let gio = |e: glommio::GlommioError<()>| io::Error::other(e.to_string());
    let (size, secs, job, cpu) = (cfg.size, cfg.secs, *job, cfg.cpu);
    let path = path.to_path_buf();
    // Room for every I/O in flight twice over (writes allocate one each).
    let io_memory = (2 * job.qd as usize * job.bs as usize).max(10 << 20);
    let handle = LocalExecutorBuilder::new(Placement::Fixed(cpu))
        .name("glommio-file")
        .io_memory(io_memory)
        .spawn(move || async move {
            let file = Rc::new(
                OpenOptions::new()
                    .read(true)
                    .write(job.rw.is_write())
                    .dma_open(&path)
                    .await
                    .map_err(gio)?,
            );
            let cpu0 = process_cpu();
            let t_start = now_ns();
            let deadline = t_start + (secs * 1e9) as u64;
            // One offset stream shared by every task (see the rt engine).
            let offs = Rc::new(RefCell::new(Offsets::new(&job, size, now_ns())));
            let tasks: Vec<_> = (0..job.qd)
                .map(|_| {
                    let (file, offs) = (file.clone(), offs.clone());
                    glommio::spawn_local(async move {
                        let bs = job.bs as usize;
                        let mut lat = Vec::new();
                        loop {
                            let t0 = now_ns();
                            if t0 >= deadline {
                                return Ok::<_, io::Error>(lat);
                            }
                            let off = offs.borrow_mut().next();
                            let n = if job.rw.is_write() {
                                let b = file.alloc_dma_buffer(bs);
                                file.write_at(b, off).await.map_err(gio)?
                            } else {
                                file.read_at_aligned(off, bs).await.map_err(gio)?.len()
                            };
                            if n != bs {
                                return Err(io::Error::other(format!("short I/O: {n} of {bs}")));
                            }
                            let t1 = now_ns();
                            if t1 < deadline {
                                lat.push(t1 - t0);
                            }
                        }
                    })
                })
                .collect();
            let mut lat = Vec::new();
            for t in tasks {
                lat.extend(t.await?);
            }
            let cpu1 = process_cpu();
            if let Ok(f) = Rc::try_unwrap(file) {
                f.close().await.map_err(gio)?;
            }
            Ok::<_, io::Error>(Measured {
                lat,
                secs: secs.min((now_ns() - t_start) as f64 / 1e9),
                cpu: (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1),
                enters: None,
                setup: format!("glommio 0.9 DmaFile, executor pinned to CPU {cpu}"),
            })
        })
        .map_err(gio)?;
    handle
        .join()
        .map_err(|e| io::Error::other(format!("glommio executor: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_stay_in_the_file() {
        let job = Job::parse("randread,bs=4k").unwrap();
        let mut o = Offsets::new(&job, 1 << 20, 3);
        for _ in 0..10_000 {
            let off = o.next();
            assert!(off % 4096 == 0 && off + 4096 <= 1 << 20);
        }
        let job = Job::parse("read,bs=4k").unwrap();
        let mut o = Offsets::new(&job, 3 * 4096, 3);
        let v: Vec<u64> = (0..4).map(|_| o.next()).collect();
        assert_eq!(v, vec![0, 4096, 8192, 0]);
    }
}
