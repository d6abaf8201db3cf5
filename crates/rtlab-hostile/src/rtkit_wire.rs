//! An attacker's side of the system bus: each [`RtkitCall`] as a method call to
//! `org.freedesktop.RealtimeKit1` over zbus's blocking connection, and what came back in one word.
//!
//! Each caller connects as the uid it is outside any user namespace: inside `unshare -Ur` a
//! process sees itself as uid 0, and zbus would send that in `AUTH EXTERNAL`, which the bus
//! refuses (it checks the socket's credentials). Claiming 0 is one of the malformed calls
//! ([`RtkitCall::ClaimingRoot`]); the others go as the caller really is, so the daemon's own
//! checks are what they test.

use crate::action::{RtkitCall, WrongShape};
use crate::world::{Me, World};
use std::time::Duration;
use zbus::blocking::Connection;

pub const BUS_NAME: &str = "org.freedesktop.RealtimeKit1";
pub const OBJECT_PATH: &str = "/org/freedesktop/RealtimeKit1";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// Longer than anything the daemon does for a call; a call that takes this long is an oddity.
const CALL_WAIT: Duration = Duration::from_secs(8);

/// Connects to the bus at `address` as `uid` (what `AUTH EXTERNAL` says).
pub fn connect(address: &str, uid: u32) -> zbus::Result<Connection> {
    zbus::blocking::connection::Builder::address(address)?
        .user_id(uid)
        .method_timeout(CALL_WAIT)
        .build()
}

/// One sender's RealtimeKit1 calls: a connection made at the first call and again after the bus
/// or the daemon dropped it.
pub struct RtkitCaller {
    address: String,
    uid: u32,
    connection: Option<Connection>,
}

/// A call's answer in one word: `ok`, `rtkit_` and the D-Bus error's last component in snake case
/// (`rtkit_access_denied`, `rtkit_failed`, `rtkit_unknown_method`, …), `rtkit_handshake` when the
/// bus refused the connection, `no_answer_rtkit` or `io_rtkit` when it went wrong on the way.
pub fn answer_word<T>(result: &zbus::Result<T>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(zbus::Error::MethodError(name, _, _)) => {
            // The last component, or the last two where it is a bare `Error`
            // (`org.freedesktop.zbus.Error`: `rtkit_zbus_error`).
            let mut parts = name.as_str().rsplit('.');
            let last = parts.next().unwrap_or_default();
            let mut word = "rtkit".to_owned();
            if last == "Error" {
                word.push('_');
                word.push_str(&parts.next().unwrap_or_default().to_ascii_lowercase());
            }
            for character in last.chars() {
                if character.is_ascii_uppercase() {
                    word.push('_');
                }
                word.push(character.to_ascii_lowercase());
            }
            word
        }
        Err(zbus::Error::Handshake(_)) => "rtkit_handshake".to_owned(),
        Err(zbus::Error::InputOutput(error))
            if matches!(
                error.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            "no_answer_rtkit".to_owned()
        }
        Err(_) => "io_rtkit".to_owned(),
    }
}

impl RtkitCaller {
    pub fn new(address: String, uid: u32) -> RtkitCaller {
        RtkitCaller {
            address,
            uid,
            connection: None,
        }
    }

    fn call<B>(&mut self, interface: &str, member: &str, body: &B) -> String
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        if self.connection.is_none() {
            match connect(&self.address, self.uid) {
                Ok(connection) => self.connection = Some(connection),
                Err(error) => return answer_word::<()>(&Err(error)),
            }
        }
        let connection = self.connection.as_ref().expect("just connected");
        let result =
            connection.call_method(Some(BUS_NAME), OBJECT_PATH, Some(interface), member, body);
        if matches!(&result, Err(error) if !matches!(error, zbus::Error::MethodError(..))) {
            self.connection = None;
        }
        answer_word(&result)
    }

    /// Makes `call` and says what came of it.
    pub fn perform(&mut self, call: &RtkitCall, world: &World, me: &Me) -> String {
        let id = |id| world.rtkit_id(me, id);
        match call {
            RtkitCall::MakeThreadRealtime { thread, priority } => {
                self.call(BUS_NAME, "MakeThreadRealtime", &(id(thread), *priority))
            }
            RtkitCall::MakeThreadRealtimeWithPid {
                process,
                thread,
                priority,
            } => self.call(
                BUS_NAME,
                "MakeThreadRealtimeWithPID",
                &(id(process), id(thread), *priority),
            ),
            RtkitCall::MakeThreadHighPriority { thread, nice } => {
                self.call(BUS_NAME, "MakeThreadHighPriority", &(id(thread), *nice))
            }
            RtkitCall::MakeThreadHighPriorityWithPid {
                process,
                thread,
                nice,
            } => self.call(
                BUS_NAME,
                "MakeThreadHighPriorityWithPID",
                &(id(process), id(thread), *nice),
            ),
            RtkitCall::ResetKnown => self.call(BUS_NAME, "ResetKnown", &()),
            RtkitCall::ResetAll => self.call(BUS_NAME, "ResetAll", &()),
            RtkitCall::Exit => self.call(BUS_NAME, "Exit", &()),
            RtkitCall::Property { name } => {
                self.call(PROPERTIES, "Get", &(BUS_NAME, name.as_str()))
            }
            RtkitCall::WrongArguments { member, shape } => {
                let own = u64::from(me.process.tids.first().copied().unwrap_or(0));
                match shape {
                    WrongShape::Nothing => self.call(BUS_NAME, member, &()),
                    WrongShape::AString => self.call(BUS_NAME, member, &("1", 5u32)),
                    WrongShape::Signed => self.call(BUS_NAME, member, &(-1i64, -1i64, 5i32)),
                    WrongShape::TooMany => self.call(BUS_NAME, member, &(own, own, 5u32, 5u32)),
                }
            }
            RtkitCall::ClaimingRoot { thread, priority } => {
                let result = zbus::blocking::connection::Builder::address(self.address.as_str())
                    .and_then(|builder| builder.user_id(0).method_timeout(CALL_WAIT).build())
                    .and_then(|connection| {
                        connection.call_method(
                            Some(BUS_NAME),
                            OBJECT_PATH,
                            Some(BUS_NAME),
                            "MakeThreadRealtime",
                            &(id(thread), *priority),
                        )
                    });
                answer_word(&result)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_become_one_snake_case_word() {
        let error = |name: &str| -> zbus::Result<()> {
            let message = zbus::message::Message::method_call("/", "Ping")
                .unwrap()
                .build(&())
                .unwrap();
            Err(zbus::Error::MethodError(
                zbus::names::OwnedErrorName::try_from(name).unwrap(),
                None,
                message,
            ))
        };
        assert_eq!(
            answer_word(&error("org.freedesktop.DBus.Error.AccessDenied")),
            "rtkit_access_denied"
        );
        assert_eq!(
            answer_word(&error("org.freedesktop.DBus.Error.Failed")),
            "rtkit_failed"
        );
        assert_eq!(
            answer_word(&error("org.freedesktop.zbus.Error")),
            "rtkit_zbus_error"
        );
        assert_eq!(answer_word::<()>(&Ok(())), "ok");
    }
}
