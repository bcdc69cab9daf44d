//! A study's results table, made once and rendered twice: as a markdown
//! table for report.md, and as the fixed-width table printed at the end of
//! a run (the columns not marked [`Col::md_only`], under their short
//! headers). Both show the same cells, so the terminal never says what the
//! report does not.

use std::fmt::Write as _;

/// One column: its header in report.md, its header on the terminal, and
/// how its cells align.
#[derive(Debug, Clone)]
pub struct Col {
    head: String,
    short: Option<String>,
    right: bool,
    md_only: bool,
}

impl Col {
    /// A left-aligned column (names, workloads, ranges).
    pub fn left(head: impl Into<String>) -> Col {
        Col {
            head: head.into(),
            short: None,
            right: false,
            md_only: false,
        }
    }

    /// A right-aligned column (figures).
    pub fn right(head: impl Into<String>) -> Col {
        Col {
            right: true,
            ..Col::left(head)
        }
    }

    /// The header on the terminal, where the report's is too long.
    pub fn short(mut self, head: impl Into<String>) -> Col {
        self.short = Some(head.into());
        self
    }

    /// Only in report.md, not on the terminal.
    pub fn md_only(mut self) -> Col {
        self.md_only = true;
        self
    }
}

/// Columns and rows of cells.
#[derive(Debug, Clone)]
pub struct Table {
    cols: Vec<Col>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table of these columns and no rows yet.
    pub fn new(cols: Vec<Col>) -> Table {
        Table {
            cols,
            rows: Vec::new(),
        }
    }

    /// A row, a cell per column.
    ///
    /// # Panics
    ///
    /// When the row has a different number of cells than there are
    /// columns: a study's table is wrong, not its data.
    pub fn row(&mut self, cells: Vec<String>) {
        assert_eq!(
            cells.len(),
            self.cols.len(),
            "a row of {} cells in a table of {} columns",
            cells.len(),
            self.cols.len()
        );
        self.rows.push(cells);
    }

    /// The markdown table: header, alignment row, rows.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut l = String::from("|");
            for c in cells {
                let _ = write!(l, " {c} |");
            }
            l
        };
        let _ = writeln!(
            s,
            "{}",
            line(&mut self.cols.iter().map(|c| c.head.as_str()))
        );
        let _ = writeln!(
            s,
            "|{}",
            self.cols
                .iter()
                .map(|c| if c.right { "---:|" } else { "---|" })
                .collect::<String>()
        );
        for r in &self.rows {
            let _ = writeln!(s, "{}", line(&mut r.iter().map(String::as_str)));
        }
        s
    }

    /// The terminal table: each shown column as wide as its widest cell,
    /// two spaces between columns, no trailing spaces.
    pub fn text(&self) -> String {
        let shown: Vec<usize> = (0..self.cols.len())
            .filter(|&i| !self.cols[i].md_only)
            .collect();
        let head: Vec<&str> = self
            .cols
            .iter()
            .map(|c| c.short.as_deref().unwrap_or(&c.head))
            .collect();
        let lines: Vec<Vec<&str>> = std::iter::once(head)
            .chain(
                self.rows
                    .iter()
                    .map(|r| r.iter().map(String::as_str).collect()),
            )
            .collect();
        let widths: Vec<usize> = shown
            .iter()
            .map(|&i| {
                lines
                    .iter()
                    .map(|l| l[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut s = String::new();
        for l in &lines {
            let mut out = String::new();
            for (k, &i) in shown.iter().enumerate() {
                let (c, w) = (l[i], widths[k]);
                if k > 0 {
                    out.push_str("  ");
                }
                if self.cols[i].right {
                    let _ = write!(out, "{c:>w$}");
                } else {
                    let _ = write!(out, "{c:<w$}");
                }
            }
            let _ = writeln!(s, "{}", out.trim_end());
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut t = Table::new(vec![
            Col::left("contender"),
            Col::right("requests per second").short("req/s"),
            Col::right("notes").md_only(),
        ]);
        t.row(vec!["ringkit-uring".into(), "123".into(), "x".into()]);
        t.row(vec!["tokio".into(), "98765".into(), "".into()]);
        t
    }

    #[test]
    fn markdown_has_every_column_aligned_as_declared() {
        assert_eq!(
            sample().markdown(),
            "| contender | requests per second | notes |\n|---|---:|---:|\n| ringkit-uring | 123 | x |\n| tokio | 98765 |  |\n"
        );
    }

    #[test]
    fn the_terminal_shows_the_same_cells_under_short_headers() {
        assert_eq!(
            sample().text(),
            "contender      req/s\nringkit-uring    123\ntokio          98765\n"
        );
    }

    #[test]
    #[should_panic(expected = "a row of 1 cells in a table of 3 columns")]
    fn a_row_of_the_wrong_width_is_a_bug() {
        sample().row(vec!["one".into()]);
    }
}
