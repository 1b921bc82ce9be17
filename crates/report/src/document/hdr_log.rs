//! The run's latency as an HdrHistogram interval log (`--hdr-log`): one histogram a second,
//! readable by the tools people already use with HdrHistogram (HistogramLogProcessor,
//! hdr-plot) and by the hdrhistogram crate's `IntervalLogIterator`.

use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::{Deserializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

use tailscope_loadgen::snapshot::RunTotals;

/// Writes one histogram a second (latency in µs; corrected for coordinated omission in open
/// loop) with the `#[StartTime` and `#[BaseTime` headers set to `started`, the wall-clock
/// time measurement began; each interval's timestamp is its offset from it.
pub fn write_hdr_log(
    totals: &RunTotals,
    started: SystemTime,
    out: &mut impl std::io::Write,
) -> std::io::Result<()> {
    let mut serializer = V2DeflateSerializer::new();
    let mut log = IntervalLogWriterBuilder::new()
        .add_comment("tailscope: request latency in microseconds, one histogram a second")
        .with_start_time(started)
        .with_base_time(started)
        .begin_log_with(out, &mut serializer)?;
    let mut previous_end = 0.0;
    for (point, bytes) in totals.timeseries.iter().zip(&totals.second_histograms) {
        // A full second starts one second before its end; a partial last one where the
        // previous ended.
        let start = if point.partial {
            previous_end
        } else {
            (point.t_s - 1.0).max(0.0)
        };
        previous_end = point.t_s;
        let Ok(h) = Deserializer::new().deserialize::<u64, _>(&mut bytes.as_slice()) else {
            continue;
        };
        let h: Histogram<u64> = h;
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
