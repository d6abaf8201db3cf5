//! `rtlab forecast` held against a real application (issue 27): Debian's jackd2 with its dummy
//! driver at 128 frames × 2 (2.667 ms), a client using 30 % of each period that counts its own
//! xruns with JACK's `jack_set_xrun_callback`, `stress-ng --cpu` on every CPU as the competitor,
//! and `rtlab run --classes rt-high --compute 100us` measuring at the same time. JACK calls the
//! xrun callback up to twice for one failed cycle (10–70 µs apart): callbacks within 1 ms are one
//! glitch, what the forecast counts.
//!
//! The response model's forecast (`--chain 2`, the driver thread waking the client) must hold
//! JACK's glitches inside its 90 % interval widened by the observation's own Poisson noise (99 %)
//! and by ×2 each way: the machine the test runs on is shared and its stalls change between the
//! seconds the probe measures and the seconds JACK counts (BENCHMARKS.md "The forecast against
//! JACK" has the unwidened comparison, cell by cell: 0.67–1.42 under stress-ng and idle). A
//! periodic SCHED_FIFO competitor is not used here: whether its bursts fail JACK depends on their
//! phase against JACK's period (the same one gave JACK 24 and 214 xruns in two runs), which no
//! rate can forecast within ×2.
//!
//! Needs root (SCHED_FIFO), jackd2, libjack-jackd2-dev and cc: `ignore`d, run as root in CI with
//! `--include-ignored`.

mod common;

use common::jack::{ClientProcess, JackServer};
use common::{assert_exit_code, stdout_json, Sandbox, RT_HIGH_WITH_100US_OF_WORK};
use std::time::Duration;

const SECONDS: f64 = 20.0;

/// Smallest `k` with `P(K ≤ k) ≥ q` for `K ~ Poisson(mean)`.
fn poisson_quantile(mean: f64, q: f64) -> u64 {
    let mut term = (-mean).exp();
    let mut total = term;
    let mut k = 0u64;
    while total < q && k < 1_000_000 {
        k += 1;
        term *= mean / k as f64;
        total += term;
    }
    k
}

#[test]
#[ignore = "needs root: jackd -R and the probe run SCHED_FIFO"]
fn the_forecast_holds_jack_s_glitch_count_under_stress() {
    let sandbox = Sandbox::new();
    let server = JackServer::start();
    let client = ClientProcess::start(&server, "forecast", 30, SECONDS + 2.0);
    assert!(
        client.wait_until_active(Duration::from_secs(15)),
        "the JACK client never ran its process callback"
    );
    let mut stress = std::process::Command::new("stress-ng")
        .args(["--cpu", "0", "--timeout"])
        .arg(format!("{}s", SECONDS as u64 + 1))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start stress-ng (Debian: apt-get install stress-ng)");
    let record = sandbox.file("run.json");
    let run = sandbox.run(RT_HIGH_WITH_100US_OF_WORK.iter().copied().chain([
        "-D",
        &format!("{SECONDS}s"),
        "--json",
        record.to_str().expect("utf-8 path"),
    ]));
    assert_exit_code(&run, 0);
    let report = client.wait();
    let _ = stress.kill();
    let _ = stress.wait();
    assert_eq!(report.period_ns, 2_666_666);
    let glitches = report
        .xrun_times_ns
        .iter()
        .enumerate()
        .filter(|(index, at)| *index == 0 || **at - report.xrun_times_ns[index - 1] > 1_000_000)
        .count() as u64;
    assert!(glitches <= report.xruns);

    let forecast = sandbox.run([
        "forecast",
        record.to_str().expect("utf-8 path"),
        "--buffers",
        "2",
        "--buffer",
        "2666666ns",
        "--compute",
        "800000ns",
        "--chain",
        "2",
        "--json",
        "-",
    ]);
    assert_exit_code(&forecast, 0);
    let json = stdout_json(&forecast);
    let row = &json["rows"][0];
    assert_eq!(json["model"], "response", "{json}");
    assert_eq!(row["basis"]["kind"], "response", "{row}");
    assert_eq!(row["basis"]["compute_measured"], true, "{row}");
    assert_eq!(row["basis"]["probe_compute_ns"], 100_000, "{row}");
    let mttf = row["mttf_s"].as_f64().unwrap_or(f64::INFINITY);
    let mttf_low = row["mttf_ci_s"][0].as_f64().expect("an interval");
    // No upper end when no stall was seen: the rate may be 0.
    let mttf_high = row["mttf_ci_s"][1].as_f64().unwrap_or(f64::INFINITY);
    assert!(mttf_low <= mttf && mttf <= mttf_high, "{row}");

    let seconds = report.duration_ns as f64 / 1e9;
    let low = poisson_quantile(seconds / mttf_high / 2.0, 0.005);
    let high = poisson_quantile(seconds / mttf_low * 2.0, 0.995);
    assert!(
        (low..=high).contains(&glitches),
        "JACK counted {glitches} glitches ({} xrun callbacks) in {seconds:.1} s; the forecast (one every {mttf:.4} s, 90 % CI {mttf_low:.4}–{mttf_high:.4} s) allows {low}–{high}",
        report.xruns
    );
}
