//! The audit's judgements: each setting `rtlab_sys::timer_audit` read, with its value, who set it
//! where that can be known, and whether it helps or hurts real-time work. Pure, so each rule is
//! tested on made-up facts.

use rtlab_core::timer_audit::{AuditFacts, AuditItem, Effect};
use rtlab_core::Nanos;
use std::collections::BTreeMap;

/// Judges every audited setting: its value, who set it, whether it helps or hurts RT work.
pub fn judge_audit(facts: &AuditFacts) -> Vec<AuditItem> {
    let mut judgements = Judgements { items: Vec::new() };
    judge_cpu_dma_latency(facts, &mut judgements);
    judge_timer_slack(facts, &mut judgements);
    judge_rt_throttling(facts, &mut judgements);
    judge_cpufreq(facts, &mut judgements);
    judge_cpuidle(facts, &mut judgements);
    judge_clocksource(facts, &mut judgements);
    judge_tick(facts, &mut judgements);
    judge_preemption(facts, &mut judgements);
    judge_isolation(facts, &mut judgements);
    judge_irqs(facts, &mut judgements);
    judge_memory(facts, &mut judgements);
    judgements.items
}

/// The items judged so far, in the order the audit lists them.
struct Judgements {
    items: Vec<AuditItem>,
}

impl Judgements {
    /// Adds one judged setting.
    fn push(
        &mut self,
        topic: &str,
        setting: String,
        value: String,
        set_by: &str,
        effect: Effect,
        why: String,
    ) {
        self.items.push(AuditItem {
            topic: topic.to_owned(),
            setting,
            value,
            set_by: set_by.to_owned(),
            effect,
            why,
        })
    }
}

/// Judges cpu_dma_latency: the value in force, then each process that holds it.
fn judge_cpu_dma_latency(facts: &AuditFacts, judgements: &mut Judgements) {
    const NO_LIMIT_US: i64 = 2_000_000_000;
    let in_force = facts.cpu_dma_latency_in_force_us;
    let held = in_force.is_some_and(|value| value < NO_LIMIT_US);
    let in_force_text = match in_force {
        Some(value) if value >= NO_LIMIT_US => "no limit".to_owned(),
        Some(value) => format!("{value} µs"),
        None => "unreadable".to_owned(),
    };
    judgements.push(
        "cpu_dma_latency",
        "value in force (the least of every holder's)".to_owned(),
        in_force_text.clone(),
        if facts.cpu_dma_latency_holders.is_empty() {
            "nobody"
        } else {
            "its holders, below"
        },
        if held { Effect::Helps } else { Effect::Neutral },
        if held {
            "CPUs stay out of idle states slower to leave than this, so every thread wakes sooner (and the machine draws more power)".to_owned()
        } else {
            "no limit: CPUs may enter their deepest idle states, whose exit latency adds to wake-ups".to_owned()
        },
    );
    for holder in &facts.cpu_dma_latency_holders {
        let value = match facts.cpu_dma_latency_holders.len() {
            1 if held => format!("{in_force_text} (the only holder, so the value in force is its own)"),
            1 => "no limit (the only holder, and no limit is in force)".to_owned(),
            _ if held => format!("unknown: the kernel shows only the least of all holders' values ({in_force_text}, held by at least one of them)"),
            _ => "no limit (no limit is in force, so no holder asked for one)".to_owned(),
        };
        judgements.push(
            "cpu_dma_latency",
            format!(
                "held by pid {} ({})",
                holder.process.pid, holder.process.comm
            ),
            value,
            &format!(
                "pid {} ({}){}",
                holder.process.pid,
                holder.process.comm,
                if holder.process.cmdline.is_empty() {
                    String::new()
                } else {
                    format!(": {}", holder.process.cmdline)
                }
            ),
            Effect::Helps,
            "a global setting any root process can hold: it changes every other thread's wake-up latency while held".to_owned(),
        );
    }
}

/// Judges timer slack: each process whose slack is not the default, then the rest together.
fn judge_timer_slack(facts: &AuditFacts, judgements: &mut Judgements) {
    for fact in &facts.unusual_timer_slack {
        let slack = fact.timer_slack_ns;
        judgements.push(
            "timer slack",
            format!("pid {} ({})", fact.process.pid, fact.process.comm),
            format!("{}", Nanos(slack)),
            &format!(
                "pid {} itself, or the parent it inherited from",
                fact.process.pid
            ),
            if slack > 50_000 {
                Effect::Hurts
            } else {
                Effect::Helps
            },
            if slack > 50_000 {
                format!(
                    "its timers may fire up to {} late (the default is 50 µs)",
                    Nanos(slack)
                )
            } else {
                "tighter than the 50 µs default: its SCHED_OTHER sleeps end closer to the request"
                    .to_owned()
            },
        );
    }
    if facts.timer_slack_default_count > 0 {
        judgements.push(
            "timer slack",
            "every other readable process".to_owned(),
            format!("default ({} processes)", facts.timer_slack_default_count),
            "kernel default",
            Effect::Neutral,
            "SCHED_OTHER sleeps may end up to 50 µs late; RT threads get none".to_owned(),
        );
    }
}

/// Judges RT throttling and, where the kernel has it, each CPU's fair server.
fn judge_rt_throttling(facts: &AuditFacts, judgements: &mut Judgements) {
    if let Some(runtime) = facts.sched_rt_runtime_us {
        let period = facts.sched_rt_period_us.unwrap_or(1_000_000);
        let (effect, why) = if runtime < 0 {
            (Effect::Helps, "RT threads may take all CPU time: nothing throttles a real-time thread (a runaway one can hang the CPU)".to_owned())
        } else {
            (
                Effect::Hurts,
                format!(
                    "RT threads together may use {:.0} % of each {} period; past it they are stopped until the next period",
                    runtime as f64 / period.max(1) as f64 * 100.0,
                    Nanos(period as u64 * 1_000)
                ),
            )
        };
        judgements.push(
            "RT throttling",
            "sched_rt_runtime_us / sched_rt_period_us".to_owned(),
            format!("{runtime} / {period}"),
            "sysctl kernel.sched_rt_runtime_us (default 950000)",
            effect,
            why,
        );
    }
    if let Some(servers) = &facts.fair_servers {
        for server in servers {
            let share = server.runtime_ns as f64 / server.period_ns.max(1) as f64 * 100.0;
            judgements.push(
                "fair server",
                format!("CPU {}", server.cpu),
                format!("{} of {} ({share:.0} %)", Nanos(server.runtime_ns), Nanos(server.period_ns)),
                "debugfs sched/fair_server (default 50 ms of 1 s)",
                if server.runtime_ns > 0 { Effect::Hurts } else { Effect::Helps },
                "SCHED_OTHER tasks are guaranteed this share even beside busy RT threads, which may delay an RT thread by up to the runtime".to_owned(),
            );
        }
    }
}

/// Judges cpufreq: the governor of each group of CPUs, boost and intel_pstate's turbo switch.
fn judge_cpufreq(facts: &AuditFacts, judgements: &mut Judgements) {
    let mut governors: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (cpu, governor) in &facts.cpufreq_governors {
        governors.entry(governor.as_str()).or_default().push(*cpu);
    }
    for (governor, cpus) in governors {
        let performance = governor == "performance";
        judgements.push(
            "cpufreq",
            format!("governor of CPUs {}", compact_list(&cpus)),
            governor.to_owned(),
            "the distribution's default or a tuning daemon",
            if performance {
                Effect::Helps
            } else {
                Effect::Hurts
            },
            if performance {
                "frequency stays high: a wake-up never starts at a low clock".to_owned()
            } else {
                "frequency follows load: a thread that wakes on an idle CPU starts slowly, and changes stall briefly".to_owned()
            },
        );
    }
    if let Some(boost) = &facts.cpufreq_boost {
        judgements.push(
            "cpufreq",
            "boost".to_owned(),
            boost.clone(),
            "firmware or /sys/devices/system/cpu/cpufreq/boost",
            if boost == "1" { Effect::Hurts } else { Effect::Helps },
            "turbo frequencies depend on temperature and other cores' load, so the same work takes varying time".to_owned(),
        );
    }
    if let Some(no_turbo) = &facts.intel_no_turbo {
        judgements.push(
            "cpufreq",
            "intel_pstate no_turbo".to_owned(),
            no_turbo.clone(),
            "/sys/devices/system/cpu/intel_pstate/no_turbo",
            if no_turbo == "1" {
                Effect::Helps
            } else {
                Effect::Hurts
            },
            "turbo makes execution time vary with temperature and other cores' load".to_owned(),
        );
    }
}

/// Judges cpuidle: the driver and governor, then each idle state by its exit latency.
fn judge_cpuidle(facts: &AuditFacts, judgements: &mut Judgements) {
    if let Some(driver) = &facts.cpuidle_driver {
        judgements.push(
            "cpuidle",
            "driver / governor".to_owned(),
            format!(
                "{driver} / {}",
                facts.cpuidle_governor.as_deref().unwrap_or("unknown")
            ),
            "kernel (cpuidle.governor= on the command line)",
            Effect::Neutral,
            "picks the idle state each idle CPU enters".to_owned(),
        );
    }
    for state in &facts.idle_states {
        let deep = state.exit_latency_us >= 10;
        judgements.push(
            "cpuidle",
            format!("state {}", state.name),
            format!(
                "exit latency {} µs{}",
                state.exit_latency_us,
                if state.disabled { ", disabled" } else { "" }
            ),
            if state.disabled {
                "someone wrote its disable file"
            } else {
                "the idle driver"
            },
            if state.disabled || state.exit_latency_us == 0 {
                Effect::Neutral
            } else if deep {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            format!(
                "a thread woken on a CPU in this state waits {} µs more before it runs{}",
                state.exit_latency_us,
                if state.exit_latency_us > 0 {
                    format!(
                        " (cpu_dma_latency below {} keeps CPUs out of it)",
                        state.exit_latency_us
                    )
                } else {
                    String::new()
                }
            ),
        );
    }
}

/// Judges the clocksource: whether a clock read stays in user space.
fn judge_clocksource(facts: &AuditFacts, judgements: &mut Judgements) {
    if let Some(clocksource) = &facts.clocksource {
        let good = matches!(
            clocksource.as_str(),
            "tsc" | "arch_sys_counter" | "kvm-clock"
        );
        judgements.push(
            "clocksource",
            format!(
                "current (also available: {})",
                facts.available_clocksources.join(", ")
            ),
            clocksource.clone(),
            "the kernel's rating, or clocksource= on the command line",
            if good { Effect::Helps } else { Effect::Hurts },
            if good {
                "read in user space through the vDSO: a clock read costs tens of ns".to_owned()
            } else {
                "not readable from the vDSO: every clock read is a system call (µs), and hpet/acpi_pm are slow to read".to_owned()
            },
        );
    }
}

/// Judges the tick: HZ and the NO_HZ mode the kernel was built with.
fn judge_tick(facts: &AuditFacts, judgements: &mut Judgements) {
    if let Some(hz) = facts.config_hz {
        judgements.push(
            "tick",
            "HZ".to_owned(),
            format!("{hz} ({} per tick)", Nanos(1_000_000_000 / hz.max(1) as u64)),
            "the kernel's build configuration",
            Effect::Neutral,
            "high-resolution timers do not wait for the tick; jiffies-based timeouts (some drivers, sched ticks) have this granularity".to_owned(),
        );
    }
    if let Some(no_hz) = &facts.config_no_hz {
        let (effect, why) = match no_hz.as_str() {
            "full" => (
                Effect::Helps,
                "nohz_full CPUs can run one task with no tick at all",
            ),
            "idle" => (
                Effect::Neutral,
                "the tick stops on idle CPUs only: a busy CPU is interrupted every tick",
            ),
            _ => (
                Effect::Hurts,
                "the tick never stops: every CPU is interrupted HZ times a second",
            ),
        };
        judgements.push(
            "tick",
            "NO_HZ mode".to_owned(),
            no_hz.clone(),
            "the kernel's build configuration",
            effect,
            why.to_owned(),
        );
    }
}

/// Judges the preemption model, and says where the model in force was chosen.
fn judge_preemption(facts: &AuditFacts, judgements: &mut Judgements) {
    let boot_choice = facts
        .kernel_cmdline
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .find_map(|word| word.strip_prefix("preempt="));
    let (preemption, preemption_source) = match (facts.preemption.as_str(), boot_choice, facts.config_preemption.as_deref()) {
        (model, _, _) if !model.starts_with("dynamic") && !model.is_empty() => {
            (model.to_owned(), "the running kernel")
        }
        (_, Some(choice), _) => (choice.to_owned(), "preempt= on the kernel command line"),
        (_, None, Some(built)) => (
            built.to_owned(),
            "the kernel's build configuration (a PREEMPT_DYNAMIC kernel: debugfs sched/preempt can change it at run time)",
        ),
        (model, None, None) => (model.to_owned(), "unknown"),
    };
    let preemption = preemption.as_str();
    judgements.push(
        "preemption",
        "model".to_owned(),
        preemption.to_owned(),
        preemption_source,
        match preemption {
            "rt" | "full" => Effect::Helps,
            "none" | "voluntary" => Effect::Hurts,
            _ => Effect::Neutral,
        },
        match preemption {
            "rt" => "PREEMPT_RT: interrupts run as threads and nearly all kernel code is preemptible",
            "full" => "kernel code is preemptible outside critical sections",
            "lazy" => "preempts at once only for RT tasks; SCHED_OTHER waits for the tick",
            "none" => "a woken RT thread waits until the running kernel code returns or reschedules: milliseconds possible",
            "voluntary" => "kernel code yields only at explicit points: long kernel paths delay wake-ups",
            _ => "unknown model",
        }
        .to_owned(),
    );
}

/// Judges CPU isolation: each isolation or idle parameter on the kernel command line.
fn judge_isolation(facts: &AuditFacts, judgements: &mut Judgements) {
    let cmdline = facts.kernel_cmdline.as_deref().unwrap_or("");
    for parameter in [
        "isolcpus",
        "nohz_full",
        "rcu_nocbs",
        "irqaffinity",
        "idle",
        "processor.max_cstate",
        "intel_idle.max_cstate",
    ] {
        let value = cmdline.split_whitespace().find_map(|word| {
            word.strip_prefix(parameter)
                .and_then(|rest| rest.strip_prefix('='))
        });
        if let Some(value) = value {
            judgements.push(
                "isolation",
                parameter.to_owned(),
                value.to_owned(),
                "kernel command line",
                Effect::Helps,
                match parameter {
                    "isolcpus" => "the scheduler keeps other tasks off these CPUs",
                    "nohz_full" => "no tick on these CPUs while one task runs",
                    "rcu_nocbs" => "RCU callbacks run elsewhere",
                    "irqaffinity" => "interrupts default to these CPUs only",
                    _ => "limits idle states: shorter wake-ups, more power",
                }
                .to_owned(),
            );
        }
    }
    if !cmdline.is_empty()
        && !["isolcpus=", "nohz_full=", "rcu_nocbs="]
            .iter()
            .any(|parameter| cmdline.contains(parameter))
    {
        judgements.push(
            "isolation",
            "isolcpus / nohz_full / rcu_nocbs".to_owned(),
            "none".to_owned(),
            "kernel command line",
            Effect::Neutral,
            "no CPU is set aside: RT threads share every CPU with everything else".to_owned(),
        );
    }
}

/// Judges IRQs: each one pinned away from some online CPUs, the rest together, and each IRQ thread.
fn judge_irqs(facts: &AuditFacts, judgements: &mut Judgements) {
    let online = facts.online_cpus.as_deref().unwrap_or("");
    let mut pinned = 0;
    for irq in &facts.irqs {
        if irq.affinity != online && !online.is_empty() {
            pinned += 1;
            judgements.push(
                "IRQ affinity",
                format!("IRQ {} {}", irq.irq, irq.name),
                format!(
                    "CPUs {}{}",
                    irq.affinity,
                    irq.effective_affinity
                        .as_ref()
                        .map(|effective| format!(" (effective {effective})"))
                        .unwrap_or_default()
                ),
                "a driver, irqbalance or /proc/irq/N/smp_affinity",
                Effect::Neutral,
                "its handler runs only there: keep RT threads elsewhere or expect its time in their latency".to_owned(),
            );
        }
    }
    if !facts.irqs.is_empty() {
        judgements.push(
            "IRQ affinity",
            "all other IRQs".to_owned(),
            format!(
                "{} of {} may run on every online CPU ({online})",
                facts.irqs.len() - pinned,
                facts.irqs.len()
            ),
            "kernel default",
            Effect::Neutral,
            "any CPU may be interrupted by them".to_owned(),
        );
    }
    for thread in &facts.irq_threads {
        judgements.push(
            "threaded IRQ",
            format!("pid {} {}", thread.pid, thread.comm),
            format!("{} {}", thread.policy, thread.priority),
            "the kernel (50 by default), or chrt",
            Effect::Neutral,
            "an RT thread above this priority preempts the handler; one below waits for it"
                .to_owned(),
        );
    }
}

/// Judges memory settings: transparent hugepages, khugepaged, KSM and swap.
fn judge_memory(facts: &AuditFacts, judgements: &mut Judgements) {
    if let Some(thp) = &facts.thp_enabled {
        let mode = selected(thp);
        judgements.push(
            "memory",
            "transparent hugepages".to_owned(),
            mode.clone(),
            "the kernel's build configuration or /sys/kernel/mm/transparent_hugepage/enabled",
            if mode == "always" { Effect::Hurts } else { Effect::Neutral },
            "'always' lets a page fault compact memory synchronously, and khugepaged merges pages under running programs".to_owned(),
        );
    }
    if let Some(defrag) = &facts.thp_defrag {
        let mode = selected(defrag);
        judgements.push(
            "memory",
            "hugepage defrag".to_owned(),
            mode.clone(),
            "/sys/kernel/mm/transparent_hugepage/defrag",
            if mode == "always" {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            "'always' stalls a faulting thread while memory is compacted".to_owned(),
        );
    }
    if let (Some(defrag), Some(sleep)) = (&facts.khugepaged_defrag, facts.khugepaged_scan_sleep_ms)
    {
        judgements.push(
            "memory",
            "khugepaged".to_owned(),
            format!("defrag {defrag}, scans every {sleep} ms"),
            "/sys/kernel/mm/transparent_hugepage/khugepaged",
            Effect::Neutral,
            "collapses pages in the background, taking the mm lock of the processes it scans"
                .to_owned(),
        );
    }
    if let Some(run) = &facts.ksm_run {
        let running = run == "1";
        judgements.push(
            "memory",
            "KSM (same-page merging)".to_owned(),
            format!(
                "{}{}",
                if running { "running" } else { "stopped" },
                facts
                    .ksm_pages_sharing
                    .map(|pages| format!(", {pages} pages sharing"))
                    .unwrap_or_default()
            ),
            "/sys/kernel/mm/ksm/run (often set by a VM host's tools)",
            if running {
                Effect::Hurts
            } else {
                Effect::Neutral
            },
            "merged pages are copied on the next write: a write fault where none was expected"
                .to_owned(),
        );
    }
    if let Some(devices) = &facts.swap_devices {
        judgements.push(
            "memory",
            "swap".to_owned(),
            if devices.is_empty() {
                "none".to_owned()
            } else {
                format!(
                    "{} device(s), swappiness {}",
                    devices.len(),
                    facts.swappiness.map(|value| value.to_string()).unwrap_or_default()
                )
            },
            "/etc/fstab or swapon",
            if devices.is_empty() { Effect::Neutral } else { Effect::Hurts },
            "a page of an RT program that is not mlock()ed can be swapped out, and its next touch waits for the disk".to_owned(),
        );
    }
}

/// The bracketed choice in a sysfs selector (`always [madvise] never` → `madvise`).
fn selected(text: &str) -> String {
    text.split_whitespace()
        .find_map(|word| {
            word.strip_prefix('[')
                .and_then(|word| word.strip_suffix(']'))
        })
        .unwrap_or(text)
        .to_owned()
}

fn compact_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut index = 0;
    while index < cpus.len() {
        let start = cpus[index];
        let mut end = start;
        while index + 1 < cpus.len() && cpus[index + 1] == end + 1 {
            index += 1;
            end = cpus[index];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        index += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_holder_is_credited_with_the_value_in_force_and_several_are_not() {
        use rtlab_core::timer_audit::{LatencyHolder, ProcessName};
        let holder = |pid| LatencyHolder {
            process: ProcessName {
                pid,
                comm: "sleep".into(),
                cmdline: "sleep 60".into(),
            },
            descriptors: 1,
        };
        let mut facts = AuditFacts {
            cpu_dma_latency_in_force_us: Some(42),
            cpu_dma_latency_holders: vec![holder(7)],
            preemption: "none".into(),
            ..AuditFacts::default()
        };
        let items = judge_audit(&facts);
        let item = items
            .iter()
            .find(|item| item.setting == "held by pid 7 (sleep)")
            .unwrap();
        assert!(item.value.starts_with("42 µs"), "{item:?}");
        facts.cpu_dma_latency_holders.push(holder(8));
        let items = judge_audit(&facts);
        let item = items
            .iter()
            .find(|item| item.setting == "held by pid 8 (sleep)")
            .unwrap();
        assert!(item.value.starts_with("unknown"), "{item:?}");
        assert!(items
            .iter()
            .any(|item| item.topic == "preemption" && item.effect == Effect::Hurts));
    }

    #[test]
    fn selectors_and_cpu_lists_read_plainly() {
        assert_eq!(selected("always [madvise] never"), "madvise");
        assert_eq!(compact_list(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
    }
}
