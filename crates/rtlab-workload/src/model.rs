//! The workload model both file formats are read into and the runner runs: threads (scheduling,
//! affinity, what releases them, CPU work per activation, what they consume, produce, lock and
//! wake), rings of buffers between threads, devices that drain a ring at a fixed rate, locks, and
//! phases over time. Names are resolved to indices once, by [`Workload::check`], so the runner
//! never looks anything up by name.

use rtlab_core::Nanos;
use rtlab_sched::enforce::BackendKind;
use rtlab_sys::sched::Policy;
use std::fmt;

/// A CPU reservation "amount of every period" (`reserve = "1ms/16ms"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reservation {
    pub amount: Nanos,
    pub period: Nanos,
    /// None: the daemon's (or the machine's) default backend.
    pub backend: Option<BackendKind>,
}

impl fmt::Display for Reservation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}/{}", self.amount, self.period)?;
        if let Some(backend) = self.backend {
            write!(formatter, " ({backend})")?;
        }
        Ok(())
    }
}

/// A thread name becomes a series class (`NAME/response@CPU`), so it is letters, digits, `-`,
/// `_` and `.` only, at most 64 of them.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!("'{name}' must have 1 to 64 characters"));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "'{name}' contains '{bad}' (letters, digits, '-', '_' and '.' only)"
        ));
    }
    Ok(())
}

/// Parses `AMOUNT/PERIOD`, e.g. `1ms/16ms`.
pub fn parse_reservation(text: &str) -> Result<(Nanos, Nanos), String> {
    let (amount, period) = text
        .split_once('/')
        .ok_or_else(|| format!("'{text}' is not AMOUNT/PERIOD, e.g. 1ms/16ms"))?;
    let amount = rtlab_core::parse_duration(amount.trim()).map_err(|error| error.to_string())?;
    let period = rtlab_core::parse_duration(period.trim()).map_err(|error| error.to_string())?;
    if amount.0 == 0 || amount > period {
        return Err(format!(
            "'{text}': the amount must be longer than 0 and at most the period"
        ));
    }
    Ok((amount, period))
}

/// What releases a thread's activations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// An absolute periodic timer (first release at `offset`).
    Period { period: Nanos, offset: Nanos },
    /// Another thread wakes it (index into `threads`).
    WokenBy(usize),
    /// A slot of this ring became free (index into `rings`; the thread is the ring's producer).
    BufferFree(usize),
}

/// A change of a thread's behaviour from a time on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Since the start of the workload.
    pub after: Nanos,
    /// The work per activation from then on (None: unchanged).
    pub work: Option<Nanos>,
    /// False: the thread skips its activations from then on (it still waits for them).
    pub active: bool,
}

/// A critical section: `critical` of CPU work holding lock `lock` (index into `locks`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CriticalSection {
    pub lock: usize,
    pub critical: Nanos,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadSpec {
    pub name: String,
    /// The policy it runs with (and keeps outside a dispatch reservation's slots).
    pub policy: Policy,
    pub reserve: Option<Reservation>,
    /// CPU affinity; empty: every CPU.
    pub cpus: Vec<usize>,
    pub trigger: Trigger,
    /// CPU time per activation, or per buffer produced when `fill` is set.
    pub work: Nanos,
    /// Relative deadline of an activation (from its release); None: the period for periodic
    /// threads, none otherwise.
    pub deadline: Option<Nanos>,
    /// Takes one buffer of this ring for every buffer it produces (or per activation).
    pub consumes: Option<usize>,
    /// Puts one buffer into this ring (or device) per activation, or until it is full (`fill`).
    pub produces: Option<usize>,
    /// Produce until the output ring is full (a decoder catching up, a mixer refilling).
    pub fill: bool,
    /// Threads woken at the end of each activation.
    pub wakes: Vec<usize>,
    pub critical_section: Option<CriticalSection>,
    pub phases: Vec<Phase>,
}

impl ThreadSpec {
    /// The deadline the runner judges activations by.
    pub fn effective_deadline(&self) -> Option<Nanos> {
        match (self.deadline, &self.trigger) {
            (Some(deadline), _) => Some(deadline),
            (None, Trigger::Period { period, .. }) => Some(*period),
            _ => None,
        }
    }

    /// What it ran as, for tables: `SCHED_FIFO 24`, `reserve 1ms/16ms`.
    pub fn scheduling(&self) -> String {
        match &self.reserve {
            Some(reservation) => format!("reserve {reservation}"),
            None => format!("{} {}", self.policy.name(), self.policy.priority_or_nice()),
        }
    }
}

/// A device: the consumer of its ring, draining one buffer every `period` at a fixed rate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceSpec {
    /// SCHED_FIFO priority of the device thread (it judges by buffer completion times, so its
    /// own lateness does not excuse a late buffer).
    pub priority: u32,
    pub cpus: Vec<usize>,
}

/// A ring of `buffers` buffers of `period` each between one producer and one consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingSpec {
    pub name: String,
    pub buffers: u32,
    /// How much time (audio, video) one buffer holds.
    pub period: Nanos,
    /// Buffers full at the start.
    pub prefill: u32,
    /// Set when a device drains this ring.
    pub device: Option<DeviceSpec>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    Plain,
    PriorityInheritance,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockSpec {
    pub name: String,
    pub kind: LockKind,
}

/// A whole workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub name: String,
    /// How long it runs unless the command line says otherwise.
    pub duration: Option<Nanos>,
    pub threads: Vec<ThreadSpec>,
    pub rings: Vec<RingSpec>,
    pub locks: Vec<LockSpec>,
}

/// A workload that is not runnable as written; `field` names the offending setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("thread '{thread}': field '{field}': {message}")]
pub struct ModelError {
    pub thread: String,
    pub field: &'static str,
    pub message: String,
}

impl Workload {
    /// Checks what the formats cannot: each ring has one producer and one consumer (a device
    /// counts), buffer-free triggers name the thread's own output ring, nobody wakes itself.
    pub fn check(&self) -> Result<(), ModelError> {
        for thread in &self.threads {
            check_name(&thread.name).map_err(|message| ModelError {
                thread: thread.name.clone(),
                field: "name",
                message,
            })?;
        }
        for (ring_index, ring) in self.rings.iter().enumerate() {
            let producers: Vec<&ThreadSpec> = self
                .threads
                .iter()
                .filter(|thread| thread.produces == Some(ring_index))
                .collect();
            let consumers = self
                .threads
                .iter()
                .filter(|thread| thread.consumes == Some(ring_index))
                .count()
                + usize::from(ring.device.is_some());
            if producers.len() > 1 || consumers > 1 {
                let thread = producers.get(1).map_or(String::new(), |t| t.name.clone());
                return Err(ModelError {
                    thread,
                    field: "produces",
                    message: format!(
                        "ring '{}' has {} producers and {consumers} consumers; a ring connects one \
                         producer with one consumer (a device is its consumer)",
                        ring.name,
                        producers.len()
                    ),
                });
            }
            if ring.prefill > ring.buffers {
                return Err(ModelError {
                    thread: String::new(),
                    field: "prefill",
                    message: format!(
                        "ring '{}' prefills {} of its {} buffers",
                        ring.name, ring.prefill, ring.buffers
                    ),
                });
            }
        }
        for (index, thread) in self.threads.iter().enumerate() {
            let fail = |field, message: String| ModelError {
                thread: thread.name.clone(),
                field,
                message,
            };
            if let Trigger::BufferFree(ring) = thread.trigger {
                if thread.produces != Some(ring) {
                    return Err(fail(
                        "trigger",
                        format!(
                            "woken when ring '{}' has a free buffer, but it does not produce into it",
                            self.rings[ring].name
                        ),
                    ));
                }
            }
            if thread.wakes.contains(&index) || thread.trigger == Trigger::WokenBy(index) {
                return Err(fail("wakes", "a thread cannot wake itself".to_owned()));
            }
            if thread.fill && thread.produces.is_none() {
                return Err(fail("fill", "fill needs 'produces'".to_owned()));
            }
            if thread.consumes.is_some() && thread.consumes == thread.produces {
                return Err(fail(
                    "consumes",
                    "a thread cannot consume the ring it produces".to_owned(),
                ));
            }
            if thread.reserve.is_some() && thread.policy.is_realtime() {
                return Err(fail(
                    "reserve",
                    "give a reservation or an RT policy, not both".to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// The thread's nominal period: its own, its waker's, or its output ring's buffer period.
    pub fn nominal_period(&self, index: usize) -> Nanos {
        let mut current = index;
        for _ in 0..self.threads.len() + 1 {
            match self.threads[current].trigger {
                Trigger::Period { period, .. } => return period,
                Trigger::BufferFree(ring) => return self.rings[ring].period,
                Trigger::WokenBy(waker) => current = waker,
            }
        }
        // A cycle of wakers: no period of its own.
        self.threads[index]
            .deadline
            .unwrap_or(Nanos::from_millis(1))
    }

    pub fn thread_index(&self, name: &str) -> Option<usize> {
        self.threads.iter().position(|thread| thread.name == name)
    }
}
