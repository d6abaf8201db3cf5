//! The forecast in words: the sentences `rtlab forecast` prints (and puts beside the numbers in
//! its JSON) — times in the unit people read them in, the MTTF with its interval, a verdict per
//! class, the model.
//!
//! The numbers and the decisions are the other modules'; only their wording is here, kept in the
//! library because the forecast's JSON carries the sentences beside the numbers.

use super::outcome::{Basis, Forecast, Model, CONFIDENCE};
use super::verdict::VerdictKind;
use crate::classes::ApplicationClass;
use serde::Serialize;

/// The model in words, printed with every forecast.
pub fn model_description(model: Model) -> &'static str {
    match model {
        Model::PerPeriod => {
            "one wake-up per buffer period t; a wake-up fails when its latency exceeds the slack t·(n−1) − c; MTTF = t / P(late)"
        }
        Model::Paper002 => {
            "paper 002 §5: slack t·(n−1) − c, MTTF = (n−1)·t / P(late) (exact for double buffering only)"
        }
        Model::Response => {
            "response: a period fails when a stall longer than the slack t·(n−1) − c covers the wake-up of a thread in the chain or lands in the compute; stalls per second from the probe (one failure per stall), MTTF = 1 / rate"
        }
    }
}

/// A time in seconds in the unit people read it in: "850 ms", "12 s", "14 min", "3.2 h", "9.1 days".
pub fn describe_seconds(seconds: f64) -> String {
    let significant = |value: f64| {
        if value >= 10.0 {
            format!("{value:.0}")
        } else {
            let text = format!("{value:.1}");
            text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
        }
    };
    if !seconds.is_finite() {
        return "forever".to_owned();
    }
    if seconds < 1.0 {
        format!("{} ms", significant(seconds * 1e3))
    } else if seconds < 120.0 {
        format!("{} s", significant(seconds))
    } else if seconds < 2.0 * 3_600.0 {
        format!("{} min", significant(seconds / 60.0))
    } else if seconds < 48.0 * 3_600.0 {
        format!("{} h", significant(seconds / 3_600.0))
    } else if seconds < 365.0 * 86_400.0 {
        format!("{} days", significant(seconds / 86_400.0))
    } else {
        format!("{} years", significant(seconds / (365.25 * 86_400.0)))
    }
}

/// The MTTF in words: "one underrun every 3.2 h (90 % CI 1.1 h–9 h)".
pub fn describe_mttf(forecast: &Forecast, event: &str) -> String {
    let confidence = (CONFIDENCE * 100.0).round();
    match (&forecast.basis, forecast.mttf_s) {
        (Basis::NoSlack, _) => {
            format!("one {event} every period: the compute time leaves no slack")
        }
        (Basis::BeyondData { samples }, _) => {
            let bound = forecast.mttf_ci_s[0]
                .map(|lower| {
                    format!(
                        "; at {confidence} % confidence the MTTF is above {}",
                        describe_seconds(lower)
                    )
                })
                .unwrap_or_default();
            format!(
                "no {event} expected within the horizon the data supports: none of {samples} wake-ups exceeded the slack, which lies beyond the data{bound}"
            )
        }
        (
            Basis::Response {
                compute_measured: false,
                ..
            },
            Some(mttf),
        ) => format!(
            "at most one {event} every {} (stalls during the compute were not measured: `rtlab run --compute`)",
            describe_seconds(mttf)
        ),
        (
            Basis::Response {
                compute_measured: false,
                ..
            },
            None,
        ) => format!(
            "no {event} from late wake-ups; stalls during the compute were not measured (`rtlab run --compute`)"
        ),
        (_, Some(mttf)) => {
            let interval = match forecast.mttf_ci_s {
                [Some(low), Some(high)] => format!(
                    " ({confidence} % CI {}–{})",
                    describe_seconds(low),
                    describe_seconds(high)
                ),
                [Some(low), None] => {
                    format!(" ({confidence} % CI above {})", describe_seconds(low))
                }
                _ => String::new(),
            };
            format!("one {event} every {}{interval}", describe_seconds(mttf))
        }
        (_, None) => format!("no estimate of the time between {event}s"),
    }
}

/// A class's verdict with its sentence, as printed and written to the JSON.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub text: String,
}

/// "suitable for pro audio, 128 frames × 2 at 48 kHz: one glitch every ~9 days expected …".
pub fn verdict(class: &ApplicationClass, forecast: &Forecast) -> Verdict {
    let kind = super::verdict::verdict_kind(class, forecast);
    let head = match kind {
        VerdictKind::Suitable => "suitable for",
        VerdictKind::NotSuitable => "NOT suitable for",
        VerdictKind::Undetermined => "cannot tell yet for",
    };
    let needed = describe_seconds(class.acceptable.mean_interval_s());
    let tail = match kind {
        VerdictKind::Undetermined => {
            format!("; it needs an MTTF of {needed}: measure longer, or under load, to decide")
        }
        _ => format!(" (acceptable: one per {needed})"),
    };
    // The response model counts stalls; how many glitches one costs is the application's.
    let counted = match &forecast.basis {
        Basis::Response { counting, .. } => format!("; counting {}", counting.describe("glitch")),
        _ => String::new(),
    };
    Verdict {
        kind,
        text: format!(
            "{head} {} ({}): {}{counted}{tail}",
            class.description,
            class.assumption(),
            describe_mttf(forecast, "glitch")
        ),
    }
}

impl Model {
    /// The model in words (see [`model_description`]).
    pub fn describe(self) -> &'static str {
        model_description(self)
    }
}

impl Forecast {
    /// The MTTF in words (see [`describe_mttf`]).
    pub fn describe_mttf(&self, event: &str) -> String {
        describe_mttf(self, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A forecast as `rtlab_analysis::forecast::forecast` makes one: only the fields the words
    /// read are set by each test.
    fn row(basis: Basis, mttf_s: Option<f64>, mttf_ci_s: [Option<f64>; 2]) -> Forecast {
        Forecast {
            buffers: 3,
            buffer_period_ns: 6_000_000,
            compute_ns: 1_500_000,
            slack_ns: 10_500_000,
            p_late: mttf_s.map(|mttf| 0.006 / mttf),
            p_late_ci: None,
            mttf_s,
            mttf_ci_s,
            basis,
            model: Model::PerPeriod,
            backlog_underruns_per_s: None,
        }
    }

    #[test]
    fn beyond_the_data_says_so() {
        // No late wake-up among 10^6 and the slack beyond the data: only a lower bound.
        let row = row(
            Basis::BeyondData { samples: 1_000_000 },
            None,
            [Some(2_605.8), None],
        );
        let text = describe_mttf(&row, "underrun");
        assert!(text.contains("beyond the data"), "{text}");
    }

    #[test]
    fn verdicts_are_plain() {
        let classes = crate::classes::builtin_classes();
        let modem = classes.iter().find(|class| class.name == "modem").unwrap();
        // Modem: 3 × 6 ms, c 1.5 ms → slack 10.5 ms → 10 of 10^6 late → MTTF 6 ms / 1e-5 = 600 s
        // < 1 h.
        let row = row(
            Basis::Observed {
                late: 10,
                samples: 1_000_000,
            },
            Some(600.0),
            [Some(353.7), Some(1_106.0)],
        );
        let verdict = verdict(modem, &row);
        assert_eq!(verdict.kind, VerdictKind::NotSuitable);
        assert!(
            verdict.text.starts_with("NOT suitable for soft modem"),
            "{}",
            verdict.text
        );
        assert!(
            verdict.text.contains("one glitch every 10 min"),
            "{}",
            verdict.text
        );
    }

    #[test]
    fn describes_times_readably() {
        assert_eq!(describe_seconds(0.85), "850 ms");
        assert_eq!(describe_seconds(12.0), "12 s");
        assert_eq!(describe_seconds(840.0), "14 min");
        assert_eq!(describe_seconds(3.2 * 3600.0), "3.2 h");
        assert_eq!(describe_seconds(9.0 * 86_400.0), "9 days");
    }
}
