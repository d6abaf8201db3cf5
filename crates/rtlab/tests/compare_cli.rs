//! `rtlab compare`: cyclictest histograms imported with `rtlab import`, compared as they would be
//! in a CI pipeline gating a kernel change (`--fail-if-worse`), and the errors of bad input.

mod common;

use common::{stdout_json, stdout_text, Sandbox};

/// A cyclictest `-h` histogram for two threads (CPUs 0 and 1): `count` samples per thread,
/// log-normally spread around `median_us` (deterministic: quantiles, not random draws).
fn cyclictest_histogram(median_us: f64, spread: f64, count: u64) -> String {
    let buckets = 2_000usize;
    let mut counts = vec![0u64; buckets];
    for index in 0..count {
        // The normal quantile of (index + 0.5) / count by the logit approximation (good enough
        // to make a smooth, long-tailed histogram).
        let p = (index as f64 + 0.5) / count as f64;
        let z = (p / (1.0 - p)).ln() / 1.702;
        let value = (median_us * (spread * z).exp()).round() as usize;
        counts[value.min(buckets - 1)] += 1;
    }
    let mut text = String::from("# /dev/cpu_dma_latency set to 0us\n# Histogram\n");
    for (latency, count) in counts.iter().enumerate() {
        text.push_str(&format!("{latency:06} {count:06}\t{count:06}\n"));
    }
    text.push_str(&format!("# Total: {count:09} {count:09}\n"));
    text.push_str("# Histogram Overflows: 00000 00000\n");
    text
}

fn import(sandbox: &Sandbox, name: &str, text: &str) -> String {
    let input = sandbox.write(&format!("{name}.txt"), text);
    let record = sandbox.file(&format!("{name}.json"));
    sandbox.run_expecting(
        0,
        [
            "import",
            input.to_str().unwrap(),
            "--period",
            "1ms",
            "--no-store",
            "--json",
            record.to_str().unwrap(),
        ],
    );
    record.to_str().unwrap().to_owned()
}

#[test]
fn a_regression_in_imported_cyclictest_data_fails_the_gate_and_noise_does_not() {
    let sandbox = Sandbox::new();
    let before = import(
        &sandbox,
        "before",
        &cyclictest_histogram(20.0, 0.3, 200_000),
    );
    let same = import(&sandbox, "same", &cyclictest_histogram(20.0, 0.3, 150_000));
    let worse = import(
        &sandbox,
        "worse",
        &cyclictest_histogram(20.0, 0.45, 200_000),
    );

    // Same distribution, different sample count: no verdict of worse, the gate passes.
    let output = sandbox.run_expecting(
        0,
        ["compare", &before, &same, "--fail-if-worse", "p99.9:10%"],
    );
    let text = stdout_text(&output);
    assert!(text.contains("verdict: no difference"), "{text}");
    assert!(
        text.contains("--fail-if-worse p99.9:10%: passed (2 series judged)"),
        "{text}"
    );
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80 columns: {line}");
    }

    // A wider tail: worse at p99.9 by far more than 10 %, the gate fails with exit 1.
    let output = sandbox.run_expecting(
        1,
        ["compare", &before, &worse, "--fail-if-worse", "p99.9:10%"],
    );
    let text = stdout_text(&output);
    assert!(text.contains("verdict: B is worse at p"), "{text}");
    assert!(text.contains("FAILED in 2 of 2 series judged"), "{text}");

    // JSON: every series paired by CPU, the gate's breaches listed.
    let output = sandbox.run_expecting(
        1,
        [
            "compare",
            &before,
            &worse,
            "--fail-if-worse",
            "p99:20us",
            "--json",
            "-",
        ],
    );
    let json = stdout_json(&output);
    assert_eq!(json["schema"], "rtlab.compare/1");
    assert_eq!(json["series"].as_array().unwrap().len(), 2);
    assert_eq!(json["gate"]["breaches"].as_array().unwrap().len(), 2);
    let p99 = &json["series"][0]["percentiles"][2];
    assert_eq!(p99["percentile"], "99");
    assert_eq!(p99["change"], "worse");
    let [low, high] = [&p99["difference_ci_ns"][0], &p99["difference_ci_ns"][1]]
        .map(|value| value.as_i64().unwrap());
    let difference = p99["difference_ns"].as_i64().unwrap();
    assert!(low <= difference && difference <= high, "{p99}");

    // Reversed, B is better: the gate passes.
    sandbox.run_expecting(
        0,
        ["compare", &worse, &before, "--fail-if-worse", "p99.9:10%"],
    );
}

#[test]
fn a_gate_on_a_percentile_the_runs_cannot_support_is_an_input_error() {
    let sandbox = Sandbox::new();
    let a = import(&sandbox, "a", &cyclictest_histogram(20.0, 0.3, 5_000));
    let b = import(&sandbox, "b", &cyclictest_histogram(20.0, 0.3, 5_000));
    let output = sandbox.run_expecting(2, ["compare", &a, &b, "--fail-if-worse", "p99.99:10%"]);
    assert!(
        common::stderr_text(&output).contains("no wake-up or hand-off series has enough samples"),
        "{}",
        common::stderr_text(&output)
    );
    let output = sandbox.run_expecting(2, ["compare", &a, &b, "--fail-if-worse", "p97:10%"]);
    assert!(common::stderr_text(&output).contains("--fail-if-worse"));
    let output = sandbox.run_expecting(2, ["compare", &a, "no-such-run-or-file"]);
    assert!(common::stderr_text(&output).contains("no-such-run-or-file"));
}

#[test]
fn the_new_commands_have_man_pages() {
    let sandbox = Sandbox::new();
    for (command, flag) in [
        ("compare", "fail\\-if\\-worse"),
        ("report", "\\-\\-html"),
        ("monitor", "\\-\\-prometheus"),
    ] {
        let output = sandbox.run_expecting(0, ["completions", "man", command]);
        let page = stdout_text(&output);
        assert!(page.contains(&format!(".TH rtlab-{command} 1")), "{page}");
        assert!(page.contains(flag), "{command}: {page}");
    }
    sandbox.run_expecting(2, ["completions", "man", "no-such-command"]);
}
