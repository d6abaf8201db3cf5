//! `rtlab trace watch`: a program's deadline misses (late activations) live, one line each with
//! its culprit, the thread's period and CPU need; at the end (duration, the program's exit or
//! Ctrl-C) the misses per minute, the culprits ranked by the time they took, and a one-line
//! verdict. The work is `rtlab_apptrace::live`'s (a recording analysed window by window); this
//! module holds the flags, the printing and the summary, and [`observe`] for `reserve --auto`.

use anyhow::Context as _;
use clap::Args as ClapArgs;
use rtlab_apptrace::analyze::report::{LateActivation, SourceInfo, TraceReport};
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
Exit status: 0 watched to the end, 2 no such program (without --wait), 3 tracing failed, 130 \
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
    /// Start this command and watch it (after `--`)
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// What a miss's largest wait was and who caused it, read from its critical path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Culprit {
    /// "qhog0 (SCHED_FIFO 95)", "interrupts", "the hypervisor", …
    pub label: String,
    /// The critical path's step this culprit took: `cpu`, `irq`, `run`, `futex`, …
    pub step: String,
    pub ns: u64,
}

fn describe_by(by: &serde_json::Value) -> Option<String> {
    let by = match by {
        serde_json::Value::Array(items) => items.first()?,
        other => other,
    };
    let object = by.as_object()?;
    if let Some(name) = object.get("name").and_then(|name| name.as_str()) {
        let policy = object.get("policy").and_then(|policy| policy.as_str());
        let priority = object.get("priority").and_then(|priority| priority.as_i64());
        return Some(match (policy, priority) {
            (Some(policy), Some(priority)) => format!("{name} ({policy} {priority})"),
            _ => name.to_owned(),
        });
    }
    let kind = object.get("kind").and_then(|kind| kind.as_str())?;
    Some(match kind {
        "hypervisor" => "the hypervisor".to_owned(),
        "throttled" => "throttling".to_owned(),
        "migration" => "a migration".to_owned(),
        other => other.to_owned(),
    })
}

/// The largest step of the critical path other than the thread's own work (its `run` step
/// when nothing else), with what the path names as its cause. Read through serde so that it
/// follows whatever `by` the analysis gives (a thread, an interrupt, the hypervisor, …).
pub(crate) fn culprit_of(late: &LateActivation) -> Culprit {
    let value = serde_json::to_value(late).unwrap_or_default();
    let steps = value
        .get("critical_path")
        .and_then(|path| path.as_array())
        .cloned()
        .unwrap_or_default();
    let ns_of = |step: &serde_json::Value| step.get("ns").and_then(|ns| ns.as_u64()).unwrap_or(0);
    let kind_of = |step: &serde_json::Value| {
        step.get("kind")
            .and_then(|kind| kind.as_str())
            .unwrap_or("?")
            .to_owned()
    };
    let largest = steps
        .iter()
        .filter(|step| kind_of(step) != "run")
        .max_by_key(|step| ns_of(step))
        .or_else(|| steps.iter().max_by_key(|step| ns_of(step)));
    let Some(step) = largest else {
        return Culprit {
            label: "(no critical path)".into(),
            step: String::new(),
            ns: 0,
        };
    };
    let kind = kind_of(step);
    let named = step.get("by").and_then(describe_by);
    let label = named.unwrap_or_else(|| match kind.as_str() {
        "cpu" => "(unnamed: waiting for a CPU)".into(),
        "irq" => "interrupts".into(),
        "run" => "(its own work took long)".into(),
        other => format!("(unnamed: {other})"),
    });
    Culprit {
        label,
        step: kind,
        ns: ns_of(step),
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

fn step_words(step: &str) -> &'static str {
    match step {
        "cpu" => "waited",
        "irq" => "lost to interrupts",
        "run" => "ran",
        "futex" => "blocked on a lock",
        "sleep" | "io" => "blocked",
        _ => "lost",
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
    ns: u64,
    least_ns: u64,
    most_ns: u64,
}

const CULPRITS_KEPT: usize = 64;
const THREADS_KEPT: usize = 256;

impl WatchSummary {
    fn add(&mut self, late: &LateActivation, culprit: &Culprit, period_ns: u64, need_ns: u64) {
        self.misses += 1;
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
        tally.misses += 1;
        tally.ns += culprit.ns;
        tally.most_ns = tally.most_ns.max(culprit.ns);
        if self.threads.len() < THREADS_KEPT || self.threads.contains_key(&late.thread.tid) {
            let entry = self
                .threads
                .entry(late.thread.tid)
                .or_insert((late.thread.name.clone(), 0, 0, 0));
            entry.1 += 1;
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
            let cause = if label.starts_with('(') {
                format!("{} {label}", tally.misses)
            } else if label.as_str() == "interrupts" {
                format!("{} while interrupts took {held}", tally.misses)
            } else if label.as_str() == "the hypervisor" {
                format!("{} while the hypervisor took the CPU {held}", tally.misses)
            } else {
                format!("{} while {label} held the CPU {held}", tally.misses)
            };
            line.push_str(&format!("; {cause}"));
            let fixable = !label.starts_with('(')
                && !matches!(label.as_str(), "the hypervisor" | "interrupts");
            let how = match target {
                Target::Comm(name) => Some(format!("--comm {name}")),
                Target::Pid(pid) => Some(format!("--pid {pid}")),
                Target::Command(_) => None,
            };
            if let (true, Some(how)) = (fixable, how) {
                line.push_str(&format!("; `rtlab reserve --auto {how}` would protect it"));
            } else if !fixable {
                line.push_str("; a reservation inside this machine cannot protect against that");
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
    stop: &AtomicBool,
    mut window: impl FnMut(TraceReport),
) -> anyhow::Result<RecordSummary> {
    let config = RecordConfig {
        target: target.clone(),
        duration,
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
    let mut live = WindowedAnalyzer::new(AnalysisConfig::default(), window_ns, header, source);
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

/// Records `target` for `duration` and analyses it whole: `reserve --auto`'s observation.
pub(crate) fn observe(
    target: &Target,
    duration: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<TraceReport> {
    let mut whole = None;
    watch_windows(target, Some(duration), u64::MAX, "auto", stop, |report| {
        whole = Some(report)
    })?;
    whole.ok_or_else(|| anyhow::anyhow!("the observation of {} recorded nothing", target.describe()))
}

fn comm_running(name: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        entry.file_name().to_str().is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
            && std::fs::read_to_string(entry.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
    })
}

pub fn run(args: WatchArgs) -> anyhow::Result<ExitCode> {
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
            std::fs::File::create(path)
                .map_err(|error| crate::exit::input(format!("--json {}: {error}", path.display())))?,
        ))),
    };
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
    if !json_to_stdout {
        eprintln!(
            "rtlab: watching {} for deadline misses (Ctrl-C for the summary) …",
            target.describe()
        );
    }
    let mut summary = WatchSummary::default();
    let mut write_error = None;
    let recorded = watch_windows(
        &target,
        args.duration.map(|duration| Duration::from_nanos(duration.0)),
        DEFAULT_WINDOW_NS,
        &args.recorder,
        &stop,
        |report| {
            summary.see(&report);
            let start = summary.first_ns.unwrap_or(report.first_ns);
            for late in &report.late_activations {
                let culprit = culprit_of(late);
                let row = report.threads.iter().find(|row| row.tid == late.thread.tid);
                let need = row.map_or(0, |row| row.cpu_per_activation_ns.p99);
                summary.add(late, &culprit, late.period_ns, need);
                if !json_to_stdout {
                    println!(
                        "{:>9.3} s  {} ({}) missed: done after {} of a {} period (needs {}); {} {}: {}",
                        late.at_ns.saturating_sub(start) as f64 / 1e9,
                        late.thread.name,
                        late.thread.tid,
                        human(late.response_ns),
                        human(late.period_ns),
                        human(need),
                        step_words(&culprit.step),
                        human(culprit.ns),
                        culprit.label
                    );
                }
                if let Some(json) = &mut json {
                    let line = serde_json::to_string(late).expect("a late activation serialises");
                    if let Err(error) = writeln!(json, "{line}") {
                        write_error.get_or_insert(error);
                    }
                }
            }
            if report.late_activations_total > report.late_activations.len() as u64 {
                summary.misses +=
                    report.late_activations_total - report.late_activations.len() as u64;
            }
        },
    );
    if let Some(error) = write_error {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(anyhow::Error::new(error).context("writing --json"));
        }
    }
    let recorded = recorded?;
    if let Some(json) = &mut json {
        json.flush().context("writing --json")?;
    }
    let text = summary.render(&target);
    if json_to_stdout {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    Ok(crate::exit::finished(recorded.interrupted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_apptrace::analyze::report::{PathStep, Ran, ThreadRef};

    fn late(steps: Vec<PathStep>) -> LateActivation {
        LateActivation {
            thread: ThreadRef {
                tid: 7,
                name: "xrun_client".into(),
                priority: 65,
            },
            at_ns: 1_000,
            period_ns: 2_666_667,
            response_ns: 6_000_000,
            critical_path: steps,
        }
    }

    #[test]
    fn the_culprit_is_the_largest_wait_with_its_name() {
        let late = late(vec![
            PathStep {
                kind: "cpu".into(),
                ns: 5_900_000,
                by: Some(Ran {
                    tid: 9,
                    name: "qhog0".into(),
                    ns: 5_900_000,
                }),
            },
            PathStep {
                kind: "run".into(),
                ns: 9_000_000,
                by: None,
            },
        ]);
        let culprit = culprit_of(&late);
        assert_eq!(culprit.label, "qhog0");
        assert_eq!(culprit.step, "cpu");
        assert_eq!(culprit.ns, 5_900_000);
    }

    #[test]
    fn a_path_of_own_work_only_says_so() {
        let culprit = culprit_of(&late(vec![PathStep {
            kind: "run".into(),
            ns: 3_000_000,
            by: None,
        }]));
        assert_eq!(culprit.label, "(its own work took long)");
    }

    #[test]
    fn by_objects_of_every_kind_are_named() {
        let thread = serde_json::json!({"kind": "thread", "tid": 9, "name": "qhog7",
            "policy": "SCHED_FIFO", "priority": 95, "ns": 5});
        assert_eq!(describe_by(&thread).unwrap(), "qhog7 (SCHED_FIFO 95)");
        let listed = serde_json::json!([thread]);
        assert_eq!(describe_by(&listed).unwrap(), "qhog7 (SCHED_FIFO 95)");
        assert_eq!(
            describe_by(&serde_json::json!({"kind": "hypervisor"})).unwrap(),
            "the hypervisor"
        );
        assert_eq!(describe_by(&serde_json::Value::Null), None);
    }

    #[test]
    fn the_verdict_names_the_culprit_and_the_fix() {
        let mut summary = WatchSummary {
            first_ns: Some(0),
            last_ns: 60_000_000_000,
            ..WatchSummary::default()
        };
        for held in [5_100_000, 5_900_000] {
            let culprit = Culprit {
                label: "qhog7 (SCHED_FIFO 95)".into(),
                step: "cpu".into(),
                ns: held,
            };
            summary.add(&late(Vec::new()), &culprit, 2_666_667, 838_000);
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
    fn culprits_stay_bounded() {
        let mut summary = WatchSummary::default();
        for n in 0..1_000 {
            let culprit = Culprit {
                label: format!("thread{n}"),
                step: "cpu".into(),
                ns: 1,
            };
            summary.add(&late(Vec::new()), &culprit, 1, 1);
        }
        assert_eq!(summary.culprits.len(), CULPRITS_KEPT + 1);
        assert_eq!(summary.misses, 1_000);
    }
}
