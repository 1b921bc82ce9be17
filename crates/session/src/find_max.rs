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
//! launched, is launched once for the search.

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use tailscope_forensics::Roles;
use tailscope_loadgen::{Pace, Plan, RunControl, Stop};
use tailscope_report::document::{Report, TargetInfo};
use tailscope_report::knee::{
    check_slo, fmt_rps, judge, knee_page, knee_text, Call, KneeReport, KneeStep, SCHEMA,
};
use tailscope_report::threshold::{Metric, Threshold};
use tailscope_report::{GeneratorClock, RunParts};
use tailscope_targets::cpus::format_list;
use tailscope_targets::Target;

mod live;

use crate::profiler::RunProfiler;
use crate::run::{trust_target, RunConfig};
use crate::signals::{signal_name, signalled, watch_signals};
use crate::{Outcome, UsageError};
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
        if self.start_rate > self.max_rate {
            return Err(UsageError(format!(
                "--start-rate {} is above --max-rate {}",
                self.start_rate, self.max_rate
            )));
        }
        Ok(())
    }
}

/// The rates the search may try and when it is close enough.
#[derive(Debug, Clone, Copy)]
struct Range {
    start_rate: f64,
    max_rate: f64,
    precision: f64,
}

/// Where the search stands.
struct Search {
    pass: Option<f64>,
    fail: Option<f64>,
}

impl Search {
    /// The next rate to try, and its phase; none when the search is over (with why).
    fn next(&self, c: &Range) -> Result<(f64, &'static str), String> {
        match (self.pass, self.fail) {
            (None, None) => Ok((c.start_rate, "climb")),
            (None, Some(f)) => Err(format!(
                "even the lowest rate tried, {} req/s, missed the SLO",
                fmt_rps(f)
            )),
            (Some(p), None) if p >= c.max_rate => Err(format!(
                "the highest rate allowed, {} req/s (--max-rate), met the SLO: the knee is above it",
                fmt_rps(p)
            )),
            (Some(p), None) => Ok(((p * 2.0).min(c.max_rate), "climb")),
            (Some(p), Some(f)) if f <= p * (1.0 + c.precision) => Err(format!(
                "the highest pass and the lowest fail are within {:.0} % of each other",
                c.precision * 100.0
            )),
            (Some(p), Some(f)) => Ok(((p * f).sqrt(), "bisect")),
        }
    }
}

/// Runs the search and reports. Returns how the process should exit: 0 when a rate met
/// every SLO, 99 when even the lowest did not.
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
        let limits: Vec<(String, f64)> = config
            .slos
            .iter()
            .filter(|s| matches!(s.metric, Metric::Latency(_)))
            .map(|s| (s.expr.clone(), s.limit))
            .collect();
        std::fs::write(path, knee_page(&knee, &limits))
            .with_context(|| format!("cannot write {}", path.display()))?;
        say!("tailscope: wrote {}", path.display());
    }
    // Cut short (q on the dashboard, Ctrl-C, SIGTERM): 130 as `run`'s, whatever was found.
    if signalled() || control.is_stopped() {
        return Ok(Outcome::Interrupted);
    }
    Ok(match knee.highest_pass_rps {
        Some(_) => Outcome::Success,
        None => Outcome::ThresholdFailed,
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
        steps: Vec::new(),
        highest_pass_rps: None,
        lowest_fail_rps: None,
        crossings: Vec::new(),
        stopped_because: String::new(),
        diagnosis: Vec::new(),
        first_fail_step: None,
    };
    let mut state = Search {
        pass: None,
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
        let passed = step.call == Call::Pass;
        if passed {
            state.pass = Some(state.pass.map_or(rate, |p| p.max(rate)));
        } else {
            state.fail = Some(state.fail.map_or(rate, |f| f.min(rate)));
            if knee.first_fail_step.is_none() {
                knee.first_fail_step = Some(knee.steps.len());
                knee.diagnosis = diagnose(&step, &report, c);
            }
        }
        knee.steps.push(step);
        live.bounds(state.pass, state.fail);
    }
    if state.pass.is_none() && knee.steps.last().is_some_and(|s| s.call == Call::Unsure) {
        knee.stopped_because = format!(
            "even the lowest rate tried, {} req/s, was not shown to meet the SLO: its interval straddled the limit twice (noise: a longer --step narrows it)",
            fmt_rps(c.start_rate)
        );
    }
    knee.highest_pass_rps = state.pass;
    knee.lowest_fail_rps = state.fail;
    knee.find_crossings(&c.slos);
    Ok(knee)
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

/// One step: an open-loop run at its rate, profiled, judged.
fn run_step(
    c: &FindMaxConfig,
    target: Option<&Target>,
    control: &RunControl,
    live: &Live,
    s: Step,
) -> Result<(KneeStep, Report)> {
    live.step_started(&s);
    let Step {
        rate,
        phase,
        length,
        index,
    } = s;
    let mut plan: Plan = c.run.plan.clone();
    plan.pace = Pace::Rate(rate);
    plan.stop = Stop::Duration(length);
    plan.warmup = warmup_for(length);
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

/// What limited the server at the first failing step, one sentence each: the generator's
/// connections, the answered rate, and what the forensics and the profile said.
fn diagnose(step: &KneeStep, report: &Report, c: &FindMaxConfig) -> Vec<String> {
    let mut why = Vec::new();
    let sends = step.requests.max(1) as f64;
    if step.late_no_free_connection as f64 > 0.01 * sends {
        why.push(format!(
            "no free connection: {} sends ({:.0} %) waited for one of the {} connections, all busy on the server (the requests queued in the generator: give more -c if the server has room, else this is its limit)",
            step.late_no_free_connection,
            100.0 * step.late_no_free_connection as f64 / sends,
            c.run.plan.connections
        ));
    }
    if step.answered_rps < 0.95 * step.offered_rps || step.unsent_end > 0 {
        why.push(format!(
            "the server's queue: it answered {} req/s of the {} offered within the step, and {} requests due by its end were never sent (it fell behind; the backlog grew through the step)",
            fmt_rps(step.answered_rps),
            fmt_rps(step.offered_rps),
            step.unsent_end
        ));
    }
    if step.late_waited_for_cpu as f64 > 0.01 * sends {
        why.push(format!(
            "the generator itself waited for a CPU on {} sends: the step measured the machine too (give the generator and the server CPUs apart)",
            step.late_waited_for_cpu
        ));
    }
    if let Some(f) = report.sections.findings.as_ref() {
        let roles = Roles {
            server: &[],
            client: &c.run.plan.cpus,
        };
        let text = tailscope_report::findings::findings_text(f, roles, report);
        let mut in_diagnosis = false;
        for line in text.lines() {
            let l = line.trim();
            if line.starts_with("Diagnosis") {
                in_diagnosis = true;
                continue;
            }
            let keep = (in_diagnosis && !l.is_empty() && !l.starts_with("no spike cause"))
                || l.starts_with("listen queue")
                || l.starts_with("target ");
            if keep {
                why.push(l.to_string());
            }
        }
    }
    if why.is_empty() {
        why.push("nothing stood out: the latency grew with the rate".into());
    }
    why
}

#[cfg(test)]
mod tests;
