//! Makes a long run's journal from a shorter one, to measure what rebuilding the report of a
//! run of that length costs (issue 38's "a day-long run"): the seconds of `IN` are written
//! `TIMES` times over, one after another, their times shifted. Only the cost is measured: the
//! run's counters are each copy's own (so the rebuilt totals are those of the last copy).
//! No end record is written, so `tailscope report OUT` rebuilds the report from the seconds,
//! as it does for a killed run.
//!
//! `cargo run --release -p tailscope-report --example stretch_journal -- IN OUT TIMES`

use std::io::Write;

use tailscope_report::journal;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, input, output, times] = &args[..] else {
        return Err("usage: stretch_journal IN OUT TIMES".into());
    };
    let times: u64 = times.parse()?;
    let j = journal::read(&std::fs::read(input)?)?;
    let span = j.seconds.last().map_or(0.0, |s| s.record.point.t_s);
    let mut out = std::io::BufWriter::new(std::fs::File::create(output)?);
    out.write_all(&journal::preamble())?;
    out.write_all(&journal::header_record(&j.header))?;
    let mut encoder = journal::SecondsEncoder::default();
    for k in 0..times {
        for s in &j.seconds {
            let mut r = s.record.clone();
            r.point.t_s += span * k as f64;
            out.write_all(&encoder.record(&r, &s.histogram))?;
        }
    }
    out.flush()?;
    Ok(())
}
