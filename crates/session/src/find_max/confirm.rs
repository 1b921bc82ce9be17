//! find-max's confirmation: the rate found must hold when a user runs at it.
//!
//! The search's steps are short (3 s in the tests) and each starts after an unmeasured
//! warm-up; a user runs `run -q RATE -z 10s`, measured from its first request. A longer
//! window holds more of the tail: Python's http.server (a listen backlog of 5) drops SYNs in
//! bursts, and their 1 s retries land in a 10 s run more often than in a 3 s step, so a step
//! can pass at a rate a 10 s run at it misses. After the search, the highest passing rate
//! is therefore held for `--confirm` (10 s by default), with no warm-up, and judged by the
//! same rule as a step (every SLO's interval must meet it); a run that misses (or is not
//! shown to meet) the SLO steps the rate down by the search's precision and holds again, at
//! most [`MAX_HOLDS`] runs in all, so the confirmation adds at most `MAX_HOLDS` × `--confirm`
//! to the search.

use std::time::Duration;

use anyhow::Result;
use tailscope_loadgen::RunControl;
use tailscope_report::knee::{fmt_rps, Call, KneeReport, KneeStep, HOLD, MAX_HOLDS};
use tailscope_targets::Target;

use super::live::Live;
use super::{run_step, FindMaxConfig, Step};

/// Holds the rate found for `--confirm` (unless it is 0, the search was stopped, or no rate
/// passed), stepping down until one holds ([`confirm`]); fills the report's
/// confirmation.
pub(super) fn confirm_found(
    c: &FindMaxConfig,
    knee: &mut KneeReport,
    target: Option<&Target>,
    control: &RunControl,
    live: &Live,
) -> Result<()> {
    knee.confirm_s = Some(c.confirm.as_secs_f64());
    let Some(start) = knee.highest_pass_rps else {
        return Ok(());
    };
    if c.confirm.is_zero() || control.is_stopped() {
        return Ok(());
    }
    let found = confirm(
        start,
        c.precision,
        c.confirm,
        knee.steps.len(),
        &|| control.is_stopped(),
        &|line| live.progress(line),
        &mut |s| run_step(c, target, control, live, s).map(|(step, _)| step),
    )?;
    if let Some(rate) = found.cut_at {
        knee.stopped_because = format!(
            "cut short (q on the dashboard, Ctrl-C or SIGTERM) during the confirmation's run at {} req/s, which is not counted; the search had ended: {}",
            fmt_rps(rate),
            knee.stopped_because
        );
    }
    knee.confirmation = found.steps;
    knee.confirmed_rps = found.confirmed;
    Ok(())
}

/// What the confirmation found.
#[derive(Debug, Default)]
pub(super) struct Confirmation {
    /// Its runs, in the order they ran (a run cut short by a stop is not among them).
    pub steps: Vec<KneeStep>,
    /// The rate whose run passed, if one did.
    pub confirmed: Option<f64>,
    /// The rate whose run a stop cut short, if one did.
    pub cut_at: Option<f64>,
}

/// The rate held after a run at `rate` did not hold: lower by the search's precision, the
/// resolution the search claimed for its answer.
pub(super) fn step_down(rate: f64, precision: f64) -> f64 {
    rate / (1.0 + precision)
}

/// Holds `start` (the search's highest passing rate) for `length`, stepping down by
/// `precision` while a run does not pass, at most [`MAX_HOLDS`] runs; their indices follow
/// `first_index`. `run` runs one step and judges it; a stop ends the confirmation, and the
/// run it cut is not counted.
pub(super) fn confirm(
    start: f64,
    precision: f64,
    length: Duration,
    first_index: usize,
    stopped: &dyn Fn() -> bool,
    say: &dyn Fn(String),
    run: &mut dyn FnMut(Step) -> Result<KneeStep>,
) -> Result<Confirmation> {
    let mut found = Confirmation::default();
    let mut rate = start;
    say(format!(
        "tailscope: confirming: holding {} req/s for {}, measured from its start (as run -q {:.0} -z {})",
        fmt_rps(rate),
        humantime::format_duration(length),
        rate,
        humantime::format_duration(length)
    ));
    for i in 0..MAX_HOLDS {
        if stopped() {
            break;
        }
        let step = run(Step {
            rate,
            phase: HOLD,
            length,
            index: first_index + i,
        })?;
        if stopped() {
            found.cut_at = Some(rate);
            break;
        }
        let held = step.call == Call::Pass;
        found.steps.push(step);
        if held {
            found.confirmed = Some(rate);
            break;
        }
        let next = step_down(rate, precision);
        if i + 1 < MAX_HOLDS {
            say(format!(
                "tailscope: {} req/s did not hold for {}: holding {} req/s",
                fmt_rps(rate),
                humantime::format_duration(length),
                fmt_rps(next)
            ));
        }
        rate = next;
    }
    Ok(found)
}
