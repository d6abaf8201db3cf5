//! `rtlab completions SHELL|man`: generated from the one clap definition of every flag, never
//! written by hand.

use clap::CommandFactory as _;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Target {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    /// The man page (roff), e.g. `rtlab completions man > rtlab.1`
    Man,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for, or `man` for the man page
    pub target: Target,
    /// With `man`: the page of this subcommand (`rtlab completions man compare > rtlab-compare.1`)
    #[arg(value_name = "COMMAND", conflicts_with = "out_dir")]
    pub command: Option<String>,
    /// With `man`: write the page of rtlab and of every subcommand (rtlab.1, rtlab-run.1, …)
    /// into DIR instead of one page to stdout (the Debian package's pages: packaging/build-deb)
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = super::Cli::command();
    let mut out = std::io::stdout().lock();
    let shell = match args.target {
        Target::Man => {
            if let Some(directory) = &args.out_dir {
                clap_mangen::generate_to(command, directory).map_err(|error| {
                    crate::exit::input(format!("--out-dir {}: {error}", directory.display()))
                })?;
                return Ok(ExitCode::SUCCESS);
            }
            let page = match &args.command {
                None => command,
                Some(name) => {
                    // Built, a subcommand's display name is `rtlab-NAME`: the page's name.
                    command.build();
                    command
                        .find_subcommand(name)
                        .ok_or_else(|| {
                            crate::exit::input(format!("no subcommand '{name}' for its man page"))
                        })?
                        .clone()
                }
            };
            clap_mangen::Man::new(page).render(&mut out)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ if args.out_dir.is_some() => {
            return Err(crate::exit::input(
                "--out-dir is for `man`; a shell's completions go to stdout",
            ))
        }
        Target::Bash => clap_complete::Shell::Bash,
        Target::Zsh => clap_complete::Shell::Zsh,
        Target::Fish => clap_complete::Shell::Fish,
        Target::Elvish => clap_complete::Shell::Elvish,
        Target::Powershell => clap_complete::Shell::PowerShell,
    };
    clap_complete::generate(shell, &mut command, "rtlab", &mut out);
    Ok(ExitCode::SUCCESS)
}
