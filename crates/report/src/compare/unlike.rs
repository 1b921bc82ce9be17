//! The settings that make two reports unlike: runs of another loop, rate, connection count,
//! pipelining depth, protocol, engine, target or length measure their settings as much as
//! the server, so `compare` names them beside the table and refuses to gate on them unless
//! told to.

use crate::document::Report;

use crate::suite::SuiteReport;
use crate::AnyReport;

/// Durations further apart than this factor are unlike: a 10 s run beside a 60 s one has
/// another warm-up share, another chance of a rare stall in its tail.
pub const DURATION_FACTOR: f64 = 2.0;

/// The settings in which `base` and `new` differ where that makes their figures unlike, each
/// as `what BASE vs NEW` (`loop closed vs open at 20000 req/s`); empty for like reports (and
/// reports of different kinds, which are not compared at all).
pub fn unlike(base: &AnyReport, new: &AnyReport) -> Vec<String> {
    match (base, new) {
        (AnyReport::Run(b), AnyReport::Run(n)) => unlike_runs(b, n),
        (AnyReport::Suite(b), AnyReport::Suite(n)) => unlike_suites(b, n),
        _ => Vec::new(),
    }
}

/// The unlike settings, said once above the change table (markdown); empty for like reports.
pub fn note(unlike: &[String]) -> String {
    if unlike.is_empty() {
        return String::new();
    }
    format!(
        "**Unlike settings:** {}. The changes below measure these settings as much as the server.\n\n",
        unlike.join("; ")
    )
}

/// Pushes `what x vs y` when `x` and `y` differ.
fn differ(out: &mut Vec<String>, what: &str, x: String, y: String) {
    if x != y {
        out.push(format!("{what} {x} vs {y}"));
    }
}

/// `10 s vs 60 s` when the two durations are further apart than [`DURATION_FACTOR`].
fn durations(out: &mut Vec<String>, a: Option<f64>, b: Option<f64>) {
    if let (Some(a), Some(b)) = (a, b) {
        if a > 0.0 && b > 0.0 && a.max(b) / a.min(b) > DURATION_FACTOR {
            out.push(format!("duration {a} s vs {b} s"));
        }
    }
}

/// The loop as a person says it: `closed`, `open at 20000 req/s`.
fn pace(rate: Option<f64>) -> String {
    rate.map_or("closed".into(), |r| format!("open at {r} req/s"))
}

/// What a run loaded: the server tailscope launched (by kind and name, with the URL's path:
/// its port is a new free one each run), else the URL.
fn target(r: &Report) -> String {
    match &r.target {
        Some(t) if t.kind != "external" => {
            let url = &r.config.url;
            let after_scheme = url.find("://").map_or(0, |i| i + 3);
            let path = url[after_scheme..]
                .find('/')
                .map_or("/", |i| &url[after_scheme + i..]);
            format!("{} ({}) {path}", t.name, t.kind)
        }
        _ => r.config.url.clone(),
    }
}

fn unlike_runs(base: &Report, new: &Report) -> Vec<String> {
    let (a, b) = (&base.config, &new.config);
    let mut out = Vec::new();
    let loop_of = |c: &crate::document::Config| match c.mode.as_str() {
        "open" => pace(c.rate),
        mode => mode.to_string(),
    };
    differ(&mut out, "loop", loop_of(a), loop_of(b));
    differ(&mut out, "target", target(base), target(new));
    differ(
        &mut out,
        "connections",
        a.connections.to_string(),
        b.connections.to_string(),
    );
    differ(
        &mut out,
        "pipeline",
        a.pipeline.to_string(),
        b.pipeline.to_string(),
    );
    differ(&mut out, "protocol", a.protocol.clone(), b.protocol.clone());
    // An older report names no engine: not a difference anyone can see.
    if !a.engine.name.is_empty() && !b.engine.name.is_empty() {
        differ(
            &mut out,
            "engine",
            a.engine.name.clone(),
            b.engine.name.clone(),
        );
    }
    durations(&mut out, a.duration_s, b.duration_s);
    // A run cut short (a signal, a kill: a newcomer's SIGTERM-ed side was compared unsaid)
    // measured another length than it asked for, and maybe another phase of the server.
    differ(&mut out, "length", length(base), length(new));
    out
}

/// `whole`, or `cut short at 6.95 s of 20 s (SIGTERM)` (no signal: the dashboard's stop, or a
/// kill the journal's rebuild found).
fn length(r: &Report) -> String {
    if !r.interrupted && r.signal.is_none() {
        return "whole".into();
    }
    let of = r
        .config
        .duration_s
        .map_or(String::new(), |d| format!(" of {d} s"));
    let how = r
        .signal
        .as_ref()
        .map_or(String::new(), |s| format!(" ({s})"));
    format!("cut short at {:.2} s{of}{how}", r.summary.duration_s)
}

fn unlike_suites(base: &SuiteReport, new: &SuiteReport) -> Vec<String> {
    let (a, b) = (&base.load, &new.load);
    let mut out = Vec::new();
    // A field either suite lacks (a hand-made or older report) is no difference seen.
    if let (Some(x), Some(y)) = (a.rate, b.rate) {
        differ(&mut out, "loop", pace(x), pace(y));
    }
    for (key, x, y) in [
        ("connections", a.connections, b.connections),
        ("pipeline", a.pipeline, b.pipeline),
    ] {
        if let (Some(x), Some(y)) = (x, y) {
            differ(&mut out, key, x.to_string(), y.to_string());
        }
    }
    durations(&mut out, a.duration_s.flatten(), b.duration_s.flatten());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mutate: impl Fn(&mut crate::document::Config)) -> AnyReport {
        let mut r = crate::run_page::tests::report_of(10, Vec::new());
        r.config.url = "http://127.0.0.1:9/plaintext".into();
        r.config.connections = 50;
        r.config.duration_s = Some(10.0);
        mutate(&mut r.config);
        AnyReport::Run(Box::new(r))
    }

    #[test]
    fn unlike_runs_are_named_and_like_ones_are_not() {
        let base = run(|_| {});
        assert_eq!(
            unlike(&base, &run(|c| c.duration_s = Some(15.0))),
            Vec::<String>::new()
        );
        let open = run(|c| {
            c.mode = "open".into();
            c.rate = Some(20000.0);
            c.connections = 64;
            c.pipeline = 16;
            c.duration_s = Some(60.0);
        });
        assert_eq!(
            unlike(&base, &open),
            [
                "loop closed vs open at 20000 req/s",
                "connections 50 vs 64",
                "pipeline 1 vs 16",
                "duration 10 s vs 60 s"
            ]
        );
        let other = run(|c| {
            c.url = "http://127.0.0.1:9/json".into();
            c.protocol = "h2c".into();
        });
        assert_eq!(
            unlike(&base, &other),
            [
                "target http://127.0.0.1:9/plaintext vs http://127.0.0.1:9/json",
                "protocol http/1.1 vs h2c"
            ]
        );
        assert!(note(&unlike(&base, &open)).starts_with("**Unlike settings:** loop closed vs"));
        let AnyReport::Run(mut cut) = run(|_| {}) else {
            unreachable!()
        };
        cut.signal = Some("SIGTERM".into());
        cut.summary.duration_s = 6.95;
        assert_eq!(
            unlike(&base, &AnyReport::Run(cut)),
            ["length whole vs cut short at 6.95 s of 10 s (SIGTERM)"]
        );
        assert_eq!(note(&[]), "");
    }
}
