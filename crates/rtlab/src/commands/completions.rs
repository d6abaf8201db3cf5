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
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = super::Cli::command();
    let mut out = std::io::stdout().lock();
    let shell = match args.target {
        Target::Man => {
            clap_mangen::Man::new(command).render(&mut out)?;
            return Ok(ExitCode::SUCCESS);
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
