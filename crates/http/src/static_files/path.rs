//! Request path → safe relative path (pure).
//!
//! The request target is untrusted bytes. [`sanitize`] turns it into a
//! [`SafePath`]: a relative path of plain name segments that cannot climb out
//! of the served directory by itself. It is one of two defences; the other is
//! the kernel's `RESOLVE_BENEATH` when the path is opened (see
//! [`super::resolve`]), which also covers symlinks.
//!
//! Rules, in order:
//! 1. The query (`?…`) and fragment (`#…`) are cut off; what is left must
//!    start with `/` (origin form), else [`PathError::BadRequest`].
//! 2. Raw backslashes, control bytes (NUL included) → [`PathError::Forbidden`].
//! 3. Percent-decoding: a `%` not followed by two hex digits →
//!    [`PathError::BadRequest`]. A decoded NUL, `/`, `\` or control byte →
//!    [`PathError::Forbidden`] (an encoded slash would let `..%2f` be one
//!    segment before decoding and two after).
//! 4. Segments are checked both before and after decoding: `.` and `..` →
//!    [`PathError::Forbidden`]; empty segments (`//`) other than a single
//!    trailing slash → [`PathError::Forbidden`].
//! 5. A segment starting with `.` (a "hidden" file like `.git` or `.env`) →
//!    [`PathError::Hidden`], unless the caller allows hidden files.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why a request path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// Malformed: not origin form, or a bad percent escape (answer 400).
    BadRequest,
    /// A traversal attempt or a byte no file name here may hold (answer 403).
    Forbidden,
    /// A dot-file, refused by policy (answer 404, as if absent).
    Hidden,
}

/// A request path that passed [`sanitize`]: plain segments, no `.`/`..`,
/// no NUL, no slash inside a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SafePath {
    /// The decoded segments joined by `/`, without a leading slash; empty for
    /// the root.
    rel: Vec<u8>,
    /// The request path ended in `/` (or was `/`).
    trailing_slash: bool,
}

impl SafePath {
    /// The relative path to open beneath the root (`.` for the root itself).
    pub fn as_path(&self) -> &Path {
        if self.rel.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(&self.rel))
        }
    }

    /// The decoded relative path bytes (empty for the root).
    pub fn as_bytes(&self) -> &[u8] {
        &self.rel
    }

    /// Whether the request path ended in `/`.
    pub fn trailing_slash(&self) -> bool {
        self.trailing_slash
    }

    /// The last segment (used for the content type); empty for the root.
    pub fn file_name(&self) -> &[u8] {
        match self.rel.iter().rposition(|&b| b == b'/') {
            Some(i) => &self.rel[i + 1..],
            None => &self.rel,
        }
    }
}

/// The path part of a request target: everything before `?` or `#`.
pub fn path_part(target: &[u8]) -> &[u8] {
    let end = target
        .iter()
        .position(|&b| b == b'?' || b == b'#')
        .unwrap_or(target.len());
    &target[..end]
}

/// Check and decode a request target (see the module docs for the rules).
/// `allow_hidden` lets segments start with `.` (never `.` or `..` themselves).
pub fn sanitize(target: &[u8], allow_hidden: bool) -> Result<SafePath, PathError> {
    let raw = path_part(target);
    let Some(raw) = raw.strip_prefix(b"/") else {
        return Err(PathError::BadRequest);
    };
    if raw.iter().any(|&b| b == b'\\' || b.is_ascii_control()) {
        return Err(PathError::Forbidden);
    }
    let trailing_slash = raw.is_empty() || raw.ends_with(b"/");
    let body = raw.strip_suffix(b"/").unwrap_or(raw);
    let mut rel = Vec::with_capacity(body.len());
    let mut hidden = false;
    if !body.is_empty() {
        for (i, seg) in body.split(|&b| b == b'/').enumerate() {
            // Before decoding: `..`, `.`, and `//` are refused outright.
            check_segment(seg)?;
            let dec = decode_segment(seg)?;
            // After decoding: `%2e%2e`, `.%2e`, `%2E` and friends.
            check_segment(&dec)?;
            hidden |= dec[0] == b'.';
            if i > 0 {
                rel.push(b'/');
            }
            rel.extend_from_slice(&dec);
        }
    }
    if hidden && !allow_hidden {
        return Err(PathError::Hidden);
    }
    Ok(SafePath {
        rel,
        trailing_slash,
    })
}

fn check_segment(seg: &[u8]) -> Result<(), PathError> {
    match seg {
        b"" | b"." | b".." => Err(PathError::Forbidden),
        _ => Ok(()),
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Percent-decode one segment; refuse bytes that may not be in a file name.
fn decode_segment(seg: &[u8]) -> Result<Vec<u8>, PathError> {
    let mut out = Vec::with_capacity(seg.len());
    let mut i = 0;
    while i < seg.len() {
        let b = seg[i];
        if b != b'%' {
            out.push(b);
            i += 1;
            continue;
        }
        let (Some(hi), Some(lo)) = (
            seg.get(i + 1).copied().and_then(hex),
            seg.get(i + 2).copied().and_then(hex),
        ) else {
            return Err(PathError::BadRequest);
        };
        let d = hi << 4 | lo;
        if d == b'/' || d == b'\\' || d.is_ascii_control() {
            return Err(PathError::Forbidden);
        }
        out.push(d);
        i += 3;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(t: &str) -> (String, bool) {
        let p = sanitize(t.as_bytes(), false).unwrap_or_else(|e| panic!("{t}: {e:?}"));
        (
            String::from_utf8(p.as_bytes().to_vec()).unwrap(),
            p.trailing_slash(),
        )
    }

    fn err(t: &str) -> PathError {
        match sanitize(t.as_bytes(), false) {
            Ok(p) => panic!("{t} accepted as {:?}", p.as_path()),
            Err(e) => e,
        }
    }

    #[test]
    fn plain_paths() {
        assert_eq!(ok("/"), ("".into(), true));
        assert_eq!(ok("/a.txt"), ("a.txt".into(), false));
        assert_eq!(ok("/sub/"), ("sub".into(), true));
        assert_eq!(
            ok("/sub/index.html?x=1#f"),
            ("sub/index.html".into(), false)
        );
        assert_eq!(ok("/hello%20world.txt"), ("hello world.txt".into(), false));
        assert_eq!(ok("/caf%C3%A9"), ("café".into(), false));
        assert_eq!(ok("/a..b"), ("a..b".into(), false));
    }

    #[test]
    fn root_is_dot() {
        assert_eq!(sanitize(b"/", false).unwrap().as_path(), Path::new("."));
        assert_eq!(sanitize(b"/?q", false).unwrap().as_path(), Path::new("."));
    }

    #[test]
    fn file_name_is_last_segment() {
        let p = sanitize(b"/a/b/c.css", false).unwrap();
        assert_eq!(p.file_name(), b"c.css");
        assert_eq!(sanitize(b"/x.js", false).unwrap().file_name(), b"x.js");
    }

    #[test]
    fn traversal_table() {
        use PathError::*;
        let table: &[(&str, PathError)] = &[
            ("/..", Forbidden),
            ("/../secret", Forbidden),
            ("/sub/../../secret", Forbidden),
            ("/sub/..", Forbidden),
            ("/./a", Forbidden),
            ("/%2e%2e/secret", Forbidden),
            ("/%2E%2E/secret", Forbidden),
            ("/%2E%2e/", Forbidden),
            ("/.%2e/secret", Forbidden),
            ("/%2e./secret", Forbidden),
            ("/%2e/secret", Forbidden),
            ("/%2E%2E%2Fsecret", Forbidden),
            ("/..%2fsecret", Forbidden),
            ("/..%2Fsecret", Forbidden),
            ("/a%2fb", Forbidden),
            ("//etc/passwd", Forbidden),
            ("/a//b", Forbidden),
            ("/a//", Forbidden),
            ("/%00", Forbidden),
            ("/a%00b", Forbidden),
            ("/a\0b", Forbidden),
            ("/a\nb", Forbidden),
            ("/a%0ab", Forbidden),
            ("/..\\secret", Forbidden),
            ("/a\\b", Forbidden),
            ("/%5c..%5csecret", Forbidden),
            ("/..%5csecret", Forbidden),
            ("/%2e%2e%5csecret", Forbidden),
            ("etc/passwd", BadRequest),
            ("", BadRequest),
            ("http://host/../secret", BadRequest),
            ("*", BadRequest),
            ("/a%", BadRequest),
            ("/a%2", BadRequest),
            ("/a%zz", BadRequest),
            ("/a%%32e", BadRequest),
            ("/.env", Hidden),
            ("/.git/config", Hidden),
            ("/sub/.htpasswd", Hidden),
            ("/%2egit/config", Hidden),
        ];
        for &(t, want) in table {
            assert_eq!(err(t), want, "{t:?}");
        }
    }

    #[test]
    fn hidden_allowed_on_request() {
        let p = sanitize(b"/.well-known/x", true).unwrap();
        assert_eq!(p.as_bytes(), b".well-known/x");
        assert_eq!(sanitize(b"/../x", true), Err(PathError::Forbidden));
        assert_eq!(sanitize(b"/%2e%2e/x", true), Err(PathError::Forbidden));
    }

    #[test]
    fn decoded_segments_never_hold_slash_nul_or_dots() {
        // Every two-escape segment: none may decode to `.`/`..` or hold `/`/NUL.
        for a in 0u8..=255 {
            for b in [b'.', b'/', b'a', 0, b'\\'] {
                let t = format!("/%{a:02x}%{b:02X}/x");
                if let Ok(p) = sanitize(t.as_bytes(), true) {
                    for seg in p.as_bytes().split(|&c| c == b'/') {
                        assert!(seg != b"." && seg != b".." && !seg.is_empty(), "{t}");
                        assert!(!seg.contains(&0) && !seg.contains(&b'\\'), "{t}");
                    }
                }
            }
        }
    }

    #[test]
    fn random_targets_keep_the_invariants() {
        // Deterministic xorshift over an alphabet rich in the dangerous bytes.
        const ALPHABET: &[u8] = b"./%25eE2fFcC0\\\0a?#";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            let mut t = vec![b'/'];
            for _ in 0..(x % 16) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                t.push(ALPHABET[(x % ALPHABET.len() as u64) as usize]);
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let Ok(p) = sanitize(&t, true) else { continue };
            let rel = p.as_bytes();
            assert!(!rel.starts_with(b"/") && !rel.contains(&0), "{t:?}");
            for seg in rel.split(|&c| c == b'/').filter(|_| !rel.is_empty()) {
                assert!(seg != b"." && seg != b".." && !seg.is_empty(), "{t:?}");
                assert!(!seg.contains(&b'\\'), "{t:?}");
            }
        }
    }
}
