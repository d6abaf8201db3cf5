//! What the device played, as audio: a continuous 440 Hz sine (48 kHz, mono, 16-bit) for every
//! period that had a buffer and exactly one period of silence for every underrun, so a person
//! hears the glitches and [`count_silent_periods`] counts them back (it must equal `underruns`).

use std::path::Path;

pub const SAMPLE_RATE: u32 = 48_000;
const FREQUENCY_HZ: f64 = 440.0;
const AMPLITUDE: f64 = 0.5 * i16::MAX as f64;

#[derive(Debug, thiserror::Error)]
pub enum WavError {
    #[error("{path}: {source}")]
    Write {
        path: String,
        #[source]
        source: hound::Error,
    },
    #[error("the device period {0} ns is not a whole number of 48 kHz samples")]
    Period(u64),
}

/// Samples in one device period.
pub fn samples_per_period(period_ns: u64) -> Result<u64, WavError> {
    let product = u128::from(period_ns) * u128::from(SAMPLE_RATE);
    if period_ns == 0 || product % 1_000_000_000 != 0 {
        return Err(WavError::Period(period_ns));
    }
    Ok((product / 1_000_000_000) as u64)
}

/// Writes the play log (true = a buffer played) of a device with period `period_ns` to `path`.
pub fn write_play_log(path: &Path, period_ns: u64, play_log: &[bool]) -> Result<(), WavError> {
    let per_period = samples_per_period(period_ns)?;
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: SAMPLE_RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let fail = |source| WavError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut writer = hound::WavWriter::create(path, spec).map_err(fail)?;
    // The sine's phase runs on through the silences: the tone resumes where it would have been.
    let mut sample_index: u64 = 0;
    for &played in play_log {
        for _ in 0..per_period {
            let value = if played {
                let phase = 2.0 * std::f64::consts::PI * FREQUENCY_HZ * sample_index as f64
                    / f64::from(SAMPLE_RATE);
                (AMPLITUDE * phase.sin()).round() as i16
            } else {
                0
            };
            writer.write_sample(value).map_err(fail)?;
            sample_index += 1;
        }
    }
    writer.finalize().map_err(fail)
}

/// Counts the periods of `period_ns` in a WAV file that are entirely silent.
pub fn count_silent_periods(path: &Path, period_ns: u64) -> Result<(u64, u64), WavError> {
    let per_period = samples_per_period(period_ns)? as usize;
    let fail = |source| WavError::Write {
        path: path.display().to_string(),
        source,
    };
    let mut reader = hound::WavReader::open(path).map_err(fail)?;
    let samples: Vec<i16> = reader
        .samples::<i16>()
        .collect::<Result<_, _>>()
        .map_err(fail)?;
    let periods = samples.chunks(per_period);
    let total = periods.len() as u64;
    let silent = samples
        .chunks(per_period)
        .filter(|chunk| chunk.iter().all(|&sample| sample == 0))
        .count() as u64;
    Ok((silent, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silences_are_exactly_the_underruns() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("out.wav");
        let log: Vec<bool> = (0..300).map(|period| period % 7 != 3).collect();
        write_play_log(&path, 10_000_000, &log).unwrap();
        let (silent, total) = count_silent_periods(&path, 10_000_000).unwrap();
        assert_eq!(total, 300);
        assert_eq!(silent, log.iter().filter(|played| !**played).count() as u64);
        assert!(matches!(
            write_play_log(&path, 10_000_001, &log),
            Err(WavError::Period(_))
        ));
    }
}
