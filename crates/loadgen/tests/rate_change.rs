//! The open-loop schedule: a rate changed during a run (the dashboard's + and -) is what the run
//! then holds, and the segments of one load (`run --segment I/N`) send between each other's slots.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use tailscope_loadgen::{EngineChoice, Pace, Plan, RunControl, Stop};

/// A keep-alive server answering every request at once.
fn server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut pending = Vec::new();
                loop {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        if conn
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

#[test]
fn a_rate_set_during_the_run_is_held_from_then_on_tokio() {
    a_rate_set_during_the_run_is_held_from_then_on(EngineChoice::Tokio);
}

#[test]
fn a_rate_set_during_the_run_is_held_from_then_on_uring() {
    match tailscope_loadgen::resolve_engine(EngineChoice::Uring) {
        Ok(_) => a_rate_set_during_the_run_is_held_from_then_on(EngineChoice::Uring),
        // Said on the process's stderr (the harness captures eprintln! of passing tests) and
        // recorded where `.ci/run` looks for skips (tests/common/mod.rs's `skip`).
        Err(e) => {
            use std::io::Write;
            let line = format!(
                "skipped: rate_change::a_rate_set_during_the_run_is_held_from_then_on_uring: {e}\n"
            );
            let _ = std::io::stderr().write_all(line.as_bytes());
            let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-skips.txt");
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
            {
                let _ = f.write_all(line.as_bytes());
            }
        }
    }
}

fn a_rate_set_during_the_run_is_held_from_then_on(engine: EngineChoice) {
    let mut plan = Plan::new(&server()).unwrap();
    plan.engine = engine;
    plan.connections = 8;
    plan.threads = 2;
    plan.pace = Pace::Rate(200.0);
    plan.stop = Stop::Duration(Duration::from_secs(2));
    let control = RunControl::new();
    let raise = {
        let control = control.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            control.set_rate(1000.0);
        })
    };
    let totals = tailscope_loadgen::run(&plan, &control, |_| {}).unwrap();
    raise.join().unwrap();
    assert_eq!(totals.engine.name, format!("{engine:?}").to_lowercase());
    let requests = totals.counters.requests();
    // 200 req/s for the first second, 1000 req/s for the second: about 1200.
    assert!((1_020..=1_380).contains(&requests), "sent {requests}");
    assert_eq!(control.rate(), Some(1000.0));
    // The change is in the run's record, dated within the run.
    assert_eq!(totals.rate_changes.len(), 1, "{:?}", totals.rate_changes);
    assert_eq!(totals.rate_changes[0].rate, 1000.0);
    let t = totals.rate_changes[0].t_s;
    assert!(t > 0.0 && t < 2.0, "{t}");
    assert!(!totals.stopped_early);
    let seconds: Vec<u64> = totals.timeseries.iter().map(|p| p.requests).collect();
    assert!(seconds.len() >= 2, "{seconds:?}");
    assert!(
        seconds[1] > 3 * seconds[0],
        "the second second ran at the new rate: {seconds:?}"
    );
}

#[test]
fn rates_out_of_range_are_clamped_not_panicked_on() {
    let control = RunControl::new();
    control.set_rate(1e-20);
    assert_eq!(control.rate(), Some(tailscope_loadgen::plan::MIN_RATE));
    control.set_rate(f64::INFINITY);
    assert_eq!(control.rate(), Some(tailscope_loadgen::plan::MAX_RATE));
    control.set_rate(f64::NAN);
    assert_eq!(control.rate(), Some(tailscope_loadgen::plan::MAX_RATE));
}

/// The intended send times of segment `index` of 2 of a 20 req/s open-loop load, run for 1 s,
/// from the slowest requests: each is dated by its slot, or by when it began if that was a
/// little earlier (a connection wakes up to 2 ms before a slot), whatever the box's load.
fn intended_times_of_segment(index: usize) -> Vec<f64> {
    let mut plan = Plan::new(&server()).unwrap();
    plan.engine = EngineChoice::Tokio;
    plan.connections = 2;
    plan.threads = 1;
    plan.slowest = 100;
    plan.pace = Pace::Rate(20.0);
    plan.stop = Stop::Duration(Duration::from_secs(1));
    tailscope_loadgen::segment::Segment { index, count: 2 }
        .apply(&mut plan)
        .unwrap();
    let totals = tailscope_loadgen::run(&plan, &RunControl::new(), |_| {}).unwrap();
    let mut at: Vec<f64> = totals.slowest.iter().map(|s| s.at_s).collect();
    at.sort_by(f64::total_cmp);
    at
}

#[test]
fn segments_started_together_send_between_each_others_slots() {
    // Each segment runs 10 req/s; started at one --start-at, the two must make one 20 req/s
    // schedule (a slot every 50 ms), not two that coincide (2 requests every 100 ms).
    let first = intended_times_of_segment(1);
    let second = intended_times_of_segment(2);
    assert_eq!(first.len(), 10, "{first:?}");
    assert_eq!(second.len(), 10, "{second:?}");
    let mut all: Vec<f64> = first.iter().chain(&second).copied().collect();
    all.sort_by(f64::total_cmp);
    for (k, t) in all.iter().enumerate() {
        let slot = k as f64 * 0.05;
        assert!(
            *t <= slot + 1e-6 && *t > slot - 0.005,
            "slot {k} at {t} s, not {slot} s: segment 1 {first:?}, segment 2 {second:?}"
        );
    }
}

/// With `--stages`, a press (+/-) leaves the stages for the rate pressed from then on, and is
/// recorded in the run's `rate_changes` like any other.
#[test]
fn a_rate_set_during_stages_is_held_and_recorded() {
    let mut plan = Plan::new(&server()).unwrap();
    plan.engine = EngineChoice::Tokio;
    plan.connections = 8;
    plan.threads = 2;
    // A 2 s ramp from 0 to 2,000 req/s: about 2,000 requests without a press.
    plan.stages = tailscope_loadgen::plan::parse_stages("2s:2000").unwrap();
    plan.pace = Pace::Rate(2000.0);
    plan.stop = Stop::Duration(Duration::from_secs(2));
    let control = RunControl::new();
    let press = {
        let control = control.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            control.set_rate(100.0);
        })
    };
    let totals = tailscope_loadgen::run(&plan, &control, |_| {}).unwrap();
    press.join().unwrap();
    assert_eq!(totals.rate_changes.len(), 1, "{:?}", totals.rate_changes);
    assert_eq!(totals.rate_changes[0].rate, 100.0);
    let t = totals.rate_changes[0].t_s;
    assert!(t > 0.3 && t < 1.5, "{t}");
    // The ramp's first 0.5 s plans about 125 requests, then 100 req/s for 1.5 s: about 275,
    // far from the ramp's 2,000.
    let requests = totals.counters.requests();
    assert!((150..=600).contains(&requests), "sent {requests}");
}
