//! `rtlab tune`'s text: the inventory of settings, then the table of what was tried, its
//! measured effect with its interval, and whether it was kept.

use crate::summary::micros;
use crate::text::{truncate, wrapped};
use rtlab_core::tune_report::{
    AppEffect, SettingEffect, SettingResult, TuneReport, WhenChangeable,
};
use std::fmt::Write;

fn when_text(when: WhenChangeable) -> &'static str {
    match when {
        WhenChangeable::Now => "now",
        WhenChangeable::NextBoot => "next boot",
        WhenChangeable::ByHand => "by hand",
        WhenChangeable::Absent => "absent",
    }
}

/// What `rtlab tune` prints after measuring: the inventory, the line saying nothing was changed
/// when not root (unless only the inventory was asked for, `inventory_only`), then the results.
pub fn report(report: &TuneReport, inventory_only: bool) -> String {
    let mut text = inventory(report);
    if !report.as_root && !inventory_only {
        text.push_str("\nnot root: nothing was changed or measured (rtlab tune changes kernel settings; run it as root)\n");
    }
    let results = results(report);
    if !results.is_empty() {
        text.push('\n');
        text.push_str(&results);
    }
    text
}

/// `rtlab tune --revert`'s first line: the settings a killed rtlab tune left changed, put back.
pub fn put_back(repaired: &[String]) -> String {
    if repaired.is_empty() {
        "nothing to put back: no rtlab tune left a setting changed\n".to_owned()
    } else {
        format!("put back: {}\n", repaired.join(", "))
    }
}

/// The inventory: each setting, its value, why it matters and what can be done.
pub fn inventory(report: &TuneReport) -> String {
    let mut text = String::new();
    if !report.repaired.is_empty() {
        let _ = writeln!(
            text,
            "{}",
            wrapped(
                "put back what a killed rtlab tune had left changed: ",
                &report.repaired.join(", "),
                2
            )
        );
        text.push('\n');
    }
    let _ = writeln!(text, "{:<22} {:<10} value", "setting", "rtlab can");
    for item in &report.inventory {
        let first = format!(
            "{:<22} {:<10} ",
            truncate(&item.name, 22),
            when_text(item.when)
        );
        let _ = writeln!(text, "{}", wrapped(&first, &item.value, 34));
        let _ = writeln!(text, "{}", wrapped("    why: ", &item.why, 9));
        let _ = writeln!(text, "{}", wrapped("    do:  ", &item.action, 9));
    }
    text
}

/// `−12.3 us [−20.1, −4.0]` or `−12.3 us (too few samples to judge)`.
fn effect_text(effect: &SettingEffect) -> String {
    let signed = |nanos: i64| {
        let sign = if nanos < 0 { "-" } else { "+" };
        format!("{sign}{}", micros(nanos.unsigned_abs()))
    };
    match effect.difference_ci_ns {
        Some([low, high]) => format!(
            "{} us [{}, {}]",
            signed(effect.difference_ns),
            signed(low),
            signed(high)
        ),
        None => format!("{} us (not judged)", signed(effect.difference_ns)),
    }
}

/// `jackd misses/min: 30.7 -> 3.3, -27.3 [-31.1, -23.5] (rounds A 30,34,28; B 3,5,2)`.
fn app_effect_text(effect: &AppEffect) -> String {
    let interval = effect.difference_ci_per_minute.map_or_else(
        || " (one pair: not judged)".to_owned(),
        |[low, high]| format!(" [{low:+.1}, {high:+.1}]"),
    );
    let counts = |rounds: &[rtlab_core::tune_report::AppRound]| {
        rounds
            .iter()
            .map(|round| round.misses.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{} misses/min: {:.1} -> {:.1}, {:+.1}{interval} (misses per round: as it was {}; changed {})",
        effect.comm,
        effect.per_minute_before,
        effect.per_minute_after,
        effect.difference_per_minute,
        counts(&effect.rounds_before),
        counts(&effect.rounds_after)
    )
}

fn setting_row(text: &mut String, setting: &SettingResult) {
    let name = if setting.placebo {
        format!("{} (placebo)", setting.name)
    } else {
        setting.name.clone()
    };
    let change = format!("{} -> {}", setting.before, setting.tried);
    let (figures, effect) = match &setting.effect {
        Some(effect) => (
            format!(
                "{} -> {}",
                micros(effect.before_ns),
                micros(effect.after_ns)
            ),
            effect_text(effect),
        ),
        None => ("-".to_owned(), "-".to_owned()),
    };
    let _ = writeln!(
        text,
        "{:<20} {:<25} {:<16} {}",
        truncate(&name, 20),
        truncate(&change, 25),
        figures,
        if setting.kept { "kept" } else { "no" }
    );
    if let Some(app) = &setting.app {
        let _ = writeln!(text, "{}", wrapped("    ", &app_effect_text(app), 4));
    }
    let line = if effect == "-" {
        setting.reason.clone()
    } else {
        format!("{effect}: {}", setting.reason)
    };
    let _ = writeln!(text, "{}", wrapped("    ", &line, 4));
}

/// The results table: setting, before → after, the figure before → after (µs), the effect with
/// its interval, kept or not, and why.
pub fn results(report: &TuneReport) -> String {
    let mut text = String::new();
    if report.settings.is_empty() {
        return text;
    }
    let measured = format!(
        "{} A/B pair(s) of {:.1} s rounds per setting on CPU(s) {}, {} wake-up latency, {:.0}% intervals",
        report.rounds,
        report.round_ns as f64 / 1e9,
        report
            .cpus
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(","),
        report.figure,
        report.confidence * 100.0
    );
    let _ = writeln!(text, "{}", wrapped("measured: ", &measured, 4));
    if let Some(comm) = &report.app {
        let _ = writeln!(
            text,
            "{}",
            wrapped(
                "and: ",
                &format!("{comm}'s own deadline misses per minute in each round (as rtlab trace watch counts them), the mean of the pairs' differences with Student's t interval"),
                4
            )
        );
    }
    let _ = writeln!(
        text,
        "{:<20} {:<25} {:<16} kept",
        "setting",
        "before -> tried",
        format!("{} us", report.figure)
    );
    for setting in &report.settings {
        setting_row(&mut text, setting);
    }
    let kept: Vec<&str> = report
        .settings
        .iter()
        .filter(|setting| setting.kept)
        .map(|setting| setting.name.as_str())
        .collect();
    let _ = writeln!(
        text,
        "\n{}",
        wrapped(
            "",
            &if kept.is_empty() {
                "nothing helped beyond noise; every setting is as it was".to_owned()
            } else {
                format!(
                    "helped beyond noise: {}. Every setting was put back as it was at the end (--apply keeps them)",
                    kept.join(", ")
                )
            },
            0
        )
    );
    if report.interrupted {
        let _ = writeln!(text, "interrupted: every setting was put back as it was");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::tune_report::InventoryItem;

    fn report() -> TuneReport {
        TuneReport {
            figure: "p99".into(),
            confidence: 0.95,
            cpus: vec![1],
            housekeeping_cpus: vec![0],
            round_ns: 8_000_000_000,
            rounds: 3,
            as_root: true,
            repaired: vec![],
            inventory: vec![InventoryItem {
                name: "timer_migration".into(),
                value: "1".into(),
                why: "timers may be moved to the CPU that measures".into(),
                when: WhenChangeable::Now,
                action: "rtlab tune tries 0".into(),
            }],
            settings: vec![
                SettingResult {
                    name: "cpu_dma_latency".into(),
                    before: "2000000000".into(),
                    tried: "0 (held)".into(),
                    effect: Some(SettingEffect {
                        figure: "p99".into(),
                        before_ns: 150_000,
                        after_ns: 60_000,
                        difference_ns: -90_000,
                        difference_ci_ns: Some([-120_000, -70_000]),
                        relative: -0.6,
                        relative_ci: Some([-0.7, -0.5]),
                        samples_before: 24_000,
                        samples_after: 24_000,
                    }),
                    kept: true,
                    reason: "better beyond noise".into(),
                    placebo: false,
                    app: None,
                },
                SettingResult {
                    name: "placebo".into(),
                    before: "-".into(),
                    tried: "-".into(),
                    effect: None,
                    kept: false,
                    reason: "within noise".into(),
                    placebo: true,
                    app: None,
                },
            ],
            app: None,
            interrupted: false,
            duration_ns: 0,
        }
    }

    #[test]
    fn the_table_shows_each_setting_its_interval_and_whether_it_was_kept() {
        let text = results(&report());
        assert!(text.contains("cpu_dma_latency"), "{text}");
        assert!(text.contains("150.0 -> 60.0"), "{text}");
        assert!(text.contains("-90.0 us [-120.0, -70.0]: better"), "{text}");
        for line in text.lines().chain(inventory(&report()).lines()) {
            assert!(line.chars().count() <= crate::text::WIDTH, "{line}");
        }
        assert!(text.contains("placebo (placebo)"), "{text}");
        assert!(
            text.contains("helped beyond noise: cpu_dma_latency"),
            "{text}"
        );
        let inventory = inventory(&report());
        assert!(inventory.contains("timer_migration"), "{inventory}");
        assert!(
            inventory.contains("why: timers may be moved"),
            "{inventory}"
        );
    }

    #[test]
    fn the_inventory_and_the_table_match_their_snapshot() {
        let report = report();
        insta::assert_snapshot!(format!("{}\n{}", inventory(&report), results(&report)));
    }

    #[test]
    fn with_an_app_the_table_shows_its_misses_beside_the_probes_figure() {
        use rtlab_core::tune_report::AppRound;
        let mut report = report();
        report.app = Some("jackd".into());
        let rounds = |misses: [u64; 3]| {
            misses
                .iter()
                .map(|misses| AppRound {
                    misses: *misses,
                    seconds: 60.0,
                })
                .collect()
        };
        report.settings[0].app = Some(AppEffect {
            comm: "jackd".into(),
            rounds_before: rounds([30, 34, 28]),
            rounds_after: rounds([3, 5, 2]),
            per_minute_before: 30.666,
            per_minute_after: 3.333,
            difference_per_minute: -27.333,
            difference_ci_per_minute: Some([-31.13, -23.54]),
            pairs_fewer: 3,
            pairs: 3,
        });
        let text = results(&report);
        assert!(
            text.contains("    jackd misses/min: 30.7 -> 3.3, -27.3 [-31.1, -23.5]"),
            "{text}"
        );
        assert!(text.contains("jackd's own deadline misses"), "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= crate::text::WIDTH, "{line}");
        }
        insta::assert_snapshot!(text);
    }
}
