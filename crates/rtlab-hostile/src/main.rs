//! `rtlab-hostile`: the harness's command line. `run` attacks a fresh daemon and prints what it
//! found (exit 0: no violation, 1: a violation, 3: the harness itself failed); `victim` and
//! `attacker` are the roles of its child processes.

use clap::{Parser, Subcommand};
use rtlab_hostile::roles::{self, AttackerArgs};
use rtlab_hostile::world::Identity;
use rtlab_hostile::RunConfig;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(about = "Hostile local users against the real rtlab daemon, checked from the kernel")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Starts a daemon and attacks it for SECONDS (needs root).
    Run {
        /// How long the attackers send.
        #[arg(long, default_value_t = 30.0)]
        seconds: f64,
        /// Seeds every attacker's requests; printed by every run, so a run can be repeated.
        #[arg(long)]
        seed: Option<u64>,
        /// The `rtlab` binary whose daemon is attacked (default: beside this one).
        #[arg(long)]
        rtlab: Option<PathBuf>,
        /// The daemon's `user_limit` (the checker holds attackers to 0.2 whatever this is: a
        /// larger one shows the checker failing).
        #[arg(long, default_value_t = 0.2)]
        daemon_user_limit: f64,
        /// Adds an attacker running as root (privileged: its changes to victims are caught,
        /// which shows the checker failing).
        #[arg(long)]
        root_attacker: bool,
        /// Goes on after a violation, counting every one (the benchmark); a daemon that exited
        /// ends the run anyway.
        #[arg(long)]
        keep_going: bool,
        /// Replays a shrinking search may make.
        #[arg(long, default_value_t = 40)]
        shrink_tries: usize,
        /// The daemon's `rtkit.user_share` (default: its user_limit; the checker holds
        /// attackers to 0.2 whatever this is: a larger one shows the checker failing).
        #[arg(long)]
        daemon_rtkit_user_share: Option<f64>,
        /// Leaves RealtimeKit1 out: no bus, no rtkit calls (the socket alone).
        #[arg(long)]
        no_rtkit: bool,
        /// Writes the report as JSON to this file (`-`: stdout).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// A victim process (a child of `run`).
    #[command(hide = true)]
    Victim {
        #[arg(long)]
        prefix: String,
        #[arg(long)]
        lifetime_seconds: u64,
        /// Asks RealtimeKit1 on this bus for SCHED_RR for thread 2 (the quiet user).
        #[arg(long, requires = "uid")]
        rtkit_bus: Option<String>,
        /// Its uid outside any user namespace (what it tells the bus).
        #[arg(long)]
        uid: Option<u32>,
    },
    /// An attacker process (a child of `run`).
    #[command(hide = true)]
    Attacker {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        tag: String,
        #[arg(long)]
        uid: u32,
        #[arg(long)]
        uid_index: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value_t = 0)]
        index: usize,
        #[arg(long)]
        senders: usize,
        #[arg(long, default_value_t = 0.0)]
        seconds: f64,
        #[arg(long, default_value_t = 20)]
        max_pause_ms: u64,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("rtlab-hostile: error: {error:#}");
            ExitCode::from(3)
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run {
            seconds,
            seed,
            rtlab,
            daemon_user_limit,
            root_attacker,
            keep_going,
            shrink_tries,
            daemon_rtkit_user_share,
            no_rtkit,
            json,
        } => {
            let binary = std::env::current_exe()?;
            let rtlab = match rtlab {
                Some(rtlab) => rtlab,
                None => binary.with_file_name("rtlab"),
            };
            let seed = seed.unwrap_or_else(rand::random);
            let mut config = RunConfig::standard(binary, rtlab, seed, seconds);
            config.cast.daemon.user_limit = daemon_user_limit;
            config.cast.daemon.rtkit_user_share = daemon_rtkit_user_share;
            config.cast.daemon.rtkit = !no_rtkit;
            config.shrink_tries = shrink_tries;
            config.keep_going = keep_going;
            // SIGINT or SIGTERM end the attack early; the daemon is still stopped with SIGTERM
            // and every process put away.
            rtlab_sys::signals::install_stop_flag(&config.stop)?;
            if root_attacker {
                config.attackers.push(Identity {
                    uid: 0,
                    user_namespace: false,
                });
            }
            eprintln!("rtlab-hostile: seed {seed}, {seconds} s");
            // The attack's figures first: a replay may take minutes.
            let (mut report, log) = rtlab_hostile::harness::attack(&config)?;
            print!("{}", report.summary());
            if !report.passed() && config.stopped() {
                println!("interrupted: the first violation is not replayed");
            } else if !report.passed() {
                println!("replaying the first violation against a fresh daemon…");
                rtlab_hostile::harness::replay_first(&config, &mut report, &log)?;
                if config.stopped() {
                    println!("interrupted: the replay stopped early (what it found so far below)");
                }
                print!("{}", report.replay_summary());
            }
            if let Some(path) = json {
                let text = serde_json::to_string_pretty(&report)?;
                if path.as_os_str() == "-" {
                    println!("{text}");
                } else {
                    std::fs::write(&path, text + "\n")?;
                }
            }
            Ok(if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Victim {
            prefix,
            lifetime_seconds,
            rtkit_bus,
            uid,
        } => {
            let rtkit = rtkit_bus.as_deref().zip(uid);
            roles::victim(&prefix, Duration::from_secs(lifetime_seconds), rtkit)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Attacker {
            socket,
            tag,
            uid,
            uid_index,
            seed,
            index,
            senders,
            seconds,
            max_pause_ms,
        } => {
            roles::attacker(AttackerArgs {
                socket,
                tag,
                uid,
                uid_index,
                seed,
                index,
                senders,
                seconds,
                max_pause_ms,
            })?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
