//! Peer servers for `ringkit compare`: the same echo logic as `ringkit echo`
//! (read up to 4 KiB, write it all back, TCP_NODELAY) on tokio's
//! current-thread runtime, on monoio (io_uring driver, or its legacy epoll
//! driver) and on glommio (its executor, unpinned: it runs where the
//! process is pinned). One thread each; `ringkit compare` pins the process.
//!
//! `hyper-http` is the HTTP peer: hyper 1 on tokio's current-thread runtime,
//! HTTP/1.1 keep-alive, every request answered `200` with an empty body (like
//! nginx `return 200;`). An optional PAD adds an `x-pad` header that makes
//! each response exactly PAD bytes longer (as `ringkit http --pad`), so the
//! study can send nginx's response size from every server.
//!
//! `axum-http` is the axum peer: `ringkit_hyper::hello::app()` (the same
//! app `ringkit axum` serves) with `axum::serve` on tokio's current-thread
//! runtime, TCP_NODELAY on every connection.
//!
//! `axum-https ADDR CERT KEY` is the same app over TLS on tokio: rustls
//! (ring provider, ALPN h2 and http/1.1, the configuration ringkit's
//! servers load) through tokio-rustls, each connection served by
//! hyper-util's auto builder, as axum's own TLS example does.
//!
//! `openraft-node` is a node of the replicated map of `ringkit raft` on
//! openraft's tokio runtime, its log an append file ([`raft`]).
//!
//! Usage: `ringkit-peer openraft-node --id N --listen ADDR --dir D ...`,
//! or `ringkit-peer tokio-echo|monoio-echo|monoio-legacy-echo|glommio-echo|hyper-http|axum-http ADDR [PAD]`

use std::net::SocketAddr;

mod raft;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("openraft-node") {
        if let Err(e) = raft::main(&args[2..]) {
            eprintln!("ringkit-peer: openraft-node: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("axum-https") {
        let res = match (args.get(2).map(|a| a.parse()), args.get(3), args.get(4)) {
            (Some(Ok(addr)), Some(cert), Some(key)) if args.len() == 5 => {
                axum_https(addr, cert.as_ref(), key.as_ref())
            }
            _ => {
                eprintln!("usage: ringkit-peer axum-https ADDR CERT KEY");
                std::process::exit(2);
            }
        };
        if let Err(e) = res {
            eprintln!("ringkit-peer: {e}");
            std::process::exit(1);
        }
        return;
    }
    if args.len() != 3 && !(args.len() == 4 && args[1] == "hyper-http") {
        eprintln!(
            "usage: ringkit-peer tokio-echo|monoio-echo|monoio-legacy-echo|glommio-echo|hyper-http|axum-http ADDR \
             (hyper-http: ADDR [PAD])"
        );
        std::process::exit(2);
    }
    let pad: usize = match args.get(3).map(|p| p.parse()) {
        None => 0,
        Some(Ok(p)) if p == 0 || p >= 10 => p,
        Some(_) => {
            eprintln!("ringkit-peer: PAD must be 0 or at least 10 bytes");
            std::process::exit(2);
        }
    };
    let addr: SocketAddr = match args[2].parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ringkit-peer: bad address {}: {e}", args[2]);
            std::process::exit(2);
        }
    };
    let res = match args[1].as_str() {
        "tokio-echo" => tokio_echo(addr),
        "hyper-http" => hyper_http(addr, pad),
        "axum-http" => axum_http(addr),
        "monoio-echo" => monoio::RuntimeBuilder::<monoio::IoUringDriver>::new()
            .build()
            .and_then(|mut rt| rt.block_on(monoio_echo(addr, "monoio io_uring"))),
        "glommio-echo" => glommio_echo(addr),
        "monoio-legacy-echo" => monoio::RuntimeBuilder::<monoio::LegacyDriver>::new()
            .build()
            .and_then(|mut rt| rt.block_on(monoio_echo(addr, "monoio legacy (epoll)"))),
        other => {
            eprintln!("ringkit-peer: unknown server {other}");
            std::process::exit(2);
        }
    };
    if let Err(e) = res {
        eprintln!("ringkit-peer: {e}");
        std::process::exit(1);
    }
}

fn tokio_echo(addr: SocketAddr) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("ringkit-peer: tokio current_thread echo on {addr}");
        loop {
            let (mut s, _) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("accept: {e}");
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    let n = match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    })
}

/// hyper 1 HTTP/1.1 server on tokio current_thread: `200`, empty body, for
/// every request; keep-alive unless the client asks to close.
fn axum_http(addr: SocketAddr) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(addr).await?.tap_io(|s| {
            let _ = s.set_nodelay(true);
        });
        eprintln!("ringkit-peer: axum 0.8 (hello app) on tokio current_thread on {addr}");
        axum::serve(l, ringkit_hyper::hello::app()).await
    })
}

/// The hello app over TLS on tokio current_thread (see the module docs).
fn axum_https(
    addr: SocketAddr,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto;
    use hyper_util::service::TowerToHyperService;
    let cfg = ringkit_hyper::tls::server_config(cert, key, &[b"h2", b"http/1.1"])?;
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()?;
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "ringkit-peer: axum 0.8 (hello app) over rustls on tokio current_thread on {addr}"
        );
        let app = ringkit_hyper::hello::app();
        loop {
            let (s, _) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("accept: {e}");
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            let (acceptor, app) = (acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(s).await else {
                    return;
                };
                let svc = TowerToHyperService::new(app);
                let _ = auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    })
}

fn hyper_http(addr: SocketAddr, pad: usize) -> std::io::Result<()> {
    use http_body_util::Empty;
    use hyper::body::{Bytes, Incoming};
    use hyper::{Request, Response};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?;
    // "x-pad: " (7) + value + CRLF (2) = pad bytes more per response.
    let value: &'static str = "p".repeat(pad.saturating_sub(9)).leak();
    rt.block_on(async move {
        let l = tokio::net::TcpListener::bind(addr).await?;
        eprintln!("ringkit-peer: hyper 1 HTTP/1.1 on tokio current_thread on {addr} (pad {pad})");
        loop {
            let (s, _) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("accept: {e}");
                    // EMFILE and friends: do not spin.
                    tokio::task::yield_now().await;
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req: Request<Incoming>| async move {
                    let mut r = Response::new(Empty::<Bytes>::new());
                    if pad > 0 {
                        r.headers_mut()
                            .insert("x-pad", hyper::header::HeaderValue::from_static(value));
                    }
                    Ok::<_, std::convert::Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    })
}

async fn monoio_echo(addr: SocketAddr, name: &str) -> std::io::Result<()> {
    use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
    {
        let l = monoio::net::TcpListener::bind(addr)?;
        eprintln!("ringkit-peer: {name} echo on {addr}");
        loop {
            let (s, _) = match l.accept().await {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("accept: {e}");
                    continue;
                }
            };
            let _ = s.set_nodelay(true);
            monoio::spawn(async move {
                let mut s = s;
                let mut buf: Vec<u8> = Vec::with_capacity(4096);
                loop {
                    let (res, b) = s.read(buf).await;
                    buf = b;
                    match res {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let (res, b) = s.write_all(buf).await;
                    buf = b;
                    if res.is_err() {
                        return;
                    }
                    buf.clear();
                }
            });
        }
    }
}

/// The echo on glommio: one executor (unpinned, `Placement::Unbound`: the
/// process is pinned by `ringkit compare`), a task per connection, read up
/// to 4 KiB and write it all back. Its rings are 512 deep (glommio's
/// default is 128, a 256-entry completion queue, which a thousand
/// connections' pending polls can overflow; ringkit's server has 1024).
fn glommio_echo(addr: SocketAddr) -> std::io::Result<()> {
    use futures_lite::{AsyncReadExt, AsyncWriteExt};
    let h = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name("glommio-echo")
        .ring_depth(512)
        .spawn(move || async move {
            let l = glommio::net::TcpListener::bind(addr)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            eprintln!("ringkit-peer: glommio echo on {addr}");
            loop {
                let mut s = match l.accept().await {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("accept: {e}");
                        continue;
                    }
                };
                let _ = s.set_nodelay(true);
                glommio::spawn_local(async move {
                    let mut buf = vec![0u8; 4096];
                    loop {
                        let n = match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if s.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                })
                .detach();
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    h.join().map_err(|e| std::io::Error::other(e.to_string()))?
}
