//! The net stressor: loopback TCP and UDP floods between threads — network softirq load.
//!
//! The worker thread sends: 16 KiB writes on a TCP connection and 1 KiB UDP datagrams, both to
//! 127.0.0.1. Two sink threads receive them. Every loopback packet is queued by `netif_rx` and
//! delivered in NET_RX softirq context, and every receive wakes a sink thread, so the load shows
//! up as softirq time and cross-thread wake-ups, which is what delays real-time threads.
//! The sinks stop when the sender closes the connection, on the stop flag, or at the deadline
//! (their reads time out every 50 ms to check).

use super::{FinishOutcome, StepOutcome, Stressor};
use rtlab_sys::load_syscalls::{current_thread_usage, ThreadUsage};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const TCP_CHUNK_BYTES: usize = 16 << 10;
const UDP_DATAGRAM_BYTES: usize = 1024;
const DATAGRAMS_PER_STEP: usize = 16;
const SINK_POLL: Duration = Duration::from_millis(50);

pub(crate) struct NetStressor {
    tcp: TcpStream,
    udp: UdpSocket,
    payload: Vec<u8>,
    sinks: Vec<JoinHandle<ThreadUsage>>,
    sinks_stop: Arc<AtomicBool>,
}

/// Sinks outlive the sender: they stop when `finish` asks (after the last send) or, if nobody
/// does, a second after the deadline — never while the sender may still be sending.
fn sink_should_stop(own_stop: &AtomicBool, deadline: Instant) -> bool {
    own_stop.load(Ordering::Relaxed) || Instant::now() >= deadline + Duration::from_secs(1)
}

impl NetStressor {
    pub fn new(deadline: Instant) -> std::io::Result<NetStressor> {
        let sinks_stop = Arc::new(AtomicBool::new(false));
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let tcp = TcpStream::connect(listener.local_addr()?)?;
        tcp.set_nodelay(true)?;
        tcp.set_write_timeout(Some(SINK_POLL))?;
        let (mut tcp_sink, _) = listener.accept()?;
        tcp_sink.set_read_timeout(Some(SINK_POLL))?;
        let udp_sink = UdpSocket::bind("127.0.0.1:0")?;
        udp_sink.set_read_timeout(Some(SINK_POLL))?;
        let udp = UdpSocket::bind("127.0.0.1:0")?;
        udp.connect(udp_sink.local_addr()?)?;
        let mut sinks = Vec::new();
        let own_stop = Arc::clone(&sinks_stop);
        sinks.push(
            std::thread::Builder::new()
                .name("rtlab-load-net-tcp-sink".to_owned())
                .spawn(move || {
                    let before = current_thread_usage().unwrap_or_default();
                    let mut buffer = vec![0u8; 64 << 10];
                    loop {
                        match tcp_sink.read(&mut buffer) {
                            Ok(0) => break,
                            Ok(_) => {}
                            Err(error)
                                if matches!(
                                    error.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => break,
                        }
                        if sink_should_stop(&own_stop, deadline) {
                            break;
                        }
                    }
                    current_thread_usage()
                        .map(|after| after.since(&before))
                        .unwrap_or_default()
                })?,
        );
        let own_stop = Arc::clone(&sinks_stop);
        sinks.push(
            std::thread::Builder::new()
                .name("rtlab-load-net-udp-sink".to_owned())
                .spawn(move || {
                    let before = current_thread_usage().unwrap_or_default();
                    let mut buffer = vec![0u8; UDP_DATAGRAM_BYTES * 2];
                    while !sink_should_stop(&own_stop, deadline) {
                        let _ = udp_sink.recv(&mut buffer);
                    }
                    current_thread_usage()
                        .map(|after| after.since(&before))
                        .unwrap_or_default()
                })?,
        );
        Ok(NetStressor {
            tcp,
            udp,
            payload: vec![0x5a; TCP_CHUNK_BYTES],
            sinks,
            sinks_stop,
        })
    }
}

impl Stressor for NetStressor {
    fn step(&mut self) -> std::io::Result<StepOutcome> {
        let mut bytes = 0u64;
        match self.tcp.write(&self.payload) {
            Ok(written) => bytes += written as u64,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(error) => return Err(error),
        }
        let mut datagrams = 0u64;
        for _ in 0..DATAGRAMS_PER_STEP {
            // A full receive queue drops datagrams; that is still softirq work, so a failed send
            // only goes uncounted.
            if let Ok(sent) = self.udp.send(&self.payload[..UDP_DATAGRAM_BYTES]) {
                bytes += sent as u64;
                datagrams += 1;
            }
        }
        Ok(StepOutcome {
            operations: 1 + datagrams,
            bytes,
        })
    }

    fn finish(&mut self) -> FinishOutcome {
        self.sinks_stop.store(true, Ordering::Relaxed);
        let _ = self.tcp.shutdown(Shutdown::Both);
        let mut helper_usage = ThreadUsage::default();
        for sink in self.sinks.drain(..) {
            if let Ok(usage) = sink.join() {
                helper_usage.add(&usage);
            }
        }
        FinishOutcome {
            helper_usage,
            notes: Vec::new(),
        }
    }
}

impl Drop for NetStressor {
    fn drop(&mut self) {
        self.sinks_stop.store(true, Ordering::Relaxed);
        let _ = self.tcp.shutdown(Shutdown::Both);
        for sink in self.sinks.drain(..) {
            let _ = sink.join();
        }
    }
}
