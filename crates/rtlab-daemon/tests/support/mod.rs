//! A daemon served in-process on a temporary socket, enforcing through the fake.

#![allow(dead_code)]

pub use rtlab_testkit::fake_enforcement;

use fake_enforcement::{FakeEnforcement, FakeLog};
use rtlab_daemon::{DaemonConfig, Stopped};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub struct TestDaemon {
    pub socket: PathBuf,
    pub log: Arc<Mutex<FakeLog>>,
    pub stop: Arc<AtomicBool>,
    pub panicked: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Stopped, rtlab_daemon::DaemonError>>>,
    _listening: rtlab_daemon::Listening,
    pub directory: tempfile::TempDir,
}

impl TestDaemon {
    pub fn start(configure: impl FnOnce(&mut DaemonConfig)) -> TestDaemon {
        let directory = tempfile::tempdir().unwrap();
        let socket = directory.path().join("rtlabd.sock");
        let mut config = DaemonConfig {
            socket: socket.clone(),
            state_dir: directory.path().to_owned(),
            ..DaemonConfig::default()
        };
        configure(&mut config);
        let listening = rtlab_daemon::socket::bind(&socket).unwrap();
        let listener = listening.listener.try_clone().unwrap();
        let (fake, log) = FakeEnforcement::new();
        let stop = Arc::new(AtomicBool::new(false));
        let panicked = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = Arc::clone(&stop);
            let panicked = Arc::clone(&panicked);
            std::thread::spawn(move || {
                rtlab_daemon::serve(listener, &config, Box::new(fake), stop, panicked)
            })
        };
        TestDaemon {
            socket,
            log,
            stop,
            panicked,
            thread: Some(thread),
            _listening: listening,
            directory,
        }
    }

    pub fn client(&self) -> rtlab_client::Client {
        rtlab_client::Client::connect(&self.socket).unwrap()
    }

    /// Stops serving and returns how it ended.
    pub fn stop(&mut self) -> Stopped {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap().unwrap()
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            self.stop.store(true, Ordering::SeqCst);
            let _ = thread.join();
        }
    }
}

/// A thread that waits until told to exit; `tid` is its kernel thread id.
pub struct ParkedThread {
    pub tid: u32,
    exit: mpsc::Sender<()>,
    handle: JoinHandle<()>,
}

impl ParkedThread {
    pub fn spawn() -> ParkedThread {
        let (tid_sender, tid_receiver) = mpsc::channel();
        let (exit, exit_receiver) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            tid_sender.send(rtlab_client::current_thread_id()).unwrap();
            let _ = exit_receiver.recv();
        });
        ParkedThread {
            tid: tid_receiver.recv().unwrap(),
            exit,
            handle,
        }
    }

    pub fn exit(self) {
        drop(self.exit);
        self.handle.join().unwrap();
    }
}
