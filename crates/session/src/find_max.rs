//! `tailscope find-max`: the highest open-loop rate at which every SLO holds (issue 34).
//!
//! The search climbs geometrically (×2 from the start rate) until a step fails or the
//! highest rate allowed passes, then bisects (at the geometric middle) between the highest
//! pass and the lowest fail until they are within the precision. Each step is an open-loop
//! run of its own at one rate, profiled like `run`; its verdict on each SLO rests on an
//! interval ([`tailscope_report::knee`]); an unsure step is run once more, twice as long
//! (more seconds, a narrower interval), and, still unsure, counted as not shown to pass. A
//! failing step is confirmed by running it again (see [`settle`]) unless it failed beyond
//! doubt, and each step starts with an unmeasured warm-up ([`warmup_for`]). A
//! step whose server fell behind (sends still waiting for a connection at its end) fails
//! whatever its interval says: its latencies grow with its length. The target, when
//! launched, is launched once for the search. After the search, the rate found is held for
//! `--confirm` and stepped down until it holds ([`confirm`]).

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use tailscope_loadgen::{Pace, Plan, RunControl, Stop};
use tailscope_report::document::{Report, TargetInfo};
use tailscope_report::knee::{
    check_slo, fmt_rps, generator_bound, judge, knee_page, knee_text, meets, requests_to_bound,
    Call, KneeReport, KneeStep, HOLD, SCHEMA,
};
use tailscope_report::threshold::Threshold;
use tailscope_report::{GeneratorClock, RunParts};
use tailscope_targets::cpus::format_list;
use tailscope_targets::Target;

mod confirm;
mod diagnose;
mod live;

use crate::profiler::RunProfiler;
use crate::run::{trust_target, RunConfig};
use crate::signals::{signal_name, signalled, watch_signals};
use crate::{Outcome, UsageError};
use diagnose::diagnose;
use live::Live;

/// What `find-max` needs besides a run's configuration (whose plan's pace and length it sets
/// per step).
pub struct FindMaxConfig {
    /// The target, the request, the connections, the outputs (`--json`, `--html`).
    pub run: RunConfig,
    /// What must hold at the rate found.
    pub slos: Vec<Threshold>,
    /// The first rate tried.
    pub start_rate: f64,
    /// The highest rate tried.
    pub max_rate: f64,
    /// Each step's length.
    pub step: Duration,
    /// Stop once the lowest fail is within this fraction above the highest pass.
    pub precision: f64,
    /// How long the rate found is held after the search to confirm it (zero: not
    /// confirmed); a run that does not pass steps it down by the precision.
    pub confirm: Duration,
}

impl FindMaxConfig {
    /// Checks the search's own settings (usage errors, before anything starts).
    pub fn validate(&self) -> Result<(), UsageError> {
        if self.slos.is_empty() {
            return Err(UsageError("find-max needs an SLO: --slo 'p99<10ms'".into()));
        }
        for s in &self.slos {
            check_slo(s).map_err(UsageError)?;
        }
        if !self.confirm.is_zero() && self.confirm < MIN_CONFIRM {
            return Err(UsageError(format!(
                "--confirm {}: give 0 (no confirmation) or {} or more",
                humantime::format_duration(self.confirm),
                humantime::format_duration(MIN_CONFIRM)
            )));
        }
        if self.start_rate > self.max_rate {
            return Err(UsageError(format!(
                "--start-rate {} is above --max-rate {}",
                self.start_rate, self.max_rate
            )));
        }
        Ok(())
    }
}

/// The shortest confirmation: a run of a second or more.
pub const MIN_CONFIRM: Duration = Duration::from_secs(1);

/// The rates the search may try and when it is close enough.
#[derive(Debug, Clone, Copy)]
struct Range {
    start_rate: f64,
    max_rate: f64,
    precision: f64,
}

/// Where the search stands.
struct Search {
    /// The highest rate shown to meet every SLO.
    pass: Option<f64>,
    /// The highest rate whose step was unsure while its figures met every SLO: not
    /// evidence of a fail (a few hundred flawless requests cannot bound an error rate under
    /// 0.1 %), so the search climbs on from it, but not a pass either.
    unsure: Option<f64>,
    /// The lowest rate that failed, or was not shown to pass while a figure missed its SLO
    /// (a generator short of CPU makes a fail unsure): it caps the search.
    fail: Option<f64>,
}

/// What a settled step does to the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Effect {
    Pass,
    /// Unsure, its figures meeting every SLO: climb on from it.
    Unsure,
    /// A fail, or an unsure step whose figures miss an SLO (among them a fail the
    /// generator's CPU wait made unsure): the rates above it are not tried.
    Cap,
}

/// How a settled step moves the search.
fn effect(step: &KneeStep, slos: &[Threshold]) -> Effect {
    match step.call {
        Call::Pass => Effect::Pass,
        Call::Fail => Effect::Cap,
        Call::Unsure => {
            let figures_meet = slos.len() == step.slos.len()
                && slos
                    .iter()
                    .zip(&step.slos)
                    .all(|(t, c)| c.estimate.is_some_and(|e| meets(t, e)));
            if figures_meet {
                Effect::Unsure
            } else {
                Effect::Cap
            }
        }
    }
}

impl Search {
    /// Records a settled step at `rate`.
    fn record(&mut self, rate: f64, e: Effect) {
        let (slot, higher) = match e {
            Effect::Pass => (&mut self.pass, true),
            Effect::Unsure => (&mut self.unsure, true),
            Effect::Cap => (&mut self.fail, false),
        };
        *slot = Some(slot.map_or(rate, |r| if higher { r.max(rate) } else { r.min(rate) }));
    }

    /// The next rate to try, and its phase; none when the search is over (with why). The
    /// search climbs and bisects from the highest rate that did not cap it (a pass, or an
    /// unsure step whose figures met every SLO); the answer stays the highest pass.
    fn next(&self, c: &Range) -> Result<(f64, &'static str), String> {
        let low = match (self.pass, self.unsure) {
            (Some(p), Some(u)) => Some(p.max(u)),
            (p, u) => p.or(u),
        };
        let shown = |r: f64| {
            if self.pass == Some(r) {
                "met the SLO"
            } else {
                "met the SLO on its figures but was unsure (not shown to)"
            }
        };
        match (low, self.fail) {
            (None, None) => Ok((c.start_rate, "climb")),
            (None, Some(f)) => Err(format!(
                "even the lowest rate tried, {} req/s, missed the SLO",
                fmt_rps(f)
            )),
            (Some(p), None) if p >= c.max_rate => Err(format!(
                "the highest rate allowed, {} req/s (--max-rate), {}: the knee is above it",
                fmt_rps(p),
                shown(p)
            )),
            (Some(p), None) => Ok(((p * 2.0).min(c.max_rate), "climb")),
            (Some(p), Some(f)) if f <= p * (1.0 + c.precision) => Err(format!(
                "the highest rate that met the SLO{} and the lowest that did not are within {:.0} % of each other",
                if self.pass == Some(p) { "" } else { " on its figures (unsure)" },
                c.precision * 100.0
            )),
            (Some(p), Some(f)) => Ok(((p * f).sqrt(), "bisect")),
        }
    }
}

/// Runs the search and reports. Returns how the process should exit: 0 when a rate met
/// every SLO (shown by its intervals, or only by its figures: see the end), 99 when even
/// the lowest did not.
pub fn find_max(mut config: FindMaxConfig) -> Result<Outcome> {
    config.validate()?;
    let control = RunControl::new();
    watch_signals(&control)?;
    let mut target = match &config.run.launch {
        Some(launch) => {
            let t =
                Target::launch_unless_stopped(&launch.spec, &launch.server_cpus, &control.flag())
                    .with_context(|| format!("the {} target could not start", launch.spec.kind()))?;
            let url = format!("{}{}", t.base_url(), launch.path);
            config
                .run
                .plan
                .set_url(&url)
                .context("the launched target's URL")?;
            trust_target(&mut config.run.plan, &t);
            say!(
                "tailscope: {} ready at {} (pid {}), server on CPU {}",
                t.name(),
                t.base_url(),
                t.pid(),
                format_list(t.server_cpus())
            );
            Some(t)
        }
        None => None,
    };
    // The dashboard takes the terminal after the target's start-up line, and gives it back
    // before the report is printed.
    let live = Live::start(&config, target.as_ref(), &control);
    let result = search(&config, target.as_ref(), &control, &live);
    live.finish();
    if let Some(t) = target.take() {
        t.stop();
    }
    let knee = result?;
    let text = knee_text(&knee);
    print!("{text}");
    if let Some(path) = &config.run.json {
        std::fs::write(path, knee.to_json())
            .with_context(|| format!("cannot write {}", path.display()))?;
        say!("tailscope: wrote {}", path.display());
    }
    if let Some(path) = &config.run.html {
        let limits = tailscope_report::knee::latency_limits(config.slos.iter().cloned());
        std::fs::write(path, knee_page(&knee, &limits))
            .with_context(|| format!("cannot write {}", path.display()))?;
        say!("tailscope: wrote {}", path.display());
    }
    // Cut short (q on the dashboard, Ctrl-C, SIGTERM): 130 as `run`'s, whatever was found.
    if signalled() || control.is_stopped() {
        return Ok(Outcome::Interrupted);
    }
    // A rate whose figures met every SLO but whose intervals were too wide to show it is not
    // a fail: `run --fail-if` judges the bare figures, and would pass it. 99 is kept for a
    // search where even the lowest rate missed (or was not shown to meet) an SLO on its
    // figures; the report says when no rate was *shown* to meet it.
    // A confirmation that ran and held no rate: no rate is known to hold as a user runs it.
    let none_held = !knee.confirmation.is_empty() && knee.confirmed_rps.is_none();
    Ok(match (knee.highest_pass_rps, knee.highest_unsure_rps) {
        (None, None) => Outcome::ThresholdFailed,
        _ if none_held => Outcome::ThresholdFailed,
        _ => Outcome::Success,
    })
}

fn search(
    c: &FindMaxConfig,
    target: Option<&Target>,
    control: &RunControl,
    live: &Live,
) -> Result<KneeReport> {
    let plan = &c.run.plan;
    let mut knee = KneeReport {
        schema: SCHEMA.into(),
        url: plan.url.clone(),
        slos: c.slos.iter().map(|s| s.expr.clone()).collect(),
        connections: plan.connections,
        arrival: plan.arrival.name().into(),
        step_s: c.step.as_secs_f64(),
        warmup_s: warmup_for(c.step).as_secs_f64(),
        precision: c.precision,
        ..KneeReport::default()
    };
    let mut state = Search {
        pass: None,
        unsure: None,
        fail: None,
    };
    let range = Range {
        start_rate: c.start_rate,
        max_rate: c.max_rate,
        precision: c.precision,
    };
    loop {
        let (rate, phase) = match state.next(&range) {
            Ok(next) => next,
            Err(why) => {
                knee.stopped_because = why;
                break;
            }
        };
        let first = Step {
            rate,
            phase,
            length: c.step,
            index: knee.steps.len(),
        };
        let (steps, report) = settle(
            first,
            &|| control.is_stopped(),
            &|line| live.progress(line),
            &mut |s| run_step(c, target, control, live, s),
        )?;
        let (mut earlier, step) = {
            let mut steps = steps;
            let last = steps.pop().expect("settle runs at least one step");
            (steps, last)
        };
        knee.steps.append(&mut earlier);
        if control.is_stopped() {
            // The step running when the search was stopped ended early: its verdict rests
            // on part of a step, and is not counted.
            knee.stopped_because = format!(
                "cut short (q on the dashboard, Ctrl-C or SIGTERM) during a step at {} req/s, which is not counted: the rates above are what the search had found",
                fmt_rps(rate)
            );
            break;
        }
        let e = effect(&step, &c.slos);
        if e == Effect::Cap {
            note_cap(&mut knee, &step, diagnose(&step, &report, c));
        }
        state.record(rate, e);
        knee.steps.push(step);
        live.bounds(state.pass, state.fail);
    }
    if knee.first_fail_step == knee.lowest_fail_step {
        knee.first_fail_diagnosis.clear();
    }
    if !control.is_stopped() {
        if let Some(why) = why_unshown(&knee, &state, c) {
            knee.stopped_because = why;
        }
        if let Some(s) = knee.lowest_fail_step.map(|i| &knee.steps[i]) {
            if generator_bound(s) {
                knee.stopped_because.push_str(&format!(
                    "; the rate found is bounded by the generator, not the server: at {} req/s it waited for a CPU on {:.0} % of its sends",
                    fmt_rps(s.offered_rps),
                    100.0 * s.late_waited_for_cpu as f64 / s.requests.max(1) as f64
                ));
            }
        }
    }
    knee.highest_pass_rps = state.pass;
    knee.highest_unsure_rps = state.unsure.filter(|u| state.pass.is_none_or(|p| *u > p));
    knee.lowest_fail_rps = state.fail;
    knee.find_crossings(&c.slos);
    confirm::confirm_found(c, &mut knee, target, control, live)?;
    Ok(knee)
}

/// Records a step that caps the search: the first such step, and the one at the lowest
/// capping rate (the one that bounds the answer), each with its diagnosis.
fn note_cap(knee: &mut KneeReport, step: &KneeStep, diagnosis: Vec<String>) {
    let at = knee.steps.len();
    if knee.first_fail_step.is_none() {
        knee.first_fail_step = Some(at);
        knee.first_fail_diagnosis = diagnosis.clone();
    }
    let lower = knee
        .lowest_fail_step
        .is_none_or(|i| step.offered_rps < knee.steps[i].offered_rps);
    if lower {
        knee.lowest_fail_step = Some(at);
        knee.diagnosis = diagnosis;
    }
}

/// Why no rate was shown to meet the SLO, when none was and no step missed it outright:
/// the steps were unsure, and how many requests (or seconds) a step needs to be sure.
fn why_unshown(knee: &KneeReport, state: &Search, c: &FindMaxConfig) -> Option<String> {
    if state.pass.is_some() {
        return None;
    }
    let highest = state.unsure.or(state.fail)?;
    let step = knee
        .curve()
        .into_iter()
        .find(|s| s.offered_rps == highest)?;
    if step.call != Call::Unsure {
        return None;
    }
    let needs: Vec<String> = c
        .slos
        .iter()
        .zip(&step.slos)
        .filter(|(_, call)| call.call == Call::Unsure)
        .map(|(t, _)| match requests_to_bound(t) {
            Some(n) => format!(
                "{}: with no failures a step needs at least {} requests to bound it under the limit (about 3.84 / limit), {} req/s for {} gave {}",
                t.expr,
                tailscope_report::document::fmt_count(n),
                fmt_rps(step.offered_rps),
                humantime::format_duration(Duration::from_secs(step.seconds as u64)),
                tailscope_report::document::fmt_count(step.requests)
            ),
            None => format!("{}: its interval straddled the limit (a longer --step narrows it)", t.expr),
        })
        .collect();
    Some(format!(
        "no rate was shown to meet the SLO (not shown to be met, not missed): up to {} req/s the steps were unsure{}{}",
        fmt_rps(highest),
        if needs.is_empty() { "" } else { ": " },
        needs.join("; ")
    ))
}

/// The steps one rate needs before its verdict can be believed; the last one decides.
///
/// - An *unsure* step (its interval straddles a limit) runs again, twice as long: more
///   seconds, a narrower interval. Still unsure, it counts as not shown to pass.
/// - A *failing* step is confirmed before the search believes it, unless it failed beyond
///   doubt (the server answered under nine tenths of the offered rate: no hiccup does that):
///   one stall of the machine in a short step near the knee fails it, and a believed fail
///   caps the search for good (issue 34 saw Python's http.server pass at 1.25 × the rate
///   found). It runs again at the same length; a second fail (or unsure) is believed, a pass
///   makes it one each and a third run decides.
fn settle<R>(
    first: Step,
    stopped: &dyn Fn() -> bool,
    say: &dyn Fn(String),
    run: &mut dyn FnMut(Step) -> Result<(KneeStep, R)>,
) -> Result<(Vec<KneeStep>, R)> {
    let Step {
        rate,
        length,
        mut index,
        ..
    } = first;
    let (mut step, mut report) = run(first)?;
    let mut steps = Vec::new();
    let mut again = |phase: &'static str, length: Duration, steps: &mut Vec<KneeStep>, last| {
        steps.push(last);
        index += 1;
        run(Step {
            rate,
            phase,
            length,
            index,
        })
    };
    if step.call == Call::Unsure && !stopped() {
        say(format!(
            "tailscope: step at {} req/s unsure: running it again, twice as long",
            fmt_rps(rate)
        ));
        (step, report) = again("repeat", length * 2, &mut steps, step)?;
    }
    let length = if steps.is_empty() { length } else { length * 2 };
    let mut fails = usize::from(step.call != Call::Pass);
    let mut passes = usize::from(step.call == Call::Pass);
    if step.call == Call::Fail && !failed_beyond_doubt(&step) {
        while fails < 2 && passes < 2 && !stopped() {
            say(format!(
                "tailscope: step at {} req/s failed: confirming it ({} fail, {} pass so far)",
                fmt_rps(rate),
                fails,
                passes
            ));
            (step, report) = again("confirm", length, &mut steps, step)?;
            if step.call == Call::Pass {
                passes += 1;
            } else {
                fails += 1;
            }
        }
    }
    steps.push(step);
    Ok((steps, report))
}

/// Whether a failed step needs no confirming: the server answered under nine tenths of the
/// offered rate within the step, more than a stall of the machine takes from a step, and
/// the generator did not wait for a CPU on more than one send in a hundred (when it did, the
/// machine was busy with something else, and a busy machine stalls for seconds).
fn failed_beyond_doubt(step: &KneeStep) -> bool {
    step.call == Call::Fail
        && step.answered_rps < 0.9 * step.offered_rps
        && step.late_waited_for_cpu * 100 <= step.requests
}

/// The unmeasured warm-up before each step: a quarter of its length, 0.5 s to 2 s. A step
/// starts cold (threads, connections, the server's first accepts), and near the knee the
/// backlog of that start drains slowly (at 95 % of capacity, at a twentieth of the rate): a
/// measured start failed steps the rate itself would pass.
fn warmup_for(length: Duration) -> Duration {
    (length / 4).clamp(Duration::from_millis(500), Duration::from_secs(2))
}

/// One step to run.
struct Step {
    rate: f64,
    phase: &'static str,
    length: Duration,
    index: usize,
}

impl Step {
    /// Its unmeasured warm-up: [`warmup_for`] its length, none for a confirmation run, which
    /// is measured from its first request as `run -q RATE -z LEN` is (a user's run at the
    /// rate found has no warm-up, and its cold start must hold too).
    fn warmup(&self) -> Duration {
        if self.phase == HOLD {
            Duration::ZERO
        } else {
            warmup_for(self.length)
        }
    }
}

/// One step: an open-loop run at its rate, profiled, judged.
fn run_step(
    c: &FindMaxConfig,
    target: Option<&Target>,
    control: &RunControl,
    live: &Live,
    s: Step,
) -> Result<(KneeStep, Report)> {
    live.step_started(&s);
    let warmup = s.warmup();
    let Step {
        rate,
        phase,
        length,
        index,
    } = s;
    let mut plan: Plan = c.run.plan.clone();
    plan.pace = Pace::Rate(rate);
    plan.stop = Stop::Duration(length);
    plan.warmup = warmup;
    live.progress(format!(
        "tailscope: find-max step {} ({phase}): {} req/s for {}",
        index + 1,
        fmt_rps(rate),
        humantime::format_duration(length)
    ));
    let server_cpus = target.map(|t| t.server_cpus().to_vec()).unwrap_or_default();
    let target_pid = target.map(|t| t.root_pid()).or(c.run.pid);
    let mut profiler = RunProfiler::new(target_pid, server_cpus, plan.cpus.clone(), false)
        .watching_listeners(plan.addr);
    let measure_started = SystemTime::now();
    let totals = tailscope_loadgen::run(&plan, control, |snap| {
        profiler.on_snapshot(snap);
        live.tick(snap);
    })
    .context("the load generator could not run")?;
    crate::run::say_notes(&totals);
    let cpu_busy = profiler.cpu_busy();
    let findings = profiler.finish(&plan, &totals, totals.counters.requests());
    let report = Report::assemble(RunParts {
        until: None,
        warmup_auto: None,
        plan: &plan,
        totals: &totals,
        warnings: Vec::new(),
        generator: GeneratorClock {
            measure_started,
            segment: None,
            start_at: None,
        },
        signal: signal_name(),
        target: target.map(|t| TargetInfo {
            kind: t.kind().to_string(),
            name: t.name().to_string(),
            pid: Some(t.pid()),
            command: Some(t.command_line().to_string()),
            server_cpus: t.server_cpus().to_vec(),
        }),
        cpu_busy,
        findings: Some(findings),
        stacks: None,
    });
    let calls = c.slos.iter().map(|s| judge(s, &report)).collect();
    let step = KneeStep::of(index, phase, rate, &report, calls);
    live.progress(format!(
        "tailscope:   answered {} req/s, {} due unsent at its end, p99 {}, errors {:.3} %: {}",
        fmt_rps(step.answered_rps),
        step.unsent_end,
        step.p99_us
            .map_or("n/a".into(), tailscope_report::document::fmt_us),
        step.error_rate * 100.0,
        tailscope_report::knee::verdict(&step)
    ));
    live.step_done(&step);
    Ok((step, report))
}

#[cfg(test)]
mod tests;
