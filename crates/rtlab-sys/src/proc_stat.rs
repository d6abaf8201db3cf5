//! /proc/stat and /proc/softirqs: per-CPU time by kind (steal in particular: time the hypervisor
//! ran something else while this virtual CPU wanted to run) and softirq counts by vector.

use std::collections::BTreeMap;
use std::io;

/// Per-CPU cumulative times from /proc/stat, converted to ns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user_ns: u64,
    pub nice_ns: u64,
    pub system_ns: u64,
    pub idle_ns: u64,
    pub iowait_ns: u64,
    pub irq_ns: u64,
    pub softirq_ns: u64,
    pub steal_ns: u64,
}

fn ticks_per_second() -> u64 {
    // SAFETY: sysconf takes a constant and has no side effects.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Parses /proc/stat text: CPU index → times. The aggregate `cpu` line is skipped.
pub fn parse_cpu_times(text: &str, ticks_per_second: u64) -> BTreeMap<usize, CpuTimes> {
    let to_ns = |ticks: u64| ticks.saturating_mul(1_000_000_000) / ticks_per_second.max(1);
    let mut times = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(name) = fields.next() else { continue };
        let Some(index) = name
            .strip_prefix("cpu")
            .and_then(|rest| rest.parse::<usize>().ok())
        else {
            continue;
        };
        let values: Vec<u64> = fields.map(|field| field.parse().unwrap_or(0)).collect();
        let value = |position: usize| values.get(position).copied().map(to_ns).unwrap_or(0);
        times.insert(
            index,
            CpuTimes {
                user_ns: value(0),
                nice_ns: value(1),
                system_ns: value(2),
                idle_ns: value(3),
                iowait_ns: value(4),
                irq_ns: value(5),
                softirq_ns: value(6),
                steal_ns: value(7),
            },
        );
    }
    times
}

/// Reads the per-CPU times now.
pub fn cpu_times() -> io::Result<BTreeMap<usize, CpuTimes>> {
    Ok(parse_cpu_times(
        &std::fs::read_to_string("/proc/stat")?,
        ticks_per_second(),
    ))
}

/// Parses /proc/softirqs: vector name (`NET_RX`, `TIMER`, …) → per-CPU counts.
pub fn parse_softirqs(text: &str) -> BTreeMap<String, Vec<u64>> {
    let mut counts = BTreeMap::new();
    for line in text.lines().skip(1) {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let per_cpu = rest
            .split_whitespace()
            .map(|field| field.parse().unwrap_or(0))
            .collect();
        counts.insert(name.trim().to_owned(), per_cpu);
    }
    counts
}

pub fn softirq_counts() -> io::Result<BTreeMap<String, Vec<u64>>> {
    Ok(parse_softirqs(&std::fs::read_to_string("/proc/softirqs")?))
}

/// Context switches since boot (the `ctxt` line of /proc/stat).
pub fn context_switches() -> io::Result<u64> {
    let text = std::fs::read_to_string("/proc/stat")?;
    text.lines()
        .find_map(|line| {
            line.strip_prefix("ctxt ")
                .and_then(|value| value.trim().parse().ok())
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "/proc/stat has no ctxt line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_lines() {
        let text = "cpu  10 0 5 100 0 0 0 0 0 0\ncpu0 4 1 2 50 3 4 5 6 0 0\ncpu1 6 0 3 50 0 0 0 7\nintr 1 2\nctxt 99\n";
        let times = parse_cpu_times(text, 100);
        assert_eq!(times.len(), 2);
        assert_eq!(times[&0].steal_ns, 60_000_000);
        assert_eq!(times[&0].softirq_ns, 50_000_000);
        assert_eq!(times[&1].steal_ns, 70_000_000);
        assert_eq!(times[&1].user_ns, 60_000_000);
    }

    #[test]
    fn parses_softirqs() {
        let text = "                    CPU0       CPU1\n          HI:          1          0\n      NET_RX:        120         30\n";
        let counts = parse_softirqs(text);
        assert_eq!(counts["NET_RX"], vec![120, 30]);
        assert_eq!(counts["HI"], vec![1, 0]);
    }

    #[test]
    fn reads_live_files() {
        assert!(!cpu_times().unwrap().is_empty());
        assert!(softirq_counts().unwrap().contains_key("TIMER"));
        assert!(context_switches().unwrap() > 0);
    }
}
