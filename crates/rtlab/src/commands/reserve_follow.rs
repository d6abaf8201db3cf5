//! `rtlab reserve --auto --follow`: after `--auto` reserved, keep each reservation it made sized
//! to its thread until the thread ends or SIGINT/SIGTERM, then release what it made. The
//! decisions are `rtlab_sched::auto_follow`'s and the loop over every reservation
//! `rtlab_sched::auto_follow_all`'s; this module only wires them to the kernel's per-task
//! counters (`rtlab_trace::auto_observe::counters_window`) and to the daemon, and prints each
//! change.

use super::daemon_client::SocketArgs;
use rtlab_core::rpc::{ErrorCode, GrantInfo};
use rtlab_core::Nanos;
use rtlab_sched::auto_follow::FollowWindow;
use rtlab_sched::auto_follow_all::Followed;
use rtlab_sched::auto_follow_all::{FollowDaemon, ResizeRefused};
use rtlab_sched::auto_reserve::{AutoMachine, AutoSize};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The daemon behind `--socket`, a connection per call, and the kernel's counters.
struct CountersAndDaemon<'a> {
    socket: &'a SocketArgs,
}

impl FollowDaemon for CountersAndDaemon<'_> {
    type Connection = rtlab_client::Client;

    fn connect(&self) -> Result<rtlab_client::Client, String> {
        self.socket.connect().map_err(|error| format!("{error:#}"))
    }

    fn reserve(
        &self,
        client: &mut rtlab_client::Client,
        tid: u32,
        size: &AutoSize,
    ) -> Result<GrantInfo, String> {
        client
            .reserve_reclaiming(tid, size.amount, size.window, size.backend.into())
            .map_err(|error| error.to_string())
    }

    fn resize(&self, grant_id: u64, size: &AutoSize) -> Result<String, ResizeRefused> {
        let mut client = self
            .connect()
            .map_err(|words| ResizeRefused { words, gone: false })?;
        match client.resize(grant_id, size.amount, size.window) {
            Ok(grant) => Ok(rtlab_render::reserve::resized(&grant)),
            Err(error) => Err(ResizeRefused {
                gone: error.code() == Some(ErrorCode::NotFound),
                words: error.to_string(),
            }),
        }
    }

    fn release(&self, client: &mut rtlab_client::Client, grant_id: u64) -> Result<bool, String> {
        client
            .release_grant(grant_id)
            .map_err(|error| error.to_string())
    }

    fn observe_window(
        &self,
        tid: u32,
        window: Duration,
        sampler_priority: u32,
        stop: &AtomicBool,
    ) -> Option<FollowWindow> {
        rtlab_trace::auto_observe::counters_window(tid, window, sampler_priority, stop)
    }
}

/// Follows every reservation in `followed` until every thread has ended or `stop` is set;
/// prints each change (unless `quiet`) and returns every line, each with its time since the
/// start, and the releases that failed.
pub fn follow_all(
    followed: &[Followed],
    machine: &AutoMachine,
    window: Nanos,
    socket: &SocketArgs,
    stop: &AtomicBool,
    quiet: bool,
) -> (Vec<String>, Vec<String>) {
    let print = |line: &str| {
        if !quiet {
            println!("{line}");
        }
    };
    rtlab_sched::auto_follow_all::follow_all(
        &CountersAndDaemon { socket },
        followed,
        machine,
        window,
        stop,
        &print,
    )
}
