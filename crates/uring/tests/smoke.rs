use ringkit_uring::{opcode, sys, IoUring};

#[test]
fn nop_round_trip_and_flags() {
    for b in [
        IoUring::builder(8),
        IoUring::builder(8)
            .defer_taskrun()
            .no_sqarray()
            .register_ring_fd(true),
        IoUring::builder(8).coop_taskrun().taskrun_flag(),
        IoUring::builder(8).sqe128().cqe32(),
    ] {
        let mut ring = b.build().unwrap();
        for i in 0..8u64 {
            let e = opcode::Nop::new().build().user_data(i);
            // SAFETY: NOP references no memory.
            unsafe { ring.push(e.sqe()).unwrap() };
        }
        assert!(ring.sq().is_full());
        assert_eq!(ring.submit_and_wait(8).unwrap(), 8);
        let got: Vec<u64> = ring.completions().map(|c| c.user_data).collect();
        assert_eq!(got, (0..8).collect::<Vec<_>>());
        eprintln!(
            "flags {}",
            ringkit_uring::flag_names(ring.setup_flags(), sys::SETUP_FLAG_NAMES)
        );
    }
}
