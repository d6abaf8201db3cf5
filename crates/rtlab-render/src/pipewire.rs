//! PipeWire's count beside rtlab's, as `trace watch` prints it at the end of its summary:
//! "PipeWire counted 2,730 unfinished cycles of jackload; rtlab 2,690 (0.99 of PipeWire's),
//! 2,671 of them while qhog7 (SCHED_FIFO 95) held the CPU".

use rtlab_core::pipewire_count::{PipewireComparison, PipewireCycle};

/// The line (ending in a newline) saying that a watched PipeWire client is judged by
/// PipeWire's cycle, or that its cycle is inferred because PipeWire's marker could not be had.
pub fn cycle_note(cycle: &PipewireCycle) -> String {
    match cycle {
        PipewireCycle::Taken { marker } => format!(
            "rtlab: a PipeWire client: judged by PipeWire's cycle (--cycle-marker pipewire, \
             {marker}); --no-pipewire-marker to infer it\n"
        ),
        PipewireCycle::Unavailable { error } => {
            format!("rtlab: PipeWire's cycle marker: {error}; inferring the cycle\n")
        }
    }
}

/// `n` with a comma every three digits.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut text = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            text.push(',');
        }
        text.push(digit);
    }
    text
}

/// The lines (each ending in a newline) that compare PipeWire's count with rtlab's.
pub fn comparison(comparison: &PipewireComparison) -> String {
    match comparison {
        PipewireComparison::Unavailable { reason } => {
            crate::text::wrapped(
                "",
                &format!("PipeWire's own count: not available: {reason}"),
                2,
            ) + "\n"
        }
        PipewireComparison::Counted {
            profile,
            pipewire_unfinished,
            rtlab_misses,
            top_competitor,
            ratio,
        } => {
            let names: Vec<&str> = profile
                .counted()
                .iter()
                .map(|follower| follower.name.as_str())
                .collect();
            let of = if names.is_empty() {
                String::new()
            } else {
                format!(" of {}", names.join(", "))
            };
            let mut line = format!(
                "PipeWire counted {} unfinished cycle{}{of} in {} cycles; rtlab {}",
                grouped(*pipewire_unfinished),
                if *pipewire_unfinished == 1 { "" } else { "s" },
                grouped(profile.cycles),
                grouped(*rtlab_misses)
            );
            if let Some(ratio) = ratio {
                line.push_str(&format!(" ({ratio:.2} of PipeWire's)"));
            }
            if let Some(competitor) = top_competitor {
                line.push_str(&format!(
                    ", {} of them while {} held the CPU",
                    grouped(competitor.misses),
                    competitor.label
                ));
            }
            let mut text = crate::text::wrapped("", &line, 2);
            if !text.ends_with('\n') {
                text.push('\n');
            }
            if profile.followers.is_empty() {
                text.push_str(&crate::text::wrapped(
                    "  ",
                    "(no follower node in the PipeWire graph during the watch: nothing for \
                     PipeWire to count)",
                    2,
                ));
                text.push('\n');
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::pipewire_count::{CompetitorShare, PipewireFollower, PipewireProfile};

    #[test]
    fn the_cycle_note_says_whose_cycle_judges() {
        let taken = PipewireCycle::Taken {
            marker: "impl_node_process in /usr/lib/libpipewire-0.3.so".into(),
        };
        assert_eq!(
            super::cycle_note(&taken),
            "rtlab: a PipeWire client: judged by PipeWire's cycle (--cycle-marker pipewire, \
             impl_node_process in /usr/lib/libpipewire-0.3.so); --no-pipewire-marker to infer it\n"
        );
        let unavailable = PipewireCycle::Unavailable {
            error: "no libpipewire".into(),
        };
        assert_eq!(
            super::cycle_note(&unavailable),
            "rtlab: PipeWire's cycle marker: no libpipewire; inferring the cycle\n"
        );
    }

    fn profile(unfinished: u64) -> PipewireProfile {
        PipewireProfile {
            driver_id: Some(16),
            driver_name: Some("Dummy-Driver".into()),
            cycles: 7_500,
            followers: vec![PipewireFollower {
                node_id: 19,
                name: "jackload".into(),
                cycles: 7_500,
                unfinished,
                watched: true,
            }],
        }
    }

    #[test]
    fn both_counts_and_the_competitor_are_said() {
        let text = comparison(&PipewireComparison::counted(
            profile(2_730),
            2_690,
            Some(CompetitorShare {
                label: "qhog7 (SCHED_FIFO 95)".into(),
                misses: 2_671,
            }),
        ));
        insta::assert_snapshot!(text);
    }

    #[test]
    fn none_counted_and_unavailable() {
        let text = comparison(&PipewireComparison::counted(profile(0), 0, None))
            + &comparison(&PipewireComparison::counted(
                PipewireProfile::default(),
                0,
                None,
            ))
            + &comparison(&PipewireComparison::Unavailable {
                reason: "the PipeWire server has no profiler (load libpipewire-module-profiler \
                         in its context.modules)"
                    .into(),
            });
        insta::assert_snapshot!(text);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(2_730), "2,730");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
