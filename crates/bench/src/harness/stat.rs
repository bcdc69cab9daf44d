//! Median and range of a set of samples.

use serde::Serialize;

/// Median and range.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize)]
pub struct Stat {
    /// Median.
    pub median: f64,
    /// Minimum.
    pub min: f64,
    /// Maximum.
    pub max: f64,
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
