//! `rtlab trace watch`: a program's deadline misses (late activations) live, one line each with
//! its culprit, the thread's period and CPU need; at the end (duration, the program's exit or
//! Ctrl-C) the misses per minute, the culprits ranked by the time they took, and a one-line
//! verdict. The work is `rtlab_apptrace::live`'s (a recording analysed window by window); this
//! module holds the flags, the printing and the summary, and [`observe`] for `reserve --auto`.

use super::trace_watch_pipewire::PipewireWish;
use anyhow::Context as _;
use clap::Args as ClapArgs;
use rtlab_apptrace::analyze::report::{Culprit, LateActivation, LateKind, SourceInfo, TraceReport};
use rtlab_apptrace::analyze::AnalysisConfig;
use rtlab_apptrace::file::FileHeader;
use rtlab_apptrace::live::{LiveSink, WindowedAnalyzer, DEFAULT_WINDOW_NS};
use rtlab_apptrace::record::{RecordConfig, RecordError, RecordSummary, Target};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, ClapArgs)]
#[command(
    group(clap::ArgGroup::new("target").required(true).args(["pid", "comm", "command"])),
    after_help = "Examples:\n  rtlab trace watch --comm jackd\n  rtlab trace watch --pid 4242 -D 60s --json misses.jsonl\n  rtlab trace watch -- ./synth\n\n\
Each line is printed when the window holding the miss has been analysed (a few seconds later). \
When the program is a PipeWire client (a JACK program run through pw-jack), PipeWire's own count \
of its unfinished cycles (pw-profiler) is printed beside rtlab's. \
Exit status: 0 watched to the end, 2 no such program (without --wait), 3 tracing failed or, with \
--pipewire, PipeWire's count cannot be had (no pw-profiler, no server, no profiler module), 130 \
interrupted (the summary is printed first)."
)]
pub struct WatchArgs {
    /// Watch this process (all its threads)
    #[arg(long)]
    pub pid: Option<u32>,
    /// Watch every process with this name (/proc/PID/comm), also ones started later
    #[arg(long)]
    pub comm: Option<String>,
    /// With --comm: wait for a process of that name to appear instead of failing
    #[arg(long, requires = "comm")]
    pub wait: bool,
    /// Stop after this long (e.g. 60s); default: until the program ends or Ctrl-C
    #[arg(short = 'D', long, value_parser = crate::flags::positive_duration)]
    pub duration: Option<rtlab_core::Nanos>,
    /// Write each miss as one JSON object per line (the fields of `late_activations[]` in
    /// `trace analyze --json`) to FILE as it happens; `-` for stdout in place of the text
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// bpf (filtered in the kernel), tracefs, or auto: bpf when it loads, else tracefs
    #[arg(long, default_value = "auto", value_parser = ["auto", "bpf", "tracefs"])]
    pub recorder: String,
    /// Judge deadlines by the program's own cycle starts: `jack` or PATH:SYMBOL (see `trace
    /// record --cycle-marker`)
    #[arg(long, value_name = "SPEC")]
    pub cycle_marker: Option<String>,
    /// With --cycle-marker: where a thread's cycle work ends (see `trace record
    /// --work-done-marker`)
    #[arg(long, value_name = "SPEC", requires = "cycle_marker")]
    pub work_done_marker: Option<String>,
    /// Compare with PipeWire's own count (its profiler, through `pw-profiler`) even when the
    /// program does not look like a PipeWire client yet, and fail when the count cannot be had;
    /// by default it is compared whenever the program has libpipewire mapped
    #[arg(long, conflicts_with = "no_pipewire")]
    pub pipewire: bool,
    /// Never ask PipeWire for its count
    #[arg(long)]
    pub no_pipewire: bool,
    /// When comparing with PipeWire's count, infer the cycle instead of judging by PipeWire's
    /// own (`--cycle-marker pipewire` is taken by default then)
    #[arg(long)]
    pub no_pipewire_marker: bool,
    /// Write the summary (misses, culprits, verdict, PipeWire's count) as JSON to FILE at the
    /// end (`-` for stdout); opened before watching
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Start this command and watch it (after `--`)
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// Who a miss is blamed on, as the summary counts it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Blame {
    /// "qhog0 (SCHED_FIFO 95)", "the hypervisor (…)", "(its own work)", …
    pub label: String,
    /// Whether a reservation can protect against it (another thread took the CPU).
    pub reservable: bool,
    pub ns: u64,
}

/// The culprit the analysis names for the whole miss (`culprit`: the one that took the most
/// time over its critical path).
pub(crate) fn blame_of(late: &LateActivation) -> Blame {
    match &late.culprit {
        Some(culprit) => Blame {
            label: culprit.describe(),
            reservable: matches!(
                culprit,
                Culprit::Thread { .. } | Culprit::Throttled { .. } | Culprit::Migration { .. }
            ),
            ns: culprit.ns(),
        },
        None => Blame {
            label: "(its own work)".into(),
            reservable: false,
            ns: late.response_ns,
        },
    }
}

/// Milliseconds below 10 s, in the units people read: "5.9 ms", "838 µs".
pub(crate) fn human(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{} µs", ns / 1_000)
    }
}

/// Misses per culprit, bounded: past [`CULPRITS_KEPT`] names the rest are counted together.
#[derive(Debug, Default)]
pub(crate) struct WatchSummary {
    pub misses: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    culprits: HashMap<String, CulpritTally>,
    /// The most missing thread: name and the period/need last seen for it.
    threads: HashMap<i32, (String, u64, u64, u64)>,
}

#[derive(Clone, Copy, Debug, Default)]
struct CulpritTally {
    misses: u64,
    reservable: bool,
    ns: u64,
    least_ns: u64,
    most_ns: u64,
}

/// `--summary-json`'s body (schema `rtlab.watch-summary/1`, under the common header).
#[derive(Debug, serde::Serialize)]
struct SummaryJson {
    target: String,
    seconds: f64,
    interrupted: bool,
    /// rtlab's deadline misses (as JACK counts xruns).
    misses: u64,
    /// By the time they took, largest first.
    culprits: Vec<CulpritJson>,
    verdict: String,
    /// PipeWire's own count beside rtlab's; absent when the program is not a PipeWire client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pipewire: Option<rtlab_core::pipewire_count::PipewireComparison>,
}

#[derive(Debug, serde::Serialize)]
struct CulpritJson {
    label: String,
    misses: u64,
    /// Another thread took the CPU: a reservation protects against it.
    reservable: bool,
    ns: u64,
}

const SUMMARY_SCHEMA: &str = "rtlab.watch-summary/1";

const CULPRITS_KEPT: usize = 64;
const THREADS_KEPT: usize = 256;

impl WatchSummary {
    fn add(&mut self, late: &LateActivation, culprit: &Blame, period_ns: u64, need_ns: u64) {
        // As JACK counts xruns: a gap's periods, 2 for a job over 2.1 periods.
        let periods = late.deadlines_missed.max(1);
        self.misses += periods;
        let key = if self.culprits.len() >= CULPRITS_KEPT
            && !self.culprits.contains_key(&culprit.label)
        {
            "(others)".to_owned()
        } else {
            culprit.label.clone()
        };
        let tally = self.culprits.entry(key).or_default();
        tally.least_ns = if tally.misses == 0 {
            culprit.ns
        } else {
            tally.least_ns.min(culprit.ns)
        };
        tally.misses += periods;
        tally.reservable = culprit.reservable;
        tally.ns += culprit.ns;
        tally.most_ns = tally.most_ns.max(culprit.ns);
        if self.threads.len() < THREADS_KEPT || self.threads.contains_key(&late.thread.tid) {
            let entry =
                self.threads
                    .entry(late.thread.tid)
                    .or_insert((late.thread.name.clone(), 0, 0, 0));
            entry.1 += periods;
            entry.2 = period_ns;
            entry.3 = need_ns;
        }
    }

    fn see(&mut self, report: &TraceReport) {
        if report.n_events > 0 {
            self.first_ns.get_or_insert(report.first_ns);
            self.last_ns = self.last_ns.max(report.last_ns);
        }
    }

    /// The competitor a reservation could protect against with the most misses, and its
    /// misses: culprits that differ only by a number at the end of the thread's name and share
    /// a policy (a competitor's per-CPU threads, `qhog0` and `qhog1`) count together, named
    /// together ("qhog0, qhog1 (SCHED_FIFO 95)").
    pub fn top_reservable(&self) -> Option<(String, u64)> {
        let mut groups: Vec<(String, String, Vec<&str>, u64)> = Vec::new();
        for (label, tally) in self.culprits.iter().filter(|(_, tally)| tally.reservable) {
            let (name, rest) = label.split_once(" (").unwrap_or((label.as_str(), ""));
            let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
            match groups
                .iter_mut()
                .find(|group| group.0 == stem && group.1 == rest)
            {
                Some(group) => {
                    group.2.push(name);
                    group.3 += tally.misses;
                }
                None => groups.push((stem.to_owned(), rest.to_owned(), vec![name], tally.misses)),
            }
        }
        groups
            .into_iter()
            .max_by(|left, right| left.3.cmp(&right.3).then(right.0.cmp(&left.0)))
            .map(|(_, rest, mut names, misses)| {
                names.sort_unstable();
                let label = if rest.is_empty() {
                    names.join(", ")
                } else {
                    format!("{} ({rest}", names.join(", "))
                };
                (label, misses)
            })
    }

    /// Counts one window's misses as `trace watch` does (the watched threads' late
    /// activations, in time order; `print` sees each with its blame and the thread's need).
    pub fn count_window(
        &mut self,
        report: &TraceReport,
        mut print: impl FnMut(&LateActivation, &Blame, u64),
    ) {
        self.see(report);
        let watched = rtlab_render::misses_svg::watched_threads(report);
        let mut lates: Vec<&LateActivation> = report
            .late_activations
            .iter()
            .filter(|late| watched.contains(&late.thread.tid))
            .collect();
        lates.sort_by_key(|late| late.at_ns);
        for late in lates {
            let blame = blame_of(late);
            let row = report.threads.iter().find(|row| row.tid == late.thread.tid);
            let need = row.map_or(0, |row| row.cpu_per_cycle_ns.p99);
            self.add(late, &blame, late.period_ns, need);
            print(late, &blame, need);
        }
    }

    /// The seconds between the first and the last event watched.
    pub fn seconds(&self) -> f64 {
        self.last_ns
            .saturating_sub(self.first_ns.unwrap_or(self.last_ns)) as f64
            / 1e9
    }

    /// The summary as `--summary-json` writes it.
    fn to_json(
        &self,
        target: &Target,
        interrupted: bool,
        pipewire: Option<rtlab_core::pipewire_count::PipewireComparison>,
    ) -> SummaryJson {
        SummaryJson {
            target: target.describe(),
            seconds: self.seconds(),
            interrupted,
            misses: self.misses,
            culprits: self
                .ranked()
                .into_iter()
                .map(|(label, tally)| CulpritJson {
                    label: label.clone(),
                    misses: tally.misses,
                    reservable: tally.reservable,
                    ns: tally.ns,
                })
                .collect(),
            verdict: self.verdict(target),
            pipewire,
        }
    }

    fn ranked(&self) -> Vec<(&String, &CulpritTally)> {
        let mut ranked: Vec<_> = self.culprits.iter().collect();
        ranked.sort_by(|left, right| right.1.ns.cmp(&left.1.ns).then(left.0.cmp(right.0)));
        ranked
    }

    /// The one line a musician reads.
    pub fn verdict(&self, target: &Target) -> String {
        let seconds = self
            .last_ns
            .saturating_sub(self.first_ns.unwrap_or(self.last_ns)) as f64
            / 1e9;
        if self.misses == 0 {
            return format!("no deadline misses in {seconds:.0} s: nothing to fix");
        }
        let mut line = format!("{} deadline misses in {seconds:.0} s", self.misses);
        if let Some((label, tally)) = self.ranked().first() {
            let held = if tally.least_ns / 100_000 == tally.most_ns / 100_000 {
                human(tally.most_ns)
            } else {
                format!(
                    "{:.1}–{}",
                    tally.least_ns as f64 / 1e6,
                    human(tally.most_ns)
                )
            };
            let cause = match label.as_str() {
                "(its own work)" => format!("{} from the thread's own work", tally.misses),
                unnamed if unnamed.starts_with('(') => format!("{} {unnamed}", tally.misses),
                other if tally.reservable => {
                    format!("{} while {other} held the CPU {held}", tally.misses)
                }
                other => format!("{} to {other}, {held}", tally.misses),
            };
            line.push_str(&format!("; {cause}"));
            let fixable = tally.reservable;
            let how = match target {
                Target::Comm(name) => Some(format!("--comm {name}")),
                Target::Pid(pid) => Some(format!("--pid {pid}")),
                Target::Command(_) => None,
            };
            if let (true, Some(how)) = (fixable, how) {
                line.push_str(&format!("; `rtlab reserve --auto {how}` would protect it"));
            } else if !fixable {
                line.push_str("; a CPU reservation cannot protect against that");
            }
        }
        line
    }

    /// The summary printed at the end.
    pub fn render(&self, target: &Target) -> String {
        let seconds = self
            .last_ns
            .saturating_sub(self.first_ns.unwrap_or(self.last_ns)) as f64
            / 1e9;
        let per_minute = if seconds > 0.0 {
            self.misses as f64 * 60.0 / seconds
        } else {
            0.0
        };
        let mut text = format!(
            "\nwatched {} for {seconds:.1} s: {} deadline misses ({per_minute:.1} per minute)\n",
            target.describe(),
            self.misses
        );
        let mut threads: Vec<_> = self.threads.iter().collect();
        threads.sort_by(|left, right| right.1 .1.cmp(&left.1 .1).then(left.0.cmp(right.0)));
        for (tid, (name, misses, period, need)) in threads.iter().take(5) {
            text.push_str(&format!(
                "  {name} ({tid}): {misses} misses, period {}, needs {} per activation (p99)\n",
                human(*period),
                human(*need)
            ));
        }
        if !self.culprits.is_empty() {
            text.push_str("culprits, by the time they took:\n");
            for (label, tally) in self.ranked().iter().take(10) {
                text.push_str(&format!(
                    "  {label:<36} {:>6} misses  {:>10} in all, {}–{} each\n",
                    tally.misses,
                    human(tally.ns),
                    human(tally.least_ns),
                    human(tally.most_ns)
                ));
            }
        }
        text.push_str(&format!("verdict: {}\n", self.verdict(target)));
        text
    }
}

/// Records `target` and hands every window's analysis to `window` until `duration`, the
/// target's end or `stop`.
pub(crate) fn watch_windows(
    target: &Target,
    duration: Option<Duration>,
    window_ns: u64,
    recorder: &str,
    markers: Markers<'_>,
    stop: &AtomicBool,
    mut window: impl FnMut(TraceReport),
) -> anyhow::Result<RecordSummary> {
    let config = RecordConfig {
        target: target.clone(),
        duration,
        cycle_marker: markers.0.cloned(),
        work_done_marker: markers.1.cloned(),
        recorder: match recorder {
            "bpf" => rtlab_apptrace::record::RecorderChoice::Bpf,
            "tracefs" => rtlab_apptrace::record::RecorderChoice::Tracefs,
            _ => rtlab_apptrace::record::RecorderChoice::Auto,
        },
        ..RecordConfig::default()
    };
    let header = crate::output::header(rtlab_apptrace::analyze::report::SCHEMA, None);
    let file_header = FileHeader {
        header: header.clone(),
        target: target.describe(),
        clock: "mono".into(),
        events: Vec::new(),
        recorder: None,
    };
    let source = SourceInfo {
        path: target.describe(),
        format: "live".into(),
        clock: Some("mono".into()),
    };
    let analysis = AnalysisConfig {
        cycle_rule: super::trace_markers::cycle_rule(markers.0),
        ..AnalysisConfig::default()
    };
    let mut live = WindowedAnalyzer::new(analysis, window_ns, header, source);
    let result = {
        let sink = LiveSink::new(|event| {
            if let Some(report) = live.push(event) {
                window(report);
            }
        });
        let recorded = rtlab_apptrace::record::record(&config, sink, file_header, stop, |_| {});
        recorded.map(|(_, summary)| summary)
    };
    let summary = result.map_err(|error| match error {
        RecordError::NoTarget(_) | RecordError::Spawn { .. } => crate::exit::input(error),
        other => anyhow::Error::new(other),
    })?;
    if let Some(report) = live.finish() {
        window(report);
    }
    Ok(summary)
}

/// The cycle marker and the work-done marker to record, if any.
pub(crate) type Markers<'a> = (
    Option<&'a rtlab_apptrace::cycle_marker::CycleMarker>,
    Option<&'a rtlab_apptrace::cycle_marker::CycleMarker>,
);

/// Records `target` for `duration` and analyses it whole: `reserve --auto`'s observation.
pub(crate) fn observe(
    target: &Target,
    duration: Duration,
    cycle_marker: Option<&rtlab_apptrace::cycle_marker::CycleMarker>,
    stop: &AtomicBool,
) -> anyhow::Result<TraceReport> {
    let mut whole = None;
    watch_windows(
        target,
        Some(duration),
        u64::MAX,
        "auto",
        (cycle_marker, None),
        stop,
        |report| whole = Some(report),
    )?;
    whole
        .ok_or_else(|| anyhow::anyhow!("the observation of {} recorded nothing", target.describe()))
}

pub(crate) fn is_real_time(policy: &str) -> bool {
    ["FIFO", "RR", "DEADLINE"]
        .iter()
        .any(|name| policy.contains(name))
}

/// Whether process `pid` is gone or a zombie (exited, not yet reaped by its parent).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
    })
}

pub(crate) fn comm_running(name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry
            .file_name()
            .to_str()
            .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(entry.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
    })
}

pub fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
    let cycle_marker = super::trace_markers::cycle_marker_flag(args.cycle_marker.as_deref())?;
    let work_done_marker =
        super::trace_markers::work_done_marker_flag(args.work_done_marker.as_deref())?;
    let target = match (&args.pid, &args.comm) {
        (Some(pid), _) => Target::Pid(*pid),
        (None, Some(name)) => Target::Comm(name.clone()),
        (None, None) => Target::Command(args.command.clone()),
    };
    // The JSON file is opened before watching, so a bad path fails at once.
    let json_to_stdout = args.json.as_deref() == Some(std::path::Path::new("-"));
    let mut json: Option<Box<dyn std::io::Write>> = match &args.json {
        None => None,
        Some(_) if json_to_stdout => Some(Box::new(std::io::stdout())),
        Some(path) => Some(Box::new(std::io::LineWriter::new(
            std::fs::File::create(path).map_err(|error| {
                crate::exit::input(format!("--json {}: {error}", path.display()))
            })?,
        ))),
    };
    let summary_json = args
        .summary_json
        .as_deref()
        .map(|path| rtlab_store::output::PendingOutput::prepare(path, "--summary-json"))
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop).context("installing the SIGINT handler")?;
    if let (Target::Comm(name), true) = (&target, args.wait) {
        if !comm_running(name) {
            eprintln!("rtlab: waiting for a process named {name:?} …");
        }
        while !comm_running(name) {
            if stop.load(Ordering::SeqCst) {
                return Ok(crate::exit::finished(true));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let wish = match (args.pipewire, args.no_pipewire) {
        (true, _) => PipewireWish::Required,
        (_, true) => PipewireWish::Never,
        _ => PipewireWish::Auto,
    };
    // Before the recording starts, so PipeWire's window holds rtlab's.
    let pipewire = super::trace_watch_pipewire::start(&target, wish)?;
    // A PipeWire client compared with PipeWire's count is judged by PipeWire's cycle, unless
    // told otherwise.
    let cycle_marker = match (cycle_marker, &pipewire) {
        (None, Some(_)) if !args.no_pipewire_marker => {
            match rtlab_apptrace::cycle_marker::resolve(
                rtlab_apptrace::cycle_marker::PIPEWIRE_PRESET,
            ) {
                Ok(marker) => {
                    eprintln!(
                        "rtlab: a PipeWire client: judged by PipeWire's cycle (--cycle-marker \
                         pipewire, {}); --no-pipewire-marker to infer it",
                        marker.describe()
                    );
                    Some(marker)
                }
                Err(error) => {
                    eprintln!("rtlab: PipeWire's cycle marker: {error}; inferring the cycle");
                    None
                }
            }
        }
        (marker, _) => marker,
    };
    if !json_to_stdout {
        eprintln!(
            "rtlab: watching {} for deadline misses (Ctrl-C for the summary) …",
            target.describe()
        );
    }
    // The recording stops on Ctrl-C, with --comm when the last process of that name ends (a
    // recording by name would otherwise wait for the next one), with --pid when the process
    // has exited, reaped or not.
    let record_stop = Arc::new(AtomicBool::new(false));
    let watcher_done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (record_stop, watcher_done, stop) = (
            Arc::clone(&record_stop),
            Arc::clone(&watcher_done),
            Arc::clone(&stop),
        );
        let target = target.clone();
        std::thread::spawn(move || {
            while !watcher_done.load(Ordering::SeqCst) {
                let ended = match &target {
                    Target::Comm(name) => !comm_running(name),
                    Target::Pid(pid) => exited(*pid),
                    Target::Command(_) => false,
                };
                if stop.load(Ordering::SeqCst) || ended {
                    record_stop.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let mut summary = WatchSummary::default();
    let mut write_error = None;
    let recorded = watch_windows(
        &target,
        args.duration
            .map(|duration| Duration::from_nanos(duration.0)),
        DEFAULT_WINDOW_NS,
        &args.recorder,
        (cycle_marker.as_ref(), work_done_marker.as_ref()),
        &record_stop,
        |report| {
            let start = summary.first_ns.unwrap_or(report.first_ns);
            summary.count_window(&report, |late, _, need| {
                if !json_to_stdout {
                    let what = match late.kind {
                        LateKind::Late => format!("done after {}", human(late.response_ns)),
                        LateKind::Missed => {
                            format!("{} period(s) without an activation", late.periods)
                        }
                    };
                    println!(
                        "{:>9.3} s  {} ({}) missed: {what}, period {}, needs {}; {}",
                        late.at_ns.saturating_sub(start) as f64 / 1e9,
                        late.thread.name,
                        late.thread.tid,
                        human(late.period_ns),
                        human(need),
                        late.explanation
                    );
                }
                if let Some(json) = &mut json {
                    let line = serde_json::to_string(late).expect("a late activation serialises");
                    if let Err(error) = writeln!(json, "{line}") {
                        write_error.get_or_insert(error);
                    }
                }
            });
        },
    );
    if let Some(error) = write_error {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(anyhow::Error::new(error).context("writing --json"));
        }
    }
    watcher_done.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    let window = summary.first_ns.map(|first| (first, summary.last_ns));
    let pipewire =
        pipewire.map(|watch| watch.finish(window, summary.misses, summary.top_reservable()));
    recorded?;
    let interrupted = stop.load(Ordering::SeqCst);
    if let Some(json) = &mut json {
        json.flush().context("writing --json")?;
    }
    let mut text = summary.render(&target);
    if let Some(comparison) = &pipewire {
        text.push_str(&rtlab_render::pipewire::comparison(comparison));
    }
    if let Some(output) = summary_json {
        let to_stdout = output.is_stdout();
        output
            .commit_json(
                SUMMARY_SCHEMA,
                None,
                &summary.to_json(&target, interrupted, pipewire),
            )
            .context("writing --summary-json")?;
        if to_stdout {
            eprint!("{text}");
            return Ok(crate::exit::finished(interrupted));
        }
    }
    if json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    Ok(crate::exit::finished(interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_apptrace::analyze::report::ThreadRef;

    fn late(culprit: Option<Culprit>) -> LateActivation {
        LateActivation {
            kind: LateKind::Late,
            thread: ThreadRef {
                tid: 7,
                name: "xrun_client".into(),
                priority: 65,
            },
            at_ns: 1_000,
            period_ns: 2_666_667,
            response_ns: 6_000_000,
            periods: 1,
            deadlines_missed: 1,
            culprit,
            explanation: String::new(),
            critical_path: Vec::new(),
        }
    }

    fn hog(ns: u64) -> Culprit {
        Culprit::Thread {
            tid: 9,
            name: "qhog7".into(),
            policy: "SCHED_FIFO".into(),
            priority: 95,
            ns,
        }
    }

    #[test]
    fn the_blame_is_the_culprit_in_words() {
        let blame = blame_of(&late(Some(hog(5_900_000))));
        assert_eq!(blame.label, "qhog7 (SCHED_FIFO 95)");
        assert!(blame.reservable);
        assert_eq!(blame.ns, 5_900_000);
        let own = blame_of(&late(None));
        assert_eq!(own.label, "(its own work)");
        assert!(!own.reservable);
        assert!(!blame_of(&late(Some(Culprit::Hypervisor { ns: 1 }))).reservable);
    }

    #[test]
    fn the_verdict_names_the_culprit_and_the_fix() {
        let mut summary = WatchSummary {
            first_ns: Some(0),
            last_ns: 60_000_000_000,
            ..WatchSummary::default()
        };
        for held in [5_100_000, 5_900_000] {
            let late = late(Some(hog(held)));
            summary.add(&late, &blame_of(&late), 2_666_667, 838_000);
        }
        let verdict = summary.verdict(&Target::Comm("jackd".into()));
        assert_eq!(
            verdict,
            "2 deadline misses in 60 s; 2 while qhog7 (SCHED_FIFO 95) held the CPU 5.1–5.9 ms; \
             `rtlab reserve --auto --comm jackd` would protect it"
        );
        let text = summary.render(&Target::Comm("jackd".into()));
        assert!(text.contains("2.0 per minute"), "{text}");
    }

    #[test]
    fn missed_periods_count_as_misses_and_the_hypervisor_is_not_reservable() {
        let mut summary = WatchSummary {
            first_ns: Some(0),
            last_ns: 20_000_000_000,
            ..WatchSummary::default()
        };
        let mut missed = late(Some(Culprit::Hypervisor { ns: 3_000_000 }));
        missed.kind = LateKind::Missed;
        missed.periods = 3;
        missed.deadlines_missed = 3;
        summary.add(&missed, &blame_of(&missed), 2_666_667, 838_000);
        assert_eq!(summary.misses, 3);
        let verdict = summary.verdict(&Target::Pid(42));
        assert!(
            verdict.starts_with("3 deadline misses in 20 s; 3 to the hypervisor"),
            "{verdict}"
        );
        assert!(
            verdict.ends_with("a CPU reservation cannot protect against that"),
            "{verdict}"
        );
    }

    #[test]
    fn a_competitors_threads_on_each_cpu_count_together() {
        let mut summary = WatchSummary::default();
        for (name, n) in [("qhog0", 3), ("qhog1", 5), ("pipewire", 7), ("qhog1", 1)] {
            let blame = Blame {
                label: format!("{name} (SCHED_FIFO 95)"),
                reservable: true,
                ns: 1,
            };
            for _ in 0..n {
                summary.add(&late(None), &blame, 1, 1);
            }
        }
        assert_eq!(
            summary.top_reservable(),
            Some(("qhog0, qhog1 (SCHED_FIFO 95)".into(), 9))
        );
    }

    #[test]
    fn culprits_stay_bounded() {
        let mut summary = WatchSummary::default();
        for n in 0..1_000 {
            let blame = Blame {
                label: format!("thread{n}"),
                reservable: true,
                ns: 1,
            };
            summary.add(&late(None), &blame, 1, 1);
        }
        assert_eq!(summary.culprits.len(), CULPRITS_KEPT + 1);
        assert_eq!(summary.misses, 1_000);
    }
}
