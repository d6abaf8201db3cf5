//! `rtlab tune --apply`'s and `--revert`'s words about the boot profile
//! (`rtlab_core::tune_profile`, done by rtlab-tune's `profile_apply`).

use rtlab_core::tune_profile::{ProfileApplied, ProfileReverted};

/// `--apply-profile` (at boot) without a profile: `state_file` does not exist.
pub fn nothing_at_boot(state_file: &std::path::Path) -> String {
    format!(
        "no tune profile ({} does not exist): nothing to apply\n",
        state_file.display()
    )
}

/// What `--apply-profile` (at boot) wrote of the profile's values sysctl cannot hold, and what
/// the kernel refused.
pub fn applied_at_boot(applied: &[String], refused: &[String]) -> String {
    let mut text = format!(
        "applied: {}\n",
        if applied.is_empty() {
            "nothing (sysctl holds the rest)".to_owned()
        } else {
            applied.join(", ")
        }
    );
    if !refused.is_empty() {
        text.push_str(&format!("refused: {}\n", refused.join(", ")));
    }
    text
}

/// What `--apply` did, starting with an empty line.
pub fn applied(applied: &ProfileApplied) -> String {
    let mut text = String::from("\n");
    let written = match applied {
        ProfileApplied::Interrupted => {
            text.push_str("--apply: interrupted, so no profile was written\n");
            return text;
        }
        ProfileApplied::NothingKept { placebo_kept } => {
            if *placebo_kept {
                text.push_str(PLACEBO_KEPT);
            }
            text.push_str(
                "--apply: no setting was kept, so no profile was written (nothing changes at boot)\n",
            );
            return text;
        }
        ProfileApplied::Written(written) => written,
    };
    if written.placebo_kept {
        text.push_str(PLACEBO_KEPT);
    }
    text.push_str(&format!(
        "--apply: kept {}; written:\n",
        written.kept.join(", ")
    ));
    for path in &written.written {
        text.push_str(&format!("  {}\n", path.display()));
    }
    if !written.applied.is_empty() {
        text.push_str(&format!("in force now: {}\n", written.applied.join(", ")));
    }
    if !written.refused.is_empty() {
        text.push_str(&format!(
            "refused by the kernel (left as they were): {}\n",
            written.refused.join(", ")
        ));
    }
    if let Some(tuned) = &written.tuned_profile {
        text.push_str(&format!(
            "tuned is installed: the same settings are its profile {tuned} (tuned-adm profile {tuned} selects it; the files above hold them at boot without tuned)\n"
        ));
    }
    if written.systemd_manages {
        text.push_str(written.reload_warning.as_deref().unwrap_or_default());
        if let Some(unit) = &written.holder_unit {
            text.push_str(written.start_warning.as_deref().unwrap_or_default());
            text.push_str(&format!(
                "cpu_dma_latency is held at 0 by {unit} from now on\n"
            ));
        }
    } else if let Some(unit) = &written.holder_unit {
        text.push_str(&format!(
            "cpu_dma_latency is held at 0 by {unit} from the next boot on (systemd does not manage this system now, so it was not started)\n"
        ));
    }
    text.push_str("undo: rtlab tune --revert\n");
    text
}

const PLACEBO_KEPT: &str =
    "--apply: the placebo was kept (noise, see docs/tune.md); it is never part of a profile\n";

/// What the profile half of `--revert` did.
pub fn reverted(reverted: &ProfileReverted) -> String {
    let removed = match reverted {
        ProfileReverted::NoProfile { state_file } => {
            return format!(
                "no tune profile to remove ({} does not exist)\n",
                state_file.display()
            )
        }
        ProfileReverted::Removed(removed) => removed,
    };
    let mut text = String::new();
    text.push_str(removed.stop_warning.as_deref().unwrap_or_default());
    if removed.systemd_manages {
        text.push_str(removed.reload_warning.as_deref().unwrap_or_default());
    } else if !removed.units.is_empty() {
        text.push_str(&format!(
            "systemd does not manage this system now: {} removed as files only (nothing to stop)\n",
            removed.units.join(", ")
        ));
    }
    text.push_str("profile removed:\n");
    for path in &removed.removed {
        text.push_str(&format!("  {}\n", path.display()));
    }
    if !removed.restored.is_empty() {
        text.push_str(&format!(
            "put back as before the profile: {}\n",
            removed.restored.join(", ")
        ));
    }
    if let Some(tuned) = &removed.tuned_was_selected {
        text.push_str(&format!(
            "warning: tuned's active profile was {tuned}, now removed: select another (tuned-adm profile NAME, or tuned-adm off)\n"
        ));
    }
    text
}
