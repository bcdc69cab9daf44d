//! The `Date` header value, formatted at most once per second per thread.
//!
//! Every response carries `Date` (RFC 9110 §6.6.1). Formatting an HTTP date
//! costs far more than reading the clock, so each thread keeps the last
//! formatted value and the second it is for; a request reads the clock
//! (a vDSO call, no syscall) and reformats only when the second changed.

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

struct Cache {
    secs: u64,
    text: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { secs: u64::MAX, text: [b' '; DATE_LEN] })
    };
}

/// Run `f` with the current date as an IMF-fixdate.
pub fn with_date<R>(f: impl FnOnce(&[u8; DATE_LEN]) -> R) -> R {
    let now = SystemTime::now();
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.secs != secs {
            let mut text = [b' '; DATE_LEN];
            let _ = write!(&mut text[..], "{}", httpdate::HttpDate::from(now));
            c.text = text;
            c.secs = secs;
        }
        f(&c.text)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_a_parseable_date() {
        let s = with_date(|d| String::from_utf8(d.to_vec()).unwrap());
        assert!(s.ends_with(" GMT"), "{s}");
        httpdate::parse_http_date(&s).unwrap();
    }
}
