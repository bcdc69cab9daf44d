//! Validators and conditional requests (RFC 9110 §8.8, §13), pure.
//!
//! Each file gets two validators: a strong `ETag` made of its inode, size and
//! modification time in nanoseconds (what changes when the bytes change, short
//! of a same-size rewrite within one clock tick), and `Last-Modified` (whole
//! seconds, as HTTP dates carry no more).
//!
//! [`evaluate`] applies the preconditions in the order of RFC 9110 §13.2.2:
//! `If-Match`, then `If-Unmodified-Since` (only without `If-Match`), then
//! `If-None-Match`, then `If-Modified-Since` (only without `If-None-Match`,
//! so an entity tag always takes precedence over a date). `If-Range` is
//! separate ([`if_range_matches`]): it only decides whether a `Range` applies.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The validators of one file version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    /// The strong entity tag, quotes included: `"<ino>-<size>-<mtime ns>"` in hex.
    etag: String,
    /// Modification time in whole seconds since the epoch; `None` when it
    /// cannot be written as an HTTP date (before 1970 or after 9999).
    last_modified: Option<SystemTime>,
}

/// The largest time an HTTP date can carry (9999-12-31T23:59:59Z).
const MAX_HTTP_DATE: u64 = 253_402_300_799;

impl Validators {
    /// Validators for a file with this inode, size and modification time.
    pub fn new(ino: u64, size: u64, mtime: SystemTime) -> Validators {
        let (ns, last_modified) = match mtime.duration_since(UNIX_EPOCH) {
            Ok(d) => {
                let secs = d.as_secs();
                let lm = (secs <= MAX_HTTP_DATE).then(|| UNIX_EPOCH + Duration::from_secs(secs));
                (d.as_nanos() as i128, lm)
            }
            Err(e) => (-(e.duration().as_nanos() as i128), None),
        };
        Validators {
            etag: format!("\"{ino:x}-{size:x}-{ns:x}\""),
            last_modified,
        }
    }

    /// The `ETag` header value.
    pub fn etag(&self) -> &str {
        &self.etag
    }

    /// The `Last-Modified` header value, if the time is representable.
    pub fn last_modified(&self) -> Option<String> {
        self.last_modified.map(httpdate::fmt_http_date)
    }

    /// The opaque part of our tag (without quotes).
    fn opaque(&self) -> &str {
        &self.etag[1..self.etag.len() - 1]
    }
}

/// The conditional request headers, as received (`None` when absent). When a
/// header came on several lines, pass the lines joined with `, `.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conditions<'a> {
    /// `If-Match`.
    pub if_match: Option<&'a str>,
    /// `If-None-Match`.
    pub if_none_match: Option<&'a str>,
    /// `If-Modified-Since`.
    pub if_modified_since: Option<&'a str>,
    /// `If-Unmodified-Since`.
    pub if_unmodified_since: Option<&'a str>,
}

/// The outcome of the preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Go on and serve (possibly a range).
    Proceed,
    /// 304 Not Modified (GET/HEAD only).
    NotModified,
    /// 412 Precondition Failed.
    Failed,
}

/// Apply the preconditions to a file with `v`. `get_or_head` says whether
/// the method is GET or HEAD (the only ones that may get 304).
pub fn evaluate(c: &Conditions<'_>, v: &Validators, get_or_head: bool) -> Precondition {
    if let Some(im) = c.if_match {
        if !list_matches(im, v, true) {
            return Precondition::Failed;
        }
    } else if let (Some(ius), Some(lm)) = (c.if_unmodified_since.and_then(date), v.last_modified) {
        if lm > ius {
            return Precondition::Failed;
        }
    }
    if let Some(inm) = c.if_none_match {
        if list_matches(inm, v, false) {
            return if get_or_head {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if get_or_head {
        if let (Some(ims), Some(lm)) = (c.if_modified_since.and_then(date), v.last_modified) {
            if lm <= ims {
                return Precondition::NotModified;
            }
        }
    }
    Precondition::Proceed
}

/// Whether an `If-Range` value lets a `Range` apply: an entity tag must match
/// strongly (a weak tag never does); a date must equal `Last-Modified`.
pub fn if_range_matches(value: &str, v: &Validators) -> bool {
    let value = value.trim();
    if value.starts_with('"') || value.starts_with("W/") {
        let mut tags = EtagList::new(value);
        match (tags.next(), tags.next()) {
            (Some(Some((false, o))), None) => o == v.opaque(),
            _ => false,
        }
    } else {
        matches!((date(value), v.last_modified), (Some(d), Some(lm)) if d == lm)
    }
}

fn date(s: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(s.trim()).ok()
}

/// `*` or a list of entity tags, compared strongly or weakly with ours. A
/// malformed list matches nothing from the bad element on.
fn list_matches(value: &str, v: &Validators, strong: bool) -> bool {
    if value.trim() == "*" {
        return true;
    }
    EtagList::new(value)
        .map_while(|t| t)
        .any(|(weak, opaque)| opaque == v.opaque() && !(strong && weak))
}

/// Iterator over `#entity-tag`: yields `Some((weak, opaque))` per tag, and
/// `None` once (then stops) at a malformed element.
struct EtagList<'a> {
    rest: &'a str,
    done: bool,
}

impl<'a> EtagList<'a> {
    fn new(value: &'a str) -> EtagList<'a> {
        EtagList {
            rest: value,
            done: false,
        }
    }
}

impl<'a> Iterator for EtagList<'a> {
    type Item = Option<(bool, &'a str)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let s = self.rest.trim_start_matches([' ', '\t', ',']);
        if s.is_empty() {
            self.done = true;
            return None;
        }
        let (weak, s) = match s.strip_prefix("W/") {
            Some(s) => (true, s),
            None => (false, s),
        };
        let parsed = s.strip_prefix('"').and_then(|s| {
            let end = s.find('"')?;
            Some((&s[..end], &s[end + 1..]))
        });
        match parsed {
            Some((opaque, rest))
                if rest.trim_start().is_empty() || rest.trim_start().starts_with(',') =>
            {
                self.rest = rest;
                Some(Some((weak, opaque)))
            }
            _ => {
                self.done = true;
                Some(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v() -> Validators {
        // 2024-01-02T03:04:05.5Z
        Validators::new(
            0x2a,
            100,
            UNIX_EPOCH + Duration::new(1_704_164_645, 500_000_000),
        )
    }

    const LM: &str = "Tue, 02 Jan 2024 03:04:05 GMT";
    const BEFORE: &str = "Tue, 02 Jan 2024 03:04:04 GMT";
    const AFTER: &str = "Tue, 02 Jan 2024 03:04:06 GMT";

    fn get(c: Conditions<'_>) -> Precondition {
        evaluate(&c, &v(), true)
    }

    #[test]
    fn validators_format() {
        let v = v();
        assert_eq!(
            v.etag(),
            format!("\"2a-64-{:x}\"", 1_704_164_645_500_000_000i128)
        );
        assert_eq!(v.last_modified().as_deref(), Some(LM));
        let old = Validators::new(1, 1, UNIX_EPOCH - Duration::from_secs(10));
        assert_eq!(old.last_modified(), None);
        assert!(old.etag().starts_with('"') && old.etag().ends_with('"'));
        assert_ne!(
            Validators::new(1, 2, UNIX_EPOCH).etag(),
            Validators::new(1, 3, UNIX_EPOCH).etag()
        );
    }

    #[test]
    fn if_none_match() {
        let tag = v().etag().to_string();
        let weak = format!("W/{tag}");
        let list = format!("\"nope\", {tag}");
        for inm in [tag.as_str(), "*", weak.as_str(), list.as_str(), " * "] {
            let c = Conditions {
                if_none_match: Some(inm),
                ..Default::default()
            };
            assert_eq!(get(c), Precondition::NotModified, "{inm}");
            assert_eq!(evaluate(&c, &v(), false), Precondition::Failed, "{inm}");
        }
        for inm in [
            "\"nope\"",
            "W/\"nope\", \"x\"",
            "garbage",
            "\"unterminated",
            "",
        ] {
            let c = Conditions {
                if_none_match: Some(inm),
                ..Default::default()
            };
            assert_eq!(get(c), Precondition::Proceed, "{inm}");
        }
    }

    #[test]
    fn if_modified_since() {
        for (ims, want) in [
            (LM, Precondition::NotModified),
            (AFTER, Precondition::NotModified),
            (BEFORE, Precondition::Proceed),
            ("not a date", Precondition::Proceed),
        ] {
            let c = Conditions {
                if_modified_since: Some(ims),
                ..Default::default()
            };
            assert_eq!(get(c), want, "{ims}");
            // Only GET and HEAD get 304 by date.
            assert_eq!(evaluate(&c, &v(), false), Precondition::Proceed);
        }
    }

    #[test]
    fn etag_takes_precedence_over_date() {
        // A non-matching tag wins over a date that would say "not modified".
        let c = Conditions {
            if_none_match: Some("\"other\""),
            if_modified_since: Some(AFTER),
            ..Default::default()
        };
        assert_eq!(get(c), Precondition::Proceed);
        let tag = v().etag().to_string();
        let c = Conditions {
            if_none_match: Some(&tag),
            if_modified_since: Some(BEFORE),
            ..Default::default()
        };
        assert_eq!(get(c), Precondition::NotModified);
    }

    #[test]
    fn if_match_and_unmodified_since() {
        let tag = v().etag().to_string();
        let weak = format!("W/{tag}");
        let ok = |c| assert_eq!(get(c), Precondition::Proceed);
        let fail = |c| assert_eq!(get(c), Precondition::Failed);
        ok(Conditions {
            if_match: Some(&tag),
            ..Default::default()
        });
        ok(Conditions {
            if_match: Some("*"),
            ..Default::default()
        });
        fail(Conditions {
            if_match: Some(&weak),
            ..Default::default()
        });
        fail(Conditions {
            if_match: Some("\"x\""),
            ..Default::default()
        });
        ok(Conditions {
            if_unmodified_since: Some(LM),
            ..Default::default()
        });
        fail(Conditions {
            if_unmodified_since: Some(BEFORE),
            ..Default::default()
        });
        // If-Match present: If-Unmodified-Since is ignored.
        ok(Conditions {
            if_match: Some(&tag),
            if_unmodified_since: Some(BEFORE),
            ..Default::default()
        });
    }

    #[test]
    fn if_range() {
        let v = v();
        let tag = v.etag().to_string();
        assert!(if_range_matches(&tag, &v));
        assert!(if_range_matches(LM, &v));
        assert!(!if_range_matches(&format!("W/{tag}"), &v));
        assert!(!if_range_matches("\"other\"", &v));
        assert!(!if_range_matches(&format!("{tag}, {tag}"), &v));
        assert!(!if_range_matches(AFTER, &v));
        assert!(!if_range_matches(BEFORE, &v));
        assert!(!if_range_matches("junk", &v));
    }
}
