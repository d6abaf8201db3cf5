//! The daemon's answers as text: a grant (`rtlab reserve`), what the reserved thread received
//! (`--verify`), the table of every reservation (`rtlab reservations`), and a thread found already
//! reserved (`reserve` and `reserve --auto`).

use rtlab_analysis::supply::VerifiedSupply;
use rtlab_core::already_reserved::{Held, Judgement};
use rtlab_core::enforce_repair::Repair;
use rtlab_core::rpc::{GrantInfo, ListResult, ReleaseResult, WireKernelHeld, WireRate};
use rtlab_core::Nanos;
use serde::Serialize;

/// `2ms every 10ms (20.0 % of a CPU)`.
pub fn describe_rate(rate: &WireRate) -> String {
    format!(
        "{} every {} ({:.1} % of a CPU)",
        Nanos(rate.amount_ns),
        Nanos(rate.period_ns),
        rate.fraction() * 100.0
    )
}

/// What the kernel (or the dispatcher) really holds for a reservation, in words: "6ms every 10ms
/// (60.0 % of a CPU): SCHED_DEADLINE read back with sched_getattr from thread 4242, deadline 10ms".
pub fn kernel_held(held: &WireKernelHeld) -> String {
    let rate = format!(
        "{} every {} ({:.1} % of a CPU)",
        Nanos(held.runtime_ns),
        Nanos(held.window_ns),
        held.share * 100.0
    );
    match held.read_from.as_str() {
        "not_deadline" => format!("nothing: {}", held_source(held)),
        _ if held.reclaim => format!(
            "{rate}, and more when no reservation uses it (SCHED_FLAG_RECLAIM): {}",
            held_source(held)
        ),
        _ => format!("{rate}: {}", held_source(held)),
    }
}

/// Where a `kernel_held` figure was read: "SCHED_DEADLINE read back with sched_getattr from
/// thread 4242, deadline 10ms", "the dispatcher's slots on CPU 3, at most 2 in a window".
fn held_source(held: &WireKernelHeld) -> String {
    let tid = held.tid.map_or("?".to_owned(), |tid| tid.to_string());
    match held.read_from.as_str() {
        "sched_getattr" => format!(
            "SCHED_DEADLINE read back with sched_getattr from thread {tid}, deadline {}",
            Nanos(held.deadline_ns.unwrap_or_default())
        ),
        "dispatcher" => format!(
            "the dispatcher's slots on CPU {}, at most {} in a window",
            held.cpu.map_or("?".to_owned(), |cpu| cpu.to_string()),
            held.slots_per_window.unwrap_or_default()
        ),
        "not_deadline" => format!(
            "sched_getattr finds thread {tid} at {}, not SCHED_DEADLINE",
            held.policy.as_deref().unwrap_or("another policy")
        ),
        other => format!("read from {other}"),
    }
}

/// "2.2ms of every 8ms (27.5 % of a CPU)".
fn of_every(amount_ns: u64, period_ns: u64) -> String {
    format!(
        "{} of every {} ({:.1} % of a CPU)",
        Nanos(amount_ns),
        Nanos(period_ns),
        amount_ns as f64 / period_ns.max(1) as f64 * 100.0
    )
}

/// What was asked and what is held, in one line: "asked 1.1ms of every 40ms (2.8 % of a CPU);
/// the kernel holds 2.2ms of every 8ms (27.5 % of a CPU)".
pub fn asked_and_held(grant: &GrantInfo) -> String {
    let asked = of_every(grant.requested.amount_ns, grant.requested.period_ns);
    let held = match &grant.kernel_held {
        Some(held) => match held.read_from.as_str() {
            "not_deadline" => format!(
                "the kernel holds nothing (thread {} is at {})",
                held.tid.map_or("?".to_owned(), |tid| tid.to_string()),
                held.policy.as_deref().unwrap_or("another policy")
            ),
            "dispatcher" => format!(
                "the dispatcher holds {}",
                of_every(held.runtime_ns, held.window_ns)
            ),
            _ => format!(
                "the kernel holds {}{}",
                of_every(held.runtime_ns, held.window_ns),
                if held.reclaim {
                    ", and more when no reservation uses it (SCHED_FLAG_RECLAIM)"
                } else {
                    ""
                }
            ),
        },
        None => "what is held was not read back".to_owned(),
    };
    format!("asked {asked}; {held}")
}

/// `reserve --auto`'s line for a thread it reserved: "reserved jackd (tid 4242) on deadline:
/// asked …; the kernel holds … (SCHED_DEADLINE read back …); not pinned".
pub fn auto_reserved(name: &str, tid: u32, grant: &GrantInfo) -> String {
    let pinned = match grant.cpu {
        Some(cpu) => format!("confined to CPU {cpu} (the backend needs it)"),
        None => "not pinned".to_owned(),
    };
    let read_back = match &grant.kernel_held {
        Some(held) if held.read_from != "not_deadline" => format!(" ({})", held_source(held)),
        _ => String::new(),
    };
    format!(
        "reserved {name} (tid {tid}) on {}, reservation #{}: {}{read_back}; {pinned}",
        grant.backend.as_str(),
        grant.grant_id,
        asked_and_held(grant)
    )
}

/// A thread found already reserved, in one line: the reservation holding it (what it holds, by
/// which reservation), and whether that meets `asked` (`judgement`, from
/// `rtlab_core::already_reserved::judge`). Met: "jackd (tid 4242) is already reserved: 2.2ms of
/// every 8ms (27.5 % of a CPU), by reservation #3; this asked 1.1ms of every 40ms (2.8 % of a
/// CPU): left as it is". Otherwise the refusal, saying what to do.
pub fn already_reserved(
    name: &str,
    tid: u32,
    grant: &GrantInfo,
    asked: &WireRate,
    judgement: Judgement,
) -> String {
    let asked_text = of_every(asked.amount_ns, asked.period_ns);
    let id = grant.grant_id;
    let holds = |held: Held| of_every(held.runtime_ns, held.window_ns);
    let release = format!("`rtlab release --tid {tid}`");
    match judgement {
        Judgement::Met(held) => format!(
            "{name} (tid {tid}) is already reserved: {}, by reservation #{id}; this asked {asked_text}: left as it is",
            holds(held)
        ),
        Judgement::AnotherUsers { owner_uid } => format!(
            "{name} (tid {tid}) is already reserved by another user (uid {owner_uid}), by reservation #{id}: a thread holds one reservation, and this one is its owner's to keep or release"
        ),
        Judgement::AnotherBudget => format!(
            "{name} (tid {tid}) is already reserved: {}, by reservation #{id}, asked as {}; a thread holds one reservation: to hold {asked_text} instead, {release} first",
            rtlab_core::already_reserved::held(grant).map_or("nothing held".to_owned(), holds),
            of_every(grant.requested.amount_ns, grant.requested.period_ns)
        ),
        Judgement::Short(Some(held)) => format!(
            "{name} (tid {tid}) is already reserved: {}, by reservation #{id}, which does not cover {asked_text} (a smaller share, or a budget shorter than one activation); {release} and ask again to change it",
            holds(held)
        ),
        Judgement::Short(None) => format!(
            "{name} (tid {tid}) is held by reservation #{id}, but the kernel holds nothing for it (the thread runs at another policy); {release} and ask again"
        ),
    }
}

/// [`already_reserved`] for thread `tid` named as the reservation holding it lists it ("thread
/// TID" when it does not).
pub fn already_reserved_thread(
    tid: u32,
    grant: &GrantInfo,
    asked: &WireRate,
    judgement: Judgement,
) -> String {
    let name = grant
        .threads
        .iter()
        .find(|thread| thread.tid == tid)
        .map_or_else(|| format!("thread {tid}"), |thread| thread.comm.clone());
    already_reserved(&name, tid, grant, asked, judgement)
}

/// What a resized reservation holds now: the kernel's word, else asked and held.
pub fn resized(grant: &GrantInfo) -> String {
    match &grant.kernel_held {
        Some(held) => kernel_held(held),
        None => asked_and_held(grant),
    }
}

/// "verifying: watching thread 4242 for 10s …"
pub fn verifying(tid: u32, duration: Nanos) -> String {
    format!("verifying: watching thread {tid} for {duration} …")
}

/// "6ms/10ms 60.0 %", a table cell.
fn rate_cell(amount_ns: u64, period_ns: u64) -> String {
    format!(
        "{}/{} {:.1} %",
        Nanos(amount_ns),
        Nanos(period_ns),
        amount_ns as f64 / period_ns.max(1) as f64 * 100.0
    )
}

/// The grant as the text `rtlab reserve` prints.
pub fn grant(grant: &GrantInfo) -> String {
    let threads = if grant.threads.is_empty() {
        "none (the activity lingers until it is taken back or let go)".to_owned()
    } else {
        grant
            .threads
            .iter()
            .map(|thread| format!("{} ({}, pid {})", thread.tid, thread.comm, thread.pid))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let cpu = match grant.cpu {
        Some(cpu) => format!("{cpu} (planner CPU {})", grant.planner_cpu),
        None => format!("any (global EDF; planner CPU {})", grant.planner_cpu),
    };
    let backend = match &grant.deadline_params {
        Some(params) => format!(
            "{}: runtime {}, deadline {}, period {}; kernel admission {}",
            grant.backend,
            Nanos(params.runtime_ns),
            Nanos(params.deadline_ns),
            Nanos(params.period_ns),
            grant.kernel_admission
        ),
        None => grant.backend.to_string(),
    };
    let release_hint = match grant.threads.as_slice() {
        [one] => format!("`rtlab release --tid {}`", one.tid),
        _ => "`rtlab release --all-mine`".to_owned(),
    };
    let held = match &grant.kernel_held {
        Some(held) => kernel_held(held),
        None => "not read back (the daemon said nothing of it)".to_owned(),
    };
    format!(
        "reservation {} granted to {}: {}\n  threads    {threads}\n  requested  {}\n  holds      {held}\n  planned    {}, the planner's grant\n  cpu        {cpu}\n  backend    {backend}\n  held until {release_hint} or the thread exits\n",
        grant.grant_id,
        grant.owner,
        asked_and_held(grant),
        describe_rate(&grant.requested),
        describe_rate(&grant.granted),
    )
}

/// The verification in words, under the grant.
pub fn verified(verified: &VerifiedSupply, amount: Nanos, period: Nanos) -> String {
    let supply = &verified.supply;
    let mut text = format!(
        "received: {:.2} % of {} sliding {period} windows held at least {amount}; least {} (p1 {}, mean {})\n",
        supply.share_meeting * 100.0,
        supply.windows,
        Nanos(supply.min_ns),
        Nanos(supply.p1_ns),
        Nanos(supply.mean_ns.round() as u64),
    );
    if supply.windows_meeting < supply.windows {
        text.push_str(
            "  a window short of the amount is the reservation failing only if the thread wanted the CPU then (a thread that sleeps or blocks takes less by its own choice); in a VM the hypervisor can take the difference (see steal in /proc/stat)\n",
        );
    }
    if verified.lost_events > 0 {
        text.push_str(&format!(
            "  the kernel dropped {} switch events: these figures may be off\n",
            verified.lost_events
        ));
    }
    text
}

/// One row of `reservations`: a thread under a reservation (or a lingering activity, without one).
#[derive(Debug, Serialize)]
pub struct ReservationRow {
    pub grant_id: u64,
    /// The uid that made the reservation.
    pub owner: u32,
    /// `tid:N` or the activity's name.
    pub reservation: String,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<String>,
    pub requested: WireRate,
    /// The planner's grant.
    pub granted: WireRate,
    /// What the kernel (or the dispatcher) really holds, read back by the daemon.
    pub kernel_held: Option<WireKernelHeld>,
    pub backend: String,
    pub cpu: Option<usize>,
    pub since: String,
    pub lingering_until: Option<String>,
}

/// One CPU's reserved share.
#[derive(Debug, Serialize)]
pub struct CpuShare {
    pub cpu: usize,
    pub reserved_fraction: f64,
}

/// The daemon's list as `rtlab reservations` shows it (and writes it under `--json`): a row per
/// thread and each CPU's reserved share.
#[derive(Debug, Serialize)]
pub struct ReservationTable {
    pub reservations: Vec<ReservationRow>,
    pub cpus: Vec<CpuShare>,
    /// Threads made real-time through org.freedesktop.RealtimeKit1 (`rtlab daemon --rtkit`): who
    /// asked, when, with which policy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub realtimekit: Vec<rtlab_core::rpc::RealtimeKitThread>,
}

/// The daemon's list as rows (one per thread) and CPU shares.
pub fn reservation_rows(list: &ListResult) -> ReservationTable {
    let mut rows = Vec::new();
    for grant in &list.grants {
        let row = |pid, tid, comm| ReservationRow {
            grant_id: grant.grant_id,
            owner: grant.owner_uid,
            reservation: grant.owner.clone(),
            pid,
            tid,
            comm,
            requested: grant.requested,
            granted: grant.granted,
            kernel_held: grant.kernel_held.clone(),
            backend: grant.backend.to_string(),
            cpu: grant.cpu,
            since: grant.since.clone(),
            lingering_until: grant.lingering_until.clone(),
        };
        if grant.threads.is_empty() {
            rows.push(row(None, None, None));
        }
        // Another user's thread, as the daemon shows it to an unprivileged caller: pid and tid 0,
        // no name (null in the JSON, "-" and "(hidden)" in the text).
        for thread in &grant.threads {
            rows.push(row(
                (thread.pid != 0).then_some(thread.pid),
                (thread.tid != 0).then_some(thread.tid),
                Some(thread.comm.clone()),
            ));
        }
    }
    let cpus = list
        .cpus
        .iter()
        .map(|share| CpuShare {
            cpu: share.cpu,
            reserved_fraction: share.reserved_fraction,
        })
        .collect();
    ReservationTable {
        reservations: rows,
        cpus,
        realtimekit: list.realtimekit.clone(),
    }
}

/// The daemon's list as `rtlab reservations --json` writes it: the output header (schema
/// [`RESERVATIONS_SCHEMA`](rtlab_core::rpc::RESERVATIONS_SCHEMA), made now) and the table of
/// [`reservation_rows`], pretty-printed with a final newline (the monitor's grants).
pub fn reservations_json(list: &ListResult) -> serde_json::Result<String> {
    let table = reservation_rows(list);
    let mut document = serde_json::to_value(rtlab_core::header::OutputHeader::now(
        rtlab_core::rpc::RESERVATIONS_SCHEMA,
        None,
    ))?;
    if let (Some(header), Ok(serde_json::Value::Object(body))) =
        (document.as_object_mut(), serde_json::to_value(&table))
    {
        header.extend(body);
    }
    Ok(serde_json::to_string_pretty(&document)? + "\n")
}

/// The reservations table and each CPU's reserved share.
pub fn reservations(table: &ReservationTable) -> String {
    let (rows, cpus) = (&table.reservations, &table.cpus);
    let mut text = String::new();
    if rows.is_empty() {
        text.push_str("no reservations\n");
    } else {
        text.push_str(&format!(
            "{:>5}  {:>6}  {:>7}  {:>7}  {:<15}  {:>21}  {:>21}  {:<8}  {:>3}  {}\n",
            "GRANT",
            "OWNER",
            "PID",
            "TID",
            "COMM",
            "REQUESTED",
            "KERNEL HOLDS",
            "BACKEND",
            "CPU",
            "SINCE"
        ));
        for row in rows {
            let optional = |value: Option<u32>| value.map_or("-".to_owned(), |v| v.to_string());
            let held = match &row.kernel_held {
                Some(held) if held.read_from == "not_deadline" => "nothing".to_owned(),
                Some(held) => rate_cell(held.runtime_ns, held.window_ns),
                None => "-".to_owned(),
            };
            let since = match &row.lingering_until {
                Some(until) => format!("{} (lingering until {until})", row.since),
                None => row.since.clone(),
            };
            text.push_str(&format!(
                "{:>5}  {:>6}  {:>7}  {:>7}  {:<15}  {:>21}  {:>21}  {:<8}  {:>3}  {since}\n",
                row.grant_id,
                row.owner,
                optional(row.pid),
                optional(row.tid),
                // An empty name is another user's, hidden by the daemon from an unprivileged
                // caller.
                match row.comm.as_deref().unwrap_or(&row.reservation) {
                    "" => "(hidden)",
                    name => name,
                },
                rate_cell(row.requested.amount_ns, row.requested.period_ns),
                held,
                row.backend,
                row.cpu.map_or("any".to_owned(), |cpu| cpu.to_string()),
            ));
        }
    }
    let shares: Vec<String> = cpus
        .iter()
        .map(|cpu| format!("CPU {} {:.1} %", cpu.cpu, cpu.reserved_fraction * 100.0))
        .collect();
    text.push_str(&format!("reserved: {}\n", shares.join(", ")));
    if !table.realtimekit.is_empty() {
        text.push_str(&realtimekit_threads(&table.realtimekit));
    }
    text
}

/// The threads programs made real-time through org.freedesktop.RealtimeKit1, one row each.
pub fn realtimekit_threads(threads: &[rtlab_core::rpc::RealtimeKitThread]) -> String {
    let mut text = format!(
        "\nreal-time through RealtimeKit1 (org.freedesktop.RealtimeKit1):\n{:>7}  {:>7}  {:<15}  {:>6}  {:>7}  {:<22}  {:<28}  {}\n",
        "PID", "TID", "COMM", "UID", "ASKED BY", "GIVEN", "METHOD", "SINCE"
    );
    for thread in threads {
        let given = match (
            thread.policy.as_str(),
            thread.priority,
            thread.nice,
            thread.grant_id,
        ) {
            (_, _, _, Some(grant)) if thread.policy == "reservation" => {
                format!("reservation {grant}")
            }
            (_, Some(priority), _, Some(grant)) => format!("RR {priority}, reserved {grant}"),
            (_, Some(priority), _, None) => format!("SCHED_RR {priority}"),
            (_, _, Some(nice), _) => format!("nice {nice}"),
            (policy, ..) => policy.to_owned(),
        };
        // Another user's thread, as the daemon shows it to an unprivileged caller: 0 and "".
        let shown = |id: u32| {
            if id == 0 {
                "-".to_owned()
            } else {
                id.to_string()
            }
        };
        text.push_str(&format!(
            "{:>7}  {:>7}  {:<15}  {:>6}  {:>7}  {:<22}  {:<28}  {}\n",
            shown(thread.pid),
            shown(thread.tid),
            if thread.comm.is_empty() {
                "(hidden)"
            } else {
                &thread.comm
            },
            thread.uid,
            shown(thread.caller_pid),
            given,
            thread.method,
            thread.since
        ));
    }
    text
}

/// What `rtlab release` gave back.
pub fn released(result: &ReleaseResult) -> String {
    if result.released.is_empty() && result.threads.is_empty() {
        return "nothing to release\n".to_owned();
    }
    let grants: Vec<String> = result.released.iter().map(u64::to_string).collect();
    let threads: Vec<String> = result.threads.iter().map(u32::to_string).collect();
    format!(
        "released reservation(s) {} (threads {})\n",
        if grants.is_empty() {
            "none".to_owned()
        } else {
            grants.join(", ")
        },
        threads.join(", ")
    )
}

/// What `rtlab daemon` says when it starts: what it repaired of a previous daemon (nothing when
/// there was nothing), then where it listens and with which limits.
pub fn daemon_started(
    repair: &Repair,
    socket: Option<&std::path::Path>,
    default_backend: &str,
    placement: &Result<Vec<usize>, String>,
    user_limit: f64,
    hysteresis: Nanos,
) -> String {
    let mut text = String::new();
    if !repair.cpusets_removed.is_empty() || !repair.cpuset_failures.is_empty() {
        text.push_str(&format!(
            "rtlab daemon: removed the cpuset partitions a previous daemon left: {:?}{}\n",
            repair.cpusets_removed,
            if repair.cpuset_failures.is_empty() {
                String::new()
            } else {
                format!(", could not undo: {}", repair.cpuset_failures.join("; "))
            }
        ));
    }
    if !repair.restored.is_empty() || !repair.failed.is_empty() {
        text.push_str(&format!(
            "rtlab daemon: a previous daemon stopped without reverting: restored threads {:?}{}\n",
            repair.restored,
            if repair.failed.is_empty() {
                String::new()
            } else {
                format!(", could not restore {:?}", repair.failed)
            }
        ));
    }
    let placement = match placement {
        Ok(_) => "deadline reservations placed alone on one CPU".to_owned(),
        Err(reason) => format!("deadline reservations under global EDF: {reason}"),
    };
    text.push_str(&format!(
        "rtlab daemon: listening on {} (default backend {default_backend}, {placement}, {:.0} % of a CPU per user, hysteresis {hysteresis})\n",
        match socket {
            Some(path) => path.display().to_string(),
            None => "the socket systemd passed".to_owned(),
        },
        user_limit * 100.0,
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtlab_core::rpc::{Backend, WireDeadlineParams, WireThread};

    #[test]
    fn the_daemon_says_what_it_repaired_and_where_it_listens() {
        let repair = Repair {
            restored: vec![4242],
            failed: vec![(4243, "no such process".into())],
            cpusets_removed: vec!["/sys/fs/cgroup/cpuset/rtlab-1".into()],
            ..Repair::default()
        };
        let socket = std::path::Path::new("/run/rtlab/rtlabd.sock");
        let started = daemon_started(
            &repair,
            Some(socket),
            "deadline",
            &Err("cgroup v2 only".to_owned()),
            0.5,
            Nanos::from_millis(500),
        );
        let quiet = daemon_started(
            &Repair::default(),
            None,
            "dispatch",
            &Ok(vec![1]),
            0.25,
            Nanos::from_secs(1),
        );
        insta::assert_snapshot!(started + &quiet);
    }

    #[test]
    fn a_release_says_what_it_gave_back() {
        let result = |released: Vec<u64>, threads: Vec<u32>| ReleaseResult { released, threads };
        insta::assert_snapshot!([
            released(&result(vec![3, 4], vec![4242, 4243])),
            released(&result(Vec::new(), vec![4242])),
            released(&result(Vec::new(), Vec::new())),
        ]
        .concat());
    }

    fn grant_of(grant_id: u64, threads: Vec<WireThread>, backend: Backend) -> GrantInfo {
        let rate = |amount_ns, period_ns| WireRate {
            amount_ns,
            period_ns,
        };
        let threads_first_tid = threads.first().map(|thread| thread.tid);
        GrantInfo {
            grant_id,
            owner_uid: 1000,
            owner: threads
                .first()
                .map_or("activity:pipewire".to_owned(), |thread| {
                    format!("tid:{}", thread.tid)
                }),
            threads,
            requested: rate(2_000_000, 10_000_000),
            granted: rate(2_000_000, 10_000_000),
            backend,
            cpu: Some(3),
            planner_cpu: 3,
            kernel_admission: "accepted".to_owned(),
            deadline_params: (backend == Backend::Deadline).then_some(WireDeadlineParams {
                runtime_ns: 2_000_000,
                deadline_ns: 10_000_000,
                period_ns: 10_000_000,
            }),
            since: "2026-11-23T21:00:00Z".to_owned(),
            lingering_until: None,
            kernel_held: Some(match backend {
                Backend::Deadline => WireKernelHeld {
                    read_from: "sched_getattr".to_owned(),
                    runtime_ns: 6_000_000,
                    window_ns: 10_000_000,
                    share: 0.6,
                    tid: threads_first_tid,
                    deadline_ns: Some(10_000_000),
                    cpu: None,
                    slots_per_window: None,
                    policy: None,
                    reclaim: false,
                },
                Backend::Dispatch => WireKernelHeld {
                    read_from: "dispatcher".to_owned(),
                    runtime_ns: 2_260_000,
                    window_ns: 10_000_000,
                    share: 0.226,
                    tid: None,
                    deadline_ns: None,
                    cpu: Some(3),
                    slots_per_window: Some(2),
                    policy: None,
                    reclaim: false,
                },
            }),
        }
    }

    fn thread(tid: u32, comm: &str) -> WireThread {
        WireThread {
            pid: 4242,
            tid,
            comm: comm.to_owned(),
        }
    }

    #[test]
    fn a_grant_says_what_was_reserved_and_how() {
        let deadline = grant_of(7, vec![thread(4242, "decoder")], Backend::Deadline);
        let dispatched = grant_of(8, vec![thread(4243, "mixer")], Backend::Dispatch);
        // A thread the kernel no longer runs under SCHED_DEADLINE (someone changed its policy).
        let mut demoted = grant_of(10, vec![thread(4245, "late")], Backend::Deadline);
        demoted.kernel_held = Some(WireKernelHeld {
            read_from: "not_deadline".to_owned(),
            runtime_ns: 0,
            window_ns: 0,
            share: 0.0,
            tid: Some(4245),
            deadline_ns: None,
            cpu: None,
            slots_per_window: None,
            policy: Some("SCHED_OTHER".to_owned()),
            reclaim: false,
        });
        insta::assert_snapshot!(grant(&deadline) + &grant(&dispatched) + &grant(&demoted));
    }

    #[test]
    fn reserve_auto_says_what_it_reserved_and_what_the_kernel_holds_in_one_line() {
        let deadline = grant_of(7, vec![thread(4242, "jackd")], Backend::Deadline);
        let dispatched = grant_of(8, vec![thread(4243, "jackstep")], Backend::Dispatch);
        insta::assert_snapshot!(
            auto_reserved("jackd", 4242, &deadline)
                + "\n"
                + &auto_reserved("jackstep", 4243, &dispatched)
        );
    }

    #[test]
    fn a_reclaiming_reservation_says_it_may_run_on_unreserved_bandwidth() {
        let mut reclaiming = grant_of(9, vec![thread(4244, "jackstep")], Backend::Deadline);
        if let Some(held) = reclaiming.kernel_held.as_mut() {
            held.reclaim = true;
        }
        let line = auto_reserved("jackstep", 4244, &reclaiming);
        assert!(
            line.contains(
                "the kernel holds 6ms of every 10ms (60.0 % of a CPU), and more when no \
                 reservation uses it (SCHED_FLAG_RECLAIM)"
            ),
            "{line}"
        );
        let held = kernel_held(reclaiming.kernel_held.as_ref().unwrap());
        assert!(
            held.contains("(SCHED_FLAG_RECLAIM): SCHED_DEADLINE read back"),
            "{held}"
        );
    }

    /// Every answer to a thread found already reserved (before issue 37 there was one: "denied:
    /// thread already holds a reservation", exit 1, even when the wish was met).
    #[test]
    fn a_thread_already_reserved_is_said_with_what_it_holds_and_by_which_reservation() {
        use rtlab_core::already_reserved::{judge, Wish};
        // Held: 6 ms of every 10 ms (the kernel's read-back), asked 2 ms / 10 ms by uid 1000.
        let reserved = grant_of(3, vec![thread(4242, "jackd")], Backend::Deadline);
        let sized = WireRate {
            amount_ns: 1_100_000,
            period_ns: 40_000_000,
        };
        let lines = [
            // --auto sized 1.1 ms of every 40 ms: covered.
            (
                sized,
                Wish::AtLeast {
                    amount_ns: sized.amount_ns,
                    window_ns: sized.period_ns,
                    per_activation_ns: 73_000,
                },
                1000,
            ),
            // --auto sized more than is held.
            (
                WireRate {
                    amount_ns: 30_000_000,
                    period_ns: 40_000_000,
                },
                Wish::AtLeast {
                    amount_ns: 30_000_000,
                    window_ns: 40_000_000,
                    per_activation_ns: 2_000_000,
                },
                1000,
            ),
            // The same explicit budget again.
            (
                reserved.requested,
                Wish::Exactly {
                    amount_ns: reserved.requested.amount_ns,
                    period_ns: reserved.requested.period_ns,
                },
                1000,
            ),
            // Another explicit budget.
            (
                sized,
                Wish::Exactly {
                    amount_ns: sized.amount_ns,
                    period_ns: sized.period_ns,
                },
                1000,
            ),
            // Another user.
            (
                sized,
                Wish::AtLeast {
                    amount_ns: sized.amount_ns,
                    window_ns: sized.period_ns,
                    per_activation_ns: 73_000,
                },
                1001,
            ),
        ]
        .map(|(asked, wish, uid)| {
            already_reserved(
                "jackd",
                4242,
                &reserved,
                &asked,
                judge(&reserved, uid, wish),
            )
        });
        let mut demoted = reserved.clone();
        demoted.kernel_held = Some(WireKernelHeld {
            read_from: "not_deadline".to_owned(),
            runtime_ns: 0,
            window_ns: 0,
            share: 0.0,
            tid: Some(4242),
            deadline_ns: None,
            cpu: None,
            slots_per_window: None,
            policy: Some("SCHED_OTHER".to_owned()),
            reclaim: false,
        });
        let nothing = already_reserved(
            "jackd",
            4242,
            &demoted,
            &sized,
            judge(
                &demoted,
                1000,
                Wish::AtLeast {
                    amount_ns: sized.amount_ns,
                    window_ns: sized.period_ns,
                    per_activation_ns: 73_000,
                },
            ),
        );
        assert!(
            lines[0].starts_with("jackd (tid 4242) is already reserved: 6ms of every 10ms (60.0 % of a CPU), by reservation #3;"),
            "{}",
            lines[0]
        );
        insta::assert_snapshot!(lines.join("\n") + "\n" + &nothing);
    }

    #[test]
    fn the_reservations_table_has_a_row_per_thread_and_the_cpu_shares() {
        let mut lingering = grant_of(9, Vec::new(), Backend::Dispatch);
        lingering.lingering_until = Some("2026-11-23T21:05:00Z".to_owned());
        // An activity without threads has nothing the daemon could read back.
        lingering.kernel_held = None;
        let list = ListResult {
            grants: vec![
                grant_of(
                    7,
                    vec![thread(4242, "decoder"), thread(4244, "decoder-io")],
                    Backend::Deadline,
                ),
                lingering,
            ],
            cpus: vec![rtlab_core::rpc::CpuShare {
                cpu: 3,
                reserved_fraction: 0.4,
            }],
            realtimekit: Vec::new(),
        };
        let table = reservation_rows(&list);
        assert_eq!(table.reservations.len(), 3);
        let empty = ListResult {
            grants: Vec::new(),
            cpus: Vec::new(),
            realtimekit: Vec::new(),
        };
        insta::assert_snapshot!(reservations(&table) + &reservations(&reservation_rows(&empty)));
    }

    #[test]
    fn realtimekit_threads_are_listed_with_who_asked_and_what_they_got() {
        let rtkit_thread =
            |tid, policy: &str, priority, grant_id| rtlab_core::rpc::RealtimeKitThread {
                pid: 500,
                tid,
                comm: "data-loop.0".to_owned(),
                uid: 1000,
                caller_pid: 500,
                method: "MakeThreadRealtimeWithPID".to_owned(),
                policy: policy.to_owned(),
                priority,
                nice: None,
                grant_id,
                since: "2026-11-27T03:00:00.000Z".to_owned(),
                sizing: None,
            };
        let list = ListResult {
            grants: Vec::new(),
            cpus: Vec::new(),
            realtimekit: vec![
                rtkit_thread(501, "SCHED_RR", Some(20), None),
                rtkit_thread(502, "reservation", None, Some(4)),
            ],
        };
        let table = reservation_rows(&list);
        let text = reservations(&table);
        assert!(text.contains("real-time through RealtimeKit1"), "{text}");
        assert!(text.contains("SCHED_RR 20"), "{text}");
        assert!(text.contains("reservation 4"), "{text}");
        let json = serde_json::to_value(&table).unwrap();
        assert_eq!(json["realtimekit"][0]["tid"], 501);
        assert_eq!(json["realtimekit"][1]["grant_id"], 4);
    }
}
