//! Routing by path and method.
//!
//! Paths match exactly (`/users`), by segments with parameters
//! (`/users/{id}/posts/{post}`: a parameter takes one whole non-empty
//! segment, percent-decoded, read with [`Request::param`]; a segment that
//! does not decode to UTF-8 is a 400), or by prefix when the pattern ends
//! in `/*` (`/static/*` matches `/static/a/b` and `/static/`; the longest
//! prefix wins). Exact paths are tried first, then patterns with
//! parameters (in the order they were added), then prefixes. A known path with a method it does not serve gets 405 with
//! `Allow` listing the methods it does; an unknown path gets 404, or goes to
//! the [`Router::fallback`] handler if one is set. A `GET` route also serves
//! `HEAD` (the server sends the head without the body), unless a `HEAD`
//! route is set.
//!
//! This router is for small services and static sites; for a larger API
//! (extractors, JSON bodies, middleware) axum on `ringkit-hyper` is the way.
//!
//! ```
//! use ringkit_http::{Method, Request, Response, Router};
//! let app = Router::new()
//!     .get("/", |_req: Request| async { Response::ok().body("home") })
//!     .get("/users/{id}", |req: Request| async move {
//!         let id = req.param("id").unwrap_or_default().to_string();
//!         Response::ok().body(format!("user {id}"))
//!     })
//!     .route(Method::Post, "/echo", |req: Request| async move {
//!         Response::ok().body(req.into_body())
//!     });
//! # let _ = app;
//! ```

use std::collections::HashMap;
use std::future::Future;
use std::rc::Rc;

use crate::handler::DynHandler;
use crate::{Handler, Method, Request, Response, StatusCode};

#[derive(Default)]
struct Methods {
    handlers: Vec<(Method, Rc<dyn DynHandler>)>,
}

impl Methods {
    fn find(&self, m: Method) -> Option<Rc<dyn DynHandler>> {
        let find = |m| {
            self.handlers
                .iter()
                .find(|(hm, _)| *hm == m)
                .map(|(_, h)| h.clone())
        };
        find(m).or_else(|| {
            if m == Method::Head {
                find(Method::Get)
            } else {
                None
            }
        })
    }

    fn allow(&self) -> String {
        let mut names: Vec<&str> = self.handlers.iter().map(|(m, _)| m.as_str()).collect();
        if names.contains(&"GET") && !names.contains(&"HEAD") {
            names.push("HEAD");
        }
        names.join(", ")
    }
}

/// A table of handlers by path and method; itself a [`Handler`].
#[derive(Default)]
pub struct Router {
    exact: HashMap<String, Methods>,
    /// Patterns with `{param}` segments, in the order added.
    patterns: Vec<(Vec<Seg>, Methods)>,
    /// (prefix without the `*`, methods), longest first.
    prefixes: Vec<(String, Methods)>,
    fallback: Option<Rc<dyn DynHandler>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("exact", &self.exact.keys().collect::<Vec<_>>())
            .field(
                "prefixes",
                &self.prefixes.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .field("fallback", &self.fallback.is_some())
            .finish()
    }
}

impl Router {
    /// An empty router (everything is 404).
    pub fn new() -> Router {
        Router::default()
    }

    /// Serve `method` on `path` (exact, with `{param}` segments, or a
    /// prefix when it ends in `/*`) with `handler`. A later route for the
    /// same method and path replaces an earlier one.
    pub fn route(mut self, method: Method, path: &str, handler: impl Handler) -> Router {
        let h: Rc<dyn DynHandler> = Rc::new(handler);
        let methods = match path.strip_suffix('*') {
            _ if path.contains('{') => {
                let segs = parse_pattern(path);
                match self.patterns.iter().position(|(p, _)| *p == segs) {
                    Some(i) => &mut self.patterns[i].1,
                    None => {
                        self.patterns.push((segs, Methods::default()));
                        &mut self.patterns.last_mut().expect("just pushed").1
                    }
                }
            }
            Some(prefix) if prefix.ends_with('/') => {
                match self.prefixes.iter().position(|(p, _)| p == prefix) {
                    Some(i) => &mut self.prefixes[i].1,
                    None => {
                        self.prefixes.push((prefix.to_string(), Methods::default()));
                        self.prefixes
                            .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
                        let i = self
                            .prefixes
                            .iter()
                            .position(|(p, _)| p == prefix)
                            .expect("just inserted");
                        &mut self.prefixes[i].1
                    }
                }
            }
            _ => self.exact.entry(path.to_string()).or_default(),
        };
        methods.handlers.retain(|(m, _)| *m != method);
        methods.handlers.push((method, h));
        self
    }

    /// Serve `GET` (and `HEAD`) on `path`.
    pub fn get(self, path: &str, handler: impl Handler) -> Router {
        self.route(Method::Get, path, handler)
    }

    /// Serve `POST` on `path`.
    pub fn post(self, path: &str, handler: impl Handler) -> Router {
        self.route(Method::Post, path, handler)
    }

    /// Send requests for unknown paths here instead of answering 404.
    pub fn fallback(mut self, handler: impl Handler) -> Router {
        self.fallback = Some(Rc::new(handler));
        self
    }

    /// The methods of the route `path` matches, and its parameters
    /// (`Err`: a parameter that does not decode).
    fn lookup(&self, path: &str) -> Option<(&Methods, Result<Params, ()>)> {
        if let Some(m) = self.exact.get(path) {
            return Some((m, Ok(Vec::new())));
        }
        for (segs, m) in &self.patterns {
            if let Some(params) = match_pattern(segs, path) {
                return Some((m, params));
            }
        }
        self.prefixes
            .iter()
            .find(|(p, _)| path.starts_with(p.as_str()))
            .map(|(_, m)| (m, Ok(Vec::new())))
    }
}

type Params = Vec<(String, String)>;

/// One segment of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Lit(String),
    Param(String),
}

fn parse_pattern(path: &str) -> Vec<Seg> {
    path.split('/')
        .map(
            |s| match s.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                Some(name) => Seg::Param(name.to_string()),
                None => Seg::Lit(s.to_string()),
            },
        )
        .collect()
}

/// `Some(params)` if `path` matches `segs` (`Err` if a parameter is not
/// valid percent-encoded UTF-8).
fn match_pattern(segs: &[Seg], path: &str) -> Option<Result<Params, ()>> {
    let mut parts = path.split('/');
    let mut params = Vec::new();
    let mut bad = false;
    for seg in segs {
        let part = parts.next()?;
        match seg {
            Seg::Lit(l) if l == part => {}
            Seg::Lit(_) => return None,
            Seg::Param(_) if part.is_empty() => return None,
            Seg::Param(name) => match percent_decode(part) {
                Some(v) => params.push((name.clone(), v)),
                None => bad = true,
            },
        }
    }
    if parts.next().is_some() {
        return None;
    }
    Some(if bad { Err(()) } else { Ok(params) })
}

/// `%XX` escapes decoded; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            // Two hex digits, nothing else (`from_str_radix` alone would
            // take `%+1` as byte 1 and `%+0` as NUL).
            let hex = b.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Decides before awaiting, so the future does not borrow the router.
enum Route {
    Call(Rc<dyn DynHandler>, Request),
    Answer(Response),
}

impl Handler for Router {
    fn call(&self, req: Request) -> impl Future<Output = Response> {
        let mut req = req;
        let route = match self.lookup(req.path()) {
            Some((_, Err(()))) => Route::Answer(Response::text(
                StatusCode::BAD_REQUEST,
                "bad path parameter\n",
            )),
            Some((methods, Ok(params))) => match methods.find(req.method()) {
                Some(h) => {
                    if !params.is_empty() {
                        req.set_params(params);
                    }
                    Route::Call(h, req)
                }
                None => Route::Answer(
                    Response::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n")
                        .header("allow", methods.allow()),
                ),
            },
            None => match &self.fallback {
                Some(h) => Route::Call(h.clone(), req),
                None => Route::Answer(Response::text(StatusCode::NOT_FOUND, "not found\n")),
            },
        };
        async move {
            match route {
                Route::Call(h, req) => h.call_boxed(req).await,
                Route::Answer(r) => r,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, Parsed};

    #[test]
    fn percent_decoding_takes_two_hex_digits_only() {
        assert_eq!(percent_decode("a%20b%2F").as_deref(), Some("a b/"));
        // A sign is not a digit: these were byte 1 and NUL.
        for bad in ["%+1", "%+0", "%-1", "% 1", "%1", "%", "%G0", "%0g"] {
            assert_eq!(percent_decode(bad), None, "{bad}");
        }
    }

    fn req(raw: &str) -> Request {
        match Request::parse(raw.as_bytes(), &Limits::default()) {
            Ok(Parsed::Complete((r, _))) => r,
            other => panic!("bad test request {raw:?}: {other:?}"),
        }
    }

    fn answer(router: &Router, method: &str, path: &str) -> (u16, String, Option<String>) {
        let r = req(&format!("{method} {path} HTTP/1.1\r\nHost: t\r\n\r\n"));
        let resp = ringkit::run(router.call(r)).unwrap();
        let body = match resp.body_ref() {
            crate::Body::Static(b) => String::from_utf8_lossy(b).into_owned(),
            crate::Body::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        (
            resp.status().as_u16(),
            body,
            resp.header_value("allow").map(str::to_string),
        )
    }

    #[test]
    fn exact_prefix_methods_fallback() {
        let named =
            |name: &'static str| move |_req: Request| async move { Response::ok().body(name) };
        let r = Router::new()
            .get("/", named("root"))
            .get("/a/*", named("a-prefix"))
            .get("/a/b/*", named("ab-prefix"))
            .get("/a/exact", named("exact"))
            .route(Method::Delete, "/a/exact", named("delete"));
        assert_eq!(answer(&r, "GET", "/").1, "root");
        assert_eq!(answer(&r, "GET", "/a/x").1, "a-prefix");
        assert_eq!(answer(&r, "GET", "/a/b/c").1, "ab-prefix");
        assert_eq!(answer(&r, "GET", "/a/exact").1, "exact");
        assert_eq!(answer(&r, "DELETE", "/a/exact").1, "delete");
        assert_eq!(answer(&r, "HEAD", "/a/exact").0, 200);
        let (status, _, allow) = answer(&r, "POST", "/a/exact");
        assert_eq!((status, allow.as_deref()), (405, Some("GET, DELETE, HEAD")));
        assert_eq!(answer(&r, "GET", "/nope").0, 404);
        assert_eq!(answer(&r, "GET", "/a").0, 404);
        let r = r.fallback(named("fallback"));
        assert_eq!(answer(&r, "GET", "/nope").1, "fallback");
        // A later route replaces an earlier one for the same method and path.
        let r = r.get("/", named("root2"));
        assert_eq!(answer(&r, "GET", "/").1, "root2");
    }

    #[test]
    fn path_parameters() {
        let show = |req: Request| async move {
            let got = format!(
                "{}|{}",
                req.param("id").unwrap_or("-"),
                req.param("post").unwrap_or("-")
            );
            Response::ok().body(got)
        };
        let r = Router::new()
            .get("/users/{id}", show)
            .get("/users/{id}/posts/{post}", show)
            .get("/users/me", |_req: Request| async {
                Response::ok().body("me")
            })
            .get("/files/*", |_req: Request| async {
                Response::ok().body("files")
            });
        assert_eq!(answer(&r, "GET", "/users/42").1, "42|-");
        assert_eq!(answer(&r, "GET", "/users/42/posts/7").1, "42|7");
        // Exact routes win over patterns.
        assert_eq!(answer(&r, "GET", "/users/me").1, "me");
        // Percent-decoded.
        assert_eq!(answer(&r, "GET", "/users/J%C3%BCrgen%20S").1, "Jürgen S|-");
        // An empty segment, or one too many, is not a match.
        assert_eq!(answer(&r, "GET", "/users/").0, 404);
        assert_eq!(answer(&r, "GET", "/users/1/posts").0, 404);
        assert_eq!(answer(&r, "GET", "/users/1/posts/2/x").0, 404);
        // A bad escape or non-UTF-8 is a client error.
        assert_eq!(answer(&r, "GET", "/users/%zz").0, 400);
        assert_eq!(answer(&r, "GET", "/users/%ff").0, 400);
        assert_eq!(answer(&r, "POST", "/users/1").0, 405);
        assert_eq!(answer(&r, "GET", "/files/a/b").1, "files");
    }
}
