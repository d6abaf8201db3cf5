//! Real-data validation of the tail projection (issue 3, item 6): fit on the first 10 % of a long
//! run under load, predict the maximum of the remaining 90 %, compare with what happened.
//!
//! `collect` starts a load (a profile or stressors, as `--load`), then measures with the probe in
//! two back-to-back parts — the first 10 % and the remaining 90 % of the duration — without
//! stopping the load between them, and writes both parts' histograms and per-second maxima.
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
use rtlab_core::{parse_duration, LatencyHistogram, Nanos};
use rtlab_probe::{Class, Probe, ProbeConfig};
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn measure(duration: Nanos, warmup: Nanos, stop: &Arc<AtomicBool>) -> anyhow::Result<Value> {
    let config = ProbeConfig {
        cpus: rtlab_sys::cpu::online_cpus()?,
        classes: vec![Class::RtHigh, Class::Normal],
        period: Nanos::from_millis(1),
        duration,
        warmup,
        handoff: false,
        peaks_per_series: 1000,
        cpu_dma_latency_us: None,
    };
    let probe = Probe::start(&config, Arc::clone(stop)).context("starting the probe")?;
    while !probe.is_finished() && !probe.stop_requested() {
        std::thread::sleep(Duration::from_millis(200));
    }
    let result = probe.finish();
    let series: Vec<Value> = result
        .series
        .iter()
        .map(|series| {
            json!({
                "label": format!("{}/{}@{}", series.key.class.name(), series.key.metric, series.key.cpu),
                "count": series.histogram.count(),
                "max_ns": series.histogram.max(),
                "hdr": series.histogram.to_base64().unwrap_or_default(),
                "max_per_second": series.max_per_second,
            })
        })
        .collect();
    Ok(json!({"measured_ns": result.measured_ns, "series": series}))
}

fn collect(load: &str, duration: &str, output: &str) -> anyhow::Result<()> {
    let total = parse_duration(duration).map_err(anyhow::Error::msg)?;
    let first = Nanos(total.as_u64() / 10);
    let rest = Nanos(total.as_u64() - first.as_u64());
    let profile = rtlab_probe::profile::find_profile(load);
    let specs = match profile {
        Some(profile) => profile.stressors(),
        None => rtlab_probe::stress::parse_stress_list(load)?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    rtlab_sys::signals::install_stop_flag(&stop)?;
    let options =
        rtlab_probe::stress::StressOptions::new(total.as_std() + Duration::from_secs(120));
    let load_running = rtlab_probe::stress::start(&specs, &options)?;
    let first_part = measure(first, Nanos::from_secs(5), &stop)?;
    let rest_part = measure(rest, Nanos::ZERO, &stop)?;
    let reports = load_running.stop();
    let load_summary: Vec<Value> = reports
        .iter()
        .map(|report| {
            json!({"spec": report.spec.to_string(), "cpu_time_ns": report.usage.cpu_time_ns,
                   "operations": report.operations, "errors": report.errors})
        })
        .collect();
    let document = json!({"load": load, "duration": duration, "first": first_part,
                          "rest": rest_part, "stressors": load_summary});
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
    let first = document["first"]["series"]
        .as_array()
        .context("first.series")?;
    let rest = document["rest"]["series"]
        .as_array()
        .context("rest.series")?;
    for (first_series, rest_series) in first.iter().zip(rest) {
        let label = first_series["label"].as_str().unwrap_or("?");
        let histogram = LatencyHistogram::from_base64(first_series["hdr"].as_str().unwrap_or(""))?;
        let rest_count = rest_series["count"].as_u64().unwrap_or(0) as f64;
        let observed = rest_series["max_ns"].as_u64().unwrap_or(0) as f64;
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
