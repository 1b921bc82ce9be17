//! The run's per-second series and its slowest requests as CSV (`run --csv`, `run
//! --csv-slowest`), for spreadsheets, pandas and the like, beside the JSON report.
//!
//! A column is the JSON report's field of the same name (in `timeseries` or `slowest`), in
//! the same unit, with the same value: a nested field is named by its path
//! (`connections.open`), an array's items by their index (`cpu_busy_pct.0` is CPU 0's busy
//! %), and what the JSON has as null (a second without a response has no p50) is an empty
//! cell, never a made-up 0. The columns are the same whatever the run, apart from one
//! `cpu_busy_pct.N` per CPU the profiler read, so a script can name them.

use std::io::Write;

use serde::Serialize;
use tailscope_loadgen::snapshot::{SlowRequest, TimePoint};

/// The series' columns before the per-CPU ones, in order.
pub const SERIES_COLUMNS: [&str; 19] = [
    "t_s",
    "partial",
    "requests",
    "errors",
    "timeouts",
    "unfinished",
    "retransmits",
    "p50_us",
    "p99_us",
    "max_us",
    "outliers",
    "generator_lag_us",
    "connections.open",
    "connections.opening",
    "connections.failed",
    "connections.idle_open",
    "connections.slow_open",
    "connections.held_opening",
    "connections.held_lost",
];

/// The slowest requests' columns, in order.
pub const SLOWEST_COLUMNS: [&str; 18] = [
    "at_s",
    "latency_us",
    "ttfb_us",
    "body_us",
    "connect_us",
    "tls_us",
    "queued_us",
    "first_on_connection",
    "conn",
    "worker",
    "status",
    "error",
    "unfinished",
    "stage",
    "retransmits",
    "rtt_us",
    "rto_us",
    "request",
];

/// Writes the per-second series (the JSON's `timeseries`), a header row then one row a
/// second, and one `cpu_busy_pct.N` column per CPU of the widest second.
pub fn write_series(points: &[TimePoint], out: impl Write) -> Result<(), csv::Error> {
    let cpus = points
        .iter()
        .map(|p| p.cpu_busy_pct.len())
        .max()
        .unwrap_or(0);
    let mut w = csv::Writer::from_writer(out);
    let header = SERIES_COLUMNS
        .iter()
        .map(|c| c.to_string())
        .chain((0..cpus).map(|cpu| format!("cpu_busy_pct.{cpu}")));
    w.write_record(header)?;
    for p in points {
        let c = &p.connections;
        let mut row = vec![
            p.t_s.to_string(),
            p.partial.to_string(),
            p.requests.to_string(),
            p.errors.to_string(),
            p.timeouts.to_string(),
            p.unfinished.to_string(),
            p.retransmits.to_string(),
            // 0 in memory is the JSON's null: nothing was measured in that second.
            measured(p.p50_us),
            measured(p.p99_us),
            measured(p.max_us),
            p.outliers.to_string(),
            p.generator_lag_us.to_string(),
            c.open.to_string(),
            c.opening.to_string(),
            c.failed.to_string(),
            cell(c.idle_open),
            cell(c.slow_open),
            cell(c.held_opening),
            cell(c.held_lost),
        ];
        row.extend((0..cpus).map(|cpu| cell(p.cpu_busy_pct.get(cpu))));
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

/// Writes the slowest requests (the JSON's `slowest`), slowest first, a header row first.
pub fn write_slowest(slowest: &[SlowRequest], out: impl Write) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record(SLOWEST_COLUMNS)?;
    for r in slowest {
        w.write_record([
            r.at_s.to_string(),
            r.latency_us.to_string(),
            r.ttfb_us.to_string(),
            r.body_us.to_string(),
            cell(r.connect_us),
            cell(r.tls_us),
            cell(r.queued_us),
            r.first_on_connection.to_string(),
            r.conn.to_string(),
            r.worker.to_string(),
            cell(r.status),
            r.error.map(as_json_text).unwrap_or_default(),
            r.unfinished.to_string(),
            r.stage.map(as_json_text).unwrap_or_default(),
            cell(r.retransmits),
            cell(r.rtt_us),
            cell(r.rto_us),
            cell(r.request.as_deref()),
        ])?;
    }
    w.flush()?;
    Ok(())
}

/// A value, or an empty cell for the JSON's null.
fn cell(value: Option<impl ToString>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// A latency of a second, empty when nothing was measured in it (0, the JSON's null).
fn measured(us: u64) -> String {
    cell((us > 0).then_some(us))
}

/// A unit enum as the JSON spells it (`not_sent`), so that the CSV cannot drift from it.
fn as_json_text(value: impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_loadgen::conns::ConnPoint;
    use tailscope_loadgen::snapshot::Stage;
    use tailscope_loadgen::ErrorKind;

    fn second(t_s: f64) -> TimePoint {
        TimePoint {
            t_s,
            partial: false,
            requests: 1200,
            errors: 3,
            timeouts: 1,
            unfinished: 0,
            retransmits: 2,
            p50_us: 250,
            p99_us: 1900,
            max_us: 31_000,
            outliers: 4,
            generator_lag_us: 120,
            cpu_busy_pct: vec![97.5, 12.25],
            connections: ConnPoint {
                open: 64,
                ..ConnPoint::default()
            },
        }
    }

    #[test]
    fn the_series_has_a_header_and_a_row_a_second_with_nulls_empty() {
        let quiet = TimePoint {
            partial: true,
            requests: 0,
            errors: 0,
            timeouts: 0,
            unfinished: 5,
            p50_us: 0,
            p99_us: 0,
            max_us: 0,
            cpu_busy_pct: Vec::new(),
            connections: ConnPoint {
                open: 60,
                idle_open: Some(10),
                ..ConnPoint::default()
            },
            ..second(2.35)
        };
        let mut out = Vec::new();
        write_series(&[second(1.0), quiet], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "t_s,partial,requests,errors,timeouts,unfinished,retransmits,p50_us,p99_us,max_us,\
                 outliers,generator_lag_us,connections.open,connections.opening,connections.failed,\
                 connections.idle_open,connections.slow_open,connections.held_opening,\
                 connections.held_lost,cpu_busy_pct.0,cpu_busy_pct.1",
                "1,false,1200,3,1,0,2,250,1900,31000,4,120,64,0,0,,,,,97.5,12.25",
                "2.35,true,0,0,0,5,2,,,,4,120,60,0,0,10,,,,,",
            ]
        );
    }

    #[test]
    fn the_slowest_keep_their_kinds_as_the_json_spells_them() {
        let failed = SlowRequest {
            at_s: 1.5,
            latency_us: 2_000_000,
            ttfb_us: 0,
            body_us: 0,
            connect_us: None,
            tls_us: None,
            queued_us: Some(30),
            first_on_connection: true,
            conn: 7,
            worker: 1,
            status: None,
            error: Some(ErrorKind::Timeout),
            unfinished: true,
            stage: Some(Stage::NotSent),
            retransmits: Some(0),
            rtt_us: None,
            rto_us: None,
            request: Some("search, \"fast\"".into()),
        };
        let mut out = Vec::new();
        write_slowest(&[failed], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], SLOWEST_COLUMNS.join(","));
        // A name with a comma and quotes is quoted, as CSV readers expect.
        assert_eq!(
            lines[1],
            "1.5,2000000,0,0,,,30,true,7,1,,timeout,true,not_sent,0,,,\"search, \"\"fast\"\"\""
        );
        assert_eq!(lines.len(), 2);
    }
}
