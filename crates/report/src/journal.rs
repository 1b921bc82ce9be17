//! The run journal (`run --journal`, docs/journal.md): a run's data appended second by second
//! as it happens, so that a run killed at minute 50 still has its 49 minutes.
//!
//! The file is the magic `tailscope-journal\n`, a little-endian u16 format version, then
//! records. A record is `u32 length | u32 CRC32 of the payload | payload`; the payload's first
//! byte says its kind: a header (once, first), a second (one per finished second) or the end
//! (once, on a normal end). Header and end are deflated JSON; a second is a u32 length, its
//! deflated JSON ([`SecondRecord`]), then its latency histogram in hdrhistogram's own V2
//! deflate serialization. A reader keeps every whole record with a good CRC up to the first
//! that is cut short or damaged: a kill that lands mid-write loses that record only.

use std::io::{Read, Write};

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tailscope_loadgen::snapshot::{new_histogram, Counters};
use tailscope_loadgen::{RunTotals, SlowRequest, TimePoint};
use tailscope_targets::listen::ListenSample;

use crate::document::{Report, TargetInfo};

/// The first bytes of every journal.
pub const MAGIC: &[u8] = b"tailscope-journal\n";
/// The format version this build writes and reads.
pub const VERSION: u16 = 1;
/// A record longer than this is taken for damage, not data (a second is a few KiB; the end
/// record holds the final report, some MiB for a day-long run).
const MAX_RECORD: usize = 256 << 20;

const KIND_HEADER: u8 = 1;
const KIND_SECOND: u8 = 2;
const KIND_END: u8 = 3;

/// What the journal says of the run before its first second.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Header {
    /// The tailscope that wrote it (`CARGO_PKG_VERSION`).
    pub tailscope_version: String,
    /// The run's command line, as given (flags and URL): the plan is rebuilt from it.
    pub args: Vec<String>,
    /// The URL loaded (a launched target's, known only once it started).
    pub url: String,
    /// When measurement started, in ms since the Unix epoch.
    pub measure_started_unix_ms: u64,
    /// The server under test, when known.
    pub target: Option<TargetInfo>,
}

/// One finished second of the run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SecondRecord {
    /// The second's point of the time series (its `t_s` is the end of the second).
    pub point: TimePoint,
    /// The run's counters so far, as of the tick that closed this second.
    pub totals: Counters,
    /// The slowest requests so far, when they changed since the previous record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowest: Option<Vec<SlowRequest>>,
    /// Busy % of each CPU in this second, when the profiler read them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_busy_pct: Vec<f64>,
    /// The loaded listeners' accept queue as last read, when watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<ListenSample>,
}

/// A second as read back: its record and its latency histogram.
#[derive(Debug, Clone)]
pub struct Second {
    /// What was recorded of it.
    pub record: SecondRecord,
    /// Its latency histogram, as serialized (V2 deflate).
    pub histogram: Vec<u8>,
}

/// How the journal's bytes ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// At a record's end.
    Clean,
    /// Within a record (cut short, or its CRC did not match): the bytes from `offset` on
    /// were not read.
    Damaged {
        /// Where the unread bytes begin.
        offset: u64,
        /// How many there are.
        bytes: u64,
    },
}

/// A journal, read.
#[derive(Debug, Clone)]
pub struct Journal {
    /// Its header.
    pub header: Header,
    /// Every finished second recorded, in order.
    pub seconds: Vec<Second>,
    /// The report written at the run's normal end; none when the run did not end normally.
    pub end: Option<Report>,
    /// How its bytes ended.
    pub tail: Tail,
}

/// Why a journal could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Not a journal.
    #[error("not a tailscope journal (it does not begin with the journal's magic bytes)")]
    NotAJournal,
    /// A version this build does not read.
    #[error("journal format version {0}: this tailscope reads version {VERSION}")]
    Version(u16),
    /// No whole header record.
    #[error("the journal ends before its header record is whole: nothing of the run is in it")]
    NoHeader,
    /// A whole record (CRC good) whose content does not parse.
    #[error("record {index} of the journal cannot be read: {reason}")]
    Record {
        /// Its index (0 is the header).
        index: usize,
        /// Why.
        reason: String,
    },
}

/// True when `bytes` begin as a journal does.
pub fn is_journal(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// The bytes a journal begins with.
pub fn preamble() -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&VERSION.to_le_bytes());
    out
}

fn deflate(json: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(json);
    e.finish().unwrap_or_default()
}

fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    flate2::read::DeflateDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Frames a payload: length, CRC32, payload.
fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn json_record(kind: u8, value: &impl Serialize) -> Vec<u8> {
    let mut payload = vec![kind];
    payload.extend(deflate(&serde_json::to_vec(value).unwrap_or_default()));
    frame(&payload)
}

/// The header record's bytes.
pub fn header_record(header: &Header) -> Vec<u8> {
    json_record(KIND_HEADER, header)
}

/// The end record's bytes: the run's final report.
pub fn end_record(report: &Report) -> Vec<u8> {
    json_record(KIND_END, report)
}

/// A second's record bytes; `histogram` is its latency histogram, V2-deflate serialized.
pub fn second_record(second: &SecondRecord, histogram: &[u8]) -> Vec<u8> {
    let json = deflate(&serde_json::to_vec(second).unwrap_or_default());
    let mut payload = Vec::with_capacity(json.len() + histogram.len() + 5);
    payload.push(KIND_SECOND);
    payload.extend_from_slice(&(json.len() as u32).to_le_bytes());
    payload.extend_from_slice(&json);
    payload.extend_from_slice(histogram);
    frame(&payload)
}

/// Splits `bytes` (after the preamble) into whole, CRC-checked payloads, and how they ended.
fn payloads(bytes: &[u8], base: u64) -> (Vec<&[u8]>, Tail) {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let damaged = Tail::Damaged {
            offset: base + at as u64,
            bytes: (bytes.len() - at) as u64,
        };
        let Some(head) = bytes.get(at..at + 8) else {
            return (out, damaged);
        };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let body = match bytes.get(at + 8..(at + 8).saturating_add(len)) {
            Some(b) if len <= MAX_RECORD && len > 0 && crc32fast::hash(b) == crc => b,
            _ => return (out, damaged),
        };
        out.push(body);
        at += 8 + len;
    }
    (out, Tail::Clean)
}

fn parse_json<T: for<'de> Deserialize<'de>>(bytes: &[u8], index: usize) -> Result<T, JournalError> {
    let reason = |e: String| JournalError::Record { index, reason: e };
    let json = inflate(bytes).map_err(reason)?;
    serde_json::from_slice(&json).map_err(|e| reason(e.to_string()))
}

fn parse_second(body: &[u8], index: usize) -> Result<Second, JournalError> {
    let bad = |reason: &str| JournalError::Record {
        index,
        reason: reason.to_string(),
    };
    let len = body
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| bad("a second record without its length"))?;
    let json = body
        .get(4..4 + len)
        .ok_or_else(|| bad("a second record shorter than its JSON"))?;
    Ok(Second {
        record: parse_json(json, index)?,
        histogram: body[4 + len..].to_vec(),
    })
}

/// Reads a journal's bytes: every whole record up to the first damaged one.
pub fn read(bytes: &[u8]) -> Result<Journal, JournalError> {
    if !is_journal(bytes) {
        return Err(JournalError::NotAJournal);
    }
    let start = MAGIC.len() + 2;
    let version = match bytes.get(MAGIC.len()..start) {
        Some(v) => u16::from_le_bytes([v[0], v[1]]),
        None => return Err(JournalError::NoHeader),
    };
    if version != VERSION {
        return Err(JournalError::Version(version));
    }
    let (records, tail) = payloads(&bytes[start..], start as u64);
    let mut records = records.into_iter().enumerate();
    let header = match records.next() {
        Some((i, r)) if r[0] == KIND_HEADER => parse_json(&r[1..], i)?,
        _ => return Err(JournalError::NoHeader),
    };
    let mut journal = Journal {
        header,
        seconds: Vec::new(),
        end: None,
        tail,
    };
    for (i, r) in records {
        match r[0] {
            KIND_SECOND => journal.seconds.push(parse_second(&r[1..], i)?),
            KIND_END => journal.end = Some(parse_json(&r[1..], i)?),
            // A kind a later version added: skipped, as the format's rule says.
            _ => {}
        }
    }
    Ok(journal)
}

impl Journal {
    /// The run's totals as far as the journal has them: every second recorded, the counters
    /// and slowest requests as of the last, and the latency histogram summed from the
    /// seconds'. What it does not hold reads as n/a: the connect, TLS, first-request, body
    /// and uncorrected histograms, figures per name of a mix, rate changes, the grace period.
    pub fn totals(&self) -> RunTotals {
        let mut latency: Option<Histogram<u64>> = None;
        for s in &self.seconds {
            let Ok(h) = Deserializer::new().deserialize::<u64, _>(&mut s.histogram.as_slice())
            else {
                continue;
            };
            match latency.as_mut() {
                None => {
                    let mut h = h;
                    h.auto(true);
                    latency = Some(h);
                }
                Some(sum) => {
                    let _ = sum.add(&h);
                }
            }
        }
        let latency = latency.unwrap_or_else(|| new_histogram(std::time::Duration::from_secs(60)));
        let last = self.seconds.last();
        let counters = last.map(|s| s.record.totals.clone()).unwrap_or_default();
        let duration = std::time::Duration::from_secs_f64(last.map_or(0.0, |s| s.record.point.t_s));
        let mut totals = RunTotals::of_latency(duration, counters, latency);
        totals.timeseries = self
            .seconds
            .iter()
            .map(|s| s.record.point.clone())
            .collect();
        totals.second_histograms = self.seconds.iter().map(|s| s.histogram.clone()).collect();
        totals.slowest = self
            .seconds
            .iter()
            .rev()
            .find_map(|s| s.record.slowest.clone())
            .unwrap_or_default();
        totals.stopped_early = true;
        totals
    }
}

#[cfg(test)]
mod tests;
