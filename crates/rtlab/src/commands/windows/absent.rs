//! A subcommand the Windows build does not have (compiled once per such command, under its
//! name, by `#[cfg_attr(windows, path = …)]` in `commands/mod.rs`). It takes any arguments and
//! says plainly why the command is absent and where it runs: exit code 2, nothing measured,
//! nothing pretended.

use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    pub rest: Vec<String>,
}

pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    // The subcommand's name is the module's.
    let module = module_path!().rsplit("::").next().unwrap_or("this command");
    Err(crate::exit::input(format!(
        "rtlab {} is not available on Windows: {}",
        module.replace('_', "-"),
        rtlab_render::windows_absent::absent_command(module)
    )))
}
