//! `rtlab monitor` for the CLI tests: a loopback port for its Prometheus export, the command that
//! serves it, and the HTTP GET that reads it.

use super::Sandbox;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

/// A loopback port nothing listens on (the kernel's choice, free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// GET `path` from 127.0.0.1:`port` with HTTP/1.0; the body, or None when nothing answers yet.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
}

/// `rtlab monitor` of the normal class (no privilege needed) in 1 s windows, exporting on
/// 127.0.0.1:`port` and stopping on its own after 5 min, for the caller to add flags to and spawn.
pub fn monitor_command(sandbox: &Sandbox, port: u16) -> Command {
    let mut command = sandbox.command();
    command.args([
        "monitor",
        "--prometheus",
        &format!("127.0.0.1:{port}"),
        "--classes",
        "normal",
        "--window",
        "1s",
        "--stop-after",
        "5min",
    ]);
    command
}
