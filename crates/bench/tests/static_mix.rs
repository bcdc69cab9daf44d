//! The built-in generator's random mix against ringkit's static file server
//! on loopback, on both backends: a tree written by `compare static`'s
//! builder, asked for at random, checks clean; a list that gets one file's
//! length wrong makes the run fail. No timed asserts.

use std::sync::Arc;
use std::time::Duration;

use ringkit_bench::http::load::{self, HttpLoadConfig, HttpLoadResult, Target};
use ringkit_bench::serve::tree;
use ringkit_http::static_files::StaticFiles;
use ringkit_http::Server;

/// Serve `root` on this runtime while the generator asks for `mix` from
/// another thread with the same backend.
async fn run(root: &std::path::Path, mix: Vec<Target>) -> HttpLoadResult {
    let server = Server::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let files = StaticFiles::new(root).unwrap();
    let task = ringkit::spawn(async move {
        let _ = server.serve(files).await;
    });
    let mut cfg = HttpLoadConfig::new(addr, 8, Duration::from_millis(400));
    cfg.mix = Some(Arc::from(mix));
    cfg.backend = ringkit::backend_report().expect("inside a runtime").chosen;
    let gen = std::thread::spawn(move || load::run_load(&cfg, &mut |_| {}));
    while !gen.is_finished() {
        ringkit::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    gen.join().expect("generator thread").expect("load run")
}

ringkit::test_all! {
    async fn a_random_mix_checks_every_length() {
        let t = tempfile::tempdir().unwrap();
        let built = tree::build(&t.path().join("www"), 60, 9, &t.path().join("mix.txt")).unwrap();
        let r = run(&built.root, built.mix.clone()).await;
        assert!(r.ok(), "{r:?}");
        // Many different sizes came back, each checked against its own.
        assert!(r.responses > 60, "{r:?}");

        let mut wrong = built.mix.clone();
        wrong[0].body_len += 1;
        // Only the wrong one, so the run is sure to ask for it.
        let r = run(&built.root, vec![wrong[0].clone(), wrong[1].clone()]).await;
        assert!(!r.ok());
        assert!(r.bad_body > 0, "{r:?}");
        assert_eq!(r.bad_status, 0, "{r:?}");
    }
}
