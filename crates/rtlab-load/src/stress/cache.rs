//! The cache stressor: last-level-cache thrash.
//!
//! Writes one byte per 64-byte line at pseudo-random lines of a buffer twice the size of the
//! last-level cache (sysfs; 32 MiB when unknown), so nearly every access misses and evicts lines
//! other tasks, including the measuring threads, were using.

use super::{StepOutcome, Stressor};

const LINE_BYTES: usize = 64;
const LINES_PER_STEP: usize = 16_384;
const FALLBACK_CACHE_BYTES: u64 = 32 << 20;

pub(crate) struct CacheStressor {
    buffer: Vec<u8>,
    state: u64,
}

impl CacheStressor {
    pub fn new(worker_index: u32) -> std::io::Result<CacheStressor> {
        let cache_bytes = rtlab_sys::load_syscalls::last_level_cache_bytes()
            .unwrap_or(FALLBACK_CACHE_BYTES)
            .clamp(1 << 20, 512 << 20);
        let buffer = vec![1u8; (cache_bytes * 2) as usize];
        Ok(CacheStressor {
            buffer,
            state: 0x2545_F491_4F6C_DD1D ^ u64::from(worker_index + 1),
        })
    }
}

impl Stressor for CacheStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        let lines = self.buffer.len() / LINE_BYTES;
        let mut state = self.state;
        for _ in 0..LINES_PER_STEP {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let index = (state % lines as u64) as usize * LINE_BYTES;
            self.buffer[index] = self.buffer[index].wrapping_add(1);
        }
        self.state = state;
        Ok(StepOutcome {
            operations: 1,
            bytes: (LINES_PER_STEP * LINE_BYTES) as u64,
        })
    }
}
