//! Target lookup in /proc: a request's target (a thread, a process, a name, an activity) resolved
//! to its owner and threads, each with the watch handle whose pidfd told who owns it.

use super::wire::error;
use crate::watch::WatchHandle;
use rtlab_core::rpc::{ErrorCode, RpcError, Target};
use rtlab_plan::Owner;

/// A thread a request names, as /proc describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetThread {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
    pub real_uid: u32,
    pub effective_uid: u32,
}

/// A request's target resolved: its owner, its threads, and a watch handle for each thread (in the
/// same order), whose pidfd also told who owns the thread.
#[derive(Debug)]
pub struct Resolved {
    pub owner: Owner,
    pub threads: Vec<TargetThread>,
    pub handles: Vec<WatchHandle>,
}

/// Resolves a request's target to its owner and threads (no lock held), opening each thread's
/// watch handle on the way: the owner comes from that pidfd (`PIDFD_GET_INFO`), so one pidfd per
/// thread serves both the authorisation and the exit watch.
pub fn resolve_target(target: &Target) -> Result<Resolved, RpcError> {
    let describe = |tid: u32| -> Result<(TargetThread, WatchHandle), RpcError> {
        let (handle, (tgid, real_uid, effective_uid)) =
            WatchHandle::open_with_owner(tid).map_err(|failure| {
                if failure.kind() == std::io::ErrorKind::NotFound {
                    error(ErrorCode::NoSuchThread, format!("no thread {tid}"))
                } else {
                    error(
                        ErrorCode::System,
                        format!(
                            "reading who owns thread {tid} (pidfd, /proc/{tid}/status): {failure}"
                        ),
                    )
                }
            })?;
        let comm = rtlab_sys::proc_thread::thread_comm(tid).unwrap_or_default();
        Ok((
            TargetThread {
                pid: tgid,
                tid,
                comm,
                real_uid,
                effective_uid,
            },
            handle,
        ))
    };
    let resolved = |owner: Owner, described: Vec<(TargetThread, WatchHandle)>| {
        let (threads, handles) = described.into_iter().unzip();
        Resolved {
            owner,
            threads,
            handles,
        }
    };
    match target {
        Target::Thread { tid } => Ok(resolved(Owner::Thread(*tid), vec![describe(*tid)?])),
        Target::Process {
            pid,
            all_threads: false,
        } => {
            let main = describe(*pid)?;
            if main.0.pid != *pid {
                return Err(error(
                    ErrorCode::NoSuchThread,
                    format!(
                        "{pid} is a thread of process {}, not a process (use tid {pid})",
                        main.0.pid
                    ),
                ));
            }
            Ok(resolved(Owner::Thread(*pid), vec![main]))
        }
        Target::Process {
            pid,
            all_threads: true,
        } => {
            let tids = rtlab_sys::sched::process_thread_ids(*pid)
                .map_err(|_| error(ErrorCode::NoSuchThread, format!("no process {pid}")))?;
            let threads = tids
                .into_iter()
                .filter_map(|tid| describe(tid).ok())
                .collect::<Vec<_>>();
            if threads.is_empty() {
                return Err(error(ErrorCode::NoSuchThread, format!("no process {pid}")));
            }
            Ok(resolved(Owner::Activity(format!("pid:{pid}")), threads))
        }
        Target::Comm { name } => {
            let found = rtlab_sys::proc_thread::threads_named(name)
                .map_err(|failure| error(ErrorCode::System, format!("reading /proc: {failure}")))?;
            let threads = found
                .into_iter()
                .filter_map(|(_, tid)| describe(tid).ok())
                .filter(|(thread, _)| thread.comm == *name)
                .collect::<Vec<_>>();
            match threads.len() {
                0 => Err(error(
                    ErrorCode::NoSuchThread,
                    format!("no thread is named '{name}'"),
                )),
                1 => Ok(resolved(Owner::Thread(threads[0].0.tid), threads)),
                _ => Ok(resolved(Owner::Activity(format!("comm:{name}")), threads)),
            }
        }
        Target::Activity { name, tids } => {
            if Owner::parse(name) != Ok(Owner::Activity(name.clone())) {
                return Err(error(
                    ErrorCode::BadRequest,
                    format!("reserve: params.activity: '{name}' is not an activity name (no whitespace, not tid:N)"),
                ));
            }
            if tids.is_empty() {
                return Err(error(
                    ErrorCode::BadRequest,
                    "reserve: params.tids: an activity needs at least one thread",
                ));
            }
            let mut tids = tids.clone();
            tids.sort_unstable();
            tids.dedup();
            let threads = tids
                .iter()
                .map(|tid| describe(*tid))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(resolved(Owner::Activity(name.clone()), threads))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_resolve_to_owners_and_threads() {
        let tid = rtlab_sys::cpu::current_tid();
        let resolved = resolve_target(&Target::Thread { tid }).unwrap();
        assert_eq!(resolved.owner, Owner::Thread(tid));
        assert_eq!(resolved.threads[0].pid, std::process::id());
        assert_eq!(
            resolved.threads[0].real_uid,
            rtlab_sys::proc_thread::current_uid()
        );
        assert_eq!(resolved.handles.len(), 1);
        assert_eq!(resolved.handles[0].tid(), tid);
        let pid = std::process::id();
        let resolved = resolve_target(&Target::Process {
            pid,
            all_threads: true,
        })
        .unwrap();
        assert_eq!(resolved.owner, Owner::Activity(format!("pid:{pid}")));
        assert!(resolved.threads.iter().any(|thread| thread.tid == tid));
        assert_eq!(resolved.threads.len(), resolved.handles.len());
        for (thread, handle) in resolved.threads.iter().zip(&resolved.handles) {
            assert_eq!(thread.tid, handle.tid());
        }
        let missing = resolve_target(&Target::Thread {
            tid: i32::MAX as u32,
        })
        .unwrap_err();
        assert_eq!(missing.code, ErrorCode::NoSuchThread);
        let nobody = resolve_target(&Target::Comm {
            name: "no-such-thread-name".into(),
        })
        .unwrap_err();
        assert_eq!(nobody.code, ErrorCode::NoSuchThread);
        let bad = resolve_target(&Target::Activity {
            name: "tid:5".into(),
            tids: vec![tid],
        })
        .unwrap_err();
        assert_eq!(bad.code, ErrorCode::BadRequest);
    }
}
