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

/// An `--slo` that is no threshold at all is told what find-max takes, never `rps` or the
/// other `--fail-if` metrics it then refuses (a newcomer was suggested 'rps > 50000').
#[test]
fn a_malformed_slo_suggests_only_what_find_max_takes() {
    assert!(parse_slo("p99<10ms").is_ok());
    for bad in ["nonsense", "p98<5ms", "p99<5", "rps>100"] {
        let e = parse_slo(bad).unwrap_err();
        assert!(e.contains("find-max judges"), "{bad}: {e}");
        assert!(
            !e.contains("rps >") && !e.contains("timeouts"),
            "{bad}: {e}"
        );
    }
}

fn step(rate: f64, p99: f64, call: Call) -> KneeStep {
    KneeStep {
        index: 0,
        phase: "climb".into(),
        offered_rps: rate,
        answered_rps: rate,
        backlog_end: 0,
        unsent_end: 0,
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
        slos: vec!["p99<10ms".into()],
        connections: 1,
        arrival: "uniform".into(),
        step_s: 10.0,
        warmup_s: 2.0,
        precision: 0.05,
        steps: vec![
            step(1000.0, 2000.0, Call::Pass),
            step(4000.0, 50_000.0, Call::Fail),
            step(2000.0, 6000.0, Call::Pass),
            step(3000.0, 14_000.0, Call::Fail),
        ],
        ..KneeReport::default()
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

/// A step's report of `window` seconds whose seconds answered `per_second` each, with the
/// grace period after it answering `grace` more.
fn step_report(window: u64, per_second: u64, grace: u64, connections: usize) -> Report {
    let mut plan = tailscope_loadgen::Plan::new("http://127.0.0.1:9/").unwrap();
    plan.connections = connections;
    let mut latency =
        tailscope_loadgen::recorder::new_histogram(std::time::Duration::from_secs(60));
    latency.record(1000).unwrap();
    let totals = tailscope_loadgen::snapshot::RunTotals::of_latency(
        std::time::Duration::from_secs(window),
        Default::default(),
        latency,
    );
    let mut r = Report::new(&plan, &totals);
    r.summary.duration_s = window as f64;
    r.timeseries = (1..=window)
        .map(|t| tailscope_loadgen::snapshot::TimePoint {
            t_s: t as f64,
            requests: per_second,
            ..Default::default()
        })
        .collect();
    r.timeseries.push(tailscope_loadgen::snapshot::TimePoint {
        t_s: window as f64 + 0.7,
        partial: true,
        requests: grace,
        ..Default::default()
    });
    r
}

#[test]
fn a_step_the_server_fell_behind_in_fails_whatever_its_interval_said() {
    let pass = step(1000.0, 2000.0, Call::Pass).slos;
    // Kept up: 1,000 a second answered within the 4 s, a few in flight at the end.
    let kept = KneeStep::of(
        0,
        "climb",
        1000.0,
        &step_report(4, 1000, 0, 20),
        pass.clone(),
    );
    assert_eq!(
        (kept.answered_rps, kept.backlog_end, kept.unsent_end),
        (1000.0, 0, 0)
    );
    assert_eq!(kept.call, Call::Pass);
    // Fell behind: 4,000 offered, 3,400 answered a second, 2,400 due by the end unanswered,
    // of which at most 20 on the connections: 2,380 never sent (the grace drained them, so
    // the whole step's count would read as if it kept up).
    let behind = KneeStep::of(1, "climb", 4000.0, &step_report(4, 3400, 2400, 20), pass);
    assert_eq!(behind.answered_rps, 3400.0);
    assert_eq!((behind.backlog_end, behind.unsent_end), (2400, 2380));
    assert_eq!(behind.call, Call::Fail);
    assert_eq!(text::verdict(&behind), "FAIL (fell behind)");
    let mut r = KneeReport {
        schema: SCHEMA.into(),
        slos: vec!["p99<10ms".into()],
        connections: 20,
        arrival: "uniform".into(),
        step_s: 4.0,
        warmup_s: 1.0,
        precision: 0.05,
        steps: vec![kept, behind],
        highest_pass_rps: Some(1000.0),
        lowest_fail_rps: Some(4000.0),
        first_fail_step: Some(1),
        lowest_fail_step: Some(1),
        ..KneeReport::default()
    };
    r.find_crossings(&[Threshold::parse("p99<10ms").unwrap()]);
    let text = knee_text(&r);
    assert!(text.contains("2,380 never sent"), "{text}");
    assert!(text.contains("FAIL (fell behind)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["steps"][1]["unsent_end"], 2380);
    let page = knee_page(&r, &[]);
    assert!(page.contains("never sent") && page.contains("2,380"));
}

#[test]
fn a_poisson_count_short_of_its_mean_is_not_a_backlog() {
    let pass = step(1000.0, 2000.0, Call::Pass).slos;
    // 3,000 due at 1,000/s for 3 s, 2,900 answered: 100 short, within what a Poisson count
    // strays by chance (3 sd ≈ 165) beside 16 connections.
    let mut r = step_report(3, 2900 / 3, 0, 16);
    r.config.arrival = Some("poisson".into());
    let s = KneeStep::of(0, "climb", 1000.0, &r, pass.clone());
    assert_eq!((s.unsent_end, s.call), (0, Call::Pass));
    // Uniform arrivals have no such slack: 100 short beyond 16 connections is a backlog.
    r.config.arrival = Some("uniform".into());
    let s = KneeStep::of(0, "climb", 1000.0, &r, pass);
    assert_eq!((s.backlog_end, s.unsent_end), (102, 86));
    assert_eq!(s.call, Call::Fail);
}

#[test]
fn a_fail_where_the_generator_waited_for_a_cpu_on_many_sends_is_unsure() {
    // Fell behind (2,380 never sent of 16,000), but 46 % of the sends waited for a CPU on
    // the generator's side: the step measured the generator, not the server (issue 34,
    // nginx). Before, it was a plain FAIL that decided the knee.
    let pass = step(1000.0, 2000.0, Call::Pass).slos;
    let mut r = step_report(4, 3400, 2400, 20);
    r.summary.requests = 16_000;
    r.summary.late_sends_by_cause = Some(crate::document::LateSendsByCause {
        waited_for_cpu: Some(7_360),
        no_free_connection: 0,
        generator: 0,
    });
    let s = KneeStep::of(1, "climb", 4000.0, &r, pass.clone());
    assert!(generator_bound(&s));
    assert_eq!(s.call, Call::Unsure);
    assert_eq!(text::verdict(&s), "unsure (generator short of CPU)");
    // One send in a hundred waiting for a CPU leaves the fail the server's.
    r.summary
        .late_sends_by_cause
        .as_mut()
        .unwrap()
        .waited_for_cpu = Some(160);
    let s = KneeStep::of(1, "climb", 4000.0, &r, pass);
    assert_eq!(
        (s.call, text::verdict(&s).as_str()),
        (Call::Fail, "FAIL (fell behind)")
    );
}

/// A search that passed 2,000 req/s in 3 s steps, whose confirmation held 2,000 for 10 s only
/// after stepping down to 1,905.
fn confirmed_search() -> KneeReport {
    let hold = |rate: f64, p99: f64, call| KneeStep {
        phase: HOLD.into(),
        ..step(rate, p99, call)
    };
    KneeReport {
        schema: SCHEMA.into(),
        url: "http://127.0.0.1:9/".into(),
        slos: vec!["p99<10ms".into()],
        connections: 16,
        arrival: "uniform".into(),
        step_s: 3.0,
        warmup_s: 0.75,
        precision: 0.05,
        steps: vec![
            step(1000.0, 2000.0, Call::Pass),
            step(2000.0, 6000.0, Call::Pass),
            step(2100.0, 14_000.0, Call::Fail),
        ],
        highest_pass_rps: Some(2000.0),
        lowest_fail_rps: Some(2100.0),
        confirm_s: Some(10.0),
        confirmation: vec![
            hold(2000.0, 12_000.0, Call::Fail),
            hold(1904.8, 8000.0, Call::Pass),
        ],
        confirmed_rps: Some(1904.8),
        ..KneeReport::default()
    }
}

#[test]
fn the_text_says_the_rate_that_holds_beside_the_search_s_and_lists_its_runs() {
    let r = confirmed_search();
    let text = knee_text(&r);
    assert!(
        text.contains(
            "Highest rate that holds for 10 s: 1,905 req/s; the search's highest passing 3 s step: 2,000 req/s"
        ),
        "{text}"
    );
    let runs: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("confirmation (10 s at one rate each"))
        .skip(1)
        .collect();
    assert!(
        runs[0].contains("2,000") && runs[0].ends_with("FAIL"),
        "{text}"
    );
    assert!(
        runs[1].contains("1,905") && runs[1].ends_with("pass"),
        "{text}"
    );
    // The confirmation is not on the curve: the search's 2,000 stays its passing 3 s step.
    assert_eq!(r.curve().len(), 3);
    assert_eq!(r.curve()[1].call, Call::Pass);
    // Read back, the same text.
    let back = KneeReport::from_json(r.to_json().as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(knee_text(&back), text);
}

#[test]
fn a_confirmation_skipped_or_holding_nothing_says_so_and_an_old_document_says_nothing() {
    let mut r = confirmed_search();
    r.confirmed_rps = None;
    r.confirmation.truncate(1);
    let text = knee_text(&r);
    assert!(
        text.contains("No rate held for 10 s (each run missed the SLO or was not shown to meet it: 2,000 req/s); the search's highest passing 3 s step: 2,000 req/s"),
        "{text}"
    );
    assert!(r.to_json().contains("\"confirmed_rps\": null"));
    let mut none = r.clone();
    (none.highest_pass_rps, none.confirmation) = (None, Vec::new());
    let text = knee_text(&none);
    assert!(
        text.contains("Not confirmed: no rate passed the search\n"),
        "{text}"
    );
    // Cut short during its second run: the first is listed, and nothing said to have failed.
    let mut cut = r.clone();
    cut.stopped_because = "cut short (q on the dashboard, Ctrl-C or SIGTERM) during the confirmation's run at 1,905 req/s, which is not counted; the search had ended: …".into();
    let text = knee_text(&cut);
    assert!(
        text.contains(
            "Not confirmed: cut short; the search's highest passing 3 s step: 2,000 req/s"
        ),
        "{text}"
    );
    assert!(!text.contains("No rate held"), "{text}");
    r.confirm_s = Some(0.0);
    r.confirmation.clear();
    let text = knee_text(&r);
    assert!(text.contains("Not confirmed (--confirm 0)"), "{text}");
    // A document from before the confirmation existed has none of its fields.
    let mut old: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    for f in ["confirm_s", "confirmation", "confirmed_rps"] {
        old.as_object_mut().unwrap().remove(f);
    }
    let old = KneeReport::from_json(old.to_string().as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(old.confirm_s, None);
    assert!(!knee_text(&old).contains("onfirm"), "{}", knee_text(&old));
}

#[test]
fn the_page_marks_the_confirmed_rate_and_lists_the_confirmation() {
    let r = confirmed_search();
    let page = knee_page(&r, &r.latency_limits());
    assert!(page.contains("highest rate that holds for 10 s"), "{page}");
    assert!(page.contains("holds for 10 s: 1,905 req/s"), "{page}");
    assert!(
        page.contains("Confirmation: 10 s at one rate each"),
        "{page}"
    );
    let skipped = KneeReport {
        confirm_s: Some(0.0),
        confirmation: Vec::new(),
        confirmed_rps: None,
        ..confirmed_search()
    };
    let page = knee_page(&skipped, &skipped.latency_limits());
    assert!(!page.contains("holds for"), "{page}");
}
