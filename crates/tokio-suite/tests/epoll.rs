//! tokio's integration tests, each current-thread test body hosted in a
//! ringkit runtime on the epoll backend (see the crate docs).
#![allow(warnings, clippy::all, clippy::pedantic, clippy::nursery)]

ringkit_tokio_suite::hosted_tokio!(false);

include!(concat!(env!("OUT_DIR"), "/tokio-tests/suite.rs"));
