//! find-max's text summary.

use std::fmt::Write as _;

use super::fmt_rps as fmt_rate;
use super::{fmt_figure, generator_bound, Call, KneeReport, KneeStep};
use crate::document::fmt_us;

fn word(c: Call) -> &'static str {
    match c {
        Call::Pass => "pass",
        Call::Fail => "FAIL",
        Call::Unsure => "unsure",
    }
}

/// A step's verdict, saying when it failed because the server fell behind, and when it is
/// unsure because the generator was short of CPU.
pub fn verdict(s: &KneeStep) -> String {
    if s.call == Call::Fail && s.slos.iter().all(|c| c.call != Call::Fail) {
        "FAIL (fell behind)".into()
    } else if s.call == Call::Unsure && generator_bound(s) {
        "unsure (generator short of CPU)".into()
    } else {
        word(s.call).into()
    }
}

/// The curve, the result, each SLO's crossing and the first failing step's diagnosis.
pub fn knee_text(r: &KneeReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "find-max: {} — SLO {}, {} connections, {} arrivals, {} s steps (after {} s unmeasured)",
        r.url,
        r.slos.join(" and "),
        r.connections,
        r.arrival,
        r.step_s,
        r.warmup_s
    );
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>8}  verdict",
        "offered/s", "answered/s", "unsent", "p50", "p99", "p99.9", "errors"
    );
    for s in r.curve() {
        step_row(&mut out, s);
    }
    let _ = writeln!(
        out,
        "  (answered: responses within the step; unsent: requests due by its end still waiting for a connection)"
    );
    result(&mut out, r);
    let _ = writeln!(out, "Stopped because: {}", r.stopped_because);
    confirmation(&mut out, r);
    let at = |i: Option<usize>| i.and_then(|i| r.steps.get(i));
    if let Some(s) = at(r.lowest_fail_step) {
        step_block(&mut out, "Step at the lowest failing rate", s, &r.diagnosis);
    }
    if let Some(s) = at(r.first_fail_step).filter(|_| r.first_fail_step != r.lowest_fail_step) {
        step_block(&mut out, "First failing step", s, &r.first_fail_diagnosis);
    }
    out
}

/// The rates found and each SLO's crossing, "unsure" where the steps were.
fn result(out: &mut String, r: &KneeReport) {
    match (r.highest_pass_rps, r.highest_unsure_rps) {
        (Some(p), _) => {
            let _ = writeln!(out, "Highest rate meeting the SLO: {} req/s", fmt_rate(p));
        }
        (None, Some(_)) => {
            let _ = writeln!(
                out,
                "No rate was shown to meet the SLO (not shown to be met: unsure, not missed)"
            );
        }
        (None, None) => {
            let _ = writeln!(out, "No rate met the SLO, not even the lowest tried");
        }
    }
    if let Some(u) = r.highest_unsure_rps {
        let _ = writeln!(
            out,
            "Highest rate unsure:          {} req/s (its figures met every SLO, its intervals did not show it)",
            fmt_rate(u)
        );
    }
    if let Some(f) = r.lowest_fail_rps {
        let capped_by = r
            .curve()
            .into_iter()
            .find(|s| s.offered_rps == f)
            .map(|s| s.call);
        let label = match capped_by {
            Some(Call::Unsure) => "Lowest rate not shown to meet it:",
            _ => "Lowest rate missing it:      ",
        };
        let _ = writeln!(out, "{label} {} req/s", fmt_rate(f));
    }
    for c in &r.crossings {
        let at = match (c.at_rps, c.last_pass_rps, c.first_fail_rps) {
            (Some(at), _, _) => format!("crossed at ≈ {} req/s", fmt_rate(at)),
            (None, Some(p), Some(f)) => {
                format!("crossed between {} and {} req/s", fmt_rate(p), fmt_rate(f))
            }
            (None, Some(_), None) => "held at every rate tried".into(),
            (None, None, Some(_)) => "missed at every rate tried".into(),
            (None, None, None) => "not shown to be met at any rate tried (unsure)".into(),
        };
        let _ = writeln!(out, "  {}: {at}", c.slo);
    }
}

/// The confirmation: the highest rate that held for its length against the search's
/// highest passing step, and each of its runs. Nothing for a document from before it.
fn confirmation(out: &mut String, r: &KneeReport) {
    let Some(len) = r.confirm_s else { return };
    let pass = r
        .highest_pass_rps
        .map_or("none".into(), |p| format!("{} req/s", fmt_rate(p)));
    if len <= 0.0 {
        let _ = writeln!(
            out,
            "Not confirmed (--confirm 0): the search's highest passing {} s step: {pass}; a longer run at it may miss the SLO",
            r.step_s
        );
        return;
    }
    let head = match (r.confirmed_rps, r.confirmation.is_empty()) {
        (Some(c), _) => format!("Highest rate that holds for {len} s: {} req/s", fmt_rate(c)),
        (None, true) if r.highest_pass_rps.is_none() => {
            let _ = writeln!(out, "Not confirmed: no rate passed the search");
            return;
        }
        (None, _) if r.stopped_because.starts_with("cut short") => {
            "Not confirmed: cut short".into()
        }
        (None, true) => "Not confirmed".into(),
        (None, false) => format!(
            "No rate held for {len} s (each run missed the SLO or was not shown to meet it: {} req/s)",
            r.confirmation
                .iter()
                .map(|s| fmt_rate(s.offered_rps))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let _ = writeln!(
        out,
        "{head}; the search's highest passing {} s step: {pass}",
        r.step_s
    );
    if r.confirmation.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  confirmation ({len} s at one rate each, measured from its start as `run -q RATE -z {len}s` measures):"
    );
    for s in &r.confirmation {
        step_row(out, s);
    }
}

/// One step's row of the curve's table (and of the confirmation's).
fn step_row(out: &mut String, s: &KneeStep) {
    let _ = writeln!(
        out,
        "  {:>10} {:>10} {:>8} {:>9} {:>9} {:>9} {:>7.3}%  {}",
        fmt_rate(s.offered_rps),
        fmt_rate(s.answered_rps),
        crate::document::fmt_count(s.unsent_end),
        opt_us(s.p50_us),
        opt_us(s.p99_us),
        opt_us(s.p999_us),
        s.error_rate * 100.0,
        verdict(s)
    );
}

fn opt_us(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".to_string(), fmt_us)
}

/// One step's figures, its SLOs' intervals where they did not pass, and its diagnosis.
fn step_block(out: &mut String, label: &str, s: &KneeStep, diagnosis: &[String]) {
    let _ = writeln!(
        out,
        "{label}: {} req/s offered, {} answered, {} requests due by its end unanswered ({} never sent): {}",
        fmt_rate(s.offered_rps),
        fmt_rate(s.answered_rps),
        crate::document::fmt_count(s.backlog_end),
        crate::document::fmt_count(s.unsent_end),
        verdict(s)
    );
    for c in s.slos.iter().filter(|c| c.call != Call::Pass) {
        let bound = match (c.low, c.high) {
            (Some(l), Some(h)) => format!(
                "{} .. {} ({})",
                fmt_figure(&c.slo, l),
                fmt_figure(&c.slo, h),
                c.method
            ),
            _ => c.method.clone(),
        };
        let _ = writeln!(out, "  {} {}: 95 % interval {bound}", c.slo, word(c.call));
    }
    for d in diagnosis {
        let _ = writeln!(out, "  why: {d}");
    }
}
