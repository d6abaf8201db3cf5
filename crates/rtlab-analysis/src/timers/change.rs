//! What the change experiment's settings did to the measuring process, against its untouched
//! first step (paper 004's measure/change pair).

use super::{ms, us};
use rtlab_core::timer_study::ChangeExperiment;

/// What each setting did to the measuring process, against the first (untouched) step.
pub fn change_findings(experiment: &ChangeExperiment) -> Vec<String> {
    let mut lines = Vec::new();
    let Some(baseline) = experiment.steps.first() else {
        return lines;
    };
    let sleep = experiment.sleep_ns as f64;
    for step in experiment.steps.iter().skip(1) {
        if step.wakeup.count == 0 || baseline.wakeup.count == 0 {
            continue;
        }
        let wake_before = baseline.wakeup.p50_ns as f64;
        let wake_after = step.wakeup.p50_ns as f64;
        let sleep_before = baseline.sleep.p50_ns as f64 - sleep;
        let sleep_after = step.sleep.p50_ns as f64 - sleep;
        let wake_change = wake_after - wake_before;
        let sleep_change = sleep_after - sleep_before;
        let significant =
            |change: f64, base: f64| change.abs() >= 5_000.0 && change.abs() >= 0.2 * base.abs();
        let fifo = match (&baseline.rt_wakeup, &step.rt_wakeup) {
            (Some(before), Some(after)) if before.count > 0 && after.count > 0 => {
                let change = after.p50_ns as f64 - before.p50_ns as f64;
                if significant(change, before.p50_ns as f64) {
                    format!(
                        "; a SCHED_FIFO thread's wake-ups came {} µs {} (p50 {} → {} µs)",
                        us(change.abs()),
                        if change < 0.0 { "sooner" } else { "later" },
                        us(before.p50_ns as f64),
                        us(after.p50_ns as f64)
                    )
                } else {
                    format!(
                        "; a SCHED_FIFO thread's wake-ups did not change (p50 {} → {} µs)",
                        us(before.p50_ns as f64),
                        us(after.p50_ns as f64)
                    )
                }
            }
            _ => String::new(),
        };
        if significant(wake_change, wake_before) || significant(sleep_change, sleep_before) {
            lines.push(format!(
                "while another process set {}, this process's wake-ups came {} µs {} (p50 {} → {} µs) and its {} sleeps ran {} µs long instead of {} µs{fifo}",
                step.setting,
                us(wake_change.abs()),
                if wake_change < 0.0 { "sooner" } else { "later" },
                us(wake_before),
                us(wake_after),
                ms(experiment.sleep_ns),
                us(sleep_after),
                us(sleep_before)
            ));
        } else {
            lines.push(format!(
                "{} changed nothing measurable in the SCHED_OTHER thread (wake-up p50 {} → {} µs){fifo}",
                step.setting,
                us(wake_before),
                us(wake_after)
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_change_experiment_names_what_moved() {
        use rtlab_core::timer_study::{ChangeStep, DelayStats};
        let stats = |p50| DelayStats {
            count: 100,
            p50_ns: p50,
            ..DelayStats::default()
        };
        let experiment = ChangeExperiment {
            sleep_ns: 1_000_000,
            steps: vec![
                ChangeStep {
                    setting: "nothing changed".into(),
                    wakeup: stats(60_000),
                    sleep: stats(1_060_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "cpu_dma_latency 0 µs".into(),
                    wakeup: stats(20_000),
                    sleep: stats(1_058_000),
                    ..ChangeStep::default()
                },
                ChangeStep {
                    setting: "cpu_dma_latency 100 µs".into(),
                    wakeup: stats(61_000),
                    sleep: stats(1_060_000),
                    ..ChangeStep::default()
                },
            ],
            ..ChangeExperiment::default()
        };
        let found = change_findings(&experiment);
        assert!(found[0].starts_with("while another process set cpu_dma_latency 0 µs, this process's wake-ups came 40 µs sooner"), "{found:?}");
        assert!(found[1].contains("changed nothing measurable"), "{found:?}");
    }
}
