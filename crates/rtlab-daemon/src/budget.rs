//! A burst budget of requests per uid, as rtkit's `actions-per-burst-max` within
//! `actions-burst-sec`: each unprivileged uid may send `requests_per_burst` requests within one
//! `burst_interval`, over all its connections; the interval starts at the uid's first request
//! after the last one ended. A request over the budget is answered `rate_limited` (saying when the
//! interval ends) and costs the daemon nothing more; the connection goes on.
//!
//! The budget has its own lock, never the registry's: a flooding client does not make other
//! users' requests wait. A uid whose budget is spent has its new connections refused
//! (`rate_limited`) by the accept thread, before a thread is started for them.

use rtlab_core::rpc::{ErrorCode, RpcError};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Past this many uids, windows that ended are dropped at the next charge.
const PRUNE_ABOVE: usize = 256;

/// Counts each uid's requests in its current interval.
#[derive(Debug)]
pub struct RequestBudget {
    requests_per_burst: u32,
    burst_interval: Duration,
    /// uid → (when its interval began, requests in it).
    windows: HashMap<u32, (Instant, u32)>,
}

impl RequestBudget {
    pub fn new(requests_per_burst: u32, burst_interval: Duration) -> RequestBudget {
        RequestBudget {
            requests_per_burst,
            burst_interval,
            windows: HashMap::new(),
        }
    }

    /// The refusal `uid` would get at `now` for one more request, without counting one: the
    /// accept thread asks it of each new connection, so a uid that has spent its budget gets
    /// `rate_limited` before a thread is started for it or its process is looked at.
    pub fn spent(&self, uid: u32, now: Instant) -> Option<RpcError> {
        let window = self.windows.get(&uid)?;
        let in_window = now.saturating_duration_since(window.0) < self.burst_interval;
        (in_window && window.1 >= self.requests_per_burst).then(|| self.refusal(uid, window.0, now))
    }

    fn refusal(&self, uid: u32, began: Instant, now: Instant) -> RpcError {
        let left = (began + self.burst_interval).saturating_duration_since(now);
        RpcError::new(
            ErrorCode::RateLimited,
            format!(
                "uid {uid} sent {} requests within {}, its budget (requests_per_burst and burst_interval in /etc/rtlab/rtlabd.toml); try again in {:.1} s",
                self.requests_per_burst,
                humantime::format_duration(self.burst_interval),
                left.as_secs_f64()
            ),
        )
    }

    /// Counts one request of `uid` at `now`; an error when it is over the budget.
    pub fn charge(&mut self, uid: u32, now: Instant) -> Result<(), RpcError> {
        if self.windows.len() > PRUNE_ABOVE {
            let interval = self.burst_interval;
            self.windows
                .retain(|_, (began, _)| now.saturating_duration_since(*began) < interval);
        }
        let window = self.windows.entry(uid).or_insert((now, 0));
        if now.saturating_duration_since(window.0) >= self.burst_interval {
            *window = (now, 0);
        }
        if window.1 >= self.requests_per_burst {
            let began = window.0;
            return Err(self.refusal(uid, began, now));
        }
        window.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_over_its_budget_is_refused_until_the_interval_ends_and_others_are_not() {
        let mut budget = RequestBudget::new(3, Duration::from_secs(20));
        let start = Instant::now();
        for _ in 0..3 {
            budget.charge(1000, start).unwrap();
        }
        let error = budget
            .charge(1000, start + Duration::from_secs(5))
            .unwrap_err();
        assert_eq!(error.code, ErrorCode::RateLimited);
        assert!(
            error
                .message
                .contains("uid 1000 sent 3 requests within 20s")
                && error.message.contains("try again in 15.0 s"),
            "{error}"
        );
        budget.charge(1001, start).unwrap();
        // Asking does not count; a spent budget is said as a charge would say it.
        let spent = budget
            .spent(1000, start + Duration::from_secs(5))
            .expect("spent");
        assert_eq!(spent.message, error.message);
        assert!(budget.spent(1001, start).is_none());
        assert!(budget.spent(1002, start).is_none());
        assert!(budget
            .spent(1000, start + Duration::from_secs(20))
            .is_none());
        // The refused request did not count: the next interval starts afresh.
        for _ in 0..3 {
            budget
                .charge(1000, start + Duration::from_secs(20))
                .unwrap();
        }
        assert!(budget
            .charge(1000, start + Duration::from_secs(21))
            .is_err());
    }

    #[test]
    fn ended_windows_are_dropped_when_many_uids_have_one() {
        let mut budget = RequestBudget::new(1, Duration::from_secs(1));
        let start = Instant::now();
        for uid in 0..=PRUNE_ABOVE as u32 {
            budget.charge(uid, start).unwrap();
        }
        budget
            .charge(99_999, start + Duration::from_secs(2))
            .unwrap();
        assert_eq!(budget.windows.len(), 1);
    }
}
