//! File, pipe and poll opcodes against the real kernel.

mod common;

use std::ffi::CString;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;

use common::*;
use ringkit_uring::opcode::{self, Dest, SqeFlags, Target};
use ringkit_uring::sys;

fn tempfile_with(data: &[u8]) -> std::fs::File {
    let mut f = tempfile::tempfile().expect("tempfile");
    f.write_all(data).expect("write");
    f
}

#[test]
fn nop_echoes_user_data() {
    let mut ring = ring(8);
    for ud in [0u64, 1, u64::MAX, 0xdead_beef] {
        push_plain(&mut ring, opcode::Nop::new().build().user_data(ud));
    }
    let got = wait(&mut ring, 4);
    let uds: Vec<u64> = got.iter().map(|c| c.user_data).collect();
    assert_eq!(uds, [0, 1, u64::MAX, 0xdead_beef]);
    assert!(got.iter().all(|c| c.res == 0 && c.flags == 0), "{got:?}");
}

#[test]
fn writev_then_readv() {
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    let (a, b) = (b"hello ".to_vec(), b"vectored world".to_vec());
    let wiov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut _,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut _,
            iov_len: b.len(),
        },
    ];
    let w = opcode::Writev::new(Target::Fd(raw(&f)), wiov.as_ptr(), 2).offset(3);
    // SAFETY: `wiov` and the buffers it names outlive the wait below.
    unsafe { push(&mut ring, w.build().user_data(1)) };
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (1, 20));
    let on_disk = std::fs::read(format!("/proc/self/fd/{}", raw(&f))).unwrap();
    assert_eq!(&on_disk[..], b"\0\0\0hello vectored world");

    let (mut x, mut y) = (vec![0u8; 4], vec![0u8; 64]);
    let riov = [
        libc::iovec {
            iov_base: x.as_mut_ptr().cast(),
            iov_len: x.len(),
        },
        libc::iovec {
            iov_base: y.as_mut_ptr().cast(),
            iov_len: y.len(),
        },
    ];
    let r = opcode::Readv::new(Target::Fd(raw(&f)), riov.as_ptr(), 2).offset(3);
    // SAFETY: `riov` and its buffers outlive the wait below.
    unsafe { push(&mut ring, r.build().user_data(2)) };
    let c = wait_one(&mut ring);
    assert_eq!((c.user_data, c.res), (2, 20));
    assert_eq!(&x, b"hell");
    assert_eq!(&y[..16], b"o vectored world");
}

#[test]
fn write_then_read_at_offset_and_on_a_pipe() {
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    let data = b"offset payload";
    let w = opcode::Write::new(Target::Fd(raw(&f)), data.as_ptr(), data.len() as u32).offset(100);
    // SAFETY: `data` is static.
    unsafe { push(&mut ring, w.build().user_data(1)) };
    assert_eq!(wait_one(&mut ring).res, data.len() as i32);
    assert_eq!(f.metadata().unwrap().len(), 100 + data.len() as u64);

    let mut buf = vec![0u8; 6];
    let r = opcode::Read::new(Target::Fd(raw(&f)), buf.as_mut_ptr(), 6).offset(107);
    // SAFETY: `buf` outlives the wait.
    unsafe { push(&mut ring, r.build().user_data(2)) };
    assert_eq!(wait_one(&mut ring).res, 6);
    assert_eq!(&buf, b"payloa");

    // Pipes have no offset: u64::MAX means "the file position".
    let (pr, pw) = pipe();
    let w = opcode::Write::new(Target::Fd(raw(&pw)), b"pipe!".as_ptr(), 5).offset(u64::MAX);
    let mut pbuf = [0u8; 16];
    let r = opcode::Read::new(Target::Fd(raw(&pr)), pbuf.as_mut_ptr(), 16).offset(u64::MAX);
    // SAFETY: the literal is static; `pbuf` outlives the wait.
    unsafe {
        push(&mut ring, w.build().user_data(3));
        push(&mut ring, r.build().user_data(4));
    }
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (3, 5));
    assert_eq!((got[1].user_data, got[1].res), (4, 5));
    assert_eq!(&pbuf[..5], b"pipe!");
}

#[test]
fn read_write_fixed_with_registered_buffers() {
    // The buffers are declared before the ring so they outlive the registration.
    let mut src: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut dst = vec![0u8; 4096];
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    let iovs = [
        libc::iovec {
            iov_base: src.as_mut_ptr().cast(),
            iov_len: src.len(),
        },
        libc::iovec {
            iov_base: dst.as_mut_ptr().cast(),
            iov_len: dst.len(),
        },
    ];
    // SAFETY: `src` and `dst` are not resized and outlive the ring (declared first).
    unsafe { ring.register_buffers(&iovs) }.expect("register_buffers");

    let w = opcode::WriteFixed::new(Target::Fd(raw(&f)), src.as_ptr(), 4096, 0);
    // SAFETY: `src` is registered buffer 0 and outlives the wait.
    unsafe { push(&mut ring, w.build().user_data(1)) };
    assert_eq!(wait_one(&mut ring).res, 4096);
    assert_eq!(
        std::fs::read(format!("/proc/self/fd/{}", raw(&f))).unwrap(),
        src
    );

    // A sub-range of registered buffer 1.
    // SAFETY: 100..300 is inside `dst`.
    let sub = unsafe { dst.as_mut_ptr().add(100) };
    let r = opcode::ReadFixed::new(Target::Fd(raw(&f)), sub, 200, 1).offset(1000);
    // SAFETY: `dst` is registered buffer 1 and outlives the wait.
    unsafe { push(&mut ring, r.build().user_data(2)) };
    assert_eq!(wait_one(&mut ring).res, 200);
    assert_eq!(&dst[100..300], &src[1000..1200]);
    assert!(dst[..100].iter().all(|&b| b == 0));

    // An address outside the named registered buffer is refused.
    let r = opcode::ReadFixed::new(Target::Fd(raw(&f)), dst.as_mut_ptr(), 16, 0);
    // SAFETY: the kernel refuses it without touching memory; `dst` lives anyway.
    unsafe { push(&mut ring, r.build().user_data(3)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EFAULT));

    ring.unregister_buffers().expect("unregister_buffers");
    let r = opcode::ReadFixed::new(Target::Fd(raw(&f)), dst.as_mut_ptr(), 16, 1);
    // SAFETY: no buffers are registered, so the kernel fails it; `dst` lives anyway.
    unsafe { push(&mut ring, r.build().user_data(4)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EFAULT));
}

#[test]
fn fsync_and_sync_file_range() {
    let mut ring = ring(8);
    let f = tempfile_with(&[0xab; 8192]);
    push_plain(
        &mut ring,
        opcode::Fsync::new(Target::Fd(raw(&f))).build().user_data(1),
    );
    let ds = opcode::Fsync::new(Target::Fd(raw(&f))).flags(sys::IORING_FSYNC_DATASYNC);
    push_plain(&mut ring, ds.build().user_data(2));
    push_plain(
        &mut ring,
        opcode::Fsync::new(Target::Fd(-1)).build().user_data(3),
    );
    let sfr = opcode::SyncFileRange::new(Target::Fd(raw(&f)), 8192)
        .flags(libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER);
    push_plain(&mut ring, sfr.build().user_data(4));
    // Unknown sync_file_range flags must reach the kernel and be refused.
    let bad = opcode::SyncFileRange::new(Target::Fd(raw(&f)), 8192).flags(0x80);
    push_plain(&mut ring, bad.build().user_data(5));
    let got = wait_sorted(&mut ring, 5);
    let res: Vec<i32> = got.iter().map(|c| c.res).collect();
    assert_eq!(
        res,
        [0, 0, neg(libc::EBADF), 0, neg(libc::EINVAL)],
        "{got:?}"
    );
}

#[test]
fn openat2_resolves_beneath_its_directory_only() {
    let mut ring = ring(8);
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("in.txt"), b"inside").unwrap();
    std::fs::write(t.path().join("secret"), b"outside").unwrap();
    std::os::unix::fs::symlink("../secret", root.join("out")).unwrap();
    let dirf = std::fs::File::open(&root).unwrap();
    const RESOLVE_BENEATH: u64 = 0x08;
    let how = opcode::OpenHow {
        flags: (libc::O_RDONLY | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_BENEATH,
    };
    let names: Vec<CString> = ["in.txt", "../secret", "out", "/etc/passwd", "nope"]
        .iter()
        .map(|n| CString::new(*n).unwrap())
        .collect();
    for (i, n) in names.iter().enumerate() {
        let o = opcode::OpenAt2::new(raw(&dirf), n.as_ptr(), &how);
        // SAFETY: the names and `how` outlive the wait.
        unsafe { push(&mut ring, o.build().user_data(i as u64)) };
    }
    let got = wait_sorted(&mut ring, names.len());
    let fd = own(got[0].res);
    let mut buf = [0u8; 16];
    // SAFETY: reading into a local buffer from our fd.
    let n = unsafe { libc::read(raw(&fd), buf.as_mut_ptr().cast(), buf.len()) };
    assert_eq!(&buf[..n as usize], b"inside");
    let res: Vec<i32> = got[1..].iter().map(|c| c.res).collect();
    assert_eq!(
        res,
        [
            neg(libc::EXDEV),
            neg(libc::EXDEV),
            neg(libc::EXDEV),
            neg(libc::ENOENT)
        ],
        "{got:?}"
    );
}

#[test]
fn openat_creates_a_file_and_statx_sees_its_size() {
    let mut ring = ring(8);
    let dir = tempfile::tempdir().unwrap();
    let dirf = std::fs::File::open(dir.path()).unwrap();
    let name = CString::new("created.txt").unwrap();
    let o = opcode::OpenAt::new(raw(&dirf), name.as_ptr())
        .flags(libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC)
        .mode(0o600);
    // SAFETY: `name` outlives the wait.
    unsafe { push(&mut ring, o.build().user_data(1)) };
    let fd = own(wait_one(&mut ring).res);
    write_fd(raw(&fd), &[7u8; 12345]);
    let path = dir.path().join("created.txt");
    let meta = std::fs::metadata(&path).expect("openat created the file in dirfd");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);

    // O_EXCL on the existing file: the flags really reach the kernel.
    // SAFETY: as above.
    unsafe { push(&mut ring, o.build().user_data(2)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EEXIST));

    // statx by path (relative to dirfd) and by fd with AT_EMPTY_PATH.
    // SAFETY: statx is plain data.
    let mut st1: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut st2: libc::statx = unsafe { std::mem::zeroed() };
    let empty = CString::new("").unwrap();
    let s1 = opcode::Statx::new(raw(&dirf), name.as_ptr(), &mut st1).mask(libc::STATX_SIZE);
    let s2 = opcode::Statx::new(raw(&fd), empty.as_ptr(), &mut st2)
        .flags(libc::AT_EMPTY_PATH)
        .mask(libc::STATX_SIZE | libc::STATX_MODE);
    // SAFETY: the names and statx buffers outlive the wait.
    unsafe {
        push(&mut ring, s1.build().user_data(3));
        push(&mut ring, s2.build().user_data(4));
    }
    let got = wait_sorted(&mut ring, 2);
    assert!(got.iter().all(|c| c.res == 0), "{got:?}");
    for st in [&st1, &st2] {
        assert_ne!(st.stx_mask & libc::STATX_SIZE, 0);
        assert_eq!(st.stx_size, 12345);
    }
    assert_eq!(u32::from(st2.stx_mode) & 0o777, 0o600);
}

#[test]
fn openat_into_a_fixed_slot_then_close_the_slot() {
    let mut ring = ring(8);
    ring.register_files_sparse(2).expect("sparse file table");
    let dir = tempfile::tempdir().unwrap();
    let path = CString::new(dir.path().join("direct").to_str().unwrap()).unwrap();
    let o = opcode::OpenAt::new(libc::AT_FDCWD, path.as_ptr())
        .flags(libc::O_CREAT | libc::O_RDWR)
        .mode(0o644)
        .dest(Dest::Slot(1));
    // SAFETY: `path` outlives the wait.
    unsafe { push(&mut ring, o.build().user_data(1)) };
    assert_eq!(wait_one(&mut ring).res, 0, "direct open returns 0");

    let w = opcode::Write::new(Target::Fixed(1), b"via slot".as_ptr(), 8);
    // SAFETY: static data.
    unsafe { push(&mut ring, w.build().user_data(2)) };
    assert_eq!(wait_one(&mut ring).res, 8);
    assert_eq!(
        std::fs::read(dir.path().join("direct")).unwrap(),
        b"via slot"
    );

    push_plain(
        &mut ring,
        opcode::Close::new(Target::Fixed(1)).build().user_data(3),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    // SAFETY: static data.
    unsafe { push(&mut ring, w.build().user_data(4)) };
    assert_eq!(
        wait_one(&mut ring).res,
        neg(libc::EBADF),
        "slot is empty after CLOSE"
    );
    push_plain(
        &mut ring,
        opcode::Close::new(Target::Fixed(1)).build().user_data(5),
    );
    assert_eq!(wait_one(&mut ring).res, neg(libc::EBADF));
}

#[test]
fn close_plain_fd() {
    let mut ring = ring(4);
    let efd = eventfd();
    // A high descriptor number, so no other test thread is handed the same
    // number between our CLOSE and the checks below (fds are allocated lowest first).
    // SAFETY: F_DUPFD_CLOEXEC only creates a new descriptor.
    let fd = unsafe { libc::fcntl(raw(&efd), libc::F_DUPFD_CLOEXEC, 900) };
    assert!(fd >= 900, "F_DUPFD: {}", std::io::Error::last_os_error());
    assert!(fd_is_open(fd));
    push_plain(
        &mut ring,
        opcode::Close::new(Target::Fd(fd)).build().user_data(1),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    assert!(!fd_is_open(fd), "CLOSE closed the descriptor");
    push_plain(
        &mut ring,
        opcode::Close::new(Target::Fd(fd)).build().user_data(2),
    );
    assert_eq!(wait_one(&mut ring).res, neg(libc::EBADF));
}

#[test]
fn fixed_files_register_update_unregister() {
    let mut ring = ring(8);
    let (pr, pw) = pipe();
    let f = tempfile::tempfile().unwrap();
    ring.register_files(&[raw(&pw), -1])
        .expect("register_files");

    let w = |t: Target, ud: u64| {
        opcode::Write::new(t, b"fixed".as_ptr(), 5)
            .offset(u64::MAX)
            .build()
            .user_data(ud)
    };
    // SAFETY: static data.
    unsafe { push(&mut ring, w(Target::Fixed(0), 1)) };
    assert_eq!(wait_one(&mut ring).res, 5);
    assert_eq!(read_fd(raw(&pr), 16), b"fixed");

    // Explicit IOSQE_FIXED_FILE on a plain target means the same thing.
    let e = opcode::Write::new(Target::Fd(0), b"flag".as_ptr(), 4)
        .offset(u64::MAX)
        .build()
        .flags(SqeFlags::FIXED_FILE)
        .user_data(2);
    // SAFETY: static data.
    unsafe { push(&mut ring, e) };
    assert_eq!(wait_one(&mut ring).res, 4);
    assert_eq!(read_fd(raw(&pr), 16), b"flag");

    // Slot 1 was empty; fill it with the file.
    // SAFETY: static data.
    unsafe { push(&mut ring, w(Target::Fixed(1), 3)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EBADF));
    assert_eq!(ring.register_files_update(1, &[raw(&f)]).unwrap(), 1);
    // SAFETY: static data.
    unsafe { push(&mut ring, w(Target::Fixed(1), 4)) };
    assert_eq!(wait_one(&mut ring).res, 5);
    assert_eq!(
        std::fs::read(format!("/proc/self/fd/{}", raw(&f))).unwrap(),
        b"fixed"
    );

    // Clear slot 0.
    assert_eq!(ring.register_files_update(0, &[-1]).unwrap(), 1);
    // SAFETY: static data.
    unsafe { push(&mut ring, w(Target::Fixed(0), 5)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EBADF));

    ring.unregister_files().expect("unregister_files");
    // SAFETY: static data.
    unsafe { push(&mut ring, w(Target::Fixed(1), 6)) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::EBADF));
    let again = ring.unregister_files().unwrap_err();
    assert_eq!(again.raw_os_error(), Some(libc::ENXIO));
}

#[test]
fn splice_file_to_pipe() {
    let mut ring = ring(4);
    if !supports(&ring, sys::IORING_OP_SPLICE, "SPLICE") {
        return;
    }
    let f = tempfile_with(b"0123456789abcdef");
    let (pr, pw) = pipe();
    let s = opcode::Splice::new(Target::Fd(raw(&f)), 6, Target::Fd(raw(&pw)), -1, 7);
    push_plain(&mut ring, s.build().user_data(1));
    assert_eq!(wait_one(&mut ring).res, 7);
    assert_eq!(read_fd(raw(&pr), 64), b"6789abc");
}

#[test]
fn provide_buffers_then_read_with_buffer_select() {
    let mut ring = ring(8);
    if !supports(&ring, sys::IORING_OP_PROVIDE_BUFFERS, "PROVIDE_BUFFERS") {
        return;
    }
    const BGID: u16 = 7;
    let mut slab = vec![0u8; 4 * 64];
    let p = opcode::ProvideBuffers::new(slab.as_mut_ptr(), 64, 4, BGID, 10);
    // SAFETY: `slab` outlives every read that may select from it.
    unsafe { push(&mut ring, p.build().user_data(1)) };
    let c = wait_one(&mut ring);
    // 0 on current kernels; older ones returned the number of buffers added.
    assert!(c.res == 0 || c.res == 4, "provide buffers: {c:?}");

    let (pr, pw) = pipe();
    let mut seen = Vec::new();
    for (i, msg) in [&b"first"[..], b"second message"].iter().enumerate() {
        write_fd(raw(&pw), msg);
        let r = opcode::Read::new(Target::Fd(raw(&pr)), std::ptr::null_mut(), 64)
            .offset(u64::MAX)
            .buf_group(BGID)
            .build()
            .flags(SqeFlags::BUFFER_SELECT)
            .user_data(10 + i as u64);
        // SAFETY: the kernel picks a buffer from `slab`, which outlives the wait.
        unsafe { push(&mut ring, r) };
        let c = wait_one(&mut ring);
        assert_eq!(c.res, msg.len() as i32, "{c:?}");
        let bid = c.buffer_id().expect("CQE carries a buffer id");
        assert!((10..14).contains(&bid), "bid {bid} from our range");
        let off = usize::from(bid - 10) * 64;
        assert_eq!(&slab[off..off + msg.len()], *msg);
        seen.push(bid);
    }
    assert_ne!(seen[0], seen[1], "each read takes its own buffer");

    // An empty group fails with ENOBUFS.
    write_fd(raw(&pw), b"x");
    let r = opcode::Read::new(Target::Fd(raw(&pr)), std::ptr::null_mut(), 64)
        .offset(u64::MAX)
        .buf_group(BGID + 1)
        .build()
        .flags(SqeFlags::BUFFER_SELECT)
        .user_data(20);
    // SAFETY: no buffer exists in that group; nothing is written.
    unsafe { push(&mut ring, r) };
    assert_eq!(wait_one(&mut ring).res, neg(libc::ENOBUFS));
}

#[test]
fn poll_add_single_shot_on_a_pipe() {
    let mut ring = ring(4);
    let (pr, pw) = pipe();
    let p = opcode::PollAdd::new(Target::Fd(raw(&pr)), libc::POLLIN as u32);
    push_plain(&mut ring, p.build().user_data(1));
    assert_eq!(ring.submit().unwrap(), 1);
    assert_no_cqe(&mut ring);
    write_fd(raw(&pw), b"wake");
    let c = wait_one(&mut ring);
    assert_eq!(c.user_data, 1);
    assert_ne!(c.res & i32::from(libc::POLLIN), 0, "{c:?}");
    assert!(!c.more(), "single-shot poll has no F_MORE");
}

#[test]
fn poll_add_multishot_then_poll_remove() {
    let mut ring = ring(8);
    let efd = eventfd();
    let p = opcode::PollAdd::new(Target::Fd(raw(&efd)), libc::POLLIN as u32).multi(true);
    push_plain(&mut ring, p.build().user_data(1));
    assert_eq!(ring.submit().unwrap(), 1);
    assert_no_cqe(&mut ring);
    for _ in 0..3 {
        write_fd(raw(&efd), &1u64.to_ne_bytes());
        let c = wait_one(&mut ring);
        assert_eq!(c.user_data, 1);
        assert_ne!(c.res & i32::from(libc::POLLIN), 0, "{c:?}");
        assert!(c.more(), "multishot poll keeps F_MORE: {c:?}");
        assert_eq!(read_fd(raw(&efd), 8), 1u64.to_ne_bytes());
    }
    push_plain(&mut ring, opcode::PollRemove::new(1).build().user_data(2));
    let got = wait_sorted(&mut ring, 2);
    assert_eq!((got[0].user_data, got[0].res), (1, neg(libc::ECANCELED)));
    assert!(!got[0].more(), "removed poll ends without F_MORE");
    assert_eq!((got[1].user_data, got[1].res), (2, 0));

    push_plain(&mut ring, opcode::PollRemove::new(1).build().user_data(3));
    assert_eq!(wait_one(&mut ring).res, neg(libc::ENOENT));
}

#[test]
fn fallocate_extends_and_zero_fills() {
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    push_plain(
        &mut ring,
        opcode::Fallocate::new(Target::Fd(raw(&f)), 0, 1 << 20)
            .build()
            .user_data(1),
    );
    // FALLOC_FL_KEEP_SIZE: blocks reserved past the end, size unchanged.
    push_plain(
        &mut ring,
        opcode::Fallocate::new(Target::Fd(raw(&f)), 1 << 20, 1 << 20)
            .mode(libc::FALLOC_FL_KEEP_SIZE)
            .build()
            .user_data(2),
    );
    // A bad mode must reach the kernel and be refused.
    push_plain(
        &mut ring,
        opcode::Fallocate::new(Target::Fd(raw(&f)), 0, 4096)
            .mode(0x4000_0000)
            .build()
            .user_data(3),
    );
    let got = wait_sorted(&mut ring, 3);
    assert_eq!((got[0].res, got[1].res), (0, 0), "{got:?}");
    assert!(got[2].res < 0, "{got:?}");
    assert_eq!(f.metadata().unwrap().len(), 1 << 20);
}

#[test]
fn ftruncate_shrinks_and_extends() {
    let mut ring = ring(8);
    if !supports(&ring, sys::IORING_OP_FTRUNCATE, "FTRUNCATE") {
        return;
    }
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&[7u8; 10_000]).unwrap();
    push_plain(
        &mut ring,
        opcode::Ftruncate::new(Target::Fd(raw(&f)), 4096)
            .build()
            .user_data(1),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    assert_eq!(f.metadata().unwrap().len(), 4096);
    push_plain(
        &mut ring,
        opcode::Ftruncate::new(Target::Fd(raw(&f)), 1 << 20)
            .build()
            .user_data(2),
    );
    assert_eq!(wait_one(&mut ring).res, 0);
    assert_eq!(f.metadata().unwrap().len(), 1 << 20);
    // A length past what an off_t holds must reach the kernel and be
    // refused.
    push_plain(
        &mut ring,
        opcode::Ftruncate::new(Target::Fd(raw(&f)), u64::MAX)
            .build()
            .user_data(3),
    );
    assert_eq!(wait_one(&mut ring).res, neg(libc::EINVAL));
}

/// The kernel fact `ringkit::fs::File::write_at_sync` rests on: a write
/// linked to an fsync that comes up short fails the link, so the fsync
/// never runs and never reports success for bytes that were not written.
/// A short write is made real with `RLIMIT_FSIZE` (in a child process).
#[test]
fn short_linked_write_cancels_its_fsync() {
    // SAFETY: fork in a test; the child only makes syscalls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = std::panic::catch_unwind(short_write_child).map_or(1, |ok| i32::from(!ok));
        // SAFETY: leave the child without running the parent's atexit hooks.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status:#x}"
    );
}

fn short_write_child() -> bool {
    // SAFETY: plain syscalls.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let lim = libc::rlimit {
            rlim_cur: 6000,
            rlim_max: libc::RLIM_INFINITY,
        };
        libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
    }
    let mut ring = ring(8);
    let f = tempfile::tempfile().unwrap();
    let data = vec![7u8; 8192];
    let w = opcode::Write::new(Target::Fd(raw(&f)), data.as_ptr(), 8192)
        .build()
        .flags(SqeFlags::IO_LINK)
        .user_data(1);
    push_plain(&mut ring, w);
    push_plain(
        &mut ring,
        opcode::Fsync::new(Target::Fd(raw(&f))).build().user_data(2),
    );
    let got = wait_sorted(&mut ring, 2);
    // The write stops at the limit; the fsync is cancelled.
    got[0].res == 6000 && got[1].res == neg(libc::ECANCELED)
}

#[test]
fn mkdirat_renameat_unlinkat_change_names() {
    let mut ring = ring(8);
    let dir = tempfile::tempdir().unwrap();
    let dirf = std::fs::File::open(dir.path()).unwrap();
    let (d, a, b) = (
        CString::new("d").unwrap(),
        CString::new("d/a").unwrap(),
        CString::new("d/b").unwrap(),
    );
    // SAFETY: the names outlive each wait.
    unsafe {
        push(
            &mut ring,
            opcode::MkdirAt::new(raw(&dirf), d.as_ptr())
                .mode(0o700)
                .build(),
        )
    };
    assert_eq!(wait_sorted(&mut ring, 1)[0].res, 0);
    assert!(dir.path().join("d").is_dir());
    std::fs::write(dir.path().join("d/a"), b"x").unwrap();
    let r = opcode::RenameAt::new(raw(&dirf), a.as_ptr(), raw(&dirf), b.as_ptr());
    // SAFETY: as above.
    unsafe { push(&mut ring, r.build()) };
    assert_eq!(wait_sorted(&mut ring, 1)[0].res, 0);
    assert_eq!(std::fs::read(dir.path().join("d/b")).unwrap(), b"x");
    assert!(!dir.path().join("d/a").exists());
    // RENAME_NOREPLACE refuses an existing target.
    std::fs::write(dir.path().join("d/a"), b"y").unwrap();
    let r = opcode::RenameAt::new(raw(&dirf), a.as_ptr(), raw(&dirf), b.as_ptr()).flags(1);
    // SAFETY: as above.
    unsafe { push(&mut ring, r.build()) };
    assert_eq!(wait_sorted(&mut ring, 1)[0].res, neg(libc::EEXIST));
    for n in [&a, &b] {
        // SAFETY: as above.
        unsafe {
            push(
                &mut ring,
                opcode::UnlinkAt::new(raw(&dirf), n.as_ptr()).build(),
            )
        };
        assert_eq!(wait_sorted(&mut ring, 1)[0].res, 0);
    }
    let rm = opcode::UnlinkAt::new(raw(&dirf), d.as_ptr()).flags(libc::AT_REMOVEDIR);
    // SAFETY: as above.
    unsafe { push(&mut ring, rm.build()) };
    assert_eq!(wait_sorted(&mut ring, 1)[0].res, 0);
    assert!(!dir.path().join("d").exists());
}
