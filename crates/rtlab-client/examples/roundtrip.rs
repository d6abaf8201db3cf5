//! The cost of asking the daemon: reserve-then-release round trips for the calling thread, and
//! `ping` round trips (the protocol and socket alone), through a running daemon. Prints the
//! median, p90, p99 and maximum in microseconds. BENCHMARKS.md has the command and the figures.
//!
//!   cargo run --release -p rtlab-client --example roundtrip -- [ITERATIONS] [default|deadline|dispatch] [PAUSE_MS]
//!
//! PAUSE_MS (default 0) is slept between round trips, outside the timing: the kernel hands a
//! SCHED_DEADLINE thread's bandwidth back only at its "0-lag" time after it leaves the class, so
//! back-to-back `deadline` reservations of the same thread run into EBUSY without a pause. With a
//! pause, a ping after each pause is measured too: what a request pays for waking both sides.

use rtlab_client::{Backend, Client};
use rtlab_core::Nanos;
use std::time::Instant;

fn summary(name: &str, mut samples: Vec<u64>) {
    samples.sort_unstable();
    let at = |quantile: f64| {
        let index = ((samples.len() as f64 - 1.0) * quantile).round() as usize;
        samples[index] as f64 / 1_000.0
    };
    println!(
        "{name:<26} n={:<6} median {:>8.1} us  p90 {:>8.1} us  p99 {:>8.1} us  max {:>8.1} us",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut arguments = std::env::args().skip(1);
    let iterations: usize = arguments.next().map_or(Ok(2_000), |text| text.parse())?;
    let backend = match arguments.next().as_deref() {
        None | Some("default") => None,
        Some("deadline") => Some(Backend::Deadline),
        Some("dispatch") => Some(Backend::Dispatch),
        Some(other) => return Err(format!("unknown backend '{other}'").into()),
    };
    let pause =
        std::time::Duration::from_millis(arguments.next().map_or(Ok(0), |text| text.parse())?);
    let mut client = Client::connect_default()?;
    let ping = client.ping()?;
    println!(
        "daemon {} at {}, default backend {}, measuring with {}",
        ping.server_version,
        client.socket().display(),
        ping.default_backend,
        backend.map_or("the default backend".to_owned(), |backend| backend
            .to_string())
    );
    // Warm-up: the first calls fault in pages on both sides.
    for _ in 0..20 {
        client.ping()?;
    }
    let mut pings = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        client.ping()?;
        pings.push(start.elapsed().as_nanos() as u64);
    }
    // The same ping after each pause: what a request pays for finding both sides asleep, apart
    // from the work a reservation does.
    let mut paused_pings = Vec::with_capacity(iterations);
    if !pause.is_zero() {
        for _ in 0..iterations {
            std::thread::sleep(pause);
            let start = Instant::now();
            client.ping()?;
            paused_pings.push(start.elapsed().as_nanos() as u64);
        }
    }
    let mut reserves = Vec::with_capacity(iterations);
    let mut releases = Vec::with_capacity(iterations);
    let mut round_trips = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        client.reserve_current_thread(Nanos::from_millis(1), Nanos::from_millis(10), backend)?;
        let reserved = Instant::now();
        client.release_current_thread()?;
        let released = Instant::now();
        reserves.push((reserved - start).as_nanos() as u64);
        releases.push((released - reserved).as_nanos() as u64);
        round_trips.push((released - start).as_nanos() as u64);
        std::thread::sleep(pause);
    }
    summary("ping", pings);
    if !paused_pings.is_empty() {
        summary("ping after the pause", paused_pings);
    }
    summary("reserve", reserves);
    summary("release", releases);
    summary("reserve + release", round_trips);
    Ok(())
}
