//! Paper 004's measure/change pair on Windows (Bruce Dawson's experiment): another process
//! cycles its timeBeginPeriod request through 1..15 ms while this one measures its own Sleep(1).
//!
//! The changer speaks a line protocol on its standard input: `period N` (end the previous
//! request, begin N ms; answers `ok R` with the resolution then in force in 100 ns units, or
//! `error …`), `none` (end the request; `ok R`), `quit`. It exits at `quit` and at the end of its
//! input, so it cannot outlive a parent that dies (the pipe closes); Windows ends its request
//! when it exits.

use rtlab_core::Nanos;
use rtlab_sys::windows::clock::monotonic_ns;
use rtlab_sys::windows::resolution::{self, PeriodRequest};
use rtlab_sys::windows::timers::sleep_ms;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};

fn in_force() -> String {
    resolution::query()
        .map(|value| value.current_100ns.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// The changer's loop (the hidden `rtlab timers-changer` on Windows).
pub fn serve_changer(input: impl BufRead, mut output: impl Write) -> std::io::Result<()> {
    let mut request: Option<PeriodRequest> = None;
    for line in input.lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["quit"] => break,
            ["none"] => {
                request = None;
                writeln!(output, "ok {}", in_force())?;
            }
            ["period", value] => match value.parse::<u32>() {
                Ok(period) => {
                    request = None;
                    match PeriodRequest::begin(period) {
                        Ok(new) => {
                            request = Some(new);
                            writeln!(output, "ok {}", in_force())?;
                        }
                        Err(error) => writeln!(output, "error {error}")?,
                    }
                }
                Err(_) => writeln!(output, "error not a number of ms: {value}")?,
            },
            _ => writeln!(output, "error unknown command: {line}")?,
        }
        output.flush()?;
    }
    drop(request);
    Ok(())
}

/// The changer's answer to a step: the resolution in force (ns) once it held its request.
pub fn parse_answer(line: &str) -> Result<Option<u64>, String> {
    let line = line.trim();
    match line.strip_prefix("ok ") {
        Some("?") => Ok(None),
        Some(value) => value
            .parse::<u64>()
            .map(|units| Some(units * 100))
            .map_err(|_| format!("the changer answered '{line}'")),
        None => Err(format!(
            "the changer answered '{}'",
            line.strip_prefix("error ").unwrap_or(line)
        )),
    }
}

/// What Sleep(`sleep_ms`) took, again and again for `hold`: each sleep's duration, ns.
pub fn measure_sleeps(sleep_ms_each: u32, hold: Nanos, stop: &AtomicBool) -> Vec<u64> {
    let end = monotonic_ns() + hold.as_u64();
    let capacity =
        (hold.as_u64() / (u64::from(sleep_ms_each.max(1)) * 1_000_000)) as usize * 2 + 16;
    let mut durations = Vec::with_capacity(capacity.min(1_000_000));
    while durations.len() < durations.capacity() && !stop.load(Ordering::Relaxed) {
        let before = monotonic_ns();
        sleep_ms(sleep_ms_each);
        let after = monotonic_ns();
        durations.push(after - before);
        if after >= end {
            break;
        }
    }
    durations
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_carry_the_resolution() {
        assert_eq!(parse_answer("ok 10000\n"), Ok(Some(1_000_000)));
        assert_eq!(parse_answer("ok ?"), Ok(None));
        assert!(parse_answer("error timeBeginPeriod(99)").is_err());
    }

    #[test]
    fn the_changer_follows_its_protocol() {
        let input = b"period 5\nnone\nbogus\nquit\nperiod 1\n";
        let mut output = Vec::new();
        serve_changer(&input[..], &mut output).unwrap();
        let text = String::from_utf8(output).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("ok "));
        assert!(lines[1].starts_with("ok "));
        assert!(lines[2].starts_with("error unknown command"));
    }
}
