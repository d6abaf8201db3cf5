//! Compact encoding of a series' bulky arrays (`max_per_second`, `peaks`).
//!
//! A 60 s run keeps 4,096 peaks per series; as JSON objects they were 172 KB a series. Packed,
//! they are a few KB. Arrays of at most [`PLAIN_UP_TO`] items stay plain JSON arrays (readable,
//! and smaller than the wrapper); longer ones are written as
//!
//! ```json
//! {"encoding": "rtlab-packed/1", "count": N, "data": "<base64>"}
//! ```
//!
//! Layout of `data` (base64, standard alphabet with padding, of a zlib stream — RFC 1950, as in
//! HdrHistogram's V2 compressed form — whose content is):
//!
//! - a varint: the number of columns `C` (1 for `max_per_second`; 2 for `peaks`: `value_ns`, then
//!   `at_ns`);
//! - per column, in order: a varint `first` (the first value), a varint `unit` (the greatest
//!   common divisor of the column's successive differences; 0 when there are none), then `N − 1`
//!   zigzag varints, each the difference to the previous value divided by `unit`.
//!
//! Varints are unsigned LEB128 (7 bits a byte, low bits first, high bit set on all but the last
//! byte); zigzag maps a signed d to `2d` (d ≥ 0) or `−2d − 1` (d < 0). Items keep their order
//! (peaks: largest value first, then earliest), so decoding gives back exactly what was encoded.
//! Readers accept both forms, so records written before this encoding still load.

use crate::peak::Peak;
use base64::Engine as _;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::Cell;
use std::io::{Read as _, Write as _};

/// The `encoding` tag of a packed array.
pub const ENCODING: &str = "rtlab-packed/1";
/// Arrays this short are written as plain JSON arrays.
pub const PLAIN_UP_TO: usize = 16;
/// The most items a packed array may claim (a guard against hostile `count`s: 8 h at 1 s is
/// 28,800 maxima; a week is 604,800).
const MAX_ITEMS: u64 = 1 << 26;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PackedError {
    #[error("unknown encoding '{0}' (this rtlab reads {ENCODING})")]
    Encoding(String),
    #[error("'data' is not base64: {0}")]
    Base64(String),
    #[error("'data' is not a zlib stream: {0}")]
    Inflate(String),
    #[error("'data' ends inside a value")]
    Truncated,
    #[error("a value in 'data' overflows 64 bits")]
    Overflow,
    #[error("'data' holds {found} columns, expected {expected}")]
    Columns { found: u64, expected: u64 },
    #[error("'count' {0} is more than this rtlab reads ({MAX_ITEMS})")]
    TooMany(u64),
    #[error("'data' has {0} bytes after the last value")]
    Trailing(usize),
}

#[derive(Serialize, Deserialize)]
struct PackedWire {
    encoding: String,
    count: u64,
    data: String,
}

fn put_varint(out: &mut Vec<u8>, value: u64) {
    put_wide_varint(out, u128::from(value));
}

fn put_wide_varint(out: &mut Vec<u8>, mut value: u128) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Zigzag of a step: differences of u64 values fit in 65 bits signed, so the result in 66 bits.
fn zigzag(value: i128) -> u128 {
    if value >= 0 {
        (value as u128) << 1
    } else {
        (((-value - 1) as u128) << 1) | 1
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Encodes columns of equal length into the payload (before zlib).
fn encode_columns(columns: &[&[u64]]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, columns.len() as u64);
    for column in columns {
        let first = column.first().copied().unwrap_or(0);
        let unit = column
            .windows(2)
            .fold(0, |unit, pair| gcd(unit, pair[0].abs_diff(pair[1])));
        put_varint(&mut out, first);
        put_varint(&mut out, unit);
        for pair in column.windows(2) {
            let difference = i128::from(pair[1]) - i128::from(pair[0]);
            // unit > 0 whenever two values differ; equal values give a 0 difference.
            let steps = if unit == 0 {
                0
            } else {
                difference / i128::from(unit)
            };
            put_wide_varint(&mut out, zigzag(steps));
        }
    }
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    /// A varint of at most `bits` bits.
    fn wide_varint(&mut self, bits: u32) -> Result<u128, PackedError> {
        let mut value: u128 = 0;
        let mut shift = 0;
        loop {
            let (&byte, rest) = self.bytes.split_first().ok_or(PackedError::Truncated)?;
            self.bytes = rest;
            let part = u128::from(byte & 0x7f);
            if shift >= bits || (part << shift) >> bits != 0 {
                return Err(PackedError::Overflow);
            }
            value |= part << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
            shift += 7;
        }
    }

    fn varint(&mut self) -> Result<u64, PackedError> {
        Ok(self.wide_varint(64)? as u64)
    }
}

fn decode_columns(payload: &[u8], count: u64, expected: u64) -> Result<Vec<Vec<u64>>, PackedError> {
    let mut reader = Reader { bytes: payload };
    let found = reader.varint()?;
    if found != expected {
        return Err(PackedError::Columns { found, expected });
    }
    let mut columns = Vec::with_capacity(expected as usize);
    for _ in 0..expected {
        let mut column = Vec::with_capacity(count.min(1 << 16) as usize);
        let mut value = reader.varint()?;
        let unit = reader.varint()?;
        if count > 0 {
            column.push(value);
        }
        for _ in 1..count {
            let encoded = reader.wide_varint(66)?;
            let magnitude = (encoded >> 1) as i128;
            let steps = if encoded & 1 == 0 {
                magnitude
            } else {
                -magnitude - 1
            };
            let next = steps
                .checked_mul(i128::from(unit))
                .and_then(|difference| difference.checked_add(i128::from(value)))
                .ok_or(PackedError::Overflow)?;
            value = u64::try_from(next).map_err(|_| PackedError::Overflow)?;
            column.push(value);
        }
        columns.push(column);
    }
    if !reader.bytes.is_empty() {
        return Err(PackedError::Trailing(reader.bytes.len()));
    }
    Ok(columns)
}

fn pack(columns: &[&[u64]]) -> PackedWire {
    let payload = encode_columns(columns);
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder
        .write_all(&payload)
        .expect("writing to a Vec cannot fail");
    let compressed = encoder.finish().expect("writing to a Vec cannot fail");
    PackedWire {
        encoding: ENCODING.to_owned(),
        count: columns.first().map_or(0, |column| column.len() as u64),
        data: base64::engine::general_purpose::STANDARD.encode(compressed),
    }
}

fn unpack(wire: &PackedWire, expected_columns: u64) -> Result<Vec<Vec<u64>>, PackedError> {
    if wire.encoding != ENCODING {
        return Err(PackedError::Encoding(wire.encoding.clone()));
    }
    if wire.count > MAX_ITEMS {
        return Err(PackedError::TooMany(wire.count));
    }
    let compressed = base64::engine::general_purpose::STANDARD
        .decode(wire.data.trim())
        .map_err(|error| PackedError::Base64(error.to_string()))?;
    // At most 10 bytes a varint: anything longer is not a payload of `count` items.
    let limit = 16 + expected_columns * (20 + 10 * wire.count);
    let mut payload = Vec::new();
    flate2::read::ZlibDecoder::new(compressed.as_slice())
        .take(limit + 1)
        .read_to_end(&mut payload)
        .map_err(|error| PackedError::Inflate(error.to_string()))?;
    if payload.len() as u64 > limit {
        return Err(PackedError::Trailing(payload.len() - limit as usize));
    }
    decode_columns(&payload, wire.count, expected_columns)
}

/// What a bulky field held: a plain array, or a packed one's columns.
enum Read<T> {
    Plain(Vec<T>),
    Packed(Vec<Vec<u64>>),
}

fn read<'de, D, T>(deserializer: D, columns: u64) -> Result<Read<T>, D::Error>
where
    D: Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    match serde_json::Value::deserialize(deserializer)? {
        items @ serde_json::Value::Array(_) => serde_json::from_value(items)
            .map(Read::Plain)
            .map_err(D::Error::custom),
        other => {
            let wire: PackedWire = serde_json::from_value(other).map_err(|error| {
                D::Error::custom(format!(
                    "expected an array or a packed array ({{\"encoding\", \"count\", \"data\"}}): {error}"
                ))
            })?;
            unpack(&wire, columns)
                .map(Read::Packed)
                .map_err(D::Error::custom)
        }
    }
}

thread_local! {
    /// Set while [`plain_arrays`] runs on this thread: every array is written plain.
    static PLAIN: Cell<bool> = const { Cell::new(false) };
}

/// Runs `serialise` with every array of this module written as a plain JSON array, however long
/// (`rtlab show --json --plain`: for jq, pandas and scripts that do not decode `rtlab-packed/1`).
/// rtlab reads the result like any record.
pub fn plain_arrays<T>(serialise: impl FnOnce() -> T) -> T {
    /// Puts the previous setting back, also when `serialise` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            PLAIN.with(|plain| plain.set(self.0));
        }
    }
    let _restore = Restore(PLAIN.with(|plain| plain.replace(true)));
    serialise()
}

/// Whether an array of `len` items is written plain.
fn written_plain(len: usize) -> bool {
    len <= PLAIN_UP_TO || PLAIN.with(Cell::get)
}

/// `#[serde(with = "packed::u64_list")]`: plain array up to [`PLAIN_UP_TO`] items (or inside
/// [`plain_arrays`]), else packed; reads both.
pub mod u64_list {
    use super::*;

    pub fn serialize<S: Serializer>(values: &[u64], serializer: S) -> Result<S::Ok, S::Error> {
        if written_plain(values.len()) {
            values.serialize(serializer)
        } else {
            pack(&[values]).serialize(serializer)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u64>, D::Error> {
        match read(deserializer, 1)? {
            Read::Plain(values) => Ok(values),
            Read::Packed(mut columns) => Ok(columns.pop().unwrap_or_default()),
        }
    }
}

/// `#[serde(with = "packed::peak_list")]`: like [`u64_list`], with two columns (`value_ns`,
/// `at_ns`).
pub mod peak_list {
    use super::*;

    pub fn serialize<S: Serializer>(peaks: &[Peak], serializer: S) -> Result<S::Ok, S::Error> {
        if written_plain(peaks.len()) {
            return peaks.serialize(serializer);
        }
        let values: Vec<u64> = peaks.iter().map(|peak| peak.value_ns).collect();
        let times: Vec<u64> = peaks.iter().map(|peak| peak.at_ns).collect();
        pack(&[&values, &times]).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Peak>, D::Error> {
        match read(deserializer, 2)? {
            Read::Plain(peaks) => Ok(peaks),
            Read::Packed(columns) => Ok(columns[0]
                .iter()
                .zip(&columns[1])
                .map(|(&value_ns, &at_ns)| Peak { at_ns, value_ns })
                .collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[u64]) -> Vec<u64> {
        let wire = pack(&[values]);
        unpack(&wire, 1).unwrap().pop().unwrap()
    }

    #[test]
    fn layout_of_a_small_column_is_as_documented() {
        // first 1000, unit gcd(1000, 2000) = 1000, steps +1, -2 → zigzag 2, 3.
        assert_eq!(
            encode_columns(&[&[1000, 2000, 0]]),
            vec![1, 0xe8, 0x07, 0xe8, 0x07, 2, 3]
        );
        assert_eq!(encode_columns(&[&[]]), vec![1, 0, 0]);
    }

    #[test]
    fn plain_arrays_writes_long_lists_plain_and_only_while_it_runs() {
        #[derive(Serialize)]
        struct Lists {
            #[serde(with = "u64_list")]
            values: Vec<u64>,
            #[serde(with = "peak_list")]
            peaks: Vec<Peak>,
        }
        let lists = Lists {
            values: (0..100).collect(),
            peaks: (0..100)
                .map(|index| Peak {
                    at_ns: index * 7,
                    value_ns: 1000 - index,
                })
                .collect(),
        };
        let plain = plain_arrays(|| serde_json::to_value(&lists).unwrap());
        let expected_values: Vec<u64> = (0..100).collect();
        assert_eq!(plain["values"], serde_json::json!(expected_values));
        assert_eq!(
            plain["peaks"][99],
            serde_json::json!({"at_ns": 693, "value_ns": 901})
        );
        let packed = serde_json::to_value(&lists).unwrap();
        assert_eq!(packed["values"]["encoding"], ENCODING);
        assert_eq!(packed["peaks"]["encoding"], ENCODING);
    }

    #[test]
    fn extremes_round_trip() {
        for values in [
            vec![],
            vec![7],
            vec![u64::MAX, 0, u64::MAX, 1],
            vec![0, u64::MAX],
            vec![5; 100],
        ] {
            assert_eq!(round_trip(&values), values);
        }
    }

    #[test]
    fn hostile_payloads_are_errors_not_panics() {
        let good = pack(&[&[1, 2, 3]]);
        let mut wrong = PackedWire {
            encoding: "zip".into(),
            count: 3,
            data: good.data.clone(),
        };
        assert!(matches!(unpack(&wrong, 1), Err(PackedError::Encoding(_))));
        wrong.encoding = ENCODING.into();
        wrong.count = 4;
        assert_eq!(unpack(&wrong, 1), Err(PackedError::Truncated));
        wrong.count = 2;
        assert!(matches!(unpack(&wrong, 1), Err(PackedError::Trailing(_))));
        wrong.count = u64::MAX;
        assert!(matches!(unpack(&wrong, 1), Err(PackedError::TooMany(_))));
        wrong.count = 3;
        assert!(matches!(
            unpack(&wrong, 2),
            Err(PackedError::Columns { .. })
        ));
        wrong.data = "not base64!".into();
        assert!(matches!(unpack(&wrong, 1), Err(PackedError::Base64(_))));
        wrong.data = base64::engine::general_purpose::STANDARD.encode(b"not zlib");
        assert!(matches!(unpack(&wrong, 1), Err(PackedError::Inflate(_))));
        // A step that leaves the u64 range.
        let mut payload = vec![1];
        put_varint(&mut payload, 5);
        put_varint(&mut payload, 1);
        put_wide_varint(&mut payload, zigzag(-6));
        assert_eq!(decode_columns(&payload, 2, 1), Err(PackedError::Overflow));
    }

    proptest! {
        #[test]
        fn any_column_round_trips(values in proptest::collection::vec(any::<u64>(), 0..200)) {
            prop_assert_eq!(round_trip(&values), values);
        }

        #[test]
        fn any_peaks_round_trip(pairs in proptest::collection::vec((any::<u64>(), 0..1_000_000u64), 0..100)) {
            let peaks: Vec<Peak> = pairs.iter().map(|&(at_ns, value_ns)| Peak { at_ns, value_ns }).collect();
            let json = serde_json::to_value(Wrapper { peaks: peaks.clone() }).unwrap();
            let back: Wrapper = serde_json::from_value(json).unwrap();
            prop_assert_eq!(back.peaks, peaks);
        }
    }

    #[derive(Serialize, Deserialize)]
    struct Wrapper {
        #[serde(with = "peak_list")]
        peaks: Vec<Peak>,
    }
}
