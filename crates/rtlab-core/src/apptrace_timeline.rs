//! The spans a timeline draws: per thread, when it ran, waited for a CPU, or was blocked (and on
//! what). Kept only when a picture is asked for, and capped: past the cap the newest spans are
//! dropped and the timeline says so.

/// What a thread did in a span (rtlab-render's `apptrace_words::span_state` names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpanState {
    Running,
    Runnable,
    BlockedFutex,
    BlockedIo,
    BlockedSleep,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub tid: i32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub state: SpanState,
}

#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub spans: Vec<Span>,
    pub cap: usize,
    pub dropped: u64,
}

impl Timeline {
    pub fn new(cap: usize) -> Timeline {
        Timeline {
            spans: Vec::new(),
            cap,
            dropped: 0,
        }
    }

    pub fn push(&mut self, tid: i32, start_ns: u64, end_ns: u64, state: SpanState) {
        if self.spans.len() >= self.cap {
            self.dropped += 1;
            return;
        }
        self.spans.push(Span {
            tid,
            start_ns,
            end_ns,
            state,
        });
    }
}
