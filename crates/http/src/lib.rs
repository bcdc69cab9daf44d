//! ringkit-http: HTTP/1.1 on the ringkit runtime (being built).
pub mod static_files;
