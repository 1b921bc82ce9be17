//! The search's arithmetic and its settling of a rate's verdict, on scripted steps.

use super::*;

fn config(start: f64, max: f64) -> Range {
    Range {
        start_rate: start,
        max_rate: max,
        precision: 0.05,
    }
}

/// The rates the search tries against a server whose SLO holds below `knee`.
fn tried(knee: f64, c: &Range) -> (Vec<f64>, String) {
    let mut s = Search {
        pass: None,
        fail: None,
    };
    let mut rates = Vec::new();
    loop {
        match s.next(c) {
            Ok((r, _)) => {
                rates.push(r);
                if r < knee {
                    s.pass = Some(s.pass.map_or(r, |p: f64| p.max(r)));
                } else {
                    s.fail = Some(s.fail.map_or(r, |f: f64| f.min(r)));
                }
            }
            Err(why) => return (rates, why),
        }
        assert!(rates.len() < 50, "{rates:?}");
    }
}

#[test]
fn the_search_climbs_then_bisects_to_the_precision() {
    let c = config(100.0, 1e6);
    let (rates, why) = tried(4000.0, &c);
    assert_eq!(
        &rates[..7],
        &[100.0, 200.0, 400.0, 800.0, 1600.0, 3200.0, 6400.0]
    );
    let pass = rates
        .iter()
        .copied()
        .filter(|r| *r < 4000.0)
        .fold(0.0, f64::max);
    let fail = rates
        .iter()
        .copied()
        .filter(|r| *r >= 4000.0)
        .fold(f64::MAX, f64::min);
    assert!(
        fail <= pass * 1.05 && pass < 4000.0 && pass > 3800.0,
        "{rates:?}"
    );
    assert!(why.contains("within 5 %"), "{why}");
}

#[test]
fn the_search_stops_at_the_ends() {
    let (rates, why) = tried(50.0, &config(100.0, 1e6));
    assert_eq!(rates, vec![100.0]);
    assert!(why.contains("even the lowest"), "{why}");
    let (rates, why) = tried(1e9, &config(100.0, 500.0));
    assert_eq!(rates, vec![100.0, 200.0, 400.0, 500.0]);
    assert!(why.contains("--max-rate"), "{why}");
}

/// A step with this verdict, its server answering `answered` of the offered rate.
fn fake(s: &Step, call: Call, answered: f64) -> KneeStep {
    KneeStep {
        index: s.index,
        phase: s.phase.into(),
        offered_rps: s.rate,
        answered_rps: answered * s.rate,
        backlog_end: 0,
        unsent_end: 0,
        requests: 1000,
        errors: 0,
        error_rate: 0.0,
        seconds: s.length.as_secs() as usize,
        p50_us: None,
        p99_us: None,
        p999_us: None,
        late_no_free_connection: 0,
        late_waited_for_cpu: 0,
        slos: Vec::new(),
        call,
    }
}

/// The steps `settle` runs for one rate when its runs give `calls` in turn: (phase,
/// length s, verdict) each; the last decides.
fn settled(calls: &[(Call, f64)]) -> Vec<(String, u64, Call)> {
    let mut script = calls.iter();
    let first = Step {
        rate: 1000.0,
        phase: "bisect",
        length: Duration::from_secs(3),
        index: 4,
    };
    let (steps, ran) = settle(first, &|| false, &|_| {}, &mut |s| {
        let (call, answered) = *script.next().expect("more steps than scripted");
        Ok((fake(&s, call, answered), s.index))
    })
    .unwrap();
    assert_eq!(
        ran,
        4 + steps.len() - 1,
        "the last run's report is returned"
    );
    assert!(script.next().is_none(), "fewer steps than scripted");
    steps
        .iter()
        .map(|s| (s.phase.clone(), s.seconds as u64, s.call))
        .collect()
}

fn phase(p: &str, s: u64, c: Call) -> (String, u64, Call) {
    (p.to_string(), s, c)
}

#[test]
fn a_pass_and_a_fail_beyond_doubt_are_believed_at_once() {
    use Call::*;
    assert_eq!(settled(&[(Pass, 1.0)]), [phase("bisect", 3, Pass)]);
    // The server answered 80 % of the offered rate: no stall of the machine does that.
    assert_eq!(settled(&[(Fail, 0.8)]), [phase("bisect", 3, Fail)]);
}

#[test]
fn a_fail_where_the_generator_waited_for_a_cpu_is_confirmed() {
    let s = Step {
        rate: 1000.0,
        phase: "bisect",
        length: Duration::from_secs(3),
        index: 0,
    };
    let mut step = fake(&s, Call::Fail, 0.8);
    assert!(failed_beyond_doubt(&step));
    step.late_waited_for_cpu = 11;
    assert!(!failed_beyond_doubt(&step), "the machine, not the server");
}

#[test]
fn a_close_fail_is_confirmed_two_of_three() {
    use Call::*;
    assert_eq!(
        settled(&[(Fail, 0.97), (Fail, 0.97)]),
        [phase("bisect", 3, Fail), phase("confirm", 3, Fail)]
    );
    // One noisy fail between two passes: the rate passes.
    assert_eq!(
        settled(&[(Fail, 0.97), (Pass, 1.0), (Pass, 1.0)]),
        [
            phase("bisect", 3, Fail),
            phase("confirm", 3, Pass),
            phase("confirm", 3, Pass)
        ]
    );
    // An unsure confirmation is not a pass.
    assert_eq!(
        settled(&[(Fail, 0.97), (Pass, 1.0), (Unsure, 1.0)]).last(),
        Some(&phase("confirm", 3, Unsure))
    );
}

#[test]
fn an_unsure_step_runs_twice_as_long_and_its_fail_is_confirmed_as_long() {
    use Call::*;
    assert_eq!(
        settled(&[(Unsure, 1.0), (Unsure, 1.0)]),
        [phase("bisect", 3, Unsure), phase("repeat", 6, Unsure)]
    );
    assert_eq!(
        settled(&[(Unsure, 1.0), (Fail, 0.95), (Fail, 0.95)]),
        [
            phase("bisect", 3, Unsure),
            phase("repeat", 6, Fail),
            phase("confirm", 6, Fail)
        ]
    );
}

#[test]
fn the_warm_up_is_a_quarter_of_the_step_within_bounds() {
    assert_eq!(warmup_for(Duration::from_secs(4)), Duration::from_secs(1));
    assert_eq!(
        warmup_for(Duration::from_secs(1)),
        Duration::from_millis(500)
    );
    assert_eq!(warmup_for(Duration::from_secs(60)), Duration::from_secs(2));
}
