//! The counting rules a late job and a gap are judged by, as JACK counts xruns (read from
//! jack2's engine and timed driver; docs/trace.md): shared by the whole-trace findings and the
//! bounded streaming summary, so that neither depends on the other.

use super::Activation;

/// Whether a job starting with `first` came after a gap with no activation, given the job
/// before it (`previous`: its start, whether it was late, its end). On time, the next job is due
/// one period after the previous one began: a gap is more than 1.9 periods. After a late job,
/// the next one comes with the first cycle after it ended (JACK, like most cycle-driven
/// programs, starts no cycle while the last is unfinished): a gap is more than 1.1 periods past
/// its end — what held the program's clock back, not the late job. Returns the periods without
/// activation and whether `first` itself started after its own deadline (an on-time job then a
/// gap of more than 2.1 periods: the program restarted its cycle, as JACK's timed driver does
/// after an xrun, and the activation that ends the gap had no time left).
pub(crate) fn missed_periods(
    previous: Option<(u64, bool, u64)>,
    first: &Activation,
    period: u64,
) -> Option<(u64, bool)> {
    let (previous_start, previous_late, previous_end) = previous?;
    if period == 0 {
        return None;
    }
    if previous_late {
        let after_end = first.start.saturating_sub(previous_end);
        if after_end * 10 <= period * 11 {
            return None;
        }
        return Some(((after_end / period).max(1), false));
    }
    let gap = first.start.saturating_sub(previous_start);
    if gap * 10 <= period * 19 {
        return None;
    }
    let periods = ((gap + period / 2) / period).saturating_sub(1).max(1);
    Some((periods, gap * 10 > period * 21))
}

/// Whether a late job's program restarted its cycle the moment the job ended: the next
/// activation (`first`) came within 5 % of a period of the late job's end (before it, by a
/// wake-up as it blocked; not a wake-up pending long before: a cycle that came on time). JACK's driver,
/// held back with the job, starts its late cycle (which switches to the next graph and
/// triggers the job's thread again) and at once the restarted one, which finds the thread
/// running that new cycle's work: a second xrun (`JackEngine::ProcessCurrent` →
/// `CheckXRun`). A late job whose end the next activation follows by a cycle counts once.
pub(crate) fn restarted_at_once(
    previous: Option<(u64, bool, u64)>,
    first: &Activation,
    period: u64,
) -> bool {
    previous.is_some_and(|(_, previous_late, previous_end)| {
        previous_late
            && first.end > first.start
            && first.start.abs_diff(previous_end) * 20 <= period
    })
}

/// Whether a late job, held back (before it first ran or mid-work), got its CPU only after its
/// waker had run another whole activation: the program's clock (JACK's driver thread) ran its
/// late cycle, and the cycle it restarts at once, while the job still waited, so that cycle
/// found the job's thread triggered but not running — JACK's second xrun ("not finished,
/// state = Triggered").
pub(crate) fn held_through_its_wakers_cycle(job: &[Activation]) -> bool {
    job.iter().any(|activation| activation.resumed_after_waker)
}
