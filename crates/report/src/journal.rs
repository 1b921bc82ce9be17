//! The run journal (`run --journal`, docs/journal.md): a run's data appended second by second
//! as it happens, so that a run killed at minute 50 still has its 49 minutes.
//!
//! The file is the magic `tailscope-journal\n`, a little-endian u16 format version, then
//! records. A record is `u32 length | u32 CRC32 of the payload | payload`; the payload's first
//! byte says its kind: a header (once, first), a second (one per finished second) or the end
//! (once, on a normal end). Header and end are deflated JSON. The seconds are pieces of one
//! DEFLATE stream, each ended by a sync flush ([`SecondsEncoder`]): a piece inflates to a u32
//! length, the second's JSON ([`SecondRecord`]), then its latency histogram in hdrhistogram's
//! V2 serialization at [`SECOND_DIGITS`]. A reader keeps every whole record with a good CRC up
//! to the first that is cut short or damaged: a kill that lands mid-write loses that record
//! only.

use std::io::{Read, Write};

use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tailscope_loadgen::snapshot::{new_histogram, Counters};
use tailscope_loadgen::{RunTotals, SlowRequest, TimePoint};
use tailscope_targets::listen::{ListenReport, ListenSample};
use tailscope_targets::profile::Profile;

use crate::document::{Report, TargetInfo};

/// The first bytes of every journal.
pub const MAGIC: &[u8] = b"tailscope-journal\n";
/// The format version this build writes and reads.
/// Version 1 (before 2026-11-28) deflated each second on its own, its histogram at the
/// generator's full precision: it is refused, with a message that says so.
pub const VERSION: u16 = 2;
/// A record longer than this is taken for damage, not data (a second is a few KiB; the end
/// record holds the final report, some MiB for a day-long run).
const MAX_RECORD: usize = 256 << 20;

const KIND_HEADER: u8 = 1;
const KIND_SECOND: u8 = 2;
const KIND_END: u8 = 3;
const KIND_HISTOGRAMS: u8 = 4;
const KIND_PROFILE: u8 = 5;

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
    /// The run's working directory: the files its command line names (`--load`, `-D`) are
    /// found from it when the report is rebuilt elsewhere. Absent in journals before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<std::path::PathBuf>,
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
    /// Its latency histogram, V2 deflate serialized, at [`SECOND_DIGITS`].
    pub histogram: Vec<u8>,
}

/// The run's histograms but the latency one (which the seconds hold), as of a second:
/// uncorrected, connect, TLS, first request, body, each V2-deflate serialized, in that order.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramsRecord {
    /// How many seconds of the run were closed when they were taken.
    pub seconds: u64,
    /// The five histograms' bytes.
    pub histograms: Vec<Vec<u8>>,
}

/// The server side's profile as of a second of the run, as the run would have reported it
/// had it ended then: written once a minute, after the histograms record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProfileRecord {
    /// How many seconds of the run were closed when it was taken.
    pub seconds: u64,
    /// The profile of the measured run up to then (per-CPU, the server's tree, the
    /// generator's CPU, TCP counters).
    pub profile: Profile,
    /// The loaded listeners' accept queues up to then, when watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_queue: Option<ListenReport>,
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
    /// The run's other histograms as last written (once a minute, and at the end).
    pub histograms: Option<HistogramsRecord>,
    /// The server side's profile as last written (once a minute); none from a run killed
    /// in its first minute, or profiled through an agent.
    pub profile: Option<ProfileRecord>,
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
    #[error("journal format version {0}: this tailscope reads version {VERSION} only (version 1 was written by tailscope before 2026-11-28: read it with the tailscope that wrote it)")]
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

/// The profile record's bytes (deflated JSON, as the header's).
pub fn profile_record(record: &ProfileRecord) -> Vec<u8> {
    json_record(KIND_PROFILE, record)
}

/// Significant digits of the seconds' histograms as a journal keeps them (hdrhistogram's
/// precision: a value within 1 % of the one measured). At 3 digits a second of widely spread
/// latencies takes some 1 KB even compressed, two thirds of the record; at 2 a few hundred
/// bytes. The run's report, written at its end, keeps the generator's full precision; only
/// the report of a killed run, rebuilt from the seconds, reads its percentiles at this one.
pub const SECOND_DIGITS: u8 = 2;

/// Encodes the second records of one journal: their bytes are pieces of one DEFLATE stream,
/// each ended by a sync flush (so that a reader inflates every whole record written so far),
/// so what repeats from a second to the next (the JSON's keys, the counters that did not
/// move, an unchanged slowest list) costs a back-reference, not its bytes again.
pub struct SecondsEncoder {
    stream: flate2::write::DeflateEncoder<Vec<u8>>,
}

impl Default for SecondsEncoder {
    fn default() -> Self {
        SecondsEncoder {
            stream: flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(6)),
        }
    }
}

impl SecondsEncoder {
    /// The next second's record bytes. `histogram` is its latency histogram, serialized by
    /// hdrhistogram (V2, deflated or not, at any precision): it is kept at [`SECOND_DIGITS`].
    /// Must be written after every record this encoder returned before it.
    pub fn record(&mut self, second: &SecondRecord, histogram: &[u8]) -> Vec<u8> {
        let json = serde_json::to_vec(second).unwrap_or_default();
        let mut piece = Vec::with_capacity(json.len() + histogram.len() + 4);
        piece.extend_from_slice(&(json.len() as u32).to_le_bytes());
        piece.extend_from_slice(&json);
        piece.extend(coarse(histogram));
        // Writing to and flushing into a Vec cannot fail.
        let _ = self.stream.write_all(&piece);
        let _ = self.stream.flush();
        let mut payload = vec![KIND_SECOND];
        payload.append(self.stream.get_mut());
        frame(&payload)
    }
}

/// A serialized histogram re-serialized (V2, not deflated: the stream deflates it) at
/// [`SECOND_DIGITS`]; empty when it cannot be read.
fn coarse(histogram: &[u8]) -> Vec<u8> {
    use hdrhistogram::serialization::{Serializer, V2Serializer};
    let Ok(h) = Deserializer::new().deserialize::<u64, _>(&mut &histogram[..]) else {
        return Vec::new();
    };
    let Ok(mut out) = Histogram::<u64>::new_with_bounds(h.low(), h.high(), SECOND_DIGITS) else {
        return Vec::new();
    };
    out.auto(true);
    let mut bytes = Vec::new();
    if out.add(&h).is_err() || V2Serializer::new().serialize(&out, &mut bytes).is_err() {
        return Vec::new();
    }
    bytes
}

/// Inflates the next piece of a journal's seconds stream (all of it: a piece ends with a
/// sync flush).
fn inflate_piece(stream: &mut flate2::Decompress, input: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(input.len() * 4 + 1024);
    let mut used = 0usize;
    loop {
        if out.capacity() - out.len() < 1024 {
            out.reserve(out.capacity());
        }
        let (in_before, out_before) = (stream.total_in(), out.len());
        let status = stream
            .decompress_vec(&input[used..], &mut out, flate2::FlushDecompress::Sync)
            .map_err(|e| e.to_string())?;
        used += (stream.total_in() - in_before) as usize;
        let spare = out.len() < out.capacity();
        if (used == input.len() && spare) || status == flate2::Status::StreamEnd {
            return Ok(out);
        }
        if stream.total_in() == in_before && out.len() == out_before && spare {
            return Err("the seconds' stream does not inflate".into());
        }
    }
}

/// A histograms record's bytes: the run's histograms (all but the latency one) after
/// `seconds` closed seconds.
pub fn histograms_record(seconds: u64, h: &tailscope_loadgen::snapshot::Histograms) -> Vec<u8> {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut payload = vec![KIND_HISTOGRAMS];
    payload.extend_from_slice(&seconds.to_le_bytes());
    for one in [
        &h.latency_uncorrected,
        &h.connect,
        &h.tls,
        &h.first_request,
        &h.body,
    ] {
        let mut bytes = Vec::new();
        let _ = V2DeflateSerializer::new().serialize(one, &mut bytes);
        payload.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        payload.extend(bytes);
    }
    frame(&payload)
}

fn parse_histograms(body: &[u8], index: usize) -> Result<HistogramsRecord, JournalError> {
    let bad = || JournalError::Record {
        index,
        reason: "a histograms record shorter than its lengths say".into(),
    };
    let seconds = body
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(bad)?;
    let mut at = 8;
    let mut histograms = Vec::new();
    while at < body.len() {
        let len = body
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or_else(bad)?;
        histograms.push(body.get(at + 4..at + 4 + len).ok_or_else(bad)?.to_vec());
        at += 4 + len;
    }
    Ok(HistogramsRecord {
        seconds,
        histograms,
    })
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

fn parse_second(
    codec: &mut SecondCodec,
    body: &[u8],
    index: usize,
) -> Result<Second, JournalError> {
    let bad = |reason: &str| JournalError::Record {
        index,
        reason: reason.to_string(),
    };
    let piece = inflate_piece(&mut codec.stream, body).map_err(|e| bad(&e))?;
    let len = piece
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or_else(|| bad("a second record without its length"))?;
    let json = piece
        .get(4..4 + len)
        .ok_or_else(|| bad("a second record shorter than its JSON"))?;
    let record = serde_json::from_slice(json).map_err(|e| bad(&e.to_string()))?;
    // Handed on as the generator hands its seconds' histograms: V2 deflate, written by the
    // generator's own serializer (the same bytes).
    let histogram = match codec.plain.deserialize::<u64, _>(&mut &piece[4 + len..]) {
        Ok(h) => codec.deflate.serialize(&h),
        Err(_) => Vec::new(),
    };
    Ok(Second { record, histogram })
}

/// What reading a journal's seconds keeps from one second to the next: the record stream's
/// inflater, and one deserializer and one compressor for the histograms. A zlib state made
/// anew for each second (some 300 KiB, aligned) fragmented glibc's heap: rebuilding the report
/// of a 40-minute soak took 760 MB of RSS for 17 MB of live data.
struct SecondCodec {
    stream: flate2::Decompress,
    plain: Deserializer,
    deflate: tailscope_loadgen::aggregate::SecondSerializer,
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
        histograms: None,
        profile: None,
        tail,
    };
    let mut codec = SecondCodec {
        stream: flate2::Decompress::new(false),
        plain: Deserializer::new(),
        deflate: tailscope_loadgen::aggregate::SecondSerializer::new(),
    };
    for (i, r) in records {
        match r[0] {
            KIND_SECOND => journal.seconds.push(parse_second(&mut codec, &r[1..], i)?),
            KIND_END => journal.end = Some(parse_json(&r[1..], i)?),
            KIND_HISTOGRAMS => journal.histograms = Some(parse_histograms(&r[1..], i)?),
            KIND_PROFILE => journal.profile = Some(parse_json(&r[1..], i)?),
            // A kind a later version added: skipped, as the format's rule says.
            _ => {}
        }
    }
    Ok(journal)
}

impl Journal {
    /// The run's totals as far as the journal has them: every second recorded, the counters
    /// and slowest requests as of the last, and the latency histogram summed from the
    /// seconds', the other histograms (connect, TLS, first-request, body, uncorrected) as last
    /// written (once a minute). What it does not hold reads as n/a: those histograms before
    /// their first minute, figures per name of a mix, rate changes, the grace period.
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
        if let Some(record) = &self.histograms {
            let h = &mut totals.histograms;
            let slots = [
                &mut h.latency_uncorrected,
                &mut h.connect,
                &mut h.tls,
                &mut h.first_request,
                &mut h.body,
            ];
            for (slot, bytes) in slots.into_iter().zip(&record.histograms) {
                if let Ok(read) = Deserializer::new().deserialize::<u64, _>(&mut bytes.as_slice()) {
                    *slot = read;
                }
            }
        }
        totals.timeseries = self
            .seconds
            .iter()
            .map(|s| s.record.point.clone())
            .collect();
        totals.second_histograms = self.seconds.iter().map(|s| s.histogram.clone()).collect();
        totals.conns_peak = self.conns_peak();
        totals.slowest = self
            .seconds
            .iter()
            .rev()
            .find_map(|s| s.record.slowest.clone())
            .unwrap_or_default();
        totals.stopped_early = true;
        totals
    }

    /// The most connections open (and opening) in the seconds recorded, each second as it
    /// ended: a journal keeps no peak within a second, so this is a lower bound of the run's
    /// (the report of a killed run once read 0 open of 10 and warned that they never opened).
    fn conns_peak(&self) -> tailscope_loadgen::conns::Gauges {
        use tailscope_loadgen::conns::HeldKind;
        let mut peak = tailscope_loadgen::conns::Gauges::default();
        for s in &self.seconds {
            let c = &s.record.point.connections;
            peak.load.open = peak.load.open.max(c.open);
            peak.load.opening = peak.load.opening.max(c.opening);
            peak.serving = peak.serving.max(c.serving);
            for (kind, open) in [(HeldKind::Idle, c.idle_open), (HeldKind::Slow, c.slow_open)] {
                let held = &mut peak.held[kind.index()];
                held.open = held.open.max(open.unwrap_or(0));
            }
        }
        peak
    }
}

#[cfg(test)]
mod tests;
