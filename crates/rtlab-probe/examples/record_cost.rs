//! What recording one wake-up costs on the sample path, after a real 1 ms sleep (so caches and
//! TLB are as cold as the probe finds them): the time of the two histogram records a timer
//! thread makes per wake-up (wake-up latency and interval), into `LatencyHistogram`s directly
//! and into `SamplePathHistogram` windows, alternating in blocks of 500 wake-ups so both see the
//! same load. Run it pinned at real-time priority, e.g.
//! `chrt -f 90 taskset -c 1 target/release/examples/record_cost 20000`; BENCHMARKS.md
//! ("CPU cost per sample") has the figures.

use rtlab_core::{LatencyHistogram, SamplePathHistogram};
use rtlab_sys::clock::{monotonic_ns, sleep_until_ns};

const PERIOD_NS: u64 = 1_000_000;
const BLOCK: usize = 500;

fn main() {
    let wakeups: usize = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(20_000);
    let mut direct = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut windowed = (
        SamplePathHistogram::for_latencies(),
        SamplePathHistogram::around(PERIOD_NS),
    );
    direct.0.prefault();
    direct.1.prefault();
    windowed.0.prefault();
    windowed.1.prefault();
    let mut spent_ns = [0u64; 2];
    let mut counted = [0u64; 2];
    let mut deadline_ns = monotonic_ns() + PERIOD_NS;
    let mut previous_ns = None;
    for wakeup in 0..wakeups {
        sleep_until_ns(deadline_ns);
        let now_ns = monotonic_ns();
        let latency_ns = now_ns.saturating_sub(deadline_ns);
        let interval_ns = previous_ns.map(|previous| now_ns - previous);
        let variant = (wakeup / BLOCK) % 2;
        let before_ns = monotonic_ns();
        if variant == 0 {
            direct.0.record(latency_ns);
            if let Some(interval_ns) = interval_ns {
                direct.1.record(interval_ns);
            }
        } else {
            windowed.0.record(latency_ns);
            if let Some(interval_ns) = interval_ns {
                windowed.1.record(interval_ns);
            }
        }
        let after_ns = monotonic_ns();
        spent_ns[variant] += after_ns - before_ns;
        counted[variant] += 1;
        previous_ns = Some(now_ns);
        deadline_ns += PERIOD_NS;
        while deadline_ns <= after_ns {
            deadline_ns += PERIOD_NS;
        }
    }
    // The first wake-up (no interval yet) is a direct one: every windowed wake-up has both.
    let windowed_count = windowed.0.into_histogram().count() + windowed.1.into_histogram().count();
    assert_eq!(
        windowed_count,
        counted[1] * 2,
        "every windowed wake-up was recorded"
    );
    for (name, variant) in [("LatencyHistogram", 0), ("SamplePathHistogram", 1)] {
        println!(
            "{name}: {:.0} ns per wake-up (both series, clock reads included) over {} wake-ups",
            spent_ns[variant] as f64 / counted[variant].max(1) as f64,
            counted[variant]
        );
    }
    println!(
        "wake-up latency median {} ns, p99 {} ns",
        direct.0.value_at_quantile(0.5),
        direct.0.value_at_quantile(0.99)
    );
}
