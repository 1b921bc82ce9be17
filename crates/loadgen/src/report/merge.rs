//! `tailscope merge`: the reports of N generators (`run --segment I/N`, each on its own host)
//! as one report of the same schema.
//!
//! Lossless where it can be: the HDR histograms are added (the merged percentiles are those
//! of the union of all samples, never an average of percentiles), counters and status codes
//! are summed, `rps` is over the union of the load windows, and the time series is aligned on
//! wall-clock time and summed second by second, with each second's percentiles from the sum
//! of that second's histograms. What belongs to one host (its profile, its diagnosis, its CPU
//! figures) is kept per host in [`MergeInfo::runs`], not summed.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::{
    decode_base64, encoded, lower_bounds, percentiles, ratio, rfc3339, Config, LittlesLaw, Report,
    Summary, TargetInfo,
};
use crate::error::Error;
use crate::segment::Segment;
use crate::snapshot::{Percentiles, TimePoint};

/// What a merged report was made of.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeInfo {
    /// How many segments the load was split into (the `N` of `--segment I/N`); null when
    /// the reports had no segment.
    pub segments: Option<usize>,
    /// Segments of `1..=N` no report was given for: the merged load is short of them.
    pub missing_segments: Vec<usize>,
    /// `--force` was given and a check that would have refused the merge was overridden
    /// (the reasons are in `warnings`).
    pub forced: bool,
    /// The earliest generator's start, RFC 3339 UTC: `timeseries` and `slowest` count from it.
    pub started_at: String,
    /// The latest generator's end (its load window and grace), RFC 3339 UTC.
    pub ended_at: String,
    /// Each report merged, in the order given.
    pub runs: Vec<MergedRun>,
}

/// One generator's report, as a merged report keeps it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergedRun {
    /// The file it was read from.
    pub file: String,
    /// Its host.
    pub host: Option<String>,
    /// Its segment.
    pub segment: Option<Segment>,
    /// When its measurement began, RFC 3339 UTC.
    pub started_at: String,
    /// How long after the earliest generator it began (s). Its seconds and its slowest
    /// requests are moved onto the merged clock by this rounded to the whole second (a
    /// warning says when that is more than 0.1 s off).
    pub offset_s: f64,
    /// Its own connections.
    pub connections: usize,
    /// Its own requests.
    pub requests: u64,
    /// Its own requests per second.
    pub rps: f64,
    /// Its own latency percentiles.
    pub latency_us: Option<Percentiles>,
    /// The server it loaded, as it saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetInfo>,
    /// What its host measured besides the load (`profile`, `diagnosis`, ...), as it wrote it.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub sections: serde_json::Map<String, serde_json::Value>,
}

/// Runs whose starts are further apart than this did not load the server together for the
/// whole window: the merged report says so.
const START_SPREAD_WARN_S: f64 = 1.0;

/// A run's seconds are summed into the merged clock's whole seconds nearest to them: a run
/// that started further than this from one has its per-second figures added into seconds
/// that cover other wall-clock time, and the merged report says by how much.
const SECOND_ALIGN_WARN_S: f64 = 0.1;

fn decode(name: &str, what: &str, data: &str) -> Result<Histogram<u64>, Error> {
    decode_base64(data).ok_or_else(|| {
        Error::Merge(format!(
            "{name}: its {what} histogram cannot be decoded (a damaged or edited report)"
        ))
    })
}

/// Adds `h` into `sum`, which grows to hold it.
fn add(sum: &mut Option<Histogram<u64>>, h: Histogram<u64>) {
    match sum {
        None => {
            let mut h = h;
            h.auto(true);
            *sum = Some(h);
        }
        Some(s) => s
            .add(&h)
            .expect("an auto-resizing histogram takes any other of the same precision"),
    }
}

/// The settings that must be equal for reports to be parts of one load: everything but the
/// shares (`connections`, `threads`, `rate`, `requests`) and the pinning.
fn differences(a: &Config, b: &Config) -> Vec<String> {
    let fields = |c: &Config| {
        [
            ("url", c.url.clone()),
            ("method", c.method.clone()),
            ("mode", c.mode.clone()),
            ("pipeline", c.pipeline.to_string()),
            ("keepalive", c.keepalive.to_string()),
            ("duration_s", format!("{:?}", c.duration_s)),
            ("warmup_s", c.warmup_s.to_string()),
            ("timeout_s", c.timeout_s.to_string()),
            ("connect_timeout_s", c.connect_timeout_s.to_string()),
            ("-n given", c.requests.is_some().to_string()),
            ("engine", c.engine.name.clone()),
        ]
    };
    fields(a)
        .into_iter()
        .zip(fields(b))
        .filter(|((_, x), (_, y))| x != y)
        .map(|((what, x), (_, y))| format!("{what} {x} vs {y}"))
        .collect()
}

/// A mismatch `--force` may override: refused without it, noted (for the warnings) with it.
fn overridable(m: String, force: bool, overridden: &mut Vec<String>) -> Result<(), Error> {
    if !force {
        return Err(Error::Merge(format!("{m} (--force merges them anyway)")));
    }
    overridden.push(m);
    Ok(())
}

/// Sums an optional figure: known only when every report knows it.
fn sum_known(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    values.sum()
}

/// The segments' shares of `-q` added back up, to 12 significant digits: r/N added N times
/// is not always r in floating point (100/7 × 7 = 100.00000000000001), and a rate anyone
/// asked for has fewer digits than that. Known only when every report has one.
fn sum_of_rates(rates: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let total: f64 = rates.sum::<Option<f64>>()?;
    format!("{total:.11e}").parse().ok()
}

/// Merges `reports` (each with the file it came from, for messages) into one report.
///
/// Refused with [`Error::Merge`] (the binary exits 2): no report, a report that is itself
/// merged, one without the `generator` section or per-second histograms (written by an
/// older tailscope), a damaged histogram, one run given twice; and, unless `force`, a
/// report run without `--segment`, reports of different settings (URL, method, mode,
/// duration, ...), whose segments overlap or count differently, or whose load windows
/// never overlapped. Missing segments are not refused: they are named in the result.
pub fn merge(reports: &[(String, Report)], force: bool) -> Result<Report, Error> {
    let refuse = |m: String| Err(Error::Merge(m));
    let Some((first_name, first)) = reports.first() else {
        return refuse(
            "no report to merge: give the JSON reports of `tailscope run --json`".into(),
        );
    };
    // One run given twice (the same file under two names, or a copy) would count its load
    // twice: never what was meant, so --force does not override it. Looked for first, so that
    // `merge a.json a.json` says so rather than what else is wrong with a.json.
    for (i, (name, r)) in reports.iter().enumerate() {
        let id = |r: &Report| {
            r.generator
                .as_ref()
                .map(|g| (g.host.clone(), g.segment, g.started_unix_s, g.ended_unix_s))
        };
        let Some((earlier, _)) = reports[..i]
            .iter()
            .find(|(n, o)| n == name || (id(o).is_some() && id(o) == id(r)))
        else {
            continue;
        };
        if earlier == name {
            return refuse(format!(
                "{name} is given twice: give each generator's report once"
            ));
        }
        let g = r.generator.as_ref();
        return refuse(format!(
            "{name} is {earlier} again (host {}, segment {}, started {}): the same report given twice; give each generator's report once",
            g.and_then(|g| g.host.as_deref()).unwrap_or("n/a"),
            g.and_then(|g| g.segment).map_or("none".into(), |s| s.to_string()),
            g.map_or("n/a", |g| g.started_at.as_str())
        ));
    }
    let mut overridden = Vec::new();
    let mut generators: Vec<&super::Generator> = Vec::with_capacity(reports.len());
    for (name, r) in reports {
        if r.merged.is_some() {
            return refuse(format!(
                "{name} is a merged report already: merge the generators' own reports together instead"
            ));
        }
        if r.schema_version != first.schema_version {
            return refuse(format!(
                "{name} has schema_version {} and {first_name} {}: merge reports of one tailscope version",
                r.schema_version, first.schema_version
            ));
        }
        let Some(g) = &r.generator else {
            return refuse(format!(
                "{name} has no `generator` section (host, start time): it was written by an older tailscope; run it again with this one"
            ));
        };
        if r.second_histograms.len() != r.timeseries.len() {
            return refuse(format!(
                "{name} has {} points in its time series but {} per-second histograms: it was written by an older tailscope, or edited",
                r.timeseries.len(),
                r.second_histograms.len()
            ));
        }
        if g.segment.is_none() {
            let m = format!(
                "{name} is not a segment: it was run without --segment I/N, so it is a whole load of its own, not a share of one; merge the reports of `tailscope run --segment I/N` (one per generator)"
            );
            overridable(m, force, &mut overridden)?;
        }
        let diff = differences(&first.config, &r.config);
        if !diff.is_empty() {
            let m = format!(
                "{name} and {first_name} are not parts of one load: {}",
                diff.join(", ")
            );
            overridable(m, force, &mut overridden)?;
        }
        generators.push(g);
    }

    // Segments: each report is segment I of one N; a report without one (only with --force)
    // is the whole load.
    let whole = Segment { index: 1, count: 1 };
    let segs: Vec<Segment> = generators
        .iter()
        .map(|g| g.segment.unwrap_or(whole))
        .collect();
    // Split in different ways (only with --force): the finest split is the one whose missing
    // segments are named; the others are said to differ.
    let count = segs
        .iter()
        .map(|s| s.count)
        .max()
        .expect("at least one report");
    let mut counts: Vec<usize> = segs.iter().map(|s| s.count).collect();
    counts.sort_unstable();
    counts.dedup();
    let mut by_segment: BTreeMap<Segment, Vec<&str>> = BTreeMap::new();
    for ((name, _), s) in reports.iter().zip(&segs) {
        if s.count != segs[0].count {
            let m = format!(
                "{name} is segment {s} but {first_name} is segment {}: the load was split in different ways",
                segs[0]
            );
            overridable(m, force, &mut overridden)?;
        }
        by_segment.entry(*s).or_default().push(name);
    }
    for (s, names) in &by_segment {
        if names.len() > 1 {
            let m = format!(
                "segment {s} overlaps: {} all ran it (a load counted twice)",
                names.join(", ")
            );
            overridable(m, force, &mut overridden)?;
        }
    }
    let missing: Vec<usize> = (1..=count)
        .filter(|&index| !by_segment.contains_key(&Segment { index, count }))
        .collect();
    let any_segment = generators.iter().any(|g| g.segment.is_some());

    // Each run's load window [start, start + duration] on wall-clock time, and their union.
    let windows: Vec<(f64, f64)> = reports
        .iter()
        .zip(&generators)
        .map(|((_, r), g)| (g.started_unix_s, g.started_unix_s + r.summary.duration_s))
        .collect();
    // The run that began last and the one whose window ended first.
    let late = (0..windows.len())
        .max_by(|&a, &b| windows[a].0.total_cmp(&windows[b].0))
        .expect("at least one report");
    let early = (0..windows.len())
        .min_by(|&a, &b| windows[a].1.total_cmp(&windows[b].1))
        .expect("at least one report");
    let start = windows.iter().map(|w| w.0).fold(f64::INFINITY, f64::min);
    let window_end = windows
        .iter()
        .map(|w| w.1)
        .fold(f64::NEG_INFINITY, f64::max);
    let latest_start = windows[late].0;
    let data_end = generators
        .iter()
        .map(|g| g.ended_unix_s)
        .fold(f64::NEG_INFINITY, f64::max);
    // Runs that never all loaded the server at one moment (one began after another had
    // ended: run hours apart, a wrong --start-at) are not one load: `rps` over the union of
    // their windows would count the gap between them as time of a load that never was.
    if latest_start >= windows[early].1 {
        let m = format!(
            "{} began its load window {:.1} s after {} ended its own: the runs never loaded the server together, so they are not one load (give them one --start-at)",
            reports[late].0,
            latest_start - windows[early].1,
            reports[early].0
        );
        overridable(m, force, &mut overridden)?;
    }

    // Histograms: added, never averaged.
    let mut latency = None;
    let mut connect = None;
    let mut uncorrected = None;
    let mut connect_known = true;
    let mut uncorrected_known = true;
    for (name, r) in reports {
        add(&mut latency, decode(name, "latency", &r.histogram.data)?);
        match &r.connect_histogram {
            Some(h) => add(&mut connect, decode(name, "connect", &h.data)?),
            None => connect_known = false,
        }
        match &r.latency_uncorrected_histogram {
            Some(h) => add(
                &mut uncorrected,
                decode(name, "uncorrected latency", &h.data)?,
            ),
            None => uncorrected_known = false,
        }
    }
    let latency = latency.expect("at least one report");
    let tls = merged_tls(reports)?;

    // Each run's seconds move onto the merged clock by its start, rounded to the whole
    // second: a run's second can only be added whole into one merged second. What the
    // rounding moved a run by (up to 0.5 s) is warned about below.
    let shifts: Vec<i64> = generators
        .iter()
        .map(|g| (g.started_unix_s - start).round() as i64)
        .collect();
    let misaligned: Vec<(&str, f64)> = reports
        .iter()
        .zip(&generators)
        .zip(&shifts)
        .map(|(((name, _), g), &shift)| {
            (
                name.as_str(),
                (g.started_unix_s - start - shift as f64).abs(),
            )
        })
        .filter(|&(_, off)| off > SECOND_ALIGN_WARN_S)
        .collect();

    // Time series: each run's seconds shifted, and summed; each second's percentiles from the
    // sum of its histograms.
    struct Second {
        point: TimePoint,
        whole: bool,
        latency: Option<Histogram<u64>>,
    }
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    for ((name, r), &shift) in reports.iter().zip(&shifts) {
        for (p, h) in r.timeseries.iter().zip(&r.second_histograms) {
            let key = shift + p.t_s.ceil() as i64;
            let s = seconds.entry(key).or_insert_with(|| Second {
                point: TimePoint {
                    // Where the second starts: a partial point is dated when its data ends.
                    t_s: key as f64 - 1.0,
                    partial: false,
                    requests: 0,
                    errors: 0,
                    timeouts: 0,
                    unfinished: 0,
                    retransmits: 0,
                    p50_us: 0,
                    p99_us: 0,
                    max_us: 0,
                    outliers: 0,
                    generator_lag_us: 0,
                    cpu_busy_pct: Vec::new(),
                    connections: Default::default(),
                },
                whole: false,
                latency: None,
            });
            let q = &mut s.point;
            q.requests += p.requests;
            q.errors += p.errors;
            q.timeouts += p.timeouts;
            q.unfinished += p.unfinished;
            q.retransmits += p.retransmits;
            q.outliers += p.outliers;
            q.generator_lag_us = q.generator_lag_us.max(p.generator_lag_us);
            q.connections.add(&p.connections);
            if p.partial {
                // Dated when the data ends, unless a whole second of another run covers it.
                q.t_s = if s.whole {
                    q.t_s
                } else {
                    (shift as f64 + p.t_s).max(q.t_s)
                };
            } else {
                s.whole = true;
                q.t_s = key as f64;
            }
            add(&mut s.latency, decode(name, "per-second latency", h)?);
        }
    }
    let mut timeseries = Vec::with_capacity(seconds.len());
    let mut second_histograms = Vec::with_capacity(seconds.len());
    for (_, mut s) in seconds {
        let h = s.latency.expect("every second has a histogram");
        let p = Percentiles::of(&h);
        s.point.p50_us = p.p50;
        s.point.p99_us = p.p99;
        s.point.max_us = p.max;
        s.point.partial = !s.whole;
        second_histograms.push(encoded(&h).data);
        timeseries.push(s.point);
    }

    // The slowest requests of all, on the merged clock: shifted as their run's seconds are,
    // so each falls in the merged second that counts it.
    let keep = reports
        .iter()
        .map(|(_, r)| r.slowest.len())
        .max()
        .unwrap_or(0);
    let mut slowest: Vec<_> = reports
        .iter()
        .zip(&shifts)
        .flat_map(|((_, r), &shift)| {
            r.slowest.iter().cloned().map(move |mut s| {
                s.at_s += shift as f64;
                s
            })
        })
        .collect();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.latency_us));
    slowest.truncate(keep);

    let all = || reports.iter().map(|(_, r)| r);
    let sum = |f: fn(&Summary) -> u64| all().map(|r| f(&r.summary)).sum::<u64>();
    let requests = sum(|s| s.requests);
    let successes = sum(|s| s.successes);
    let errors = sum(|s| s.errors);
    let non2xx = sum(|s| s.non2xx);
    let duration_s = (window_end - start).max(0.0);
    let unfinished_min_us = all().filter_map(|r| r.summary.unfinished_min_us).min();
    let summary = Summary {
        requests,
        successes,
        errors,
        timeouts: sum(|s| s.timeouts),
        duration_s,
        grace_s: (data_end - window_end).max(0.0),
        rps: if duration_s > 0.0 {
            requests as f64 / duration_s
        } else {
            0.0
        },
        bytes_read: sum(|s| s.bytes_read),
        late_sends: sum(|s| s.late_sends),
        reconnects: sum(|s| s.reconnects),
        aborted: sum(|s| s.aborted),
        still_connecting: sum(|s| s.still_connecting),
        connections_opened: sum(|s| s.connections_opened),
        connect_failures: sum(|s| s.connect_failures),
        unfinished: sum(|s| s.unfinished),
        unfinished_min_us,
        unfinished_max_us: all().filter_map(|r| r.summary.unfinished_max_us).max(),
        retransmits: sum_known(all().map(|r| r.summary.retransmits)),
        syn_retransmits: sum_known(all().map(|r| r.summary.syn_retransmits)),
        transport: all().filter_map(|r| r.summary.transport.as_ref()).fold(
            None,
            |acc: Option<crate::transport::TransportCounters>, t| {
                let mut acc = acc.unwrap_or_default();
                acc.merge(t);
                Some(acc)
            },
        ),
        error_rate: ratio(errors, requests),
        non2xx,
        non2xx_rate: ratio(non2xx, requests),
    };
    let mut status_codes: BTreeMap<String, u64> = BTreeMap::new();
    let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
    for r in all() {
        for (k, n) in &r.status_codes {
            *status_codes.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &r.errors {
            *error_kinds.entry(k.clone()).or_default() += n;
        }
    }
    let connection_s: Option<f64> = all()
        .map(|r| r.littles_law.as_ref().map(|l| l.connection_s))
        .sum();
    let accounted_s: Option<f64> = all()
        .map(|r| r.littles_law.as_ref().map(|l| l.accounted_s))
        .sum();
    let littles_law = connection_s.zip(accounted_s).filter(|&(c, _)| c > 0.0).map(
        |(connection_s, accounted_s)| LittlesLaw {
            connection_s,
            accounted_s,
            unaccounted_pct: 100.0 * (1.0 - accounted_s / connection_s).max(0.0),
        },
    );

    let mut config = first.config.clone();
    config.connections = all().map(|r| r.config.connections).sum();
    config.threads = all().map(|r| r.config.threads).sum();
    config.rate = sum_of_rates(all().map(|r| r.config.rate));
    config.requests = all().map(|r| r.config.requests).sum();
    config.cpus = Vec::new();
    config.idle_conns = all().map(|r| r.config.idle_conns).sum();
    config.slow_conns = all().map(|r| r.config.slow_conns).sum();
    config.source_addrs = Vec::new();
    let target = all()
        .all(|r| r.target == first.target)
        .then(|| first.target.clone())
        .flatten();

    let runs = reports
        .iter()
        .zip(&generators)
        .map(|((name, r), g)| MergedRun {
            file: name.clone(),
            host: g.host.clone(),
            segment: g.segment,
            started_at: g.started_at.clone(),
            offset_s: g.started_unix_s - start,
            connections: r.config.connections,
            requests: r.summary.requests,
            rps: r.summary.rps,
            latency_us: r.latency_us,
            target: r.target.clone(),
            sections: r.extra.clone(),
        })
        .collect();
    let at = |unix_s: f64| {
        rfc3339(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix_s.max(0.0)))
    };

    let mut merged = Report {
        schema_version: first.schema_version,
        tool: first.tool.clone(),
        config,
        target,
        summary,
        latency_us: percentiles(&latency),
        latency_lower_bound: lower_bounds(&latency, unfinished_min_us),
        littles_law,
        latency_uncorrected_us: uncorrected
            .as_ref()
            .filter(|_| uncorrected_known)
            .and_then(percentiles),
        connect_us: connect
            .as_ref()
            .filter(|_| connect_known)
            .and_then(percentiles),
        tls_us: tls.as_ref().and_then(percentiles),
        status_codes,
        errors: error_kinds,
        by_request: super::requests::merge_by_request(
            &reports
                .iter()
                .map(|(name, r)| (name.as_str(), &r.by_request))
                .collect::<Vec<_>>(),
            duration_s,
        )?,
        connections: crate::conns::Connections::merged(
            all().filter_map(|r| r.connections.as_ref()),
            &timeseries,
        ),
        timeseries,
        rate_changes: Vec::new(),
        interrupted: all().any(|r| r.interrupted),
        signal: all().find_map(|r| r.signal.clone()),
        warnings: Vec::new(),
        slowest,
        histogram: encoded(&latency),
        connect_histogram: connect.filter(|_| connect_known).map(|h| encoded(&h)),
        tls_histogram: tls.as_ref().map(encoded),
        latency_uncorrected_histogram: uncorrected
            .filter(|_| uncorrected_known)
            .map(|h| encoded(&h)),
        second_histograms,
        generator: None,
        merged: Some(MergeInfo {
            segments: any_segment.then_some(count),
            missing_segments: missing.clone(),
            forced: !overridden.is_empty(),
            started_at: at(start),
            ended_at: at(data_end),
            runs,
        }),
        extra: serde_json::Map::new(),
    };
    let mut warnings = merged.compute_warnings();
    if counts.len() > 1 {
        let list: Vec<String> = counts.iter().map(usize::to_string).collect();
        warnings.push(format!(
            "the reports split the load into different numbers of segments ({}): missing segments are counted among the {count} of the largest split",
            list.join(", ")
        ));
    }
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|i| format!("{i}/{count}")).collect();
        warnings.push(format!(
            "{} of {count} segments merged: segment {} is missing, so the load was short of what was asked",
            count - missing.len(),
            list.join(", ")
        ));
    }
    if latest_start - start > START_SPREAD_WARN_S {
        warnings.push(format!(
            "the generators started up to {:.1} s apart: they did not load the server together for the whole window (give them one --start-at)",
            latest_start - start
        ));
    }
    if !misaligned.is_empty() {
        let runs: Vec<String> = misaligned
            .iter()
            .map(|(name, off)| format!("{name} {off:.2} s"))
            .collect();
        let worst = misaligned.iter().map(|&(_, off)| off).fold(0.0, f64::max);
        warnings.push(format!(
            "per-second figures are up to {worst:.2} s off: a run's seconds are summed into the merged whole second nearest them, and these started that far from one ({}); give the generators one --start-at",
            runs.join(", ")
        ));
    }
    if all().any(|r| !r.rate_changes.is_empty()) {
        warnings.push(
            "a generator's rate was changed during its run (+/-): the merged report does not list the changes; see each report"
                .into(),
        );
    }
    for m in overridden {
        warnings.push(format!("merged with --force although {m}"));
    }
    for ((name, r), g) in reports.iter().zip(&generators) {
        let who = g.host.clone().unwrap_or_else(|| name.clone());
        for w in &r.warnings {
            let w = format!("{who}: {w}");
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    merged.warnings = warnings;
    Ok(merged)
}

/// The TLS handshake histograms added up, when every report has one (https runs); none
/// when any lacks it (an http run, or a report written before they carried it): n/a rather
/// than the handshakes of some of the generators.
fn merged_tls(reports: &[(String, Report)]) -> Result<Option<Histogram<u64>>, Error> {
    let mut tls = None;
    for (name, r) in reports {
        let Some(h) = &r.tls_histogram else {
            return Ok(None);
        };
        add(&mut tls, decode(name, "TLS handshake", &h.data)?);
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};

    use super::*;
    use crate::plan::Plan;
    use crate::recorder::new_histogram;
    use crate::report::Generator;
    use crate::snapshot::{Counters, RunTotals};
    use crate::threshold::Threshold;

    /// A report of segment `index`/3 that started `offset_s` after 1000 s past the epoch,
    /// with one second of latencies `first` and one of `second`.
    fn report(url: &str, index: usize, offset_s: f64, first: &[u64], second: &[u64]) -> Report {
        let highest = Duration::from_secs(60);
        let mut latency = new_histogram(highest);
        let mut timeseries = Vec::new();
        let mut second_histograms = Vec::new();
        for (i, values) in [first, second].into_iter().enumerate() {
            let mut h = new_histogram(highest);
            for &v in values {
                h.record(v).unwrap();
                latency.record(v).unwrap();
            }
            let mut bytes = Vec::new();
            V2DeflateSerializer::new()
                .serialize(&h, &mut bytes)
                .unwrap();
            second_histograms.push(bytes);
            timeseries.push(TimePoint {
                t_s: (i + 1) as f64,
                partial: false,
                requests: values.len() as u64,
                errors: 0,
                timeouts: 0,
                unfinished: 0,
                retransmits: 0,
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
                outliers: 0,
                generator_lag_us: 0,
                cpu_busy_pct: Vec::new(),
                connections: Default::default(),
            });
        }
        let n = latency.len();
        let counters = Counters {
            successes: n,
            status_codes: vec![(200, n)],
            ..Counters::default()
        };
        let totals = RunTotals {
            duration: Duration::from_secs(2),
            counters,
            latency,
            latency_uncorrected: new_histogram(highest),
            connect: new_histogram(highest),
            tls: new_histogram(highest),
            first_request: new_histogram(highest),
            body: new_histogram(highest),
            timeseries,
            second_histograms,
            slowest: vec![],
            by_request: vec![],
            grace: Duration::ZERO,
            rate_changes: vec![],
            stopped_early: false,
            engine: Default::default(),
            conns_peak: Default::default(),
        };
        let mut plan = Plan::new(url).unwrap();
        plan.connections = 4;
        let mut r = Report::new(&plan, &totals);
        let started = std::time::UNIX_EPOCH + Duration::from_secs_f64(1000.0 + offset_s);
        r.generator = Some(Generator::here(
            &r,
            started,
            Some(Segment { index, count: 3 }),
            None,
        ));
        r
    }

    /// Refused with a message that says `why` and that --force overrides it; merged with it.
    fn refused_unless_forced(inputs: &[(String, Report)], why: &str) -> Report {
        let e = merge(inputs, false).unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
        assert!(e.ends_with("(--force merges them anyway)"), "{e}");
        let m = merge(inputs, true).unwrap();
        assert!(m.merged.as_ref().unwrap().forced);
        m
    }

    fn assert_warning(m: &Report, about: &str) {
        let said = m.warnings.iter().any(|w| w.contains(about));
        assert!(said, "no warning about {about:?}: {:?}", m.warnings);
    }

    fn assert_no_warning(m: &Report, about: &str) {
        let said = m.warnings.iter().any(|w| w.contains(about));
        assert!(!said, "a warning about {about:?}: {:?}", m.warnings);
    }

    fn three() -> Vec<(String, Report)> {
        let url = "http://127.0.0.1:9/";
        vec![
            ("a.json".into(), report(url, 1, 0.0, &[100, 200], &[300])),
            ("b.json".into(), report(url, 2, 0.2, &[150; 50], &[5_000])),
            (
                "c.json".into(),
                report(url, 3, 1.1, &[90_000], &[120, 130, 140]),
            ),
        ]
    }

    #[test]
    fn tls_handshakes_are_added_and_na_unless_every_report_has_them() {
        let mut inputs = three();
        let mut union = new_histogram(Duration::from_secs(60));
        for (i, (_, r)) in inputs.iter_mut().enumerate() {
            let mut h = new_histogram(Duration::from_secs(60));
            h.record(1_000 * (i as u64 + 1)).unwrap();
            union.record(1_000 * (i as u64 + 1)).unwrap();
            r.tls_histogram = Some(encoded(&h));
        }
        let m = merge(&inputs, false).unwrap();
        let tls = m.tls_us.expect("every report has its handshakes");
        assert_eq!(
            (tls.min, tls.p50, tls.max),
            (union.min(), union.value_at_quantile(0.5), union.max())
        );
        assert!(m.tls_histogram.is_some());
        // One report without them (an http run): n/a, not the others' handshakes.
        inputs[1].1.tls_histogram = None;
        let m = merge(&inputs, false).unwrap();
        assert!(m.tls_us.is_none() && m.tls_histogram.is_none());
    }

    #[test]
    fn histograms_are_added_not_averaged() {
        let inputs = three();
        let m = merge(&inputs, false).unwrap();
        let mut union = new_histogram(Duration::from_secs(60));
        for v in [100, 200, 300, 5_000, 90_000, 120, 130, 140] {
            union.record(v).unwrap();
        }
        union.record_n(150, 50).unwrap();
        let p = m.latency_us.unwrap();
        assert_eq!(p.p50, union.value_at_quantile(0.5));
        assert_eq!(p.p99, union.value_at_quantile(0.99));
        assert_eq!(p.max, union.max());
        assert_eq!(m.summary.requests, 58);
        assert_eq!(m.status_codes["200"], 58);
        assert_eq!(m.config.connections, 12);
        // The union of the windows: 1000.0 to 1003.1.
        assert!(
            (m.summary.duration_s - 3.1).abs() < 1e-6,
            "{}",
            m.summary.duration_s
        );
        assert!((m.summary.rps - 58.0 / 3.1).abs() < 1e-6);
        let info = m.merged.as_ref().unwrap();
        assert_eq!(info.segments, Some(3));
        assert!(info.missing_segments.is_empty());
        assert_eq!(info.runs.len(), 3);
        assert_no_warning(&m, "missing");
    }

    #[test]
    fn seconds_are_aligned_on_wall_clock_time_and_summed() {
        let m = merge(&three(), false).unwrap();
        // a and b (offset 0 and 0.2 s) share seconds 1 and 2; c (1.1 s late) is one later.
        let counts: Vec<(f64, u64)> = m.timeseries.iter().map(|p| (p.t_s, p.requests)).collect();
        assert_eq!(counts, vec![(1.0, 52), (2.0, 3), (3.0, 3)]);
        // Second 2 holds 300 (a), 5000 (b) and 90000 (c's first second): its max is c's.
        let second = &m.timeseries[1];
        assert!(
            (89_900..=90_100).contains(&second.max_us),
            "{}",
            second.max_us
        );
        assert_eq!(m.second_histograms.len(), 3);
        let warned = m
            .warnings
            .iter()
            .any(|w| w.contains("started up to 1.1 s apart"));
        assert!(warned, "{:?}", m.warnings);
    }

    #[test]
    fn runs_off_the_whole_seconds_are_named_and_their_slowest_sit_in_their_seconds() {
        use crate::snapshot::SlowRequest;
        let mut inputs = three();
        // b (0.2 s late) and c (1.1 s late) are counted in seconds that began 0.2 s and
        // 0.1 s away from theirs: the page must say so, and date their slowest requests in
        // the seconds that count them.
        let slow = |at_s: f64, latency_us: u64| SlowRequest {
            at_s,
            latency_us,
            ..SlowRequest::default()
        };
        inputs[1].1.slowest = vec![slow(0.9, 5_000), slow(0.3, 200)];
        inputs[2].1.slowest = vec![slow(0.5, 90_000)];
        let m = merge(&inputs, false).unwrap();
        let at: Vec<(u64, f64)> = m.slowest.iter().map(|s| (s.latency_us, s.at_s)).collect();
        // b's 0.9 s is in its first second, summed into second 1 (0..1]; c's 0.5 s is in
        // its first second, summed into second 2 (1..2].
        assert_eq!(at, vec![(90_000, 1.5), (5_000, 0.9)]);
        let second_of = |t: f64| m.timeseries.iter().position(|p| t <= p.t_s).unwrap();
        assert_eq!(second_of(0.9), 0);
        assert_eq!(second_of(1.5), 1);
        assert!(m.timeseries[1].max_us >= 89_000, "c's 90 ms is in second 2");
        let off = m
            .warnings
            .iter()
            .find(|w| w.contains("whole second"))
            .unwrap_or_else(|| panic!("{:?}", m.warnings));
        assert!(off.contains("b.json 0.20 s"), "{off}");
        assert!(!off.contains("a.json"), "{off}");

        // Runs within 0.1 s of the whole seconds: nothing to say.
        let mut inputs = three();
        inputs.truncate(1);
        inputs.push((
            "d.json".into(),
            report("http://127.0.0.1:9/", 2, 1.95, &[1], &[1]),
        ));
        let m = merge(&inputs, false).unwrap();
        assert_no_warning(&m, "whole second");
    }

    #[test]
    fn the_split_rate_adds_back_up_to_the_rate_asked_for() {
        // -q 12345.6 split in 3: the shares' floating-point sum is 12345.599999999999.
        let mut inputs = three();
        for (_, r) in &mut inputs {
            r.config.mode = "open".into();
            r.config.rate = Some(12345.6 / 3.0);
        }
        let m = merge(&inputs, false).unwrap();
        assert_eq!(m.config.rate, Some(12345.6));
        for n in 1..=16 {
            for rate in [0.7, 10.0, 100.0, 1000.0, 3000.0, 12345.6, 1e6] {
                let shares = (0..n).map(|_| Some(rate / n as f64));
                assert_eq!(sum_of_rates(shares), Some(rate), "{rate} in {n}");
            }
        }
        // Closed loop: no rate, and none made up.
        assert_eq!(merge(&three(), false).unwrap().config.rate, None);
    }

    #[test]
    fn forced_segments_of_different_counts_are_counted_against_the_largest() {
        // 1/1 + 2/3 + 3/3: the split in 3 misses its first third (1/1 is another split).
        let mut inputs = three();
        inputs[0].1.generator.as_mut().unwrap().segment = Some(Segment { index: 1, count: 1 });
        let m = refused_unless_forced(&inputs, "split in different ways");
        let info = m.merged.as_ref().unwrap();
        assert_eq!(info.segments, Some(3));
        assert_eq!(info.missing_segments, vec![1]);
        assert_warning(&m, "different numbers of segments (1, 3)");
        // The largest count wherever it comes: 2/3 + 1/2.
        let mut inputs = three();
        inputs.truncate(2);
        inputs[0].1.generator.as_mut().unwrap().segment = Some(Segment { index: 1, count: 2 });
        let m = merge(&inputs, true).unwrap();
        let info = m.merged.as_ref().unwrap();
        assert_eq!(
            (info.segments, info.missing_segments.clone()),
            (Some(3), vec![1, 3])
        );
    }

    #[test]
    fn runs_that_never_loaded_the_server_together_are_refused_unless_forced() {
        // c ran an hour after a and b had ended: no rps over the union of their windows.
        let mut inputs = three();
        inputs[2].1 = report("http://127.0.0.1:9/", 3, 3600.0, &[1], &[1]);
        let m = refused_unless_forced(
            &inputs,
            "c.json began its load window 3598.0 s after a.json ended its own",
        );
        assert_warning(&m, "merged with --force although c.json began");
        // Windows that share only a moment still overlap: a ends at 2.0 s, c starts at 1.9 s.
        let mut inputs = three();
        inputs[2].1 = report("http://127.0.0.1:9/", 3, 1.9, &[1], &[1]);
        assert!(merge(&inputs, false).is_ok());
        inputs[2].1 = report("http://127.0.0.1:9/", 3, 2.0, &[1], &[1]);
        assert!(
            merge(&inputs, false).is_err(),
            "a's window ended as c's began"
        );
    }

    #[test]
    fn one_run_given_twice_is_refused_even_forced() {
        let mut inputs = three();
        inputs[0].1.generator.as_mut().unwrap().host = Some("gen-a".into());
        inputs[2] = ("copy-of-a.json".into(), inputs[0].1.clone());
        for force in [false, true] {
            let e = merge(&inputs, force).unwrap_err().to_string();
            assert!(
                e.contains("copy-of-a.json is a.json again (host gen-a, segment 1/3, started 1970-01-01T00:16:40"),
                "{e}"
            );
            assert!(e.contains("give each generator's report once"), "{e}");
        }
        inputs[2].0 = "a.json".into();
        let e = merge(&inputs, true).unwrap_err().to_string();
        assert!(e.starts_with("a.json is given twice"), "{e}");
        // Said first, even of a report with something else wrong (no segment).
        inputs[0].1.generator.as_mut().unwrap().segment = None;
        inputs[2].1 = inputs[0].1.clone();
        let e = merge(&inputs, false).unwrap_err().to_string();
        assert!(e.starts_with("a.json is given twice"), "{e}");
    }

    #[test]
    fn a_report_that_is_no_segment_is_refused_unless_forced() {
        let mut inputs = three();
        inputs[1].1.generator.as_mut().unwrap().segment = None;
        let m = refused_unless_forced(
            &inputs,
            "b.json is not a segment: it was run without --segment I/N",
        );
        // Forced, it counts as the whole load (1/1).
        assert_eq!(m.summary.requests, 58);
    }

    #[test]
    fn a_partial_last_second_keeps_its_end() {
        let mut inputs = three();
        // c ended 0.5 s into its second second: on the merged clock (+1 s), at 2.5 s.
        let last = inputs[2].1.timeseries.last_mut().unwrap();
        last.partial = true;
        last.t_s = 1.5;
        let m = merge(&inputs, false).unwrap();
        let t: Vec<(f64, bool)> = m.timeseries.iter().map(|p| (p.t_s, p.partial)).collect();
        assert_eq!(t, vec![(1.0, false), (2.0, false), (2.5, true)]);
    }

    #[test]
    fn mismatches_are_refused_unless_forced() {
        let mut inputs = three();
        inputs[2].1 = report("http://127.0.0.1:10/", 3, 0.0, &[1], &[1]);
        let m = refused_unless_forced(&inputs, "c.json and a.json are not parts of one load: url");
        assert!(m
            .warnings
            .iter()
            .any(|w| w.starts_with("merged with --force")));

        // A second run of segment 2/3 (not a copy of b: started 0.1 s later).
        let mut inputs = three();
        inputs[2].1 = report("http://127.0.0.1:9/", 2, 0.3, &[1], &[1]);
        let e = merge(&inputs, false).unwrap_err().to_string();
        assert!(e.contains("segment 2/3 overlaps: b.json, c.json"), "{e}");

        let mut inputs = three();
        inputs[0].1.generator = None;
        assert!(merge(&inputs, true)
            .unwrap_err()
            .to_string()
            .contains("no `generator`"));
        let mut inputs = three();
        inputs[0].1.second_histograms[0] = "not base64!".into();
        let e = merge(&inputs, true).unwrap_err().to_string();
        assert!(e.contains("cannot be decoded"), "{e}");
        assert!(merge(&[], false).is_err());
        let merged = merge(&three(), false).unwrap();
        let e = merge(&[("m.json".into(), merged)], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("merged report already"), "{e}");
    }

    #[test]
    fn a_missing_segment_is_named() {
        let mut inputs = three();
        inputs.remove(1);
        let m = merge(&inputs, false).unwrap();
        assert_eq!(m.merged.as_ref().unwrap().missing_segments, vec![2]);
        assert!(
            m.warnings
                .iter()
                .any(|w| w.starts_with("2 of 3 segments merged: segment 2/3 is missing")),
            "{:?}",
            m.warnings
        );
    }

    #[test]
    fn thresholds_judge_the_merged_result() {
        // Each run alone has a p99 under 100 ms or a max under it; the union's p99 is not.
        let m = merge(&three(), false).unwrap();
        let t = Threshold::parse("max < 50ms").unwrap();
        assert!(!t.check(&m).passed);
        assert!(t.check(&three()[1].1).passed, "b alone passes");
    }
}
