//! Grouped bar charts (SVG) for the wakeup, nop and file studies: one group
//! per label on the x axis, one coloured bar per series. Generalised from the
//! echo chart; used by every study's report.

use svg::node::element::{Line, Rectangle, Text};
use svg::Document;

/// One chart's data: `values[g][s]` is series `s` in group `g` (`None`: no bar).
#[derive(Debug, Clone, Default)]
pub struct Bars {
    /// Title (the unit is appended in parentheses).
    pub title: String,
    /// Unit of the y axis.
    pub unit: String,
    /// Group labels (x axis).
    pub groups: Vec<String>,
    /// Series names (legend).
    pub series: Vec<String>,
    /// `values[group][series]`.
    pub values: Vec<Vec<Option<f64>>>,
}

pub(crate) const COLORS: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

impl Bars {
    /// Build from summary rows: groups and series in order of first
    /// appearance; a (group, series) pair without a row gets no bar.
    pub fn from_rows<T>(
        title: &str,
        unit: &str,
        rows: &[T],
        group: impl Fn(&T) -> String,
        series: impl Fn(&T) -> String,
        value: impl Fn(&T) -> f64,
    ) -> Bars {
        let mut b = Bars {
            title: title.into(),
            unit: unit.into(),
            ..Default::default()
        };
        for r in rows {
            let (g, s) = (group(r), series(r));
            if !b.groups.contains(&g) {
                b.groups.push(g);
            }
            if !b.series.contains(&s) {
                b.series.push(s);
            }
        }
        b.values = vec![vec![None; b.series.len()]; b.groups.len()];
        for r in rows {
            let gi = b.groups.iter().position(|g| *g == group(r));
            let si = b.series.iter().position(|s| *s == series(r));
            if let (Some(gi), Some(si)) = (gi, si) {
                b.values[gi][si] = Some(value(r));
            }
        }
        b
    }

    /// Render as an SVG document.
    pub fn svg(&self) -> String {
        let legend_rows = self.series.len().div_ceil(4).max(1) as f64;
        let (w, left, top) = (900.0, 70.0, 40.0);
        let bottom = 50.0 + 18.0 * legend_rows;
        let h = 380.0 + 18.0 * legend_rows;
        let max = self
            .values
            .iter()
            .flatten()
            .flatten()
            .fold(0.0f64, |a, &v| a.max(v))
            .max(1e-9)
            * 1.1;
        let plot_h = h - top - bottom;
        let group_w = (w - left - 20.0) / self.groups.len().max(1) as f64;
        let bar_w = (group_w - 16.0) / self.series.len().max(1) as f64;
        let mut doc = canvas(w, h, left, &format!("{} ({})", self.title, self.unit));
        for i in 0..=4 {
            let v = max * i as f64 / 4.0;
            let y = h - bottom - plot_h * i as f64 / 4.0;
            doc = doc
                .add(Text::new(short(v)).set("x", 5).set("y", y + 4.0))
                .add(
                    Line::new()
                        .set("x1", left)
                        .set("y1", y)
                        .set("x2", w - 10.0)
                        .set("y2", y)
                        .set("stroke", if i == 0 { "black" } else { "#ddd" }),
                );
        }
        for (gi, g) in self.groups.iter().enumerate() {
            let gx = left + 8.0 + gi as f64 * group_w;
            doc = doc.add(
                Text::new(g.clone())
                    .set("x", gx + group_w / 2.0)
                    .set("y", h - bottom + 16.0)
                    .set("text-anchor", "middle"),
            );
            for (si, v) in self.values.get(gi).into_iter().flatten().enumerate() {
                let Some(v) = v else { continue };
                let bh = plot_h * v / max;
                doc = doc.add(
                    Rectangle::new()
                        .set("x", gx + si as f64 * bar_w)
                        .set("y", h - bottom - bh)
                        .set("width", (bar_w - 2.0).max(1.0))
                        .set("height", bh)
                        .set("fill", COLORS[si % COLORS.len()]),
                );
            }
        }
        for (si, n) in self.series.iter().enumerate() {
            doc = legend(doc, si, n, left, h, legend_rows);
        }
        doc.to_string()
    }
}

/// A white chart of `w` x `h` with its title at `left`.
pub(crate) fn canvas(w: f64, h: f64, left: f64, title: &str) -> Document {
    Document::new()
        .set("viewBox", (0, 0, w as i64, h as i64))
        .set("width", w)
        .set("height", h)
        .set("font-family", "sans-serif")
        .set("font-size", 11)
        .add(
            Rectangle::new()
                .set("width", w)
                .set("height", h)
                .set("fill", "white"),
        )
        .add(
            Text::new(title.to_string())
                .set("x", left)
                .set("y", 20)
                .set("font-size", 14),
        )
}

/// Series `si`'s legend entry (four to a row, below the plot), in its
/// colour.
pub(crate) fn legend(
    doc: Document,
    si: usize,
    name: &str,
    left: f64,
    h: f64,
    rows: f64,
) -> Document {
    let x = left + (si % 4) as f64 * 205.0;
    let y = h - 18.0 * rows + 18.0 * (si / 4) as f64 - 6.0;
    doc.add(
        Rectangle::new()
            .set("x", x)
            .set("y", y - 9.0)
            .set("width", 10)
            .set("height", 10)
            .set("fill", COLORS[si % COLORS.len()]),
    )
    .add(Text::new(name.to_string()).set("x", x + 14.0).set("y", y))
}

/// A compact axis label: 1.2M, 35k, 12.5.
pub(crate) fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_bars_and_legend() {
        let b = Bars {
            title: "t".into(),
            unit: "ns".into(),
            groups: vec!["g1".into(), "g2".into()],
            series: vec!["a".into(), "b".into()],
            values: vec![vec![Some(1.0), None], vec![Some(2.0), Some(3.0)]],
        };
        let s = b.svg();
        assert!(s.starts_with("<svg"));
        // Background + 3 bars + 2 legend swatches.
        assert_eq!(s.matches("<rect").count(), 6);
        assert!(s.contains("g2") && s.contains("ns)"));
        assert_eq!(short(2_500_000.0), "2.5M");
        assert_eq!(short(35_000.0), "35k");
    }
}
