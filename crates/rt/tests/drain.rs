//! `sync::Drain`: connections (tasks on sockets) learn of the drain at
//! once, and `drained` resolves exactly when the last guard goes.

use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use ringkit::net::{TcpListener, TcpStream};
use ringkit::sync::Drain;

ringkit::test_all! {
    async fn idle_connections_wake_and_drained_waits_for_the_last() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let drain = Drain::new();
        assert!(!drain.is_draining());
        // A drained() with nobody in is ready at once.
        ringkit::time::timeout(Duration::from_secs(1), drain.drained()).await.unwrap();
        let mut clients = Vec::new();
        let mut tasks = Vec::new();
        for i in 0..3u64 {
            clients.push(TcpStream::connect(addr).await.unwrap());
            let s = l.accept_stream().await.unwrap();
            let guard = drain.enter();
            // Each connection waits on a read (nothing is sent) raced
            // against the drain, like a server's idle connection.
            tasks.push(ringkit::spawn(async move {
                let mut read = std::pin::pin!(s.read(Vec::with_capacity(16)));
                let drained = poll_fn(|cx| {
                    if guard.poll_draining(cx).is_ready() {
                        return Poll::Ready(true);
                    }
                    read.as_mut().poll(cx).map(|_| false)
                })
                .await;
                assert!(drained, "connection {i} got data, not the drain");
                // The last one lingers a little: drained() must wait for it.
                if i == 2 {
                    ringkit::time::sleep(Duration::from_millis(100)).await;
                }
                drop(guard);
            }));
        }
        ringkit::yield_now().await;
        assert_eq!(drain.active(), 3);
        let t = Instant::now();
        drain.start();
        assert!(drain.is_draining());
        ringkit::time::timeout(Duration::from_secs(5), drain.drained())
            .await
            .expect("every guard dropped within 5 s");
        assert!(t.elapsed() >= Duration::from_millis(90), "drained before the last guard went");
        assert_eq!(drain.active(), 0);
        for t in tasks {
            t.await.unwrap();
        }
        // A guard taken after the start sees the drain at once.
        let late = drain.enter();
        poll_fn(|cx| late.poll_draining(cx)).await;
        drop(late);
        drop(clients);
    }

    async fn slots_are_reused_and_set_waker_is_woken() {
        let drain = Drain::new();
        let woken = Rc::new(std::cell::Cell::new(false));
        let guards: Vec<_> = (0..100).map(|_| drain.enter()).collect();
        drop(guards);
        assert_eq!(drain.active(), 0);
        let g = drain.enter();
        let w = woken.clone();
        let task = ringkit::spawn(async move {
            // Register once, then check the flag whenever woken.
            let waker = poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
            g.set_waker(waker);
            poll_fn(|_| {
                if g.drain().is_draining() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
            w.set(true);
        });
        ringkit::yield_now().await;
        assert!(!woken.get());
        drain.start();
        ringkit::time::timeout(Duration::from_secs(5), task).await.unwrap().unwrap();
        assert!(woken.get());
    }
}
