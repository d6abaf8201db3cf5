//! A program's own cycle start, as a user-space probe: `rtlab trace record --cycle-marker SPEC`.
//!
//! Scheduler events show when a cycle-driven program's threads ran, not when the program decided
//! that a cycle began; a probe on the function that starts its cycle (JACK's engine judging a
//! cycle: `Jack::JackEngine::ProcessNext` / `ProcessCurrent`) records that moment, so that lateness can be judged against the
//! program's own deadline. This module turns a SPEC (`PATH:SYMBOL`, or the preset `jack`) into
//! the file and file offset the kernel's `uprobe_events` wants: the symbol's address is read from
//! the ELF symbol tables (dynamic first) and mapped to a file offset through the program headers
//! of the segment holding it. C++ names may be given mangled or as written
//! (`Jack::JackEngine::Process`, or with its arguments to pick one overload), compared with the
//! symbols demangled by `cpp_demangle`.

use object::{Object, ObjectSegment, ObjectSymbol};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The event names of the probes inside rtlab's group, with the function's index after them
/// (`rtlab_<pid>/cycle0`, `rtlab_<pid>/done0`).
pub const CYCLE_MARKER_EVENT: &str = "cycle";
pub const WORK_DONE_EVENT: &str = "done";

/// The preset for JACK: the engine's cycle start in libjackserver.
pub const JACK_PRESET: &str = "jack";
/// Where JACK's engine, each cycle, has judged whether the last cycle's work finished and resets
/// the graph for the next (`Jack::JackEngine::ProcessNext` when it moves on,
/// `ProcessCurrent` when it waits), mangled.
const JACK_SYMBOLS: &[&str] = &[
    "_ZN4Jack10JackEngine11ProcessNextEm",
    "_ZN4Jack10JackEngine14ProcessCurrentEm",
];
/// Where Debian and Ubuntu install libjackserver when no running jackd says otherwise.
const JACK_LIBRARY_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libjackserver.so.0",
    "/usr/lib/aarch64-linux-gnu/libjackserver.so.0",
    "/usr/lib/libjackserver.so.0",
    "/usr/lib64/libjackserver.so.0",
];

/// The preset for PipeWire: the driver's cycle start, as its data thread re-arms its timer.
pub const PIPEWIRE_PRESET: &str = "pipewire";
/// PipeWire's drivers (the Dummy-Driver, ALSA's timer-driven devices) begin each cycle in
/// their timer's handler (`node-driver.c`'s `on_timeout`: `spa_node_call_ready`, which is
/// `impl-node.c`'s `node_ready`, then `set_timeout`) and re-arm the timer through libc's
/// `timerfd_settime` at its end. Debian's libpipewire and SPA plugins keep no symbol table:
/// `node_ready`, `process_node` and the driver's handlers are static and stripped, and no
/// function it exports runs once a cycle (a probe on each of libpipewire's and pipewire-jack's
/// 589 exported functions fired none in a second of cycles). libc's `timerfd_settime` is the
/// first visible function each cycle runs, once, in the driver's data thread.
const PIPEWIRE_SYMBOL: &str = "timerfd_settime";
/// Which of the driver's thread's `timerfd_settime` calls begin a cycle: the driver's re-arm
/// (`node-driver.c`'s `set_timeout`) sets an absolute time (`TFD_TIMER_ABSTIME`, 1) with no
/// interval. The same thread re-arms other timers in between — the profiler's flush
/// (`module-profiler.c`: relative, 1 ns, then every second), some 15 times a second on an idle
/// graph — which the `pipewire` rule took for a cycle start when one came late (issue 40,
/// BENCHMARKS.md). The arguments are read where the x86-64 and AArch64 calling conventions put
/// them (`flags` the second, `new_value` the third; `it_interval` first in `struct
/// itimerspec`).
#[cfg(target_arch = "x86_64")]
const PIPEWIRE_FILTER: Option<ArgumentFilter> = Some(ArgumentFilter {
    fetch_args: "flags=%si:s32 interval_sec=+0(%dx):s64 interval_nsec=+8(%dx):s64",
    condition: PIPEWIRE_CONDITION,
});
#[cfg(target_arch = "aarch64")]
const PIPEWIRE_FILTER: Option<ArgumentFilter> = Some(ArgumentFilter {
    fetch_args: "flags=%x1:s32 interval_sec=+0(%x2):s64 interval_nsec=+8(%x2):s64",
    condition: PIPEWIRE_CONDITION,
});
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const PIPEWIRE_FILTER: Option<ArgumentFilter> = None;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
const PIPEWIRE_CONDITION: &str = "flags == 1 && interval_sec == 0 && interval_nsec == 0";
/// Where Debian and Ubuntu install libc when no running PipeWire says otherwise.
const LIBC_PATHS: &[&str] = &[
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/aarch64-linux-gnu/libc.so.6",
    "/usr/lib/libc.so.6",
    "/usr/lib64/libc.so.6",
];

/// A resolved marker: where its probes go (one per function named).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CycleMarker {
    /// What the user asked for (`jack`, `PATH:SYMBOL[,SYMBOL…]`).
    pub spec: String,
    pub binary: PathBuf,
    /// Each function: the symbol as found in the file (mangled) and its file offset (what
    /// `uprobe_events` takes).
    pub points: Vec<(String, u64)>,
    /// The probe fires when the function returns (a work-done marker), not at its entry.
    pub at_return: bool,
    /// Only the calls whose arguments pass this count (the tracefs recorder's kernel filter).
    pub filter: Option<ArgumentFilter>,
}

/// Which calls of a marker's function count, by their arguments: what the probe fetches and
/// the condition over them (tracefs's filter syntax).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgumentFilter {
    /// The kernel's fetch-argument syntax (`flags=%si:s32 …`), added to the probe.
    pub fetch_args: &'static str,
    /// The event filter over those names (`flags == 1 && …`).
    pub condition: &'static str,
}

impl CycleMarker {
    /// `SYMBOL, SYMBOL in PATH`, for summaries.
    pub fn describe(&self) -> String {
        let symbols: Vec<&str> = self.points.iter().map(|(name, _)| name.as_str()).collect();
        format!("{} in {}", symbols.join(", "), self.binary.display())
    }
}

/// Why a SPEC cannot be probed; each message names the SPEC's part at fault.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CycleMarkerError {
    #[error("marker {0:?}: expected PATH:SYMBOL (cycle markers also take the presets 'jack' and 'pipewire')")]
    Syntax(String),
    #[error("marker: {path}: {message}")]
    File { path: String, message: String },
    #[error("marker: {path} has no function symbol {symbol:?}")]
    NoSymbol { path: String, symbol: String },
    #[error("marker: {path}: {symbol:?} matches several functions: {candidates}; give the arguments or the mangled name")]
    Ambiguous {
        path: String,
        symbol: String,
        candidates: String,
    },
    #[error("marker: {path}: symbol {symbol:?} at {address:#x} is in no loadable segment")]
    NotLoaded {
        path: String,
        symbol: String,
        address: u64,
    },
}

/// Resolves a cycle-start SPEC: `jack`, or `PATH:SYMBOL[,SYMBOL…]` (the first `:` ends the
/// path; several functions when the cycle begins in any of them).
pub fn resolve(spec: &str) -> Result<CycleMarker, CycleMarkerError> {
    if spec == JACK_PRESET {
        let binary = jack_library();
        let points = JACK_SYMBOLS
            .iter()
            .map(|symbol| symbol_file_offset(&binary, symbol))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(CycleMarker {
            spec: spec.to_owned(),
            binary,
            points,
            at_return: false,
            filter: None,
        });
    }
    if spec == PIPEWIRE_PRESET {
        let binary = mapped_library(&["pipewire"], "libc.so.6", LIBC_PATHS);
        let points = vec![symbol_file_offset(&binary, PIPEWIRE_SYMBOL)?];
        return Ok(CycleMarker {
            spec: spec.to_owned(),
            binary,
            points,
            at_return: false,
            filter: PIPEWIRE_FILTER,
        });
    }
    resolve_path_spec(spec, false)
}

/// Resolves a work-done SPEC, `PATH:SYMBOL[,SYMBOL…]`: the functions whose return marks that
/// the calling thread finished its cycle's work (a JACK client's process callback).
pub fn resolve_work_done(spec: &str) -> Result<CycleMarker, CycleMarkerError> {
    resolve_path_spec(spec, true)
}

fn resolve_path_spec(spec: &str, at_return: bool) -> Result<CycleMarker, CycleMarkerError> {
    let (path, symbols) = spec
        .split_once(':')
        .filter(|(path, symbols)| !path.is_empty() && !symbols.is_empty())
        .ok_or_else(|| CycleMarkerError::Syntax(spec.to_owned()))?;
    let binary = PathBuf::from(path);
    let points = split_symbols(symbols)
        .iter()
        .map(|symbol| symbol_file_offset(&binary, symbol))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CycleMarker {
        spec: spec.to_owned(),
        binary,
        points,
        at_return,
        filter: None,
    })
}

/// `a,b` → [a, b], but not inside a C++ argument list (`f(int, int)`).
fn split_symbols(symbols: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for character in symbols.chars() {
        match character {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current).trim().to_owned());
                continue;
            }
            _ => {}
        }
        current.push(character);
    }
    parts.push(current.trim().to_owned());
    parts
}

/// libjackserver as a running jackd maps it (a process named `jackd` or `jackdbus`), else the
/// first standard path that exists.
fn jack_library() -> PathBuf {
    mapped_library(
        &["jackd", "jackdbus"],
        "libjackserver.so",
        JACK_LIBRARY_PATHS,
    )
}

/// The library whose path holds `library` as a running process named one of `servers` maps
/// it (the first found in /proc/PID/maps), else the first of `standard` that exists.
fn mapped_library(servers: &[&str], library: &str, standard: &[&str]) -> PathBuf {
    let servers = servers.iter().flat_map(|name| {
        rtlab_sys::proc_thread::threads_named(name)
            .unwrap_or_default()
            .into_iter()
            .filter(|(pid, tid)| pid == tid)
    });
    for (pid, _) in servers {
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        if let Some(path) = maps
            .lines()
            .filter_map(|line| line.split_whitespace().nth(5))
            .find(|path| path.contains(library))
        {
            return PathBuf::from(path);
        }
    }
    standard
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .unwrap_or_else(|| PathBuf::from(standard[0]))
}

/// The mangled name and file offset of the function `wanted` in the ELF file `binary`.
pub fn symbol_file_offset(binary: &Path, wanted: &str) -> Result<(String, u64), CycleMarkerError> {
    let path = binary.display().to_string();
    let file_error = |message: String| CycleMarkerError::File {
        path: path.clone(),
        message,
    };
    let data = std::fs::read(binary).map_err(|error| file_error(error.to_string()))?;
    let file = object::File::parse(&*data)
        .map_err(|error| file_error(format!("not an ELF file ({error})")))?;
    let wanted_key = written_name(wanted);
    let mut exact = None;
    let mut demangled: Vec<(String, u64, String)> = Vec::new();
    for symbol in file.dynamic_symbols().chain(file.symbols()) {
        if symbol.kind() != object::SymbolKind::Text || symbol.address() == 0 {
            continue;
        }
        let Ok(name) = symbol.name() else {
            continue;
        };
        if name == wanted {
            exact = Some((name.to_owned(), symbol.address()));
            break;
        }
        if let Some(written) = demangled_matching(name, &wanted_key) {
            if !demangled.iter().any(|(known, _, _)| known == name) {
                demangled.push((name.to_owned(), symbol.address(), written));
            }
        }
    }
    let (name, address) = match exact {
        Some(found) => found,
        None => match demangled.len() {
            0 => {
                return Err(CycleMarkerError::NoSymbol {
                    path,
                    symbol: wanted.to_owned(),
                })
            }
            1 => {
                let (name, address, _) = demangled.remove(0);
                (name, address)
            }
            _ => {
                return Err(CycleMarkerError::Ambiguous {
                    path,
                    symbol: wanted.to_owned(),
                    candidates: demangled
                        .iter()
                        .map(|(name, _, written)| format!("{written} ({name})"))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        },
    };
    for segment in file.segments() {
        let start = segment.address();
        if address >= start && address < start + segment.size() {
            let (file_start, file_size) = segment.file_range();
            if address - start < file_size {
                return Ok((name, file_start + (address - start)));
            }
        }
    }
    Err(CycleMarkerError::NotLoaded {
        path,
        symbol: name,
        address,
    })
}

/// A C++ name as the user wrote it, for comparison with demangled names: without spaces (the
/// demangler's `unsigned long, unsigned long` and a user's `unsigned long,unsigned long` match),
/// and whether it gave the arguments.
fn written_name(name: &str) -> (String, bool) {
    let compact: String = name.chars().filter(|c| !c.is_whitespace()).collect();
    let with_arguments = compact.contains('(');
    (compact, with_arguments)
}

/// The demangled name of the mangled symbol `name` (`cpp_demangle`, the Itanium C++ ABI) when
/// it is the function the user wrote: the whole signature when they gave the arguments
/// (`Jack::JackEngine::Process(unsigned long, unsigned long)`), else the qualified name alone
/// (`Jack::JackEngine::Process`, every overload). None for other symbols and non-C++ names.
fn demangled_matching(name: &str, (wanted, with_arguments): &(String, bool)) -> Option<String> {
    // The function's own name stands in its mangled form (`7Process`): a cheap test before
    // demangling every symbol of a large program.
    let last = wanted
        .split('(')
        .next()
        .and_then(|qualified| qualified.rsplit("::").next())
        .filter(|last| !last.is_empty() && last.chars().all(|c| c.is_alphanumeric() || c == '_'));
    if !name.starts_with("_Z") || last.is_some_and(|last| !name.contains(last)) {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name).ok()?;
    let full = symbol.demangle().ok()?;
    let compared = if *with_arguments {
        full.clone()
    } else {
        symbol
            .demangle_with_options(&cpp_demangle::DemangleOptions::new().no_params())
            .ok()?
    };
    let compact: String = compared.chars().filter(|c| !c.is_whitespace()).collect();
    (&compact == wanted).then_some(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_names_match_the_name_as_written() {
        let process = written_name("Jack::JackEngine::Process");
        assert_eq!(
            demangled_matching("_ZN4Jack10JackEngine7ProcessEmm", &process).unwrap(),
            "Jack::JackEngine::Process(unsigned long, unsigned long)"
        );
        // With the arguments, only that overload; spaces do not matter.
        let with_arguments = written_name("Jack::JackEngine::Process(unsigned long,unsigned long)");
        assert!(demangled_matching("_ZN4Jack10JackEngine7ProcessEmm", &with_arguments).is_some());
        assert!(demangled_matching("_ZN4Jack10JackEngine7ProcessEm", &with_arguments).is_none());
        // A const method, a free function, and names that are not the one asked for.
        assert!(demangled_matching(
            "_ZNK4Jack10JackEngine4NameEv",
            &written_name("Jack::JackEngine::Name")
        )
        .is_some());
        assert!(demangled_matching("_Z3foov", &written_name("foo")).is_some());
        assert!(
            demangled_matching("_ZN4Jack10JackEngine7ProcessEmm", &written_name("Process"))
                .is_none()
        );
        assert!(demangled_matching("main", &written_name("main")).is_none());
        assert!(demangled_matching("_ZN99JackE", &process).is_none());
        assert_eq!(split_symbols("a, b(int, int),c"), ["a", "b(int, int)", "c"]);
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        assert!(matches!(
            resolve("nocolon"),
            Err(CycleMarkerError::Syntax(_))
        ));
        assert!(matches!(resolve(":main"), Err(CycleMarkerError::Syntax(_))));
        let missing = resolve("/no/such/file:main").unwrap_err().to_string();
        assert!(missing.contains("/no/such/file"), "{missing}");
        let exe = std::env::current_exe().unwrap();
        let no_symbol = resolve(&format!("{}:no_such_symbol_here", exe.display()))
            .unwrap_err()
            .to_string();
        assert!(no_symbol.contains("no_such_symbol_here"), "{no_symbol}");
    }

    #[test]
    fn a_symbol_of_this_test_binary_maps_into_its_file() {
        let exe = std::env::current_exe().unwrap();
        let (name, offset) = symbol_file_offset(&exe, "main").unwrap();
        assert_eq!(name, "main");
        let length = std::fs::metadata(&exe).unwrap().len();
        assert!(offset > 0 && offset < length, "{offset} of {length}");
    }

    #[test]
    #[ignore = "needs jackd2 installed (libjackserver; CI installs it)"]
    fn the_jack_preset_resolves_where_jack_is_installed() {
        let library = jack_library();
        assert!(
            library.exists(),
            "libjackserver is not installed: apt-get install jackd2"
        );
        let marker = resolve(JACK_PRESET).unwrap();
        assert_eq!(marker.points.len(), 2);
        assert_eq!(marker.points[0].0, JACK_SYMBOLS[0]);
        let by_plain_name = resolve(&format!(
            "{}:Jack::JackEngine::ProcessNext,Jack::JackEngine::ProcessCurrent(unsigned long)",
            library.display()
        ))
        .unwrap();
        assert_eq!(by_plain_name.points, marker.points);
    }

    #[test]
    fn the_pipewire_preset_probes_libcs_timer_rearm() {
        // libc is on every machine the tests run on; PipeWire need not run.
        let marker = resolve(PIPEWIRE_PRESET).unwrap();
        assert_eq!(marker.points.len(), 1);
        assert_eq!(marker.points[0].0, PIPEWIRE_SYMBOL);
        assert!(!marker.at_return);
        assert!(
            marker.binary.to_string_lossy().contains("libc.so.6"),
            "{}",
            marker.describe()
        );
        let by_path = resolve(&format!("{}:timerfd_settime", marker.binary.display())).unwrap();
        assert_eq!(by_path.points, marker.points);
        // Only the driver's own re-arms (absolute, no interval) count; a path spec keeps them all.
        #[cfg(target_arch = "x86_64")]
        {
            let filter = marker
                .filter
                .expect("the pipewire preset filters its calls");
            assert!(filter.fetch_args.starts_with("flags=%si:s32"), "{filter:?}");
            assert_eq!(
                filter.condition,
                "flags == 1 && interval_sec == 0 && interval_nsec == 0"
            );
        }
        assert_eq!(by_path.filter, None);
    }
}
