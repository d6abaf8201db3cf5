//! Periodic interference from sightings of stalls: which stalls recur at a period, how long
//! each burst is, on which CPUs, and how steady the period is.
//!
//! Each group of sightings (one culprit's, or one CPU's when the culprit is unknown) is merged
//! into bursts (sightings whose spans overlap are one burst), and the times the bursts *ended*
//! are fitted: a late wake-up ends when the burst does, so the end is the precise part of a
//! sighting (its start lies somewhere within the probe's period before the intended wake-up).
//! The gaps between ends are multiples of one period `P` when the interferer is periodic (a
//! burst too short to cover a wake-up of the probe is missed, and an application trace sees
//! only the bursts that made a job late): `P` is the median of each gap divided by its multiple,
//! refined by a least-squares fit of every end against its burst number. Groups whose periods
//! agree (one spinner per CPU) are one interferer; their bursts are "at once" when their phases
//! agree.
//!
//! Honest about stability: the jitter is the robust spread (1.4826 × the median absolute
//! deviation) of the gaps against their multiples of `P`; a period is steady when that is at most
//! [`STEADY_JITTER`] of it. Stalls that are not periodic at all (gaps that are no small multiple
//! of any period) are not reported.

use serde::Serialize;

/// At least this many bursts before a period is claimed.
pub const MIN_BURSTS: usize = 8;
/// A period is steady when its jitter is at most this share of it.
pub const STEADY_JITTER: f64 = 0.02;
/// A gap fits the period when it is within this share of a multiple of it.
const GAP_FIT: f64 = 0.10;
/// A gap of more than this many periods is not used to find the period.
const LARGEST_MULTIPLE: u64 = 4;
/// At least this share of the gaps fit the period for it to be called periodic.
const PERIODIC_SHARE: f64 = 0.5;

/// Who held the CPU during a stall.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct CulpritName {
    /// The thread's name (`qhog7`).
    pub name: String,
    /// Its policy and priority as recorded (`SCHED_FIFO 95`), when known.
    pub policy: Option<String>,
}

/// One time a stall was seen.
#[derive(Clone, Debug, PartialEq)]
pub struct Sighting {
    /// When the stall ended, ns (the run's or the trace's clock): a late wake-up's actual time,
    /// or the end of the culprit's segment on a late job's critical path.
    pub end_ns: u64,
    /// How long it was seen to last: a wake-up's latency, or the culprit's time on the path.
    pub length_ns: u64,
    pub cpu: Option<u32>,
    pub culprit: Option<CulpritName>,
}

/// How a burst's length is estimated from the lengths its sightings saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BurstRule {
    /// Sightings are a periodic probe's late wake-ups (period `T`): a burst `B ≥ T` covers a
    /// wake-up at a uniform point of its first period, so a sample is `B − T/2` on average and
    /// `B` is the median sample plus `T/2`; a burst shorter than `T` is seen only when it covers
    /// a wake-up, and then up to `B`: the largest sample.
    ProbeSamples { period_ns: u64 },
    /// Sightings are the part of each burst that overlapped a late job: the largest.
    Overlaps,
}

/// One member of an interferer: one culprit, or one CPU's unnamed stalls.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    pub culprit: Option<CulpritName>,
    pub cpus: Vec<u32>,
    /// Where its bursts end within the period: the fitted end of burst 0, modulo the period.
    pub phase_ns: u64,
    pub bursts_seen: u64,
}

/// A task (or several, one per CPU) that stalls the CPUs for a burst every period.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeriodicInterferer {
    pub members: Vec<Member>,
    pub period_ns: u64,
    pub burst_ns: u64,
    /// The longest the burst can be by what was seen: `burst_ns`, unless every burst met the
    /// probe's wake-ups at one point of its period (an interferer whose period is a whole
    /// multiple of the probe's): then each sample is `B − u` with the same `u`, and the samples
    /// say only that `B` lies within one probe period above the largest of them.
    pub burst_max_ns: u64,
    /// Every CPU a member was seen on.
    pub cpus: Vec<u32>,
    /// Every member's bursts come at the same time (phases within half a burst, or 0.5 ms).
    pub at_once: bool,
    pub bursts_seen: u64,
    /// Robust spread of a gap against its multiple of the period, ns.
    pub jitter_ns: u64,
    /// `jitter_ns ≤ STEADY_JITTER · period_ns`.
    pub steady: bool,
    /// When the bursts ended (every member's, sorted), ns: which sightings were its.
    #[serde(skip)]
    pub burst_ends_ns: Vec<u64>,
}

/// One group's culprit (none: one CPU's unnamed stalls) with its fit.
type GroupFit = (Option<CulpritName>, Fit);

/// Sightings grouped: a named culprit's wherever it ran, or one CPU's unnamed ones.
struct SightingGroup<'a> {
    culprit: Option<CulpritName>,
    /// The CPU of unnamed sightings (none for a named culprit).
    cpu: Option<u32>,
    members: Vec<&'a Sighting>,
}

/// One group's fit.
struct Fit {
    period_ns: f64,
    phase_ns: f64,
    jitter_ns: f64,
    ends: Vec<u64>,
    lengths: Vec<u64>,
    cpus: Vec<u32>,
}

/// One burst: overlapping sightings merged.
struct Burst {
    end_ns: u64,
    /// The longest of its sightings.
    length_ns: u64,
}

/// Merges a group's sightings into bursts, sorted by end, with the CPUs seen.
fn bursts_of(sightings: &[&Sighting]) -> (Vec<Burst>, Vec<u32>) {
    let mut spans: Vec<(u64, u64)> = sightings
        .iter()
        .map(|sighting| (sighting.end_ns, sighting.length_ns))
        .collect();
    spans.sort_unstable();
    let mut bursts: Vec<Burst> = Vec::new();
    for (end, length) in spans {
        match bursts.last_mut() {
            // Overlapping spans (`[end − length, end]`) are one burst.
            Some(last) if end.saturating_sub(length) <= last.end_ns => {
                last.end_ns = end.max(last.end_ns);
                last.length_ns = length.max(last.length_ns);
            }
            _ => bursts.push(Burst {
                end_ns: end,
                length_ns: length,
            }),
        }
    }
    let mut cpus: Vec<u32> = sightings
        .iter()
        .filter_map(|sighting| sighting.cpu)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    (bursts, cpus)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

/// The period of a group's burst ends, or `None` when they are too few or not periodic.
/// `every_burst_seen`: the sightings miss no burst (a probe's wake-ups, which a burst of at least
/// the probe's period always covers), so a period whose burst numbers skip all but one in `m` is
/// a fraction of the true one.
fn fit(bursts: &[Burst], cpus: Vec<u32>, every_burst_seen: bool) -> Option<Fit> {
    if bursts.len() < MIN_BURSTS {
        return None;
    }
    let ends: Vec<u64> = bursts.iter().map(|burst| burst.end_ns).collect();
    let gaps: Vec<f64> = ends
        .windows(2)
        .map(|pair| (pair[1] - pair[0]) as f64)
        .collect();
    let mut sorted = gaps.clone();
    sorted.sort_unstable_by(f64::total_cmp);
    // A low quantile of the gaps is one period when most bursts are seen; the median of each
    // gap over its multiple of it refines it.
    let first_guess = sorted[sorted.len() / 5];
    if first_guess <= 0.0 {
        return None;
    }
    let multiple_of = |gap: f64, period: f64| (gap / period).round().max(1.0);
    let mut per_gap: Vec<f64> = gaps
        .iter()
        .filter(|gap| multiple_of(**gap, first_guess) <= LARGEST_MULTIPLE as f64)
        .map(|gap| gap / multiple_of(*gap, first_guess))
        .collect();
    if per_gap.is_empty() {
        return None;
    }
    let period = median(&mut per_gap);
    let period = if every_burst_seen {
        whole_period(&ends, period)
    } else {
        period
    };
    let deviations: Vec<f64> = gaps
        .iter()
        .filter(|gap| multiple_of(**gap, period) <= LARGEST_MULTIPLE as f64)
        .map(|gap| gap - multiple_of(*gap, period) * period)
        .collect();
    let fitting = deviations
        .iter()
        .filter(|deviation| deviation.abs() <= GAP_FIT * period)
        .count();
    if (fitting as f64) < PERIODIC_SHARE * gaps.len() as f64 {
        return None;
    }
    let mut absolute: Vec<f64> = deviations.iter().map(|deviation| deviation.abs()).collect();
    let jitter = 1.4826 * median(&mut absolute);
    let PhaseFit {
        period,
        phase,
        inliers,
    } = if jitter <= STEADY_JITTER * period {
        phase_fit(&ends, period, jitter)
    } else {
        // Not steady: no phase holds over the run; the median phase says where bursts fall.
        let mut phases: Vec<f64> = ends
            .iter()
            .map(|end| (*end as f64).rem_euclid(period))
            .collect();
        PhaseFit {
            period,
            phase: median(&mut phases),
            inliers: (0..ends.len()).collect(),
        }
    };
    Some(Fit {
        period_ns: period,
        phase_ns: phase,
        jitter_ns: jitter,
        ends: inliers.iter().map(|index| ends[*index]).collect(),
        lengths: inliers
            .iter()
            .map(|index| bursts[*index].length_ns)
            .collect(),
        cpus,
    })
}

/// A steady period's precise value and phase: the ends that fall at one phase of `period`
/// (within five jitters, or 2 % of the period) against their burst numbers, least squares, twice
/// (the first pass's period moves the phase of late ends). Other stalls on the same CPU (a
/// hypervisor's) are left out.
fn phase_fit(ends: &[u64], period: f64, jitter: f64) -> PhaseFit {
    let tolerance = (5.0 * jitter).max(STEADY_JITTER * period);
    // The phase most ends share.
    let phases: Vec<f64> = ends
        .iter()
        .map(|end| (*end as f64).rem_euclid(period))
        .collect();
    let reference = phases
        .iter()
        .copied()
        .max_by_key(|candidate| {
            phases
                .iter()
                .filter(|phase| phase_distance(**phase, *candidate, period) <= tolerance)
                .count()
        })
        .unwrap_or(0.0);
    let (mut period, mut phase) = (period, reference);
    let mut inliers: Vec<usize> = (0..ends.len()).collect();
    for _ in 0..2 {
        let fitting: Vec<FittingEnd> = ends
            .iter()
            .enumerate()
            .filter_map(|(index, end)| {
                let number = ((*end as f64 - phase) / period).round();
                let residual = *end as f64 - phase - number * period;
                (residual.abs() <= tolerance).then_some(FittingEnd {
                    index,
                    number,
                    end: *end as f64,
                })
            })
            .collect();
        if fitting.len() < MIN_BURSTS {
            break;
        }
        let count = fitting.len() as f64;
        let mean_x = fitting.iter().map(|point| point.number).sum::<f64>() / count;
        let mean_y = fitting.iter().map(|point| point.end).sum::<f64>() / count;
        let sxx: f64 = fitting
            .iter()
            .map(|point| (point.number - mean_x).powi(2))
            .sum();
        let sxy: f64 = fitting
            .iter()
            .map(|point| (point.number - mean_x) * (point.end - mean_y))
            .sum();
        if sxx > 0.0 {
            let fitted = sxy / sxx;
            // A fit far from the gaps' period found the wrong burst numbers: keep the gaps'.
            if (fitted - period).abs() <= GAP_FIT * period {
                period = fitted;
            }
        }
        phase = (mean_y - period * mean_x).rem_euclid(period);
        inliers = fitting.iter().map(|point| point.index).collect();
    }
    PhaseFit {
        period,
        phase,
        inliers,
    }
}

/// A period and phase fitted to burst ends, with the ends that fit.
struct PhaseFit {
    period: f64,
    phase: f64,
    /// Indices of the ends that fall at the phase.
    inliers: Vec<usize>,
}

/// An end that falls at the phase: its index, its burst number (x) and its time (y).
struct FittingEnd {
    index: usize,
    number: f64,
    end: f64,
}

/// The true period when the fitted one is a whole fraction of it. Other stalls between the
/// bursts (a hypervisor's) shorten some gaps; when a fifth of them are shortened, the low
/// quantile that starts the fit is a fraction of the period, and every gap is a whole multiple
/// of that fraction too: 2.6 ms every 70 ms was taken for "every 23.3 ms" and "every 35.0 ms"
/// (BENCHMARKS.md, issue 35's validation). Only the bursts tell them apart: at a fraction, the
/// ends fall at one in `m` of its burst numbers. `m·P` replaces `P` when the ends at one phase of
/// it are nearly all (`WHOLE_SHARE`) of those at one phase of `P` — the largest such `m` up to
/// `LARGEST_MULTIPLE`, and only for a period at one phase of which at least half the ends fall
/// (a jittery one's share none). Only where every burst is seen: a trace sees only the bursts that made a
/// job late, which may be one in `m` because of how they meet the application's cycle.
fn whole_period(ends: &[u64], period: f64) -> f64 {
    const WHOLE_SHARE: f64 = 0.9;
    let at_period = phase_fit(ends, period, 0.0).inliers;
    // Only a period most ends keep the phase of: a jittery one's ends share no phase at any.
    if (at_period.len() as f64) < PERIODIC_SHARE * ends.len() as f64 {
        return period;
    }
    for multiple in (2..=LARGEST_MULTIPLE).rev() {
        let PhaseFit {
            period: whole,
            inliers: at_whole,
            ..
        } = phase_fit(ends, period * multiple as f64, 0.0);
        if at_whole.len() >= MIN_BURSTS
            && at_whole.len() as f64 >= WHOLE_SHARE * at_period.len() as f64
        {
            return whole;
        }
    }
    period
}

/// The burst's length from its sightings' lengths: `(burst, longest)`, `longest` the most it can
/// be (see [`PeriodicInterferer::burst_max_ns`]).
fn burst_of(lengths: &[u64], rule: BurstRule) -> (u64, u64) {
    let mut values: Vec<f64> = lengths.iter().map(|length| *length as f64).collect();
    let largest = lengths.iter().copied().max().unwrap_or(0);
    match rule {
        BurstRule::ProbeSamples { period_ns } => {
            let middle = median(&mut values);
            // `values` is sorted now. Seen at a uniform point of the probe's period, the
            // samples spread over half a period (or half the burst, when shorter) between
            // their quartiles; at one point they hardly spread: the burst is at least their
            // common value (the median: a stall of something else merged into one burst, or
            // the hypervisor's, makes the largest an outlier) and less than one probe period
            // more.
            let quartile = |share: f64| values[((values.len() - 1) as f64 * share) as usize];
            let spread = if values.is_empty() {
                f64::INFINITY
            } else {
                quartile(0.75) - quartile(0.25)
            };
            if spread < (period_ns.min(largest) as f64) / 8.0 {
                let common = middle as u64;
                (common, common + period_ns)
            } else if middle >= period_ns as f64 {
                let burst = (middle + period_ns as f64 / 2.0) as u64;
                (burst, burst)
            } else {
                (largest, largest)
            }
        }
        BurstRule::Overlaps => (largest, largest),
    }
}

/// Circular distance of two phases within `period`.
fn phase_distance(first: f64, second: f64, period: f64) -> f64 {
    let difference = (first - second).rem_euclid(period);
    difference.min(period - difference)
}

/// The periodic interferers among `sightings`, the most bursts first. Named sightings are
/// grouped by culprit, unnamed ones by CPU; groups whose periods agree within 1 % (and whose
/// culprits share a policy) are one interferer.
pub fn find_periodic(sightings: &[Sighting], rule: BurstRule) -> Vec<PeriodicInterferer> {
    let mut groups: Vec<SightingGroup<'_>> = Vec::new();
    for sighting in sightings {
        // A named culprit is one group wherever it ran; unnamed stalls are one group per CPU.
        let key_cpu = if sighting.culprit.is_some() {
            None
        } else {
            sighting.cpu
        };
        match groups
            .iter_mut()
            .find(|group| group.culprit == sighting.culprit && group.cpu == key_cpu)
        {
            Some(group) => group.members.push(sighting),
            None => groups.push(SightingGroup {
                culprit: sighting.culprit.clone(),
                cpu: key_cpu,
                members: vec![sighting],
            }),
        }
    }
    let mut fits: Vec<GroupFit> = groups
        .into_iter()
        .filter_map(|group| {
            let (bursts, cpus) = bursts_of(&group.members);
            let every_burst_seen = matches!(rule, BurstRule::ProbeSamples { .. });
            fit(&bursts, cpus, every_burst_seen).map(|fit| (group.culprit, fit))
        })
        .collect();
    fits.sort_by(|(first_culprit, first_fit), (second_culprit, second_fit)| {
        (first_culprit, first_fit.ends.first()).cmp(&(second_culprit, second_fit.ends.first()))
    });
    // Each interferer's members, with the period they were joined on.
    let mut interferers: Vec<(Vec<GroupFit>, f64)> = Vec::new();
    for (culprit, fit) in fits {
        let policy = culprit.as_ref().and_then(|culprit| culprit.policy.clone());
        let joined = interferers.iter_mut().find(|(members, period)| {
            let same_policy = members
                .first()
                .is_some_and(|(other, _)| other.as_ref().and_then(|o| o.policy.clone()) == policy);
            same_policy && ((fit.period_ns - *period).abs() <= 0.01 * *period)
        });
        match joined {
            Some((members, _)) => members.push((culprit, fit)),
            None => {
                let period = fit.period_ns;
                interferers.push((vec![(culprit, fit)], period));
            }
        }
    }
    let mut found: Vec<PeriodicInterferer> = interferers
        .into_iter()
        .map(|(members, _)| combine(members, rule))
        .collect();
    found.sort_by_key(|interferer| std::cmp::Reverse(interferer.bursts_seen));
    found
}

fn combine(members: Vec<GroupFit>, rule: BurstRule) -> PeriodicInterferer {
    // The period of the member seen most often (the most ends behind its fit).
    let period = members
        .iter()
        .max_by_key(|(_, fit)| fit.ends.len())
        .map(|(_, fit)| fit.period_ns)
        .unwrap_or(1.0);
    let lengths: Vec<u64> = members
        .iter()
        .flat_map(|(_, fit)| fit.lengths.iter().copied())
        .collect();
    let (burst_ns, burst_max_ns) = burst_of(&lengths, rule);
    let tolerance = (burst_ns as f64 / 2.0).max(500_000.0);
    let first_phase = members.first().map(|(_, fit)| fit.phase_ns).unwrap_or(0.0);
    let at_once = members
        .iter()
        .all(|(_, fit)| phase_distance(fit.phase_ns, first_phase, period) <= tolerance);
    let mut cpus: Vec<u32> = members
        .iter()
        .flat_map(|(_, fit)| fit.cpus.iter().copied())
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    let bursts_seen = members.iter().map(|(_, fit)| fit.ends.len() as u64).sum();
    // The worst member's jitter: the period is as steady as its least steady part.
    let jitter = members
        .iter()
        .map(|(_, fit)| fit.jitter_ns)
        .fold(0.0, f64::max);
    let mut burst_ends_ns: Vec<u64> = members
        .iter()
        .flat_map(|(_, fit)| fit.ends.iter().copied())
        .collect();
    burst_ends_ns.sort_unstable();
    PeriodicInterferer {
        members: members
            .into_iter()
            .map(|(culprit, fit)| Member {
                culprit,
                phase_ns: fit.phase_ns as u64,
                bursts_seen: fit.ends.len() as u64,
                cpus: fit.cpus,
            })
            .collect(),
        period_ns: period.round() as u64,
        burst_ns,
        burst_max_ns,
        cpus,
        at_once,
        bursts_seen,
        jitter_ns: jitter.round() as u64,
        steady: jitter <= STEADY_JITTER * period,
        burst_ends_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers in [0, 1) (no RNG crate needed for fixed tests).
    fn uniform(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (*seed >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Bursts of `burst` every `period` from `phase` for `seconds`, each end moved by up to
    /// ±`jitter`.
    #[derive(Clone, Copy)]
    struct Pattern {
        period: u64,
        burst: u64,
        phase: u64,
        jitter: u64,
        seconds: u64,
    }

    /// A 1 ms probe's late wake-ups on `cpu` from the bursts of `pattern`; named when `name`.
    fn probe_sightings(
        pattern: Pattern,
        cpu: u32,
        name: Option<&str>,
        seed: &mut u64,
    ) -> Vec<Sighting> {
        let Pattern {
            period,
            burst,
            phase,
            jitter,
            seconds,
        } = pattern;
        let mut sightings = Vec::new();
        let mut start = phase;
        while start < seconds * 1_000_000_000 {
            let moved = start + (uniform(seed) * 2.0 * jitter as f64) as u64;
            let end = moved + burst;
            // The probe's wake-up falls at a uniform point of its 1 ms before the burst ends.
            let latency = burst.saturating_sub((uniform(seed) * 1_000_000.0) as u64);
            if latency > 0 {
                sightings.push(Sighting {
                    end_ns: end,
                    length_ns: latency,
                    cpu: Some(cpu),
                    culprit: name.map(|name| CulpritName {
                        name: name.to_owned(),
                        policy: Some("SCHED_FIFO 95".to_owned()),
                    }),
                });
            }
            start += period;
        }
        sightings
    }

    const PROBE: BurstRule = BurstRule::ProbeSamples {
        period_ns: 1_000_000,
    };

    #[test]
    fn a_burst_of_2_6_ms_every_70_ms_on_both_cpus_at_once_is_found() {
        let mut seed = 7;
        let pattern = Pattern {
            period: 70_000_000,
            burst: 2_600_000,
            phase: 3_000_000,
            jitter: 0,
            seconds: 30,
        };
        let mut sightings = probe_sightings(pattern, 0, None, &mut seed);
        sightings.extend(probe_sightings(pattern, 1, None, &mut seed));
        // Random stalls beside it (a hypervisor's), on both CPUs.
        for index in 0..40u64 {
            sightings.push(Sighting {
                end_ns: (uniform(&mut seed) * 30e9) as u64,
                length_ns: 400_000 + index * 10_000,
                cpu: Some((index % 2) as u32),
                culprit: None,
            });
        }
        let found = find_periodic(&sightings, PROBE);
        assert_eq!(found.len(), 1, "{found:?}");
        let interferer = &found[0];
        assert!(
            interferer.period_ns.abs_diff(70_000_000) < 50_000,
            "{}",
            interferer.period_ns
        );
        assert!(
            interferer.burst_ns.abs_diff(2_600_000) < 300_000,
            "{}",
            interferer.burst_ns
        );
        assert_eq!(interferer.cpus, vec![0, 1]);
        assert!(interferer.at_once && interferer.steady, "{interferer:?}");
        assert!(
            interferer.bursts_seen >= 2 * 420,
            "{}",
            interferer.bursts_seen
        );
    }

    #[test]
    fn named_spinners_one_per_cpu_at_different_phases_are_one_interferer_not_at_once() {
        let mut seed = 11;
        let on_cpu_0 = Pattern {
            period: 25_000_000,
            burst: 1_200_000,
            phase: 1_000_000,
            jitter: 0,
            seconds: 20,
        };
        let on_cpu_1 = Pattern {
            phase: 13_000_000,
            ..on_cpu_0
        };
        let mut sightings = probe_sightings(on_cpu_0, 0, Some("qhog0"), &mut seed);
        sightings.extend(probe_sightings(on_cpu_1, 1, Some("qhog1"), &mut seed));
        let found = find_periodic(&sightings, PROBE);
        assert_eq!(found.len(), 1, "{found:?}");
        let interferer = &found[0];
        assert_eq!(interferer.members.len(), 2);
        assert!(!interferer.at_once, "{interferer:?}");
        assert!(interferer.period_ns.abs_diff(25_000_000) < 50_000);
        // Shorter than two probe periods: a sighting only when the burst covers a wake-up,
        // and up to the burst: the largest sample.
        assert!(interferer.burst_ns <= 1_200_000 && interferer.burst_ns > 1_000_000);
    }

    #[test]
    fn other_stalls_between_the_bursts_do_not_make_the_period_a_fraction_of_itself() {
        // Issue 35's validation: 2.6 ms every 70 ms on CPU 1, a 1 ms probe whose wake-ups meet
        // every burst at one point of its period (70 ms is a whole number of them), and the
        // hypervisor's stalls of 0.3–0.9 ms between the bursts, about 3 a second: a fifth of the
        // gaps are shortened (and most are whole), and the fit took "every 23.3 ms" or "every
        // 35.0 ms".
        for seed in [3u64, 21, 40, 77] {
            let mut state = seed;
            let mut sightings = Vec::new();
            let mut start = 4_300_000u64;
            while start < 20_000_000_000 {
                sightings.push(Sighting {
                    end_ns: start + 2_600_000,
                    length_ns: 2_600_000 - 700_000 + (uniform(&mut state) * 20_000.0) as u64,
                    cpu: Some(1),
                    culprit: None,
                });
                start += 70_000_000;
            }
            let mut at = 0.0;
            loop {
                at += -(1.0 - uniform(&mut state)).ln() * 330e6;
                if at >= 20e9 {
                    break;
                }
                sightings.push(Sighting {
                    end_ns: at as u64,
                    length_ns: 300_000 + (uniform(&mut state) * 600_000.0) as u64,
                    cpu: Some(1),
                    culprit: None,
                });
            }
            let found = find_periodic(&sightings, PROBE);
            assert_eq!(found.len(), 1, "seed {seed}: {found:?}");
            assert!(
                found[0].period_ns.abs_diff(70_000_000) < 100_000,
                "seed {seed}: every {} ns",
                found[0].period_ns
            );
            assert!(found[0].steady, "seed {seed}: {:?}", found[0]);
        }
    }

    #[test]
    fn a_jittery_interferer_is_called_unsteady() {
        // 60–80 ms between bursts: periodic in the large, but its phase wanders.
        let mut seed = 3;
        let mut sightings = Vec::new();
        let mut start = 0u64;
        while start < 30_000_000_000 {
            sightings.push(Sighting {
                end_ns: start + 2_600_000,
                length_ns: 2_000_000,
                cpu: Some(0),
                culprit: None,
            });
            start += 60_000_000 + (uniform(&mut seed) * 20_000_000.0) as u64;
        }
        let found = find_periodic(&sightings, PROBE);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(!found[0].steady, "{:?}", found[0]);
        assert!(found[0].jitter_ns > 3_000_000, "{}", found[0].jitter_ns);
    }

    #[test]
    fn random_stalls_are_not_periodic() {
        // A Poisson process of stalls, one every 50 ms on average.
        let mut seed = 5;
        let mut sightings = Vec::new();
        let mut at = 0.0;
        while at < 30e9 {
            at += -(1.0 - uniform(&mut seed)).ln() * 50e6;
            sightings.push(Sighting {
                end_ns: at as u64,
                length_ns: 1_500_000,
                cpu: Some(0),
                culprit: None,
            });
        }
        assert_eq!(find_periodic(&sightings, PROBE), Vec::new());
    }

    #[test]
    fn too_few_bursts_claim_nothing() {
        let mut seed = 1;
        let sightings = probe_sightings(
            Pattern {
                period: 70_000_000,
                burst: 2_600_000,
                phase: 0,
                jitter: 0,
                seconds: 1,
            },
            0,
            None,
            &mut seed,
        );
        assert!(sightings.len() < MIN_BURSTS + 8);
        let few: Vec<Sighting> = sightings.into_iter().take(MIN_BURSTS - 1).collect();
        assert_eq!(find_periodic(&few, PROBE), Vec::new());
    }

    #[test]
    fn a_trace_that_sees_only_some_bursts_still_finds_the_period() {
        // Only the bursts that made a job late: every 1st to 4th of them, 50 ms apart.
        let mut seed = 9;
        let mut sightings = Vec::new();
        let mut burst = 0u64;
        while sightings.len() < 30 {
            burst += 1 + (uniform(&mut seed) * 4.0) as u64;
            sightings.push(Sighting {
                end_ns: burst * 50_000_000 + 20_000,
                length_ns: 1_800_000,
                cpu: Some(1),
                culprit: Some(CulpritName {
                    name: "qhog1".to_owned(),
                    policy: Some("SCHED_FIFO 95".to_owned()),
                }),
            });
        }
        let found = find_periodic(&sightings, BurstRule::Overlaps);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].period_ns.abs_diff(50_000_000) < 10_000,
            "{:?}",
            found[0]
        );
        assert!(found[0].steady);
        assert_eq!(found[0].burst_ns, 1_800_000);
    }
}
