//! Unit tests of the model, without FUSE: file contents against a plain
//! two-copy model under random operations, and the directory rules.

use std::ffi::OsStr;

use crate::file::{FileData, Rng, SECTOR};
use crate::model::{Fs, New, SetAttr, ROOT};

fn os(s: &str) -> &OsStr {
    OsStr::new(s)
}

const NEW: New = New {
    mode: 0o644,
    uid: 0,
    gid: 0,
    rdev: 0,
};

/// The obvious model: two whole copies.
#[derive(Default, Clone)]
struct Plain {
    cur: Vec<u8>,
    dur: Vec<u8>,
}

impl Plain {
    fn write(&mut self, off: usize, data: &[u8], durable: bool) {
        let end = off + data.len();
        if self.cur.len() < end {
            self.cur.resize(end, 0);
        }
        self.cur[off..end].copy_from_slice(data);
        if durable {
            if self.dur.len() < end {
                self.dur.resize(end, 0);
            }
            self.dur[off..end].copy_from_slice(data);
        }
    }
}

fn diff(a: &[u8], b: &[u8]) -> u64 {
    let c = a.len().min(b.len());
    (a[..c].iter().zip(&b[..c]).filter(|(x, y)| x != y).count() + a.len().max(b.len()) - c) as u64
}

fn below(rng: &mut Rng, n: u64) -> u64 {
    let mut x = 0u64;
    for _ in 0..32 {
        x = x << 1 | u64::from(rng.coin());
    }
    x % n
}

#[test]
fn file_bytes_match_the_two_copy_model() {
    let mut rng = Rng::new(7);
    for round in 0..300 {
        let (mut f, mut p) = (FileData::default(), Plain::default());
        for step in 0..40 {
            let op = below(&mut rng, 10);
            let off = below(&mut rng, 40_000) as usize;
            let len = below(&mut rng, 9000) as usize;
            let byte = (round * 40 + step) as u8 | 1;
            match op {
                0..=3 => {
                    let data = vec![byte; len];
                    f.write(off as u64, &data, false);
                    p.write(off, &data, false);
                }
                4 => {
                    let data = vec![byte; len];
                    f.write(off as u64, &data, true);
                    p.write(off, &data, true);
                }
                5 => {
                    f.set_len(off as u64);
                    p.cur.resize(off, 0);
                }
                6 => {
                    f.zero(off as u64, (off + len) as u64);
                    let end = (off + len).min(p.cur.len());
                    if off < end {
                        p.cur[off..end].fill(0);
                    }
                }
                7 => {
                    f.sync();
                    p.dur = p.cur.clone();
                }
                _ => {
                    assert_eq!(
                        f.unsynced(),
                        diff(&p.cur, &p.dur),
                        "round {round} step {step}"
                    );
                    let dropped = f.lose(None);
                    assert_eq!(dropped, diff(&p.cur, &p.dur));
                    p.cur = p.dur.clone();
                }
            }
            assert_eq!(f.len(), p.cur.len() as u64);
            assert_eq!(
                f.read(0, u32::MAX),
                &p.cur[..],
                "round {round} step {step} op {op}"
            );
            assert_eq!(f.durable_len(), p.dur.len() as u64);
        }
        let mut g = FileData::default();
        std::mem::swap(&mut g, &mut f);
        g.lose(None);
        assert_eq!(
            g.read(0, u32::MAX),
            &p.dur[..],
            "round {round}: after the loss"
        );
        assert!(g.is_synced());
    }
}

#[test]
fn a_torn_loss_keeps_whole_sectors_of_old_or_new() {
    let mut rng = Rng::new(11);
    for round in 0..200u64 {
        let (mut f, mut p) = (FileData::default(), Plain::default());
        for step in 0..12 {
            let off = below(&mut rng, 20_000) as usize;
            let data = vec![
                (round as u8).wrapping_mul(31) ^ step as u8 | 1;
                below(&mut rng, 5000) as usize
            ];
            match below(&mut rng, 4) {
                0 => {
                    f.sync();
                    p.dur = p.cur.clone();
                }
                1 => {
                    f.set_len(off as u64);
                    p.cur.resize(off, 0);
                }
                _ => {
                    f.write(off as u64, &data, false);
                    p.write(off, &data, false);
                }
            }
        }
        f.lose(Some(&mut Rng::new(round)));
        let out = f.read(0, u32::MAX).to_vec();
        let s = SECTOR as usize;
        assert!(
            out.len() >= p.dur.len(),
            "round {round}: shorter than durable"
        );
        assert!(out.len() <= p.dur.len().max(p.cur.len()));
        for (i, got) in out.chunks(s).enumerate() {
            let slice = |v: &Vec<u8>| -> Vec<u8> {
                let mut x: Vec<u8> = v.iter().skip(i * s).take(got.len()).copied().collect();
                x.resize(got.len(), 0);
                x
            };
            let (old, new) = (slice(&p.dur), slice(&p.cur));
            assert!(
                got == &old[..] || got == &new[..],
                "round {round} sector {i}: neither old nor new"
            );
        }
        if out.len() > p.dur.len() {
            // The last sector is a kept one: the new bytes.
            let last = (out.len() - 1) / s * s;
            assert_eq!(&out[last..], &p.cur[last..out.len()], "round {round}");
        }
    }
}

#[test]
fn unsynced_names_and_bytes_go_and_synced_ones_stay() {
    let mut fs = Fs::new();
    let a = fs.create(ROOT, os("a"), NEW).unwrap().0.ino;
    fs.write(a, 0, b"hello", false).unwrap();
    fs.fsync(a).unwrap();
    let st = fs.power_loss(None).0;
    assert_eq!(st.inodes_dropped, 1, "{st:?}");
    assert_eq!(st.bytes_dropped, 5);
    assert_eq!(fs.lookup(ROOT, os("a")).unwrap_err(), libc::ENOENT);
    assert_eq!(fs.getattr(a).unwrap_err(), libc::ENOENT);
    assert_eq!(fs.used(), 0);

    let (b, fh) = fs.create(ROOT, os("b"), NEW).unwrap();
    fs.write(b.ino, 0, b"durable", false).unwrap();
    fs.fsync(b.ino).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    fs.write(b.ino, 7, b" and not", false).unwrap();
    fs.write(b.ino, 0, b"D", false).unwrap();
    assert_eq!(fs.unsynced(), 9);
    fs.release(fh);
    let st = fs.power_loss(None).0;
    assert_eq!(
        (st.files_reverted, st.bytes_dropped, st.inodes_dropped),
        (1, 9, 0)
    );
    assert_eq!(fs.read(b.ino, 0, 100).unwrap(), b"durable");
    assert_eq!(fs.used(), 7);
    assert_eq!(fs.unsynced(), 0);
    // New inode numbers only.
    let c = fs.mknod(ROOT, os("c"), NEW).unwrap();
    assert!(c.ino > b.ino);
}

#[test]
fn renames_and_unlinks_are_durable_per_directory() {
    let mut fs = Fs::new();
    let d = fs.mkdir(ROOT, os("d"), NEW).unwrap().ino;
    let f = fs.mknod(d, os("f"), NEW).unwrap().ino;
    fs.fsyncdir(d).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    // Renamed out of d into the root, only the root synced: two names.
    fs.rename((d, os("f")), (ROOT, os("g")), false).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    fs.power_loss(None);
    assert_eq!(fs.lookup(d, os("f")).unwrap().ino, f);
    assert_eq!(fs.lookup(ROOT, os("g")).unwrap().nlink, 2);
    // Unlink without a sync comes back; with one it goes.
    fs.unlink(ROOT, os("g")).unwrap();
    fs.power_loss(None);
    assert!(fs.lookup(ROOT, os("g")).is_ok());
    fs.unlink(ROOT, os("g")).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    fs.power_loss(None);
    assert_eq!(fs.lookup(ROOT, os("g")).unwrap_err(), libc::ENOENT);
    assert_eq!(fs.getattr(f).unwrap().nlink, 1);
    // RENAME_NOREPLACE, and directories into themselves.
    fs.mknod(ROOT, os("x"), NEW).unwrap();
    assert_eq!(
        fs.rename((ROOT, os("x")), (d, os("f")), true),
        Err(libc::EEXIST)
    );
    let e = fs.mkdir(d, os("e"), NEW).unwrap().ino;
    assert_eq!(
        fs.rename((ROOT, os("d")), (e, os("d")), false),
        Err(libc::EINVAL)
    );
    assert_eq!(fs.rmdir(ROOT, os("d")), Err(libc::ENOTEMPTY));
    // A directory moved between two directories, both synced at the
    // target only: reached once, by the first name.
    fs.fsyncdir(d).unwrap();
    fs.rename((d, os("e")), (ROOT, os("e")), false).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    fs.power_loss(None);
    assert_eq!(fs.lookup(d, os("e")).unwrap_err(), libc::ENOENT);
    assert_eq!(fs.lookup(ROOT, os("e")).unwrap().ino, e);
}

#[test]
fn the_capacity_refuses_growth_and_changes_nothing() {
    let mut fs = Fs::new();
    let (a, _) = fs.create(ROOT, os("a"), NEW).unwrap();
    fs.set_capacity(Some(10));
    fs.write(a.ino, 0, b"0123456789", false).unwrap();
    assert_eq!(fs.write(a.ino, 10, b"x", false), Err(libc::ENOSPC));
    assert_eq!(fs.write(a.ino, 5, b"abcdef", false), Err(libc::ENOSPC));
    assert_eq!(fs.fallocate(a.ino, 0, 11, 0), Err(libc::ENOSPC));
    let grow = SetAttr {
        size: Some(11),
        ..SetAttr::default()
    };
    assert_eq!(fs.setattr(a.ino, &grow).unwrap_err(), libc::ENOSPC);
    assert_eq!(fs.read(a.ino, 0, 100).unwrap(), b"0123456789");
    fs.write(a.ino, 5, b"abcde", false).unwrap();
    fs.fallocate(
        a.ino,
        0,
        4,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    assert_eq!(fs.read(a.ino, 0, 100).unwrap(), b"\0\0\0\x004abcde");
    assert_eq!(fs.used(), 10);
    fs.set_capacity(None);
    fs.fallocate(a.ino, 0, 4096, 0).unwrap();
    assert_eq!(fs.used(), 4096);
    assert_eq!(
        fs.fallocate(a.ino, 0, 1, libc::FALLOC_FL_COLLAPSE_RANGE),
        Err(libc::EOPNOTSUPP)
    );
}

#[test]
fn an_unlinked_file_is_freed_once_closed_forgotten_and_durably_gone() {
    let mut fs = Fs::new();
    let (a, fh) = fs.create(ROOT, os("a"), NEW).unwrap();
    fs.write(a.ino, 0, &[1; 100], false).unwrap();
    fs.fsyncdir(ROOT).unwrap();
    fs.unlink(ROOT, os("a")).unwrap();
    assert_eq!(fs.used(), 100, "open: still counted");
    fs.release(fh);
    fs.forget(a.ino, 1);
    assert_eq!(fs.used(), 0);
    assert!(
        fs.getattr(a.ino).is_ok(),
        "kept: its durable name may come back"
    );
    fs.fsyncdir(ROOT).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap_err(), libc::ENOENT);
}
