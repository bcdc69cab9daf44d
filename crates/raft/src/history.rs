//! A history checker for one list-append key (Jepsen's list-append on a
//! single key): clients append unique elements and read the whole list;
//! a final read, once the faults are over, gives the list. The check
//! finds lost, phantom, duplicated and reordered writes and stale or
//! non-linearizable reads:
//!
//! - every acknowledged append is in the final list, at the position its
//!   acknowledgement named (the list's length after it);
//! - nothing is in the list that was refused or never appended, and
//!   nothing twice;
//! - an append acknowledged before another began comes before it;
//! - every read is a prefix of the final list, holds every append
//!   acknowledged before the read began and none begun after it ended,
//!   and is no shorter than any read that ended before it began.
//!
//! Appends whose outcome is unknown (sent, no answer) may be in the list
//! or not; if in it, they are held to the same order rules as the
//! others from the point they began.

use std::collections::HashMap;

/// What one client operation did, with when it began and ended (any
/// monotonic clock, e.g. microseconds since the run began).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// An append of `value`.
    Append {
        /// When it was sent.
        begin: u64,
        /// When its outcome was known.
        end: u64,
        /// The element.
        value: String,
        /// What became of it.
        outcome: Outcome,
    },
    /// A read that returned `list`.
    Read {
        /// When it was sent.
        begin: u64,
        /// When it returned.
        end: u64,
        /// The list it saw.
        list: Vec<String>,
    },
}

/// What became of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged: the list had this many elements after it.
    Ok(usize),
    /// Certainly not carried out.
    Refused,
    /// Unknown.
    Unknown,
}

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Operations checked.
    pub ops: usize,
    /// Appends acknowledged, and reads that returned.
    pub acked: usize,
    /// Reads checked.
    pub reads: usize,
    /// Everything wrong (empty: the history is sound).
    pub violations: Vec<String>,
}

/// Check `ops` against `final_list`.
pub fn check(ops: &[Op], final_list: &[String]) -> Verdict {
    let mut v = Verdict {
        ops: ops.len(),
        ..Verdict::default()
    };
    let mut pos: HashMap<&str, usize> = HashMap::new();
    for (i, e) in final_list.iter().enumerate() {
        if pos.insert(e, i).is_some() {
            v.violations.push(format!("{e} is in the list twice"));
        }
    }
    let mut appended: HashMap<&str, (u64, Outcome)> = HashMap::new();
    for op in ops {
        if let Op::Append {
            begin,
            value,
            outcome,
            ..
        } = op
        {
            if appended.insert(value, (*begin, *outcome)).is_some() {
                v.violations.push(format!(
                    "{value} was appended twice: the history's elements must be unique"
                ));
            }
        }
    }
    for e in final_list {
        match appended.get(e.as_str()) {
            None => v
                .violations
                .push(format!("{e} is in the list but was never appended")),
            Some((_, Outcome::Refused)) => v
                .violations
                .push(format!("{e} is in the list but its append was refused")),
            _ => {}
        }
    }
    // Acknowledged appends: present, where their acknowledgement said.
    let mut acked: Vec<(u64, u64, usize)> = Vec::new(); // (end, begin, position)
    for op in ops {
        if let Op::Append {
            begin,
            end,
            value,
            outcome: Outcome::Ok(len),
        } = op
        {
            v.acked += 1;
            match pos.get(value.as_str()) {
                None => v.violations.push(format!("acknowledged {value} is lost")),
                Some(&p) if p + 1 != *len => v.violations.push(format!(
                    "{value} was acknowledged as element {len} but is element {}",
                    p + 1
                )),
                Some(&p) => acked.push((*end, *begin, p)),
            }
        }
    }
    // Real-time order: what was acknowledged before an append began lies
    // before it. Sweep appends by start, the acknowledged by end.
    acked.sort_unstable();
    let mut starts: Vec<(u64, usize, &str)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Append { begin, value, .. } => {
                pos.get(value.as_str()).map(|&p| (*begin, p, &**value))
            }
            _ => None,
        })
        .collect();
    starts.sort_unstable();
    let (mut k, mut highest) = (0, None::<usize>);
    for (begin, p, value) in starts {
        while k < acked.len() && acked[k].0 < begin {
            highest = highest.max(Some(acked[k].2));
            k += 1;
        }
        if let Some(h) = highest.filter(|&h| h >= p) {
            v.violations.push(format!(
                "{value} (element {}) began after element {} was acknowledged, yet comes first",
                p + 1,
                h + 1
            ));
        }
    }
    // Reads: prefixes of the final list holding what was acknowledged
    // before they began, nothing appended after they ended, and no less
    // than a read that ended before they began.
    let mut reads: Vec<(u64, u64, &Vec<String>)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Read { begin, end, list } => Some((*begin, *end, list)),
            _ => None,
        })
        .collect();
    // The latest start among the appends of each prefix of the list.
    let mut latest = Vec::with_capacity(final_list.len());
    let mut m = 0u64;
    for e in final_list {
        m = m.max(appended.get(e.as_str()).map_or(0, |a| a.0));
        latest.push(m);
    }
    let mut by_end: Vec<(u64, usize)> = reads.iter().map(|r| (r.1, r.2.len())).collect();
    by_end.sort_unstable();
    let (mut j, mut longest) = (0, 0usize);
    reads.sort_unstable_by_key(|r| r.0);
    let (mut k, mut must) = (0, 0usize);
    for (begin, end, list) in reads {
        while j < by_end.len() && by_end[j].0 < begin {
            longest = longest.max(by_end[j].1);
            j += 1;
        }
        if list.len() < longest {
            v.violations.push(format!(
                "a read went back: {} elements, after a read of {longest} had ended",
                list.len()
            ));
        }
        v.reads += 1;
        v.acked += 1;
        if list.len() > final_list.len() || list[..] != final_list[..list.len()] {
            let at = list
                .iter()
                .zip(final_list)
                .position(|(a, b)| a != b)
                .unwrap_or(final_list.len());
            v.violations.push(format!(
                "a read of {} elements is not a prefix of the final list (differs at element {})",
                list.len(),
                at + 1
            ));
            continue;
        }
        while k < acked.len() && acked[k].0 < begin {
            must = must.max(acked[k].2 + 1);
            k += 1;
        }
        if list.len() < must {
            v.violations.push(format!(
                "a stale read: {} elements, but element {must} was acknowledged before it began",
                list.len()
            ));
        }
        if let Some(&b) = list.len().checked_sub(1).and_then(|i| latest.get(i)) {
            if b >= end {
                v.violations.push(format!(
                    "a read that ended at {end} saw an element whose append began at {b}"
                ));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(begin: u64, end: u64, value: &str, outcome: Outcome) -> Op {
        Op::Append {
            begin,
            end,
            value: value.into(),
            outcome,
        }
    }

    fn read(begin: u64, end: u64, list: &[&str]) -> Op {
        Op::Read {
            begin,
            end,
            list: list.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn list(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_sound_history_passes() {
        let ops = vec![
            app(0, 10, "a", Outcome::Ok(1)),
            app(5, 20, "b", Outcome::Ok(2)),
            app(6, 30, "c", Outcome::Unknown),
            app(7, 8, "x", Outcome::Refused),
            read(11, 12, &["a"]),
            read(21, 25, &["a", "b"]),
        ];
        let v = check(&ops, &list(&["a", "b", "c"]));
        assert!(v.violations.is_empty(), "{v:?}");
        // An unknown append may also be missing.
        let v = check(&ops, &list(&["a", "b"]));
        assert!(v.violations.is_empty(), "{v:?}");
    }

    #[test]
    fn each_kind_of_anomaly_is_caught() {
        let base = vec![
            app(0, 10, "a", Outcome::Ok(1)),
            app(11, 20, "b", Outcome::Ok(2)),
            app(12, 13, "x", Outcome::Refused),
        ];
        let bad = |ops: &[Op], l: &[&str], what: &str| {
            let v = check(ops, &list(l));
            assert!(
                v.violations.iter().any(|m| m.contains(what)),
                "{what}: {:?}",
                v.violations
            );
        };
        bad(&base, &["a"], "is lost");
        bad(&base, &["b", "a"], "acknowledged as element");
        bad(&base, &["a", "b", "x"], "refused");
        bad(&base, &["a", "b", "z"], "never appended");
        bad(&base, &["a", "b", "a"], "twice");
        let mut reordered = base.clone();
        reordered.push(app(30, 40, "c", Outcome::Unknown));
        bad(&reordered, &["a", "c", "b"], "acknowledged as element");
        let mut late = base.clone();
        late.push(app(21, 40, "c", Outcome::Unknown));
        late[1] = app(11, 20, "b", Outcome::Ok(3));
        bad(&late, &["a", "c", "b"], "yet comes first");
        let mut stale = base.clone();
        stale.push(read(25, 26, &["a"]));
        bad(&stale, &["a", "b"], "stale read");
        let mut wrong = base.clone();
        wrong.push(read(1, 2, &["b"]));
        bad(&wrong, &["a", "b"], "not a prefix");
        // A read going back after a later one (an unknown append seen).
        let mut back = base.clone();
        back.push(app(21, 100, "c", Outcome::Unknown));
        back.push(read(30, 31, &["a", "b", "c"]));
        back.push(read(40, 41, &["a", "b"]));
        bad(&back, &["a", "b", "c"], "went back");
        // A read seeing an append that began after it ended.
        let future = vec![
            app(0, 1, "a", Outcome::Ok(1)),
            read(1, 2, &["a", "b"]),
            app(5, 9, "b", Outcome::Ok(2)),
        ];
        bad(&future, &["a", "b"], "whose append began");
        // The same element appended twice (the checker's assumption).
        let twice = vec![
            app(0, 10, "a", Outcome::Refused),
            app(11, 20, "a", Outcome::Unknown),
        ];
        bad(&twice, &["a"], "appended twice");
    }
}
