//! The Windows host description for the Run record: version, CPU, virtualization, the timer
//! resolution in force, the power plan, and whether this "Windows" is Wine.

use rtlab_core::{Host, WindowsHost};
use windows_sys::core::GUID;
use windows_sys::Win32::Foundation::{LocalFree, ERROR_SUCCESS};
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
use windows_sys::Win32::System::Power::PowerGetActiveScheme;
use windows_sys::Win32::System::Registry::{
    RegGetValueW, HKEY_LOCAL_MACHINE, RRF_RT_REG_DWORD, RRF_RT_REG_SZ,
};

const CURRENT_VERSION: &str = r"SOFTWARE\Microsoft\Windows NT\CurrentVersion";

fn registry_string(name: &str) -> Option<String> {
    let key = super::wide(CURRENT_VERSION);
    let value = super::wide(name);
    let mut buffer = vec![0u16; 256];
    let mut size = (buffer.len() * 2) as u32;
    // SAFETY: key and value names are NUL-terminated UTF-16 that outlive the call; `buffer` has
    // `size` bytes and the call writes at most that many (it fails with ERROR_MORE_DATA if the
    // value is larger).
    let status = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_SZ,
            std::ptr::null_mut(),
            buffer.as_mut_ptr().cast(),
            &mut size,
        )
    };
    if status != ERROR_SUCCESS {
        return None;
    }
    let units = (size as usize / 2).min(buffer.len());
    let text = String::from_utf16_lossy(&buffer[..units]);
    let text = text.trim_end_matches('\0').trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn registry_dword(name: &str) -> Option<u32> {
    let key = super::wide(CURRENT_VERSION);
    let value = super::wide(name);
    let mut data: u32 = 0;
    let mut size = std::mem::size_of::<u32>() as u32;
    // SAFETY: as in `registry_string`; `data` is a live u32 of `size` bytes.
    let status = unsafe {
        RegGetValueW(
            HKEY_LOCAL_MACHINE,
            key.as_ptr(),
            value.as_ptr(),
            RRF_RT_REG_DWORD,
            std::ptr::null_mut(),
            (&mut data as *mut u32).cast(),
            &mut size,
        )
    };
    (status == ERROR_SUCCESS).then_some(data)
}

/// `10.0.19045.3803 (Windows 10 Pro 22H2)` from the registry (the version functions lie to
/// programs without a manifest).
pub fn version() -> String {
    let major = registry_dword("CurrentMajorVersionNumber");
    let minor = registry_dword("CurrentMinorVersionNumber");
    let build = registry_string("CurrentBuildNumber").or_else(|| registry_string("CurrentBuild"));
    let revision = registry_dword("UBR");
    let mut number = match (major, minor) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => registry_string("CurrentVersion").unwrap_or_else(|| "?".to_owned()),
    };
    if let Some(build) = build {
        number.push('.');
        number.push_str(&build);
    }
    if let Some(revision) = revision {
        number.push_str(&format!(".{revision}"));
    }
    let product = registry_string("ProductName");
    let display = registry_string("DisplayVersion").or_else(|| registry_string("ReleaseId"));
    match (product, display) {
        (Some(product), Some(display)) => format!("{number} ({product} {display})"),
        (Some(product), None) => format!("{number} ({product})"),
        _ => number,
    }
}

/// The Wine version, when ntdll exports `wine_get_version` (only Wine's does).
pub fn wine_version() -> Option<String> {
    let ntdll = super::wide("ntdll.dll");
    // SAFETY: NUL-terminated UTF-16 module name; ntdll is loaded in every process and never
    // unloaded, so the handle stays valid.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return None;
    }
    // SAFETY: a valid module handle and a NUL-terminated ASCII name.
    let address = unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }?;
    // SAFETY: Wine declares `const char *wine_get_version(void)`; the function pointer has that
    // signature and returns a static NUL-terminated string.
    let text = unsafe {
        let function: unsafe extern "C" fn() -> *const std::ffi::c_char =
            std::mem::transmute(address);
        let pointer = function();
        if pointer.is_null() {
            return Some("unknown".to_owned());
        }
        std::ffi::CStr::from_ptr(pointer)
            .to_string_lossy()
            .into_owned()
    };
    Some(text)
}

fn guid_text(guid: &GUID) -> String {
    format!(
        "{:08x}-{:04x}-{:04x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        guid.data1,
        guid.data2,
        guid.data3,
        guid.data4[0],
        guid.data4[1],
        guid.data4[2],
        guid.data4[3],
        guid.data4[4],
        guid.data4[5],
        guid.data4[6],
        guid.data4[7]
    )
}

/// Names the power plans Windows ships; others by GUID.
pub fn power_plan_name(guid: &str) -> String {
    match guid {
        "381b4222-f694-41f0-9685-ff5bb260df2e" => "Balanced".to_owned(),
        "8c5e7fda-e8bf-4a96-9a85-a6e23a8c635c" => "High performance".to_owned(),
        "a1841308-3541-4fab-bc81-f71556f20b4a" => "Power saver".to_owned(),
        "e9a42b02-d5df-448d-aa00-03f14749eb61" => "Ultimate Performance".to_owned(),
        other => format!("custom plan {other}"),
    }
}

/// The active power plan, or None when Windows does not say.
pub fn power_plan() -> Option<String> {
    let mut scheme: *mut GUID = std::ptr::null_mut();
    // SAFETY: null root key means the system's; `scheme` is a live pointer the call sets to a
    // LocalAlloc'd GUID, freed below.
    let status = unsafe { PowerGetActiveScheme(std::ptr::null_mut(), &mut scheme) };
    if status != ERROR_SUCCESS || scheme.is_null() {
        return None;
    }
    // SAFETY: on success `scheme` points at a GUID the call allocated.
    let text = guid_text(unsafe { &*scheme });
    // SAFETY: allocated by PowerGetActiveScheme with LocalAlloc, freed once.
    unsafe { LocalFree(scheme.cast()) };
    Some(power_plan_name(&text))
}

/// The CPU's brand string (CPUID 0x80000002..4).
fn cpu_model() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let extended = std::arch::x86_64::__cpuid(0x8000_0000).eax;
        if extended >= 0x8000_0004 {
            let mut bytes = Vec::with_capacity(48);
            for leaf in 0x8000_0002u32..=0x8000_0004 {
                let registers = std::arch::x86_64::__cpuid(leaf);
                for register in [registers.eax, registers.ebx, registers.ecx, registers.edx] {
                    bytes.extend_from_slice(&register.to_le_bytes());
                }
            }
            let text = String::from_utf8_lossy(&bytes)
                .trim_matches(char::from(0))
                .trim()
                .to_owned();
            if !text.is_empty() {
                return text;
            }
        }
    }
    std::env::var("PROCESSOR_IDENTIFIER").unwrap_or_else(|_| "unknown".to_owned())
}

/// The Windows part of the host description.
pub fn windows_facts() -> WindowsHost {
    let resolution = super::resolution::query().ok();
    WindowsHost {
        version: version(),
        timer_resolution_ns: resolution.map(|r| u64::from(r.current_100ns) * 100),
        timer_resolution_finest_ns: resolution.map(|r| u64::from(r.finest_100ns) * 100),
        timer_resolution_coarsest_ns: resolution.map(|r| u64::from(r.coarsest_100ns) * 100),
        power_plan: power_plan(),
        wine: wine_version(),
    }
}

/// Gathers the host description (the same fields as on Linux; `kernel` is the Windows version,
/// `clocksource` QueryPerformanceCounter's rate). `cpu_dma_latency_us` has no Windows
/// counterpart and is kept as given (None).
pub fn describe(cpu_dma_latency_us: Option<i32>) -> Host {
    let windows = windows_facts();
    Host {
        hostname: std::env::var("COMPUTERNAME").unwrap_or_else(|_| "unknown".to_owned()),
        kernel: match &windows.wine {
            Some(wine) => format!("{} under Wine {wine}", windows.version),
            None => windows.version.clone(),
        },
        preemption: "windows".to_owned(),
        cpu_model: cpu_model(),
        cpu_count: std::thread::available_parallelism()
            .map(|count| count.get() as u32)
            .unwrap_or(0),
        virtualization: crate::hypervisor::virtualization(),
        clocksource: format!(
            "QueryPerformanceCounter {} Hz",
            super::clock::qpc_frequency()
        ),
        cpu_dma_latency_us,
        windows: Some(windows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_power_plans() {
        assert_eq!(
            power_plan_name("381b4222-f694-41f0-9685-ff5bb260df2e"),
            "Balanced"
        );
        assert!(power_plan_name("00000000-0000-0000-0000-000000000000").starts_with("custom"));
    }

    #[test]
    fn describes_a_windows_host() {
        let host = describe(None);
        let windows = host.windows.expect("the Windows part");
        assert!(!windows.version.is_empty());
        assert!(windows.timer_resolution_ns.is_some());
        assert!(host.clocksource.starts_with("QueryPerformanceCounter"));
    }
}
