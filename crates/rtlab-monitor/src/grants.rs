//! The daemon's grants in the monitor: every reservation `rtlabd` holds and every thread a program
//! made real-time through `org.freedesktop.RealtimeKit1` (`rtlab daemon --rtkit`), exported as
//! Prometheus metrics beside the latency and served whole on `/reservations` (the document
//! `rtlab reservations --json` writes).
//!
//! The monitor does not talk to the daemon itself (this crate sits below the daemon's client):
//! the caller hands it a [`GrantSource`] that lists the daemon, and a thread of the monitor asks
//! it every [`REFRESH`], so a slow or absent daemon never delays a scrape or a measuring window.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};
use rtlab_core::rpc::ListResult;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, SystemTime};

/// How often the monitor lists the daemon's grants.
pub const REFRESH: Duration = Duration::from_secs(2);

/// The daemon's list, and the same list as the `rtlab.reservations/1` document.
#[derive(Debug, Clone)]
pub struct GrantListing {
    pub list: ListResult,
    /// The JSON document served on `/reservations`.
    pub json: String,
}

/// Lists the daemon's grants for the monitor (the CLI's implementation holds the daemon's
/// client). An `Err` says why the daemon could not be listed (no daemon, a refused connection).
pub trait GrantSource: Send + 'static {
    fn listing(&mut self) -> Result<GrantListing, String>;
}

/// What `/reservations` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListingState {
    /// The monitor was not asked to list the daemon.
    NotListed,
    /// Not listed yet, or the last listing failed (why).
    Unreachable(String),
    /// The last listing: the JSON document, and HTML tables for `/`.
    Listed { json: String, html: String },
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReservationLabels {
    grant: String,
    /// `tid:N`, `pid:N`, or the activity's name.
    reservation: String,
    owner_uid: String,
    backend: String,
    cpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReservationThreadLabels {
    grant: String,
    pid: String,
    tid: String,
    comm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CpuLabels {
    cpu: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RealtimeKitLabels {
    tid: String,
    comm: String,
    pid: String,
    /// The uid the bus said asked (it owns the thread).
    uid: String,
    /// The process the bus said asked.
    caller_pid: String,
    method: String,
    /// `SCHED_RR`, `SCHED_OTHER` (a nice level) or `reservation`.
    policy: String,
    /// SCHED_RR's priority, empty otherwise.
    priority: String,
    /// The nice level of `MakeThreadHighPriority`, empty otherwise.
    nice: String,
    /// The reservation holding the thread (a configured policy's, or `rtlab reserve`'s), empty
    /// when none.
    grant: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RealtimeKitThreadLabels {
    tid: String,
    pid: String,
    uid: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// The grant metrics; rebuilt whole from each listing, so a grant that ended leaves the export.
pub(super) struct GrantMetrics {
    reachable: Gauge,
    reservation_amount: Family<ReservationLabels, FloatGauge>,
    reservation_period: Family<ReservationLabels, FloatGauge>,
    reservation_requested_amount: Family<ReservationLabels, FloatGauge>,
    reservation_requested_period: Family<ReservationLabels, FloatGauge>,
    reservation_kernel_runtime: Family<ReservationLabels, FloatGauge>,
    reservation_kernel_window: Family<ReservationLabels, FloatGauge>,
    reservation_thread: Family<ReservationThreadLabels, Gauge>,
    cpu_reserved: Family<CpuLabels, FloatGauge>,
    realtimekit_thread: Family<RealtimeKitLabels, Gauge>,
    realtimekit_since: Family<RealtimeKitThreadLabels, FloatGauge>,
}

/// A pid or tid as a label: empty for 0, which is how the daemon shows another user's thread to an
/// unprivileged monitor (the monitor's unit runs as a dynamic user).
fn id_label(id: u32) -> String {
    if id == 0 {
        String::new()
    } else {
        id.to_string()
    }
}

fn text_of<T: ToString>(value: Option<T>) -> String {
    value.map(|value| value.to_string()).unwrap_or_default()
}

/// Seconds since the Unix epoch of an RFC 3339 time, if it is one.
fn unix_seconds(rfc3339: &str) -> Option<f64> {
    let time = humantime::parse_rfc3339_weak(rfc3339).ok()?;
    Some(
        time.duration_since(SystemTime::UNIX_EPOCH)
            .ok()?
            .as_secs_f64(),
    )
}

/// A new metric registered as `name` with `help`; the registry keeps a clone, which shares the
/// metric's values.
fn registered<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

impl GrantMetrics {
    pub(super) fn register(registry: &mut Registry) -> GrantMetrics {
        GrantMetrics {
            reachable: registered(
                registry,
                "daemon_listed",
                "1 when the last listing of rtlabd's grants succeeded, 0 when the daemon could not be asked",
            ),
            reservation_amount: registered(
                registry,
                "reservation_granted_amount_seconds",
                "CPU time the planner granted a reservation of rtlabd every granted period (the kernel's figure is reservation_kernel_runtime_seconds)",
            ),
            reservation_period: registered(
                registry,
                "reservation_granted_period_seconds",
                "The period the planner granted a reservation of rtlabd",
            ),
            reservation_requested_amount: registered(
                registry,
                "reservation_requested_amount_seconds",
                "CPU time a reservation of rtlabd was asked for every requested period",
            ),
            reservation_requested_period: registered(
                registry,
                "reservation_requested_period_seconds",
                "The period a reservation of rtlabd was asked for",
            ),
            reservation_kernel_runtime: registered(
                registry,
                "reservation_kernel_runtime_seconds",
                "CPU time the kernel really holds for a reservation of rtlabd in every window, read back by the daemon (SCHED_DEADLINE runtime through sched_getattr, or the dispatcher's least slot time in a window); 0 when the thread was found at another policy; absent when nothing could be read",
            ),
            reservation_kernel_window: registered(
                registry,
                "reservation_kernel_window_seconds",
                "The window of reservation_kernel_runtime_seconds (SCHED_DEADLINE period, or the dispatcher's window)",
            ),
            reservation_thread: registered(
                registry,
                "reservation_thread",
                "1 for each thread a reservation of rtlabd holds",
            ),
            cpu_reserved: registered(
                registry,
                "cpu_reserved_fraction",
                "The fraction of a CPU rtlabd's reservations hold",
            ),
            realtimekit_thread: registered(
                registry,
                "realtimekit_thread",
                "1 for each thread a program made real-time (or high priority) through org.freedesktop.RealtimeKit1 served by rtlabd: who asked (uid, caller_pid, method) and what it got (policy, priority, nice, grant); other users' threads, whose tid, pid and comm the daemon does not show an unprivileged monitor, are counted together under empty labels",
            ),
            realtimekit_since: registered(
                registry,
                "realtimekit_thread_since_timestamp_seconds",
                "When a RealtimeKit1 thread was granted (Unix time)",
            ),
        }
    }

    /// Replaces the grant metrics by `listing`'s (None: the daemon could not be listed, and
    /// nothing of an earlier listing stays).
    pub(super) fn set(&self, listing: Option<&ListResult>) {
        self.reservation_amount.clear();
        self.reservation_period.clear();
        self.reservation_requested_amount.clear();
        self.reservation_requested_period.clear();
        self.reservation_kernel_runtime.clear();
        self.reservation_kernel_window.clear();
        self.reservation_thread.clear();
        self.cpu_reserved.clear();
        self.realtimekit_thread.clear();
        self.realtimekit_since.clear();
        let Some(list) = listing else {
            self.reachable.set(0);
            return;
        };
        self.reachable.set(1);
        for grant in &list.grants {
            let labels = ReservationLabels {
                grant: grant.grant_id.to_string(),
                reservation: grant.owner.clone(),
                owner_uid: grant.owner_uid.to_string(),
                backend: grant.backend.to_string(),
                cpu: text_of(grant.cpu),
            };
            self.reservation_amount
                .get_or_create(&labels)
                .set(grant.granted.amount_ns as f64 / 1e9);
            self.reservation_period
                .get_or_create(&labels)
                .set(grant.granted.period_ns as f64 / 1e9);
            self.reservation_requested_amount
                .get_or_create(&labels)
                .set(grant.requested.amount_ns as f64 / 1e9);
            self.reservation_requested_period
                .get_or_create(&labels)
                .set(grant.requested.period_ns as f64 / 1e9);
            if let Some(held) = &grant.kernel_held {
                self.reservation_kernel_runtime
                    .get_or_create(&labels)
                    .set(held.runtime_ns as f64 / 1e9);
                self.reservation_kernel_window
                    .get_or_create(&labels)
                    .set(held.window_ns as f64 / 1e9);
            }
            for thread in &grant.threads {
                self.reservation_thread
                    .get_or_create(&ReservationThreadLabels {
                        grant: grant.grant_id.to_string(),
                        pid: id_label(thread.pid),
                        tid: id_label(thread.tid),
                        comm: thread.comm.clone(),
                    })
                    // Hidden threads share their labels: the series counts them.
                    .inc();
            }
        }
        for share in &list.cpus {
            self.cpu_reserved
                .get_or_create(&CpuLabels {
                    cpu: share.cpu.to_string(),
                })
                .set(share.reserved_fraction);
        }
        for thread in &list.realtimekit {
            self.realtimekit_thread
                .get_or_create(&RealtimeKitLabels {
                    tid: id_label(thread.tid),
                    comm: thread.comm.clone(),
                    pid: id_label(thread.pid),
                    uid: thread.uid.to_string(),
                    caller_pid: id_label(thread.caller_pid),
                    method: thread.method.clone(),
                    policy: thread.policy.clone(),
                    priority: text_of(thread.priority),
                    nice: text_of(thread.nice),
                    grant: text_of(thread.grant_id),
                })
                // Hidden threads share their labels: the series counts them.
                .inc();
            if let Some(since) = unix_seconds(&thread.since) {
                self.realtimekit_since
                    .get_or_create(&RealtimeKitThreadLabels {
                        tid: id_label(thread.tid),
                        pid: id_label(thread.pid),
                        uid: thread.uid.to_string(),
                    })
                    .set(since);
            }
        }
    }
}

/// Escapes text for HTML (program names are chosen by whoever runs the program): rtlab's one
/// markup escape.
pub(super) use rtlab_core::text::escape_markup as escape;

/// The grants as HTML tables for the monitor's `/` page.
pub(super) fn html_tables(list: &ListResult) -> String {
    let mut html = String::from("<h2>Threads made real-time through RealtimeKit1</h2>\n");
    if list.realtimekit.is_empty() {
        html.push_str("<p>none</p>\n");
    } else {
        html.push_str(
            "<table>\n<tr><th>tid</th><th>thread</th><th>pid</th><th>uid</th><th>asked by pid</th><th>method</th><th>given</th><th>reservation</th><th>since</th></tr>\n",
        );
        for thread in &list.realtimekit {
            let mut given = match (thread.priority, thread.nice) {
                (Some(priority), _) => format!("{} {priority}", thread.policy),
                (None, Some(nice)) => format!("{} nice {nice}", thread.policy),
                (None, None) => thread.policy.clone(),
            };
            if let Some(sizing) = &thread.sizing {
                given.push_str(&format!(" ({sizing})"));
            }
            html.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                id_label(thread.tid),
                escape(&thread.comm),
                id_label(thread.pid),
                thread.uid,
                id_label(thread.caller_pid),
                escape(&thread.method),
                escape(&given),
                text_of(thread.grant_id),
                escape(&thread.since)
            ));
        }
        html.push_str("</table>\n");
    }
    html.push_str("<h2>Reservations</h2>\n");
    if list.grants.is_empty() {
        html.push_str("<p>none</p>\n");
    } else {
        html.push_str(
            "<table>\n<tr><th>grant</th><th>reservation</th><th>owner uid</th><th>asked</th><th>the kernel holds</th><th>backend</th><th>threads</th><th>since</th></tr>\n",
        );
        for grant in &list.grants {
            let threads: Vec<String> = grant
                .threads
                .iter()
                .map(|thread| match thread.tid {
                    0 => "(another user's)".to_owned(),
                    tid => format!("{tid} {}", escape(&thread.comm)),
                })
                .collect();
            let held = match &grant.kernel_held {
                Some(held) if held.read_from == "not_deadline" => format!(
                    "nothing (the thread is at {})",
                    held.policy.as_deref().unwrap_or("another policy")
                ),
                Some(held) => format!(
                    "{} µs every {} µs ({:.1} % of a CPU)",
                    held.runtime_ns / 1000,
                    held.window_ns / 1000,
                    held.share * 100.0
                ),
                None => "not read back".to_owned(),
            };
            html.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} µs every {} µs</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                grant.grant_id,
                escape(&grant.owner),
                grant.owner_uid,
                grant.requested.amount_ns / 1000,
                grant.requested.period_ns / 1000,
                escape(&held),
                grant.backend,
                threads.join(", "),
                escape(&grant.since)
            ));
        }
        html.push_str("</table>\n");
    }
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::rpc::RealtimeKitThread;

    fn listing() -> ListResult {
        ListResult {
            grants: Vec::new(),
            cpus: vec![rtlab_core::rpc::CpuShare {
                cpu: 0,
                reserved_fraction: 0.25,
            }],
            realtimekit: vec![RealtimeKitThread {
                pid: 40,
                tid: 41,
                comm: "data-loop.0".to_owned(),
                uid: 1000,
                caller_pid: 40,
                method: "MakeThreadRealtimeWithPID".to_owned(),
                policy: "SCHED_RR".to_owned(),
                priority: Some(20),
                nice: None,
                grant_id: None,
                since: "2026-01-02T03:04:05.000Z".to_owned(),
                sizing: None,
            }],
        }
    }

    #[test]
    fn a_realtimekit_thread_is_exported_with_who_asked_and_what_it_got() {
        let mut registry = Registry::with_prefix("rtlab");
        let metrics = GrantMetrics::register(&mut registry);
        metrics.set(Some(&listing()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("rtlab_daemon_listed 1"), "{text}");
        assert!(
            text.contains(r#"rtlab_realtimekit_thread{tid="41",comm="data-loop.0",pid="40",uid="1000",caller_pid="40",method="MakeThreadRealtimeWithPID",policy="SCHED_RR",priority="20",nice="",grant=""} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rtlab_realtimekit_thread_since_timestamp_seconds{tid="41",pid="40",uid="1000"} 1767323045.0"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rtlab_cpu_reserved_fraction{cpu="0"} 0.25"#),
            "{text}"
        );
        // A failed listing leaves nothing of the last one.
        metrics.set(None);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("rtlab_daemon_listed 0"), "{text}");
        assert!(!text.contains("rtlab_realtimekit_thread{"), "{text}");
    }

    #[test]
    fn other_users_hidden_threads_are_counted_under_empty_labels() {
        let mut list = listing();
        let hidden = RealtimeKitThread {
            pid: 0,
            tid: 0,
            comm: String::new(),
            caller_pid: 0,
            ..list.realtimekit[0].clone()
        };
        list.realtimekit = vec![hidden.clone(), hidden];
        let mut registry = Registry::with_prefix("rtlab");
        let metrics = GrantMetrics::register(&mut registry);
        metrics.set(Some(&list));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"rtlab_realtimekit_thread{tid="",comm="",pid="",uid="1000",caller_pid="",method="MakeThreadRealtimeWithPID",policy="SCHED_RR",priority="20",nice="",grant=""} 2"#),
            "{text}"
        );
        let html = html_tables(&list);
        assert!(!html.contains("<td>0</td>"), "{html}");
    }

    /// Before issue 37 the monitor showed the planner's grant only (220 µs every 8 ms for a
    /// request of 1.1 ms every 40 ms), not what was asked nor what the kernel holds.
    #[test]
    fn a_reservation_is_exported_with_what_was_asked_and_what_the_kernel_holds() {
        use rtlab_core::rpc::{Backend, GrantInfo, WireKernelHeld, WireRate, WireThread};
        let mut list = listing();
        list.grants = vec![GrantInfo {
            grant_id: 3,
            owner_uid: 1000,
            owner: "tid:4242".to_owned(),
            threads: vec![WireThread {
                pid: 4240,
                tid: 4242,
                comm: "jackd".to_owned(),
            }],
            requested: WireRate {
                amount_ns: 1_100_000,
                period_ns: 40_000_000,
            },
            granted: WireRate {
                amount_ns: 220_000,
                period_ns: 8_000_000,
            },
            backend: Backend::Deadline,
            cpu: None,
            planner_cpu: 0,
            kernel_admission: "accepted".to_owned(),
            deadline_params: None,
            since: "2026-12-07T02:00:00Z".to_owned(),
            lingering_until: None,
            kernel_held: Some(WireKernelHeld {
                read_from: "sched_getattr".to_owned(),
                runtime_ns: 2_200_000,
                window_ns: 8_000_000,
                share: 0.275,
                tid: Some(4242),
                deadline_ns: Some(8_000_000),
                cpu: None,
                slots_per_window: None,
                policy: None,
                reclaim: false,
            }),
        }];
        let mut registry = Registry::with_prefix("rtlab");
        let metrics = GrantMetrics::register(&mut registry);
        metrics.set(Some(&list));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let labels =
            r#"{grant="3",reservation="tid:4242",owner_uid="1000",backend="deadline",cpu=""}"#;
        for (name, value) in [
            ("rtlab_reservation_requested_amount_seconds", "0.0011"),
            ("rtlab_reservation_requested_period_seconds", "0.04"),
            ("rtlab_reservation_kernel_runtime_seconds", "0.0022"),
            ("rtlab_reservation_kernel_window_seconds", "0.008"),
            ("rtlab_reservation_granted_amount_seconds", "0.00022"),
        ] {
            let line = format!("{name}{labels} {value}");
            assert!(text.contains(&line), "{line} not in\n{text}");
        }
        let html = html_tables(&list);
        assert!(
            html.contains(
                "<td>1100 µs every 40000 µs</td><td>2200 µs every 8000 µs (27.5 % of a CPU)</td>"
            ),
            "{html}"
        );
    }

    #[test]
    fn html_escapes_program_names() {
        let mut list = listing();
        list.realtimekit[0].comm = "<script>".to_owned();
        let html = html_tables(&list);
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
    }
}
