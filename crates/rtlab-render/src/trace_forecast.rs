//! `rtlab forecast --trace`'s words: the forecast from an application's own trace
//! (`rtlab_analysis::trace_forecast::TraceForecast`, computed by rtlab-trace's `forecast`).

use rtlab_analysis::trace_forecast::TraceForecast;

/// The forecast as text: the thread, the periodic interferers, a row per buffering with its
/// words, the rule and the warnings.
pub fn render(output: &TraceForecast) -> String {
    use std::fmt::Write as _;
    let thread = &output.thread;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: thread {} {} ({} {}) runs every {:.3} ms, {:.3} ms of work per activation on average",
        output.source,
        thread.tid,
        thread.name,
        thread.policy,
        thread.priority,
        thread.period_ns as f64 / 1e6,
        thread.compute_mean_ns as f64 / 1e6,
    );
    let _ = writeln!(
        text,
        "recorded {:.1} s: {} activations, {} late activations or gaps listed\n",
        output.duration_ns as f64 / 1e9,
        thread.activations,
        output.glitches_listed,
    );
    for found in &output.periodic {
        let _ = writeln!(text, "periodic: {}", found.text);
    }
    if !output.periodic.is_empty() {
        text.push('\n');
    }
    let _ = writeln!(
        text,
        "{:>8} {:>10} {:>7} {:>9} {:>8} {:>14} {:>24}",
        "frames", "period", "buffers", "deadline", "glitches", "per minute", "one every (90 % CI)"
    );
    for row in &output.rows {
        let rate = &row.rate;
        let frames = row
            .frames
            .map_or("-".to_owned(), |frames| frames.to_string());
        let glitches = rate.glitches.map_or("-".to_owned(), |count| {
            format!("{count}{}", if rate.lower_bound { "+" } else { "" })
        });
        let per_minute = rate
            .per_minute
            .map_or("-".to_owned(), |value| format!("{value:.2}"));
        let every = match (rate.glitches, rate.mean_time_between_s) {
            (None, _) => "not forecast".to_owned(),
            (Some(_), Some(mean)) => format!(
                "{} ({}–{})",
                rtlab_analysis::forecast::describe_seconds(mean),
                rate.mean_time_between_low_s
                    .map_or("?".to_owned(), rtlab_analysis::forecast::describe_seconds),
                rate.mean_time_between_high_s.map_or(
                    "forever".to_owned(),
                    rtlab_analysis::forecast::describe_seconds
                ),
            ),
            (Some(_), None) => format!(
                "≥ {}",
                rate.mean_time_between_low_s
                    .map_or("?".to_owned(), rtlab_analysis::forecast::describe_seconds)
            ),
        };
        let _ = writeln!(
            text,
            "{frames:>8} {:>10} {:>7} {:>9} {glitches:>8} {per_minute:>14} {every:>24}{}",
            format!("{:.3} ms", rate.period_ns as f64 / 1e6),
            rate.buffers,
            format!("{:.2} ms", rate.deadline_ns as f64 / 1e6),
            if row.recorded { "  ← recorded" } else { "" },
        );
    }
    text.push('\n');
    for row in &output.rows {
        let _ = writeln!(text, "{}", row.words);
    }
    let _ = writeln!(text, "\nrule: {}", output.rule);
    for warning in &output.warnings {
        let _ = writeln!(text, "warning: {warning}");
    }
    text
}
