//! `rtlab trace` held against a real application (issue 26): Debian's jackd2 with its dummy
//! driver, a JACK client that counts its own xruns (`bench/jack/xrun_client.c`) and a SCHED_FIFO
//! competitor (`bench/jack/fifo_hog.c`). JACK's xrun count is the truth the late activations are
//! judged by, and the competitor is the culprit they must name.
//!
//! Needs root (SCHED_FIFO, tracefs/BPF), jackd2, libjack-jackd2-dev and cc: `ignore`d, run as
//! root in CI with `--include-ignored`.

mod common;

use common::jack::{ClientProcess, JackServer};
use std::time::Duration;

#[test]
#[ignore = "needs root: jackd -R (SCHED_FIFO)"]
fn the_jack_harness_runs_a_client_against_its_own_server() {
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "harness", 10, 2.0);
    assert!(client.wait_until_active(Duration::from_secs(15)));
    let report = client.wait();
    assert_eq!(report.period_ns, 2_666_666);
    assert!(report.callbacks > 100, "{:?}", report.json);
    assert!(report.process_tid > 0);
}
