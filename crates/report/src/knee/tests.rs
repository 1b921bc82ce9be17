use super::*;

#[test]
fn wilson_bounds_hold_the_rate_and_stay_in_range() {
    let (lo, hi) = wilson(0, 1000);
    assert!(lo.abs() < 1e-12, "{lo}");
    assert!(hi > 0.0 && hi < 0.005, "{hi}");
    let (lo, hi) = wilson(50, 1000);
    assert!(
        lo < 0.05 && hi > 0.05 && lo > 0.035 && hi < 0.066,
        "{lo} {hi}"
    );
}

#[test]
fn only_percentiles_and_error_rates_below_a_limit_are_slos() {
    for ok in [
        "p99<10ms",
        "p999 <= 50ms",
        "error_rate<0.1%",
        "non2xx_rate<1%",
    ] {
        assert!(check_slo(&Threshold::parse(ok).unwrap()).is_ok(), "{ok}");
    }
    for bad in ["rps>100", "p99>10ms", "max<1s", "mean<1ms", "p99[a]<1ms"] {
        let e = check_slo(&Threshold::parse(bad).unwrap()).unwrap_err();
        assert!(e.contains("find-max judges"), "{bad}: {e}");
    }
}

fn step(rate: f64, p99: f64, call: Call) -> KneeStep {
    KneeStep {
        index: 0,
        phase: "climb".into(),
        offered_rps: rate,
        answered_rps: rate,
        requests: 0,
        errors: 0,
        error_rate: 0.0,
        seconds: 10,
        p50_us: None,
        p99_us: Some(p99 as u64),
        p999_us: None,
        late_no_free_connection: 0,
        late_waited_for_cpu: 0,
        slos: vec![SloCall {
            slo: "p99<10ms".into(),
            estimate: Some(p99),
            low: None,
            high: None,
            method: String::new(),
            call,
        }],
        call,
    }
}

#[test]
fn a_crossing_is_interpolated_between_the_last_pass_and_the_first_fail() {
    let mut r = KneeReport {
        schema: SCHEMA.into(),
        url: String::new(),
        slos: vec!["p99<10ms".into()],
        connections: 1,
        arrival: "uniform".into(),
        step_s: 10.0,
        precision: 0.05,
        steps: vec![
            step(1000.0, 2000.0, Call::Pass),
            step(4000.0, 50_000.0, Call::Fail),
            step(2000.0, 6000.0, Call::Pass),
            step(3000.0, 14_000.0, Call::Fail),
        ],
        highest_pass_rps: None,
        lowest_fail_rps: None,
        crossings: Vec::new(),
        stopped_because: String::new(),
        diagnosis: Vec::new(),
        first_fail_step: None,
    };
    r.find_crossings(&[Threshold::parse("p99<10ms").unwrap()]);
    let c = &r.crossings[0];
    assert_eq!(c.last_pass_rps, Some(2000.0));
    assert_eq!(c.first_fail_rps, Some(3000.0));
    // 6 ms at 2,000/s, 14 ms at 3,000/s: 10 ms halfway.
    assert!((c.at_rps.unwrap() - 2500.0).abs() < 1e-6);
    let text = knee_text(&r);
    assert!(text.contains("crossed at ≈ 2,500 req/s"), "{text}");
}
