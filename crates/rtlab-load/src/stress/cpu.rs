//! The cpu stressor: integer and floating-point spinning on SCHED_OTHER.
//!
//! Alternates an integer mix (xorshift, multiply, divide) with a float chain (sqrt, mul-add), so
//! both execution-unit kinds are busy; each step is ~0.2 ms of work on a current CPU.

use super::{StepOutcome, Stressor};
use std::hint::black_box;

pub(crate) struct CpuStressor {
    integer_state: u64,
    float_state: f64,
}

const ROUNDS_PER_STEP: u32 = 50_000;

impl CpuStressor {
    pub fn new(worker_index: u32) -> CpuStressor {
        CpuStressor {
            integer_state: 0x9E37_79B9_7F4A_7C15 ^ u64::from(worker_index + 1),
            float_state: 1.0 + f64::from(worker_index),
        }
    }
}

impl Stressor for CpuStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        let mut state = self.integer_state;
        let mut accumulator = 0u64;
        for _ in 0..ROUNDS_PER_STEP {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            accumulator = accumulator
                .wrapping_add(state.wrapping_mul(0x2545_F491_4F6C_DD1D) / (state | 1 | 7));
        }
        self.integer_state = black_box(state ^ accumulator);
        let mut value = self.float_state;
        for _ in 0..ROUNDS_PER_STEP / 4 {
            value = (value * 1.000_000_1 + 0.5).sqrt() + 1.0;
        }
        self.float_state = black_box(value);
        Ok(StepOutcome {
            operations: 1,
            bytes: 0,
        })
    }
}
