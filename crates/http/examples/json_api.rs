//! A small JSON API on ringkit-http: `cargo run -p ringkit-http --features
//! json --example json_api -- [ADDR] [auto|uring|epoll]` (default
//! 127.0.0.1:8080). Prints `listening on ADDR`; serves until Ctrl-C.
//!
//! - `GET /users/{id}`: one user, or 404 as JSON;
//! - `POST /users` with `{"name": "..."}`: adds one, answers 201 with it;
//! - `GET /users`: all of them.
//!
//! The store is a per-thread `RefCell` (the server runs on one thread; a
//! thread-per-core server would give each thread its own, or share one
//! behind a lock).

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

use ringkit::{Backend, Builder};
use ringkit_http::{Request, Response, Router, Server, StatusCode};
use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize)]
struct User {
    id: u64,
    name: String,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

#[derive(Serialize)]
struct Problem<'a> {
    error: &'a str,
}

type Store = Rc<RefCell<Vec<User>>>;

fn app(store: Store) -> Router {
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    Router::new()
        .get("/users", move |_req: Request| {
            let users = s1.borrow().clone();
            async move { Response::json(StatusCode::OK, &users) }
        })
        .get("/users/{id}", move |req: Request| {
            let found = req
                .param("id")
                .and_then(|id| id.parse::<u64>().ok())
                .and_then(|id| s2.borrow().iter().find(|u| u.id == id).cloned());
            async move {
                match found {
                    Some(u) => Response::json(StatusCode::OK, &u),
                    None => Response::json(
                        StatusCode::NOT_FOUND,
                        &Problem {
                            error: "no such user",
                        },
                    ),
                }
            }
        })
        .post("/users", move |req: Request| {
            let added = serde_json::from_slice::<NewUser>(req.body()).map(|new| {
                let mut users = s3.borrow_mut();
                let user = User {
                    id: users.len() as u64 + 1,
                    name: new.name,
                };
                users.push(user.clone());
                user
            });
            async move {
                match added {
                    Ok(u) => Response::json(StatusCode::CREATED, &u),
                    Err(_) => Response::json(
                        StatusCode::BAD_REQUEST,
                        &Problem {
                            error: "expected {\"name\": \"...\"}",
                        },
                    ),
                }
            }
        })
}

fn main() -> io::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let backend: Backend = match args.next() {
        Some(b) => b
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        None => Backend::Auto,
    };
    let rt = Builder::new().backend(backend).build()?;
    rt.block_on(async {
        let server = Server::bind(addr.as_str())?;
        println!(
            "listening on {} ({})",
            server.local_addr()?,
            ringkit::backend_report().expect("inside a runtime")
        );
        // Until SIGINT/SIGTERM, then a graceful drain.
        server.serve(app(Store::default())).await
    })
}
