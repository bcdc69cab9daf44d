//! Table tests of the sans-I/O parser: statuses of refusals, request
//! smuggling patterns, keep-alive rules, pipelining, chunked bodies, and
//! that every split of the input gives the same requests.

use ringkit_http::{
    parse_head, ChunkedDecoder, Error, Framing, Limits, Method, Parsed, Request, RequestDecoder,
    Version,
};

fn limits() -> Limits {
    Limits {
        max_head_bytes: 1024,
        max_headers: 10,
        max_uri_len: 64,
        max_body_bytes: 100,
    }
}

/// Parse one request; `Ok(None)` if partial.
fn parse(input: &[u8]) -> Result<Option<Request>, Error> {
    Ok(match Request::parse(input, &limits())? {
        Parsed::Partial => None,
        Parsed::Complete((r, _)) => Some(r),
    })
}

fn status_of(input: &[u8]) -> u16 {
    match parse(input) {
        Ok(Some(_)) => 200,
        Ok(None) => 0,
        Err(e) => e.status().as_u16(),
    }
}

#[test]
fn refusal_statuses() {
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "u".repeat(100));
    let long_line = format!("GET /{}", "u".repeat(200));
    let big_head = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n",
        "v".repeat(1100)
    );
    let big_partial = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}", "v".repeat(1100));
    let many: String = (0..11).map(|i| format!("X-{i}: v\r\n")).collect();
    let many = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
    let cases: Vec<(&[u8], u16)> = vec![
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 200),
        (b"GET / HTTP/1.1\r\nHost: a\r\n", 0),
        (b"GET / HTTP/1.0\r\n\r\n", 200),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        // A higher minor version is read as 1.1 (RFC 9112 §2.3).
        (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 200),
        (b"GET / HTTP/1.9\r\n\r\n", 400), // so it needs a Host
        // A space in the target is a bad request, not a bad version.
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET /a HTTP/1.1 x\r\nHost: a\r\n\r\n", 400),
        // Host must be a host and port.
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200),
        (b"GET / HTTP/1.1\r\nHost: \r\n\r\n", 200),
        (b"GET / HTTP/3\r\nHost: a\r\n\r\n", 505),
        (b"GET / FOO/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400), // no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400), // two Hosts
        (b"GET\r\n\r\n", 400),
        (b"G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        (b"GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400), // not origin form
        (b"GET /#x HTTP/1.1\r\nHost: a\r\n\r\n", 400), // fragment
        (b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1", 400), // TLS hello
        (long_uri.as_bytes(), 414),
        (long_line.as_bytes(), 414),
        (big_head.as_bytes(), 431),
        (big_partial.as_bytes(), 431),
        (many.as_bytes(), 431),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n",
            413,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n",
            0,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n",
            413,
        ),
        (b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417),
        (
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            501,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            status_of(input),
            want,
            "{:?}",
            String::from_utf8_lossy(&input[..input.len().min(80)])
        );
    }
}

#[test]
fn smuggling_is_refused() {
    let cases: &[&[u8]] = &[
        // CL and TE together, either order.
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
        // Duplicate or mismatched or malformed Content-Length.
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4 4\r\n\r\nabcd",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
        // Transfer-Encoding variants.
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // Header syntax: obs-fold, space before colon, NUL/CR in values.
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n\t2\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n chunked\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length : 4\r\n\r\nabcd",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
        // Chunk framing.
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\nabcd\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcdef\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x4\r\nabcd\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000004\r\nabcd\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n-4\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n 4\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\n",
    ];
    for input in cases {
        let got = parse(input);
        assert!(
            matches!(got, Err(ref e) if matches!(e.status().as_u16(), 400 | 413 | 501)),
            "not refused: {:?} -> {:?}",
            String::from_utf8_lossy(input),
            got.map(|r| r.map(|r| (r.target().to_string(), r.body().to_vec())))
        );
    }
}

#[test]
fn keep_alive_rules() {
    let cases: &[(&[u8], bool)] = &[
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, CLOSE\r\n\r\n",
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n",
            true,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        (b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            false,
        ),
    ];
    for (input, ka) in cases {
        let r = parse(input).unwrap().unwrap();
        assert_eq!(r.keep_alive(), *ka, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn head_fields() {
    let input = b"\r\nPATCH http://example.com/a/b?x=1&y HTTP/1.1\r\nHost: example.com\r\nX-Two: 2\r\nx-two: 3\r\n\r\n";
    let Parsed::Complete(h) = parse_head(input, &Limits::default()).unwrap() else {
        panic!("partial")
    };
    assert_eq!(h.method(), Method::Patch);
    assert_eq!(h.method_str(), "PATCH");
    assert_eq!(h.path(), "/a/b");
    assert_eq!(h.query(), Some("x=1&y"));
    assert_eq!(h.target(), "http://example.com/a/b?x=1&y");
    assert_eq!(h.version(), Version::Http11);
    assert_eq!(h.header("X-TWO"), Some(&b"2"[..]));
    assert_eq!(h.headers().count(), 3);
    assert_eq!(h.len(), input.len());
    assert_eq!(h.framing(), Framing::None);

    let Parsed::Complete(h) =
        parse_head(b"PURGE /x HTTP/1.1\r\nHost: a\r\n\r\n", &Limits::default()).unwrap()
    else {
        panic!("partial")
    };
    assert_eq!((h.method(), h.method_str()), (Method::Other, "PURGE"));

    let Parsed::Complete(h) = parse_head(
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-Continue\r\n\r\n",
        &Limits::default(),
    )
    .unwrap() else {
        panic!("partial")
    };
    assert!(h.expect_continue());
    assert_eq!(h.framing(), Framing::Length(5));
    // HTTP/1.0 clients' expectations are ignored.
    let Parsed::Complete(h) = parse_head(
        b"POST / HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
        &Limits::default(),
    )
    .unwrap() else {
        panic!("partial")
    };
    assert!(!h.expect_continue());
}

/// A stream of pipelined requests with every kind of body.
const PIPELINE: &[u8] = b"GET /1 HTTP/1.1\r\nHost: a\r\n\r\n\
POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\
POST /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\n\
HEAD /4 HTTP/1.1\r\nHost: a\r\n\r\n\
POST /5 HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n\
GET /6 HTTP/1.0\r\n\r\n";

fn expected() -> Vec<(String, Vec<u8>)> {
    [
        ("/1", ""),
        ("/2", "hello"),
        ("/3", "abcde"),
        ("/4", ""),
        ("/5", ""),
        ("/6", ""),
    ]
    .iter()
    .map(|(p, b)| (p.to_string(), b.as_bytes().to_vec()))
    .collect()
}

/// Feed `input` in pieces of the given sizes (cycled), keeping unconsumed
/// bytes as a server does.
fn feed(input: &[u8], sizes: &[usize]) -> Vec<(String, Vec<u8>)> {
    let mut d = RequestDecoder::new(Limits::default());
    let mut pending = Vec::new();
    let mut out = Vec::new();
    let mut off = 0;
    let mut k = 0;
    while off < input.len() {
        let n = sizes[k % sizes.len()].max(1).min(input.len() - off);
        k += 1;
        pending.extend_from_slice(&input[off..off + n]);
        off += n;
        loop {
            let (used, r) = d.decode(&pending).unwrap();
            pending.drain(..used);
            match r {
                Parsed::Complete(req) => out.push((req.path().to_string(), req.body().to_vec())),
                Parsed::Partial => break,
            }
        }
    }
    assert!(pending.is_empty());
    out
}

#[test]
fn pipelined_in_order_at_every_split() {
    assert_eq!(feed(PIPELINE, &[PIPELINE.len()]), expected());
    for first in 1..PIPELINE.len() {
        assert_eq!(
            feed(PIPELINE, &[first, PIPELINE.len()]),
            expected(),
            "split at {first}"
        );
    }
    for size in [1, 2, 3, 7, 13, 64] {
        assert_eq!(feed(PIPELINE, &[size]), expected(), "pieces of {size}");
    }
}

#[test]
fn continue_is_offered_once_while_the_body_is_missing() {
    let mut d = RequestDecoder::new(Limits::default());
    let head = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
    let (n, r) = d.decode(head).unwrap();
    assert_eq!(n, head.len());
    assert!(matches!(r, Parsed::Partial));
    assert!(d.take_continue());
    assert!(!d.take_continue());
    let (n, r) = d.decode(b"abc").unwrap();
    assert_eq!(n, 3);
    assert!(matches!(r, Parsed::Complete(req) if req.body() == b"abc"));
    assert!(!d.take_continue());
}

#[test]
fn chunked_decoder_at_every_split() {
    let body = b"4\r\nWiki\r\n5;ext=\"q\"\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nA: b\r\nC: d\r\n\r\nNEXT";
    let want = b"Wikipedia in\r\n\r\nchunks.";
    for split in 0..=body.len() - 4 {
        let mut d = ChunkedDecoder::new(1000, 1000);
        let mut out = Vec::new();
        let a = d.decode(&body[..split], &mut out).unwrap();
        assert_eq!(a, split);
        let b = d.decode(&body[split..], &mut out).unwrap();
        assert!(d.is_done());
        assert_eq!(&out[..], &want[..]);
        assert_eq!(&body[a + b..], b"NEXT");
    }
}

/// Inputs the fuzzer found (see fuzz/README.md).
#[test]
fn fuzz_regressions() {
    // An absolute-form target without a path: its path is "/", which is not
    // a slice of the request bytes (this once panicked).
    for (input, path, query) in [
        (&b"GET http://h HTTP/1.0\r\n\r\n"[..], "/", None),
        (b"GET http://h?x=1 HTTP/1.0\r\n\r\n", "/", Some("x=1")),
        (b"GET HTTP://h/p HTTP/1.0\r\n\r\n", "/p", None),
    ] {
        let r = parse(input).unwrap().unwrap();
        assert_eq!((r.path(), r.query()), (path, query));
    }
    // A method longer than MAX_METHOD_LEN is refused whether or not the rest
    // of the request line has arrived.
    let method = "M".repeat(ringkit_http::parse::MAX_METHOD_LEN + 1);
    assert_eq!(
        status_of(format!("{method} / HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes()),
        400
    );
    assert_eq!(status_of(format!("{method} /").as_bytes()), 400);
    assert_eq!(status_of(method.as_bytes()), 400);
}
