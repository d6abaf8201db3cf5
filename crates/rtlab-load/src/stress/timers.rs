//! The timers stressor: many short timers, i.e. hrtimer interrupts and wake-ups.
//!
//! Each step sleeps 16 times for 20–200 µs with the thread's timer slack set to 1 ns, so the
//! kernel cannot batch the expirations: every sleep is one hrtimer interrupt and one wake-up
//! (a voluntary context switch) on whichever CPU the worker runs.

use super::{StepOutcome, Stressor};
use std::time::Duration;

const SLEEPS_PER_STEP: u64 = 16;

pub(crate) struct TimerStressor {
    state: u64,
}

impl TimerStressor {
    pub fn new(worker_index: u32) -> std::io::Result<TimerStressor> {
        rtlab_sys::clock::set_timer_slack_ns(1)?;
        Ok(TimerStressor {
            state: 0x9E37_79B9_7F4A_7C15 ^ u64::from(worker_index + 1),
        })
    }
}

impl Stressor for TimerStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        for _ in 0..SLEEPS_PER_STEP {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            std::thread::sleep(Duration::from_micros(20 + self.state % 181));
        }
        Ok(StepOutcome {
            operations: SLEEPS_PER_STEP,
            bytes: 0,
        })
    }
}
