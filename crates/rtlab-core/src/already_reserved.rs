//! Whether a thread's reservation in force already meets a new request for it.
//!
//! The daemon refuses a second reservation for a thread (`already_reserved`): two budgets for one
//! thread cannot both be enforced. But the user's wish may be met already — a second
//! `reserve --auto --comm jackd` after a JACK client's reservation took jackd as its waker, or the
//! same `reserve 2ms/10ms --tid N` typed twice — and then refusing with exit 1 is wrong. The client
//! lists the daemon, finds the reservation holding the thread and asks [`judge`] whether it counts
//! as done; the text is rtlab-render's.
//!
//! The rule (docs/reservations.md):
//! - **another user's reservation** never counts: the caller cannot release or change it, and it
//!   may end when its owner wants; a clear refusal names its owner;
//! - a **budget named explicitly** (`reserve AMOUNT/PERIOD`) counts only when it is the one the
//!   reservation was asked for: a different one, even a smaller one, is a change of budget, which
//!   goes through `rtlab release` first, so that what the user typed is what is held;
//! - a **sized request** (`reserve --auto`) counts when what the reservation holds (read back from
//!   the kernel, else the planner's grant) is at least the share sized, with a budget per window of
//!   at least one activation's sized need: the thread runs as soon as it is woken while its budget
//!   lasts, and a budget that holds the sized share lasts through the activations of its window,
//!   whatever that window's length (`--auto` itself picks it as a whole number of periods, so two
//!   sizings of one thread can pick windows one period apart: 40 ms and 42.7 ms for JACK);
//! - a reservation the kernel holds nothing for (the thread was found at another policy) never
//!   counts.

use crate::rpc::GrantInfo;

/// What the new request asks of the thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wish {
    /// `reserve AMOUNT/PERIOD`: exactly this budget.
    Exactly { amount_ns: u64, period_ns: u64 },
    /// `reserve --auto`: the share `amount_ns / window_ns`, with at least `per_activation_ns` (one
    /// activation's sized need) in each window's budget.
    AtLeast {
        amount_ns: u64,
        window_ns: u64,
        per_activation_ns: u64,
    },
}

impl Wish {
    fn share(&self) -> f64 {
        let (amount, window) = match *self {
            Wish::Exactly {
                amount_ns,
                period_ns,
            } => (amount_ns, period_ns),
            Wish::AtLeast {
                amount_ns,
                window_ns,
                ..
            } => (amount_ns, window_ns),
        };
        amount as f64 / window.max(1) as f64
    }
}

/// What a reservation holds: `runtime_ns` of every `window_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Held {
    pub runtime_ns: u64,
    pub window_ns: u64,
}

impl Held {
    pub fn share(&self) -> f64 {
        self.runtime_ns as f64 / self.window_ns.max(1) as f64
    }
}

/// What a reservation holds, as the daemon read it back (`kernel_held`), else the planner's grant
/// (a daemon that did not read it back); `None` when the kernel holds nothing for it.
pub fn held(grant: &GrantInfo) -> Option<Held> {
    match &grant.kernel_held {
        Some(kernel) if kernel.read_from == "not_deadline" => None,
        Some(kernel) => Some(Held {
            runtime_ns: kernel.runtime_ns,
            window_ns: kernel.window_ns,
        }),
        None => Some(Held {
            runtime_ns: grant.granted.amount_ns,
            window_ns: grant.granted.period_ns,
        }),
    }
}

/// [`judge`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// The wish is met: the caller's own reservation, holding this.
    Met(Held),
    /// Another user's reservation (`owner_uid`).
    AnotherUsers { owner_uid: u32 },
    /// An explicit budget other than the one the reservation was asked for.
    AnotherBudget,
    /// A sized request the reservation does not cover: it holds this (`None`: nothing).
    Short(Option<Held>),
}

/// Whether `grant`, the reservation holding the thread, meets `wish` of `caller_uid`.
pub fn judge(grant: &GrantInfo, caller_uid: u32, wish: Wish) -> Judgement {
    if grant.owner_uid != caller_uid {
        return Judgement::AnotherUsers {
            owner_uid: grant.owner_uid,
        };
    }
    let held = held(grant);
    match wish {
        Wish::Exactly {
            amount_ns,
            period_ns,
        } => {
            if grant.requested.amount_ns != amount_ns || grant.requested.period_ns != period_ns {
                return Judgement::AnotherBudget;
            }
            match held {
                Some(held) => Judgement::Met(held),
                None => Judgement::Short(None),
            }
        }
        Wish::AtLeast {
            per_activation_ns, ..
        } => match held {
            // A relative tolerance of 1e-9 keeps a share equal to the asked one from failing
            // on rounding.
            Some(held)
                if held.runtime_ns >= per_activation_ns
                    && held.share() >= wish.share() * (1.0 - 1e-9) =>
            {
                Judgement::Met(held)
            }
            other => Judgement::Short(other),
        },
    }
}

/// The reservation in `grants` holding thread `tid`.
pub fn holding(grants: &[GrantInfo], tid: u32) -> Option<&GrantInfo> {
    grants
        .iter()
        .find(|grant| grant.threads.iter().any(|thread| thread.tid == tid))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::{Backend, WireKernelHeld, WireRate, WireThread};

    /// Thread 4242's reservation by uid 1000: asked 1.1 ms of every 40 ms; the kernel holds
    /// 2.2 ms of every 8 ms.
    fn jackd_reserved() -> GrantInfo {
        GrantInfo {
            grant_id: 3,
            owner_uid: 1000,
            owner: "tid:4242".to_owned(),
            threads: vec![WireThread {
                pid: 4240,
                tid: 4242,
                comm: "jackd".to_owned(),
            }],
            requested: WireRate {
                amount_ns: 1_100_000,
                period_ns: 40_000_000,
            },
            granted: WireRate {
                amount_ns: 220_000,
                period_ns: 8_000_000,
            },
            backend: Backend::Deadline,
            cpu: None,
            planner_cpu: 0,
            kernel_admission: "accepted".to_owned(),
            deadline_params: None,
            since: "2026-12-07T02:00:00Z".to_owned(),
            lingering_until: None,
            kernel_held: Some(WireKernelHeld {
                read_from: "sched_getattr".to_owned(),
                runtime_ns: 2_200_000,
                window_ns: 8_000_000,
                share: 0.275,
                tid: Some(4242),
                deadline_ns: Some(8_000_000),
                cpu: None,
                slots_per_window: None,
                policy: None,
                reclaim: false,
            }),
        }
    }

    const HELD: Held = Held {
        runtime_ns: 2_200_000,
        window_ns: 8_000_000,
    };

    #[test]
    fn a_sized_request_the_reservation_covers_is_met() {
        let grant = jackd_reserved();
        // What --auto sizes for jackd: 1.1 ms of every 40 ms (2.75 %), held as 27.5 % in 8 ms.
        let wish = Wish::AtLeast {
            amount_ns: 1_100_000,
            window_ns: 40_000_000,
            per_activation_ns: 73_000,
        };
        assert_eq!(judge(&grant, 1000, wish), Judgement::Met(HELD));
        // Exactly the share held, in the same window.
        let exact = Wish::AtLeast {
            amount_ns: 2_200_000,
            window_ns: 8_000_000,
            per_activation_ns: 73_000,
        };
        assert_eq!(judge(&grant, 1000, exact), Judgement::Met(HELD));
        // A shorter window than held, at a smaller share: JACK's second sizing picked 15 periods
        // (40 ms) where the first picked 16 (42.7 ms), and was refused for it (the first rule
        // asked for a window no longer than sized).
        let shorter = Wish::AtLeast {
            amount_ns: 100_000,
            window_ns: 2_000_000,
            per_activation_ns: 100_000,
        };
        assert_eq!(judge(&grant, 1000, shorter), Judgement::Met(HELD));
    }

    #[test]
    fn a_sized_request_for_a_larger_share_or_a_longer_activation_is_short() {
        let grant = jackd_reserved();
        let more = Wish::AtLeast {
            amount_ns: 12_000_000,
            window_ns: 40_000_000,
            per_activation_ns: 800_000,
        };
        assert_eq!(judge(&grant, 1000, more), Judgement::Short(Some(HELD)));
        // A small share, but one activation needs more than a window's budget.
        let long_activation = Wish::AtLeast {
            amount_ns: 3_000_000,
            window_ns: 200_000_000,
            per_activation_ns: 3_000_000,
        };
        assert_eq!(
            judge(&grant, 1000, long_activation),
            Judgement::Short(Some(HELD))
        );
    }

    #[test]
    fn another_users_reservation_never_counts() {
        let grant = jackd_reserved();
        let wish = Wish::AtLeast {
            amount_ns: 1_000,
            window_ns: 40_000_000,
            per_activation_ns: 1_000,
        };
        assert_eq!(
            judge(&grant, 1001, wish),
            Judgement::AnotherUsers { owner_uid: 1000 }
        );
        // Root too: the reservation is its owner's to keep or release.
        assert_eq!(
            judge(&grant, 0, wish),
            Judgement::AnotherUsers { owner_uid: 1000 }
        );
    }

    #[test]
    fn an_explicit_budget_counts_only_when_it_is_the_one_asked_before() {
        let grant = jackd_reserved();
        let same = Wish::Exactly {
            amount_ns: 1_100_000,
            period_ns: 40_000_000,
        };
        assert_eq!(judge(&grant, 1000, same), Judgement::Met(HELD));
        // Smaller, and so covered: still another budget, refused.
        let smaller = Wish::Exactly {
            amount_ns: 1_000_000,
            period_ns: 40_000_000,
        };
        assert_eq!(judge(&grant, 1000, smaller), Judgement::AnotherBudget);
    }

    #[test]
    fn a_reservation_the_kernel_holds_nothing_for_never_counts() {
        let mut grant = jackd_reserved();
        grant.kernel_held = Some(WireKernelHeld {
            read_from: "not_deadline".to_owned(),
            runtime_ns: 0,
            window_ns: 0,
            share: 0.0,
            tid: Some(4242),
            deadline_ns: None,
            cpu: None,
            slots_per_window: None,
            policy: Some("SCHED_OTHER".to_owned()),
            reclaim: false,
        });
        let same = Wish::Exactly {
            amount_ns: 1_100_000,
            period_ns: 40_000_000,
        };
        assert_eq!(judge(&grant, 1000, same), Judgement::Short(None));
        let sized = Wish::AtLeast {
            amount_ns: 1_000,
            window_ns: 40_000_000,
            per_activation_ns: 1_000,
        };
        assert_eq!(judge(&grant, 1000, sized), Judgement::Short(None));
    }

    #[test]
    fn without_a_read_back_the_planners_grant_is_what_is_held() {
        let mut grant = jackd_reserved();
        grant.kernel_held = None;
        let planned = Held {
            runtime_ns: 220_000,
            window_ns: 8_000_000,
        };
        assert_eq!(held(&grant), Some(planned));
        let wish = Wish::AtLeast {
            amount_ns: 1_100_000,
            window_ns: 40_000_000,
            per_activation_ns: 73_000,
        };
        assert_eq!(judge(&grant, 1000, wish), Judgement::Met(planned));
    }

    #[test]
    fn the_reservation_holding_a_thread_is_found_among_the_daemons() {
        let grants = vec![jackd_reserved()];
        assert_eq!(holding(&grants, 4242).map(|grant| grant.grant_id), Some(3));
        assert!(holding(&grants, 4243).is_none());
    }
}
