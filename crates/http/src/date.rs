//! The `Date` header value, formatted at most once per second per thread.
//!
//! Every response carries `Date` (RFC 9110 §6.6.1). Formatting an HTTP date
//! costs far more than reading the clock, so each thread keeps the last
//! formatted value and the second it is for, and reformats only when the
//! second changed. The clock itself (a vDSO call, no syscall, but 3% of
//! the CPU of a pipelined `return 200`) is read once per turn of the event
//! loop ([`ringkit::loop_turn`]): the responses of one turn share a Date,
//! at most one turn late, as RFC 9110 allows (the time the message was
//! generated, approximately).

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
pub const DATE_LEN: usize = 29;

struct Cache {
    secs: u64,
    /// The loop turn the clock was last read in.
    turn: Option<u64>,
    text: [u8; DATE_LEN],
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache { secs: u64::MAX, turn: None, text: [b' '; DATE_LEN] })
    };
}

/// Run `f` with the current date as an IMF-fixdate.
pub fn with_date<R>(f: impl FnOnce(&[u8; DATE_LEN]) -> R) -> R {
    let turn = ringkit::loop_turn();
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if turn.is_some() && c.turn == turn {
            return f(&c.text);
        }
        c.turn = turn;
        let now = SystemTime::now();
        let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
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

    ringkit::test_all! {
        // Read once per loop turn: a later turn sees the clock move on.
        async fn the_date_moves_on_between_loop_turns() {
            let a = with_date(|d| *d);
            assert_eq!(with_date(|d| *d), a, "one turn, one Date");
            ringkit::time::sleep(std::time::Duration::from_millis(1100)).await;
            let b = with_date(|d| *d);
            assert_ne!(a, b, "the Date did not move on after 1.1 s");
        }
    }

    #[test]
    fn formats_a_parseable_date() {
        let s = with_date(|d| String::from_utf8(d.to_vec()).unwrap());
        assert!(s.ends_with(" GMT"), "{s}");
        httpdate::parse_http_date(&s).unwrap();
    }
}
