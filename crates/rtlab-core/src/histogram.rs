//! The latency histogram: an HdrHistogram plus exact running sums.
//!
//! HdrHistogram is what the field exchanges (its V2 compressed, base64 form is readable by every
//! implementation), and recording into it never allocates once it is built, so the probe can use it
//! on the sample path. Mean and standard deviation are kept exactly from integer sums beside it,
//! because the histogram's own are bucket approximations.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// The percentile keys every series carries, in order.
pub const PERCENTILE_KEYS: [(&str, f64); 6] = [
    ("50", 0.50),
    ("90", 0.90),
    ("99", 0.99),
    ("99.9", 0.999),
    ("99.99", 0.9999),
    ("99.999", 0.99999),
];

/// Largest latency the histogram resolves: 60 s. Anything longer is recorded as 60 s and counted
/// in `saturated`.
pub const HIGHEST_TRACKABLE_NS: u64 = 60_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

#[derive(Debug, thiserror::Error)]
pub enum HistogramError {
    #[error("hdr payload is not base64: {0}")]
    Base64(#[from] base64::DecodeError),
    #[error("hdr payload is not an HdrHistogram V2 histogram: {0}")]
    Decode(String),
    #[error("could not encode histogram: {0}")]
    Encode(String),
}

/// A latency distribution in nanoseconds, 3 significant digits, 1 ns to 60 s.
#[derive(Clone)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    sum: u128,
    sum_of_squares: u128,
    exact_sums: bool,
    saturated: u64,
    /// Exact extremes of what was recorded (the histogram's own are bucket edges).
    exact_min: u64,
    exact_max: u64,
}

/// A short form: the bucket array would print tens of thousands of counts.
impl std::fmt::Debug for LatencyHistogram {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LatencyHistogram")
            .field("count", &self.count())
            .field("min_ns", &self.min())
            .field("max_ns", &self.max())
            .field("mean_ns", &self.mean())
            .field("saturated", &self.saturated)
            .finish()
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// The numbers a series reports, all derived from one histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stddev_ns: f64,
    pub percentiles: BTreeMap<String, u64>,
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let histogram = Histogram::new_with_bounds(1, HIGHEST_TRACKABLE_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        LatencyHistogram {
            histogram,
            sum: 0,
            sum_of_squares: 0,
            exact_sums: true,
            saturated: 0,
            exact_min: u64::MAX,
            exact_max: 0,
        }
    }

    /// Writes every counter once (an empty histogram stays empty), so the counts' pages are
    /// resident before measuring: a fresh allocation is zero pages the first record would
    /// fault in.
    pub fn prefault(&mut self) {
        debug_assert!(self.histogram.is_empty(), "prefault before recording");
        self.histogram.reset();
    }

    /// Records one value. Never allocates; values above 60 s are clamped and counted as saturated.
    #[inline]
    pub fn record(&mut self, value_ns: u64) {
        self.record_n(value_ns, 1);
    }

    /// Records `count` occurrences of one value (used by importers of bucketed histograms).
    #[inline]
    pub fn record_n(&mut self, value_ns: u64, count: u64) {
        if count == 0 {
            return;
        }
        let clamped = if value_ns > HIGHEST_TRACKABLE_NS {
            self.saturated += count;
            HIGHEST_TRACKABLE_NS
        } else {
            value_ns
        };
        // Values of 0 ns are legal (a wake-up exactly on time); hdrhistogram records them in bucket 0.
        self.histogram.saturating_record_n(clamped, count);
        self.exact_min = self.exact_min.min(clamped);
        self.exact_max = self.exact_max.max(clamped);
        let value = u128::from(clamped);
        self.sum += value * u128::from(count);
        self.sum_of_squares += value * value * u128::from(count);
    }

    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The exact side of [`LatencyHistogram::record_n`] (sums, extremes, saturation) without the
    /// bucket count, for a value of at most [`HIGHEST_TRACKABLE_NS`] whose count is kept
    /// elsewhere for now and added by [`LatencyHistogram::add_to_bucket`] later
    /// ([`crate::SamplePathHistogram`]).
    #[inline]
    pub(crate) fn record_exact_side(&mut self, value_ns: u64) {
        debug_assert!(value_ns <= HIGHEST_TRACKABLE_NS);
        self.exact_min = self.exact_min.min(value_ns);
        self.exact_max = self.exact_max.max(value_ns);
        let value = u128::from(value_ns);
        self.sum += value;
        self.sum_of_squares += value * value;
    }

    /// Adds `count` to the bucket holding `value_ns` (at most [`HIGHEST_TRACKABLE_NS`]) without
    /// touching the exact sums: the other half of [`LatencyHistogram::record_exact_side`].
    pub(crate) fn add_to_bucket(&mut self, value_ns: u64, count: u64) {
        debug_assert!(value_ns <= HIGHEST_TRACKABLE_NS);
        if count > 0 {
            self.histogram.saturating_record_n(value_ns, count);
        }
    }

    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// Largest recorded value, exact.
    pub fn max(&self) -> u64 {
        self.exact_max
    }

    /// Smallest recorded value, exact (0 when empty).
    pub fn min(&self) -> u64 {
        if self.histogram.is_empty() {
            0
        } else {
            self.exact_min
        }
    }

    /// Value at quantile `q` in [0, 1] (the highest value equivalent to the bucket holding it).
    pub fn value_at_quantile(&self, quantile: f64) -> u64 {
        if self.histogram.is_empty() {
            return 0;
        }
        // Clamped to the exact extremes so that min <= every percentile <= max always holds.
        self.histogram
            .value_at_quantile(quantile)
            .clamp(self.min(), self.max())
    }

    /// Number of recorded values strictly greater than `threshold_ns` (to histogram precision).
    pub fn count_above(&self, threshold_ns: u64) -> u64 {
        if self.histogram.is_empty() || threshold_ns >= self.exact_max {
            return 0;
        }
        self.count() - self.histogram.count_between(0, threshold_ns)
    }

    pub fn mean(&self) -> f64 {
        let count = self.count();
        if count == 0 {
            0.0
        } else if self.exact_sums {
            self.sum as f64 / count as f64
        } else {
            self.histogram.mean()
        }
    }

    /// Population standard deviation.
    pub fn stddev(&self) -> f64 {
        let count = self.count();
        if count == 0 {
            return 0.0;
        }
        if !self.exact_sums {
            return self.histogram.stdev();
        }
        let count = count as f64;
        let mean = self.sum as f64 / count;
        let variance = (self.sum_of_squares as f64 / count - mean * mean).max(0.0);
        variance.sqrt()
    }

    pub fn summary(&self) -> Summary {
        let percentiles = PERCENTILE_KEYS
            .iter()
            .map(|(key, quantile)| ((*key).to_owned(), self.value_at_quantile(*quantile)))
            .collect();
        Summary {
            count: self.count(),
            min_ns: self.min(),
            max_ns: self.max(),
            mean_ns: self.mean(),
            stddev_ns: self.stddev(),
            percentiles,
        }
    }

    /// Adds another histogram's counts to this one (pooling series over CPUs).
    pub fn add(&mut self, other: &LatencyHistogram) {
        self.histogram
            .add(&other.histogram)
            .expect("histograms share bounds");
        self.sum += other.sum;
        self.sum_of_squares += other.sum_of_squares;
        self.exact_sums &= other.exact_sums;
        self.saturated += other.saturated;
        self.exact_min = self.exact_min.min(other.exact_min);
        self.exact_max = self.exact_max.max(other.exact_max);
    }

    /// `(value, count)` for every non-empty bucket, in ascending order of value.
    pub fn buckets(&self) -> Vec<(u64, u64)> {
        self.histogram
            .iter_recorded()
            .map(|bucket| (bucket.value_iterated_to(), bucket.count_at_value()))
            .collect()
    }

    /// The underlying HdrHistogram, for analyses that need its iterators.
    pub fn inner(&self) -> &Histogram<u64> {
        &self.histogram
    }

    /// HdrHistogram V2 compressed (deflate) encoding, base64: the form stored in every series.
    pub fn to_base64(&self) -> Result<String, HistogramError> {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.histogram, &mut bytes)
            .map_err(|error| HistogramError::Encode(format!("{error:?}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    /// Decodes a V2 (compressed or not) base64 histogram. Mean and stddev then come from buckets.
    ///
    /// The payload comes from files users hand us, so it is checked before hdrhistogram sees it:
    /// the deflate stream is inflated here with a size limit (no decompression bomb), and the
    /// declared payload length must match the bytes present (hdrhistogram would otherwise
    /// allocate whatever a 4-byte field claims, up to 4 GiB).
    pub fn from_base64(text: &str) -> Result<Self, HistogramError> {
        let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim())?;
        let plain = checked_v2_payload(bytes)?;
        let decoded: Histogram<u64> = Deserializer::new()
            .deserialize(&mut std::io::Cursor::new(plain))
            .map_err(|error| HistogramError::Decode(format!("{error:?}")))?;
        // The payload only knows bucket edges: min/max become the bucket-equivalent values.
        let extremes = (!decoded.is_empty()).then(|| (decoded.min(), decoded.max()));
        let same_bounds = decoded.low() == 1
            && decoded.high() == HIGHEST_TRACKABLE_NS
            && decoded.sigfig() == SIGNIFICANT_DIGITS;
        let mut histogram = if same_bounds
            && decoded
                .iter_recorded()
                .all(|bucket| bucket.value_iterated_to() <= HIGHEST_TRACKABLE_NS)
        {
            // Our own encoding (every record's): the decoded counts already sit in the buckets
            // that re-recording each bucket's value would put them in, so they are kept as they
            // are, and only the sums are taken from them. This spares a second 200 KiB counts
            // array per decoding, which a run's end (validate, tails, histfile, summary) does a
            // dozen times (BENCHMARKS.md, probe cost).
            let mut sum = 0u128;
            let mut sum_of_squares = 0u128;
            for bucket in decoded.iter_recorded() {
                let value = u128::from(bucket.value_iterated_to());
                let count = u128::from(bucket.count_at_value());
                sum += value * count;
                sum_of_squares += value * value * count;
            }
            LatencyHistogram {
                histogram: decoded,
                sum,
                sum_of_squares,
                exact_sums: false,
                saturated: 0,
                exact_min: u64::MAX,
                exact_max: 0,
            }
        } else {
            rebucketed(&decoded)
        };
        histogram.exact_sums = false;
        if let Some((min, max)) = extremes {
            histogram.exact_min = min;
            histogram.exact_max = max;
        }
        Ok(histogram)
    }
}

/// A decoded histogram of any bounds, re-recorded bucket by bucket into ours (values clamped to
/// 60 s and counted as saturated, as `record_n` does).
fn rebucketed(decoded: &Histogram<u64>) -> LatencyHistogram {
    let mut histogram = LatencyHistogram::new();
    for bucket in decoded.iter_recorded() {
        histogram.record_n(bucket.value_iterated_to(), bucket.count_at_value());
    }
    histogram
}

/// HdrHistogram V2 cookies (the Java reference implementation's values, word size 8).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// Cookie, payload length, normalizing offset, digits, lowest, highest, integer-to-double ratio.
const V2_HEADER_BYTES: usize = 40;
/// Far above any real histogram (ours encode to a few KiB), far below harm.
const MAX_PAYLOAD_BYTES: usize = 64 << 20;

fn big_endian_u32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..at + 4)
        .map(|word| u32::from_be_bytes([word[0], word[1], word[2], word[3]]))
}

/// Returns the uncompressed V2 encoding after checking its sizes.
fn checked_v2_payload(bytes: Vec<u8>) -> Result<Vec<u8>, HistogramError> {
    use std::io::Read as _;
    let invalid = |message: String| HistogramError::Decode(message);
    let plain = match big_endian_u32(&bytes, 0) {
        Some(V2_COOKIE) => bytes,
        Some(V2_COMPRESSED_COOKIE) => {
            let compressed_length = big_endian_u32(&bytes, 4)
                .ok_or_else(|| invalid("truncated compressed header".into()))?
                as usize;
            let body = &bytes[8..];
            if compressed_length > body.len() {
                return Err(invalid(format!(
                    "declares {compressed_length} compressed bytes but holds {}",
                    body.len()
                )));
            }
            let mut inflated = Vec::new();
            flate2::read::ZlibDecoder::new(&body[..compressed_length])
                .take(MAX_PAYLOAD_BYTES as u64 + 1)
                .read_to_end(&mut inflated)
                .map_err(|error| invalid(format!("bad deflate stream: {error}")))?;
            if inflated.len() > MAX_PAYLOAD_BYTES {
                return Err(invalid(format!(
                    "inflates to more than {MAX_PAYLOAD_BYTES} bytes"
                )));
            }
            inflated
        }
        Some(other) => return Err(invalid(format!("unknown cookie {other:#010x}"))),
        None => return Err(invalid("shorter than a header".into())),
    };
    if big_endian_u32(&plain, 0) != Some(V2_COOKIE) {
        return Err(invalid("compressed payload is not a V2 histogram".into()));
    }
    let declared =
        big_endian_u32(&plain, 4).ok_or_else(|| invalid("truncated header".into()))? as usize;
    let present = plain.len().saturating_sub(V2_HEADER_BYTES);
    if plain.len() < V2_HEADER_BYTES || declared > present {
        return Err(invalid(format!(
            "declares {declared} payload bytes but holds {present}"
        )));
    }
    Ok(plain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_matches_hand_computed_values() {
        // 1..=100 µs in ns: mean 50.5 µs, population stddev sqrt((100^2-1)/12) µs = 28.866 µs.
        let mut histogram = LatencyHistogram::new();
        for micros in 1..=100u64 {
            histogram.record(micros * 1_000);
        }
        let summary = histogram.summary();
        assert_eq!(summary.count, 100);
        assert_eq!(summary.min_ns, 1_000);
        assert_eq!(summary.max_ns, 100_000);
        assert!((summary.mean_ns - 50_500.0).abs() < 1e-6);
        assert!(
            (summary.stddev_ns - 28_866.07).abs() < 0.5,
            "{}",
            summary.stddev_ns
        );
        // 50th value is 50 µs; hdr returns the highest equivalent value of its bucket (≤ 0.1 % above).
        let p50 = summary.percentiles["50"];
        assert!((50_000..=50_050).contains(&p50), "p50 {p50}");
        let p99 = summary.percentiles["99"];
        assert!((99_000..=99_100).contains(&p99), "p99 {p99}");
    }

    #[test]
    fn small_values_are_exact() {
        let mut histogram = LatencyHistogram::new();
        for value in [3u64, 1, 4, 1, 5, 9, 2, 6, 5, 3] {
            histogram.record(value);
        }
        assert_eq!(histogram.min(), 1);
        assert_eq!(histogram.max(), 9);
        assert_eq!(histogram.value_at_quantile(0.5), 3);
        assert_eq!(histogram.count_above(5), 2);
        assert!((histogram.mean() - 3.9).abs() < 1e-9);
    }

    #[test]
    fn base64_round_trip_keeps_counts() {
        let mut histogram = LatencyHistogram::new();
        for value in 0..10_000u64 {
            histogram.record(value * 37 % 5_000_000);
        }
        histogram.record(HIGHEST_TRACKABLE_NS + 5);
        assert_eq!(histogram.saturated(), 1);
        let encoded = histogram.to_base64().unwrap();
        let decoded = LatencyHistogram::from_base64(&encoded).unwrap();
        assert_eq!(decoded.count(), histogram.count());
        // Decoded extremes are bucket edges: within the 3-significant-digit precision.
        let relative = decoded.max().abs_diff(histogram.max()) as f64 / histogram.max() as f64;
        assert!(relative < 1e-3, "{} vs {}", decoded.max(), histogram.max());
        assert_eq!(
            decoded.value_at_quantile(0.99),
            histogram.value_at_quantile(0.99)
        );
    }

    /// Decoding keeps our own encoding's counts in place instead of re-recording them; whatever
    /// was recorded (zeros, ties, values up to the 60 s limit and beyond it), everything read
    /// from the result equals what re-recording gives.
    #[test]
    fn decoding_in_place_equals_re_recording() {
        let cases: Vec<Vec<u64>> = vec![
            vec![],
            vec![0],
            vec![0, 0, 1, 1, 2, 2_000, 2_047, 2_048, 2_049],
            (0..20_000u64)
                .map(|index| index * 7_919 % 3_000_000)
                .collect(),
            vec![12_345, HIGHEST_TRACKABLE_NS - 1, HIGHEST_TRACKABLE_NS],
            vec![5, HIGHEST_TRACKABLE_NS + 1_000_000_000],
        ];
        for values in cases {
            let mut histogram = LatencyHistogram::new();
            for value in &values {
                histogram.record(*value);
            }
            let encoded = histogram.to_base64().unwrap();
            let fast = LatencyHistogram::from_base64(&encoded).unwrap();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&encoded)
                .unwrap();
            let plain = checked_v2_payload(bytes).unwrap();
            let decoded: Histogram<u64> = Deserializer::new()
                .deserialize(&mut std::io::Cursor::new(plain))
                .unwrap();
            let mut slow = rebucketed(&decoded);
            slow.exact_sums = false;
            if !decoded.is_empty() {
                slow.exact_min = decoded.min();
                slow.exact_max = decoded.max();
            }
            assert_eq!(fast.summary(), slow.summary(), "{values:?}");
            assert_eq!(fast.buckets(), slow.buckets());
            assert_eq!(fast.saturated(), slow.saturated());
            assert_eq!(fast.mean().to_bits(), slow.mean().to_bits());
            assert_eq!(fast.stddev().to_bits(), slow.stddev().to_bits());
            for threshold in [0, 1, 2_048, 100_000, HIGHEST_TRACKABLE_NS] {
                assert_eq!(fast.count_above(threshold), slow.count_above(threshold));
            }
            assert_eq!(fast.to_base64().unwrap(), slow.to_base64().unwrap());
            let mut pooled = LatencyHistogram::new();
            pooled.add(&fast);
            pooled.add(&slow);
            assert_eq!(pooled.count(), 2 * slow.count());
        }
    }

    #[test]
    fn rejects_hostile_declared_sizes() {
        // A plain V2 header claiming a 4 GiB payload, with none present: an error, no allocation.
        let mut header = Vec::new();
        header.extend_from_slice(&V2_COOKIE.to_be_bytes());
        header.extend_from_slice(&u32::MAX.to_be_bytes());
        header.extend_from_slice(&0u32.to_be_bytes());
        header.extend_from_slice(&3u32.to_be_bytes());
        header.extend_from_slice(&1u64.to_be_bytes());
        header.extend_from_slice(&1_000_000u64.to_be_bytes());
        header.extend_from_slice(&1.0f64.to_be_bytes());
        let encoded = base64::engine::general_purpose::STANDARD.encode(&header);
        let error = LatencyHistogram::from_base64(&encoded)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("declares 4294967295 payload bytes"),
            "{error}"
        );
        // The same inside a deflate stream.
        let mut compressed = Vec::new();
        {
            use std::io::Write as _;
            let mut encoder =
                flate2::write::ZlibEncoder::new(&mut compressed, flate2::Compression::default());
            encoder.write_all(&header).unwrap();
            encoder.finish().unwrap();
        }
        let mut framed = Vec::new();
        framed.extend_from_slice(&V2_COMPRESSED_COOKIE.to_be_bytes());
        framed.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
        framed.extend_from_slice(&compressed);
        let encoded = base64::engine::general_purpose::STANDARD.encode(&framed);
        assert!(LatencyHistogram::from_base64(&encoded).is_err());
    }

    #[test]
    fn rejects_garbage_payloads() {
        assert!(LatencyHistogram::from_base64("not base64!!").is_err());
        assert!(LatencyHistogram::from_base64("aGVsbG8gd29ybGQ=").is_err());
    }

    #[test]
    fn empty_histogram_is_all_zero() {
        let summary = LatencyHistogram::new().summary();
        assert_eq!(summary.count, 0);
        assert_eq!(summary.min_ns, 0);
        assert_eq!(summary.max_ns, 0);
        assert_eq!(summary.percentiles["99.999"], 0);
    }
}
