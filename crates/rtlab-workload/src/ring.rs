//! A ring of buffers between one producer and one consumer, lock-free: the producer and consumer
//! may run at very different priorities (a starved decoder, a FIFO 99 device), so neither may
//! ever wait for the other to finish a step. Each slot holds the CLOCK_MONOTONIC time its buffer
//! was completed, so a device judges a buffer by when it was ready, not by when the device
//! happened to look.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug)]
pub struct Ring {
    capacity: u64,
    produced: AtomicU64,
    consumed: AtomicU64,
    ready_ns: Box<[AtomicU64]>,
}

impl Ring {
    /// A ring of `capacity` buffers, `prefill` of them ready from the start (time 0).
    pub fn new(capacity: u32, prefill: u32) -> Ring {
        let capacity = u64::from(capacity.max(1));
        Ring {
            capacity,
            produced: AtomicU64::new(u64::from(prefill).min(capacity)),
            consumed: AtomicU64::new(0),
            ready_ns: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn len(&self) -> u64 {
        self.produced.load(Ordering::Acquire) - self.consumed.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_full(&self) -> bool {
        self.len() >= self.capacity
    }

    /// Producer: adds a buffer completed at `now_ns`; false when the ring is full.
    pub fn produce(&self, now_ns: u64) -> bool {
        let produced = self.produced.load(Ordering::Relaxed);
        if produced - self.consumed.load(Ordering::Acquire) >= self.capacity {
            return false;
        }
        self.ready_ns[(produced % self.capacity) as usize].store(now_ns, Ordering::Relaxed);
        self.produced.store(produced + 1, Ordering::Release);
        true
    }

    /// Consumer: takes the oldest buffer if one was ready at `at_ns`; returns its ready time.
    pub fn consume_ready_by(&self, at_ns: u64) -> Option<u64> {
        let consumed = self.consumed.load(Ordering::Relaxed);
        if self.produced.load(Ordering::Acquire) == consumed {
            return None;
        }
        let ready = self.ready_ns[(consumed % self.capacity) as usize].load(Ordering::Relaxed);
        if ready > at_ns {
            return None;
        }
        self.consumed.store(consumed + 1, Ordering::Release);
        Some(ready)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_drains_and_judges_by_ready_time() {
        let ring = Ring::new(3, 1);
        assert_eq!(ring.len(), 1);
        assert!(ring.produce(10));
        assert!(ring.produce(20));
        assert!(ring.is_full() && !ring.produce(30));
        assert_eq!(ring.consume_ready_by(5), Some(0));
        // The next buffer was completed at 10: not ready by 5.
        assert_eq!(ring.consume_ready_by(5), None);
        assert_eq!(ring.consume_ready_by(10), Some(10));
        assert_eq!(ring.consume_ready_by(100), Some(20));
        assert!(ring.is_empty() && ring.consume_ready_by(u64::MAX).is_none());
    }
}
