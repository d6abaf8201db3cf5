//! rtlab-monitor: a long-running, low-overhead measurement for fleets (`rtlab monitor`), exported
//! on `/metrics` in the Prometheus text format (prometheus-client), served by [`http`] (bounded,
//! with timeouts: no client can stall a scrape).
//!
//! The probe is used as a library, one window at a time: each window starts the measuring threads
//! (no warm-up after the first), measures for one window, joins them and folds the window's
//! histograms into the exported metrics. Restarting per window needs no new probe API and keeps
//! memory bounded (the probe allocates per window; the exporter's histograms have fixed buckets);
//! the cost is a gap of about the probe's 50 ms thread set-up per window (0.5 % of a 10 s
//! window), which the `rtlab_monitor_measured_seconds_total` counter makes visible. SIGINT and
//! SIGTERM (the stop flag) stop the current window within one period.
//!
//! Given a [`grants::GrantSource`], the monitor also lists the reservation daemon's grants —
//! its reservations and the threads programs made real-time through RealtimeKit1 — every
//! [`grants::REFRESH`] on a thread of its own, and exports them beside the latency.
//!
//! Each window is one run as a library call (`rtlab_session::Session`); this crate only repeats
//! it, exports and serves. Linux only, like the session's runs: on other targets the crate is
//! empty.

#![cfg(target_os = "linux")]

pub mod grants;
pub mod http;

use grants::{GrantMetrics, GrantSource, ListingState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use rtlab_core::{Metric, Nanos, RunRecord};
use rtlab_probe::{Class, ProbeConfig};
use rtlab_session::{ExplainConfig, LoadRequest, Observer, RunConfig, Session, SessionError};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The shortest measuring window.
pub const MIN_WINDOW: Nanos = Nanos(1_000_000_000);

/// What a monitor measures and where it serves the metrics.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// Serve `/metrics` here.
    pub listen: SocketAddr,
    pub period: Nanos,
    /// One measuring window; the worst-latency gauge covers the last one.
    pub window: Nanos,
    pub classes: Vec<Class>,
    pub cpus: Vec<usize>,
    pub handoff: bool,
    /// Stop after this long; None: until the stop flag is set.
    pub stop_after: Option<Nanos>,
    pub explain: Option<ExplainConfig>,
}

/// Why a monitor stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("must be at least 1s")]
    WindowTooShort,
    #[error("listening on {listen}: {message}")]
    Listen { listen: SocketAddr, message: String },
    #[error("measuring a window")]
    Window(#[source] SessionError),
}

impl MonitorError {
    /// The setting at fault (its name in [`MonitorConfig`]) when the caller's input was (`window`, `listen`), else None.
    pub fn setting(&self) -> Option<&'static str> {
        match self {
            MonitorError::WindowTooShort => Some("window"),
            MonitorError::Listen { .. } => Some("listen"),
            MonitorError::Window(_) => None,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SeriesLabels {
    class: String,
    cpu: String,
    metric: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct CauseLabels {
    kind: String,
    name: String,
}

/// Upper bucket bounds of the latency histogram, seconds: 1-2-5 from 1 µs to 1 s.
fn latency_buckets() -> Vec<f64> {
    let mut buckets = Vec::new();
    for exponent in -6..=0 {
        for step in [1, 2, 5] {
            // Parsed from decimal text so each bound is the double nearest 5e-6, not 5 × 1e-6.
            let value: f64 = format!("{step}e{exponent}")
                .parse()
                .expect("a decimal number");
            if value <= 1.0 {
                buckets.push(value);
            }
        }
    }
    buckets
}

/// Distinct (kind, name) cause labels exported; later causes are summed as name `(other)`, so
/// weeks of task names (every compiler process) cannot grow the exporter without bound.
const MAX_CAUSE_LABELS: usize = 256;

/// Every metric the monitor exports.
struct Metrics {
    registry: Registry,
    latency: Family<SeriesLabels, Histogram, fn() -> Histogram>,
    missed: Family<SeriesLabels, Counter>,
    worst: Family<SeriesLabels, Gauge<f64, AtomicU64>>,
    causes: Family<CauseLabels, Counter<f64, AtomicU64>>,
    cause_labels: Mutex<std::collections::BTreeSet<CauseLabels>>,
    measured: Counter<f64, AtomicU64>,
    windows: Counter,
    /// The daemon's grants, when the monitor lists them.
    grants: Option<GrantMetrics>,
}

impl Metrics {
    #[cfg(test)]
    fn new(explain: bool) -> Metrics {
        Metrics::with_grants(explain, false)
    }

    fn with_grants(explain: bool, grants: bool) -> Metrics {
        let mut registry = Registry::with_prefix("rtlab");
        let latency: Family<SeriesLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(latency_buckets()));
        let missed = Family::<SeriesLabels, Counter>::default();
        let worst = Family::<SeriesLabels, Gauge<f64, AtomicU64>>::default();
        let causes = Family::<CauseLabels, Counter<f64, AtomicU64>>::default();
        let measured = Counter::<f64, AtomicU64>::default();
        let windows = Counter::default();
        registry.register(
            "wakeup_latency_seconds",
            "How late measuring threads ran after their deadline (metric=wakeup), or after being signalled (metric=handoff)",
            latency.clone(),
        );
        registry.register(
            "missed_periods",
            "Periods with no wake-up at all because an earlier one was so late",
            missed.clone(),
        );
        registry.register(
            "worst_latency_seconds",
            "The largest latency of the last measuring window",
            worst.clone(),
        );
        if explain {
            registry.register(
                "episode_cause_seconds",
                "Time late wake-ups lost to each cause (kind: irq, softirq, task, timer, switch, unaccounted)",
                causes.clone(),
            );
        }
        registry.register(
            "monitor_measured_seconds",
            "Time covered by measuring windows (less than wall time by the gaps between windows)",
            measured.clone(),
        );
        registry.register(
            "monitor_windows",
            "Measuring windows completed",
            windows.clone(),
        );
        let grants = grants.then(|| GrantMetrics::register(&mut registry));
        Metrics {
            registry,
            latency,
            missed,
            worst,
            causes,
            cause_labels: Mutex::new(std::collections::BTreeSet::new()),
            measured,
            windows,
            grants,
        }
    }

    fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }

    /// The labels of a cause: its own while fewer than [`MAX_CAUSE_LABELS`] are exported, else
    /// `(other)` of its kind.
    fn cause_label(&self, kind: &str, name: &str) -> CauseLabels {
        let labels = CauseLabels {
            kind: kind.to_owned(),
            name: name.to_owned(),
        };
        let Ok(mut known) = self.cause_labels.lock() else {
            return labels;
        };
        if known.contains(&labels) || known.len() < MAX_CAUSE_LABELS {
            known.insert(labels.clone());
            labels
        } else {
            CauseLabels {
                kind: kind.to_owned(),
                name: "(other)".to_owned(),
            }
        }
    }

    /// Folds one window's result into the metrics.
    fn add_window(&self, record: &RunRecord) {
        for series in &record.series {
            if series.metric == Metric::Interval {
                continue;
            }
            let Ok(measured) = series.histogram() else {
                continue;
            };
            let labels = SeriesLabels {
                class: series.class.clone(),
                cpu: series.cpu.to_string(),
                metric: series.metric.as_str().to_owned(),
            };
            let histogram = self.latency.get_or_create(&labels);
            for (value_ns, count) in measured.buckets() {
                let seconds = value_ns as f64 / 1e9;
                for _ in 0..count {
                    histogram.observe(seconds);
                }
            }
            self.missed.get_or_create(&labels).inc_by(series.missed);
            self.worst
                .get_or_create(&labels)
                .set(series.max_ns as f64 / 1e9);
        }
        {
            for episode in &record.episodes {
                for cause in &episode.causes {
                    let labels = self.cause_label(cause.kind.as_str(), &cause.name);
                    self.causes
                        .get_or_create(&labels)
                        .inc_by(cause.ns as f64 / 1e9);
                }
            }
        }
        self.measured.inc_by(record.duration_ns as f64 / 1e9);
        self.windows.inc();
    }
}

/// A window reports nothing while it runs; the exporter reads its record at the end.
struct QuietWindow;

impl Observer for QuietWindow {}

/// A monitor whose exporter is listening; [`Monitor::run`] measures.
pub struct Monitor {
    config: MonitorConfig,
    metrics: Arc<Metrics>,
    exported: Arc<Mutex<String>>,
    server_stop: Arc<AtomicBool>,
    server_thread: Option<JoinHandle<()>>,
    grants_thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Monitor")
            .field("config", &self.config)
            .finish()
    }
}

impl Monitor {
    /// Checks the configuration and starts serving `/metrics` (empty until the first window);
    /// with `grants`, lists the daemon's grants from now on (see [`grants`]).
    pub fn bind(
        config: MonitorConfig,
        grants: Option<Box<dyn GrantSource>>,
    ) -> Result<Monitor, MonitorError> {
        if config.window < MIN_WINDOW {
            return Err(MonitorError::WindowTooShort);
        }
        let listen_error = |error: std::io::Error| MonitorError::Listen {
            listen: config.listen,
            message: error.to_string(),
        };
        let server = http::MetricsServer::bind(config.listen).map_err(listen_error)?;
        let metrics = Arc::new(Metrics::with_grants(
            config.explain.is_some(),
            grants.is_some(),
        ));
        let exported = Arc::new(Mutex::new(metrics.encode()));
        let listing = Arc::new(Mutex::new(match grants {
            Some(_) => ListingState::Unreachable("not listed yet".to_owned()),
            None => ListingState::NotListed,
        }));
        let server_stop = Arc::new(AtomicBool::new(false));
        // systemd's WatchdogSec= (rtlab-monitor.service) is pinged from the server's loop.
        let server_thread = server
            .serve(
                Arc::clone(&exported),
                Arc::clone(&listing),
                Arc::clone(&server_stop),
                rtlab_sys::service_manager::Watchdog::from_environment(),
            )
            .map_err(listen_error)?;
        let grants_thread = match grants {
            Some(source) => {
                let metrics = Arc::clone(&metrics);
                let exported = Arc::clone(&exported);
                let stop = Arc::clone(&server_stop);
                let spawned = std::thread::Builder::new()
                    .name("rtlab-grants".into())
                    .spawn(move || list_grants(source, &metrics, &exported, &listing, &stop));
                match spawned {
                    Ok(thread) => Some(thread),
                    Err(error) => {
                        server_stop.store(true, Ordering::Relaxed);
                        let _ = server_thread.join();
                        return Err(MonitorError::Listen {
                            listen: config.listen,
                            message: format!("starting the thread that lists rtlabd: {error}"),
                        });
                    }
                }
            }
            None => None,
        };
        Ok(Monitor {
            config,
            metrics,
            exported,
            server_stop,
            server_thread: Some(server_thread),
            grants_thread,
        })
    }

    /// Measures window after window until `stop` is set or `stop_after` has passed, folding each
    /// window into the exported metrics; then stops serving.
    pub fn run(mut self, stop: &Arc<AtomicBool>) -> Result<(), MonitorError> {
        let deadline = self
            .config
            .stop_after
            .map(|after| rtlab_sys::clock::monotonic_ns() + after.as_u64());
        let mut first = true;
        loop {
            if stop.load(Ordering::Relaxed)
                || deadline.is_some_and(|deadline| rtlab_sys::clock::monotonic_ns() >= deadline)
            {
                return Ok(());
            }
            let record = self.window(first, stop)?;
            first = false;
            self.metrics.add_window(&record);
            // Encoded under the lock, so the grants' thread cannot put an older text back.
            if let Ok(mut text) = self.exported.lock() {
                *text = self.metrics.encode();
            }
        }
    }

    /// One measuring window (with a second of warm-up before the first).
    fn window(&mut self, first: bool, stop: &Arc<AtomicBool>) -> Result<RunRecord, MonitorError> {
        let config = &self.config;
        let probe = ProbeConfig {
            cpus: config.cpus.clone(),
            classes: config.classes.clone(),
            period: config.period,
            duration: config.window,
            warmup: if first {
                Nanos::from_secs(1)
            } else {
                Nanos::ZERO
            },
            handoff: config.handoff,
            peaks_per_series: 0,
            cpu_dma_latency_us: None,
            compute: None,
        };
        let run = RunConfig {
            probe,
            load: LoadRequest::default(),
            explain: config.explain.clone(),
            cmdline: Vec::new(),
        };
        Session::new(run)
            .and_then(|session| {
                session
                    .with_stop_flag(Arc::clone(stop))
                    .run(&mut QuietWindow)
            })
            .map_err(MonitorError::Window)
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.server_stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.server_thread.take() {
            let _ = thread.join();
        }
        if let Some(thread) = self.grants_thread.take() {
            let _ = thread.join();
        }
    }
}

/// The grants' thread: lists the daemon every [`grants::REFRESH`] until `stop`, replacing the
/// grant metrics (re-encoding the export under its lock) and `/reservations`' answer.
fn list_grants(
    mut source: Box<dyn GrantSource>,
    metrics: &Metrics,
    exported: &Mutex<String>,
    listing: &Mutex<ListingState>,
    stop: &AtomicBool,
) {
    let Some(grant_metrics) = &metrics.grants else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        let listed = source.listing();
        if let Ok(mut text) = exported.lock() {
            grant_metrics.set(listed.as_ref().ok().map(|listed| &listed.list));
            *text = metrics.encode();
        }
        let state = match listed {
            Ok(listed) => ListingState::Listed {
                html: grants::html_tables(&listed.list),
                json: listed.json,
            },
            Err(why) => ListingState::Unreachable(why),
        };
        if let Ok(mut current) = listing.lock() {
            *current = state;
        }
        let next = std::time::Instant::now() + grants::REFRESH;
        while !stop.load(Ordering::Relaxed) && std::time::Instant::now() < next {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_rise_on_a_1_2_5_ladder_to_one_second() {
        let buckets = latency_buckets();
        assert_eq!(buckets.first(), Some(&1e-6));
        assert_eq!(buckets.last(), Some(&1.0));
        assert_eq!(buckets.len(), 19);
        assert!(buckets.windows(2).all(|pair| pair[0] < pair[1]));
    }

    #[test]
    fn metric_names_and_labels_are_the_documented_ones() {
        let metrics = Metrics::new(true);
        let labels = SeriesLabels {
            class: "rt-high".to_owned(),
            cpu: "0".to_owned(),
            metric: "wakeup".to_owned(),
        };
        metrics.latency.get_or_create(&labels).observe(20e-6);
        metrics.missed.get_or_create(&labels).inc_by(2);
        metrics.worst.get_or_create(&labels).set(20e-6);
        let text = metrics.encode();
        assert!(
            text.contains("# TYPE rtlab_wakeup_latency_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(r#"rtlab_wakeup_latency_seconds_bucket{le="0.00002",class="rt-high",cpu="0",metric="wakeup"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"le="0.000005""#), "{text}");
        assert!(
            text.contains(
                r#"rtlab_missed_periods_total{class="rt-high",cpu="0",metric="wakeup"} 2"#
            ),
            "{text}"
        );
        assert!(text.contains("rtlab_worst_latency_seconds{"), "{text}");
        assert!(
            text.contains("# TYPE rtlab_episode_cause_seconds counter"),
            "{text}"
        );
    }

    #[test]
    fn the_grafana_dashboard_and_the_unit_use_only_exported_names() {
        let metrics = Metrics::new(true);
        let labels = SeriesLabels {
            class: "rt-high".to_owned(),
            cpu: "0".to_owned(),
            metric: "wakeup".to_owned(),
        };
        metrics.latency.get_or_create(&labels).observe(1e-5);
        metrics.missed.get_or_create(&labels).inc();
        metrics.worst.get_or_create(&labels).set(1e-5);
        metrics
            .causes
            .get_or_create(&CauseLabels {
                kind: "irq".to_owned(),
                name: "eth0".to_owned(),
            })
            .inc_by(1e-5);
        let exported = metrics.encode();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging");
        let dashboard = std::fs::read_to_string(format!("{root}/grafana-rtlab-dashboard.json"))
            .expect("packaging/grafana-rtlab-dashboard.json");
        let json: serde_json::Value = serde_json::from_str(&dashboard).expect("valid JSON");
        assert!(json["panels"]
            .as_array()
            .is_some_and(|panels| !panels.is_empty()));
        let mut names = 0;
        for (index, _) in dashboard.match_indices("rtlab_") {
            let name: String = dashboard[index..]
                .chars()
                .take_while(|character| character.is_ascii_alphanumeric() || *character == '_')
                .collect();
            assert!(
                exported.contains(&format!("{name}{{")) || exported.contains(&format!("{name} ")),
                "the dashboard uses {name}, which the monitor does not export"
            );
            names += 1;
        }
        assert!(names >= 5);
    }

    #[test]
    fn cause_labels_are_bounded() {
        let metrics = Metrics::new(true);
        for index in 0..MAX_CAUSE_LABELS + 50 {
            let labels = metrics.cause_label("task", &format!("cc1-{index}"));
            metrics.causes.get_or_create(&labels).inc_by(1e-6);
        }
        let text = metrics.encode();
        let exported = text
            .lines()
            .filter(|line| line.starts_with("rtlab_episode_cause_seconds_total{"))
            .count();
        assert_eq!(exported, MAX_CAUSE_LABELS + 1, "{text}");
        assert!(text.contains(r#"name="(other)""#));
        // A cause already exported keeps its own label.
        assert_eq!(metrics.cause_label("task", "cc1-0").name, "cc1-0");
    }
}
