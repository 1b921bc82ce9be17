//! The run's latency as an HdrHistogram interval log (`--hdr-log`): one histogram a second,
//! readable by the tools people already use with HdrHistogram (HistogramLogProcessor,
//! hdr-plot) and by the hdrhistogram crate's `IntervalLogIterator`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use tailscope_loadgen::snapshot::{RunTotals, TimePoint};

use super::histogram::decode_base64;
use super::Report;

/// Writes one histogram a second (latency in µs; corrected for coordinated omission in open
/// loop) with the `#[StartTime` and `#[BaseTime` headers set to `started`, the wall-clock
/// time measurement began, to the millisecond below (as the journal keeps it, so that the
/// log `report JOURNAL --hdr-log` writes is the run's own, byte for byte); each interval's
/// timestamp is its offset from it.
pub fn write_hdr_log(
    totals: &RunTotals,
    started: SystemTime,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let seconds = totals.timeseries.iter().zip(&totals.second_histograms);
    write_seconds(
        seconds.map(|(p, bytes)| {
            (
                p,
                Deserializer::new().deserialize(&mut bytes.as_slice()).ok(),
            )
        }),
        started,
        out,
    )
}

/// [`write_hdr_log`] of a run's report (its `timeseries` and `second_histograms`): the same
/// bytes as the run's own log when the report is the run's (a journal's end record holds
/// it); a report rebuilt from a killed run's journal has its seconds' histograms at the
/// journal's precision ([`crate::journal::SECOND_DIGITS`]).
pub fn write_report_hdr_log(
    report: &Report,
    started: SystemTime,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let seconds = report.timeseries.iter().zip(&report.second_histograms);
    write_seconds(
        seconds.map(|(p, data)| (p, decode_base64(data))),
        started,
        out,
    )
}

/// Writes the log of these seconds (a second without a readable histogram is left out).
fn write_seconds<'a>(
    seconds: impl Iterator<Item = (&'a TimePoint, Option<Histogram<u64>>)>,
    started: SystemTime,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let started = started.duration_since(UNIX_EPOCH).map_or(started, |d| {
        UNIX_EPOCH + Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    });
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("tailscope: request latency in microseconds, one histogram a second")
        .with_start_time(started)
        .with_base_time(started)
        .begin_log_with(out, &mut serializer)?;
    let mut previous_end = 0.0;
    for (point, h) in seconds {
        // A full second starts one second before its end; a partial last one where the
        // previous ended.
        let start = if point.partial {
            previous_end
        } else {
            (point.t_s - 1.0).max(0.0)
        };
        previous_end = point.t_s;
        let Some(h) = h else {
            continue;
        };
        log.write_histogram(
            &h,
            Duration::from_secs_f64(start),
            Duration::from_secs_f64((point.t_s - start).max(0.0)),
            None,
        )
        .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
    }
    Ok(())
}
