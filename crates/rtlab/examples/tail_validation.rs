//! Real-data validation of the tail projection (issue 3, item 6): fit on the first 10 % of a long
//! run under load, predict the maximum of the remaining 90 %, compare with what happened.
//!
//! `collect` starts a load (a profile or stressors, as `--load`), then measures with the session
//! library (`rtlab_session`, the same run `rtlab run` makes) in two back-to-back parts — the first 10 % and the remaining 90 % of the duration — without
//! stopping the load between them, and writes both parts' Run records.
//! `analyze` fits each series' first part and predicts the median and the 5–95 % range of the
//! maximum over as many wake-ups as the second part had, with the profile-likelihood interval of
//! the median, next to the observed maximum of the second part.
//!
//! ```text
//! cargo run --release -p rtlab --example tail_validation -- collect office 35m /tmp/split.json
//! cargo run --release -p rtlab --example tail_validation -- analyze /tmp/split.json
//! ```

use anyhow::{bail, Context};
use rtlab_analysis::tail::{fit_tail, format_latency, Estimate, TailConfig};
use rtlab_core::{parse_duration, Nanos, RunRecord};
use rtlab_probe::{Class, ProbeConfig};
use rtlab_session::{LoadRequest, NoObserver, RunConfig, Session};
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// One part: a run of the session library with no load of its own (the load runs across parts).
fn measure(duration: Nanos, warmup: Nanos, stop: &Arc<AtomicBool>) -> anyhow::Result<RunRecord> {
    let config = RunConfig {
        probe: ProbeConfig {
            cpus: Vec::new(),
            classes: vec![Class::RtHigh, Class::Normal],
            period: Nanos::from_millis(1),
            duration,
            warmup,
            handoff: false,
            peaks_per_series: 1000,
            cpu_dma_latency_us: None,
            compute: None,
        },
        load: LoadRequest::default(),
        explain: None,
        cmdline: std::env::args().collect(),
    };
    let record = Session::new(config)
        .context("checking the run")?
        .with_stop_flag(Arc::clone(stop))
        .run(&mut NoObserver)
        .context("measuring")?;
    Ok(record)
}

fn collect(load: &str, duration: &str, output: &str) -> anyhow::Result<()> {
    let total = parse_duration(duration).map_err(anyhow::Error::msg)?;
    let first = Nanos(total.as_u64() / 10);
    let rest = Nanos(total.as_u64() - first.as_u64());
    let warmup = Nanos::from_secs(5);
    let plan = rtlab_session::load::validate(&LoadRequest {
        load: Some(load.to_owned()),
        ..LoadRequest::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)?;
    let now_ns = rtlab_sys::clock::monotonic_ns();
    let end_ns = now_ns + warmup.as_u64() + total.as_u64() + Nanos::from_secs(120).as_u64();
    let load_running = plan.start(now_ns, end_ns)?;
    let first_part = measure(first, warmup, &stop)?;
    let rest_part = measure(rest, Nanos::ZERO, &stop)?;
    let (load_summary, load_warnings) = load_running.stop(&plan);
    let document = json!({"load": load, "duration": duration, "first": first_part,
                          "rest": rest_part, "load_ran": load_summary,
                          "load_warnings": load_warnings});
    std::fs::write(output, serde_json::to_string_pretty(&document)?)
        .with_context(|| format!("writing {output}"))?;
    Ok(())
}

fn analyze(input: &str) -> anyhow::Result<()> {
    let document: Value = serde_json::from_str(&std::fs::read_to_string(input)?)?;
    println!(
        "load {}  duration {}",
        document["load"], document["duration"]
    );
    println!(
        "{:<18} {:>8} {:>9} {:>6} {:>6} {:>9} {:>8} {:>30} {:>22} {:>10} {:>7}",
        "series",
        "fit n",
        "thresh",
        "k",
        "xi",
        "fit max",
        "rest n",
        "predicted median max [95% CI]",
        "5-95% range of max",
        "observed",
        "inside"
    );
    let config = TailConfig::default();
    let part = |name: &str| -> anyhow::Result<RunRecord> {
        RunRecord::from_json(&document[name].to_string()).with_context(|| name.to_owned())
    };
    let (first, rest) = (part("first")?, part("rest")?);
    for (first_series, rest_series) in first.series.iter().zip(&rest.series) {
        let label = first_series.label();
        let histogram = first_series.histogram()?;
        let rest_count = rest_series.count as f64;
        let observed = rest_series.max_ns as f64;
        let fit = match fit_tail(&histogram, &config) {
            Ok(fit) => fit,
            Err(reason) => {
                println!(
                    "{label:<18} {:>8} insufficient: {reason}",
                    histogram.count()
                );
                continue;
            }
        };
        let median_probability = -(-std::f64::consts::LN_2 / rest_count).exp_m1();
        let range = |probability_max_below: f64| {
            let probability = -(probability_max_below.ln() / rest_count);
            let conditional = probability / fit.exceedance_rate();
            if conditional >= 1.0 {
                return histogram.value_at_quantile(1.0 - probability) as f64;
            }
            fit.threshold_ns
                + rtlab_analysis::tail::gpd::excess_quantile(conditional, fit.gpd.sigma, fit.gpd.xi)
        };
        let (low_max, high_max) = (range(0.05), range(0.95));
        let prediction = fit.quantile(median_probability, config.confidence);
        let (text, inside) = match prediction {
            Estimate::Value {
                estimate_ns,
                ci_low_ns,
                ci_high_ns,
                ..
            } => (
                format!(
                    "{} [{} – {}]",
                    format_latency(estimate_ns),
                    format_latency(ci_low_ns),
                    format_latency(ci_high_ns)
                ),
                if (low_max..=high_max).contains(&observed) {
                    "yes"
                } else {
                    "no"
                },
            ),
            Estimate::Insufficient(reason) => (format!("insufficient: {reason}"), "-"),
        };
        println!(
            "{label:<18} {:>8} {:>9} {:>6} {:>6.3} {:>9} {:>8} {:>30} {:>22} {:>10} {:>7}",
            histogram.count(),
            format_latency(fit.threshold_ns),
            fit.excesses.total,
            fit.gpd.xi,
            format_latency(histogram.max() as f64),
            rest_count,
            text,
            format!("{} – {}", format_latency(low_max), format_latency(high_max)),
            format_latency(observed),
            inside
        );
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    match arguments
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["collect", load, duration, output] => collect(load, duration, output),
        ["analyze", input] => analyze(input),
        _ => bail!("usage: tail_validation collect LOAD DURATION OUT.json | analyze OUT.json"),
    }
}
