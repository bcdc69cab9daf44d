//! The messages of `demo.proto`, by hand (prost's derive; no protoc).
//! Shared with the tests, which call the service with tonic's client.

#![allow(dead_code)]

/// The service's name; methods are `/{SERVICE}/Say` and `/{SERVICE}/Count`.
pub const SERVICE: &str = "ringkit.demo.Demo";

#[derive(Clone, PartialEq, prost::Message)]
pub struct SayRequest {
    #[prost(string, tag = "1")]
    pub name: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SayReply {
    #[prost(string, tag = "1")]
    pub message: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CountRequest {
    #[prost(uint32, tag = "1")]
    pub to: u32,
    #[prost(uint32, tag = "2")]
    pub interval_ms: u32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct CountReply {
    #[prost(uint32, tag = "1")]
    pub n: u32,
}
