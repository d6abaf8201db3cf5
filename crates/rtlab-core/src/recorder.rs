//! Which kernel-event recorder a command uses (`--recorder auto|bpf|tracefs`): one choice for
//! `rtlab run --explain` (rtlab-session) and `rtlab trace record`/`watch` (rtlab-trace).

/// The recorder a command asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecorderChoice {
    /// BPF when it loads, else tracefs, saying why (each command has its own reasons to prefer
    /// tracefs: call stacks for `--explain`, cycle markers for `rtlab trace`).
    #[default]
    Auto,
    Bpf,
    Tracefs,
}

impl RecorderChoice {
    /// The flag's word: `auto`, `bpf`, `tracefs`.
    pub fn name(self) -> &'static str {
        match self {
            RecorderChoice::Auto => "auto",
            RecorderChoice::Bpf => "bpf",
            RecorderChoice::Tracefs => "tracefs",
        }
    }

    /// The flag's word read back (`auto`, `bpf`, `tracefs`).
    pub fn from_name(word: &str) -> Option<RecorderChoice> {
        [
            RecorderChoice::Auto,
            RecorderChoice::Bpf,
            RecorderChoice::Tracefs,
        ]
        .into_iter()
        .find(|choice| choice.name() == word)
    }
}
