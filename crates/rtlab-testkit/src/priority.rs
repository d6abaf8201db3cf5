//! Starting a test's helpers at the default priority, whatever the test runner's own.

/// Puts the calling test thread at SCHED_OTHER, nice 0, so that every process and thread it starts
/// from now on begins at the default priority.
///
/// A machine may run everything raised: this one's init and every shell under it run at nice -10,
/// and a test's children inherit that. A sleeper that starts at nice -10 already looks raised, and
/// the tests that check a thread was put back to where it started would read the runner's nice as
/// the daemon's doing. Nice is per thread on Linux; a test's helpers are spawned from its own
/// thread, so setting it here covers them. Raising the nice value needs no privilege.
pub fn start_at_the_default_priority() {
    rtlab_sys::sched::set_current_thread_policy(rtlab_sys::sched::Policy::Other { nice: 0 })
        .expect("put the test thread at SCHED_OTHER, nice 0");
}
