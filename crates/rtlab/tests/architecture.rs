//! The crate graph DESIGN.md draws, checked on every test run (`cargo metadata`): a crate depends
//! only on the crates below it in the layer table, every `rtlab-*` crate is in that table (a new
//! crate must be placed there, here and in DESIGN.md), and only `rtlab-sys` (plus the siblings
//! listed with their reason) depends on `libc`.

use serde_json::Value;
use std::collections::BTreeMap;

/// DESIGN.md's layer table: each crate and the workspace crates it may depend on.
const LAYERS: &[(&str, &[&str])] = &[
    ("rtlab-core", &[]),
    ("rtlab-sys", &["rtlab-core"]),
    // The BPF recorder's programs and loader: talks to the kernel like rtlab-sys (a sibling with
    // its rules), through aya's safe API, so it needs neither unsafe nor libc.
    ("rtlab-bpf", &[]),
    ("rtlab-probe", &["rtlab-core", "rtlab-sys"]),
    ("rtlab-trace", &["rtlab-core", "rtlab-sys", "rtlab-bpf"]),
    (
        "rtlab-apptrace",
        &["rtlab-core", "rtlab-sys", "rtlab-bpf", "rtlab-trace"],
    ),
    ("rtlab-analysis", &["rtlab-core"]),
    ("rtlab-sched", &["rtlab-core", "rtlab-sys"]),
    ("rtlab-daemon", &["rtlab-core", "rtlab-sys", "rtlab-sched"]),
    ("rtlab-client", &["rtlab-core"]),
    ("rtlab-import", &["rtlab-core"]),
    // Outputs named only when complete: rtlab-sys's O_TMPFILE files.
    ("rtlab-store", &["rtlab-core", "rtlab-sys"]),
    (
        "rtlab-session",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-probe",
            "rtlab-trace",
            "rtlab-analysis",
            "rtlab-sched",
        ],
    ),
    (
        "rtlab-workload",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-probe",
            "rtlab-trace",
            "rtlab-sched",
            "rtlab-client",
            "rtlab-session",
        ],
    ),
    (
        "rtlab-render",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-trace",
            "rtlab-analysis",
            "rtlab-sched",
            "rtlab-session",
            "rtlab-probe",
            "rtlab-store",
        ],
    ),
];

/// The binary crate: it may use every library.
const CLI: &str = "rtlab";

/// Test-only edges to a sibling, each with the reason; a normal dependency never gets one.
const DEV_SIBLINGS: &[(&str, &str, &str)] = &[
    (
        "rtlab-sched",
        "rtlab-trace",
        "the root supply tests and examples/supply.rs measure what a reserved thread received from sched_switch",
    ),
    (
        "rtlab-sched",
        "rtlab-analysis",
        "the same tests compute the sliding-window supply of those runs",
    ),
    (
        "rtlab-bpf",
        "rtlab-sys",
        "the root attach tests pin their thread to a CPU and check the kernel's BPF statistics switch",
    ),
    (
        "rtlab-daemon",
        "rtlab-client",
        "the hostile-client and C ABI tests talk to a daemon through the real client",
    ),
];

/// Crates besides `rtlab-sys` allowed to depend on `libc`, and why.
const LIBC_ALLOWED: &[(&str, &str)] = &[
    ("rtlab-sys", "the one crate that talks to the kernel"),
    (
        "rtlab-client",
        "its C ABI (cdylib, include/rtlab.h) exchanges C types; same unsafe rules as rtlab-sys",
    ),
];

/// Each workspace package with its dependencies as (name, kind), kind `normal`, `dev` or `build`.
fn workspace_dependencies() -> BTreeMap<String, Vec<(String, String)>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("metadata is JSON");
    metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|package| {
            let dependencies = package["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .map(|dependency| {
                    (
                        dependency["name"].as_str().expect("name").to_owned(),
                        dependency["kind"].as_str().unwrap_or("normal").to_owned(),
                    )
                })
                .collect();
            (
                package["name"].as_str().expect("name").to_owned(),
                dependencies,
            )
        })
        .collect()
}

type Graph = BTreeMap<String, Vec<(String, String)>>;

/// Every edge that goes upward or leaves the table, in words.
fn upward_edges(packages: &Graph) -> Vec<String> {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for (package, dependencies) in packages {
        if package == CLI {
            continue;
        }
        let Some(allowed) = layers.get(package.as_str()) else {
            problems.push(format!(
                "{package} is not in the layer table (DESIGN.md and this test)"
            ));
            continue;
        };
        for (dependency, kind) in dependencies {
            let is_workspace_crate = dependency == CLI || dependency.starts_with("rtlab-");
            let allowed_in_tests = kind == "dev"
                && DEV_SIBLINGS
                    .iter()
                    .any(|(from, to, _)| *from == package.as_str() && *to == dependency.as_str());
            if is_workspace_crate && !allowed.contains(&dependency.as_str()) && !allowed_in_tests {
                problems.push(format!(
                    "{package} depends on {dependency} ({kind}), which is not below it"
                ));
            }
        }
    }
    problems
}

/// Crates that depend on libc directly (not only in tests) without an allowance.
fn libc_users(packages: &Graph) -> Vec<String> {
    let allowed: BTreeMap<&str, &str> = LIBC_ALLOWED.iter().copied().collect();
    packages
        .iter()
        .filter(|(package, dependencies)| {
            !allowed.contains_key(package.as_str())
                && dependencies
                    .iter()
                    .any(|(dependency, kind)| dependency == "libc" && kind != "dev")
        })
        .map(|(package, _)| package.clone())
        .collect()
}

#[test]
fn no_crate_depends_upward() {
    let packages = workspace_dependencies();
    let problems = upward_edges(&packages);
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        packages.contains_key(CLI)
            && packages.contains_key("rtlab-session")
            && packages.contains_key("rtlab-render")
    );
}

#[test]
fn only_rtlab_sys_depends_on_libc() {
    let offenders = libc_users(&workspace_dependencies());
    assert!(
        offenders.is_empty(),
        "depend on libc directly (only rtlab-sys may): {offenders:?}"
    );
}

/// The Windows side of the same invariant: only `rtlab-sys` depends on `windows-sys` (the Win32
/// and native API), so every Windows `unsafe` block is there too.
#[test]
fn only_rtlab_sys_depends_on_windows_sys() {
    let offenders: Vec<String> = workspace_dependencies()
        .into_iter()
        .filter(|(package, dependencies)| {
            package != "rtlab-sys"
                && dependencies
                    .iter()
                    .any(|(dependency, _)| dependency == "windows-sys")
        })
        .map(|(package, _)| package)
        .collect();
    assert!(
        offenders.is_empty(),
        "depend on windows-sys directly (only rtlab-sys may): {offenders:?}"
    );
    let sys = &workspace_dependencies()["rtlab-sys"];
    assert!(sys
        .iter()
        .any(|(dependency, _)| dependency == "windows-sys"));
}

/// The checks themselves: a graph with an upward edge, an unknown crate or a stray libc is caught.
#[test]
fn the_checks_catch_what_they_guard() {
    let edge = |name: &str, kind: &str| (name.to_owned(), kind.to_owned());
    let graph: Graph = [
        (
            "rtlab-probe",
            vec![edge("rtlab-core", "normal"), edge("rtlab-trace", "normal")],
        ),
        ("rtlab-analysis", vec![edge("libc", "normal")]),
        ("rtlab-store", vec![edge("libc", "dev")]),
        ("rtlab-widget", vec![]),
        (
            CLI,
            vec![edge("rtlab-session", "normal"), edge("libc", "normal")],
        ),
    ]
    .into_iter()
    .map(|(name, dependencies)| (name.to_owned(), dependencies))
    .collect();
    let problems = upward_edges(&graph);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("rtlab-probe depends on rtlab-trace"));
    assert!(problems[1].contains("rtlab-widget is not in the layer table"));
    assert_eq!(
        libc_users(&graph),
        vec!["rtlab".to_owned(), "rtlab-analysis".to_owned()]
    );
}
