//! Which reports may be merged: refusals (a run given twice, an older or merged report, a
//! different load, overlapping segments, runs that never loaded the server together) and the
//! segments and load windows the merge is built on.

use std::collections::BTreeMap;

use super::super::{Config, Generator, Report};
use tailscope_loadgen::error::Error;
use tailscope_loadgen::segment::Segment;

/// The reports admitted to a merge, and what the checks learnt of them.
pub(super) struct Admitted<'a> {
    /// The first report: the others are checked against it.
    pub first: &'a Report,
    /// Each report's generator section, in the order given.
    pub generators: Vec<&'a Generator>,
    /// The mismatches `--force` overrode.
    pub overridden: Vec<String>,
    /// The segment count of the finest split.
    pub count: usize,
    /// Every segment count the reports have, sorted.
    pub counts: Vec<usize>,
    /// Segments of `1..=count` no report was given for.
    pub missing: Vec<usize>,
    /// Whether any report is a segment.
    pub any_segment: bool,
    /// The earliest load window's start (Unix s).
    pub start: f64,
    /// The latest load window's end (Unix s).
    pub window_end: f64,
    /// The latest load window's start (Unix s).
    pub latest_start: f64,
    /// How long some run was loading the server (s): the length of the union of the load
    /// windows, which is `window_end - start` when they overlap, and leaves out the gaps
    /// between windows that do not (merged with `--force`).
    pub loaded_s: f64,
    /// The latest end of any run's data, grace included (Unix s).
    pub data_end: f64,
}

/// Checks `reports` for a merge (see [`super::merge`] for what is refused).
pub(super) fn admit(reports: &[(String, Report)], force: bool) -> Result<Admitted<'_>, Error> {
    let Some((first_name, first)) = reports.first() else {
        return Err(Error::Merge(
            "no report to merge: give the JSON reports of `tailscope run --json`".into(),
        ));
    };
    refuse_duplicates(reports)?;
    let mut overridden = Vec::new();
    let generators = check_each(reports, first_name, first, force, &mut overridden)?;
    let segments = check_segments(reports, &generators, force, &mut overridden)?;
    let windows = check_windows(reports, &generators, force, &mut overridden)?;
    Ok(Admitted {
        first,
        generators,
        overridden,
        count: segments.count,
        counts: segments.counts,
        missing: segments.missing,
        any_segment: segments.any_segment,
        start: windows.start,
        window_end: windows.window_end,
        latest_start: windows.latest_start,
        loaded_s: windows.loaded_s,
        data_end: windows.data_end,
    })
}

/// Refuses one run given twice.
fn refuse_duplicates(reports: &[(String, Report)]) -> Result<(), Error> {
    let refuse = |m: String| Err(Error::Merge(m));
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
    Ok(())
}

/// Checks each report on its own and against the first (merged already, schema, generator
/// section, histograms, segment, settings); each one's generator section, in order.
fn check_each<'a>(
    reports: &'a [(String, Report)],
    first_name: &str,
    first: &Report,
    force: bool,
    overridden: &mut Vec<String>,
) -> Result<Vec<&'a Generator>, Error> {
    let refuse = |m: String| Err(Error::Merge(m));
    let mut generators: Vec<&Generator> = Vec::with_capacity(reports.len());
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
        if let Some(field) = r.undecodable_histogram() {
            return refuse(format!(
                "{name}: its {field} cannot be decoded (a damaged or edited report)"
            ));
        }
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
            overridable(m, force, overridden)?;
        }
        let diff = differences(&first.config, &r.config);
        if !diff.is_empty() {
            let m = format!(
                "{first_name} and {name} are not parts of one load: {}",
                diff.join(", ")
            );
            overridable(m, force, overridden)?;
        }
        generators.push(g);
    }

    Ok(generators)
}

/// How the reports split the load into segments.
struct Segments {
    count: usize,
    counts: Vec<usize>,
    missing: Vec<usize>,
    any_segment: bool,
}

/// Checks the reports' segments (split one way, none run twice) and finds the missing ones.
fn check_segments(
    reports: &[(String, Report)],
    generators: &[&Generator],
    force: bool,
    overridden: &mut Vec<String>,
) -> Result<Segments, Error> {
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
    // Only reports run as segments split the load: a plain one (1/1 by --force's reading
    // only) beside 3 segments was said to split it "into 1 and 3".
    let mut counts: Vec<usize> = generators
        .iter()
        .filter_map(|g| g.segment.map(|s| s.count))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    // The segments the reports ran, for the missing ones; and who ran each, for overlaps. A
    // report without --segment is the whole load only by --force's reading: it was told "is
    // not a segment" already, and it overlaps no one's segment (forced plain runs were told
    // "segment 1/1 overlaps", a segment none of them ran), nor splits the load another way.
    let ran: std::collections::BTreeSet<Segment> = segs.iter().copied().collect();
    let mut by_segment: BTreeMap<Segment, Vec<&str>> = BTreeMap::new();
    let segments = || {
        reports
            .iter()
            .zip(generators)
            .filter_map(|((name, _), g)| Some((name.as_str(), g.segment?)))
    };
    let first_segment = segments().next();
    for (name, s) in segments() {
        if let Some((first_name, first)) = first_segment.filter(|(_, f)| f.count != s.count) {
            let m = format!(
                "{name} is segment {s} but {first_name} is segment {first}: the load was split in different ways"
            );
            overridable(m, force, overridden)?;
        }
        by_segment.entry(s).or_default().push(name);
    }
    for (s, names) in &by_segment {
        if names.len() > 1 {
            let m = format!(
                "segment {s} overlaps: {} all ran it (a load counted twice)",
                names.join(", ")
            );
            overridable(m, force, overridden)?;
        }
    }
    let missing: Vec<usize> = (1..=count)
        .filter(|&index| !ran.contains(&Segment { index, count }))
        .collect();
    let any_segment = generators.iter().any(|g| g.segment.is_some());

    Ok(Segments {
        count,
        counts,
        missing,
        any_segment,
    })
}

/// The runs' load windows on wall-clock time (see [`Admitted`]).
struct Windows {
    start: f64,
    window_end: f64,
    latest_start: f64,
    loaded_s: f64,
    data_end: f64,
}

/// Places the runs' load windows on wall-clock time and checks that they overlap.
fn check_windows(
    reports: &[(String, Report)],
    generators: &[&Generator],
    force: bool,
    overridden: &mut Vec<String>,
) -> Result<Windows, Error> {
    // Each run's load window [start, start + duration] on wall-clock time, and their union.
    let windows: Vec<(f64, f64)> = reports
        .iter()
        .zip(generators)
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
        overridable(m, force, overridden)?;
    }

    Ok(Windows {
        start,
        window_end,
        latest_start,
        loaded_s: union_length(&windows),
        data_end,
    })
}

/// The length of the union of the intervals `[start, end]`: time covered by any of them.
fn union_length(windows: &[(f64, f64)]) -> f64 {
    let mut sorted = windows.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut covering: Option<(f64, f64)> = None;
    for (start, end) in sorted {
        covering = match covering {
            Some((from, to)) if start <= to => Some((from, to.max(end))),
            done => {
                total += done.map_or(0.0, |(from, to)| to - from);
                Some((start, end))
            }
        };
    }
    total + covering.map_or(0.0, |(from, to)| to - from)
}

/// The settings that must be equal for reports to be parts of one load: everything but the
/// shares (`connections`, `threads`, `rate`, `requests`) and the pinning.
fn differences(a: &Config, b: &Config) -> Vec<String> {
    // In words a person reads (`duration 3 s vs 2 s`), not Rust's debug form.
    let seconds = |s: f64| format!("{s} s");
    let fields = |c: &Config| {
        [
            ("url", c.url.clone()),
            ("method", c.method.clone()),
            ("mode", c.mode.clone()),
            ("pipeline", c.pipeline.to_string()),
            ("keep-alive", if c.keepalive { "on" } else { "off" }.into()),
            ("duration", c.duration_s.map_or("none".into(), seconds)),
            ("warm-up", seconds(c.warmup_s)),
            ("timeout", seconds(c.timeout_s)),
            ("connect timeout", seconds(c.connect_timeout_s)),
            (
                "stop",
                match c.requests {
                    Some(_) => "after -n requests".into(),
                    None => "after a duration".into(),
                },
            ),
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
