//! The tuned profile `rtlab tune --apply` writes beside the sysctl.d file and the units when
//! tuned is installed (`/etc/tuned` exists under the profile's root): `/etc/tuned/rtlab/
//! tuned.conf`, the kept settings in tuned's own plugins, so that a machine run by tuned can
//! select them (`tuned-adm profile rtlab`) instead of fighting them.
//!
//! Each plugin and option name is tuned's (checked in redhat-performance/tuned's
//! `tuned/plugins/`, as of 2.24): `[cpu] force_latency` holds `/dev/cpu_dma_latency` (a plain
//! number is µs, written as is); `[vm] transparent_hugepages` and `transparent_hugepage.defrag`;
//! `[sysctl]` takes `key = value`; `[sysfs]` writes a `/sys` path (khugepaged's defrag, the
//! workqueue cpumask, as tuned's own realtime profile does); `[irq] affinity` (tuned 2.23 and
//! later) sets every IRQ's affinity to a CPU list. No `[script]`: every kept setting has a plugin.
//! No `[bootloader]`: rtlab tune keeps no boot-time setting (those it only suggests).

use rtlab_sys::tunables::Knob;
use std::path::Path;

/// tuned's configuration directory, relative to the root: when it exists, tuned is installed.
pub const TUNED_DIR: &str = "etc/tuned";
/// The profile's directory and file, relative to the root.
pub const TUNED_PROFILE_DIR: &str = "etc/tuned/rtlab";
pub const TUNED_FILE: &str = "etc/tuned/rtlab/tuned.conf";
/// The profile's name, as `tuned-adm profile` takes it.
pub const TUNED_PROFILE: &str = "rtlab";
/// The file where tuned records the profile it applies, relative to the root.
pub const TUNED_ACTIVE_PROFILE: &str = "etc/tuned/active_profile";

/// True when tuned is installed under `root` (its configuration directory exists).
pub fn tuned_installed(root: &Path) -> bool {
    root.join(TUNED_DIR).is_dir()
}

/// True when the tuned installed under `root` has the `[irq]` plugin (tuned 2.23 and later; Debian
/// 12's tuned 2.20 has not, and logs "failed to initialize plugin irq" for such a section): its
/// `plugins/plugin_irq.py` in a Python `dist-packages` or `site-packages` directory.
pub fn tuned_has_irq_plugin(root: &Path) -> bool {
    let python_dirs = [
        "usr/lib/python3",
        "usr/lib64/python3",
        "usr/local/lib/python3",
    ];
    let versioned = |base: &str| -> Vec<std::path::PathBuf> {
        let (parent, prefix) = base.rsplit_once('/').unwrap_or(("", base));
        std::fs::read_dir(root.join(parent))
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok())
                    .filter(|entry| entry.file_name().to_string_lossy().starts_with(prefix))
                    .map(|entry| entry.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    python_dirs
        .iter()
        .flat_map(|base| versioned(base))
        .any(|python| {
            ["dist-packages", "site-packages"].iter().any(|packages| {
                python
                    .join(packages)
                    .join("tuned/plugins/plugin_irq.py")
                    .is_file()
            })
        })
}

/// True when tuned's active profile (under `root`) is rtlab's.
pub fn tuned_selects_rtlab(root: &Path) -> bool {
    std::fs::read_to_string(root.join(TUNED_ACTIVE_PROFILE))
        .is_ok_and(|active| active.split_whitespace().any(|name| name == TUNED_PROFILE))
}

/// The tuned plugin and option of a knob.
fn section_of(knob: Knob) -> (&'static str, String) {
    match knob {
        Knob::ThpEnabled => ("vm", "transparent_hugepages".into()),
        Knob::ThpDefrag => ("vm", "transparent_hugepage.defrag".into()),
        Knob::IrqAffinity(_) => ("irq", "affinity".into()),
        other => match other.sysctl_key() {
            Some(key) => ("sysctl", key),
            None => ("sysfs", other.path().display().to_string()),
        },
    }
}

/// `tuned.conf`: the kept settings (`kept`, by name; `cpu_dma_latency` among them when
/// `cpu_dma_latency`) as tuned's plugins hold them, each knob with its profile's value, after
/// `header_comment` (the profile's, naming who wrote it and how to undo it). Without tuned's
/// `[irq]` plugin (`irq_plugin` false) IRQ affinities are left to rtlab-tune.service, and the
/// file says so.
pub fn tuned_text(
    header_comment: &str,
    kept: &[&str],
    cpu_dma_latency: bool,
    values: &[(Knob, &str)],
    irq_plugin: bool,
) -> String {
    let mut sections: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut add = |section: &'static str, line: String| {
        match sections.iter_mut().find(|(name, _)| *name == section) {
            // Every IRQ gets the same CPU list: tuned's [irq] sets them all with one line.
            Some((_, lines)) if lines.contains(&line) => {}
            Some((_, lines)) => lines.push(line),
            None => sections.push((section, vec![line])),
        }
    };
    if cpu_dma_latency {
        add("cpu", "force_latency=0".into());
    }
    let mut irq_left_to_the_unit = false;
    for (knob, value) in values {
        if matches!(knob, Knob::IrqAffinity(_)) && !irq_plugin {
            irq_left_to_the_unit = true;
            continue;
        }
        let (section, option) = section_of(*knob);
        add(section, format!("{option}={value}"));
    }
    let mut text = header_comment.to_owned();
    text.push_str(&format!(
        "# Select it: tuned-adm profile {TUNED_PROFILE}. The sysctl.d file and rtlab's units hold the same values at boot without tuned.\n"
    ));
    if irq_left_to_the_unit {
        text.push_str("# IRQ affinities are not here: this tuned has no [irq] plugin (tuned 2.23 and later); rtlab-tune.service sets them at boot.\n");
    }
    if sections.iter().any(|(name, _)| *name == "irq") {
        text.push_str("# [irq] needs tuned 2.23 or later; it also sets /proc/irq/default_smp_affinity (the IRQs to come).\n");
    }
    text.push_str(&format!(
        "\n[main]\nsummary=rtlab tune: the settings measured to lower real-time latency here ({})\n",
        kept.join(", ")
    ));
    for (section, lines) in sections {
        text.push_str(&format!("\n[{section}]\n"));
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_knob_goes_to_tuneds_plugin_for_it() {
        assert_eq!(section_of(Knob::ThpEnabled).0, "vm");
        assert_eq!(section_of(Knob::ThpDefrag).1, "transparent_hugepage.defrag");
        assert_eq!(
            section_of(Knob::TimerMigration),
            ("sysctl", "kernel.timer_migration".to_owned())
        );
        assert_eq!(
            section_of(Knob::KhugepagedDefrag),
            (
                "sysfs",
                "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag".to_owned()
            )
        );
        assert_eq!(
            section_of(Knob::WorkqueueCpumask),
            ("sysfs", "/sys/devices/virtual/workqueue/cpumask".to_owned())
        );
        assert_eq!(
            section_of(Knob::IrqAffinity(24)),
            ("irq", "affinity".into())
        );
    }

    /// Debian 12's tuned (2.20) has no `[irq]` plugin: a section for it is an error in tuned's
    /// log and sets nothing, so IRQ affinities are left to rtlab-tune.service there.
    #[test]
    fn irq_affinity_goes_to_tuned_only_when_its_irq_plugin_is_installed() {
        let values = [(Knob::IrqAffinity(24), "0"), (Knob::TimerMigration, "0")];
        let with = tuned_text("# h\n", &["irq_affinity"], false, &values, true);
        assert!(with.contains("[irq]\naffinity=0\n"), "{with}");
        let without = tuned_text("# h\n", &["irq_affinity"], false, &values, false);
        assert!(!without.contains("\n[irq]\n"), "{without}");
        assert!(
            without.contains("rtlab-tune.service sets them"),
            "{without}"
        );
        assert!(without.contains("kernel.timer_migration=0"), "{without}");

        let root = tempfile::tempdir().unwrap();
        assert!(!tuned_has_irq_plugin(root.path()));
        let plugins = root
            .path()
            .join("usr/lib/python3/dist-packages/tuned/plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::write(plugins.join("plugin_vm.py"), "").unwrap();
        assert!(!tuned_has_irq_plugin(root.path()), "tuned 2.20's plugins");
        std::fs::write(plugins.join("plugin_irq.py"), "").unwrap();
        assert!(tuned_has_irq_plugin(root.path()));
    }
}
