//! An attacker's side of the socket: each [`Action`] written as the bytes the daemon reads, on a
//! connection that is opened again whenever the daemon closed it, and what came back, in one word.
//! RealtimeKit1 calls go over the bus instead ([`crate::rtkit_wire`]).

use crate::action::{Action, ConstraintRef, Malformed, ReleaseSpec, TargetSpec};
use crate::rtkit_wire::RtkitCaller;
use crate::world::{Me, World};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longer than the daemon's `request_timeout` (5 s), so a `timeout` answer is read, not missed.
const ANSWER_WAIT: Duration = Duration::from_secs(8);

/// The protocol's largest line is 65,536 bytes.
const TOO_LONG: usize = 70_000;

const RPC: &str = "rtlab.rpc/1";

/// One connection to the daemon.
pub struct Connection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Connection {
    pub fn open(socket: &Path) -> std::io::Result<Connection> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(ANSWER_WAIT))?;
        stream.set_write_timeout(Some(ANSWER_WAIT))?;
        Ok(Connection {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
        })
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer.write_all(bytes)
    }

    /// The next answer line, as JSON (`None`: the daemon closed the connection).
    pub fn answer(&mut self) -> std::io::Result<Option<Value>> {
        let mut line = Vec::new();
        if self.reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(None);
        }
        serde_json::from_slice(&line).map(Some).map_err(|error| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("an answer that is not JSON: {error}"),
            )
        })
    }
}

/// What an action came to: `ok`, an error code of the protocol (`permission`, `limit`, …),
/// `closed`, `no_answer`, `io`, or for floods the most common of those.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub answer: String,
    /// Requests (lines or connections) the action sent.
    pub requests: u32,
    /// Of those, how many the daemon answered `ok`.
    pub granted: u32,
}

impl Outcome {
    fn one(answer: impl Into<String>) -> Outcome {
        let answer = answer.into();
        Outcome {
            granted: u32::from(answer == "ok"),
            answer,
            requests: 1,
        }
    }
}

/// An answer in one word: `ok` or the error's code.
pub fn answer_word(answer: &Value) -> String {
    if answer.get("result").is_some() {
        "ok".to_owned()
    } else {
        answer["error"]["code"]
            .as_str()
            .unwrap_or("unreadable")
            .to_owned()
    }
}

/// One attacker's sending side: its connection, its constraints, its request ids, and its
/// connection to the bus where the daemon serves RealtimeKit1.
pub struct Attacker {
    socket: PathBuf,
    world: World,
    me: Me,
    connection: Option<Connection>,
    rtkit: Option<RtkitCaller>,
    constraints: Vec<u64>,
    next_id: u64,
}

impl Attacker {
    pub fn new(socket: PathBuf, world: World, me: Me) -> Attacker {
        let rtkit = world
            .bus_address
            .clone()
            .map(|address| RtkitCaller::new(address, me.uid));
        Attacker {
            socket,
            world,
            me,
            connection: None,
            rtkit,
            constraints: Vec::new(),
            next_id: 1,
        }
    }

    fn connection(&mut self) -> Result<&mut Connection, String> {
        if self.connection.is_none() {
            self.connection = Some(
                Connection::open(&self.socket)
                    .map_err(|error| format!("connect: {}", error.kind()).replace(' ', "_"))?,
            );
        }
        Ok(self.connection.as_mut().expect("just opened"))
    }

    /// Writes `bytes` and reads one answer; the connection is dropped when the daemon closed it
    /// or it failed.
    fn exchange(&mut self, bytes: &[u8], expect_answer: bool) -> String {
        let connection = match self.connection() {
            Ok(connection) => connection,
            Err(word) => return word,
        };
        let result = match connection.send(bytes) {
            Ok(()) if expect_answer => connection.answer(),
            Ok(()) => Ok(None),
            // Closed by the daemon before or while we wrote: its last word (`busy`, `too_long`)
            // may still be there to read.
            Err(error) => match connection.answer() {
                Ok(Some(answer)) => Ok(Some(answer)),
                _ => Err(error),
            },
        };
        match result {
            Ok(Some(answer)) => {
                let word = answer_word(&answer);
                if answer["id"] == 0 && word != "ok" {
                    // The errors that close the connection carry id 0, as do undecodable lines;
                    // a fresh connection costs little and is never wrong.
                    self.connection = None;
                }
                if let Some(id) = answer["result"]["constraint_id"].as_u64() {
                    self.constraints.push(id);
                }
                word
            }
            Ok(None) => {
                self.connection = None;
                if expect_answer {
                    "closed".to_owned()
                } else {
                    "sent".to_owned()
                }
            }
            Err(error) => {
                self.connection = None;
                match error.kind() {
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                        "no_answer".to_owned()
                    }
                    _ => format!("io_{:?}", error.kind()).to_lowercase(),
                }
            }
        }
    }

    fn request(&mut self, method: &str, params: Option<Value>) -> String {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = json!({"rpc": RPC, "id": id, "method": method});
        if let Some(params) = params {
            request["params"] = params;
        }
        let mut line = request.to_string();
        line.push('\n');
        self.exchange(line.as_bytes(), true)
    }

    /// Does `action` and says what came of it.
    pub fn perform(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Reserve {
                target,
                amount_ns,
                period_ns,
                backend,
            } => {
                let mut params = self.target_params(target);
                params["amount_ns"] = json!(amount_ns);
                params["period_ns"] = json!(period_ns);
                if let Some(backend) = backend {
                    params["backend"] = json!(backend);
                }
                Outcome::one(self.request("reserve", Some(params)))
            }
            Action::Release { target } => {
                let params = match target {
                    ReleaseSpec::GrantId { grant_id } => json!({"grant_id": grant_id}),
                    ReleaseSpec::Thread { thread } => {
                        json!({"tid": self.world.tid(&self.me, thread)})
                    }
                    ReleaseSpec::Process { process } => {
                        json!({"pid": self.world.pid(&self.me, process)})
                    }
                    ReleaseSpec::AllMine => json!({"all_mine": true}),
                };
                Outcome::one(self.request("release", Some(params)))
            }
            Action::BeginConstraint {
                thread,
                start,
                estimate_ns,
                deadline,
            } => {
                let now_ns = rtlab_sys::clock::monotonic_ns();
                let params = json!({
                    "tid": self.world.tid(&self.me, thread),
                    "start_ns": start.at(now_ns),
                    "estimate_ns": estimate_ns,
                    "deadline_ns": deadline.at(now_ns),
                });
                Outcome::one(self.request("begin_constraint", Some(params)))
            }
            Action::EndConstraint { constraint } => {
                let constraint_id = match *constraint {
                    ConstraintRef::Recent { back } => self
                        .constraints
                        .iter()
                        .rev()
                        .nth(back)
                        .copied()
                        .unwrap_or(0),
                    ConstraintRef::Id { constraint_id } => constraint_id,
                };
                Outcome::one(self.request(
                    "end_constraint",
                    Some(json!({"constraint_id": constraint_id})),
                ))
            }
            Action::List => Outcome::one(self.request("list", None)),
            Action::Ping => Outcome::one(self.request("ping", None)),
            Action::Malformed { kind } => self.malformed(*kind),
            Action::PingFlood { count } => self.ping_flood(*count),
            Action::ConnectionFlood { count, hold_ms } => self.connection_flood(*count, *hold_ms),
            Action::Reconnect => {
                self.connection = None;
                Outcome {
                    answer: "reconnected".to_owned(),
                    requests: 0,
                    granted: 0,
                }
            }
            Action::Rtkit { call } => Outcome::one(match &mut self.rtkit {
                Some(rtkit) => rtkit.perform(call, &self.world, &self.me),
                None => "no_bus".to_owned(),
            }),
        }
    }

    fn target_params(&self, target: &TargetSpec) -> Value {
        match target {
            TargetSpec::Thread { thread } => json!({"tid": self.world.tid(&self.me, thread)}),
            TargetSpec::Process {
                process,
                all_threads,
            } => json!({"pid": self.world.pid(&self.me, process), "all_threads": all_threads}),
            TargetSpec::Comm { comm } => json!({"comm": self.world.comm(&self.me, comm)}),
            TargetSpec::Activity { name, threads } => json!({
                "activity": name,
                "tids": threads
                    .iter()
                    .map(|thread| self.world.tid(&self.me, thread))
                    .collect::<Vec<_>>(),
            }),
        }
    }

    fn malformed(&mut self, kind: Malformed) -> Outcome {
        let id = self.next_id;
        self.next_id += 1;
        let own = self.me.process.tids.first().copied().unwrap_or(0);
        let line: Vec<u8> = match kind {
            Malformed::NotJson => b"reserve me 100%\n".to_vec(),
            Malformed::EmptyObject => b"{}\n".to_vec(),
            Malformed::WrongProtocol => {
                format!("{{\"rpc\":\"rtlab.rpc/2\",\"id\":{id},\"method\":\"ping\"}}\n").into_bytes()
            }
            Malformed::UnknownMethod => {
                format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"become_root\"}}\n").into_bytes()
            }
            Malformed::UnknownField => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"reserve\",\"params\":{{\"tid\":{own},\"amount_ns\":1000000,\"period_ns\":10000000,\"privileged\":true}}}}\n"
            )
            .into_bytes(),
            Malformed::TwoTargets => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"reserve\",\"params\":{{\"tid\":{own},\"pid\":1,\"amount_ns\":1000000,\"period_ns\":10000000}}}}\n"
            )
            .into_bytes(),
            Malformed::NegativeNumbers => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"reserve\",\"params\":{{\"tid\":{own},\"amount_ns\":-1,\"period_ns\":-10000000}}}}\n"
            )
            .into_bytes(),
            Malformed::HugeFloats => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"begin_constraint\",\"params\":{{\"tid\":{own},\"start_ns\":1e300,\"estimate_ns\":1.5,\"deadline_ns\":1e308}}}}\n"
            )
            .into_bytes(),
            Malformed::StringNumbers => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":\"{id}\",\"method\":\"reserve\",\"params\":{{\"tid\":\"{own}\",\"amount_ns\":\"1\",\"period_ns\":\"2\"}}}}\n"
            )
            .into_bytes(),
            Malformed::DeepNesting => {
                let mut text = format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"list\",\"params\":");
                text.push_str(&"[".repeat(20_000));
                text.push_str(&"]".repeat(20_000));
                text.push_str("}\n");
                text.into_bytes()
            }
            Malformed::TooLong => {
                let mut text = format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"ping\",\"x\":\"");
                text.push_str(&"A".repeat(TOO_LONG));
                text.push_str("\"}\n");
                text.into_bytes()
            }
            Malformed::InvalidUtf8 => {
                let mut bytes = format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"").into_bytes();
                bytes.extend_from_slice(&[0xff, 0xfe, 0xc0, 0x80]);
                bytes.extend_from_slice(b"\"}\n");
                bytes
            }
            Malformed::NulBytes => {
                format!("{{\"rpc\":\"{RPC}\",\u{0}\"id\":{id},\"method\":\"ping\"}}\r\n").into_bytes()
            }
            Malformed::IdOverflow => {
                format!("{{\"rpc\":\"{RPC}\",\"id\":18446744073709551616,\"method\":\"ping\"}}\n").into_bytes()
            }
            Malformed::ParamsArray => format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"release\",\"params\":[{{\"all_mine\":true}}]}}\n"
            )
            .into_bytes(),
            Malformed::HalfThenClose => {
                let word = self.exchange(format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"meth").as_bytes(), false);
                self.connection = None;
                return Outcome::one(word);
            }
            Malformed::HalfThenWait => {
                // The daemon answers `timeout` after request_timeout and closes.
                return Outcome::one(
                    self.exchange(format!("{{\"rpc\":\"{RPC}\",\"id\":{id},\"meth").as_bytes(), true),
                );
            }
        };
        Outcome::one(self.exchange(&line, true))
    }

    fn ping_flood(&mut self, count: u32) -> Outcome {
        let mut text = String::new();
        for _ in 0..count {
            let id = self.next_id;
            self.next_id += 1;
            text.push_str(&format!(
                "{{\"rpc\":\"{RPC}\",\"id\":{id},\"method\":\"ping\"}}\n"
            ));
        }
        let mut outcome = Outcome {
            answer: String::new(),
            requests: count,
            granted: 0,
        };
        let connection = match self.connection() {
            Ok(connection) => connection,
            Err(word) => {
                outcome.answer = word;
                return outcome;
            }
        };
        if let Err(error) = connection.send(text.as_bytes()) {
            self.connection = None;
            outcome.answer = format!("io_{:?}", error.kind()).to_lowercase();
            return outcome;
        }
        let mut last = "ok".to_owned();
        for _ in 0..count {
            match connection.answer() {
                Ok(Some(answer)) => {
                    let word = answer_word(&answer);
                    if word == "ok" {
                        outcome.granted += 1;
                    } else {
                        last = word;
                    }
                }
                Ok(None) => {
                    last = "closed".to_owned();
                    self.connection = None;
                    break;
                }
                Err(error) => {
                    // A reset after the daemon's last word (`busy`) is no silence.
                    last = match error.kind() {
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                            "no_answer".to_owned()
                        }
                        kind if last == "ok" => format!("io_{kind:?}").to_lowercase(),
                        _ => last,
                    };
                    self.connection = None;
                    break;
                }
            }
        }
        outcome.answer = last;
        outcome
    }

    fn connection_flood(&mut self, count: u32, hold_ms: u32) -> Outcome {
        let mut held = Vec::new();
        let mut refused = 0;
        for _ in 0..count {
            match UnixStream::connect(&self.socket) {
                Ok(stream) => held.push(stream),
                Err(_) => refused += 1,
            }
        }
        std::thread::sleep(Duration::from_millis(u64::from(hold_ms)));
        drop(held);
        Outcome {
            answer: if refused > 0 {
                "connect_refused".to_owned()
            } else {
                "held".to_owned()
            },
            requests: count,
            granted: 0,
        }
    }
}
