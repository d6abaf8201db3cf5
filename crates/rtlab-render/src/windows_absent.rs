//! Why the Windows build lacks a command or an option of the Linux one: one plain sentence each,
//! said instead of pretending (`rtlab explain` on Windows exits 2 with the reason).

/// Why `command` (a subcommand's module name, `buffer_experiment`) has no Windows counterpart.
pub fn absent_command(command: &str) -> &'static str {
    match command {
        "explain" => "it explains late wake-ups from Linux kernel events (tracefs, perf); rtlab has no Windows event source (ETW) yet",
        "daemon" | "reserve" | "release" | "reservations" => "CPU reservations are enforced with Linux's SCHED_DEADLINE and the rtlab daemon, which Windows does not have",
        "monitor" => "the monitor runs the Linux probe window by window",
        "buffer_experiment" => "the buffer experiment's device thread is a Linux SCHED_FIFO thread",
        "trace" => "it records with Linux tracefs; a trace-cmd trace.dat or rtlab trace file can be analysed with `rtlab trace analyze` on Linux",
        "workload" | "study" => "the workload runner uses Linux futex locks, SCHED_FIFO and SCHED_DEADLINE reservations; run the model on Linux",
        _ => "it needs Linux",
    }
}

/// An option of `rtlab run` that only the Linux build has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinuxOnlyRunOption {
    Explain,
    Load,
    CpuDmaLatency,
    Histfile,
}

impl LinuxOnlyRunOption {
    /// The first Linux-only option `rtlab run` on Windows was given, in this order: `--explain`,
    /// a load (`--load`, `--load-cmd`, `--competitor`), `--cpu-dma-latency`, `--histfile`.
    pub fn first_given(
        explain: bool,
        load: bool,
        cpu_dma_latency: bool,
        histfile: bool,
    ) -> Option<LinuxOnlyRunOption> {
        if explain {
            Some(LinuxOnlyRunOption::Explain)
        } else if load {
            Some(LinuxOnlyRunOption::Load)
        } else if cpu_dma_latency {
            Some(LinuxOnlyRunOption::CpuDmaLatency)
        } else if histfile {
            Some(LinuxOnlyRunOption::Histfile)
        } else {
            None
        }
    }

    /// `FLAGS: not available on Windows: REASON`, the refusal `rtlab run` exits with.
    pub fn refusal(self) -> String {
        format!(
            "{}: not available on Windows: {}",
            self.flags(),
            self.reason()
        )
    }

    /// The flags it stands for.
    pub fn flags(self) -> &'static str {
        match self {
            LinuxOnlyRunOption::Explain => "--explain",
            LinuxOnlyRunOption::Load => "--load/--load-cmd/--competitor",
            LinuxOnlyRunOption::CpuDmaLatency => "--cpu-dma-latency",
            LinuxOnlyRunOption::Histfile => "--histfile",
        }
    }

    /// Why Windows has no counterpart, and what to do instead.
    pub fn reason(self) -> &'static str {
        match self {
            LinuxOnlyRunOption::Explain => "explaining late wake-ups needs Linux kernel events (tracefs); rtlab has no Windows event source (ETW) yet",
            LinuxOnlyRunOption::Load => "rtlab's stressors and competitors are Linux threads and process groups; run your own load beside rtlab.exe",
            LinuxOnlyRunOption::CpuDmaLatency => "/dev/cpu_dma_latency is Linux's; on Windows the power plan decides idle states (the record names it)",
            LinuxOnlyRunOption::Histfile => "not built on Windows; `rtlab show RECORD --histfile` is not either: write --json and convert on Linux",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_absence_has_its_own_reason() {
        assert!(absent_command("reserve").contains("SCHED_DEADLINE"));
        assert!(absent_command("buffer_experiment").contains("SCHED_FIFO"));
        assert_eq!(absent_command("anything else"), "it needs Linux");
        let options = [
            LinuxOnlyRunOption::Explain,
            LinuxOnlyRunOption::Load,
            LinuxOnlyRunOption::CpuDmaLatency,
            LinuxOnlyRunOption::Histfile,
        ];
        for option in options {
            assert!(option.flags().starts_with("--"));
            assert!(!option.reason().is_empty());
        }
        assert_eq!(
            LinuxOnlyRunOption::first_given(false, true, true, false),
            Some(LinuxOnlyRunOption::Load)
        );
        assert_eq!(
            LinuxOnlyRunOption::first_given(false, false, false, false),
            None
        );
        assert_eq!(
            LinuxOnlyRunOption::Load.flags(),
            "--load/--load-cmd/--competitor"
        );
    }
}
