//! The memory stressor: streaming bandwidth plus page-fault churn.
//!
//! Each step copies 4 MiB between two 8 MiB buffers (bandwidth, evicting caches) and maps, touches
//! and unmaps 1 MiB of anonymous memory (256 minor page faults, TLB shootdowns on munmap). 1 MiB
//! mappings stay below the transparent-huge-page size, so every page really faults.

use super::{StepOutcome, Stressor};
use rtlab_sys::load_syscalls::AnonymousMapping;

const BUFFER_BYTES: usize = 8 << 20;
const COPY_BYTES: usize = 4 << 20;
const CHURN_BYTES: usize = 1 << 20;
const PAGE_BYTES: usize = 4096;

pub(crate) struct MemoryStressor {
    source: Vec<u64>,
    destination: Vec<u64>,
    offset: usize,
}

impl MemoryStressor {
    pub fn new() -> std::io::Result<MemoryStressor> {
        let words = BUFFER_BYTES / 8;
        let source: Vec<u64> = (0..words as u64).collect();
        Ok(MemoryStressor {
            source,
            destination: vec![0; words],
            offset: 0,
        })
    }
}

impl Stressor for MemoryStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        let words = COPY_BYTES / 8;
        let start = self.offset;
        self.destination[start..start + words].copy_from_slice(&self.source[start..start + words]);
        self.offset = (self.offset + words) % (self.source.len() - words + 1);
        let mut mapping = AnonymousMapping::new(CHURN_BYTES)?;
        for page in mapping.as_mut_slice().chunks_mut(PAGE_BYTES) {
            page[0] = 1;
        }
        std::hint::black_box(mapping.as_mut_slice()[PAGE_BYTES]);
        drop(mapping);
        Ok(StepOutcome {
            operations: 1,
            bytes: COPY_BYTES as u64,
        })
    }
}
