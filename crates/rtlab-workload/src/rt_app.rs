//! rt-app's JSON task files, the common subset, so rt-app users bring their workloads as they are.
//!
//! Read: `global` (`duration` in s, `default_policy`, `pi_enabled`), and per task in `tasks`:
//! `policy` (SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE), `priority`, `cpus`, `instance`,
//! `loop` (ignored: a task runs for the whole duration), `dl-runtime`/`dl-period` (a
//! reservation), and its events in file order — `run`/`runtime` (µs of CPU), `timer`
//! (`{"ref", "period"}` µs: an absolute periodic release), `lock`/`unlock` around runs (one
//! critical section per task), `sleep` only as `"sleep": 0`. A task's events may sit in one
//! `phases` entry. Anything else is refused with its path (`tasks.t0.suspend`), never ignored:
//! a silently different workload would make a comparison with rt-app meaningless. It is a
//! user's file (untrusted): fixtures in `test_data/rt-app/{ok,err}`, fuzz target `rt_app`.

use crate::model::{CriticalSection, LockKind, LockSpec, ThreadSpec, Trigger, Workload};
use rtlab_core::Nanos;
use rtlab_sys::sched::Policy;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtAppError {
    #[error("{0}")]
    Json(String),
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

/// A JSON object with its keys in file order (rt-app's events are ordered by their keys); the
/// values stay raw so nested objects (a task, a phase) keep their order too.
#[derive(Debug, Default)]
struct Ordered(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        struct OrderedVisitor;
        impl<'de> Visitor<'de> for OrderedVisitor {
            type Value = Ordered;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((key, value));
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(OrderedVisitor)
    }
}

#[derive(Deserialize)]
struct RawFile {
    tasks: Ordered,
    #[serde(default)]
    global: Option<Ordered>,
    #[serde(default)]
    resources: Option<Box<RawValue>>,
}

/// Reads a tasks' ordered entries: `tasks.<name>` → (key, value) with nested phases opened.
fn task_entries(path: &str, task: &RawValue) -> Result<Vec<(String, Value)>, RtAppError> {
    let ordered: Ordered = serde_json::from_str(task.get())
        .map_err(|_| field(path, "a task must be a JSON object"))?;
    let value_of = |key: &str, raw: &RawValue| {
        serde_json::from_str::<Value>(raw.get())
            .map_err(|error| field(&format!("{path}.{key}"), &error.to_string()))
    };
    let mut entries = Vec::new();
    for (key, value) in ordered.0 {
        if key == "phases" {
            let phases: Ordered = serde_json::from_str(value.get())
                .map_err(|_| field(&format!("{path}.phases"), "must be an object of phases"))?;
            if phases.0.len() != 1 {
                return Err(field(
                    &format!("{path}.phases"),
                    "only a single phase is supported (rtlab's own format has phases over time)",
                ));
            }
            let (phase_name, phase) = &phases.0[0];
            let inner: Ordered = serde_json::from_str(phase.get())
                .map_err(|_| field(&format!("{path}.phases.{phase_name}"), "must be an object"))?;
            for (key, raw) in inner.0 {
                let value = value_of(&key, &raw)?;
                entries.push((key, value));
            }
        } else {
            let value = value_of(&key, &value)?;
            entries.push((key, value));
        }
    }
    Ok(entries)
}

fn field(path: &str, message: &str) -> RtAppError {
    RtAppError::Field {
        path: path.to_owned(),
        message: message.to_owned(),
    }
}

fn micros(path: &str, value: &Value) -> Result<Nanos, RtAppError> {
    let number = value.as_u64().ok_or_else(|| {
        field(
            path,
            &format!("{value} is not a whole number of microseconds"),
        )
    })?;
    if number > 86_400_000_000 {
        return Err(field(path, "longer than a day"));
    }
    Ok(Nanos::from_micros(number))
}

fn policy_of(path: &str, name: &str, priority: Option<i64>) -> Result<Policy, RtAppError> {
    match name {
        "SCHED_OTHER" => {
            let nice = priority.unwrap_or(0);
            if !(-20..=19).contains(&nice) {
                return Err(field(path, &format!("nice value {nice} is outside -20..19")));
            }
            Ok(Policy::Other { nice: nice as i32 })
        }
        "SCHED_FIFO" | "SCHED_RR" => {
            let priority = priority.unwrap_or(10);
            if !(1..=99).contains(&priority) {
                return Err(field(path, &format!("RT priority {priority} is outside 1..99")));
            }
            let priority = priority as u32;
            Ok(if name == "SCHED_FIFO" {
                Policy::Fifo { priority }
            } else {
                Policy::RoundRobin { priority }
            })
        }
        other => Err(field(
            path,
            &format!("policy '{other}' is not supported (SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE)"),
        )),
    }
}

/// The event an rt-app key names (rt-app allows suffixes: `run0`, `timer1`).
fn event_kind(key: &str) -> &str {
    let trimmed = key.trim_end_matches(|c: char| c.is_ascii_digit());
    trimmed
}

/// Parses an rt-app JSON file into a workload.
pub fn parse_rt_app(text: &str, default_name: &str) -> Result<Workload, RtAppError> {
    let file: RawFile =
        serde_json::from_str(text).map_err(|error| RtAppError::Json(error.to_string()))?;
    let _ = &file.resources;
    let global = parse_global(file.global.unwrap_or_default())?;
    let mut locks: Vec<LockSpec> = Vec::new();
    let mut threads = Vec::new();
    if file.tasks.0.is_empty() {
        return Err(field("tasks", "no tasks"));
    }
    for (task_name, task) in &file.tasks.0 {
        let path = format!("tasks.{task_name}");
        let mut events = TaskEvents::new(&global.default_policy);
        for (key, value) in task_entries(&path, task)? {
            events.read(&format!("{path}.{key}"), &key, &value)?;
        }
        if let Some(name) = &events.held {
            return Err(field(&path, &format!("ends holding lock '{name}'")));
        }
        let Some(period) = events.period else {
            return Err(field(
                &path,
                "no timer: only periodic tasks (run + timer) are supported",
            ));
        };
        let (policy, reserve) = policy_and_reserve(&path, &events)?;
        let critical_section = match events.critical {
            Some(section) => Some(critical_section(&path, section, &mut locks, global.pi)?),
            None => None,
        };
        for instance in 0..events.instances {
            let name = if events.instances == 1 {
                task_name.clone()
            } else {
                format!("{task_name}-{instance}")
            };
            if threads
                .iter()
                .any(|thread: &ThreadSpec| thread.name == name)
            {
                return Err(field(&path, &format!("two threads named '{name}'")));
            }
            threads.push(ThreadSpec {
                name,
                policy,
                reserve,
                cpus: events.cpus.clone(),
                trigger: Trigger::Period {
                    period,
                    offset: Nanos::ZERO,
                },
                work: events.work,
                deadline: None,
                consumes: None,
                produces: None,
                fill: false,
                wakes: Vec::new(),
                critical_section,
                phases: Vec::new(),
            });
        }
    }
    let workload = Workload {
        name: default_name.to_owned(),
        duration: global.duration,
        threads,
        rings: Vec::new(),
        locks,
    };
    workload
        .check()
        .map_err(|error| field(&format!("tasks.{}", error.thread), &error.message))?;
    Ok(workload)
}

/// What the `global` object sets for the task set.
struct Global {
    duration: Option<Nanos>,
    default_policy: String,
    /// `pi_enabled`: every lock inherits priority.
    pi: bool,
}

/// Reads `global`; settings of rt-app's own process are passed over, anything else refused.
fn parse_global(global: Ordered) -> Result<Global, RtAppError> {
    let mut duration = None;
    let mut default_policy = "SCHED_OTHER".to_owned();
    let mut pi = false;
    for (key, raw) in global.0 {
        let path = format!("global.{key}");
        let value: Value =
            serde_json::from_str(raw.get()).map_err(|error| field(&path, &error.to_string()))?;
        match key.as_str() {
            "duration" => {
                let seconds = value
                    .as_i64()
                    .ok_or_else(|| field(&path, "must be a whole number of seconds"))?;
                if seconds > 0 {
                    if seconds > 86_400 {
                        return Err(field(&path, "longer than a day"));
                    }
                    duration = Some(Nanos::from_secs(seconds as u64));
                }
            }
            "default_policy" => {
                default_policy = value
                    .as_str()
                    .ok_or_else(|| field(&path, "must be a string"))?
                    .to_owned()
            }
            "pi_enabled" => {
                pi = value
                    .as_bool()
                    .ok_or_else(|| field(&path, "must be true or false"))?
            }
            // Settings of rt-app's own process that do not change the task set.
            "calibration" | "logdir" | "log_basename" | "lock_pages" | "ftrace" | "gnuplot"
            | "io_device" | "mem_buffer_size" | "cumulative_slack" | "log_size" => {}
            other => return Err(field(&path, &format!("'{other}' is not supported"))),
        }
    }
    Ok(Global {
        duration,
        default_policy,
        pi,
    })
}

/// A task's one critical section: the lock it takes and the CPU time run while holding it.
struct Section {
    lock: String,
    runs: Nanos,
}

/// What one task's settings and events say, read in file order.
struct TaskEvents {
    policy_name: String,
    priority: Option<i64>,
    cpus: Vec<usize>,
    instances: u64,
    dl_runtime: Option<Nanos>,
    dl_period: Option<Nanos>,
    /// The timer's period.
    period: Option<Nanos>,
    /// CPU time run outside the critical section.
    work: Nanos,
    critical: Option<Section>,
    /// The lock held after the events read so far.
    held: Option<String>,
}

impl TaskEvents {
    fn new(default_policy: &str) -> TaskEvents {
        TaskEvents {
            policy_name: default_policy.to_owned(),
            priority: None,
            cpus: Vec::new(),
            instances: 1,
            dl_runtime: None,
            dl_period: None,
            period: None,
            work: Nanos::ZERO,
            critical: None,
            held: None,
        }
    }

    /// Reads one setting or event of the task (`key_path` names it in errors).
    fn read(&mut self, key_path: &str, key: &str, value: &Value) -> Result<(), RtAppError> {
        match (key, event_kind(key)) {
            ("policy", _) => {
                self.policy_name = value
                    .as_str()
                    .ok_or_else(|| field(key_path, "must be a string"))?
                    .to_owned()
            }
            ("priority", _) => {
                self.priority = Some(
                    value
                        .as_i64()
                        .ok_or_else(|| field(key_path, "must be a whole number"))?,
                )
            }
            ("cpus", _) => {
                let list = value
                    .as_array()
                    .ok_or_else(|| field(key_path, "must be an array of CPU numbers"))?;
                for cpu in list {
                    let cpu = cpu
                        .as_u64()
                        .filter(|&cpu| cpu < 4096)
                        .ok_or_else(|| field(key_path, "must be an array of CPU numbers"))?;
                    self.cpus.push(cpu as usize);
                }
            }
            ("instance", _) => {
                self.instances = value
                    .as_u64()
                    .filter(|&count| (1..=64).contains(&count))
                    .ok_or_else(|| field(key_path, "must be 1..64"))?
            }
            ("loop", _) => {}
            ("dl-runtime", _) => self.dl_runtime = Some(micros(key_path, value)?),
            ("dl-period", _) => self.dl_period = Some(micros(key_path, value)?),
            ("dl-deadline", _) => {}
            (_, "run") | (_, "runtime") => {
                let amount = micros(key_path, value)?;
                match (&self.held, &mut self.critical) {
                    (Some(_), Some(section)) => section.runs = Nanos(section.runs.0 + amount.0),
                    _ => self.work = Nanos(self.work.0 + amount.0),
                }
            }
            (_, "timer") => self.read_timer(key_path, value)?,
            (_, "lock") => {
                let name = value
                    .as_str()
                    .ok_or_else(|| field(key_path, "must be a resource name"))?
                    .to_owned();
                if self.critical.is_some() {
                    return Err(field(
                        key_path,
                        "only one critical section per task is supported",
                    ));
                }
                self.critical = Some(Section {
                    lock: name.clone(),
                    runs: Nanos::ZERO,
                });
                self.held = Some(name);
            }
            (_, "unlock") => {
                let name = value
                    .as_str()
                    .ok_or_else(|| field(key_path, "must be a resource name"))?;
                if self.held.as_deref() != Some(name) {
                    return Err(field(
                        key_path,
                        &format!("unlocks '{name}', which the task does not hold"),
                    ));
                }
                self.held = None;
            }
            (_, "sleep") if value.as_u64() == Some(0) => {}
            (other, _) => {
                return Err(field(
                    key_path,
                    &format!("event '{other}' is not supported (run, timer, lock, unlock)"),
                ))
            }
        }
        Ok(())
    }

    /// Reads the task's one timer: its period, longer than 0.
    fn read_timer(&mut self, key_path: &str, value: &Value) -> Result<(), RtAppError> {
        if self.period.is_some() {
            return Err(field(key_path, "only one timer per task is supported"));
        }
        let timer_period = value
            .get("period")
            .ok_or_else(|| field(key_path, "a timer needs a period"))?;
        let timer_period = micros(&format!("{key_path}.period"), timer_period)?;
        if timer_period.0 == 0 {
            return Err(field(key_path, "the period must be longer than 0"));
        }
        self.period = Some(timer_period);
        Ok(())
    }
}

/// The task's policy, or for SCHED_DEADLINE SCHED_OTHER with a reservation of its runtime.
fn policy_and_reserve(
    path: &str,
    events: &TaskEvents,
) -> Result<(Policy, Option<crate::model::Reservation>), RtAppError> {
    if events.policy_name == "SCHED_DEADLINE" {
        let (Some(runtime), Some(dl_period)) = (events.dl_runtime, events.dl_period) else {
            return Err(field(path, "SCHED_DEADLINE needs dl-runtime and dl-period"));
        };
        if runtime.0 == 0 || runtime > dl_period {
            return Err(field(path, "needs 0 < dl-runtime ≤ dl-period"));
        }
        Ok((
            Policy::Other { nice: 0 },
            Some(crate::model::Reservation {
                amount: runtime,
                period: dl_period,
                backend: None,
            }),
        ))
    } else {
        Ok((
            policy_of(
                &format!("{path}.policy"),
                &events.policy_name,
                events.priority,
            )?,
            None,
        ))
    }
}

/// The task's critical section, adding its lock to `locks` the first time a task takes it.
fn critical_section(
    path: &str,
    section: Section,
    locks: &mut Vec<LockSpec>,
    pi: bool,
) -> Result<CriticalSection, RtAppError> {
    let Section { lock: name, runs } = section;
    if runs.0 == 0 {
        return Err(field(
            path,
            &format!("the critical section of '{name}' runs nothing"),
        ));
    }
    let lock = match locks.iter().position(|lock| lock.name == name) {
        Some(index) => index,
        None => {
            locks.push(LockSpec {
                name,
                kind: if pi {
                    LockKind::PriorityInheritance
                } else {
                    LockKind::Plain
                },
            });
            locks.len() - 1
        }
    };
    Ok(CriticalSection {
        lock,
        critical: runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_periodic_task_set_with_a_lock() {
        let text = r#"{
            "global": {"duration": 3, "default_policy": "SCHED_FIFO", "pi_enabled": true, "calibration": "CPU0"},
            "tasks": {
                "fast": {"priority": 30, "cpus": [1], "lock": "m", "run": 100, "unlock": "m", "run1": 200, "timer": {"ref": "a", "period": 1000}},
                "slow": {"policy": "SCHED_OTHER", "instance": 2, "run": 3000, "timer": {"ref": "b", "period": 10000}}
            }
        }"#;
        let workload = parse_rt_app(text, "set").unwrap();
        assert_eq!(workload.duration, Some(Nanos::from_secs(3)));
        assert_eq!(workload.threads.len(), 3);
        let fast = &workload.threads[0];
        assert_eq!(fast.policy, Policy::Fifo { priority: 30 });
        assert_eq!(fast.work, Nanos::from_micros(200));
        assert_eq!(
            fast.critical_section.unwrap().critical,
            Nanos::from_micros(100)
        );
        assert_eq!(workload.locks[0].kind, LockKind::PriorityInheritance);
        assert_eq!(workload.threads[2].name, "slow-1");
    }

    #[test]
    fn unsupported_events_name_their_path() {
        let error = parse_rt_app(
            r#"{"tasks": {"t": {"run": 10, "suspend": "x", "timer": {"ref": "a", "period": 100}}}}"#,
            "x",
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("tasks.t.suspend"), "{error}");
    }
}
