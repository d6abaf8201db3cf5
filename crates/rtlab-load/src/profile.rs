//! Named load profiles: the workload classes of paper 002 (section 3.1) as mixes of stressors.
//!
//! Paper 002 measured under office, workstation, 3D-game and web-browsing loads and turned the
//! measured hours into "expected worst case per hour / day / week of use" with a usage model per
//! class: office and workstation users work 6–8 h a day, 5 days a week; gamers play 2–3 h a day,
//! 4–6 days a week; heavy web users browse 3–4 h a day, 7 days a week. A profile is that pairing:
//! a documented stressor mix standing in for the class's system activity, and the class's usage
//! model, which the tail projection uses to size a "day" and a "week". rtlab cannot run Winstone,
//! so each mix reproduces the kind of kernel activity the paper attributes to the class (file
//! copies and saves for office, CPU/disk/network-bound work for workstations, graphics-driven
//! CPU, cache and timer load for games, network downloads and media for the web).

use crate::stress::{parse_stress_list, StressSpec};

/// A named workload class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// What the mix stands for, in one line.
    pub description: &'static str,
    /// The stressor mix, in `--load` syntax.
    pub mix: &'static str,
    /// Hours of use in a "day" of this class.
    pub hours_per_day: f64,
    /// "Days" in a week of this class.
    pub days_per_week: f64,
    /// Where the usage model comes from.
    pub usage_source: &'static str,
}

impl Profile {
    /// The stressors of the mix (always valid: checked by a unit test).
    pub fn stressors(&self) -> Vec<StressSpec> {
        parse_stress_list(self.mix).unwrap_or_default()
    }
}

/// Every profile, in the order `--help` lists them.
pub const PROFILES: [Profile; 6] = [
    Profile {
        name: "office",
        description: "office applications: light bursty CPU, file saves with fsync, page-fault churn, UI timers",
        mix: "cpu:20%,memory:1@20%,io:1@10%,timers:2@50%,fork:1@5%",
        hours_per_day: 8.0,
        days_per_week: 5.0,
        usage_source: "paper 002 §3.1.1/§4.3: a day is 6-8 h, a work week 5 days",
    },
    Profile {
        name: "workstation",
        description: "CAD, photo editing and compiling: heavy CPU, disk and memory bandwidth, cache pressure",
        mix: "cpu:60%,memory:1@50%,io:2@30%,cache:1@50%,fork:1@20%",
        hours_per_day: 6.0,
        days_per_week: 5.0,
        usage_source: "paper 002 §3.1.2: a 30 h work week of 5 days",
    },
    Profile {
        name: "gaming",
        description: "3D games: near-full CPU, cache and memory bandwidth, frame timers, some network",
        mix: "cpu:80%,cache:1,memory:1@50%,timers:4,net:1@10%",
        hours_per_day: 2.5,
        days_per_week: 5.0,
        usage_source: "paper 002 §3.1.3: 2-3 h a day, 4-6 days a week (12.5 h a week)",
    },
    Profile {
        name: "web",
        description: "web browsing with audio/video: network softirq load, moderate CPU, media timers, cache writes",
        mix: "net:2@50%,cpu:30%,memory:1@30%,io:1@10%,timers:2@50%",
        hours_per_day: 3.5,
        days_per_week: 7.0,
        usage_source: "paper 002 §3.1.3: 3-4 h a day, 7 days a week",
    },
    Profile {
        name: "build",
        description: "software builds: every CPU busy, process churn, object-file writes",
        mix: "cpu:100%,fork:2,io:1@50%,memory:1@50%",
        hours_per_day: 8.0,
        days_per_week: 5.0,
        usage_source: "rtlab: a developer's working day (paper 002 §3.1.2 counts compiling as workstation use)",
    },
    Profile {
        name: "none",
        description: "no load: the idle machine (a latency figure to compare the others against)",
        mix: "",
        hours_per_day: 24.0,
        days_per_week: 7.0,
        usage_source: "rtlab: an always-on machine, 24 h a day, 7 days a week",
    },
];

/// Finds a profile by name (case-insensitive).
pub fn find_profile(name: &str) -> Option<&'static Profile> {
    PROFILES
        .iter()
        .find(|profile| profile.name.eq_ignore_ascii_case(name.trim()))
}

/// The profile names, comma-separated, for error messages and help.
pub fn profile_names() -> String {
    PROFILES
        .iter()
        .map(|profile| profile.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stress::StressorKind;

    #[test]
    fn every_mix_parses_and_every_usage_model_is_sane() {
        for profile in PROFILES {
            let stressors = parse_stress_list(profile.mix);
            if profile.name == "none" {
                assert!(profile.stressors().is_empty());
            } else {
                let stressors =
                    stressors.unwrap_or_else(|error| panic!("{}: {error}", profile.name));
                assert!(!stressors.is_empty(), "{}", profile.name);
                assert_eq!(profile.stressors(), stressors);
            }
            assert!(profile.hours_per_day > 0.0 && profile.hours_per_day <= 24.0);
            assert!(profile.days_per_week >= 1.0 && profile.days_per_week <= 7.0);
        }
    }

    #[test]
    fn usage_models_follow_paper_002() {
        let office = find_profile("Office").unwrap();
        assert!((6.0..=8.0).contains(&office.hours_per_day));
        assert_eq!(office.days_per_week, 5.0);
        let gaming = find_profile("gaming").unwrap();
        assert_eq!(gaming.hours_per_day * gaming.days_per_week, 12.5);
        let web = find_profile("web").unwrap();
        assert_eq!(web.days_per_week, 7.0);
        assert!(web
            .stressors()
            .iter()
            .any(|spec| spec.kind == StressorKind::Net));
        assert!(find_profile("nope").is_none());
        assert!(profile_names().starts_with("office, workstation"));
    }
}
