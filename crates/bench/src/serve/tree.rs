//! The document tree `compare static` serves: three single files (1 KiB,
//! 64 KiB, 1 MiB) and a mix of 10 000 files of realistic sizes in 100
//! directories, all made from a seeded generator so every run serves the
//! same bytes.
//!
//! The mix's sizes: 70% small (100 B to 8 KiB), 25% medium (8 to 64 KiB),
//! 5% large (64 KiB to 1 MiB), each uniform within its band; about 38 KiB
//! a file on average, some 380 MiB in all (in the page cache once written).

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use crate::harness::rng::Rng;
use crate::http::load::Target;

/// The single files: (label, path, size).
pub const SINGLES: [(&str, &str, usize); 3] = [
    ("1 KiB", "/1k.bin", 1024),
    ("64 KiB", "/64k.bin", 64 * 1024),
    ("1 MiB", "/1m.bin", 1024 * 1024),
];

/// A written tree.
#[derive(Debug)]
pub struct Tree {
    /// The document root.
    pub root: PathBuf,
    /// Every file of the mix with its size.
    pub mix: Vec<Target>,
    /// The CRC-32C of each of [`SINGLES`], in order.
    pub singles: Vec<u32>,
}

/// The size of mix file `i` under `seed` (see the module docs).
pub fn mix_size(rng: &mut Rng) -> usize {
    let band = rng.unit();
    let (lo, hi) = if band < 0.70 {
        (100, 8 * 1024 - 1)
    } else if band < 0.95 {
        (8 * 1024, 64 * 1024 - 1)
    } else {
        (64 * 1024, 1024 * 1024)
    };
    rng.range(lo, hi) as usize
}

/// Write the tree under `root` (made if missing; files already there with
/// the right bytes are kept, so a second run in the same place is quick;
/// any other file is rewritten) and the mix's list, one `PATH BODY_LEN
/// CRC32C` per line, to `list`: the load generator checks the bytes of the
/// responses against the CRC-32C.
pub fn build(root: &Path, files: usize, seed: u64, list: &Path) -> io::Result<Tree> {
    // The caller removes the tree when done: never one it did not make.
    crate::harness::made_dir::must_be_new_or_empty(root)?;
    std::fs::create_dir_all(root)?;
    let mut rng = Rng::new(seed);
    let mut bytes = vec![0u8; 1024 * 1024];
    for b in bytes.chunks_mut(8) {
        let x = rng.next_u64().to_le_bytes();
        b.copy_from_slice(&x[..b.len()]);
    }
    // Returns the CRC-32C of the file's bytes.
    let put = |path: &Path, len: usize, skew: usize| -> io::Result<u32> {
        // Different files start at different places in the bytes.
        let start = skew % (bytes.len() - len.min(bytes.len()) + 1);
        let want = &bytes[start..start + len];
        let crc = crc32c::crc32c(want);
        let kept = std::fs::metadata(path).is_ok_and(|m| m.len() == len as u64)
            && std::fs::read(path).is_ok_and(|have| crc32c::crc32c(&have) == crc);
        if !kept {
            std::fs::write(path, want)?;
        }
        Ok(crc)
    };
    let mut singles = Vec::with_capacity(SINGLES.len());
    for (i, (_, path, size)) in SINGLES.iter().enumerate() {
        singles.push(put(&root.join(&path[1..]), *size, i * 4099)?);
    }
    let mut mix = Vec::with_capacity(files);
    let mut out = io::BufWriter::new(std::fs::File::create(list)?);
    writeln!(
        out,
        "# ringkit compare static: {files} files, seed {seed}; PATH BODY_LEN CRC32C"
    )?;
    for i in 0..files {
        let dir = format!("mix/{:02}", i % 100);
        if i < 100 {
            std::fs::create_dir_all(root.join(&dir))?;
        }
        let rel = format!("{dir}/{i:05}.bin");
        let len = mix_size(&mut rng);
        let crc = put(&root.join(&rel), len, i.wrapping_mul(7919))?;
        writeln!(out, "/{rel} {len} {crc:08x}")?;
        mix.push(Target {
            path: format!("/{rel}"),
            body_len: len,
            crc32c: Some(crc),
        });
    }
    out.flush()?;
    Ok(Tree {
        root: root.to_path_buf(),
        mix,
        singles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_the_bands() {
        let mut rng = Rng::new(7);
        let sizes: Vec<usize> = (0..20_000).map(|_| mix_size(&mut rng)).collect();
        let share = |lo: usize, hi: usize| {
            sizes.iter().filter(|&&s| (lo..=hi).contains(&s)).count() as f64 / 20_000.0
        };
        assert!((share(100, 8191) - 0.70).abs() < 0.02);
        assert!((share(8192, 65535) - 0.25).abs() < 0.02);
        assert!((share(65536, 1 << 20) - 0.05).abs() < 0.01);
        assert_eq!(share(100, 1 << 20), 1.0);
    }

    #[test]
    fn a_small_tree_and_its_list_agree() {
        let t = tempfile::tempdir().unwrap();
        let list = t.path().join("mix.txt");
        let tree = build(&t.path().join("www"), 150, 3, &list).unwrap();
        assert_eq!(tree.mix.len(), 150);
        for x in &tree.mix {
            let m = std::fs::metadata(tree.root.join(&x.path[1..])).unwrap();
            assert_eq!(m.len() as usize, x.body_len, "{}", x.path);
        }
        let read = Target::parse_list(&std::fs::read_to_string(&list).unwrap()).unwrap();
        assert_eq!(read, tree.mix);
        for (_, path, size) in SINGLES {
            let m = std::fs::metadata(tree.root.join(&path[1..])).unwrap();
            assert_eq!(m.len() as usize, size);
        }
        // The same seed gives the same tree.
        let again = build(&t.path().join("www2"), 150, 3, &t.path().join("l2")).unwrap();
        assert_eq!(again.mix, tree.mix);
    }
}
