//! Line charts (SVG) of a figure against load: one line per series over a
//! shared x axis, the y axis logarithmic (latencies span decades). Used by
//! the latency study.

use svg::node::element::{Circle, Line, Polyline, Text};

use super::bars::{canvas, legend, short, COLORS};

/// One chart: `series[s].1[i]` is the value at `x[i]` (`None`: no point).
#[derive(Debug, Clone, Default)]
pub struct Curves {
    /// Title (the unit is appended in parentheses).
    pub title: String,
    /// Unit of the y axis.
    pub unit: String,
    /// Label of the x axis.
    pub x_label: String,
    /// x positions (in order) and their labels.
    pub x: Vec<(f64, String)>,
    /// Name and values of each series.
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

impl Curves {
    /// Render as an SVG document.
    pub fn svg(&self) -> String {
        let legend_rows = self.series.len().div_ceil(4).max(1) as f64;
        let (w, left, top, right) = (900.0, 70.0, 40.0, 20.0);
        let bottom = 60.0 + 18.0 * legend_rows;
        let h = 400.0 + 18.0 * legend_rows;
        let vals: Vec<f64> = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .filter(|v| *v > 0.0)
            .collect();
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(0.0f64, f64::max);
        let (lo, hi) = if vals.is_empty() {
            (1.0, 10.0)
        } else {
            (
                10f64.powf(lo.log10().floor()),
                10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0)),
            )
        };
        let (xmin, xmax) = match (self.x.first(), self.x.last()) {
            (Some(a), Some(b)) if b.0 > a.0 => (a.0, b.0),
            _ => (0.0, 1.0),
        };
        let plot_w = w - left - right;
        let plot_h = h - top - bottom;
        let px = |x: f64| left + plot_w * (x - xmin) / (xmax - xmin);
        let py =
            |v: f64| h - bottom - plot_h * (v.log10() - lo.log10()) / (hi.log10() - lo.log10());
        let title = format!("{} ({}, log scale)", self.title, self.unit);
        let mut doc = canvas(w, h, left, &title);
        let decades = (hi.log10() - lo.log10()).round() as i32;
        for d in 0..=decades {
            let v = lo * 10f64.powi(d);
            let y = py(v);
            doc = doc
                .add(Text::new(short(v)).set("x", 5).set("y", y + 4.0))
                .add(
                    Line::new()
                        .set("x1", left)
                        .set("y1", y)
                        .set("x2", w - right)
                        .set("y2", y)
                        .set("stroke", if d == 0 { "black" } else { "#ddd" }),
                );
        }
        for (x, label) in &self.x {
            doc = doc.add(
                Text::new(label.clone())
                    .set("x", px(*x))
                    .set("y", h - bottom + 16.0)
                    .set("text-anchor", "middle"),
            );
        }
        doc = doc.add(
            Text::new(self.x_label.clone())
                .set("x", left + plot_w / 2.0)
                .set("y", h - bottom + 34.0)
                .set("text-anchor", "middle"),
        );
        for (si, (name, values)) in self.series.iter().enumerate() {
            let color = COLORS[si % COLORS.len()];
            let pts: Vec<(f64, f64)> = self
                .x
                .iter()
                .zip(values)
                .filter_map(|((x, _), v)| v.filter(|v| *v > 0.0).map(|v| (px(*x), py(v))))
                .collect();
            let line = pts
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect::<Vec<_>>()
                .join(" ");
            doc = doc.add(
                Polyline::new()
                    .set("points", line)
                    .set("fill", "none")
                    .set("stroke", color)
                    .set("stroke-width", 2),
            );
            for (x, y) in pts {
                doc = doc.add(
                    Circle::new()
                        .set("cx", x)
                        .set("cy", y)
                        .set("r", 3)
                        .set("fill", color),
                );
            }
            doc = legend(doc, si, name, left, h, legend_rows);
        }
        doc.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_lines_points_and_decades() {
        let c = Curves {
            title: "p99".into(),
            unit: "µs".into(),
            x_label: "load".into(),
            x: vec![
                (25.0, "25%".into()),
                (50.0, "50%".into()),
                (90.0, "90%".into()),
            ],
            series: vec![
                ("a".into(), vec![Some(50.0), Some(80.0), Some(900.0)]),
                ("b".into(), vec![Some(60.0), None, Some(5000.0)]),
            ],
        };
        let s = c.svg();
        assert!(s.starts_with("<svg"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert_eq!(s.matches("<circle").count(), 5);
        // 50 .. 5000 spans the decades 10, 100, 1000, 10 000: four lines.
        assert_eq!(s.matches("<line").count(), 4);
        assert!(s.contains("90%") && s.contains("log scale"));
    }
}
