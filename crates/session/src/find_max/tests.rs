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
        unsure: None,
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

/// A settled step at `rate` judged on `error_rate<0.1%`: `errors` of `requests`.
fn error_rate_step(rate: f64, requests: u64, errors: u64) -> (KneeStep, Threshold) {
    let slo = Threshold::parse("error_rate<0.1%").unwrap();
    let (low, high) = tailscope_report::knee::wilson(errors, requests);
    let call = if high < slo.limit {
        Call::Pass
    } else if low >= slo.limit {
        Call::Fail
    } else {
        Call::Unsure
    };
    let s = Step {
        rate,
        phase: "climb",
        length: Duration::from_secs(2),
        index: 0,
    };
    let mut step = fake(&s, call, 1.0);
    step.requests = requests;
    step.errors = errors;
    step.slos = vec![tailscope_report::knee::SloCall {
        slo: slo.expr.clone(),
        estimate: Some(errors as f64 / requests as f64),
        low: Some(low),
        high: Some(high),
        method: "Wilson score".into(),
        call,
    }];
    (step, slo)
}

#[test]
fn an_unsure_step_whose_figures_meet_the_slo_does_not_cap_the_search() {
    // 1,000 flawless requests: 0 % .. 0.38 %, unsure of 0.1 %. Before, the search counted it
    // as a fail and stopped at once ("even the lowest rate … missed").
    let (step, slo) = error_rate_step(500.0, 1000, 0);
    assert_eq!(step.call, Call::Unsure);
    assert_eq!(effect(&step, std::slice::from_ref(&slo)), Effect::Unsure);
    let range = config(500.0, 4000.0);
    let mut s = Search {
        pass: None,
        unsure: None,
        fail: None,
    };
    // The search climbs on from the unsure rates until one has requests enough to pass.
    let mut tried = Vec::new();
    while let Ok((rate, phase)) = s.next(&range) {
        assert_eq!(phase, "climb");
        tried.push(rate);
        let (step, _) = error_rate_step(rate, (rate * 2.0) as u64, 0);
        s.record(rate, effect(&step, std::slice::from_ref(&slo)));
    }
    assert_eq!(tried, [500.0, 1000.0, 2000.0, 4000.0]);
    assert_eq!(
        (s.pass, s.unsure, s.fail),
        (Some(4000.0), Some(1000.0), None)
    );
    // An unsure step whose figure misses the limit still caps it; one whose generator
    // waited for a CPU on a large share of its sends caps it only when a figure misses (a
    // fail the CPU wait made unsure), not when its figures met the SLO all the same.
    let (over, _) = error_rate_step(500.0, 1000, 2);
    assert_eq!(
        (over.call, effect(&over, std::slice::from_ref(&slo))),
        (Call::Unsure, Effect::Cap)
    );
    let mut busy = step.clone();
    busy.late_waited_for_cpu = 200;
    assert_eq!(effect(&busy, std::slice::from_ref(&slo)), Effect::Unsure);
    let mut busy = over.clone();
    busy.late_waited_for_cpu = 200;
    assert_eq!(effect(&busy, &[slo]), Effect::Cap);
}

#[test]
fn a_search_never_shown_to_pass_says_unsure_not_missed() {
    let mut s = Search {
        pass: None,
        unsure: Some(500.0),
        fail: None,
    };
    let why = s.next(&config(100.0, 500.0)).unwrap_err();
    assert!(why.contains("unsure (not shown to)"), "{why}");
    s.fail = Some(700.0);
    assert_eq!(
        s.next(&config(100.0, 1000.0)).unwrap(),
        ((500.0f64 * 700.0).sqrt(), "bisect")
    );
}

#[test]
fn the_diagnosis_is_of_the_lowest_failing_rate_and_the_first_is_kept_labelled() {
    let mut knee = KneeReport {
        schema: SCHEMA.into(),
        slos: vec!["p99<100ms".into()],
        connections: 20,
        arrival: "uniform".into(),
        step_s: 4.0,
        warmup_s: 1.0,
        precision: 0.03,
        ..KneeReport::default()
    };
    // The climb overshoots to 4,000 (its first fail), bisection finds 2,378 failing too:
    // gunicorn's search diagnosed 4,000, not the step that bounds the answer.
    for (rate, call, why) in [
        (2000.0, Call::Pass, ""),
        (4000.0, Call::Fail, "at 4,000"),
        (2828.0, Call::Fail, "at 2,828"),
        (2378.0, Call::Fail, "at 2,378"),
        (2327.0, Call::Pass, ""),
    ] {
        let s = Step {
            rate,
            phase: "bisect",
            length: Duration::from_secs(4),
            index: knee.steps.len(),
        };
        let step = fake(&s, call, 1.0);
        if call == Call::Fail {
            note_cap(&mut knee, &step, vec![why.to_string()]);
        }
        knee.steps.push(step);
    }
    assert_eq!(
        (knee.first_fail_step, knee.lowest_fail_step),
        (Some(1), Some(3))
    );
    assert_eq!(knee.diagnosis, ["at 2,378"]);
    assert_eq!(knee.first_fail_diagnosis, ["at 4,000"]);
    let text = tailscope_report::knee::knee_text(&knee);
    let lowest = text
        .find("Step at the lowest failing rate: 2,378 req/s")
        .expect(&text);
    let first = text.find("First failing step: 4,000 req/s").expect(&text);
    assert!(lowest < first && text.contains("why: at 2,378") && text.contains("why: at 4,000"));
}

#[test]
fn nineteen_unsent_of_forty_thousand_is_not_falling_behind_and_the_cpu_wait_comes_first() {
    // nginx's step: 20,000 req/s for 2 s, 19,975 answered a second, 19 never sent, and the
    // generator waited for a CPU on 18,487 of 40,000 sends.
    let s = Step {
        rate: 20_000.0,
        phase: "climb",
        length: Duration::from_secs(2),
        index: 3,
    };
    let mut step = fake(&s, Call::Unsure, 19_975.0 / 20_000.0);
    step.requests = 40_000;
    step.unsent_end = 19;
    step.backlog_end = 69;
    step.late_waited_for_cpu = 18_487;
    let why = diagnose::step_why(&step, 40_000, 50);
    assert!(
        why[0].starts_with("the generator itself waited for a CPU on 18487 sends (46 %)")
            && why[0].contains("measured the generator, not the server")
            && why[0].contains("bounded by the generator"),
        "{why:#?}"
    );
    assert!(
        !why.iter().any(|w| w.contains("it fell behind")),
        "{why:#?}"
    );
    assert!(
        why.iter().any(|w| w.contains("under the one in fifty")),
        "{why:#?}"
    );
    // 1,000 never sent of 40,000 (more than one in fifty), the generator on its CPU: fell
    // behind, said so.
    step.unsent_end = 1000;
    step.late_waited_for_cpu = 0;
    let why = diagnose::step_why(&step, 40_000, 50);
    assert!(why.iter().any(|w| w.contains("it fell behind")), "{why:#?}");
    assert!(!why.iter().any(|w| w.contains("CPU")), "{why:#?}");
}

/// The confirmation's runs when its holds give `calls` in turn, from 2,000 req/s at 5 %
/// precision: (rate, phase, length s, verdict) each, and the rate confirmed.
fn confirmed(
    calls: &[Call],
    stop_during: Option<usize>,
) -> (Vec<(f64, String, u64, Call)>, confirm::Confirmation) {
    let mut script = calls.iter();
    let ran = std::cell::Cell::new(0usize);
    let found = confirm::confirm(
        2000.0,
        0.05,
        Duration::from_secs(10),
        7,
        &|| stop_during.is_some_and(|n| ran.get() > n),
        &|_| {},
        &mut |s| {
            assert_eq!(s.index, 7 + ran.get(), "the indices follow the search's");
            assert_eq!(
                s.warmup(),
                Duration::ZERO,
                "measured from its start, as run"
            );
            ran.set(ran.get() + 1);
            let call = *script.next().expect("more holds than scripted");
            Ok(fake(&s, call, 1.0))
        },
    )
    .unwrap();
    let runs = found
        .steps
        .iter()
        .map(|s| (s.offered_rps, s.phase.clone(), s.seconds as u64, s.call))
        .collect();
    (runs, found)
}

fn hold(rate: f64, call: Call) -> (f64, String, u64, Call) {
    (rate, "hold".to_string(), 10, call)
}

#[test]
fn the_rate_found_that_holds_is_confirmed_at_once() {
    let (runs, found) = confirmed(&[Call::Pass], None);
    assert_eq!(runs, [hold(2000.0, Call::Pass)]);
    assert_eq!((found.confirmed, found.cut_at), (Some(2000.0), None));
}

#[test]
fn a_rate_that_does_not_hold_steps_down_by_the_precision_until_one_does() {
    // A fail, then an unsure run (not shown to hold), then a pass.
    let (runs, found) = confirmed(&[Call::Fail, Call::Unsure, Call::Pass], None);
    let down = 2000.0 / 1.05;
    let twice = down / 1.05;
    assert_eq!(
        runs,
        [
            hold(2000.0, Call::Fail),
            hold(down, Call::Unsure),
            hold(twice, Call::Pass)
        ]
    );
    assert_eq!(found.confirmed, Some(twice));
}

#[test]
fn the_confirmation_is_bounded_and_holding_nothing_confirms_nothing() {
    // Never a pass: MAX_HOLDS runs, then it gives up (the script panics on a fifth run).
    let calls = [Call::Fail; tailscope_report::knee::MAX_HOLDS];
    let (runs, found) = confirmed(&calls, None);
    assert_eq!(runs.len(), tailscope_report::knee::MAX_HOLDS);
    assert!(runs.windows(2).all(|w| w[1].0 < w[0].0), "{runs:?}");
    assert_eq!(found.confirmed, None);
}

#[test]
fn a_stop_during_a_hold_ends_the_confirmation_without_counting_that_run() {
    // Stopped during the second run: the first (a fail) is kept, the cut one is not.
    let (runs, found) = confirmed(&[Call::Fail, Call::Pass], Some(1));
    assert_eq!(runs, [hold(2000.0, Call::Fail)]);
    assert_eq!(found.confirmed, None);
    assert_eq!(found.cut_at, Some(2000.0 / 1.05));
}

#[test]
fn only_the_confirmation_runs_without_a_warm_up() {
    let s = |phase| Step {
        rate: 1.0,
        phase,
        length: Duration::from_secs(4),
        index: 0,
    };
    assert_eq!(s("bisect").warmup(), Duration::from_secs(1));
    assert_eq!(s("confirm").warmup(), Duration::from_secs(1));
    assert_eq!(s("hold").warmup(), Duration::ZERO);
}
