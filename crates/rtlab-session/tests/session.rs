//! A whole run through the library, as the CLI, a daemon or a monitor makes it: the normal class
//! only (no root needed), one CPU, a load command. Asserts what the record says and that the
//! observer and the stop flag are honoured; never timings.

use rtlab_core::{Metric, Nanos};
use rtlab_probe::{Class, ProbeConfig};
use rtlab_session::{LoadRequest, Observer, RunConfig, Session, SessionError, SessionProgress};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn config(duration: Nanos, load: LoadRequest) -> RunConfig {
    RunConfig {
        probe: ProbeConfig {
            cpus: vec![0],
            classes: vec![Class::Normal],
            period: Nanos::from_micros(500),
            duration,
            warmup: Nanos::from_millis(100),
            handoff: false,
            peaks_per_series: 32,
            cpu_dma_latency_us: None,
            compute: None,
        },
        load,
        explain: None,
        cmdline: vec!["test".into()],
    }
}

#[derive(Default)]
struct Counting {
    polls: usize,
    measured: usize,
    last: SessionProgress,
    stop_after: Option<(usize, Arc<AtomicBool>)>,
}

impl Observer for Counting {
    fn poll_interval(&self) -> Duration {
        Duration::from_millis(20)
    }

    fn progress(&mut self, progress: &SessionProgress) {
        self.polls += 1;
        self.last = *progress;
        if let Some((after, stop)) = &self.stop_after {
            if self.polls >= *after && !progress.warming_up {
                stop.store(true, Ordering::SeqCst);
            }
        }
    }

    fn measured(&mut self) {
        self.measured += 1;
    }
}

#[test]
fn a_run_under_a_load_command_gives_a_valid_record() {
    let load = LoadRequest {
        load_cmd: Some("sleep 30".into()),
        ..LoadRequest::default()
    };
    let mut observer = Counting::default();
    let record = Session::new(config(Nanos::from_millis(600), load))
        .unwrap()
        .run(&mut observer)
        .unwrap();
    record.validate().unwrap();
    assert!(!record.interrupted);
    assert!(observer.polls > 0 && observer.measured == 1);
    assert!(observer.last.samples > 0);
    // The period recorded is the one the probe ran.
    assert_eq!(record.config.period_ns, Some(500_000));
    assert_eq!(record.config.classes, vec!["normal".to_owned()]);
    let wakeup = record
        .series
        .iter()
        .find(|series| series.metric == Metric::Wakeup)
        .expect("a wake-up series");
    assert_eq!(wakeup.period_ns, 500_000);
    assert_eq!(wakeup.label(), "normal/wakeup@0");
    assert!(wakeup.tail.is_some(), "tails are attached");
    let load = record.load.expect("the record says what load ran");
    assert!(load.started);
    let command = load.command.expect("the load command");
    assert_eq!(command.cmd, "sleep 30");
    assert_eq!(command.ended, "stopped by rtlab (process group terminated)");
}

#[test]
fn the_stop_flag_ends_the_run_with_a_partial_record() {
    let stop = Arc::new(AtomicBool::new(false));
    let mut observer = Counting {
        stop_after: Some((3, Arc::clone(&stop))),
        ..Counting::default()
    };
    let record = Session::new(config(Nanos::from_secs(60), LoadRequest::default()))
        .unwrap()
        .with_stop_flag(stop)
        .run(&mut observer)
        .unwrap();
    assert!(record.interrupted);
    assert!(record.duration_ns < 60_000_000_000);
    record.validate().unwrap();
}

#[test]
fn bad_settings_are_input_errors_before_anything_starts() {
    let load = LoadRequest {
        load: Some("gpu".into()),
        ..LoadRequest::default()
    };
    let error = Session::new(config(Nanos::from_secs(1), load)).unwrap_err();
    assert!(error.is_input(), "{error}");
    assert!(matches!(error, SessionError::Load(_)));

    let mut short = config(Nanos::from_secs(1), LoadRequest::default());
    short.probe.period = Nanos(1_000);
    let error = Session::new(short)
        .unwrap()
        .run(&mut rtlab_session::NoObserver)
        .unwrap_err();
    assert!(error.is_input(), "{error}");
    match error {
        SessionError::Probe(probe) => assert_eq!(probe.setting(), Some("period")),
        other => panic!("expected a probe error, got {other}"),
    }
}
