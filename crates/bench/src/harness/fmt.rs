//! Report cells.

/// `v` with `prec` decimals, or "-" when absent (report cells).
pub fn opt(v: Option<f64>, prec: usize) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.prec$}"))
}

/// A ratio as "1.23x", or "-" when absent (report cells).
pub fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}x"))
}

/// A CPU a run was pinned to, or "(not recorded)" for a run from before
/// results.json kept it.
pub fn cpu(c: Option<usize>) -> String {
    c.map_or_else(|| "(not recorded)".to_string(), |c| c.to_string())
}

/// A ratio paired over rounds with its fewest and most: "1.02x
/// (0.76–1.12)", or "-" when absent (report cells).
pub fn paired(p: Option<super::stat::Stat>) -> String {
    p.map_or_else(
        || "-".to_string(),
        |p| format!("{:.2}x ({:.2}–{:.2})", p.median, p.min, p.max),
    )
}
