//! The crate graph DESIGN.md draws, checked on every test run (`cargo metadata`): a crate depends
//! only on the crates below it in the layer table, every `rtlab-*` crate is in that table (a new
//! crate must be placed there, here and in DESIGN.md), the test kit is a dev-dependency only, and
//! only `rtlab-sys` (plus the siblings listed with their reason) depends on `libc`. Only rtlab-core's
//! tracepoint table lists tracepoints by name. Inside a crate, from the sources: no modules use
//! each other, directly or around a longer loop. Across the sources: only rtlab-render writes SVG,
//! HTML and Perfetto documents; `rtlab trace`'s report types and analysis write no words; no
//! function is longer than a reader can hold.

use serde_json::Value;
use std::collections::BTreeMap;

/// DESIGN.md's layer table: each crate and the workspace crates it may depend on.
const LAYERS: &[(&str, &[&str])] = &[
    ("rtlab-core", &[]),
    ("rtlab-sys", &["rtlab-core"]),
    // The BPF recorder's programs and loader: talks to the kernel like rtlab-sys (a sibling with
    // its rules), through aya's safe API, so it needs neither unsafe nor libc; core for its plain
    // helpers (error_chain).
    ("rtlab-bpf", &["rtlab-core"]),
    ("rtlab-probe", &["rtlab-core", "rtlab-sys"]),
    // The load a run measures under: stressors, profiles, competitors. A sibling of the probe, not
    // above it: neither knows the other, the session joins them.
    ("rtlab-load", &["rtlab-core", "rtlab-sys"]),
    ("rtlab-explain", &["rtlab-core", "rtlab-sys", "rtlab-bpf"]),
    ("rtlab-analysis", &["rtlab-core"]),
    // The planner, pure: no Linux code, builds for every target (see `the_planner_is_pure`).
    ("rtlab-plan", &["rtlab-core"]),
    // The planner's enforcement on Linux threads.
    ("rtlab-sched", &["rtlab-core", "rtlab-plan", "rtlab-sys"]),
    // `rtlab trace`, the observation `reserve --auto` decides by (`auto_observe.rs`: a trace's
    // threads as rtlab-sched's `auto_reserve` reads them) and `forecast --trace`'s computation
    // (`forecast.rs`, over rtlab-analysis's rates).
    (
        "rtlab-trace",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-bpf",
            "rtlab-explain",
            "rtlab-analysis",
            "rtlab-sched",
        ],
    ),
    (
        "rtlab-daemon",
        &["rtlab-core", "rtlab-sys", "rtlab-plan", "rtlab-sched"],
    ),
    // The hostile-client harness against the daemon (a test and benchmark program, not
    // installed): it starts the `rtlab` binary and reads the kernel, depending on no daemon code.
    ("rtlab-hostile", &["rtlab-core", "rtlab-sys"]),
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
            "rtlab-load",
            "rtlab-explain",
            "rtlab-analysis",
            "rtlab-sched",
        ],
    ),
    // `rtlab monitor`: sessions window after window, exported; the daemon's grants reach it
    // through a trait the CLI implements, not through rtlab-client.
    (
        "rtlab-monitor",
        &["rtlab-core", "rtlab-sys", "rtlab-probe", "rtlab-session"],
    ),
    (
        "rtlab-workload",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-probe",
            "rtlab-explain",
            "rtlab-plan",
            "rtlab-sched",
            "rtlab-client",
            "rtlab-session",
        ],
    ),
    // `rtlab tune`: the probe's rounds through the session, judged with compare's bootstrap.
    (
        "rtlab-tune",
        &[
            "rtlab-core",
            "rtlab-sys",
            "rtlab-probe",
            "rtlab-analysis",
            "rtlab-session",
        ],
    ),
    // Renders plain data only: what it shows is in rtlab-core (records, reports) or computed by
    // rtlab-analysis, so it builds wherever they do (Windows too).
    ("rtlab-render", RENDER_READS),
    // The helpers the tests share (root checks, waits, fixtures): any crate's tests may use it
    // (a `dev` edge from any crate), nothing else may.
    (
        TEST_KIT,
        &["rtlab-core", "rtlab-sys", "rtlab-plan", "rtlab-sched"],
    ),
];

/// The test kit: every workspace crate may depend on it as a dev-dependency (its tests), none as
/// a normal or build dependency (it is never shipped).
const TEST_KIT: &str = "rtlab-testkit";

/// The only workspace crates rtlab-render may depend on, in any kind (normal, dev, build) and on
/// any platform.
const RENDER_READS: &[&str] = &["rtlab-core", "rtlab-analysis"];

/// The binary crate: it may use every library.
const CLI: &str = "rtlab";

/// Test-only edges to a sibling, each with the reason; a normal dependency never gets one.
const DEV_SIBLINGS: &[(&str, &str, &str)] = &[
    (
        "rtlab-sched",
        "rtlab-explain",
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
        "rtlab-trace",
        "rtlab-render",
        "the analysis snapshot tests pin the text, SVG and Perfetto that rtlab-render writes from a report",
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
                && (dependency == TEST_KIT
                    || DEV_SIBLINGS.iter().any(|(from, to, _)| {
                        *from == package.as_str() && *to == dependency.as_str()
                    }));
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

/// Every edge to the test kit that is not a dev-dependency, in words (the binary's included).
fn test_kit_outside_tests(packages: &Graph) -> Vec<String> {
    packages
        .iter()
        .flat_map(|(package, dependencies)| {
            dependencies
                .iter()
                .filter(|(dependency, kind)| dependency == TEST_KIT && kind != "dev")
                .map(move |(_, kind)| format!("{package} depends on {TEST_KIT} ({kind})"))
        })
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
fn the_test_kit_is_a_dev_dependency_only() {
    let packages = workspace_dependencies();
    let offenders = test_kit_outside_tests(&packages);
    assert!(
        offenders.is_empty(),
        "{TEST_KIT} is for tests only (dev-dependencies): {offenders:?}"
    );
    // The check reads real edges: the CLI's tests use the kit.
    assert!(packages[CLI].contains(&(TEST_KIT.to_owned(), "dev".to_owned())));
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

/// The planner's crate is pure: its workspace dependencies are rtlab-core alone (tests and
/// benches included), it depends on neither libc nor rtlab-sys, and no file of it names a Linux
/// (or other operating system's) `cfg`, a syscall crate or `std::os`: it builds for every target.
#[test]
fn the_planner_is_pure() {
    let packages = workspace_dependencies();
    let plan = packages
        .get("rtlab-plan")
        .expect("rtlab-plan is a workspace crate");
    let system: Vec<&(String, String)> = plan
        .iter()
        .filter(|(dependency, _)| {
            (dependency.starts_with("rtlab-") && dependency != "rtlab-core")
                || ["libc", "windows-sys", "nix", "rustix"].contains(&dependency.as_str())
        })
        .collect();
    assert!(
        system.is_empty(),
        "rtlab-plan depends on more than rtlab-core: {system:?}"
    );
    let crate_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../rtlab-plan");
    let mut files = Vec::new();
    for directory in ["src", "tests", "benches"] {
        rust_files(&crate_dir.join(directory), &mut files);
    }
    assert!(files.len() >= 10, "found only {files:?}");
    let forbidden = [
        "target_os",
        "cfg(unix)",
        "cfg(windows)",
        "rtlab_sys",
        "libc::",
        "std::os::",
        "unsafe",
    ];
    let offences: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).expect("read source");
            forbidden
                .iter()
                .filter(|word| text.contains(*word))
                .map(|word| format!("{}: {word}", file.display()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(offences.is_empty(), "rtlab-plan is not pure: {offences:#?}");
}

/// Every `.rs` file under `directory`, recursively (none if it does not exist).
fn rust_files(directory: &std::path::Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            files.push(path);
        }
    }
}

/// The workspace crates `package` depends on (any kind, any platform) that `allowed` does not
/// list.
fn workspace_dependencies_beyond(packages: &Graph, package: &str, allowed: &[&str]) -> Vec<String> {
    packages[package]
        .iter()
        .filter(|(dependency, _)| dependency == CLI || dependency.starts_with("rtlab-"))
        .filter(|(dependency, _)| !allowed.contains(&dependency.as_str()))
        .map(|(dependency, kind)| format!("{dependency} ({kind})"))
        .collect()
}

/// rtlab-render reads rtlab-core and rtlab-analysis only (issue 30): not the measuring, tracing,
/// scheduling or storing crates, not even in its tests, so it and the HTML report build for
/// Windows. A type it needs from one of those moves into rtlab-core (or rtlab-analysis, where
/// it is a result of analysis) and the producing crate re-exports it.
#[test]
fn rtlab_render_depends_on_core_and_analysis_only() {
    let packages = workspace_dependencies();
    let beyond = workspace_dependencies_beyond(&packages, "rtlab-render", RENDER_READS);
    assert!(
        beyond.is_empty(),
        "rtlab-render depends on {beyond:?}; it may depend on {RENDER_READS:?} only"
    );
    let mut graph: Graph = Graph::new();
    graph.insert(
        "rtlab-render".to_owned(),
        vec![
            ("rtlab-core".to_owned(), "normal".to_owned()),
            ("rtlab-sched".to_owned(), "dev".to_owned()),
            ("serde".to_owned(), "normal".to_owned()),
        ],
    );
    assert_eq!(
        workspace_dependencies_beyond(&graph, "rtlab-render", RENDER_READS),
        vec!["rtlab-sched (dev)".to_owned()]
    );
}

/// What marks a document in one of the formats rtlab shows besides plain text: SVG and HTML
/// elements, and the keys of a Chrome trace-event (Perfetto) document.
const OUTPUT_FORMAT_MARKS: &[&str] = &[
    "<svg",
    "<rect",
    "<html",
    "<table",
    "<!DOCTYPE html",
    "\"traceEvents\"",
    "\"ph\"",
];

/// Source directories besides rtlab-render's that may write those formats, and why.
const FORMAT_WRITERS_ALLOWED: &[(&str, &str)] = &[
    (
        "crates/rtlab-session/src/monitor/",
        "the monitor's live HTML page, served over HTTP as the book changes (issue 36 moves the monitor to its own crate)",
    ),
    (
        "crates/rtlab-monitor/src/",
        "the same monitor, once in its own crate",
    ),
];

/// The marks of [`OUTPUT_FORMAT_MARKS`] in `text` (the file `file`) outside rtlab-render and the
/// allowed directories, as `file: mark`.
fn output_format_writes(file: &str, text: &str) -> Vec<String> {
    if file.starts_with("crates/rtlab-render/")
        || FORMAT_WRITERS_ALLOWED
            .iter()
            .any(|(directory, _)| file.starts_with(directory))
    {
        return Vec::new();
    }
    OUTPUT_FORMAT_MARKS
        .iter()
        .filter(|mark| text.contains(*mark))
        .map(|mark| format!("{file}: {mark}"))
        .collect()
}

/// Only rtlab-render writes what a command shows as SVG, HTML or Perfetto (issue 36, item 1):
/// no other crate's `src/` (tests included) holds SVG or HTML markup or a Chrome trace-event
/// document's keys, but for the directories [`FORMAT_WRITERS_ALLOWED`] names with their reason.
/// Engines return structures, rtlab-render turns them into documents, so what a command shows
/// lives in one crate, builds for Windows and is snapshot-tested there.
#[test]
fn only_rtlab_render_writes_svg_html_and_perfetto() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        rust_files(&entry.expect("entry").path().join("src"), &mut files);
    }
    files.sort();
    assert!(
        files
            .iter()
            .any(|path| path.ends_with("rtlab-render/src/apptrace_svg.rs")),
        "the check reads rtlab-render's sources too"
    );
    let offences: Vec<String> = files
        .iter()
        .flat_map(|path| {
            let relative = path.strip_prefix(&root).expect("under the root");
            let file = relative.to_string_lossy().replace('\\', "/");
            output_format_writes(&file, &std::fs::read_to_string(path).expect("readable"))
        })
        .collect();
    assert!(
        offences.is_empty(),
        "only rtlab-render writes SVG, HTML and Perfetto (move the writer there, the data it reads into rtlab-core): {offences:#?}"
    );
    // The check catches a writer elsewhere and lets rtlab-render's own through.
    let writer = "let _ = write!(svg, r#\"<svg xmlns=\"…\">\"#); json!({\"ph\": \"X\"});";
    assert_eq!(
        output_format_writes("crates/rtlab-trace/src/svg.rs", writer),
        [
            "crates/rtlab-trace/src/svg.rs: <svg",
            "crates/rtlab-trace/src/svg.rs: \"ph\""
        ]
    );
    assert!(output_format_writes("crates/rtlab-render/src/apptrace_svg.rs", writer).is_empty());
}

/// The checks themselves: a graph with an upward edge, an unknown crate, a stray libc or the test
/// kit outside tests is caught, and a test's edge to the kit is not.
#[test]
fn the_checks_catch_what_they_guard() {
    let edge = |name: &str, kind: &str| (name.to_owned(), kind.to_owned());
    let graph: Graph = [
        (
            "rtlab-probe",
            vec![
                edge("rtlab-core", "normal"),
                edge("rtlab-explain", "normal"),
            ],
        ),
        (
            "rtlab-analysis",
            vec![edge("libc", "normal"), edge(TEST_KIT, "dev")],
        ),
        ("rtlab-store", vec![edge("libc", "dev")]),
        ("rtlab-widget", vec![]),
        (
            CLI,
            vec![
                edge("rtlab-session", "normal"),
                edge("libc", "normal"),
                edge(TEST_KIT, "normal"),
            ],
        ),
    ]
    .into_iter()
    .map(|(name, dependencies)| (name.to_owned(), dependencies))
    .collect();
    let problems = upward_edges(&graph);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems[0].contains("rtlab-probe depends on rtlab-explain"));
    assert!(problems[1].contains("rtlab-widget is not in the layer table"));
    assert_eq!(
        libc_users(&graph),
        vec!["rtlab".to_owned(), "rtlab-analysis".to_owned()]
    );
    assert_eq!(
        test_kit_outside_tests(&graph),
        vec![format!("rtlab depends on {TEST_KIT} (normal)")]
    );
}

/// The module paths (`forecast::model`) named after `crate::` or `super::` in `text`, with
/// `super::` resolved against `parent` (the enclosing module of the file's module; each further
/// `super::` one level up), and the items of `use crate::{a, b::{c, d}}` and `use super::{…}`
/// groups, nested groups expanded. Line comments are skipped; inline test modules' `super::*`
/// names no module and is ignored.
fn module_references(text: &str, parent: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut references = Vec::new();
    for (prefix, start_base) in [("crate::", ""), ("super::", parent)] {
        let mut rest = code.as_str();
        while let Some(at) = rest.find(prefix) {
            let preceded_by_path = rest[..at].chars().last().is_some_and(is_path_char);
            rest = &rest[at + prefix.len()..];
            if preceded_by_path {
                continue;
            }
            let mut base = start_base;
            if prefix == "super::" {
                while let Some(after) = rest.strip_prefix("super::") {
                    rest = after;
                    base = base.rsplit_once("::").map_or("", |(up, _)| up);
                }
            }
            let within_base = |path: &str| {
                if base.is_empty() {
                    path.to_owned()
                } else {
                    format!("{base}::{path}")
                }
            };
            if let Some(group) = rest.strip_prefix('{') {
                references.extend(group_paths(group).iter().map(|path| within_base(path)));
                continue;
            }
            let path: String = rest.chars().take_while(|&c| is_path_char(c)).collect();
            let path = path.trim_end_matches(':');
            if !path.is_empty() {
                references.push(within_base(path));
            }
        }
    }
    references
}

/// The paths of a `use` group, `text` starting just after its `{`: `a, b::{c, d}}` gives `a`,
/// `b::c` and `b::d`.
fn group_paths(text: &str) -> Vec<String> {
    fn items(characters: &mut std::str::Chars<'_>, prefix: &str, paths: &mut Vec<String>) {
        let mut current = String::new();
        while let Some(character) = characters.next() {
            match character {
                '{' => {
                    items(characters, &format!("{prefix}{}", current.trim()), paths);
                    current.clear();
                }
                ',' | '}' => {
                    let item = current.trim();
                    if !item.is_empty() {
                        paths.push(format!("{prefix}{item}"));
                    }
                    current.clear();
                    if character == '}' {
                        return;
                    }
                }
                other => current.push(other),
            }
        }
    }
    let mut paths = Vec::new();
    items(&mut text.chars(), "", &mut paths);
    paths
}

/// Every `src/` file of every workspace crate as (crate, module path, is a `mod.rs`/root, text).
fn crate_modules() -> Vec<(String, String, bool, String)> {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut modules = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("read crates") {
        let crate_dir = entry.expect("entry").path();
        let source = crate_dir.join("src");
        if !source.is_dir() {
            continue;
        }
        let name = crate_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let mut files = Vec::new();
        rust_files(&source, &mut files);
        for file in files {
            let relative = file.strip_prefix(&source).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .components()
                .map(|part| part.as_os_str().to_string_lossy().into_owned())
                .collect();
            let is_directory_module = matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) && (parts.len() > 1 || parts[0] != "mod");
            if is_directory_module {
                parts.pop();
            }
            let text = std::fs::read_to_string(&file).expect("read source");
            modules.push((name.clone(), parts.join("::"), is_directory_module, text));
        }
    }
    modules
}

/// Every `(crate, module, module it uses)` inside a crate, from `crate::` and `super::` paths.
fn module_edges(modules: &[(String, String, bool, String)]) -> Edges {
    let mut edges = Edges::new();
    for (crate_name, module, is_directory_module, text) in modules {
        // `super::` in a file module names its parent's items; in a `mod.rs`, its parent's parent.
        let mut parent: Vec<&str> = module.split("::").filter(|part| !part.is_empty()).collect();
        if !*is_directory_module || !parent.is_empty() {
            parent.pop();
        }
        for reference in module_references(text, &parent.join("::")) {
            let parts: Vec<&str> = reference.split("::").collect();
            let target = (1..=parts.len())
                .rev()
                .map(|n| parts[..n].join("::"))
                .find(|candidate| {
                    modules.iter().any(|(other_crate, other, _, _)| {
                        other_crate == crate_name && other == candidate
                    })
                });
            if let Some(target) = target {
                if &target != module && !target.is_empty() {
                    edges.insert((crate_name.clone(), module.clone(), target));
                }
            }
        }
    }
    edges
}

type Edges = std::collections::BTreeSet<(String, String, String)>;

/// Every import cycle inside a crate, of two files or more (A → B → C → A), in words: one per
/// set of modules that all reach each other, as its shortest cycle through its first module,
/// with the set's other modules named when the cycle does not pass them all.
fn import_cycles(edges: &Edges) -> Vec<String> {
    let mut uses: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for (crate_name, from, to) in edges {
        uses.entry((crate_name, from)).or_default().push(to);
        uses.entry((crate_name, to)).or_default();
    }
    // Breadth first from `start`: each module reached, with the module it was reached from.
    let reached_from = |crate_name: &str, start: &str| -> BTreeMap<String, String> {
        let mut reached: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.to_owned()]);
        while let Some(module) = queue.pop_front() {
            for &next in uses
                .get(&(crate_name, module.as_str()))
                .into_iter()
                .flatten()
            {
                if !reached.contains_key(next) {
                    reached.insert(next.to_owned(), module.clone());
                    queue.push_back(next.to_owned());
                }
            }
        }
        reached
    };
    let mut in_a_cycle: std::collections::BTreeSet<(String, String)> = Default::default();
    let mut cycles = Vec::new();
    for &(crate_name, start) in uses.keys() {
        if in_a_cycle.contains(&(crate_name.to_owned(), start.to_owned())) {
            continue;
        }
        let reached = reached_from(crate_name, start);
        if !reached.contains_key(start) {
            continue;
        }
        let knot: Vec<&String> = reached
            .keys()
            .filter(|module| reached_from(crate_name, module).contains_key(start))
            .collect();
        let mut path = vec![start.to_owned()];
        let mut module = &reached[start];
        while module != start {
            path.push(module.clone());
            module = &reached[module];
        }
        path.push(start.to_owned());
        // Walked backwards from `start`'s predecessor: reversed, the modules in import order.
        path.reverse();
        let others: Vec<&str> = knot
            .iter()
            .map(|module| module.as_str())
            .filter(|module| !path.iter().any(|on_path| on_path == module))
            .collect();
        let mut words = format!("{crate_name}: {}", path.join(" -> "));
        if !others.is_empty() {
            words.push_str(&format!(" (with {})", others.join(", ")));
        }
        cycles.push(words);
        for module in knot {
            in_a_cycle.insert((crate_name.to_owned(), module.clone()));
        }
    }
    cycles
}

/// No two modules of a crate use each other, directly or around a longer loop: what both need
/// goes into a module below them (issue 30 removed the last eight).
#[test]
fn no_import_cycle_inside_a_crate() {
    let modules = crate_modules();
    let cycles = import_cycles(&module_edges(&modules));
    assert!(
        cycles.is_empty(),
        "modules of a crate use each other (move what they share into a module below them): {cycles:#?}"
    );
    assert!(modules.len() > 100, "{} modules read", modules.len());
}

/// A module is where its name says: no `src` file mounts another by `#[path]` (issue 36, item 4),
/// but rtlab-store's per-platform `sudo_none.rs`, and no test, example or benchmark pulls in a file
/// by `#[path]` (shared helpers are in rtlab-testkit, issue 36, item 6).
#[test]
fn no_module_is_mounted_by_path() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("read crates") {
        let crate_dir = entry.expect("entry").path();
        rust_files(&crate_dir.join("src"), &mut files);
        rust_files(&crate_dir.join("tests"), &mut files);
        rust_files(&crate_dir.join("examples"), &mut files);
        rust_files(&crate_dir.join("benches"), &mut files);
    }
    let mounted: Vec<String> = files
        .iter()
        .filter(|file| !file.ends_with("rtlab-store/src/lib.rs"))
        .filter(|file| {
            std::fs::read_to_string(file)
                .expect("read source")
                .lines()
                .any(|line| line.trim_start().starts_with("#[path"))
        })
        .map(|file| {
            file.strip_prefix(&crates)
                .unwrap_or(file)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        mounted.is_empty(),
        "modules mounted by #[path] (make them ordinary modules, or use rtlab-testkit): {mounted:#?}"
    );
    assert!(files.len() > 100, "{} files read", files.len());
}

/// The checks a root-only test starts with are rtlab-testkit's (`root.rs`), written once: no test
/// file of another crate defines its own `require_…` or `is_root` (issue 36, item 6; there were
/// six copies of `require_root`).
#[test]
fn root_checks_are_the_test_kits() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("read crates") {
        let crate_dir = entry.expect("entry").path();
        if !crate_dir.ends_with("rtlab-testkit") {
            rust_files(&crate_dir.join("tests"), &mut files);
        }
    }
    let copies: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(file).expect("read test");
            let name = file
                .strip_prefix(&crates)
                .unwrap_or(file)
                .display()
                .to_string();
            text.lines()
                .map(str::trim_start)
                .map(|line| line.strip_prefix("pub ").unwrap_or(line))
                .filter(|line| line.starts_with("fn require_") || line.starts_with("fn is_root("))
                .map(|line| format!("{name}: {line}"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        copies.is_empty(),
        "root checks written outside rtlab-testkit (use or extend crates/rtlab-testkit/src/root.rs): {copies:#?}"
    );
    assert!(files.len() > 50, "{} test files read", files.len());
}

/// The cycle check itself: a two-file and a three-file cycle are caught, a chain is not.
#[test]
fn the_cycle_check_catches_cycles_of_any_length() {
    let edge = |crate_name: &str, from: &str, to: &str| {
        (crate_name.to_owned(), from.to_owned(), to.to_owned())
    };
    let edges: Edges = [
        edge("rtlab-core", "packed", "record"),
        edge("rtlab-core", "record", "packed"),
        edge("rtlab-daemon", "registry", "rtkit::book"),
        edge("rtlab-daemon", "rtkit::book", "watch"),
        edge("rtlab-daemon", "watch", "registry"),
        edge("rtlab-daemon", "server", "registry"),
        edge("rtlab-sys", "host", "hypervisor"),
        edge("rtlab-sys", "windows::host", "hypervisor"),
        edge("rtlab-sys", "host", "windows::host"),
        // Two modules in the same crate's name in another crate are no cycle.
        edge("rtlab-explain", "packed", "record"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        import_cycles(&edges),
        vec![
            "rtlab-core: packed -> record -> packed".to_owned(),
            "rtlab-daemon: registry -> rtkit::book -> watch -> registry".to_owned(),
        ]
    );
}

#[test]
fn module_references_name_crate_super_and_grouped_paths() {
    let text = "use crate::record::Metric;\nuse crate::{label, packed::u64_list};\n\
                let x = super::model::forecast(); // crate::commented\nother::crate::not_this();\n\
                use super::{evidence::BufferConfig, outcome};\nuse super::super::gpd::fit;\n\
                use crate::{forecast::{model::Model, words}, tail};";
    assert_eq!(
        module_references(text, "analysis::forecast"),
        vec![
            "record::Metric",
            "label",
            "packed::u64_list",
            "forecast::model::Model",
            "forecast::words",
            "tail",
            "analysis::forecast::model::forecast",
            "analysis::forecast::evidence::BufferConfig",
            "analysis::forecast::outcome",
            "analysis::gpd::fit",
        ]
    );
}

/// The most lines a function may have outside tests, examples and generated code (issue 36: "a
/// function a reader can hold").
const LONGEST_FUNCTION: usize = 150;

/// The functions still longer, by file and name: each is to be split, and this list only shrinks
/// (a function split, or one that grew past the limit, fails the test until the list says so).
const STILL_TOO_LONG: &[&str] = &[];

/// Collects every function (free, in an impl or a trait with a body) longer than
/// [`LONGEST_FUNCTION`], outside `#[cfg(test)]` modules.
struct LongFunctions<'a> {
    file: &'a str,
    found: Vec<(String, usize)>,
}

impl LongFunctions<'_> {
    fn measure(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let lines = span.end().line - span.start().line + 1;
        if lines > LONGEST_FUNCTION {
            self.found.push((format!("{} {name}", self.file), lines));
        }
    }
}

fn is_cfg_test(attributes: &[syn::Attribute]) -> bool {
    attributes.iter().any(|attribute| {
        attribute.path().is_ident("cfg")
            && attribute
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

impl<'ast> syn::visit::Visit<'ast> for LongFunctions<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_cfg_test(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        use syn::spanned::Spanned;
        self.measure(&function.sig.ident, function.span());
        syn::visit::visit_item_fn(self, function);
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        use syn::spanned::Spanned;
        self.measure(&function.sig.ident, function.span());
        syn::visit::visit_impl_item_fn(self, function);
    }

    fn visit_trait_item_fn(&mut self, function: &'ast syn::TraitItemFn) {
        use syn::spanned::Spanned;
        if function.default.is_some() {
            self.measure(&function.sig.ident, function.span());
        }
        syn::visit::visit_trait_item_fn(self, function);
    }
}

/// The functions over the limit in `text` (the file `file`, as the list names it).
fn long_functions(file: &str, text: &str) -> Vec<(String, usize)> {
    let syntax = syn::parse_file(text).unwrap_or_else(|error| panic!("{file}: {error}"));
    let mut visitor = LongFunctions {
        file,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut visitor, &syntax);
    visitor.found
}

#[test]
fn no_function_is_longer_than_a_reader_can_hold() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        rust_files(&entry.expect("entry").path().join("src"), &mut files);
    }
    files.sort();
    let mut long = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&root).expect("under the root");
        let file = relative.to_string_lossy().replace('\\', "/");
        if file.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable");
        long.extend(long_functions(&file, &text));
    }
    let over: Vec<String> = long
        .iter()
        .filter(|(name, _)| !STILL_TOO_LONG.contains(&name.as_str()))
        .map(|(name, lines)| format!("{name}: {lines} lines"))
        .collect();
    assert!(
        over.is_empty(),
        "functions over {LONGEST_FUNCTION} lines (split them): {over:#?}"
    );
    let split: Vec<&&str> = STILL_TOO_LONG
        .iter()
        .filter(|listed| !long.iter().any(|(name, _)| name == *listed))
        .collect();
    assert!(
        split.is_empty(),
        "no longer over {LONGEST_FUNCTION} lines: take them off STILL_TOO_LONG: {split:?}"
    );
}

#[test]
fn the_length_check_sees_functions_in_impls_and_not_in_tests() {
    let body = "    let x = 1;\n".repeat(LONGEST_FUNCTION);
    let text = format!(
        "fn free() {{\n{body}}}\nstruct S;\nimpl S {{\n    fn method(&self) {{\n{body}    }}\n}}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{body}    }}\n}}\nfn short() {{}}\n"
    );
    let found: Vec<String> = long_functions("x.rs", &text)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(found, ["x.rs free", "x.rs method"]);
}

/// The one file that may list tracepoints by name (issue 36, item 3: one table per concept).
const TRACEPOINT_TABLE: &str = "crates/rtlab-core/src/tracepoints.rs";

/// Collects the `const` and `static` items, outside `#[cfg(test)]` modules, whose value names
/// two or more of the table's tracepoints (`sched_switch` or `sched:sched_switch`): a list of
/// tracepoints kept apart from the table.
struct TracepointLists<'a> {
    file: &'a str,
    names: &'a std::collections::BTreeSet<String>,
    found: Vec<String>,
}

/// The string literals inside one item.
struct Literals(Vec<String>);

impl<'ast> syn::visit::Visit<'ast> for Literals {
    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        self.0.push(literal.value());
    }
}

impl TracepointLists<'_> {
    fn check(&mut self, name: &syn::Ident, value: &syn::Expr) {
        let mut literals = Literals(Vec::new());
        syn::visit::Visit::visit_expr(&mut literals, value);
        let named: std::collections::BTreeSet<&String> = literals
            .0
            .iter()
            .filter(|literal| self.names.contains(*literal))
            .collect();
        if named.len() >= 2 {
            self.found
                .push(format!("{} {name} lists tracepoints {named:?}", self.file));
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for TracepointLists<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_cfg_test(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    fn visit_item_const(&mut self, item: &'ast syn::ItemConst) {
        self.check(&item.ident, &item.expr);
    }

    fn visit_item_static(&mut self, item: &'ast syn::ItemStatic) {
        self.check(&item.ident, &item.expr);
    }
}

/// The tracepoint lists in `text` (the file `file`), given the table's names.
fn tracepoint_lists(
    file: &str,
    text: &str,
    names: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let syntax = syn::parse_file(text).unwrap_or_else(|error| panic!("{file}: {error}"));
    let mut visitor = TracepointLists {
        file,
        names,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut visitor, &syntax);
    visitor.found
}

fn tracepoint_names() -> std::collections::BTreeSet<String> {
    rtlab_core::tracepoints::TRACEPOINTS
        .iter()
        .flat_map(|row| [row.name.to_owned(), row.full_name()])
        .collect()
}

#[test]
fn only_the_tracepoint_table_lists_tracepoints() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/") {
        rust_files(&entry.expect("entry").path().join("src"), &mut files);
    }
    files.sort();
    let names = tracepoint_names();
    let mut lists = Vec::new();
    for path in &files {
        let relative = path.strip_prefix(&root).expect("under the root");
        let file = relative.to_string_lossy().replace('\\', "/");
        if file == TRACEPOINT_TABLE || file.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(path).expect("readable");
        lists.extend(tracepoint_lists(&file, &text, &names));
    }
    assert!(
        lists.is_empty(),
        "tracepoints listed outside {TRACEPOINT_TABLE} (derive the list from its table): {lists:#?}"
    );
}

#[test]
fn the_tracepoint_list_check_sees_consts_and_statics_and_not_tests() {
    let text = "const EVENTS: &[(&str, &str)] = &[(\"sched\", \"sched_switch\"), (\"irq\", \"softirq_entry\")];\n\
                static NAMES: [&str; 2] = [\"sched:sched_waking\", \"irq:irq_handler_exit\"];\n\
                const ONE: &str = \"sched_switch\";\n\
                #[cfg(test)]\nmod tests {\n    const BEFORE: [&str; 2] = [\"sched_switch\", \"sched_waking\"];\n}\n";
    let found = tracepoint_lists("x.rs", text, &tracepoint_names());
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].starts_with("x.rs EVENTS"));
    assert!(found[1].starts_with("x.rs NAMES"));
}

/// The most lines of `crates/rtlab/src` a command may have on average (issue 36, item 5: "a thin
/// CLI again: flags, progress and printing only"): the binary's every Rust line (its commands,
/// flags, outputs, exit codes, tests beside them) over its top-level commands (hidden ones
/// included; the subcommands of `trace` and `study` are not counted apart).
const CLI_LINES_PER_COMMAND: usize = 200;

/// The most lines one file of the binary may have: past it, what the file holds belongs in a
/// library (`reserve_auto.rs` is the largest: its flags, its steps' printing, the JSON written
/// and the exit code for each way the loop ends, and the `AutoReserveIo` that joins rtlab-trace's
/// observation to rtlab-client's daemon, which no library may use both of).
const CLI_FILE_LINES: usize = 400;

/// The top-level commands clap defines: the variants of the `#[derive(Subcommand)]` enum named
/// `Command` (`rtlab run`, `rtlab trace`, …, hidden ones too).
fn clap_commands(text: &str) -> usize {
    let syntax = syn::parse_file(text).expect("parses");
    let mut commands = 0;
    for item in syntax.items {
        let syn::Item::Enum(item) = item else {
            continue;
        };
        let derives_subcommand = item.attrs.iter().any(|attribute| {
            attribute.path().is_ident("derive")
                && attribute
                    .meta
                    .require_list()
                    .is_ok_and(|list| list.tokens.to_string().contains("Subcommand"))
        });
        if derives_subcommand && item.ident == "Command" {
            commands += item.variants.len();
        }
    }
    commands
}

#[test]
fn the_cli_stays_thin() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut lines = 0;
    let mut commands = 0;
    let mut large = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let file_lines = text.lines().count();
        lines += file_lines;
        commands += clap_commands(&text);
        if file_lines > CLI_FILE_LINES {
            large.push(format!("{}: {file_lines} lines", path.display()));
        }
    }
    assert!(
        commands >= 20,
        "{commands} commands found: the count is broken"
    );
    assert!(
        lines <= CLI_LINES_PER_COMMAND * commands,
        "crates/rtlab/src is {lines} lines for {commands} commands ({} a command, at most \
         {CLI_LINES_PER_COMMAND}): move what is not flags, progress or printing into a library",
        lines / commands
    );
    assert!(
        large.is_empty(),
        "files of the binary over {CLI_FILE_LINES} lines (move their logic into a library): {large:?}"
    );
}

#[test]
fn the_command_count_sees_the_top_level_commands_only() {
    let text = "#[derive(Debug, Subcommand)]\nenum Command { X(u8), Y }\n\
                #[derive(Debug, clap::Subcommand)]\nenum TraceCommand { Z }\n\
                #[derive(Debug)]\nenum C { W }\n";
    assert_eq!(clap_commands(text), 2);
}

/// Where the words of `rtlab trace`'s findings may not be written (issue 36, item 1), with the
/// fewest words a string literal there may have before it counts as prose: the report's types
/// (rtlab-core's `apptrace_report.rs`, `apptrace_timeline.rs`: plain data, no literal of two
/// words or more, no function returning a `String`) and the analysis that fills them
/// (rtlab-trace's `analyze/`: no literal of three words or more, which a name such as `irq 11`
/// stays under and any sentence passes).
const NO_PROSE: &[(&str, usize)] = &[
    ("crates/rtlab-core/src/apptrace_report.rs", 2),
    ("crates/rtlab-core/src/apptrace_timeline.rs", 2),
    ("crates/rtlab-trace/src/analyze/", 3),
];

/// Literals in [`NO_PROSE`]'s places that are data, not words about it, each with its reason.
const NOT_PROSE: &[(&str, &str)] = &[(
    "local timer or reschedule vector",
    "the name of an interrupt vector (a `Culprit::Irq`'s `name`), as the kernel's vector table calls it",
)];

/// The words of a string literal: what remains once the `{…}` placeholders of a format string
/// are taken out, split on whitespace, the pieces that hold a letter.
fn words(literal: &str) -> usize {
    let mut text = String::new();
    let mut depth = 0usize;
    for character in literal.chars() {
        match character {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ if depth == 0 => text.push(character),
            _ => {}
        }
    }
    text.split_whitespace()
        .filter(|piece| piece.chars().any(char::is_alphabetic))
        .count()
}

/// Collects the string literals of `min_words` words or more (in code and inside macros such as
/// `format!`), and the functions returning a `String` when `no_string_functions`, outside
/// `#[cfg(test)]` modules, attributes (doc comments, serde's), the report's `warnings.push(…)`
/// (diagnostics of the input, like an error's message), panics' messages (`expect`, `panic!`,
/// `assert!`, `unreachable!`) and logging macros.
struct Prose<'a> {
    file: &'a str,
    min_words: usize,
    no_string_functions: bool,
    found: Vec<String>,
}

/// Macros whose words are a panic's, a log's or a test's, not an output's.
const NOT_OUTPUT_MACROS: &[&str] = &[
    "panic",
    "assert",
    "assert_eq",
    "assert_ne",
    "debug_assert",
    "debug_assert_eq",
    "unreachable",
    "todo",
    "unimplemented",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
    "eprintln",
];

impl Prose<'_> {
    fn literal(&mut self, text: &str) {
        if words(text) >= self.min_words && !NOT_PROSE.iter().any(|(data, _)| *data == text) {
            self.found.push(format!("{}: {text:?}", self.file));
        }
    }

    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        for token in tokens {
            match token {
                proc_macro2::TokenTree::Literal(literal) => {
                    if let Ok(syn::Lit::Str(text)) =
                        syn::parse2::<syn::Lit>(proc_macro2::TokenTree::Literal(literal).into())
                    {
                        self.literal(&text.value());
                    }
                }
                proc_macro2::TokenTree::Group(group) => self.tokens(group.stream()),
                _ => {}
            }
        }
    }

    fn returns(&mut self, signature: &syn::Signature) {
        if let syn::ReturnType::Type(_, returned) = &signature.output {
            let mut names = NamesString(false);
            syn::visit::Visit::visit_type(&mut names, returned);
            if self.no_string_functions && names.0 {
                self.found.push(format!(
                    "{}: fn {} returns a String",
                    self.file, signature.ident
                ));
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Prose<'_> {
    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        if !is_cfg_test(&module.attrs) {
            syn::visit::visit_item_mod(self, module);
        }
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_lit_str(&mut self, literal: &'ast syn::LitStr) {
        self.literal(&literal.value());
    }

    fn visit_macro(&mut self, invocation: &'ast syn::Macro) {
        let name = invocation
            .path
            .segments
            .last()
            .map(|segment| segment.ident.to_string())
            .unwrap_or_default();
        if !NOT_OUTPUT_MACROS.contains(&name.as_str()) {
            self.tokens(invocation.tokens.clone());
        }
    }

    fn visit_expr_method_call(&mut self, call: &'ast syn::ExprMethodCall) {
        let receiver = match &*call.receiver {
            syn::Expr::Path(path) => path.path.segments.last().map(|last| last.ident.to_string()),
            syn::Expr::Field(field) => match &field.member {
                syn::Member::Named(name) => Some(name.to_string()),
                syn::Member::Unnamed(_) => None,
            },
            _ => None,
        };
        let warning = call.method == "push" && receiver.as_deref() == Some("warnings");
        if !warning && call.method != "expect" {
            syn::visit::visit_expr_method_call(self, call);
        } else {
            self.visit_expr(&call.receiver);
        }
    }

    fn visit_item_fn(&mut self, function: &'ast syn::ItemFn) {
        if !is_cfg_test(&function.attrs) {
            self.returns(&function.sig);
            syn::visit::visit_item_fn(self, function);
        }
    }

    fn visit_impl_item_fn(&mut self, function: &'ast syn::ImplItemFn) {
        if !is_cfg_test(&function.attrs) {
            self.returns(&function.sig);
            syn::visit::visit_impl_item_fn(self, function);
        }
    }
}

/// Whether a type names `String` anywhere (`String`, `Option<String>`, `(u64, String)`).
struct NamesString(bool);

impl<'ast> syn::visit::Visit<'ast> for NamesString {
    fn visit_path_segment(&mut self, segment: &'ast syn::PathSegment) {
        self.0 |= segment.ident == "String";
        syn::visit::visit_path_segment(self, segment);
    }
}

/// The prose in `text` (the file `file`) by [`Prose`]'s rules.
fn prose(file: &str, text: &str, min_words: usize, no_string_functions: bool) -> Vec<String> {
    let syntax = syn::parse_file(text).unwrap_or_else(|error| panic!("{file}: {error}"));
    let mut visitor = Prose {
        file,
        min_words,
        no_string_functions,
        found: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut visitor, &syntax);
    visitor.found
}

/// `rtlab trace`'s report holds no words and its analysis writes none (issue 36, item 1): the
/// analysis chooses what it found (a `Culprit`, an `Explanation`, a `NoPeriodicThread`) with
/// its numbers, rtlab-core's report types carry it as plain data, and rtlab-render words it
/// (`apptrace_words.rs`; the JSON through `apptrace_json.rs`). A sentence written in the
/// analysis, or a `describe`-style method in the report's types, fails here (see [`Prose`] for
/// what is not looked at, and [`NOT_PROSE`] for the names let through).
#[test]
fn the_trace_report_and_its_analysis_write_no_words() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    for (place, min_words) in NO_PROSE {
        let mut files = Vec::new();
        if place.ends_with('/') {
            rust_files(&root.join(place), &mut files);
        } else {
            files.push(root.join(place));
        }
        assert!(!files.is_empty(), "{place} has no Rust file");
        files.sort();
        for path in files {
            let file = path
                .strip_prefix(&root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            if file.ends_with("/tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            found.extend(prose(&file, &text, *min_words, *min_words == 2));
        }
    }
    assert!(
        found.is_empty(),
        "words in the trace report's types or its analysis (make them a structure rtlab-render words): {found:#?}"
    );
}

/// The prose check itself: a sentence built with `format!` or from a literal, and a
/// `describe` returning a `String`, are caught; a name, a tag, a warning, a doc comment, a
/// panic's message and a test are not.
#[test]
fn the_prose_check_catches_sentences_and_not_names() {
    let analysis = r#"
        /// A doc comment of many words is not looked at.
        fn explain(ns: u64) -> (u64, String) {
            let name = format!("irq {ns}");
            warnings.push(format!("{ns} events were lost: findings may be wrong"));
            let checked = value.expect("a value we always have here");
            (ns, format!("waited {} ms for CPU {name}", ns))
        }
        fn other() -> String { "its own work".to_owned() }
        #[cfg(test)]
        mod tests { fn words() -> String { format!("many words in a test") } }
    "#;
    assert_eq!(
        prose("analysis.rs", analysis, 3, false),
        [
            r#"analysis.rs: "waited {} ms for CPU {name}""#,
            r#"analysis.rs: "its own work""#
        ]
    );
    let report = r#"
        pub enum Source { Markers }
        impl Source {
            pub fn kind(self) -> &'static str { "markers" }
            pub fn describe(self) -> String { "cycle markers".into() }
        }
    "#;
    assert_eq!(
        prose("report.rs", report, 2, true),
        [
            "report.rs: fn describe returns a String",
            r#"report.rs: "cycle markers""#
        ]
    );
}
