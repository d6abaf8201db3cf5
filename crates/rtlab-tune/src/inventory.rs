//! The inventory: every setting the real-time and audio guides name (rtcqs, tuned's
//! latency-performance and realtime profiles, the distributions' real-time guides), each with
//! its value here, why it matters and what rtlab can do about it now or at the next boot. It
//! reads; it changes nothing, and works without root (what it could not read, it says).

use crate::catalogue::SettingName;
use rtlab_core::timer_audit::AuditFacts;
use rtlab_core::tune_report::{InventoryItem, WhenChangeable};

fn item(
    name: &str,
    value: String,
    why: &str,
    when: WhenChangeable,
    action: String,
) -> InventoryItem {
    InventoryItem {
        name: name.to_owned(),
        value,
        why: why.to_owned(),
        when,
        action,
    }
}

fn cpu_list_text(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The run-time settings `rtlab tune` measures, as they read now.
fn runtime_items(housekeeping_cpus: &[usize], facts: &AuditFacts) -> Vec<InventoryItem> {
    let mut items = Vec::new();
    for setting in SettingName::all() {
        let (value, when, action) = match setting {
            SettingName::Placebo => continue,
            SettingName::CpuDmaLatency => {
                let value = match facts.cpu_dma_latency_in_force_us {
                    Some(value) => {
                        let mut text = format!("{value} us in force");
                        if !facts.cpu_dma_latency_holders.is_empty() {
                            text.push_str(&format!(
                                ", held by {}",
                                facts
                                    .cpu_dma_latency_holders
                                    .iter()
                                    .map(|holder| holder.process.comm.clone())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ));
                        }
                        let states: Vec<String> = facts
                            .idle_states
                            .iter()
                            .map(|state| format!("{} {} us", state.name, state.exit_latency_us))
                            .collect();
                        if !states.is_empty() {
                            text.push_str(&format!("; idle states: {}", states.join(", ")));
                        }
                        if let Some(driver) = &facts.cpuidle_driver {
                            text.push_str(&format!(" ({driver})"));
                        }
                        text
                    }
                    None => "unreadable (/dev/cpu_dma_latency needs root)".to_owned(),
                };
                (
                    value,
                    WhenChangeable::Now,
                    "rtlab tune holds it at 0 while it measures; a process that keeps the device open holds it (a oneshot unit at boot, as tuned's latency-performance does)".to_owned(),
                )
            }
            SettingName::IrqAffinity => {
                let value = if facts.irqs.is_empty() {
                    "unreadable".to_owned()
                } else {
                    let first = &facts.irqs[0].affinity;
                    if facts.irqs.iter().all(|irq| &irq.affinity == first) {
                        format!("{first} ({} IRQs)", facts.irqs.len())
                    } else {
                        format!("mixed ({} IRQs)", facts.irqs.len())
                    }
                };
                let action = if housekeeping_cpus.is_empty() {
                    "nothing while every CPU is measured: give --cpus a subset".to_owned()
                } else {
                    format!(
                        "rtlab tune moves every IRQ it may to CPU(s) {} (irqaffinity={} at boot)",
                        cpu_list_text(housekeeping_cpus),
                        cpu_list_text(housekeeping_cpus)
                    )
                };
                (value, WhenChangeable::Now, action)
            }
            SettingName::File(knob) => {
                let tried = setting.tried_value(housekeeping_cpus).unwrap_or_default();
                match knob.read() {
                    Ok(value) => (
                        value,
                        WhenChangeable::Now,
                        format!("rtlab tune tries {tried}"),
                    ),
                    Err(error) => (
                        format!("absent ({error})"),
                        WhenChangeable::Absent,
                        "nothing: this kernel has no such setting".to_owned(),
                    ),
                }
            }
        };
        items.push(item(setting.name(), value, setting.why(), when, action));
    }
    items
}

/// What rtlab does not change: frequency, SMT, limits.
fn hardware_items(facts: &AuditFacts) -> Vec<InventoryItem> {
    let mut items = Vec::new();
    let governors: Vec<&str> = facts
        .cpufreq_governors
        .iter()
        .map(|(_, governor)| governor.as_str())
        .collect();
    items.push(if governors.is_empty() {
        item(
            "cpufreq_governor",
            "absent".into(),
            "a governor that lowers the frequency makes each wake-up's work slower",
            WhenChangeable::Absent,
            "nothing: no cpufreq driver here (a VM, or a fixed frequency)".into(),
        )
    } else {
        let mut distinct = governors.clone();
        distinct.dedup();
        item(
            "cpufreq_governor",
            distinct.join(","),
            "a governor that lowers the frequency makes each wake-up's work slower",
            WhenChangeable::ByHand,
            "performance: cpupower frequency-set -g performance (rtlab tune does not measure it yet)"
                .into(),
        )
    });
    let boost = facts
        .cpufreq_boost
        .clone()
        .map(|value| format!("boost {value}"))
        .or_else(|| {
            facts
                .intel_no_turbo
                .clone()
                .map(|value| format!("intel_pstate no_turbo {value}"))
        });
    items.push(match boost {
        Some(value) => item(
            "cpu_boost",
            value,
            "turbo frequencies come and go with temperature and load: the same work takes varying time",
            WhenChangeable::ByHand,
            "for steady timing turn it off: echo 0 > /sys/devices/system/cpu/cpufreq/boost (or 1 > intel_pstate/no_turbo)".into(),
        ),
        None => item(
            "cpu_boost",
            "absent".into(),
            "turbo frequencies come and go with temperature and load",
            WhenChangeable::Absent,
            "nothing: no boost control here".into(),
        ),
    });
    items.push(match rtlab_sys::tunables::energy_performance_preference() {
        Some(value) => item(
            "energy_performance_preference",
            value,
            "the hardware's own frequency choice; power saving raises the time to ramp up",
            WhenChangeable::ByHand,
            "performance: echo performance > /sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference".into(),
        ),
        None => item(
            "energy_performance_preference",
            "absent".into(),
            "the hardware's own frequency choice",
            WhenChangeable::Absent,
            "nothing: no EPP here (no intel_pstate / amd-pstate active mode)".into(),
        ),
    });
    items.push(match rtlab_sys::tunables::smt_control() {
        Some(value) if value == "on" => item(
            "smt",
            value,
            "a sibling hyperthread shares the core: its work slows the measured thread",
            WhenChangeable::NextBoot,
            "nosmt on the kernel command line (or echo off > /sys/devices/system/cpu/smt/control now; halves the CPUs)".into(),
        ),
        Some(value) if value == "notsupported" || value == "notimplemented" => item(
            "smt",
            value,
            "a sibling hyperthread shares the core",
            WhenChangeable::Absent,
            "nothing: no SMT here".into(),
        ),
        Some(value) => item(
            "smt",
            value,
            "a sibling hyperthread shares the core",
            WhenChangeable::Now,
            "already off".into(),
        ),
        None => item(
            "smt",
            "absent".into(),
            "a sibling hyperthread shares the core",
            WhenChangeable::Absent,
            "nothing: the kernel has no SMT control".into(),
        ),
    });
    let limit_text = |limit: Option<u64>| limit.map_or("unlimited".to_owned(), |v| v.to_string());
    match rtlab_sys::tunables::realtime_limits() {
        Ok(((rtprio, _), (memlock, _))) => {
            items.push(item(
                "rtprio_limit",
                limit_text(rtprio),
                "the highest SCHED_FIFO priority an unprivileged program may ask for (0: none; JACK, PipeWire without rtkit need it)",
                WhenChangeable::ByHand,
                "@audio - rtprio 95 in /etc/security/limits.d/audio.conf, the user in group audio (this is rtlab's own limit)".into(),
            ));
            items.push(item(
                "memlock_limit",
                memlock.map_or("unlimited".to_owned(), |bytes| format!("{} KiB", bytes / 1024)),
                "memory a program may lock against page faults (mlockall); too little and an audio engine faults under memory pressure",
                WhenChangeable::ByHand,
                "@audio - memlock unlimited in /etc/security/limits.d/audio.conf".into(),
            ));
        }
        Err(error) => items.push(item(
            "rtprio_limit",
            format!("unreadable ({error})"),
            "the highest SCHED_FIFO priority an unprivileged program may ask for",
            WhenChangeable::ByHand,
            "@audio - rtprio 95 in /etc/security/limits.d/audio.conf".into(),
        )),
    }
    items
}

fn has_parameter(cmdline: &str, name: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|word| *word != "--")
        .find(|word| *word == name || word.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The boot-time settings, as suggestions with the exact kernel command line.
fn boot_items(cpus: &[usize], facts: &AuditFacts) -> Vec<InventoryItem> {
    let cmdline = facts.kernel_cmdline.clone().unwrap_or_default();
    let measured = cpu_list_text(cpus);
    let mut items = Vec::new();
    let threaded = has_parameter(&cmdline, "threadirqs");
    let threads: Vec<String> = facts
        .irq_threads
        .iter()
        .take(6)
        .map(|thread| format!("{} {} {}", thread.comm, thread.policy, thread.priority))
        .collect();
    items.push(item(
        "threadirqs",
        match &threaded {
            Some(_) if threads.is_empty() => "on".into(),
            Some(_) => format!("on; IRQ threads: {}", threads.join(", ")),
            None => "off".into(),
        },
        "with threaded IRQs a handler is a thread at FIFO 50 that a higher-priority audio thread preempts",
        WhenChangeable::NextBoot,
        if threaded.is_some() {
            "on already; give a sound card's IRQ thread a priority above others: chrt -f -p 90 PID".into()
        } else {
            "add threadirqs to the kernel command line".into()
        },
    ));
    items.push(item(
        "preempt",
        facts
            .config_preemption
            .clone()
            .map(|model| format!("{} (built {model})", facts.preemption))
            .unwrap_or_else(|| facts.preemption.clone()),
        "how soon a woken real-time thread takes the CPU from kernel code; full (or rt) preempts almost anywhere",
        WhenChangeable::NextBoot,
        if facts.preemption.contains("full") || facts.preemption.contains("rt") {
            "already full".into()
        } else {
            "add preempt=full to the kernel command line (a PREEMPT_DYNAMIC kernel)".into()
        },
    ));
    items.push(item(
        "isolation",
        format!(
            "isolcpus {}, nohz_full {}, rcu_nocbs {}",
            facts
                .isolated_cpus
                .clone()
                .filter(|value| !value.is_empty())
                .unwrap_or_else(|| "none".into()),
            facts
                .nohz_full_cpus
                .clone()
                .filter(|value| !value.is_empty() && value != "(null)")
                .unwrap_or_else(|| "none".into()),
            has_parameter(&cmdline, "rcu_nocbs").unwrap_or_else(|| "none".into())
        ),
        "isolated CPUs get no other tasks, no scheduler tick while one task runs, and no RCU callbacks",
        WhenChangeable::NextBoot,
        format!(
            "add isolcpus=managed_irq,domain,{measured} nohz_full={measured} rcu_nocbs={measured} to the kernel command line (then run the real-time program there with taskset)"
        ),
    ));
    items.push(item(
        "mitigations",
        has_parameter(&cmdline, "mitigations").unwrap_or_else(|| "default (on)".into()),
        "CPU vulnerability mitigations add work to every kernel entry and context switch",
        WhenChangeable::NextBoot,
        "mitigations=off on the kernel command line trades security for latency: only on a machine that runs trusted code".into(),
    ));
    items.push(item(
        "kernel_command_line",
        "-".into(),
        "the boot-time settings above in one line",
        WhenChangeable::NextBoot,
        format!(
            "GRUB_CMDLINE_LINUX=\"... threadirqs preempt=full isolcpus=managed_irq,domain,{measured} nohz_full={measured} rcu_nocbs={measured}\" in /etc/default/grub, then update-grub and reboot"
        ),
    ));
    items
}

/// Every setting, as it reads now. `cpus` are the CPUs measured, `housekeeping_cpus` the others.
pub fn inventory(cpus: &[usize], housekeeping_cpus: &[usize]) -> Vec<InventoryItem> {
    let facts = rtlab_sys::timer_audit::collect();
    let mut items = runtime_items(housekeeping_cpus, &facts);
    items.extend(hardware_items(&facts));
    items.extend(boot_items(cpus, &facts));
    items
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_parameters_are_found_before_the_init_arguments_only() {
        let cmdline = "quiet threadirqs mitigations=off -- --threadirqs rcu_nocbs=1";
        assert_eq!(
            has_parameter(cmdline, "threadirqs").as_deref(),
            Some("threadirqs")
        );
        assert_eq!(
            has_parameter(cmdline, "mitigations").as_deref(),
            Some("mitigations=off")
        );
        assert_eq!(has_parameter(cmdline, "rcu_nocbs"), None);
    }
}
