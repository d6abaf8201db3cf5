//! /dev/cpu_dma_latency: asks the kernel to keep CPUs out of deep idle states while held.
//!
//! The request lasts exactly as long as the file stays open, so holding it in a guard makes the
//! release automatic on every exit path, including a crash (the kernel closes the descriptor).

use std::fs::File;
use std::io::{self, Write};

pub const PATH: &str = "/dev/cpu_dma_latency";

#[derive(Debug)]
pub struct DmaLatencyGuard {
    _file: File,
    pub microseconds: i32,
}

impl DmaLatencyGuard {
    /// Requests a maximum wake-up latency of `microseconds` (0 = stay in C0).
    pub fn hold(microseconds: i32) -> io::Result<DmaLatencyGuard> {
        let mut file = std::fs::OpenOptions::new().write(true).open(PATH)?;
        file.write_all(&microseconds.to_ne_bytes())?;
        Ok(DmaLatencyGuard {
            _file: file,
            microseconds,
        })
    }
}

/// The value currently in force (the minimum of all holders), µs.
pub fn current() -> io::Result<i32> {
    use std::io::Read;
    let mut bytes = [0u8; 4];
    File::open(PATH)?.read_exact(&mut bytes)?;
    Ok(i32::from_ne_bytes(bytes))
}
