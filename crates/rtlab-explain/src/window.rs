//! A bounded, time-ordered window of one CPU's recent events.
//!
//! The recorder reads the ring buffers continuously but only needs the last moments before each
//! late sample, so memory stays bounded however long the run: events older than the retention time
//! are dropped, and so are the oldest ones when a flood exceeds the event cap (counted, so an
//! episode that needed them is reported as having lost events).

use crate::event::TraceEvent;
use std::collections::VecDeque;

#[derive(Debug)]
pub struct EventWindow {
    events: VecDeque<TraceEvent>,
    max_events: usize,
    retention_ns: u64,
    /// Time spans in which events are known to be missing (ring overrun or our own cap).
    gaps: VecDeque<(u64, u64)>,
    n_evicted_for_capacity: u64,
}

impl EventWindow {
    pub fn new(max_events: usize, retention_ns: u64) -> EventWindow {
        EventWindow {
            events: VecDeque::new(),
            max_events: max_events.max(1),
            retention_ns,
            gaps: VecDeque::new(),
            n_evicted_for_capacity: 0,
        }
    }

    /// Appends an event. Events arrive in time order per CPU; one that does not (a clock step) is
    /// inserted at its place.
    pub fn push(&mut self, event: TraceEvent) {
        if self.events.len() >= self.max_events {
            if let Some(evicted) = self.events.pop_front() {
                let next = self
                    .events
                    .front()
                    .map_or(evicted.timestamp_ns, |next| next.timestamp_ns);
                self.mark_gap(evicted.timestamp_ns, next);
                self.n_evicted_for_capacity += 1;
            }
        }
        match self.events.back() {
            Some(last) if last.timestamp_ns > event.timestamp_ns => {
                let position = self
                    .events
                    .partition_point(|existing| existing.timestamp_ns <= event.timestamp_ns);
                self.events.insert(position, event);
            }
            _ => self.events.push_back(event),
        }
    }

    /// Records that events between `start_ns` and `end_ns` are missing.
    pub fn mark_gap(&mut self, start_ns: u64, end_ns: u64) {
        match self.gaps.back_mut() {
            Some(last) if last.1 >= start_ns => last.1 = last.1.max(end_ns),
            _ => self.gaps.push_back((start_ns, end_ns)),
        }
    }

    /// Drops what is older than the retention time before the newest event (or `now_ns`, if
    /// earlier), never dropping anything at or after `keep_from_ns` (the oldest window a pending
    /// episode still needs). Measuring from the newest event keeps a lagging reader's events.
    pub fn trim(&mut self, now_ns: u64, keep_from_ns: Option<u64>) {
        let reference = self.newest_ns().map_or(now_ns, |newest| newest.min(now_ns));
        let mut cutoff = reference.saturating_sub(self.retention_ns);
        if let Some(keep) = keep_from_ns {
            cutoff = cutoff.min(keep);
        }
        while self
            .events
            .front()
            .is_some_and(|event| event.timestamp_ns < cutoff)
        {
            self.events.pop_front();
        }
        while self.gaps.front().is_some_and(|gap| gap.1 < cutoff) {
            self.gaps.pop_front();
        }
    }

    /// The events with `start_ns <= time <= end_ns`, in order.
    pub fn range(&self, start_ns: u64, end_ns: u64) -> Vec<TraceEvent> {
        let first = self
            .events
            .partition_point(|event| event.timestamp_ns < start_ns);
        self.events
            .range(first..)
            .take_while(|event| event.timestamp_ns <= end_ns)
            .cloned()
            .collect()
    }

    /// Calls `visit` on the events in [start_ns, end_ns] without copying them.
    pub fn for_each_in(&self, start_ns: u64, end_ns: u64, mut visit: impl FnMut(&TraceEvent)) {
        let first = self
            .events
            .partition_point(|event| event.timestamp_ns < start_ns);
        for event in self
            .events
            .range(first..)
            .take_while(|event| event.timestamp_ns <= end_ns)
        {
            visit(event);
        }
    }

    /// True when events are known to be missing somewhere in [start_ns, end_ns], or when the
    /// window no longer reaches back to `start_ns`.
    pub fn lost_between(&self, start_ns: u64, end_ns: u64) -> bool {
        let overlaps = self
            .gaps
            .iter()
            .any(|gap| gap.0 <= end_ns && gap.1 >= start_ns);
        let evicted_needed = self.n_evicted_for_capacity > 0
            && self
                .events
                .front()
                .is_some_and(|first| first.timestamp_ns > start_ns);
        overlaps || evicted_needed
    }

    pub fn newest_ns(&self) -> Option<u64> {
        self.events.back().map(|event| event.timestamp_ns)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    pub fn n_evicted_for_capacity(&self) -> u64 {
        self.n_evicted_for_capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;

    fn marker(timestamp_ns: u64) -> TraceEvent {
        TraceEvent {
            timestamp_ns,
            cpu: 0,
            pid: 1,
            kind: EventKind::SoftirqExit { vector: 1 },
        }
    }

    #[test]
    fn keeps_memory_bounded_and_reports_what_it_dropped() {
        let mut window = EventWindow::new(3, 1_000);
        for time in [10, 20, 30, 40] {
            window.push(marker(time));
        }
        assert_eq!(window.len(), 3);
        assert_eq!(window.n_evicted_for_capacity(), 1);
        assert!(window.lost_between(5, 15));
        assert!(!window.lost_between(25, 40));
        window.push(marker(35));
        let times: Vec<u64> = window
            .range(0, 100)
            .iter()
            .map(|event| event.timestamp_ns)
            .collect();
        assert_eq!(times, vec![30, 35, 40]);
        assert_eq!(window.range(31, 39).len(), 1);
        // Retention counts back from the newest event, not from a wall clock a lagging reader
        // has fallen behind.
        window.trim(1_000_000, None);
        assert_eq!(window.len(), 3);
        window.push(marker(1_036));
        window.trim(1_000_000, Some(30));
        assert_eq!(window.len(), 3);
        window.trim(1_000_000, None);
        let times: Vec<u64> = window
            .range(0, u64::MAX)
            .iter()
            .map(|event| event.timestamp_ns)
            .collect();
        assert_eq!(times, vec![40, 1_036]);
        assert_eq!(window.newest_ns(), Some(1_036));
    }

    #[test]
    fn merges_overlapping_gaps() {
        let mut window = EventWindow::new(10, 1_000);
        window.mark_gap(100, 200);
        window.mark_gap(150, 300);
        window.mark_gap(400, 500);
        assert!(window.lost_between(250, 260));
        assert!(!window.lost_between(320, 380));
    }
}
