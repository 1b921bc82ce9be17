use super::*;
use statrs::distribution::{ContinuousCDF, Exp};

/// Every intended time of `schedules` (all workers) before `until` seconds.
fn times(schedules: &mut [Schedule], until: f64) -> Vec<f64> {
    let mut all = Vec::new();
    for s in schedules {
        while let Some(t) = s.peek() {
            if t >= until {
                break;
            }
            all.push(t);
            s.advance();
        }
    }
    all.sort_by(f64::total_cmp);
    all
}

/// `threads` workers with equal shares and interleaved phases, as `worker_specs` makes them.
fn workers(arrival: Arrival, rate: f64, stages: &[(f64, f64)], threads: usize) -> Vec<Schedule> {
    let share = 1.0 / threads as f64;
    (0..threads)
        .map(|i| {
            Schedule::new(
                arrival,
                rate,
                stages,
                share,
                i as f64 * share,
                0,
                i as u64 + 1,
            )
        })
        .collect()
}

fn per_second(times: &[f64], seconds: usize) -> Vec<u64> {
    let mut counts = vec![0; seconds];
    for &t in times {
        if let Some(c) = counts.get_mut(t.floor() as usize) {
            *c += 1;
        }
    }
    counts
}

/// The planned number of requests in second `s`: the integral of the stages' rate over it.
fn planned_in_second(stages: &[LoadStage], s: usize) -> f64 {
    let steps = 1000;
    (0..steps)
        .map(|i| planned_at(stages, 0.0, s as f64 + (i as f64 + 0.5) / steps as f64))
        .sum::<f64>()
        / steps as f64
}

#[test]
fn stages_give_the_planned_rate_in_every_second_within_two_percent() {
    for spec in [
        "10s:1000,5s:1000,10s:5000,5s:5000",
        "3s:20000,4s:500,3s:500",
        "5s:200,5s:3000,5s:0,5s:800",
        "2s:100000,3s:100000,5s:1000",
    ] {
        let stages = parse_stages(spec).unwrap();
        let secs: Vec<(f64, f64)> = stages
            .iter()
            .map(|s| match s.target {
                StageTarget::Rate(r) => (s.duration.as_secs_f64(), r),
                StageTarget::Connections(_) => unreachable!(),
            })
            .collect();
        let total = stages_duration(&stages).as_secs_f64();
        for threads in [1, 3] {
            let mut w = workers(Arrival::Uniform, 0.0, &secs, threads);
            let counts = per_second(&times(&mut w, total), total as usize);
            for (s, &got) in counts.iter().enumerate() {
                let planned = planned_in_second(&stages, s);
                // 2 %, or one request per worker where a second plans very few.
                let slack = (planned * 0.02).max(threads as f64);
                assert!(
                    (got as f64 - planned).abs() <= slack,
                    "{spec} ({threads} workers), second {s}: {got} sent, {planned:.1} planned"
                );
            }
        }
    }
}

#[test]
fn a_constant_rate_gives_the_same_slots_as_before_stages() {
    let mut s = Schedule::new(Arrival::Uniform, 1000.0, &[], 0.5, 0.25, 0, 1);
    for k in 0..10 {
        let want = (k as f64 + 0.25) / 500.0;
        assert!((s.peek().unwrap() - want).abs() < 1e-12);
        s.advance();
    }
}

/// The Kolmogorov distribution's tail: P(K > x), by its alternating series.
fn kolmogorov_tail(x: f64) -> f64 {
    if x < 0.2 {
        return 1.0;
    }
    let sum: f64 = (1..=100)
        .map(|k| {
            let k = k as f64;
            let sign = if k as u64 % 2 == 1 { 1.0 } else { -1.0 };
            sign * (-2.0 * k * k * x * x).exp()
        })
        .sum();
    (2.0 * sum).clamp(0.0, 1.0)
}

/// The one-sample Kolmogorov–Smirnov p-value of `sample` against `cdf` (Stephens' finite-n
/// correction of the statistic).
fn ks_p_value(sample: &mut [f64], cdf: impl Fn(f64) -> f64) -> f64 {
    sample.sort_by(f64::total_cmp);
    let n = sample.len() as f64;
    let d = sample
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).max((i + 1) as f64 / n - f)
        })
        .fold(0.0, f64::max);
    kolmogorov_tail(d * (n.sqrt() + 0.12 + 0.11 / n.sqrt()))
}

fn gaps(times: &[f64]) -> Vec<f64> {
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn poisson_gaps_pass_a_kolmogorov_smirnov_test_against_the_exponential() {
    for rate in [1_000.0, 50_000.0] {
        // The run's schedule: several workers merged, as the server sees them.
        let mut w = workers(Arrival::Poisson, rate, &[], 4);
        let until = 5_000.0 / rate;
        let mut g = gaps(&times(&mut w, until));
        assert!(g.len() > 4_500, "{} gaps at {rate}", g.len());
        let exp = Exp::new(rate).unwrap();
        let p = ks_p_value(&mut g, |x| exp.cdf(x));
        assert!(p > 0.01, "Poisson gaps at {rate}/s: KS p = {p}");
    }
}

#[test]
fn the_kolmogorov_smirnov_check_refuses_uniform_gaps() {
    // The test above could not fail if the check passed anything: metronome gaps fail it.
    let mut w = workers(Arrival::Uniform, 1_000.0, &[], 4);
    let mut g = gaps(&times(&mut w, 5.0));
    let exp = Exp::new(1_000.0).unwrap();
    assert!(ks_p_value(&mut g, |x| exp.cdf(x)) < 1e-6);
}

#[test]
fn poisson_arrivals_follow_a_ramp() {
    let stages = [(10.0, 10_000.0)];
    let mut w = workers(Arrival::Poisson, 0.0, &stages, 2);
    let counts = per_second(&times(&mut w, 10.0), 10);
    for (s, &got) in counts.iter().enumerate() {
        let planned = 1000.0 * (s as f64 + 0.5);
        // Poisson counts: within 5 standard deviations.
        assert!(
            (got as f64 - planned).abs() < 5.0 * planned.sqrt(),
            "second {s}: {got}, planned {planned}"
        );
    }
}

#[test]
fn bursts_land_as_planned() {
    let arrival = parse_burst("100/250ms").unwrap();
    // 100 split over 3 workers as 34, 33, 33: every burst is 100 at the same instant.
    let mut w: Vec<Schedule> = [34, 33, 33]
        .iter()
        .map(|&n| Schedule::new(arrival, 400.0, &[], 1.0 / 3.0, 0.0, n, 0))
        .collect();
    let all = times(&mut w, 1.0);
    assert_eq!(all.len(), 400);
    for (j, burst) in all.chunks(100).enumerate() {
        assert!(burst.iter().all(|&t| (t - j as f64 * 0.25).abs() < 1e-12));
    }
}

#[test]
fn a_rate_change_starts_a_constant_schedule_at_the_next_slot() {
    let stages = [(10.0, 1000.0)];
    let mut s = Schedule::new(Arrival::Uniform, 0.0, &stages, 1.0, 0.0, 0, 0);
    while s.peek().unwrap() < 2.0 {
        s.advance();
    }
    let at = s.peek().unwrap();
    s.set_rate(50.0);
    assert_eq!(s.peek(), Some(at));
    s.advance();
    assert!((s.peek().unwrap() - at - 0.02).abs() < 1e-9);
}

#[test]
fn bad_shapes_are_refused_with_a_reason() {
    for (bad, says) in [
        ("10s", "no target"),
        ("10s:fast", "not a rate"),
        ("ten:100", "ten"),
        ("10s:100,10s:c=5", "mixes"),
        ("10s:0", "nothing would be sent"),
        ("10s:c=0", "1..="),
        ("0s:100", "at least 1ms"),
    ] {
        let e = parse_stages(bad).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
    assert!(parse_arrival("foo")
        .unwrap_err()
        .contains("uniform or poisson"));
    assert_eq!(parse_arrival("Poisson"), Ok(Arrival::Poisson));
    for bad in ["0/1s", "10", "x/1s", "10/0s", "10/fast"] {
        assert!(parse_burst(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_stages("30s:c=64,30s:c=1024").unwrap()[1].target,
        StageTarget::Connections(1024)
    );
}

#[test]
fn connection_stages_plan_when_each_connection_sends() {
    let stages = parse_stages("2s:c=4,2s:c=4,2s:c=1").unwrap();
    let at = |g, t| connection_active_from(&stages, g, t);
    assert_eq!(at(0, 0.0), Some(1e-9));
    // Connection 3 joins when the ramp 0 → 4 over 2 s passes 3, at 1.5 s.
    assert!((at(3, 0.0).unwrap() - 1.5).abs() < 1e-6);
    assert_eq!(at(3, 3.0), Some(3.0));
    // The ramp 4 → 1 from 4 s drops below 3 at 4.67 s: connection 3 is done from there.
    assert_eq!(at(3, 5.0), None);
    assert_eq!(at(1, 5.0), Some(5.0));
    // Past the end the last target holds: one connection.
    assert_eq!(at(0, 9.0), Some(9.0));
    assert_eq!(at(1, 9.0), None);
}
