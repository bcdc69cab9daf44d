//! Median and range of a set of samples.

use serde::Serialize;

/// Median and range.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct Stat {
    /// Median.
    #[serde(deserialize_with = "nan_from_null")]
    pub median: f64,
    /// Minimum.
    #[serde(deserialize_with = "nan_from_null")]
    pub min: f64,
    /// Maximum.
    #[serde(deserialize_with = "nan_from_null")]
    pub max: f64,
}

/// Reads a figure back from results.json, where a NaN (not measured) was
/// written as `null`.
pub fn nan_from_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// Median, min and max of `v` (zeros when empty).
pub fn stat(mut v: Vec<f64>) -> Stat {
    if v.is_empty() {
        return Stat::default();
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Stat {
        median,
        min: v[0],
        max: v[n - 1],
    }
}
