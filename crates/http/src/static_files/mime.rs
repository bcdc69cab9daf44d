//! Content type by file extension (pure).
//!
//! A small fixed table, matched case-insensitively on the last extension.
//! Text types carry `charset=utf-8`. Anything else is
//! `application/octet-stream`, which browsers download rather than render:
//! the safe default for unknown bytes.

/// The default for unknown or missing extensions.
pub const DEFAULT: &str = "application/octet-stream";

/// Extension (lower case, no dot) → content type.
const TABLE: &[(&str, &str)] = &[
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("json", "application/json"),
    ("map", "application/json"),
    ("txt", "text/plain; charset=utf-8"),
    ("md", "text/markdown; charset=utf-8"),
    ("csv", "text/csv; charset=utf-8"),
    ("xml", "application/xml"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("avif", "image/avif"),
    ("svg", "image/svg+xml"),
    ("ico", "image/x-icon"),
    ("bmp", "image/bmp"),
    ("wasm", "application/wasm"),
    ("pdf", "application/pdf"),
    ("zip", "application/zip"),
    ("gz", "application/gzip"),
    ("tar", "application/x-tar"),
    ("woff", "font/woff"),
    ("woff2", "font/woff2"),
    ("ttf", "font/ttf"),
    ("otf", "font/otf"),
    ("mp4", "video/mp4"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("wav", "audio/wav"),
];

/// The content type for a file name (only its last extension counts).
pub fn content_type(file_name: &[u8]) -> &'static str {
    let Some(dot) = file_name.iter().rposition(|&b| b == b'.') else {
        return DEFAULT;
    };
    let ext = &file_name[dot + 1..];
    TABLE
        .iter()
        .find(|(e, _)| e.as_bytes().eq_ignore_ascii_case(ext))
        .map_or(DEFAULT, |&(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_extension() {
        let table: &[(&str, &str)] = &[
            ("index.html", "text/html; charset=utf-8"),
            ("INDEX.HTM", "text/html; charset=utf-8"),
            ("a.css", "text/css; charset=utf-8"),
            ("app.min.js", "text/javascript; charset=utf-8"),
            ("d.json", "application/json"),
            ("r.txt", "text/plain; charset=utf-8"),
            ("p.PNG", "image/png"),
            ("p.jpg", "image/jpeg"),
            ("p.gif", "image/gif"),
            ("i.svg", "image/svg+xml"),
            ("m.wasm", "application/wasm"),
            ("d.pdf", "application/pdf"),
            ("favicon.ico", "image/x-icon"),
            ("f.woff2", "font/woff2"),
            ("v.mp4", "video/mp4"),
            ("archive.tar.gz", "application/gzip"),
            ("noext", DEFAULT),
            ("trailing.", DEFAULT),
            ("x.unknown", DEFAULT),
            ("", DEFAULT),
        ];
        for &(name, want) in table {
            assert_eq!(content_type(name.as_bytes()), want, "{name}");
        }
    }

    #[test]
    fn table_keys_are_lower_case_and_unique() {
        for (i, (e, _)) in TABLE.iter().enumerate() {
            assert_eq!(*e, e.to_ascii_lowercase());
            assert!(!TABLE[..i].iter().any(|(f, _)| f == e), "duplicate {e}");
        }
    }
}
