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
    for t in 1..=2 {
        let (r, h) = second(t, 50, t == 1);
        bytes.extend(second_record(&r, &h));
    }
    let last = bytes.len();
    let (r, h) = second(3, 50, false);
    bytes.extend(second_record(&r, &h));
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
