use super::*;
use tailscope_loadgen::snapshot::new_histogram;

fn header() -> Header {
    Header {
        tailscope_version: "0.1.0".into(),
        args: vec![
            "tailscope".into(),
            "run".into(),
            "http://127.0.0.1:1/".into(),
        ],
        url: "http://127.0.0.1:1/".into(),
        measure_started_unix_ms: 1_700_000_000_000,
        target: None,
        cwd: None,
    }
}

fn histogram_bytes(values: &[u64]) -> Vec<u8> {
    use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
    let mut h = new_histogram(std::time::Duration::from_secs(60));
    for v in values {
        h.record(*v).unwrap();
    }
    let mut out = Vec::new();
    V2DeflateSerializer::new().serialize(&h, &mut out).unwrap();
    out
}

fn second(t: u64, requests: u64, slowest: bool) -> (SecondRecord, Vec<u8>) {
    let values: Vec<u64> = (0..requests).map(|i| 100 + i * 7).collect();
    let record = SecondRecord {
        point: TimePoint {
            t_s: t as f64,
            requests,
            p50_us: 100,
            ..TimePoint::default()
        },
        totals: Counters {
            successes: t * requests,
            ..Counters::default()
        },
        slowest: slowest.then(|| {
            vec![SlowRequest {
                at_s: t as f64 - 0.5,
                latency_us: 9_000,
                ..SlowRequest::default()
            }]
        }),
        cpu_busy_pct: vec![12.5, 40.0],
        listen: None,
    };
    (record, histogram_bytes(&values))
}

/// A journal of three seconds; the offset where its last record begins.
fn three_seconds() -> (Vec<u8>, usize) {
    let mut bytes = preamble();
    bytes.extend(header_record(&header()));
    let mut seconds = SecondsEncoder::default();
    for t in 1..=2 {
        let (r, h) = second(t, 50, t == 1);
        bytes.extend(seconds.record(&r, &h));
    }
    let last = bytes.len();
    let (r, h) = second(3, 50, false);
    bytes.extend(seconds.record(&r, &h));
    (bytes, last)
}

#[test]
fn a_whole_journal_reads_back_every_second() {
    let (bytes, _) = three_seconds();
    let j = read(&bytes).unwrap();
    assert_eq!(j.header, header());
    assert_eq!(j.tail, Tail::Clean);
    assert_eq!(j.seconds.len(), 3);
    assert!(j.end.is_none());
    let totals = j.totals();
    assert_eq!(totals.timeseries.len(), 3);
    assert_eq!(
        totals.histograms.latency.len(),
        150,
        "the seconds' histograms summed"
    );
    assert_eq!(totals.counters.successes, 150);
    assert_eq!(totals.slowest.len(), 1, "the last slowest list recorded");
    assert!(totals.stopped_early);
}

/// A kill can land anywhere in the last record's write: every cut reads the records before
/// it, says where the damage starts, and never panics.
#[test]
fn a_journal_cut_at_every_offset_of_its_last_record_reads_what_is_whole() {
    let (bytes, last) = three_seconds();
    for cut in last..bytes.len() {
        let j = read(&bytes[..cut]).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        assert_eq!(j.seconds.len(), 2, "cut at {cut}");
        let expected = if cut == last {
            Tail::Clean
        } else {
            Tail::Damaged {
                offset: last as u64,
                bytes: (cut - last) as u64,
            }
        };
        assert_eq!(j.tail, expected, "cut at {cut}");
    }
    // And a cut anywhere before: no panic, an error or fewer seconds.
    for cut in 0..last {
        if let Ok(j) = read(&bytes[..cut]) {
            assert!(j.seconds.len() <= 2);
        }
    }
}

#[test]
fn a_flipped_byte_ends_the_journal_at_the_damaged_record() {
    let (mut bytes, last) = three_seconds();
    let at = bytes.len() - 3;
    bytes[at] ^= 0x40;
    let j = read(&bytes).unwrap();
    assert_eq!(j.seconds.len(), 2);
    assert!(matches!(j.tail, Tail::Damaged { offset, .. } if offset == last as u64));
}

#[test]
fn what_is_not_a_journal_says_so() {
    assert!(matches!(
        read(b"{\"json\": 1}"),
        Err(JournalError::NotAJournal)
    ));
    let mut other = MAGIC.to_vec();
    other.extend_from_slice(&9u16.to_le_bytes());
    assert!(matches!(read(&other), Err(JournalError::Version(9))));
    assert!(matches!(read(&preamble()), Err(JournalError::NoHeader)));
}

/// A journal of the first format (each second deflated on its own) is refused with a message
/// that names its version and says which tailscope reads it.
#[test]
fn a_version_1_journal_is_refused_with_a_clear_message() {
    let mut old = MAGIC.to_vec();
    old.extend_from_slice(&1u16.to_le_bytes());
    old.extend(header_record(&header()));
    let e = read(&old).unwrap_err();
    assert!(matches!(e, JournalError::Version(1)), "{e}");
    let said = e.to_string();
    assert!(
        said.contains("version 1") && said.contains("reads version 2"),
        "{said}"
    );
}

/// A second's histogram is kept at two significant digits: every count, each value within
/// 1 % of the one recorded; and the seconds' stream makes a repeated second cheap.
#[test]
fn seconds_keep_their_counts_at_two_digits_and_repeats_cost_little() {
    let values: Vec<u64> = (0..3_000u64).map(|i| 1_000 + i * 13).collect();
    let (record, _) = second(1, 1, false);
    let mut seconds = SecondsEncoder::default();
    let mut bytes = preamble();
    bytes.extend(header_record(&header()));
    let first = seconds.record(&record, &histogram_bytes(&values));
    let again = seconds.record(&record, &histogram_bytes(&values));
    assert!(
        again.len() * 4 < first.len(),
        "a repeated second took {} bytes, the first {}",
        again.len(),
        first.len()
    );
    bytes.extend(first);
    bytes.extend(again);
    let j = read(&bytes).unwrap();
    assert_eq!(j.seconds.len(), 2);
    let h = Deserializer::new()
        .deserialize::<u64, _>(&mut j.seconds[1].histogram.as_slice())
        .unwrap();
    assert_eq!(h.len(), 3_000);
    assert_eq!(h.sigfig(), SECOND_DIGITS);
    for q in [0.5, 0.9, 0.99] {
        let exact = values[((values.len() as f64 * q) as usize).min(values.len() - 1)] as f64;
        let read = h.value_at_quantile(q) as f64;
        assert!(
            (read - exact).abs() / exact < 0.011,
            "q{q}: {read} vs {exact}"
        );
    }
}

/// The run's other histograms, written once a minute and at the end, are read back into the
/// totals; the last written is the one kept.
#[test]
fn the_histograms_record_gives_the_totals_their_other_histograms() {
    use tailscope_loadgen::snapshot::Histograms;
    let (mut bytes, _) = three_seconds();
    let mut h = Histograms::new(std::time::Duration::from_secs(60));
    h.connect.record(250).unwrap();
    bytes.extend(histograms_record(2, &h));
    h.connect.record(300).unwrap();
    h.latency_uncorrected.record(90).unwrap();
    bytes.extend(histograms_record(3, &h));
    let j = read(&bytes).unwrap();
    assert_eq!(j.histograms.as_ref().map(|h| h.seconds), Some(3));
    let totals = j.totals();
    assert_eq!(totals.histograms.connect.len(), 2);
    assert_eq!(totals.histograms.connect.max(), 300);
    assert_eq!(totals.histograms.latency_uncorrected.len(), 1);
    assert!(totals.histograms.tls.is_empty());
    // Without one, they are empty (n/a in the report), not made up.
    let (bytes, _) = three_seconds();
    assert!(read(&bytes).unwrap().totals().histograms.connect.is_empty());
}

/// The profile records (once a minute): the last whole one is the journal's, and a reader
/// that meets them between seconds reads the seconds on.
#[test]
fn the_last_profile_record_is_the_journals() {
    let profile = |seconds: u64| ProfileRecord {
        seconds,
        profile: Profile {
            interval_ms: 100,
            duration_s: seconds as f64,
            cpus: Vec::new(),
            target: None,
            generator: Some(tailscope_targets::profile::GeneratorProfile {
                cpu_time_s: seconds as f64 / 2.0,
                cpu_us_per_request: Some(40.0),
            }),
            tcp: Some([("RetransSegs".to_string(), 3)].into()),
            notes: Vec::new(),
            source: None,
            agent: None,
        },
        listen_queue: None,
    };
    let mut bytes = preamble();
    bytes.extend(header_record(&header()));
    let mut seconds = SecondsEncoder::default();
    let (r, h) = second(1, 10, false);
    bytes.extend(seconds.record(&r, &h));
    bytes.extend(profile_record(&profile(1)));
    let (r, h) = second(2, 10, false);
    bytes.extend(seconds.record(&r, &h));
    let last = bytes.len();
    bytes.extend(profile_record(&profile(2)));
    let journal = read(&bytes).unwrap();
    assert_eq!(journal.seconds.len(), 2);
    assert_eq!(journal.profile, Some(profile(2)));
    // Cut within the second profile record: the first is the journal's.
    let journal = read(&bytes[..last + 9]).unwrap();
    assert_eq!(journal.profile, Some(profile(1)));
    assert!(matches!(journal.tail, Tail::Damaged { .. }));
}
