//! Decoder of binary ring-buffer pages as `per_cpu/cpuN/trace_pipe_raw` returns them.
//!
//! Reading the binary pages instead of the text `trace` file is what makes recording cheap enough
//! to leave on during a measurement: the kernel copies whole pages, nothing is formatted. A page is
//! a header (timestamp of its first event, commit = bytes used plus the "events were lost" flags)
//! followed by compressed event headers: a 5-bit type/length and a 27-bit time delta, with time
//! extends, absolute time stamps and padding as special types (see `events/header_event`). The
//! decoder follows the kernel's reader (`rb_update_read_stamp`, libtraceevent's kbuffer) and
//! treats the page as untrusted input: every length is checked, nothing panics.

use crate::format::{EventHeader, PageHeader};
use thiserror::Error;

/// Set in `commit` when events were lost before this page.
const MISSED_EVENTS_FLAG: u64 = 1 << 31;
/// Set in `commit` when the number of lost events is stored after the page's data.
const MISSED_STORED_FLAG: u64 = 1 << 30;
/// The bits of `commit` that hold the data length.
const COMMIT_MASK: u64 = (1 << 27) - 1;
/// Absolute time stamps carry 59 bits; the top 5 come from the previous time.
const ABSOLUTE_TIME_BITS: u32 = 59;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PageError {
    #[error("page of {length} bytes is shorter than its {header}-byte header")]
    ShortPage { length: usize, header: usize },
    #[error("page commits {commit} data bytes but holds only {available}")]
    CommitBeyondPage { commit: usize, available: usize },
    #[error("event at data offset {offset}: {message}")]
    Event { offset: usize, message: String },
}

/// One event's raw payload with its absolute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord<'page> {
    pub timestamp_ns: u64,
    pub payload: &'page [u8],
}

/// What a page said about itself besides its events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSummary {
    pub n_records: usize,
    /// Events lost before this page: `Some(n)` when the kernel stored the count, `Some(0)` is never
    /// reported; `None` when nothing was lost.
    pub lost_events: Option<LostEvents>,
    /// Time of the last event on the page (the page timestamp when it holds none).
    pub last_timestamp_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LostEvents {
    Counted(u64),
    Unknown,
}

fn read_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    let slice = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_ne_bytes(slice.try_into().ok()?))
}

fn read_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    let slice = bytes.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_ne_bytes(slice.try_into().ok()?))
}

fn read_unsigned(bytes: &[u8], offset: usize, size: usize) -> Option<u64> {
    match size {
        4 => read_u32(bytes, offset).map(u64::from),
        8 => read_u64(bytes, offset),
        _ => None,
    }
}

/// Decodes pages with one kernel's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageDecoder {
    pub page: PageHeader,
    pub event: EventHeader,
}

impl Default for PageDecoder {
    fn default() -> Self {
        PageDecoder {
            page: PageHeader::LINUX_64BIT,
            event: EventHeader::LINUX,
        }
    }
}

impl PageDecoder {
    /// Calls `visit` for each data event of `page`, in order, with its absolute timestamp.
    ///
    /// On a malformed event, the records before it have been visited and the error says where
    /// decoding stopped.
    pub fn decode<'page>(
        &self,
        page: &'page [u8],
        mut visit: impl FnMut(RawRecord<'page>),
    ) -> Result<PageSummary, PageError> {
        let header = &self.page;
        let data_offset = header.data_offset;
        if page.len() < data_offset
            || page.len() < header.timestamp_offset + 8
            || page.len() < header.commit_offset + header.commit_size
        {
            return Err(PageError::ShortPage {
                length: page.len(),
                header: data_offset,
            });
        }
        let page_timestamp =
            read_u64(page, header.timestamp_offset).ok_or(PageError::ShortPage {
                length: page.len(),
                header: data_offset,
            })?;
        let commit_word = read_unsigned(page, header.commit_offset, header.commit_size).ok_or(
            PageError::ShortPage {
                length: page.len(),
                header: data_offset,
            },
        )?;
        let commit = (commit_word & COMMIT_MASK) as usize;
        let data = &page[data_offset..];
        if commit > data.len() {
            return Err(PageError::CommitBeyondPage {
                commit,
                available: data.len(),
            });
        }
        let lost_events = if commit_word & MISSED_EVENTS_FLAG != 0 {
            if commit_word & MISSED_STORED_FLAG != 0 {
                match read_unsigned(data, commit, header.commit_size) {
                    Some(count) => Some(LostEvents::Counted(count)),
                    None => Some(LostEvents::Unknown),
                }
            } else {
                Some(LostEvents::Unknown)
            }
        } else {
            None
        };
        let data = &data[..commit];
        let event = &self.event;
        let type_mask = (1u32 << event.type_len_bits) - 1;
        let mut timestamp = page_timestamp;
        let mut offset = 0usize;
        let mut n_records = 0usize;
        let fail = |offset: usize, message: String| PageError::Event { offset, message };
        while offset + 4 <= data.len() {
            let word =
                read_u32(data, offset).ok_or_else(|| fail(offset, "truncated header".into()))?;
            let type_len = word & type_mask;
            let time_delta = u64::from(word >> event.type_len_bits);
            let body = offset + 4;
            if type_len == event.padding_type {
                if time_delta == 0 {
                    // A null event: the rest of the page is unused.
                    break;
                }
                let length = read_u32(data, body)
                    .ok_or_else(|| fail(offset, "padding without a length".into()))?;
                offset = body
                    .checked_add(length as usize)
                    .filter(|next| *next > offset && *next <= data.len())
                    .ok_or_else(|| {
                        fail(
                            offset,
                            format!("padding of {length} bytes runs past the page"),
                        )
                    })?;
                continue;
            }
            if type_len == event.time_extend_type || type_len == event.time_stamp_type {
                let high = read_u32(data, body)
                    .ok_or_else(|| fail(offset, "time extend without its second word".into()))?;
                let value = (u64::from(high) << event.time_delta_bits) | time_delta;
                if type_len == event.time_extend_type {
                    timestamp = timestamp.wrapping_add(value);
                } else {
                    timestamp = fix_absolute_timestamp(value, timestamp);
                }
                offset = body + 4;
                continue;
            }
            let (payload_start, payload_length) = if type_len == 0 {
                let length = read_u32(data, body)
                    .ok_or_else(|| fail(offset, "long event without its length word".into()))?
                    as usize;
                if length < 4 {
                    return Err(fail(
                        offset,
                        format!("long event length {length} is below 4"),
                    ));
                }
                (body + 4, length - 4)
            } else if type_len <= event.data_max_type_len {
                (body, type_len as usize * 4)
            } else {
                return Err(fail(offset, format!("unknown event type {type_len}")));
            };
            let payload_end = payload_start
                .checked_add(payload_length)
                .filter(|end| *end <= data.len())
                .ok_or_else(|| {
                    fail(
                        offset,
                        format!("event of {payload_length} bytes runs past the page's {} committed bytes", data.len()),
                    )
                })?;
            timestamp = timestamp.wrapping_add(time_delta);
            visit(RawRecord {
                timestamp_ns: timestamp,
                payload: &data[payload_start..payload_end],
            });
            n_records += 1;
            // Events are 4-byte aligned.
            offset = (payload_end + 3) & !3;
        }
        Ok(PageSummary {
            n_records,
            lost_events,
            last_timestamp_ns: timestamp,
        })
    }
}

/// An absolute time stamp keeps only 59 bits; restore the top bits from the running time.
fn fix_absolute_timestamp(value: u64, previous: u64) -> u64 {
    let low_mask = (1u64 << ABSOLUTE_TIME_BITS) - 1;
    let value = value & low_mask;
    let mut absolute = value | (previous & !low_mask);
    if absolute < previous && previous - absolute > (1u64 << (ABSOLUTE_TIME_BITS - 1)) {
        absolute = absolute.wrapping_add(1u64 << ABSOLUTE_TIME_BITS);
    }
    absolute
}

/// Builds pages for tests and fixtures (the inverse of [`PageDecoder::decode`] for the 64-bit
/// layout).
#[derive(Debug, Default)]
pub struct PageBuilder {
    data: Vec<u8>,
    page_timestamp: u64,
    last_timestamp: Option<u64>,
    commit_flags: u64,
    stored_lost: Option<u64>,
}

impl PageBuilder {
    pub fn new(page_timestamp: u64) -> PageBuilder {
        PageBuilder {
            page_timestamp,
            ..PageBuilder::default()
        }
    }

    fn delta_for(&mut self, timestamp: u64) -> u64 {
        let previous = self.last_timestamp.unwrap_or(self.page_timestamp);
        let delta = timestamp.saturating_sub(previous);
        self.last_timestamp = Some(timestamp.max(previous));
        delta
    }

    fn push_word(&mut self, word: u32) {
        self.data.extend_from_slice(&word.to_ne_bytes());
    }

    /// Appends a data event, inserting a time extend when the delta needs more than 27 bits.
    pub fn event(mut self, timestamp: u64, payload: &[u8]) -> PageBuilder {
        let mut delta = self.delta_for(timestamp);
        if delta >= 1 << 27 {
            self.push_word(30 | (((delta & ((1 << 27) - 1)) as u32) << 5));
            self.push_word((delta >> 27) as u32);
            delta = 0;
        }
        let padded = payload.len().div_ceil(4) * 4;
        if padded <= 28 * 4 && !payload.is_empty() {
            self.push_word((padded / 4) as u32 | ((delta as u32) << 5));
        } else {
            self.push_word((delta as u32) << 5);
            self.push_word((padded + 4) as u32);
        }
        self.data.extend_from_slice(payload);
        self.data
            .resize(self.data.len() + (padded - payload.len()), 0);
        self
    }

    /// Appends an absolute time stamp.
    pub fn absolute(mut self, timestamp: u64) -> PageBuilder {
        self.push_word(31 | (((timestamp & ((1 << 27) - 1)) as u32) << 5));
        self.push_word((timestamp >> 27) as u32);
        self.last_timestamp = Some(timestamp);
        self
    }

    /// Appends a discarded event (padding with a length) of `bytes` payload bytes.
    pub fn padding(mut self, bytes: u32) -> PageBuilder {
        self.push_word(29 | (1 << 5));
        // The length word counts itself: the next event starts 4 + length bytes after the header.
        self.push_word(bytes + 4);
        self.data.resize(self.data.len() + bytes as usize, 0);
        self
    }

    /// Marks the page as following lost events (`count` stored after the data when given).
    pub fn lost(mut self, count: Option<u64>) -> PageBuilder {
        self.commit_flags = MISSED_EVENTS_FLAG
            | if count.is_some() {
                MISSED_STORED_FLAG
            } else {
                0
            };
        self.stored_lost = count;
        self
    }

    /// The page, `page_size` bytes long, as trace_pipe_raw returns it.
    pub fn build(self, page_size: usize) -> Vec<u8> {
        let mut page = vec![0u8; page_size.max(16 + self.data.len() + 8)];
        page[0..8].copy_from_slice(&self.page_timestamp.to_ne_bytes());
        let commit = self.data.len() as u64 | self.commit_flags;
        page[8..16].copy_from_slice(&commit.to_ne_bytes());
        page[16..16 + self.data.len()].copy_from_slice(&self.data);
        if let Some(count) = self.stored_lost {
            let at = 16 + self.data.len();
            page[at..at + 8].copy_from_slice(&count.to_ne_bytes());
        }
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each record as (time, payload).
    type Records = Vec<(u64, Vec<u8>)>;

    fn decode_all(page: &[u8]) -> Result<(Records, PageSummary), PageError> {
        let mut records = Vec::new();
        let summary = PageDecoder::default().decode(page, |record| {
            records.push((record.timestamp_ns, record.payload.to_vec()))
        })?;
        Ok((records, summary))
    }

    #[test]
    fn decodes_deltas_extends_absolute_stamps_and_padding() {
        let page = PageBuilder::new(1_000)
            .event(1_010, &[1, 2, 3, 4])
            .event(1_010 + (1 << 30), &[5; 8])
            .padding(12)
            .event(1_010 + (1 << 30) + 7, &[6; 200])
            .absolute(5_000_000_000_000)
            .event(5_000_000_000_003, &[7; 4])
            .build(4096);
        let (records, summary) = decode_all(&page).unwrap();
        let times: Vec<u64> = records.iter().map(|(time, _)| *time).collect();
        assert_eq!(
            times,
            vec![
                1_010,
                1_010 + (1 << 30),
                1_010 + (1 << 30) + 7,
                5_000_000_000_003
            ]
        );
        assert_eq!(records[0].1, vec![1, 2, 3, 4]);
        assert_eq!(records[2].1.len(), 200);
        assert_eq!(summary.n_records, 4);
        assert_eq!(summary.lost_events, None);
    }

    #[test]
    fn reports_lost_events() {
        let page = PageBuilder::new(0)
            .event(5, &[0; 4])
            .lost(Some(17))
            .build(4096);
        assert_eq!(
            decode_all(&page).unwrap().1.lost_events,
            Some(LostEvents::Counted(17))
        );
        let page = PageBuilder::new(0).event(5, &[0; 4]).lost(None).build(4096);
        assert_eq!(
            decode_all(&page).unwrap().1.lost_events,
            Some(LostEvents::Unknown)
        );
    }

    #[test]
    fn malformed_pages_are_errors() {
        assert!(matches!(
            decode_all(&[0; 8]),
            Err(PageError::ShortPage { .. })
        ));
        let mut page = PageBuilder::new(0).event(5, &[0; 4]).build(4096);
        page[8..16].copy_from_slice(&5000u64.to_ne_bytes());
        assert!(matches!(
            decode_all(&page),
            Err(PageError::CommitBeyondPage { .. })
        ));
        // A long event whose length points past the committed bytes.
        let mut page = PageBuilder::new(0).event(5, &[0; 200]).build(4096);
        page[20..24].copy_from_slice(&4000u32.to_ne_bytes());
        let error = decode_all(&page).unwrap_err();
        assert!(
            matches!(error, PageError::Event { offset: 0, .. }),
            "{error}"
        );
        // Padding pointing past the end.
        let page = PageBuilder::new(0).padding(8).build(64);
        let mut broken = page.clone();
        broken[20..24].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert!(decode_all(&page).is_ok());
        assert!(decode_all(&broken).is_err());
    }

    #[test]
    fn null_padding_ends_the_page() {
        let mut page = PageBuilder::new(0).event(5, &[9; 4]).build(4096);
        // Append a null event (padding, delta 0) and garbage after it inside the commit.
        page[24..28].copy_from_slice(&29u32.to_ne_bytes());
        page[8..16].copy_from_slice(&64u64.to_ne_bytes());
        let (records, _) = decode_all(&page).unwrap();
        assert_eq!(records.len(), 1);
    }
}
