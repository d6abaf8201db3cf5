//! The monitor's HTTP endpoint against hostile and ordinary clients, over real loopback TCP:
//! 200 idle connections do not keep a scrape out or add threads, a client that never finishes
//! its request is closed, and bad methods and paths get the right status.

#![cfg(target_os = "linux")]

use rtlab_monitor::grants::ListingState;
use rtlab_monitor::http::{MetricsServer, MAX_CONNECTIONS, REQUEST_TIMEOUT};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A generous client timeout: the test must pass on a loaded machine (the <1 s figure is a
/// benchmark, BENCHMARKS.md).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

const METRICS: &str =
    "# TYPE rtlab_monitor_windows counter\nrtlab_monitor_windows_total 3\n# EOF\n";

struct Served {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

fn serve() -> Served {
    let server = MetricsServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = server.local_address().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let thread = server
        .serve(
            Arc::new(Mutex::new(METRICS.to_owned())),
            Arc::new(Mutex::new(ListingState::NotListed)),
            Arc::clone(&stop),
            None,
        )
        .unwrap();
    Served {
        address,
        stop,
        thread: Some(thread),
    }
}

/// Sends `request` on a new connection and reads the whole answer (the server closes).
fn ask(address: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&address, CLIENT_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .unwrap_or_else(|error| panic!("reading the answer to {request:?}: {error}"));
    answer
}

fn threads_of_this_process() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

#[test]
fn a_scrape_gets_through_200_idle_connections_without_a_thread_each() {
    let served = serve();
    let threads_before = threads_of_this_process();
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect_timeout(&served.address, CLIENT_TIMEOUT).unwrap())
        .collect();
    // Let the server accept them all (it evicts the oldest beyond its cap).
    std::thread::sleep(Duration::from_millis(500));
    let threads_with_idle = threads_of_this_process();
    assert!(
        threads_with_idle <= threads_before + 2,
        "200 idle connections grew the process from {threads_before} to {threads_with_idle} threads"
    );
    let answer = ask(
        served.address,
        "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(
        answer.contains("Content-Type: application/openmetrics-text; version=1.0.0"),
        "{answer}"
    );
    assert!(answer.ends_with(METRICS), "{answer}");
    // Over the cap the oldest idle connections were closed: at least 200 - MAX_CONNECTIONS of
    // them read end-of-file.
    let mut closed = 0;
    for mut stream in idle {
        stream
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let mut byte = [0u8; 1];
        if matches!(stream.read(&mut byte), Ok(0)) {
            closed += 1;
        }
    }
    assert!(
        closed >= 200 - MAX_CONNECTIONS,
        "only {closed} idle connections were evicted"
    );
}

#[test]
fn a_request_never_completed_is_closed_after_the_request_timeout() {
    let served = serve();
    let mut slow = TcpStream::connect_timeout(&served.address, CLIENT_TIMEOUT).unwrap();
    slow.write_all(b"GET /metr").unwrap();
    slow.set_read_timeout(Some(REQUEST_TIMEOUT + CLIENT_TIMEOUT))
        .unwrap();
    let mut answer = Vec::new();
    let read = slow.read_to_end(&mut answer);
    assert!(
        matches!(read, Ok(0)),
        "the server should close a request that never completes: {read:?} {answer:?}"
    );
    // The server still answers others.
    assert!(ask(served.address, "GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 200 OK"));
}

#[test]
fn methods_and_paths_get_their_status() {
    let served = serve();
    let index = ask(served.address, "GET / HTTP/1.1\r\nHost: test\r\n\r\n");
    assert!(index.starts_with("HTTP/1.1 200 OK\r\n"), "{index}");
    assert!(index.contains("text/html"), "{index}");
    assert!(
        index.contains("<a href=\"/metrics\">/metrics</a>"),
        "{index}"
    );

    let post = ask(
        served.address,
        "POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(
        post.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"),
        "{post}"
    );
    assert!(post.contains("\r\nAllow: GET, HEAD\r\n"), "{post}");

    let missing = ask(
        served.address,
        "GET /metricz HTTP/1.1\r\nHost: test\r\n\r\n",
    );
    assert!(
        missing.starts_with("HTTP/1.1 404 Not Found\r\n"),
        "{missing}"
    );

    let head = ask(
        served.address,
        "HEAD /metrics HTTP/1.1\r\nHost: test\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains(&format!("Content-Length: {}\r\n", METRICS.len())),
        "{head}"
    );
    assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");

    let garbage = ask(served.address, "\u{1}\u{2} nonsense\r\n\r\n");
    assert!(
        garbage.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{garbage}"
    );

    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n", "a".repeat(20_000));
    let mut stream = TcpStream::connect_timeout(&served.address, CLIENT_TIMEOUT).unwrap();
    stream.set_read_timeout(Some(CLIENT_TIMEOUT)).unwrap();
    // The server may close before all of it is sent; what it answered is what counts.
    let _ = stream.write_all(huge.as_bytes());
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 431 "),
        "an oversized head gets 431: {answer}"
    );
}
