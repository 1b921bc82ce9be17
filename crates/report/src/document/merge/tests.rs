//! The merge checked on reports made here: sums, alignment, refusals and warnings.

use std::time::Duration;

use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};

use super::*;
use crate::document::Generator;
use crate::threshold::Threshold;
use tailscope_loadgen::plan::Plan;
use tailscope_loadgen::recorder::new_histogram;
use tailscope_loadgen::snapshot::{Counters, RunTotals, TimePoint};

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
        timeseries,
        second_histograms,
        ..RunTotals::of_latency(Duration::from_secs(2), counters, latency)
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
    use tailscope_loadgen::snapshot::SlowRequest;
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
    // Forced, the hour between them is no load: the duration and rps are over the union of
    // the windows, a and b's [1000, 1002.2] and c's [4600, 4602], not from first start to
    // last end.
    assert!(
        (m.summary.duration_s - 4.2).abs() < 1e-6,
        "{}",
        m.summary.duration_s
    );
    assert_eq!(m.summary.requests, 3 + 51 + 2);
    assert!(
        (m.summary.rps - 56.0 / 4.2).abs() < 1e-6,
        "{}",
        m.summary.rps
    );
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
    // Forced, it counts as the whole load (1/1), and is not said to split it another way.
    assert_eq!(m.summary.requests, 58);
    assert_no_warning(&m, "different numbers of segments");
    // Plain runs merged with --force: each is not a segment, and none overlaps another (they
    // were told "segment 1/1 overlaps", a segment none of them ran).
    for (_, r) in &mut inputs {
        r.generator.as_mut().unwrap().segment = None;
    }
    let m = merge(&inputs, true).unwrap();
    assert_warning(&m, "a.json is not a segment");
    assert_warning(&m, "c.json is not a segment");
    assert_no_warning(&m, "overlaps");
    assert_eq!(m.summary.requests, 58);
    // Segments 1/1 run twice do overlap: the whole load counted twice.
    for (_, r) in &mut inputs[..2] {
        r.generator.as_mut().unwrap().segment = Some(Segment { index: 1, count: 1 });
    }
    let e = merge(&inputs[..2], false).unwrap_err().to_string();
    assert!(e.contains("segment 1/1 overlaps: a.json, b.json"), "{e}");
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
    let m = refused_unless_forced(&inputs, "a.json and c.json are not parts of one load: url");
    // Settings in words, not Rust's debug form (`duration_s Some(3.0) vs Some(2.0)`).
    let mut inputs = three();
    for (_, r) in &mut inputs {
        r.config.duration_s = Some(3.0);
    }
    inputs[2].1.config.duration_s = Some(2.0);
    inputs[2].1.config.keepalive = false;
    let e = merge(&inputs, false).unwrap_err().to_string();
    assert!(
        e.contains(": keep-alive on vs off, duration 3 s vs 2 s (--force"),
        "{e}"
    );
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
    assert!(
        e.contains("a.json: its second_histograms[0] cannot be decoded"),
        "{e}"
    );
    let mut inputs = three();
    inputs[1].1.histogram.data = "AAAA".into();
    let e = merge(&inputs, true).unwrap_err().to_string();
    assert!(
        e.contains("b.json: its histogram.data cannot be decoded"),
        "{e}"
    );
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

#[test]
fn late_sends_by_cause_are_added_and_na_unless_every_report_has_them() {
    use crate::document::LateSendsByCause;
    let mut inputs = three();
    for (i, (_, r)) in inputs.iter_mut().enumerate() {
        let i = i as u64;
        r.summary.late_sends = 6 * (i + 1);
        r.summary.late_sends_by_cause = Some(LateSendsByCause {
            waited_for_cpu: Some(i + 1),
            no_free_connection: 2 * (i + 1),
            generator: 3 * (i + 1),
        });
    }
    let m = merge(&inputs, false).unwrap();
    assert_eq!(m.summary.late_sends, 36);
    assert_eq!(
        m.summary.late_sends_by_cause,
        Some(LateSendsByCause {
            waited_for_cpu: Some(6),
            no_free_connection: 12,
            generator: 18,
        })
    );
    // One host could not read its run-queue wait: its late sends went to the other causes
    // (its 3 to the generator's own); the CPU wait is the others', and all still add up.
    let third = inputs[2].1.summary.late_sends_by_cause.as_mut().unwrap();
    third.waited_for_cpu = None;
    third.generator += 3;
    let by = merge(&inputs, false)
        .unwrap()
        .summary
        .late_sends_by_cause
        .unwrap();
    assert_eq!(
        (by.waited_for_cpu, by.no_free_connection, by.generator),
        (Some(3), 12, 21)
    );
    assert_eq!(3 + by.no_free_connection + by.generator, 36);
    // One report without causes (closed loop, or an older tailscope): none, since the
    // others' would not add up to late_sends.
    inputs[1].1.summary.late_sends_by_cause = None;
    assert_eq!(
        merge(&inputs, false).unwrap().summary.late_sends_by_cause,
        None
    );
}
