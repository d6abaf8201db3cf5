//! The monitor's HTTP endpoint: `/metrics` for Prometheus, `/` listing the endpoints, served so
//! that no client can stall a scrape or grow the monitor.
//!
//! # Why not tiny_http (used before)
//!
//! tiny_http gives every connection a pool thread that blocks reading it, with no read timeout
//! and no bound on the pool: 200 idle connections were 200 threads, and a client that sent half a
//! request held its thread forever. It offers no hook to bound or time out connections.
//!
//! # Design: one thread, readiness by poll(2), parsing by httparse
//!
//! One thread accepts and reads every connection without blocking (readiness from
//! `rtlab_sys::ipc::poll_readable`) and parses request heads with `httparse` (hyper's parser).
//! An idle connection costs a file descriptor and a small buffer, never a thread, so a scrape is
//! read and answered as soon as it arrives whatever else is connected. The bounds:
//!
//! * at most [`MAX_CONNECTIONS`] open; a new one over the cap closes the oldest connection that
//!   has not completed a request (an idle flood evicts itself, a scraper still gets in);
//! * a request head must be complete within [`REQUEST_TIMEOUT`] of the connection opening
//!   (slow or silent clients are closed) and within [`MAX_REQUEST_HEAD_BYTES`];
//! * each answer is written by a short-lived thread with a [`WRITE_TIMEOUT`], at most
//!   [`MAX_WRITERS`] at once (a client that does not read holds only its writer, for at most the
//!   timeout); then the connection is closed (`Connection: close`: one request per connection,
//!   which Prometheus handles by reconnecting).

use super::grants::ListingState;
use rtlab_sys::service_manager::Watchdog;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Open connections at most (an idle one is evicted for a new one).
pub const MAX_CONNECTIONS: usize = 128;
/// Time from accepting a connection to its complete request head.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes of a request head at most (Prometheus sends about 300).
pub const MAX_REQUEST_HEAD_BYTES: usize = 8 * 1024;
/// Time for a client to take its answer.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Answers being written at once at most.
pub const MAX_WRITERS: usize = 16;
/// How often the loop looks at the stop flag and the timeouts when nothing happens.
const TICK: Duration = Duration::from_millis(200);

/// The endpoints, as `/` lists them.
const ENDPOINTS: &[(&str, &str)] = &[
    (
        "/metrics",
        "wake-up latency, missed periods and causes, and rtlabd's grants (OpenMetrics text, for Prometheus)",
    ),
    (
        "/reservations",
        "rtlabd's reservations and RealtimeKit1 threads (the JSON of rtlab reservations --json)",
    ),
    ("/", "this list, and rtlabd's grants"),
];

const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A bound listening socket, not yet serving.
#[derive(Debug)]
pub struct MetricsServer {
    listener: TcpListener,
}

struct Connection {
    stream: TcpStream,
    opened: Instant,
    head: Vec<u8>,
}

/// What a request head asked for.
#[derive(Debug, PartialEq, Eq)]
struct Answer {
    status: u16,
    reason: &'static str,
    content_type: &'static str,
    extra_header: Option<&'static str>,
    body: Vec<u8>,
    head_only: bool,
}

impl MetricsServer {
    /// Binds `address` (port 0: any free port, see [`MetricsServer::local_address`]).
    pub fn bind(address: SocketAddr) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        Ok(MetricsServer { listener })
    }

    /// The address actually bound.
    pub fn local_address(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `exported` (the current metrics text) and `listing` (the daemon's grants) on a
    /// thread of its own until `stop` is set; pings `watchdog` from that thread's loop.
    pub fn serve(
        self,
        exported: Arc<Mutex<String>>,
        listing: Arc<Mutex<ListingState>>,
        stop: Arc<AtomicBool>,
        watchdog: Option<Watchdog>,
    ) -> io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("rtlab-metrics".into())
            .spawn(move || self.run(&exported, &listing, &stop, watchdog.as_ref()))
    }

    fn run(
        self,
        exported: &Mutex<String>,
        listing: &Mutex<ListingState>,
        stop: &AtomicBool,
        watchdog: Option<&Watchdog>,
    ) {
        let writers = Arc::new(AtomicUsize::new(0));
        let mut connections: Vec<Connection> = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            if let Some(watchdog) = watchdog {
                watchdog.ping_if_due();
            }
            let readable = {
                let mut fds = vec![self.listener.as_fd()];
                fds.extend(
                    connections
                        .iter()
                        .map(|connection| connection.stream.as_fd()),
                );
                match rtlab_sys::ipc::poll_readable(&fds, Some(TICK)) {
                    Ok(readable) => readable,
                    Err(_) => {
                        std::thread::sleep(TICK);
                        continue;
                    }
                }
            };
            // Read the connections that have data first (indices are valid until accepting).
            let mut index = connections.len();
            while index > 0 {
                index -= 1;
                if !readable.get(index + 1).copied().unwrap_or(false) {
                    continue;
                }
                match read_head(&mut connections[index]) {
                    HeadState::Incomplete => {}
                    HeadState::Closed => {
                        connections.swap_remove(index);
                    }
                    HeadState::Complete(route) => {
                        let connection = connections.swap_remove(index);
                        let answer = match route {
                            Route::Metrics { head_only } => Answer {
                                head_only,
                                ..metrics_answer(exported)
                            },
                            Route::Reservations { head_only } => Answer {
                                head_only,
                                ..reservations_answer(listing)
                            },
                            Route::Index { head_only } => Answer {
                                head_only,
                                ..index_page(listing)
                            },
                            Route::Fixed(answer) => answer,
                        };
                        write_answer(connection.stream, answer, &writers);
                    }
                }
            }
            let now = Instant::now();
            connections
                .retain(|connection| now.duration_since(connection.opened) < REQUEST_TIMEOUT);
            if readable.first().copied().unwrap_or(false) {
                accept_all(&self.listener, &mut connections);
            }
        }
    }
}

/// Accepts every pending connection, evicting the oldest over [`MAX_CONNECTIONS`].
fn accept_all(listener: &TcpListener, connections: &mut Vec<Connection>) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if connections.len() >= MAX_CONNECTIONS {
                    if let Some(oldest) = connections
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, connection)| connection.opened)
                        .map(|(index, _)| index)
                    {
                        connections.swap_remove(oldest);
                    }
                }
                connections.push(Connection {
                    stream,
                    opened: Instant::now(),
                    head: Vec::new(),
                });
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            // WouldBlock: none left; anything else (out of fds): try again next round.
            Err(_) => return,
        }
    }
}

enum HeadState {
    Incomplete,
    Closed,
    Complete(Route),
}

/// What a complete request head asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// The metrics (filled in by the caller, who holds them); HEAD when `head_only`.
    Metrics { head_only: bool },
    /// The daemon's grants as JSON (filled in by the caller).
    Reservations { head_only: bool },
    /// The endpoints and the daemon's grants as HTML (filled in by the caller).
    Index { head_only: bool },
    /// Anything else, answered as is.
    Fixed(Answer),
}

/// Reads what a readable connection has and parses its head once complete.
fn read_head(connection: &mut Connection) -> HeadState {
    let mut buffer = [0u8; 2048];
    loop {
        match connection.stream.read(&mut buffer) {
            Ok(0) => return HeadState::Closed,
            Ok(count) => {
                connection.head.extend_from_slice(&buffer[..count]);
                if connection.head.len() > MAX_REQUEST_HEAD_BYTES {
                    return HeadState::Complete(Route::Fixed(plain(
                        431,
                        "Request Header Fields Too Large",
                        "request head too large\n",
                    )));
                }
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return HeadState::Closed,
        }
    }
    match route(&connection.head) {
        Some(route) => HeadState::Complete(route),
        None => HeadState::Incomplete,
    }
}

/// What a request head asks for; None while it is incomplete. The path is judged first (404),
/// then the method (405 with `Allow`).
fn route(head: &[u8]) -> Option<Route> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut request = httparse::Request::new(&mut headers);
    let (method, path) = match request.parse(head) {
        Ok(httparse::Status::Partial) => return None,
        Ok(httparse::Status::Complete(_)) => (
            request.method.unwrap_or_default(),
            request.path.unwrap_or_default(),
        ),
        Err(_) => {
            return Some(Route::Fixed(plain(
                400,
                "Bad Request",
                "malformed request\n",
            )))
        }
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let head_only = method == "HEAD";
    let mut answer = if !ENDPOINTS.iter().any(|(endpoint, _)| *endpoint == path) {
        plain(
            404,
            "Not Found",
            "not found; the endpoints are listed at /\n",
        )
    } else if method != "GET" && !head_only {
        let mut answer = plain(405, "Method Not Allowed", "only GET and HEAD are allowed\n");
        answer.extra_header = Some("Allow: GET, HEAD");
        answer
    } else if path == "/metrics" {
        return Some(Route::Metrics { head_only });
    } else if path == "/reservations" {
        return Some(Route::Reservations { head_only });
    } else {
        return Some(Route::Index { head_only });
    };
    answer.head_only = head_only;
    Some(Route::Fixed(answer))
}

/// The metrics' answer without its body.
fn metrics_placeholder() -> Answer {
    Answer {
        status: 200,
        reason: "OK",
        content_type: METRICS_CONTENT_TYPE,
        extra_header: None,
        body: Vec::new(),
        head_only: false,
    }
}

fn metrics_answer(exported: &Mutex<String>) -> Answer {
    let body = exported
        .lock()
        .map(|text| text.clone())
        .unwrap_or_default()
        .into_bytes();
    Answer {
        body,
        ..metrics_placeholder()
    }
}

fn plain(status: u16, reason: &'static str, body: &str) -> Answer {
    Answer {
        status,
        reason,
        content_type: "text/plain; charset=utf-8",
        extra_header: None,
        body: body.as_bytes().to_vec(),
        head_only: false,
    }
}

/// `/reservations`: the last listing of the daemon's grants; 503 while the daemon cannot be
/// listed, 404 when the monitor was not asked to list it.
fn reservations_answer(listing: &Mutex<ListingState>) -> Answer {
    let state = listing
        .lock()
        .map(|state| state.clone())
        .unwrap_or(ListingState::NotListed);
    match state {
        ListingState::Listed { json, .. } => Answer {
            status: 200,
            reason: "OK",
            content_type: "application/json",
            extra_header: None,
            body: json.into_bytes(),
            head_only: false,
        },
        ListingState::Unreachable(why) => plain(
            503,
            "Service Unavailable",
            &format!("rtlabd's grants could not be listed: {why}\n"),
        ),
        ListingState::NotListed => plain(
            404,
            "Not Found",
            "this monitor does not list rtlabd's grants (it was started with --no-reservations)\n",
        ),
    }
}

fn index_page(listing: &Mutex<ListingState>) -> Answer {
    let mut body = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rtlab monitor</title></head><body>\n\
         <h1>rtlab monitor</h1>\n<ul>\n",
    );
    for (path, what) in ENDPOINTS {
        body.push_str(&format!("<li><a href=\"{path}\">{path}</a>: {what}</li>\n"));
    }
    body.push_str("</ul>\n");
    match listing.lock().map(|state| state.clone()) {
        Ok(ListingState::Listed { html, .. }) => body.push_str(&html),
        Ok(ListingState::Unreachable(why)) => body.push_str(&format!(
            "<p>rtlabd's grants could not be listed: {}</p>\n",
            super::grants::escape(&why)
        )),
        _ => {}
    }
    body.push_str("</body></html>\n");
    Answer {
        status: 200,
        reason: "OK",
        content_type: "text/html; charset=utf-8",
        extra_header: None,
        body: body.into_bytes(),
        head_only: false,
    }
}

/// The bytes of an answer, head and (unless HEAD) body.
fn encode(answer: &Answer) -> Vec<u8> {
    let mut bytes = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        answer.status,
        answer.reason,
        answer.content_type,
        answer.body.len()
    )
    .into_bytes();
    if let Some(header) = answer.extra_header {
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(b"\r\n");
    if !answer.head_only {
        bytes.extend_from_slice(&answer.body);
    }
    bytes
}

/// Writes an answer on a thread of its own (bounded by [`MAX_WRITERS`]), then closes.
fn write_answer(stream: TcpStream, answer: Answer, writers: &Arc<AtomicUsize>) {
    let bytes = encode(&answer);
    if writers.fetch_add(1, Ordering::SeqCst) >= MAX_WRITERS {
        writers.fetch_sub(1, Ordering::SeqCst);
        // Too many clients not taking their answers: this one gets what fits, then is closed.
        let mut stream = stream;
        let _ = stream.write(&bytes);
        return;
    }
    let writers = Arc::clone(writers);
    let spawned = std::thread::Builder::new()
        .name("rtlab-metrics-write".into())
        .stack_size(64 * 1024)
        .spawn({
            let writers = Arc::clone(&writers);
            move || {
                let mut stream = stream;
                if stream.set_nonblocking(false).is_ok()
                    && stream.set_write_timeout(Some(WRITE_TIMEOUT)).is_ok()
                {
                    let _ = stream.write_all(&bytes);
                    let _ = stream.shutdown(Shutdown::Write);
                }
                writers.fetch_sub(1, Ordering::SeqCst);
            }
        });
    if spawned.is_err() {
        writers.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(head: &str) -> Answer {
        match route(head.as_bytes()) {
            Some(Route::Fixed(answer)) => answer,
            other => panic!("{head:?}: {other:?}"),
        }
    }

    #[test]
    fn requests_are_routed_by_path_then_method() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n"), None);
        assert_eq!(
            route(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(Route::Metrics { head_only: false })
        );
        assert_eq!(
            route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Some(Route::Metrics { head_only: false }),
            "a query string is ignored"
        );
        assert_eq!(
            route(b"HEAD /metrics HTTP/1.1\r\n\r\n"),
            Some(Route::Metrics { head_only: true })
        );
        assert_eq!(
            route(b"GET / HTTP/1.1\r\n\r\n"),
            Some(Route::Index { head_only: false })
        );
        assert_eq!(
            route(b"GET /reservations HTTP/1.1\r\n\r\n"),
            Some(Route::Reservations { head_only: false })
        );
        let index = index_page(&Mutex::new(ListingState::Unreachable("no <daemon>".into())));
        assert_eq!(index.status, 200);
        let html = String::from_utf8_lossy(&index.body);
        assert!(html.contains("href=\"/metrics\""), "{html}");
        assert!(html.contains("no &lt;daemon&gt;"), "{html}");
        assert_eq!(
            reservations_answer(&Mutex::new(ListingState::Unreachable("x".into()))).status,
            503
        );
        let post = fixed("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(post.status, 405);
        assert_eq!(post.extra_header, Some("Allow: GET, HEAD"));
        assert_eq!(fixed("GET /nope HTTP/1.1\r\n\r\n").status, 404);
        assert_eq!(
            fixed("DELETE /nope HTTP/1.1\r\n\r\n").status,
            404,
            "the path is judged first"
        );
        assert_eq!(fixed("\x16\x03\x01 hello\r\n\r\n").status, 400);
    }

    #[test]
    fn a_head_answer_has_the_length_but_no_body() {
        let mut answer = plain(200, "OK", "abc");
        answer.head_only = true;
        let text = String::from_utf8(encode(&answer)).unwrap();
        assert!(text.contains("Content-Length: 3\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }
}
