//! gRPC with tonic over ringkit-hyper's HTTP/2 (hosted mode): the
//! `axum_app` example's `ringkit.demo.Demo`, called by tonic's client, on
//! both backends. A unary call, an error status, a server stream, 50 calls
//! at once on one connection, and a client that cancels mid-stream, after
//! which no producer is left running.

#[path = "../../hyper/examples/axum_app/proto.rs"]
mod proto;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use proto::{CountReply, CountRequest, SayReply, SayRequest, SERVICE};
use ringkit_bench::harness::services::{self, free_port, wait_for_port, Proc};
use tonic_prost::ProstCodec;

fn path(method: &str) -> PathAndQuery {
    format!("/{SERVICE}/{method}").parse().unwrap()
}

fn grpc(backend: &str) {
    let Some(bin) = services::built_example("axum_app") else {
        return;
    };
    let port = free_port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    // No database, Redis or upstream needed: those connect on first use.
    let _app = Proc(
        Command::new(bin)
            .args(["--addr", &addr.to_string(), "--backend", backend])
            .args([
                "--pg",
                "postgres://x@127.0.0.1:1/x",
                "--redis",
                "redis://127.0.0.1:1/",
            ])
            .args(["--upstream", "http://127.0.0.1:1/"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(wait_for_port(addr, Duration::from_secs(20)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = tonic::client::Grpc::new(channel.clone());
        c.ready().await.unwrap();
        let r: tonic::Response<SayReply> = c
            .unary(
                tonic::Request::new(SayRequest {
                    name: "ringkit".into(),
                }),
                path("Say"),
                ProstCodec::default(),
            )
            .await
            .unwrap();
        assert_eq!(r.into_inner().message, "Hello, ringkit!");

        c.ready().await.unwrap();
        let e = c
            .unary::<SayRequest, SayReply, _>(
                tonic::Request::new(SayRequest {
                    name: String::new(),
                }),
                path("Say"),
                ProstCodec::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);

        c.ready().await.unwrap();
        let mut s = c
            .server_streaming::<CountRequest, CountReply, _>(
                tonic::Request::new(CountRequest {
                    to: 5,
                    interval_ms: 1,
                }),
                path("Count"),
                ProstCodec::default(),
            )
            .await
            .unwrap()
            .into_inner();
        let mut got = Vec::new();
        while let Some(m) = s.message().await.unwrap() {
            got.push(m.n);
        }
        assert_eq!(got, [1, 2, 3, 4, 5]);

        // 50 calls at once on the one HTTP/2 connection.
        let calls = (0..50).map(|i| {
            let mut c = tonic::client::Grpc::new(channel.clone());
            async move {
                c.ready().await.unwrap();
                let r: tonic::Response<SayReply> = c
                    .unary(
                        tonic::Request::new(SayRequest {
                            name: format!("n{i}"),
                        }),
                        path("Say"),
                        ProstCodec::default(),
                    )
                    .await
                    .unwrap();
                assert_eq!(r.into_inner().message, format!("Hello, n{i}!"));
            }
        });
        let handles: Vec<_> = calls.map(tokio::spawn).collect();
        for h in handles {
            h.await.unwrap();
        }

        // Cancel mid-stream: take 3 of 1000, drop the stream.
        c.ready().await.unwrap();
        let mut s = c
            .server_streaming::<CountRequest, CountReply, _>(
                tonic::Request::new(CountRequest {
                    to: 1000,
                    interval_ms: 10,
                }),
                path("Count"),
                ProstCodec::default(),
            )
            .await
            .unwrap()
            .into_inner();
        for want in 1..=3 {
            assert_eq!(s.message().await.unwrap().unwrap().n, want);
        }
        drop(s);
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            let live = http
                .get(format!("http://{addr}/grpc/live"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            if live == "0" {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{live} stream producers still running 5 s after the client cancelled"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn tonic_over_ringkit_uring() {
    grpc("uring");
}

#[test]
fn tonic_over_ringkit_epoll() {
    grpc("epoll");
}
