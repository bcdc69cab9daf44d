//! A runtime backend in results.json: its name (`uring`, `epoll`), both ways.

use ringkit::Backend;

/// Write the backend's name.
pub fn serialize<S: serde::Serializer>(b: &Backend, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(b)
}

/// Read a backend's name.
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Backend, D::Error> {
    let name = <String as serde::Deserialize>::deserialize(d)?;
    name.parse().map_err(serde::de::Error::custom)
}
