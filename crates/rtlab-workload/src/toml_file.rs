//! The workload file (TOML). It is a user's file, so untrusted input: every error names the line
//! and the field (through `toml::Spanned`); fixtures in `test_data/workload/{ok,err}` and a
//! cargo-fuzz target (`fuzz/fuzz_targets/workload_toml.rs`).
//!
//! ```toml
//! name = "player"
//! duration = "10s"                 # default run length (the command line wins)
//!
//! [[thread]]
//! name = "decoder"
//! policy = "rr"                    # other (default), batch, idle, fifo, rr
//! priority = 9                     # RT priority, or nice for other/batch
//! # reserve = "1ms/16ms"           # instead of an RT policy; backend = "deadline" | "dispatch"
//! cpus = "1"                       # affinity (CPU list); default every CPU
//! woken_by = "timer"               # or: period = "100ms" [offset = "2ms"], or: when_free = "RING"
//! work = "300us"                   # CPU time per activation (per buffer when fill = true)
//! deadline = "100ms"               # default: the period (periodic threads), else none
//! produces = "decoded"             # ring or device it puts buffers into
//! consumes = "encoded"             # ring it takes one buffer from per buffer produced
//! fill = true                      # produce until the ring is full
//! wakes = ["ui"]                   # threads woken at the end of each activation
//! lock = "stream"                  # hold this lock for `critical` of CPU work per activation
//! critical = "200us"
//! [[thread.phase]]                 # from `after` on: new work, or active = false
//! after = "5s"
//! work = "1ms"
//!
//! [[ring]]                         # producer → consumer: n buffers of t
//! name = "decoded"
//! buffers = 30
//! period = "10ms"
//! prefill = 30                     # default: all full
//!
//! [[device]]                       # a ring drained by a device, one buffer every period
//! name = "sound-card"
//! buffers = 3
//! period = "10ms"
//! priority = 99                    # the device thread's SCHED_FIFO priority (default 99)
//!
//! [[lock]]
//! name = "stream"
//! kind = "plain"                   # or "pi" (priority inheritance)
//! ```

use crate::model::{
    parse_reservation, CriticalSection, DeviceSpec, LockKind, LockSpec, Phase, Reservation,
    RingSpec, ThreadSpec, Trigger, Workload,
};
use rtlab_core::{parse_duration, Nanos};
use rtlab_sys::sched::Policy;
use serde::Deserialize;
use toml::Spanned;

/// Why a workload file was refused; the text names the line and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    #[error("{0}")]
    Syntax(String),
    #[error("line {line}: {what}: field '{field}': {message}")]
    Field {
        line: usize,
        /// `thread 'mixer'`, `ring 'decoded'`, `workload`.
        what: String,
        field: &'static str,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    duration: Option<Spanned<String>>,
    #[serde(default)]
    thread: Vec<Spanned<RawThread>>,
    #[serde(default)]
    ring: Vec<Spanned<RawRing>>,
    #[serde(default)]
    device: Vec<Spanned<RawDevice>>,
    #[serde(default)]
    lock: Vec<Spanned<RawLock>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThread {
    name: Spanned<String>,
    #[serde(default)]
    policy: Option<Spanned<String>>,
    #[serde(default)]
    priority: Option<Spanned<i64>>,
    #[serde(default)]
    reserve: Option<Spanned<String>>,
    #[serde(default)]
    backend: Option<Spanned<String>>,
    #[serde(default)]
    cpus: Option<Spanned<String>>,
    #[serde(default)]
    period: Option<Spanned<String>>,
    #[serde(default)]
    offset: Option<Spanned<String>>,
    #[serde(default)]
    woken_by: Option<Spanned<String>>,
    #[serde(default)]
    when_free: Option<Spanned<String>>,
    work: Spanned<String>,
    #[serde(default)]
    deadline: Option<Spanned<String>>,
    #[serde(default)]
    produces: Option<Spanned<String>>,
    #[serde(default)]
    consumes: Option<Spanned<String>>,
    #[serde(default)]
    fill: bool,
    #[serde(default)]
    wakes: Vec<Spanned<String>>,
    #[serde(default)]
    lock: Option<Spanned<String>>,
    #[serde(default)]
    critical: Option<Spanned<String>>,
    #[serde(default)]
    phase: Vec<Spanned<RawPhase>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    after: Spanned<String>,
    #[serde(default)]
    work: Option<Spanned<String>>,
    #[serde(default)]
    active: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRing {
    name: Spanned<String>,
    buffers: Spanned<i64>,
    period: Spanned<String>,
    #[serde(default)]
    prefill: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Spanned<String>,
    buffers: Spanned<i64>,
    period: Spanned<String>,
    #[serde(default)]
    prefill: Option<Spanned<i64>>,
    #[serde(default)]
    priority: Option<Spanned<i64>>,
    #[serde(default)]
    cpus: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLock {
    name: Spanned<String>,
    #[serde(default)]
    kind: Option<Spanned<String>>,
}

/// The most buffers a ring may have (the device keeps one byte per period it plays, not per
/// buffer, so this only bounds the ring's own memory).
pub const MAX_BUFFERS: i64 = 1 << 16;

struct Context<'a> {
    text: &'a str,
}

impl Context<'_> {
    fn line<T>(&self, value: &Spanned<T>) -> usize {
        let offset = value.span().start.min(self.text.len());
        self.text[..offset].matches('\n').count() + 1
    }

    fn fail<T>(
        &self,
        at: &Spanned<T>,
        what: &str,
        field: &'static str,
        message: String,
    ) -> FileError {
        FileError::Field {
            line: self.line(at),
            what: what.to_owned(),
            field,
            message,
        }
    }

    fn duration(
        &self,
        value: &Spanned<String>,
        what: &str,
        field: &'static str,
        allow_zero: bool,
    ) -> Result<Nanos, FileError> {
        let parsed = parse_duration(value.get_ref())
            .map_err(|error| self.fail(value, what, field, error.to_string()))?;
        if parsed.0 == 0 && !allow_zero {
            return Err(self.fail(value, what, field, "must be longer than 0".to_owned()));
        }
        if parsed > Nanos::from_secs(24 * 3600) {
            return Err(self.fail(value, what, field, format!("{parsed} is longer than a day")));
        }
        Ok(parsed)
    }

    fn cpus(&self, value: &Spanned<String>, what: &str) -> Result<Vec<usize>, FileError> {
        let cpus = rtlab_sys::cpu::parse_cpu_list(value.get_ref())
            .map_err(|message| self.fail(value, what, "cpus", message))?;
        if cpus.is_empty() || cpus.iter().any(|&cpu| cpu >= 4096) {
            return Err(self.fail(value, what, "cpus", "no CPU, or a CPU number ≥ 4096".into()));
        }
        Ok(cpus)
    }
}

fn policy_of(name: &str, priority: Option<i64>) -> Result<Policy, String> {
    let value = priority.unwrap_or(0);
    match name {
        "other" | "batch" => {
            if !(-20..=19).contains(&value) {
                return Err(format!("nice value {value} is outside -20..19"));
            }
            let nice = value as i32;
            Ok(if name == "other" {
                Policy::Other { nice }
            } else {
                Policy::Batch { nice }
            })
        }
        "idle" => Ok(Policy::Idle),
        "fifo" | "rr" => {
            let Some(priority) = priority else {
                return Err(format!("policy '{name}' needs a priority (1..99)"));
            };
            if !(1..=99).contains(&priority) {
                return Err(format!("RT priority {priority} is outside 1..99"));
            }
            let priority = priority as u32;
            Ok(if name == "fifo" {
                Policy::Fifo { priority }
            } else {
                Policy::RoundRobin { priority }
            })
        }
        other => Err(format!(
            "unknown policy '{other}' (expected other, batch, idle, fifo or rr)"
        )),
    }
}

fn count(
    context: &Context<'_>,
    value: &Spanned<i64>,
    what: &str,
    field: &'static str,
    least: i64,
) -> Result<u32, FileError> {
    let number = *value.get_ref();
    if !(least..=MAX_BUFFERS).contains(&number) {
        return Err(context.fail(
            value,
            what,
            field,
            format!("{number} is outside {least}..{MAX_BUFFERS}"),
        ));
    }
    Ok(number as u32)
}

/// A ring's (or device's) `buffers`, and its `prefill`: all of them when not given, never more.
fn buffers_and_prefill(
    context: &Context<'_>,
    buffers: &Spanned<i64>,
    prefill: Option<&Spanned<i64>>,
    what: &str,
) -> Result<(u32, u32), FileError> {
    let buffers = count(context, buffers, what, "buffers", 1)?;
    let Some(at) = prefill else {
        return Ok((buffers, buffers));
    };
    let prefill = count(context, at, what, "prefill", 0)?;
    if prefill > buffers {
        return Err(context.fail(
            at,
            what,
            "prefill",
            format!("{prefill} is more than the {buffers} buffers"),
        ));
    }
    Ok((buffers, prefill))
}

/// Parses a workload file; every error names the line and the field.
pub fn parse_workload_toml(text: &str, default_name: &str) -> Result<Workload, FileError> {
    let file: RawFile = toml::from_str(text).map_err(|error| {
        let message = error.message().trim().to_owned();
        match error.span() {
            Some(span) => FileError::Syntax(format!(
                "line {}: {message}",
                text[..span.start.min(text.len())].matches('\n').count() + 1
            )),
            None => FileError::Syntax(message),
        }
    })?;
    let context = Context { text };
    let duration = match &file.duration {
        Some(value) => Some(context.duration(value, "workload", "duration", false)?),
        None => None,
    };
    let rings = parse_rings_and_devices(&context, &file)?;
    let locks = parse_locks(&context, &file.lock)?;
    if file.thread.is_empty() {
        return Err(FileError::Field {
            line: 1,
            what: "workload".into(),
            field: "thread",
            message: "the workload has no [[thread]]".into(),
        });
    }
    let names: Vec<&str> = file
        .thread
        .iter()
        .map(|raw| raw.get_ref().name.get_ref().as_str())
        .collect();
    let threads_context = ThreadContext {
        context: &context,
        rings: &rings,
        locks: &locks,
        names: &names,
    };
    let mut threads = Vec::new();
    for (index, spanned) in file.thread.iter().enumerate() {
        threads.push(threads_context.thread(index, spanned.get_ref())?);
    }
    let workload = Workload {
        name: file.name.unwrap_or_else(|| default_name.to_owned()),
        duration,
        threads,
        rings,
        locks,
    };
    workload.check().map_err(|error| {
        let line = file
            .thread
            .iter()
            .find(|raw| raw.get_ref().name.get_ref() == &error.thread)
            .map_or(1, |raw| context.line(&raw.get_ref().name));
        FileError::Field {
            line,
            what: if error.thread.is_empty() {
                "workload".to_owned()
            } else {
                format!("thread '{}'", error.thread)
            },
            field: error.field,
            message: error.message,
        }
    })?;
    Ok(workload)
}

/// A ring or device name and the line it was given on.
struct NameOnLine {
    name: String,
    line: usize,
}

/// Parses the `[[ring]]`s, then the `[[device]]`s, into one list of rings whose names differ.
fn parse_rings_and_devices(
    context: &Context<'_>,
    file: &RawFile,
) -> Result<Vec<RingSpec>, FileError> {
    let mut rings: Vec<RingSpec> = Vec::new();
    let mut ring_lines: Vec<NameOnLine> = Vec::new();
    let mut add_ring = |name: &Spanned<String>, ring: RingSpec| -> Result<(), FileError> {
        let what = format!("ring '{}'", name.get_ref());
        if name.get_ref().trim().is_empty() {
            return Err(context.fail(name, &what, "name", "must not be empty".into()));
        }
        if let Some(NameOnLine { line, .. }) = ring_lines
            .iter()
            .find(|other| &other.name == name.get_ref())
        {
            return Err(context.fail(
                name,
                &what,
                "name",
                format!("a ring or device of this name is already on line {line}"),
            ));
        }
        ring_lines.push(NameOnLine {
            name: name.get_ref().clone(),
            line: context.line(name),
        });
        rings.push(ring);
        Ok(())
    };
    for raw in &file.ring {
        let raw = raw.get_ref();
        let what = format!("ring '{}'", raw.name.get_ref());
        let (buffers, prefill) =
            buffers_and_prefill(context, &raw.buffers, raw.prefill.as_ref(), &what)?;
        let ring = RingSpec {
            name: raw.name.get_ref().clone(),
            buffers,
            period: context.duration(&raw.period, &what, "period", false)?,
            prefill,
            device: None,
        };
        add_ring(&raw.name, ring)?;
    }
    for raw in &file.device {
        let ring = parse_device(context, raw.get_ref())?;
        add_ring(&raw.get_ref().name, ring)?;
    }
    Ok(rings)
}

/// Parses one `[[device]]`: a ring with the device thread's priority and CPUs.
fn parse_device(context: &Context<'_>, raw: &RawDevice) -> Result<RingSpec, FileError> {
    let what = format!("device '{}'", raw.name.get_ref());
    let (buffers, prefill) =
        buffers_and_prefill(context, &raw.buffers, raw.prefill.as_ref(), &what)?;
    let priority = match &raw.priority {
        Some(value) => {
            let number = *value.get_ref();
            if !(1..=99).contains(&number) {
                return Err(context.fail(
                    value,
                    &what,
                    "priority",
                    format!("{number} is outside 1..99"),
                ));
            }
            number as u32
        }
        None => 99,
    };
    let cpus = match &raw.cpus {
        Some(value) => context.cpus(value, &what)?,
        None => Vec::new(),
    };
    Ok(RingSpec {
        name: raw.name.get_ref().clone(),
        buffers,
        period: context.duration(&raw.period, &what, "period", false)?,
        prefill,
        device: Some(DeviceSpec { priority, cpus }),
    })
}

/// Parses the `[[lock]]`s; a name may be given once.
fn parse_locks(
    context: &Context<'_>,
    raw_locks: &[Spanned<RawLock>],
) -> Result<Vec<LockSpec>, FileError> {
    let mut locks: Vec<LockSpec> = Vec::new();
    for raw in raw_locks {
        let raw = raw.get_ref();
        let what = format!("lock '{}'", raw.name.get_ref());
        if locks.iter().any(|lock| &lock.name == raw.name.get_ref()) {
            return Err(context.fail(&raw.name, &what, "name", "given twice".into()));
        }
        let kind = match raw
            .kind
            .as_ref()
            .map(|kind| (kind, kind.get_ref().as_str()))
        {
            None | Some((_, "plain")) => LockKind::Plain,
            Some((_, "pi")) => LockKind::PriorityInheritance,
            Some((at, other)) => {
                return Err(context.fail(
                    at,
                    &what,
                    "kind",
                    format!("unknown lock kind '{other}' (expected plain or pi)"),
                ))
            }
        };
        locks.push(LockSpec {
            name: raw.name.get_ref().clone(),
            kind,
        });
    }
    Ok(locks)
}

/// What a `[[thread]]` may refer to: the rings and devices, the locks and the threads' names.
struct ThreadContext<'a> {
    context: &'a Context<'a>,
    rings: &'a [RingSpec],
    locks: &'a [LockSpec],
    /// Every thread's name, in file order.
    names: &'a [&'a str],
}

impl ThreadContext<'_> {
    /// Parses the thread at `index`, checking its fields in the order they are listed.
    fn thread(&self, index: usize, raw: &RawThread) -> Result<ThreadSpec, FileError> {
        let context = self.context;
        let name = raw.name.get_ref();
        let what = format!("thread '{name}'");
        crate::model::check_name(name)
            .map_err(|message| context.fail(&raw.name, &what, "name", message))?;
        if self.names[..index].contains(&name.as_str()) {
            return Err(context.fail(
                &raw.name,
                &what,
                "name",
                "two threads have this name".into(),
            ));
        }
        let policy = self.policy(raw, &what)?;
        let reserve = self.reserve(raw, &what, policy)?;
        let cpus = match &raw.cpus {
            Some(value) => context.cpus(value, &what)?,
            None => Vec::new(),
        };
        let trigger = self.trigger(raw, &what)?;
        if let (Some(offset), false) = (&raw.offset, matches!(trigger, Trigger::Period { .. })) {
            return Err(context.fail(offset, &what, "offset", "an offset needs 'period'".into()));
        }
        let work = context.duration(&raw.work, &what, "work", true)?;
        let deadline = match &raw.deadline {
            Some(value) => Some(context.duration(value, &what, "deadline", false)?),
            None => None,
        };
        let produces = match &raw.produces {
            Some(value) => Some(self.ring_index(value, &what, "produces")?),
            None => None,
        };
        let consumes = match &raw.consumes {
            Some(value) => Some(self.consumed_ring(value, &what)?),
            None => None,
        };
        let wakes = raw
            .wakes
            .iter()
            .map(|value| self.thread_index(value, &what, "wakes"))
            .collect::<Result<Vec<_>, _>>()?;
        let critical_section = self.critical_section(raw, &what)?;
        let phases = self.phases(raw, &what)?;
        Ok(ThreadSpec {
            name: name.clone(),
            policy,
            reserve,
            cpus,
            trigger,
            work,
            deadline,
            consumes,
            produces,
            fill: raw.fill,
            wakes,
            critical_section,
            phases,
        })
    }

    /// The index of the ring or device `value` names.
    fn ring_index(
        &self,
        value: &Spanned<String>,
        what: &str,
        field: &'static str,
    ) -> Result<usize, FileError> {
        self.rings
            .iter()
            .position(|ring| &ring.name == value.get_ref())
            .ok_or_else(|| {
                self.context.fail(
                    value,
                    what,
                    field,
                    format!("no ring or device named '{}'", value.get_ref()),
                )
            })
    }

    /// The index of the thread `value` names.
    fn thread_index(
        &self,
        value: &Spanned<String>,
        what: &str,
        field: &'static str,
    ) -> Result<usize, FileError> {
        self.names
            .iter()
            .position(|name| name == value.get_ref())
            .ok_or_else(|| {
                self.context.fail(
                    value,
                    what,
                    field,
                    format!("no thread named '{}'", value.get_ref()),
                )
            })
    }

    /// The thread's policy from `policy` and `priority`; an error names the field at fault.
    fn policy(&self, raw: &RawThread, what: &str) -> Result<Policy, FileError> {
        let context = self.context;
        let policy_name = raw
            .policy
            .as_ref()
            .map_or("other", |policy| policy.get_ref().as_str());
        policy_of(
            policy_name,
            raw.priority.as_ref().map(|value| *value.get_ref()),
        )
        .map_err(|message| match (&raw.policy, &raw.priority) {
            (_, Some(priority)) if !message.contains("unknown policy") => {
                context.fail(priority, what, "priority", message)
            }
            (Some(policy), _) => context.fail(policy, what, "policy", message),
            (None, _) => context.fail(&raw.name, what, "policy", message),
        })
    }

    /// The thread's reservation (`reserve`, `backend`): never beside an RT policy, and no
    /// backend without one.
    fn reserve(
        &self,
        raw: &RawThread,
        what: &str,
        policy: Policy,
    ) -> Result<Option<Reservation>, FileError> {
        let context = self.context;
        let Some(value) = &raw.reserve else {
            if let Some(backend) = &raw.backend {
                return Err(context.fail(
                    backend,
                    what,
                    "backend",
                    "a backend needs 'reserve'".into(),
                ));
            }
            return Ok(None);
        };
        let (amount, period) = parse_reservation(value.get_ref())
            .map_err(|message| context.fail(value, what, "reserve", message))?;
        if policy.is_realtime() {
            return Err(context.fail(
                value,
                what,
                "reserve",
                "give a reservation or an RT policy, not both".into(),
            ));
        }
        let backend = match &raw.backend {
            Some(text) => Some(text.get_ref().parse().map_err(
                |error: rtlab_sched::enforce::UnknownBackend| {
                    context.fail(text, what, "backend", error.to_string())
                },
            )?),
            None => None,
        };
        Ok(Some(Reservation {
            amount,
            period,
            backend,
        }))
    }

    /// What wakes the thread: exactly one of `period` (with `offset`), `woken_by` and
    /// `when_free`.
    fn trigger(&self, raw: &RawThread, what: &str) -> Result<Trigger, FileError> {
        let context = self.context;
        Ok(match (&raw.period, &raw.woken_by, &raw.when_free) {
            (Some(period), None, None) => Trigger::Period {
                period: context.duration(period, what, "period", false)?,
                offset: match &raw.offset {
                    Some(offset) => context.duration(offset, what, "offset", true)?,
                    None => Nanos::ZERO,
                },
            },
            (None, Some(waker), None) => {
                Trigger::WokenBy(self.thread_index(waker, what, "woken_by")?)
            }
            (None, None, Some(ring)) => {
                Trigger::BufferFree(self.ring_index(ring, what, "when_free")?)
            }
            (None, None, None) => {
                return Err(context.fail(
                    &raw.name,
                    what,
                    "period",
                    "missing: give period, woken_by or when_free".into(),
                ))
            }
            _ => {
                return Err(context.fail(
                    &raw.name,
                    what,
                    "period",
                    "give only one of period, woken_by and when_free".into(),
                ))
            }
        })
    }

    /// The ring `consumes` names, which must not be a device's (the device consumes it).
    fn consumed_ring(&self, value: &Spanned<String>, what: &str) -> Result<usize, FileError> {
        let ring = self.ring_index(value, what, "consumes")?;
        if self.rings[ring].device.is_some() {
            return Err(self.context.fail(
                value,
                what,
                "consumes",
                format!("'{}' is a device: the device consumes it", value.get_ref()),
            ));
        }
        Ok(ring)
    }

    /// The thread's critical section: `lock` and `critical` together, or neither.
    fn critical_section(
        &self,
        raw: &RawThread,
        what: &str,
    ) -> Result<Option<CriticalSection>, FileError> {
        let context = self.context;
        Ok(match (&raw.lock, &raw.critical) {
            (Some(lock), Some(critical)) => Some(CriticalSection {
                lock: self
                    .locks
                    .iter()
                    .position(|spec| &spec.name == lock.get_ref())
                    .ok_or_else(|| {
                        context.fail(
                            lock,
                            what,
                            "lock",
                            format!("no lock named '{}'", lock.get_ref()),
                        )
                    })?,
                critical: context.duration(critical, what, "critical", false)?,
            }),
            (None, None) => None,
            (Some(lock), None) => {
                return Err(context.fail(
                    lock,
                    what,
                    "critical",
                    "a lock needs 'critical' (its CPU time per activation)".into(),
                ))
            }
            (None, Some(critical)) => {
                return Err(context.fail(critical, what, "lock", "'critical' needs 'lock'".into()))
            }
        })
    }

    /// The thread's `[[thread.phase]]`s, which must come in time order.
    fn phases(&self, raw: &RawThread, what: &str) -> Result<Vec<Phase>, FileError> {
        let context = self.context;
        let mut phases = Vec::new();
        for phase in &raw.phase {
            let phase = phase.get_ref();
            let after = context.duration(&phase.after, what, "phase.after", true)?;
            if phases
                .last()
                .is_some_and(|last: &Phase| last.after >= after)
            {
                return Err(context.fail(
                    &phase.after,
                    what,
                    "phase.after",
                    "phases must come in time order".into(),
                ));
            }
            phases.push(Phase {
                after,
                work: match &phase.work {
                    Some(value) => Some(context.duration(value, what, "phase.work", true)?),
                    None => None,
                },
                active: phase.active.unwrap_or(true),
            });
        }
        Ok(phases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "pair"
[[thread]]
name = "producer"
period = "10ms"
work = "1ms"
produces = "out"

[[device]]
name = "out"
buffers = 3
period = "10ms"
"#;

    #[test]
    fn a_producer_and_a_device_parse() {
        let workload = parse_workload_toml(GOOD, "x").unwrap();
        assert_eq!(workload.name, "pair");
        assert_eq!(workload.threads[0].produces, Some(0));
        assert_eq!(workload.rings[0].prefill, 3);
        assert!(workload.rings[0].device.is_some());
        assert_eq!(
            workload.threads[0].effective_deadline(),
            Some(Nanos::from_millis(10))
        );
    }

    #[test]
    fn errors_name_line_and_field() {
        let cases = [
            (
                GOOD.replace("work = \"1ms\"", "work = \"1\""),
                "line 6",
                "'work'",
            ),
            (
                GOOD.replace("period = \"10ms\"\nwork", "work"),
                "line 4",
                "'period'",
            ),
            (
                GOOD.replace("produces = \"out\"", "produces = \"nowhere\""),
                "line 7",
                "'produces'",
            ),
            (
                GOOD.replace("buffers = 3", "buffers = 0"),
                "line 11",
                "'buffers'",
            ),
            (
                GOOD.replace(
                    "name = \"producer\"",
                    "name = \"producer\"\npolicy = \"fifo\"\npriority = 100",
                ),
                "line 6",
                "'priority'",
            ),
            (
                GOOD.replace(
                    "name = \"producer\"",
                    "name = \"producer\"\npolicy = \"fifo\"\npriority = 5\nreserve = \"1ms/16ms\"",
                ),
                "line 7",
                "'reserve'",
            ),
            (
                GOOD.replace(
                    "name = \"producer\"",
                    "name = \"producer\"\nreserve = \"2ms/1ms\"",
                ),
                "line 5",
                "'reserve'",
            ),
        ];
        for (text, line, field) in cases {
            let error = parse_workload_toml(&text, "x").unwrap_err().to_string();
            assert!(
                error.contains(line) && error.contains(field),
                "{error}\n{text}"
            );
        }
        let error = parse_workload_toml("[[thread]]\nname = 3\n", "x")
            .unwrap_err()
            .to_string();
        assert!(error.contains("line 2"), "{error}");
    }
}
