//! The daemon over its real socket, with the fake enforcement: the protocol, thread watching,
//! hysteresis, shutdown, and hostile clients.

mod support;

use rtlab_client::ClientError;
use rtlab_core::rpc::{ErrorCode, ReleaseTarget, Target, MAX_LINE_BYTES};
use rtlab_core::Nanos;
use rtlab_daemon::Stopped;
use rtlab_testkit::wait_until;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;
use support::{ParkedThread, TestDaemon};

const LIMIT: Duration = Duration::from_secs(20);

fn ms(value: u64) -> Nanos {
    Nanos::from_millis(value)
}

fn read_line(stream: &UnixStream) -> String {
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

/// A parked thread that `client` reserved 1 ms every 10 ms.
fn reserved_worker(client: &mut rtlab_client::Client) -> ParkedThread {
    let worker = ParkedThread::spawn();
    client
        .reserve(Target::Thread { tid: worker.tid }, ms(1), ms(10), None)
        .unwrap();
    worker
}

/// The daemon closed `stream` with nothing more to read: `why` says when it should have.
fn assert_closed(stream: &mut UnixStream, why: &str) {
    let mut rest = Vec::new();
    assert_eq!(stream.read_to_end(&mut rest).unwrap(), 0, "{why}");
}

#[test]
fn reserve_list_and_release_a_thread() {
    let daemon = TestDaemon::start(|_| {});
    let worker = ParkedThread::spawn();
    let mut client = daemon.client();
    let ping = client.ping().unwrap();
    assert_eq!(ping.protocol, "rtlab.rpc/1");
    let grant = client
        .reserve(Target::Thread { tid: worker.tid }, ms(2), ms(10), None)
        .unwrap();
    assert_eq!(grant.requested.amount_ns, 2_000_000);
    assert!(grant.granted.fraction() >= 0.2);
    assert_eq!(grant.threads[0].tid, worker.tid);
    assert_eq!(grant.threads[0].pid, std::process::id());
    assert_eq!(grant.owner_uid, rtlab_sys::proc_thread::current_uid());
    assert!(daemon.log.lock().unwrap().managed.contains(&worker.tid));
    let listed = client.list().unwrap();
    assert_eq!(listed.grants, vec![grant.clone()]);
    assert_eq!(listed.cpus.len(), 2);
    assert!(listed.cpus.iter().any(|cpu| cpu.reserved_fraction > 0.0));
    // A second reservation for the same thread is refused.
    let again = client
        .reserve(Target::Thread { tid: worker.tid }, ms(1), ms(10), None)
        .unwrap_err();
    assert_eq!(again.code(), Some(ErrorCode::AlreadyReserved));
    let released = client
        .release(ReleaseTarget::Thread { tid: worker.tid })
        .unwrap();
    assert_eq!(released.released, vec![grant.grant_id]);
    assert!(client.list().unwrap().grants.is_empty());
    assert!(daemon.log.lock().unwrap().managed.is_empty());
    worker.exit();
}

#[test]
fn a_reservation_disappears_when_its_thread_exits() {
    let daemon = TestDaemon::start(|_| {});
    let worker = ParkedThread::spawn();
    let tid = worker.tid;
    let mut client = daemon.client();
    client
        .reserve(Target::Thread { tid }, ms(1), ms(10), None)
        .unwrap();
    worker.exit();
    wait_until(LIMIT, "the exited thread's reservation is gone", || {
        client.list().unwrap().grants.is_empty()
    });
    assert!(daemon.log.lock().unwrap().managed.is_empty());
    assert_eq!(daemon.log.lock().unwrap().released.len(), 1);
}

#[test]
fn an_activity_outlives_its_last_thread_by_the_hysteresis() {
    let daemon = TestDaemon::start(|config| config.hysteresis = Duration::from_millis(300));
    let mut client = daemon.client();
    let first = ParkedThread::spawn();
    let grant = client
        .reserve(
            Target::Activity {
                name: "decoder".into(),
                tids: vec![first.tid],
            },
            ms(1),
            ms(10),
            None,
        )
        .unwrap();
    first.exit();
    wait_until(LIMIT, "the activity lingers", || {
        client.list().unwrap().grants[0].lingering_until.is_some()
    });
    wait_until(LIMIT, "the activity is let go", || {
        client.list().unwrap().grants.is_empty()
    });
    assert_eq!(daemon.log.lock().unwrap().released, vec![grant.grant_id]);
}

#[test]
fn a_restarted_activity_keeps_its_reservation() {
    let daemon = TestDaemon::start(|config| config.hysteresis = Duration::from_secs(600));
    let mut client = daemon.client();
    let first = ParkedThread::spawn();
    let activity = |tid| Target::Activity {
        name: "decoder".into(),
        tids: vec![tid],
    };
    let grant = client
        .reserve(activity(first.tid), ms(1), ms(10), None)
        .unwrap();
    first.exit();
    wait_until(LIMIT, "the activity lingers", || {
        client.list().unwrap().grants[0].lingering_until.is_some()
    });
    let second = ParkedThread::spawn();
    let again = client
        .reserve(activity(second.tid), ms(1), ms(10), None)
        .unwrap();
    assert_eq!(again.grant_id, grant.grant_id);
    assert!(again.lingering_until.is_none());
    assert_eq!(again.threads[0].tid, second.tid);
    assert!(daemon.log.lock().unwrap().released.is_empty());
    second.exit();
}

#[test]
fn constraints_are_answered_at_once_and_end_with_the_time_used() {
    let daemon = TestDaemon::start(|_| {});
    let mut client = daemon.client();
    let tid = rtlab_client::current_thread_id();
    let now = rtlab_client::monotonic_now();
    let id = client
        .begin_constraint(tid, now, ms(2), Nanos(now.0 + ms(50).0))
        .unwrap();
    let end = client.end_constraint(id).unwrap();
    assert_eq!(end.used, ms(2));
    assert!(end.met_deadline);
    let unknown = client.end_constraint(id).unwrap_err();
    assert_eq!(unknown.code(), Some(ErrorCode::NotFound));
    let impossible = client
        .begin_constraint(tid, now, ms(60), Nanos(now.0 + ms(50).0))
        .unwrap_err();
    assert_eq!(impossible.code(), Some(ErrorCode::Infeasible));
}

#[test]
fn unknown_threads_and_names_are_errors_that_say_so() {
    let daemon = TestDaemon::start(|_| {});
    let mut client = daemon.client();
    let error = client
        .reserve(
            Target::Thread {
                tid: i32::MAX as u32,
            },
            ms(1),
            ms(10),
            None,
        )
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NoSuchThread));
    let error = client
        .reserve(
            Target::Comm {
                name: "no-such-program".into(),
            },
            ms(1),
            ms(10),
            None,
        )
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("no thread is named 'no-such-program'"),
        "{error}"
    );
    let error = client
        .release(ReleaseTarget::Grant { grant_id: 77 })
        .unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::NotFound));
}

#[test]
fn a_stop_request_reverts_every_thread_and_removes_nothing_else() {
    let mut daemon = TestDaemon::start(|_| {});
    let worker = reserved_worker(&mut daemon.client());
    assert_eq!(daemon.stop(), Stopped::Requested);
    let log = daemon.log.lock().unwrap();
    assert_eq!(log.revert_all_calls, 1);
    assert!(log.managed.is_empty());
    drop(log);
    worker.exit();
}

#[test]
fn a_panic_elsewhere_in_the_daemon_reverts_every_thread() {
    let mut daemon = TestDaemon::start(|_| {});
    let worker = reserved_worker(&mut daemon.client());
    // What the CLI's panic hook does when any daemon thread panics.
    daemon
        .panicked
        .store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(daemon.stop(), Stopped::Panicked);
    assert_eq!(daemon.log.lock().unwrap().revert_all_calls, 1);
    worker.exit();
}

// ---- hostile clients

#[test]
fn a_malformed_line_gets_an_error_and_the_connection_goes_on() {
    let daemon = TestDaemon::start(|_| {});
    let mut stream = UnixStream::connect(&daemon.socket).unwrap();
    stream
        .write_all(
            b"{\"rpc\":\"rtlab.rpc/1\",\"id\":5,\"method\":\"reserve\",\"params\":{}}\nnot json\n",
        )
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut expect_answer = |id: &str, text: &str| {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(
            line.contains(&format!("\"id\":{id}")) && line.contains(text),
            "expected id {id} and {text}: {line}"
        );
    };
    expect_answer("5", "bad_request");
    expect_answer("0", "bad_request");
    // Pipelined requests are answered in order on the same connection.
    stream
        .write_all(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":6,\"method\":\"ping\"}\n{\"rpc\":\"rtlab.rpc/1\",\"id\":7,\"method\":\"list\"}\n")
        .unwrap();
    expect_answer("6", "server_version");
    expect_answer("7", "grants");
}

#[test]
fn an_oversized_line_gets_too_long_and_is_cut_off() {
    let daemon = TestDaemon::start(|_| {});
    let mut stream = UnixStream::connect(&daemon.socket).unwrap();
    let flood = vec![b'x'; MAX_LINE_BYTES + 10];
    // The daemon may close before reading everything: a failed write is fine.
    let _ = stream.write_all(&flood);
    let answer = read_line(&stream);
    assert!(answer.contains("too_long"), "{answer}");
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    daemon.client().ping().unwrap();
}

#[test]
fn a_slow_writer_never_stalls_another_client_and_is_cut_off_after_the_request_timeout() {
    let daemon = TestDaemon::start(|config| config.request_timeout = Duration::from_millis(500));
    let mut slow = UnixStream::connect(&daemon.socket).unwrap();
    slow.write_all(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,")
        .unwrap();
    // While the slow request is open, others are served.
    for _ in 0..5 {
        daemon.client().ping().unwrap();
    }
    let answer = read_line(&slow);
    assert!(answer.contains("\"timeout\""), "{answer}");
    assert_closed(&mut slow, "closed after the timeout");
}

#[test]
fn a_stalled_client_holds_only_its_own_connection() {
    // A long request timeout: the stalled request stays open for the whole test.
    let daemon = TestDaemon::start(|config| config.request_timeout = Duration::from_secs(600));
    let mut stalled = UnixStream::connect(&daemon.socket).unwrap();
    stalled.write_all(b"{\"rpc\":").unwrap();
    let mut client = daemon.client();
    let worker = reserved_worker(&mut client);
    client.release(ReleaseTarget::AllMine).unwrap();
    worker.exit();
}

#[test]
fn connections_over_the_cap_get_busy_and_the_daemon_recovers() {
    let daemon = TestDaemon::start(|config| {
        config.max_connections = 16;
        config.max_connections_per_user = 1_000;
    });
    let mut admitted = Vec::new();
    for _ in 0..16 {
        let mut client = daemon.client();
        client.ping().unwrap();
        admitted.push(client);
    }
    // A thousand more: every one is refused with `busy`, none stalls the daemon.
    for _ in 0..1_000 {
        let mut stream = UnixStream::connect(&daemon.socket).unwrap();
        let _ = stream.write_all(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"ping\"}\n");
        let answer = read_line(&stream);
        assert!(answer.contains("\"busy\""), "{answer}");
    }
    let error = daemon.client().ping().unwrap_err();
    assert_eq!(error.code(), Some(ErrorCode::Busy), "{error}");
    admitted.truncate(0);
    wait_until(LIMIT, "a slot is free again", || {
        daemon.client().ping().is_ok()
    });
}

#[test]
fn a_user_over_the_per_user_cap_is_refused_while_the_cap_is_per_uid() {
    let daemon = TestDaemon::start(|config| config.max_connections_per_user = 2);
    let mut first = daemon.client();
    let mut second = daemon.client();
    first.ping().unwrap();
    second.ping().unwrap();
    let error = daemon.client().ping().unwrap_err();
    assert!(
        error.to_string().contains("max_connections_per_user"),
        "{error}"
    );
}

#[test]
fn a_client_that_dies_mid_request_frees_its_slot() {
    let daemon = TestDaemon::start(|config| config.max_connections = 1);
    {
        let mut dying = UnixStream::connect(&daemon.socket).unwrap();
        dying
            .write_all(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"res")
            .unwrap();
    }
    wait_until(LIMIT, "the dead client's slot is free", || {
        daemon.client().ping().is_ok()
    });
}

#[test]
fn a_client_that_never_reads_does_not_block_the_daemon() {
    let daemon = TestDaemon::start(|config| {
        config.request_timeout = Duration::from_millis(500);
        // Its 40,000 requests would spend a non-root user's budget, and the pings below are
        // the same user's: the budget has tests of its own.
        config.requests_per_burst = u32::MAX;
    });
    let mut greedy = UnixStream::connect(&daemon.socket).unwrap();
    greedy.set_nonblocking(true).unwrap();
    let request = b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"list\"}\n".repeat(200);
    // Send requests without reading any answer until the socket is full.
    for _ in 0..200 {
        if greedy.write_all(&request).is_err() {
            break;
        }
    }
    for _ in 0..5 {
        daemon.client().ping().unwrap();
    }
    let mut client = daemon.client();
    let listed: Result<_, ClientError> = client.list();
    assert!(listed.is_ok(), "{listed:?}");
}

#[test]
fn connections_that_send_nothing_do_not_block_others_and_are_closed_when_idle() {
    let daemon = TestDaemon::start(|config| {
        config.idle_timeout = Duration::from_millis(300);
        config.max_connections_per_user = 1_000;
    });
    let silent: Vec<UnixStream> = (0..100)
        .map(|_| UnixStream::connect(&daemon.socket).unwrap())
        .collect();
    // Every silent connection holds a slot; requests on others are answered.
    for _ in 0..5 {
        daemon.client().ping().unwrap();
    }
    for mut stream in silent {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        assert_closed(
            &mut stream,
            "closed, without an answer, after the idle timeout",
        );
    }
}

#[test]
fn a_ten_megabyte_line_gets_too_long_while_others_are_served() {
    let daemon = TestDaemon::start(|_| {});
    let mut flood = UnixStream::connect(&daemon.socket).unwrap();
    let reader = flood.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let line = vec![b'{'; 10 * 1024 * 1024];
        // The daemon stops reading after its cap and closes: the write fails part-way.
        let written = flood.write_all(&line);
        let _ = flood.write_all(b"\n");
        written
    });
    let answer = read_line(&reader);
    assert!(answer.contains("\"too_long\""), "{answer}");
    assert!(writer.join().unwrap().is_err(), "cut off before 10 MB");
    // Others are served, with a malformed line answered and the connection kept.
    let mut other = UnixStream::connect(&daemon.socket).unwrap();
    other
        .write_all(b"{\"rpc\":\"rtlab.rpc/1\",\"id\":1,\"method\":\"ping\",\"params\":[1,2\n{\"rpc\":\"rtlab.rpc/1\",\"id\":2,\"method\":\"ping\"}\n")
        .unwrap();
    let mut lines = BufReader::new(other);
    let mut first = String::new();
    lines.read_line(&mut first).unwrap();
    assert!(first.contains("bad_request"), "{first}");
    let mut second = String::new();
    lines.read_line(&mut second).unwrap();
    assert!(
        second.contains("\"id\":2") && second.contains("server_version"),
        "{second}"
    );
}
