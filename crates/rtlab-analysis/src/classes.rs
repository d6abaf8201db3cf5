//! Application classes: what a latency distribution has to be good enough *for*.
//!
//! Paper 002 (Table 1) characterises streaming applications by `n` buffers of `t` ms each: such an
//! application tolerates a wake-up latency of `(n − 1)·t − c` (`c` = compute time per buffer) before
//! its output runs dry. A class bundles one such configuration with the miss rate its users accept
//! (002 section 5.2: one dropped buffer every 5-10 minutes for low-latency audio, one per hour for a
//! soft modem, one per day for a high-reliability device), so `rtlab forecast` can give a plain
//! verdict per class. The built-in rows are 002's four plus today's common cases; users add their
//! own in a TOML file.

use crate::application::{AppClock, Counting};
use rtlab_core::{parse_duration, Nanos};
use serde::Deserialize;
use std::fmt;

/// A tolerable failure rate: `count` failures per `per` of wall-clock time (`1/day`, `1/10min`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate {
    pub count: f64,
    pub per: Nanos,
}

impl Rate {
    pub const fn one_per(per: Nanos) -> Rate {
        Rate { count: 1.0, per }
    }

    /// The mean time between failures this rate allows, in seconds.
    pub fn mean_interval_s(&self) -> f64 {
        self.per.as_secs_f64() / self.count
    }

    /// Failures per second.
    pub fn per_second(&self) -> f64 {
        self.count / self.per.as_secs_f64()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = self.per.as_u64() / 1_000_000_000;
        let unit = match seconds {
            60 => "min".to_owned(),
            3_600 => "hour".to_owned(),
            86_400 => "day".to_owned(),
            604_800 => "week".to_owned(),
            _ => self.per.to_string(),
        };
        write!(formatter, "{}/{}", self.count, unit)
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RateError {
    #[error("'{0}' is not a rate (examples: 1/day, 1/hour, 1/10min, 2/h)")]
    NotARate(String),
}

/// Parses `1/day`, `1/hour`, `1/10min`, `2/h`, `1/week`.
pub fn parse_rate(text: &str) -> Result<Rate, RateError> {
    let fail = || RateError::NotARate(text.to_owned());
    let (count_text, per_text) = text.trim().split_once('/').ok_or_else(fail)?;
    let count: f64 = count_text.trim().parse().map_err(|_| fail())?;
    if !(count.is_finite() && count > 0.0) {
        return Err(fail());
    }
    let per_text = per_text.trim();
    let per = match per_text {
        "s" | "sec" | "second" => Nanos::from_secs(1),
        "min" | "minute" => Nanos::from_secs(60),
        "h" | "hour" => Nanos::from_secs(3_600),
        "d" | "day" => Nanos::from_secs(86_400),
        "week" => Nanos::from_secs(604_800),
        other => parse_duration(other).map_err(|_| fail())?,
    };
    if per.as_u64() == 0 {
        return Err(fail());
    }
    Ok(Rate { count, per })
}

/// One application class: a buffering configuration and the failure rate its users accept.
#[derive(Clone, Debug, PartialEq)]
pub struct ApplicationClass {
    /// Short name used on the command line (`pro-audio-48k-128x2`).
    pub name: String,
    /// What it is, in words, for verdicts ("pro audio, 128 frames × 2 at 48 kHz").
    pub description: String,
    /// Number of buffers `n`.
    pub buffers: u32,
    /// Length of one buffer `t` (the wake-up period).
    pub buffer_period: Nanos,
    /// Compute time per buffer `c`.
    pub compute: Nanos,
    /// Threads in the wake-up chain, each on its own CPU: 1 for a thread woken by its own
    /// timer or device, 2 for an audio server's client (the server's driver thread wakes it).
    pub chain: u32,
    /// How the application counts the failures one stall costs it: once (it restarts its
    /// cycle, as JACK does) or once per period the stall made late (it catches up).
    pub counting: Counting,
    /// Whether its clock runs on while every CPU is taken (a device) or stops with them (a
    /// clock kept by a thread, as JACK's dummy driver's).
    pub clock: AppClock,
    /// The failure rate users of this class accept.
    pub acceptable: Rate,
    /// Where the numbers come from.
    pub source: String,
}

impl ApplicationClass {
    /// What the class assumes of the application, for verdicts: "c = 0.8 ms, woken through a
    /// chain of 2 threads".
    pub fn assumption(&self) -> String {
        let compute = if self.compute == Nanos::ZERO {
            "c = 0 (give the application's own with --compute)".to_owned()
        } else {
            let millis = format!("{:.3}", self.compute.as_u64() as f64 / 1e6);
            format!(
                "c = {} ms",
                millis.trim_end_matches('0').trim_end_matches('.')
            )
        };
        let described = match self.chain {
            0 | 1 => compute,
            chain => format!("{compute}, woken through a chain of {chain} threads"),
        };
        // Restarting is what the forecast long assumed; only the other way is spelled out.
        match self.counting {
            Counting::Restart => described,
            Counting::CatchUp => format!("{described}, catching up after a stall"),
        }
    }

    /// `(n − 1)·t`, paper 002's latency tolerance.
    pub fn latency_tolerance(&self) -> Nanos {
        Nanos(u64::from(self.buffers.saturating_sub(1)) * self.buffer_period.as_u64())
    }
}

const MINUTE: Nanos = Nanos::from_secs(60);
const HOUR: Nanos = Nanos::from_secs(3_600);
const DAY: Nanos = Nanos::from_secs(86_400);

fn frames_at_48k(frames: u64) -> Nanos {
    // frames / 48 000 s, rounded to the nearest ns (64 frames = 1 333 333 ns).
    Nanos((frames * 1_000_000_000 + 24_000) / 48_000)
}

#[allow(clippy::too_many_arguments)]
fn class(
    name: &str,
    description: &str,
    buffers: u32,
    buffer_period: Nanos,
    compute: Nanos,
    acceptable: Rate,
    source: &str,
) -> ApplicationClass {
    ApplicationClass {
        name: name.to_owned(),
        description: description.to_owned(),
        buffers,
        buffer_period,
        compute,
        chain: 1,
        counting: Counting::Restart,
        clock: AppClock::Device,
        acceptable,
        source: source.to_owned(),
    }
}

/// The built-in classes, in order of rising latency tolerance within each group.
///
/// 002's rows take the demanding end of Table 1's range (its "tolerance roughly" lower bound) and
/// the miss rates of its section 5.2. Compute times are included only where a source gives one (the
/// soft-modem datapump at 25 % of a cycle, 002 section 5.1, also used for ADSL, the other
/// signal-processing datapump of Table 1) and for pro audio, whose classes assume a JACK or
/// PipeWire client using 30 % of each period, woken by the server's driver thread (a chain of 2;
/// issue 27); elsewhere `c = 0`, the application's own compute time must be given with
/// `--compute` or in a classes file. [`ApplicationClass::assumption`] says it in every verdict.
/// The datapumps and the control loops catch up after a stall (every buffer or cycle is owed:
/// [`Counting::CatchUp`]); audio, video, VoIP and frame pacing restart their cycle and count one
/// glitch per stall (issue 35, item 4).
pub fn builtin_classes() -> Vec<ApplicationClass> {
    let mut classes = vec![
        class(
            "adsl",
            "ADSL datapump, 2 × 4 ms buffers",
            2,
            Nanos::from_millis(4),
            Nanos::from_millis(1),
            Rate::one_per(HOUR),
            "paper 002 Table 1 (t 2-4 ms, n 2-6, tolerance 4-10 ms); c = 25 % of t as for the modem datapump (002 §5.1); 1/hour as for a soft modem (002 §5.2)",
        ),
        class(
            "modem",
            "soft modem datapump, 3 × 6 ms buffers",
            3,
            Nanos::from_millis(6),
            Nanos(1_500_000),
            Rate::one_per(HOUR),
            "paper 002 Table 1 (t 4-16 ms, n 2-6, tolerance 12-20 ms) and §5.1's triple-buffered 6 ms example; c = 25 % of t (002 §5.1); one dropped buffer per hour (002 §5.2)",
        ),
        class(
            "rt-audio",
            "low-latency audio (2000s), 3 × 10 ms buffers",
            3,
            Nanos::from_millis(10),
            Nanos::ZERO,
            Rate::one_per(Nanos(10 * MINUTE.as_u64())),
            "paper 002 Table 1 (t 8-24 ms, n 2-8, tolerance 20-60 ms, 20 ms end); one drop per 5-10 minutes for low-latency audio (002 §5.2)",
        ),
        class(
            "rt-video",
            "real-time video at 30 fps, 2 × 33 ms buffers",
            2,
            Nanos::from_millis(33),
            Nanos::ZERO,
            Rate::one_per(Nanos(10 * MINUTE.as_u64())),
            "paper 002 Table 1 (t 33-50 ms, n 2-3, tolerance 33-100 ms); one drop per 5-10 minutes (002 §5.2, video teleconferencing)",
        ),
    ];
    for frames in [64u64, 128, 256] {
        for periods in [2u32, 3] {
            let period = frames_at_48k(frames);
            let mut pro_audio = class(
                &format!("pro-audio-48k-{frames}x{periods}"),
                &format!("pro audio, {frames} frames × {periods} at 48 kHz"),
                periods,
                period,
                Nanos(period.as_u64() * 3 / 10),
                Rate::one_per(DAY),
                "JACK/PipeWire period size (frames) × number of periods at 48 kHz; an xrun is audible, studios expect at most one per day; a client using 30 % of each period (the JACK harness's bench/jack/xrun_client default), woken by the server's driver thread (a chain of 2)",
            );
            pro_audio.chain = 2;
            classes.push(pro_audio);
        }
    }
    classes.extend([
        class(
            "voip-20ms",
            "VoIP, 20 ms frames, 2 frames buffered",
            2,
            Nanos::from_millis(20),
            Nanos::ZERO,
            Rate::one_per(Nanos(10 * MINUTE.as_u64())),
            "20 ms packetisation (RTP audio/video profile, RFC 3551); codecs conceal an occasional lost frame, so 1 per 10 minutes as for 002's teleconferencing",
        ),
        class(
            "frame-60hz",
            "frame pacing at 60 Hz, double-buffered",
            2,
            Nanos(16_666_667),
            Nanos::ZERO,
            Rate::one_per(HOUR),
            "one frame per display refresh at 60 Hz (16.7 ms), double-buffered swap chain; a visible stutter per hour",
        ),
        class(
            "frame-144hz",
            "frame pacing at 144 Hz, double-buffered",
            2,
            Nanos(6_944_444),
            Nanos::ZERO,
            Rate::one_per(HOUR),
            "one frame per display refresh at 144 Hz (6.94 ms), double-buffered swap chain; a visible stutter per hour",
        ),
        class(
            "robot-1khz",
            "1 kHz robot control loop, deadline = period",
            2,
            Nanos::from_millis(1),
            Nanos::ZERO,
            Rate::one_per(DAY),
            "1 kHz servo/control loop (ros2_control default update rate); a missed cycle at most once per day",
        ),
        class(
            "fieldbus-250us",
            "fieldbus cycle of 250 µs, deadline = cycle",
            2,
            Nanos::from_micros(250),
            Nanos::ZERO,
            Rate::one_per(DAY),
            "250 µs EtherCAT/PROFINET IRT-class cycle; a missed frame at most once per day",
        ),
    ]);
    for class in &mut classes {
        if ["adsl", "modem", "robot-1khz", "fieldbus-250us"].contains(&class.name.as_str()) {
            class.counting = Counting::CatchUp;
        }
    }
    classes
}

#[derive(Debug, thiserror::Error)]
pub enum ClassesError {
    #[error("{0}")]
    Toml(String),
    #[error("line {line}: class '{name}': field '{field}': {message}")]
    Field {
        line: usize,
        name: String,
        field: &'static str,
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassesFile {
    #[serde(default)]
    class: Vec<toml::Spanned<RawClass>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    name: String,
    #[serde(default)]
    description: Option<String>,
    buffers: u32,
    buffer: String,
    #[serde(default)]
    compute: Option<String>,
    acceptable: String,
    #[serde(default)]
    chain: Option<u32>,
    #[serde(default)]
    counts: Option<Counting>,
    #[serde(default)]
    clock: Option<AppClock>,
    #[serde(default)]
    source: Option<String>,
}

/// 1-based line number of a byte offset in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parses a classes file:
///
/// ```toml
/// [[class]]
/// name = "my-synth"
/// description = "soft synth, 96 frames × 2 at 48 kHz"
/// buffers = 2
/// buffer = "2ms"
/// compute = "0.5ms"
/// acceptable = "1/day"
/// chain = 2            # optional: threads in the wake-up chain (a JACK client: 2)
/// counts = "restart"   # optional: one failure per stall ("restart", JACK's way) or one per
///                      # period a stall made late ("catch-up", a ring buffer fed by a timer)
/// clock = "device"     # optional: "stops-with-cpus" for a clock kept by a thread (JACK's
///                      # dummy driver)
/// ```
pub fn parse_classes(text: &str) -> Result<Vec<ApplicationClass>, ClassesError> {
    let file: ClassesFile =
        toml::from_str(text).map_err(|error| ClassesError::Toml(error.to_string()))?;
    let mut classes = Vec::new();
    for spanned in file.class {
        let line = line_of(text, spanned.span().start);
        let raw = spanned.into_inner();
        let field_error = |field: &'static str, message: String| ClassesError::Field {
            line,
            name: raw.name.clone(),
            field,
            message,
        };
        if raw.name.trim().is_empty() {
            return Err(field_error("name", "must not be empty".to_owned()));
        }
        if raw.buffers < 2 {
            return Err(field_error(
                "buffers",
                format!("{} buffers leave no slack (need at least 2)", raw.buffers),
            ));
        }
        let buffer_period = parse_duration(&raw.buffer)
            .map_err(|error| field_error("buffer", error.to_string()))?;
        if buffer_period.as_u64() == 0 {
            return Err(field_error("buffer", "must be longer than 0".to_owned()));
        }
        let compute = match &raw.compute {
            Some(text) => {
                parse_duration(text).map_err(|error| field_error("compute", error.to_string()))?
            }
            None => Nanos::ZERO,
        };
        if compute >= buffer_period {
            return Err(field_error(
                "compute",
                format!("{compute} does not fit in a buffer of {buffer_period}"),
            ));
        }
        let acceptable = parse_rate(&raw.acceptable)
            .map_err(|error| field_error("acceptable", error.to_string()))?;
        classes.push(ApplicationClass {
            description: raw.description.clone().unwrap_or_else(|| raw.name.clone()),
            name: raw.name,
            buffers: raw.buffers,
            buffer_period,
            compute,
            chain: raw.chain.unwrap_or(1).max(1),
            counting: raw.counts.unwrap_or_default(),
            clock: raw.clock.unwrap_or_default(),
            acceptable,
            source: raw.source.unwrap_or_else(|| "user classes file".to_owned()),
        });
    }
    Ok(classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_the_forms_users_type() {
        assert_eq!(parse_rate("1/day").unwrap().mean_interval_s(), 86_400.0);
        assert_eq!(parse_rate("1/hour").unwrap().mean_interval_s(), 3_600.0);
        assert_eq!(parse_rate("1/10min").unwrap().mean_interval_s(), 600.0);
        assert_eq!(parse_rate("2/h").unwrap().mean_interval_s(), 1_800.0);
        for bad in ["", "1", "0/day", "x/day", "1/fortnight", "-1/h", "1/0s"] {
            assert!(parse_rate(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn builtin_classes_carry_table_1_tolerances() {
        let classes = builtin_classes();
        let tolerance = |name: &str| {
            classes
                .iter()
                .find(|class| class.name == name)
                .unwrap_or_else(|| panic!("missing class {name}"))
                .latency_tolerance()
        };
        // 002 Table 1 lower ends: ADSL 4 ms, modem 12 ms, RT audio 20 ms, RT video 33 ms.
        assert_eq!(tolerance("adsl"), Nanos::from_millis(4));
        assert_eq!(tolerance("modem"), Nanos::from_millis(12));
        assert_eq!(tolerance("rt-audio"), Nanos::from_millis(20));
        assert_eq!(tolerance("rt-video"), Nanos::from_millis(33));
        // 128 frames at 48 kHz = 2.667 ms; × 3 periods tolerates 2 periods.
        assert_eq!(tolerance("pro-audio-48k-128x3"), Nanos(2 * 2_666_667));
        assert_eq!(tolerance("fieldbus-250us"), Nanos::from_micros(250));
        let mut names: Vec<_> = classes.iter().map(|class| class.name.clone()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), classes.len(), "class names are unique");
        assert!(classes
            .iter()
            .all(|class| class.compute < class.buffer_period));
    }

    #[test]
    fn classes_file_parses_and_errors_name_line_and_field() {
        let text = "[[class]]\nname = \"synth\"\nbuffers = 2\nbuffer = \"2ms\"\ncompute = \"0.5ms\"\nacceptable = \"1/day\"\n";
        let classes = parse_classes(text).unwrap();
        assert_eq!(classes.len(), 1);
        assert_eq!(classes[0].buffer_period, Nanos::from_millis(2));
        assert_eq!(classes[0].compute, Nanos(500_000));

        let bad = "[[class]]\nname = \"a\"\nbuffers = 2\nbuffer = \"2ms\"\nacceptable = \"1/day\"\n\n[[class]]\nname = \"b\"\nbuffers = 2\nbuffer = \"2\"\nacceptable = \"1/day\"\n";
        let message = parse_classes(bad).unwrap_err().to_string();
        assert!(
            message.starts_with("line 7: class 'b': field 'buffer'"),
            "{message}"
        );

        let unknown = "[[class]]\nname = \"a\"\nbufers = 2\n";
        let message = parse_classes(unknown).unwrap_err().to_string();
        assert!(message.contains("line 3"), "{message}");
    }
}
