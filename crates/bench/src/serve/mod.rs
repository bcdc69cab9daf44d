//! `ringkit compare static`: nginx and `ringkit serve` serving files, side
//! by side. The measuring machinery is the HTTP study's (interleaved,
//! rotated rounds, server pinned, CPU from /proc, syscalls counted); this
//! study adds the document tree ([`tree`]) and its own contenders and
//! workloads ([`study()`]).

mod study;
pub mod tree;

pub use study::study;
