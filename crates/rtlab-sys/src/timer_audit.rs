//! What `rtlab timers --audit` reads from /proc and /sys: every setting that changes everyone's
//! timing, raw and unjudged ([`AuditFacts`]); `rtlab-analysis` judges it. Also the other
//! process's timer slack (`/proc/TID/timerslack_ns`), which the change experiment writes.
//!
//! What cannot be known is said, not guessed: the kernel keeps each /dev/cpu_dma_latency
//! holder's value inside its open file and shows only the minimum over all holders (reading the
//! device); fdinfo shows neither the value nor whether one was written (the position stays 0).

use rtlab_core::timer_audit::{
    AuditFacts, FairServerFact, IdleStateFact, IrqFact, IrqThreadFact, LatencyHolder, ProcessName,
    SlackFact,
};
use std::io;
use std::path::Path;

/// The default timer slack of a SCHED_OTHER task, ns.
pub const DEFAULT_TIMER_SLACK_NS: u64 = 50_000;

/// Reads `/proc/TID/timerslack_ns` (another task's slack; needs CAP_SYS_NICE unless it is us).
pub fn read_timer_slack_of(tid: u32) -> io::Result<u64> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/timerslack_ns"))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not a number"))
}

/// Writes `/proc/TID/timerslack_ns` (0 means "back to the task's default").
pub fn write_timer_slack_of(tid: u32, slack_ns: u64) -> io::Result<()> {
    std::fs::write(format!("/proc/{tid}/timerslack_ns"), slack_ns.to_string())
}

fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
}

fn read_number<T: std::str::FromStr>(path: impl AsRef<Path>) -> Option<T> {
    read_trimmed(path).and_then(|text| text.parse().ok())
}

fn process_name(pid: u32) -> ProcessName {
    let comm = read_trimmed(format!("/proc/{pid}/comm")).unwrap_or_default();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|&byte| byte == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    ProcessName { pid, comm, cmdline }
}

fn process_ids() -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids
}

/// A task's scheduling policy as /proc/PID/stat shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatPolicy {
    /// `SCHED_OTHER`, `SCHED_FIFO`, … (`unknown` for a number this does not know).
    pub policy: String,
    /// The RT priority for SCHED_FIFO and SCHED_RR, the nice value otherwise.
    pub priority: i32,
}

/// Policy name and RT priority (or nice) from /proc/PID/stat.
pub fn parse_stat_policy(stat: &str) -> Option<StatPolicy> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields are numbered from 1 in proc(5); `state` (3) is fields[0].
    let nice: i32 = fields.get(19 - 3)?.parse().ok()?;
    let rt_priority: i32 = fields.get(40 - 3)?.parse().ok()?;
    let policy: i32 = fields.get(41 - 3)?.parse().ok()?;
    let name = match policy {
        0 => "SCHED_OTHER",
        1 => "SCHED_FIFO",
        2 => "SCHED_RR",
        3 => "SCHED_BATCH",
        5 => "SCHED_IDLE",
        6 => "SCHED_DEADLINE",
        _ => "unknown",
    };
    let priority = if policy == 1 || policy == 2 {
        rt_priority
    } else {
        nice
    };
    Some(StatPolicy {
        policy: name.to_owned(),
        priority,
    })
}

/// One interrupt of /proc/interrupts: its number and the names of its handlers.
#[derive(Clone, Debug, PartialEq, Eq)]
struct InterruptLine {
    irq: u32,
    name: String,
}

/// The numbered interrupts of /proc/interrupts (the first line's CPU columns say where the
/// counts end).
fn parse_interrupts(text: &str) -> Vec<InterruptLine> {
    let mut lines = text.lines();
    let n_cpus = lines
        .next()
        .map(|header| header.split_whitespace().count())
        .unwrap_or(0);
    lines
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let irq: u32 = number.parse().ok()?;
            let tokens: Vec<&str> = rest.split_whitespace().collect();
            // counts per CPU, then the chip, the hardware irq (and trigger), then the names
            let name = tokens.get(n_cpus + 2..).map(|names| names.join(" "))?;
            Some(InterruptLine { irq, name })
        })
        .collect()
}

/// Kernel build options from /proc/config.gz or /boot/config-RELEASE.
fn kernel_config() -> Option<String> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).is_ok() {
            return Some(text);
        }
    }
    let release = read_trimmed("/proc/sys/kernel/osrelease")?;
    std::fs::read_to_string(format!("/boot/config-{release}")).ok()
}

fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|line| {
        line.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::trim)
    })
}

/// Reads everything the audit judges. Never fails: what cannot be read is `None` and named in
/// `skipped`.
pub fn collect() -> AuditFacts {
    let mut facts = AuditFacts {
        as_root: rtlab_sys_is_root(),
        ..AuditFacts::default()
    };
    read_dma_latency_in_force(&mut facts);
    scan_processes(&mut facts);
    facts.sched_rt_runtime_us = read_number("/proc/sys/kernel/sched_rt_runtime_us");
    facts.sched_rt_period_us = read_number("/proc/sys/kernel/sched_rt_period_us");
    read_fair_servers(&mut facts);
    let cpu_root = Path::new("/sys/devices/system/cpu");
    read_cpu_frequency(&mut facts, cpu_root);
    read_idle_states(&mut facts, cpu_root);
    let clock_root = Path::new("/sys/devices/system/clocksource/clocksource0");
    facts.clocksource = read_trimmed(clock_root.join("current_clocksource"));
    facts.available_clocksources = read_trimmed(clock_root.join("available_clocksource"))
        .map(|text| text.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    read_kernel_config(&mut facts);
    facts.preemption = crate::host::preemption_model();
    facts.kernel_cmdline = read_trimmed("/proc/cmdline");
    facts.isolated_cpus = read_trimmed(cpu_root.join("isolated"));
    facts.nohz_full_cpus = read_trimmed(cpu_root.join("nohz_full"));
    facts.online_cpus = read_trimmed(cpu_root.join("online"));
    read_irq_affinities(&mut facts);
    read_memory_settings(&mut facts);
    facts
}

/// Reads the cpu_dma_latency in force (the minimum over every holder), or says why it cannot.
fn read_dma_latency_in_force(facts: &mut AuditFacts) {
    facts.cpu_dma_latency_in_force_us = match crate::dma_latency::current() {
        Ok(value) => Some(value as i64),
        Err(error) => {
            facts.skipped.push(format!(
                "the cpu_dma_latency in force: reading {}: {error}",
                crate::dma_latency::PATH
            ));
            None
        }
    };
}

/// Looks at every other process: whether it holds /dev/cpu_dma_latency open, its main thread's
/// timer slack, and whether it is a threaded interrupt handler. Says how many could not be read.
fn scan_processes(facts: &mut AuditFacts) {
    let own_pid = std::process::id();
    for pid in process_ids() {
        if pid == own_pid {
            continue;
        }
        if note_dma_latency_holder(facts, pid) == ProcessScan::Gone {
            continue;
        }
        note_timer_slack(facts, pid);
        note_irq_thread(facts, pid);
    }
    if facts.processes_not_scanned > 0 {
        facts.skipped.push(format!(
            "{} processes' open files could not be read (not root): a cpu_dma_latency holder among them is not named",
            facts.processes_not_scanned
        ));
    }
    if facts.timer_slack_unreadable > 0 {
        facts.skipped.push(format!(
            "{} processes' timer slack could not be read (reading another process's timerslack_ns needs CAP_SYS_NICE)",
            facts.timer_slack_unreadable
        ));
    }
}

/// Whether a process was still there when its open files were listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcessScan {
    Present,
    Gone,
}

/// Counts the descriptors `pid` holds on /dev/cpu_dma_latency and records it as a holder if
/// there are any; a process whose descriptors cannot be read is counted as not scanned.
fn note_dma_latency_holder(facts: &mut AuditFacts, pid: u32) -> ProcessScan {
    match std::fs::read_dir(format!("/proc/{pid}/fd")) {
        Ok(entries) => {
            let mut descriptors = 0u32;
            for entry in entries.flatten() {
                let Ok(target) = std::fs::read_link(entry.path()) else {
                    continue;
                };
                if target != Path::new(crate::dma_latency::PATH) {
                    continue;
                }
                descriptors += 1;
            }
            if descriptors > 0 {
                facts.cpu_dma_latency_holders.push(LatencyHolder {
                    process: process_name(pid),
                    descriptors,
                });
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => return ProcessScan::Gone,
        Err(_) => facts.processes_not_scanned += 1,
    }
    ProcessScan::Present
}

/// Counts `pid`'s main thread's timer slack as its policy's default, or records it as unusual.
fn note_timer_slack(facts: &mut AuditFacts, pid: u32) {
    match read_timer_slack_of(pid) {
        Ok(slack) => {
            let policy = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| parse_stat_policy(&stat))
                .map_or_else(|| "SCHED_OTHER".to_owned(), |stat| stat.policy);
            let realtime = matches!(
                policy.as_str(),
                "SCHED_FIFO" | "SCHED_RR" | "SCHED_DEADLINE"
            );
            let default = if realtime { 0 } else { DEFAULT_TIMER_SLACK_NS };
            if slack == default {
                facts.timer_slack_default_count += 1;
            } else {
                facts.unusual_timer_slack.push(SlackFact {
                    process: process_name(pid),
                    timer_slack_ns: slack,
                    realtime,
                });
            }
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(_) => facts.timer_slack_unreadable += 1,
    }
}

/// Records `pid` with its policy and priority if it is a threaded interrupt handler (`irq/…`).
fn note_irq_thread(facts: &mut AuditFacts, pid: u32) {
    let Some(comm) = read_trimmed(format!("/proc/{pid}/comm")) else {
        return;
    };
    if !comm.starts_with("irq/") {
        return;
    }
    if let Some(StatPolicy { policy, priority }) =
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| parse_stat_policy(&stat))
    {
        facts.irq_threads.push(IrqThreadFact {
            pid,
            comm,
            policy,
            priority,
        });
    }
}

/// Reads each CPU's fair server (runtime per period) from debugfs, or says why it cannot.
fn read_fair_servers(facts: &mut AuditFacts) {
    let fair_root = Path::new("/sys/kernel/debug/sched/fair_server");
    match std::fs::read_dir(fair_root) {
        Ok(entries) => {
            let mut servers: Vec<FairServerFact> = entries
                .flatten()
                .filter_map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    let cpu: u32 = name.strip_prefix("cpu")?.parse().ok()?;
                    Some(FairServerFact {
                        cpu,
                        runtime_ns: read_number(entry.path().join("runtime"))?,
                        period_ns: read_number(entry.path().join("period"))?,
                    })
                })
                .collect();
            servers.sort_by_key(|server| server.cpu);
            facts.fair_servers = Some(servers);
        }
        Err(error) => facts.skipped.push(format!(
            "the fair server's share: {}: {error}{}",
            fair_root.display(),
            if Path::new("/sys/kernel/debug/sched").exists() {
                " (a kernel before 6.12 has none)"
            } else {
                " (debugfs is not mounted, or not readable without root)"
            }
        )),
    }
}

/// Reads each CPU's frequency governor, the cpufreq driver and the boost settings.
fn read_cpu_frequency(facts: &mut AuditFacts, cpu_root: &Path) {
    let mut cpus: Vec<u32> = std::fs::read_dir(cpu_root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| {
                    entry
                        .file_name()
                        .to_str()?
                        .strip_prefix("cpu")?
                        .parse()
                        .ok()
                })
                .collect()
        })
        .unwrap_or_default();
    cpus.sort_unstable();
    for &cpu in &cpus {
        if let Some(governor) =
            read_trimmed(cpu_root.join(format!("cpu{cpu}/cpufreq/scaling_governor")))
        {
            facts.cpufreq_governors.push((cpu, governor));
        }
    }
    facts.cpufreq_driver = read_trimmed(cpu_root.join("cpu0/cpufreq/scaling_driver"));
    facts.cpufreq_boost = read_trimmed(cpu_root.join("cpufreq/boost"));
    facts.intel_no_turbo = read_trimmed(cpu_root.join("intel_pstate/no_turbo"));
    if facts.cpufreq_governors.is_empty() {
        facts.skipped.push(
            "cpufreq: no CPU has a frequency governor (no cpufreq driver: a VM, or fixed frequency)"
                .to_owned(),
        );
    }
}

/// Reads the cpuidle driver and governor and CPU 0's idle states with their exit latencies.
fn read_idle_states(facts: &mut AuditFacts, cpu_root: &Path) {
    facts.cpuidle_driver = read_trimmed(cpu_root.join("cpuidle/current_driver"));
    facts.cpuidle_governor = read_trimmed(cpu_root.join("cpuidle/current_governor"))
        .or_else(|| read_trimmed(cpu_root.join("cpuidle/current_governor_ro")));
    let mut state_index = 0;
    while let Some(name) =
        read_trimmed(cpu_root.join(format!("cpu0/cpuidle/state{state_index}/name")))
    {
        let base = cpu_root.join(format!("cpu0/cpuidle/state{state_index}"));
        facts.idle_states.push(IdleStateFact {
            name,
            exit_latency_us: read_number(base.join("latency")).unwrap_or(0),
            disabled: read_trimmed(base.join("disable")).as_deref() == Some("1"),
        });
        state_index += 1;
    }
}

/// Reads HZ, the preemption model and NO_HZ from the kernel's build options, or says they are
/// not available.
fn read_kernel_config(facts: &mut AuditFacts) {
    match kernel_config() {
        Some(config) => {
            facts.config_hz = config_value(&config, "CONFIG_HZ").and_then(|hz| hz.parse().ok());
            facts.config_preemption = [
                ("CONFIG_PREEMPT_RT", "rt"),
                ("CONFIG_PREEMPT_LAZY", "lazy"),
                ("CONFIG_PREEMPT", "full"),
                ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
                ("CONFIG_PREEMPT_NONE", "none"),
            ]
            .iter()
            .find(|(key, _)| config_value(&config, key) == Some("y"))
            .map(|(_, model)| (*model).to_owned());
            facts.config_no_hz = Some(
                if config_value(&config, "CONFIG_NO_HZ_FULL") == Some("y") {
                    "full"
                } else if config_value(&config, "CONFIG_NO_HZ_IDLE") == Some("y") {
                    "idle"
                } else {
                    "periodic"
                }
                .to_owned(),
            );
        }
        None => facts.skipped.push(
            "HZ and NO_HZ: no kernel configuration (/proc/config.gz or /boot/config-RELEASE)"
                .to_owned(),
        ),
    }
}

/// Reads each interrupt's name and CPU affinity (requested and effective).
fn read_irq_affinities(facts: &mut AuditFacts) {
    match std::fs::read_to_string("/proc/interrupts") {
        Ok(text) => {
            for InterruptLine { irq, name } in parse_interrupts(&text) {
                let base = format!("/proc/irq/{irq}");
                let Some(affinity) = read_trimmed(format!("{base}/smp_affinity_list")) else {
                    continue;
                };
                facts.irqs.push(IrqFact {
                    irq,
                    name,
                    affinity,
                    effective_affinity: read_trimmed(format!("{base}/effective_affinity_list")),
                });
            }
        }
        Err(error) => facts
            .skipped
            .push(format!("IRQ affinities: /proc/interrupts: {error}")),
    }
}

/// Reads the memory settings that stall a task: transparent huge pages, KSM and swap.
fn read_memory_settings(facts: &mut AuditFacts) {
    let mm = Path::new("/sys/kernel/mm");
    facts.thp_enabled = read_trimmed(mm.join("transparent_hugepage/enabled"));
    facts.thp_defrag = read_trimmed(mm.join("transparent_hugepage/defrag"));
    facts.khugepaged_defrag = read_trimmed(mm.join("transparent_hugepage/khugepaged/defrag"));
    facts.khugepaged_scan_sleep_ms =
        read_number(mm.join("transparent_hugepage/khugepaged/scan_sleep_millisecs"));
    facts.ksm_run = read_trimmed(mm.join("ksm/run"));
    facts.ksm_pages_sharing = read_number(mm.join("ksm/pages_sharing"));
    facts.swap_devices = std::fs::read_to_string("/proc/swaps")
        .ok()
        .map(|text| text.lines().skip(1).map(str::to_owned).collect());
    facts.swappiness = read_number("/proc/sys/vm/swappiness");
}

fn rtlab_sys_is_root() -> bool {
    // SAFETY: geteuid has no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_policy_is_read_past_a_name_with_spaces_and_parentheses() {
        let mut fields = vec!["S"; 50];
        for (index, field) in fields.iter_mut().enumerate() {
            *field = match index + 3 {
                19 => "-5",
                40 => "50",
                41 => "1",
                _ => "0",
            };
        }
        let stat = format!("42 (irq/9-a (b)) {}", fields.join(" "));
        assert_eq!(
            parse_stat_policy(&stat),
            Some(StatPolicy {
                policy: "SCHED_FIFO".into(),
                priority: 50
            })
        );
        assert_eq!(parse_stat_policy("42 (x"), None);
    }

    #[test]
    fn interrupt_names_follow_the_counts_chip_and_hardware_number() {
        let text = "           CPU0       CPU1\n  0:         26          0   IO-APIC   2-edge      timer\n 24:          0       1234   PCI-MSI 49152-edge      virtio0-config\nNMI:          0          0   Non-maskable interrupts\n";
        assert_eq!(
            parse_interrupts(text),
            vec![
                InterruptLine {
                    irq: 0,
                    name: "timer".to_owned()
                },
                InterruptLine {
                    irq: 24,
                    name: "virtio0-config".to_owned()
                }
            ]
        );
    }

    #[test]
    fn the_audit_reads_this_machine_without_failing() {
        let facts = collect();
        assert!(!facts.preemption.is_empty());
        // Every unreadable part is said, never silently empty.
        if facts.cpu_dma_latency_in_force_us.is_none() {
            assert!(facts
                .skipped
                .iter()
                .any(|line| line.contains("cpu_dma_latency")));
        }
    }

    #[test]
    fn our_own_timer_slack_reads_back_through_proc() {
        std::thread::spawn(|| {
            crate::clock::set_timer_slack_ns(12_345).unwrap();
            let tid = crate::cpu::current_tid();
            assert_eq!(read_timer_slack_of(tid).unwrap(), 12_345);
            write_timer_slack_of(tid, 23_456).unwrap();
            assert_eq!(crate::clock::timer_slack_ns(), 23_456);
        })
        .join()
        .unwrap();
    }
}
