//! Root's ping: a fresh connection to the daemon's root socket (`rtlab_core::rpc::root_socket_path`,
//! the one `rtlab` run as root uses) every 100 ms (connect → `ping` → answer), timed
//! from before `connect` to the answer's newline. A ping answered later than the bound is a
//! violation, unless the machine itself was not running meanwhile: this harness runs on virtual
//! machines whose hypervisor stops a virtual CPU for milliseconds at a time, and no daemon can
//! answer while its CPUs are taken away. So each ping reads every CPU's steal time (/proc/stat,
//! the time the hypervisor ran something else while the CPU wanted to run) before and after, and
//! a late answer whose lateness the steal accounts for is reported apart, as `hypervisor`, with
//! the steal as evidence; any other late answer stays a violation.
//!
//! Root's client runs at SCHED_FIFO [`CLIENT_PRIORITY`], above every priority RealtimeKit1
//! grants (the daemon's default `max_realtime_priority` is 20): at SCHED_OTHER the client itself
//! waited for the kernel's fair server while users' SCHED_RR threads held both CPUs within their
//! shares, and its late answers measured its own starvation as well as the daemon's.

use crate::wire::{answer_word, Connection};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often root pings.
pub const PING_INTERVAL: Duration = Duration::from_millis(100);

/// Root's client's SCHED_FIFO priority: one above the daemon's default RealtimeKit1 maximum.
pub const CLIENT_PRIORITY: u32 = 21;

/// /proc/stat counts in USER_HZ (10 ms) units: a steal delta is exact to within one of them.
pub const STEAL_RESOLUTION: Duration = Duration::from_millis(10);

/// Late answers kept for the report (all are counted).
const LATE_KEPT: usize = 20;

/// Why a ping was answered after the bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lateness {
    /// The hypervisor took CPUs away for at least as long as the answer was late: not the
    /// daemon's doing, not a violation.
    Hypervisor,
    /// The daemon was late while the machine ran: a violation.
    Daemon,
}

/// One ping answered after the bound.
#[derive(Clone, Debug, Serialize)]
pub struct LateAnswer {
    /// CLOCK_MONOTONIC ns when it was sent.
    pub sent_at_ns: u64,
    pub took_ms: f64,
    /// Each CPU's steal time while it was under way (ms, in 10 ms units).
    pub steal_ms_per_cpu: Vec<f64>,
    pub lateness: Lateness,
}

impl LateAnswer {
    /// The answer and its evidence, in words.
    pub fn describe(&self, bound: Duration) -> String {
        let steal: Vec<String> = self
            .steal_ms_per_cpu
            .iter()
            .enumerate()
            .map(|(cpu, ms)| format!("cpu{cpu} {ms:.0} ms"))
            .collect();
        let steal = if steal.is_empty() {
            "unknown".to_owned()
        } else {
            steal.join(", ")
        };
        format!(
            "root's ping took {:.1} ms (bound {} ms); steal time meanwhile: {steal}{}",
            self.took_ms,
            bound.as_millis(),
            match self.lateness {
                Lateness::Hypervisor => " — the hypervisor's stall covers the lateness",
                Lateness::Daemon => "",
            }
        )
    }
}

/// Why an answer `took` past `bound`: [`Lateness::Hypervisor`] when some CPU's steal time during
/// it (`steal_per_cpu`) was at least one /proc/stat unit and, allowing that unit's rounding,
/// covers the time past the bound (without the stall the answer would have been in time);
/// [`Lateness::Daemon`] otherwise.
pub fn lateness(took: Duration, bound: Duration, steal_per_cpu: &[Duration]) -> Lateness {
    let late_by = took.saturating_sub(bound);
    let largest_steal = steal_per_cpu.iter().copied().max().unwrap_or_default();
    if largest_steal >= STEAL_RESOLUTION && largest_steal + STEAL_RESOLUTION >= late_by {
        Lateness::Hypervisor
    } else {
        Lateness::Daemon
    }
}

/// Each CPU's steal time now.
fn steal_now() -> BTreeMap<usize, u64> {
    rtlab_sys::proc_stat::cpu_times()
        .map(|times| {
            times
                .into_iter()
                .map(|(cpu, times)| (cpu, times.steal_ns))
                .collect()
        })
        .unwrap_or_default()
}

/// What root's pinger saw.
#[derive(Default)]
struct Pings {
    asked: AtomicU64,
    answered: AtomicU64,
    /// CLOCK_MONOTONIC ns the ping under way was sent (0: none).
    outstanding_since: AtomicU64,
    /// Every answered ping's time, ns.
    answer_times_ns: Mutex<Vec<u64>>,
    /// Refused or broken pings, in words, not yet taken by the checker.
    failures: Mutex<Vec<String>>,
    /// Late answers not yet taken by the checker.
    late: Mutex<Vec<LateAnswer>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Root pinging the daemon on `socket` until stopped.
pub struct RootPinger {
    pings: Arc<Pings>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
    bound: Duration,
}

/// Root's pings over a run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PingFigures {
    pub asked: u64,
    pub answered: u64,
    pub worst_ms: f64,
    pub p99_ms: f64,
    pub median_ms: f64,
}

/// What [`RootPinger::join`] hands back.
#[derive(Debug)]
pub struct PingerEnd {
    pub figures: PingFigures,
    /// The late answers not taken yet.
    pub late: Vec<LateAnswer>,
    /// The pings refused or broken, not taken yet.
    pub failures: Vec<String>,
}

impl RootPinger {
    /// Starts pinging every [`PING_INTERVAL`]; an answer later than `bound` is late.
    pub fn start(socket: PathBuf, bound: Duration) -> RootPinger {
        let pings = Arc::new(Pings::default());
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let pings = Arc::clone(&pings);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                // Best effort: a harness not run as root has failed before this.
                let _ =
                    rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Fifo {
                        priority: CLIENT_PRIORITY,
                    });
                ping_until(&socket, bound, &stop, &pings)
            })
        };
        RootPinger {
            pings,
            stop,
            thread,
            bound,
        }
    }

    /// How long the ping under way has waited at `now_ns`, if one is.
    pub fn outstanding_for(&self, now_ns: u64) -> Option<Duration> {
        match self.pings.outstanding_since.load(Ordering::Relaxed) {
            0 => None,
            since => Some(Duration::from_nanos(now_ns.saturating_sub(since))),
        }
    }

    /// The pings refused or broken since the last call.
    pub fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut *locked(&self.pings.failures))
    }

    /// The late answers since the last call.
    pub fn take_late(&self) -> Vec<LateAnswer> {
        std::mem::take(&mut *locked(&self.pings.late))
    }

    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Stops pinging after the ping under way.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops pinging and waits for the ping under way: the figures, and the late answers and
    /// failures not taken yet.
    pub fn join(self) -> PingerEnd {
        self.stop();
        let _ = self.thread.join();
        let mut times = std::mem::take(&mut *locked(&self.pings.answer_times_ns));
        times.sort_unstable();
        let at = |fraction: f64| -> f64 {
            if times.is_empty() {
                return 0.0;
            }
            let index = ((times.len() as f64 * fraction).ceil() as usize).clamp(1, times.len());
            times[index - 1] as f64 / 1e6
        };
        let figures = PingFigures {
            asked: self.pings.asked.load(Ordering::Relaxed),
            answered: self.pings.answered.load(Ordering::Relaxed),
            worst_ms: times.last().map_or(0.0, |worst| *worst as f64 / 1e6),
            p99_ms: at(0.99),
            median_ms: at(0.5),
        };
        PingerEnd {
            figures,
            late: std::mem::take(&mut *locked(&self.pings.late)),
            failures: std::mem::take(&mut *locked(&self.pings.failures)),
        }
    }
}

/// A tracefs instance to freeze at the first late answer, for a trace of what ran meanwhile: the
/// directory in `RTLAB_HOSTILE_FREEZE_TRACE` (e.g. `/sys/kernel/tracing/instances/hostile`, its
/// events enabled and its clock `mono` beforehand). Each ping is marked in its `trace_marker`
/// ("root ping sent", "root ping answered after N us"); at the first answer later than the bound
/// its `tracing_on` is set to 0 and the ring buffer keeps the seconds before it.
struct TraceFreeze {
    marker: Option<std::fs::File>,
    tracing_on: std::path::PathBuf,
    frozen: bool,
}

impl TraceFreeze {
    fn from_env() -> Option<TraceFreeze> {
        let instance = std::path::PathBuf::from(std::env::var_os("RTLAB_HOSTILE_FREEZE_TRACE")?);
        Some(TraceFreeze {
            marker: std::fs::OpenOptions::new()
                .write(true)
                .open(instance.join("trace_marker"))
                .ok(),
            tracing_on: instance.join("tracing_on"),
            frozen: false,
        })
    }

    fn mark(&mut self, text: &str) {
        use std::io::Write as _;
        if let (Some(marker), false) = (&mut self.marker, self.frozen) {
            let _ = marker.write_all(text.as_bytes());
        }
    }

    fn freeze(&mut self) {
        if !self.frozen {
            self.frozen = std::fs::write(&self.tracing_on, "0").is_ok();
        }
    }
}

fn ping_until(socket: &std::path::Path, bound: Duration, stop: &AtomicBool, pings: &Pings) {
    let mut freeze = TraceFreeze::from_env();
    while !stop.load(Ordering::Relaxed) {
        let steal_before = steal_now();
        let sent = Instant::now();
        let sent_at_ns = rtlab_sys::clock::monotonic_ns();
        pings.outstanding_since.store(sent_at_ns, Ordering::Relaxed);
        pings.asked.fetch_add(1, Ordering::Relaxed);
        if let Some(freeze) = &mut freeze {
            freeze.mark("root ping sent");
        }
        let answer = Connection::open(socket).and_then(|mut connection| {
            connection.send(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"ping\"}\n")?;
            connection.answer()
        });
        let took = sent.elapsed();
        pings.outstanding_since.store(0, Ordering::Relaxed);
        if let Some(freeze) = &mut freeze {
            freeze.mark(&format!("root ping answered after {} us", took.as_micros()));
            if took > bound {
                freeze.freeze();
            }
        }
        match answer {
            Ok(Some(answer)) if answer_word(&answer) == "ok" => {
                pings.answered.fetch_add(1, Ordering::Relaxed);
                locked(&pings.answer_times_ns).push(took.as_nanos() as u64);
                if took > bound {
                    let steal_after = steal_now();
                    let steal: Vec<Duration> = steal_after
                        .iter()
                        .map(|(cpu, after)| {
                            Duration::from_nanos(
                                after.saturating_sub(steal_before.get(cpu).copied().unwrap_or(0)),
                            )
                        })
                        .collect();
                    let late = LateAnswer {
                        sent_at_ns,
                        took_ms: took.as_secs_f64() * 1e3,
                        steal_ms_per_cpu: steal.iter().map(|d| d.as_secs_f64() * 1e3).collect(),
                        lateness: lateness(took, bound, &steal),
                    };
                    locked(&pings.late).push(late);
                }
            }
            other => locked(&pings.failures).push(format!("root's ping after {took:?}: {other:?}")),
        }
        std::thread::sleep(PING_INTERVAL.saturating_sub(sent.elapsed()));
    }
}

/// Keeps the first [`LATE_KEPT`] late answers of a run.
pub fn keep_first(kept: &mut Vec<LateAnswer>, more: Vec<LateAnswer>) {
    let room = LATE_KEPT.saturating_sub(kept.len());
    kept.extend(more.into_iter().take(room));
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn a_late_answer_is_the_hypervisors_only_when_its_steal_covers_the_lateness() {
        // 150 ms with one CPU stolen for 60 ms: in time without the stall.
        assert_eq!(
            lateness(ms(150), BOUND, &[ms(60), ms(0)]),
            Lateness::Hypervisor
        );
        // Within one 10 ms unit of rounding.
        assert_eq!(lateness(ms(148), BOUND, &[ms(40)]), Lateness::Hypervisor);
        // No steal: the daemon's, however little late.
        assert_eq!(lateness(ms(105), BOUND, &[ms(0), ms(0)]), Lateness::Daemon);
        assert_eq!(lateness(ms(105), BOUND, &[]), Lateness::Daemon);
        // Some steal, far less than the lateness: still the daemon's.
        assert_eq!(
            lateness(ms(300), BOUND, &[ms(10), ms(20)]),
            Lateness::Daemon
        );
    }

    #[test]
    fn the_first_late_answers_are_kept_and_no_more() {
        let late = |took_ms| LateAnswer {
            sent_at_ns: 1,
            took_ms,
            steal_ms_per_cpu: vec![0.0, 30.0],
            lateness: Lateness::Daemon,
        };
        let mut kept = Vec::new();
        keep_first(&mut kept, (0..15).map(|n| late(f64::from(n))).collect());
        keep_first(&mut kept, (15..30).map(|n| late(f64::from(n))).collect());
        assert_eq!(kept.len(), LATE_KEPT);
        assert_eq!(kept[19].took_ms, 19.0);
        assert_eq!(
            late(123.4).describe(BOUND),
            "root's ping took 123.4 ms (bound 100 ms); steal time meanwhile: cpu0 0 ms, cpu1 30 ms"
        );
    }
}
