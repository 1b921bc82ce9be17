//! `--stages` in the report: the plan's stages (config) and each stage's own figures, from the
//! seconds that fell in it (issue 34).

use serde::{Deserialize, Serialize};
use tailscope_loadgen::plan::{LoadStage, StageTarget};
use tailscope_loadgen::snapshot::{Percentiles, TimePoint};
use tailscope_loadgen::Plan;

use super::histogram::decode_base64;

/// One stage as planned: over `duration_s` the target ramps from the previous stage's (the
/// first from 0) to its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StagePlan {
    /// How long the stage lasts.
    pub duration_s: f64,
    /// Open loop: the total rate reached at its end (requests per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Closed loop: the connections sending at its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<usize>,
}

/// The plan's stages as the config names them.
pub fn stage_plans(stages: &[LoadStage]) -> Vec<StagePlan> {
    stages
        .iter()
        .map(|s| StagePlan {
            duration_s: s.duration.as_secs_f64(),
            rate: match s.target {
                StageTarget::Rate(r) => Some(r),
                StageTarget::Connections(_) => None,
            },
            connections: match s.target {
                StageTarget::Connections(c) => Some(c),
                StageTarget::Rate(_) => None,
            },
        })
        .collect()
}

/// What one stage measured, from the whole seconds whose middle fell in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageFigures {
    /// The stage's place in `config.stages` (0-based).
    pub index: usize,
    /// Its start and end, seconds from the start of measurement.
    pub start_s: f64,
    /// See `start_s`.
    pub end_s: f64,
    /// Open loop: the mean rate the schedule offered over the stage (the mean of its ramp's
    /// ends); closed loop: null.
    pub offered_rps: Option<f64>,
    /// Closed loop: the mean planned connection count; open loop: null.
    pub planned_connections: Option<f64>,
    /// Responses per second over the stage's seconds; null when it had none.
    pub answered_rps: Option<f64>,
    /// Requests finished in the stage's seconds.
    pub requests: u64,
    /// Of which failed.
    pub errors: u64,
    /// Seconds the figures rest on.
    pub seconds: usize,
    /// Latency percentiles of its responses (µs, from each request's intended time in open
    /// loop), from its seconds' histograms merged; null without a response or when a
    /// histogram did not decode.
    pub latency_us: Option<Percentiles>,
}

/// Each stage's figures from the run's per-second points and histograms (base64, as the
/// report carries them); empty without stages.
pub fn stage_figures(
    plan: &Plan,
    timeseries: &[TimePoint],
    second_histograms: &[String],
) -> Vec<StageFigures> {
    let mut out = Vec::with_capacity(plan.stages.len());
    let (mut begin, mut prev) = (0.0, 0.0);
    for (index, stage) in plan.stages.iter().enumerate() {
        let end = begin + stage.duration.as_secs_f64();
        let target = match stage.target {
            StageTarget::Rate(r) => r,
            StageTarget::Connections(c) => c as f64,
        };
        let mean_planned = (prev + target) / 2.0;
        let mut requests = 0;
        let mut errors = 0;
        let mut seconds = 0;
        let mut span = 0.0;
        let mut merged: Option<hdrhistogram::Histogram<u64>> = None;
        let mut decoded = true;
        let mut from = 0.0;
        for (i, p) in timeseries.iter().enumerate() {
            let middle = (from + p.t_s) / 2.0;
            let width = p.t_s - from;
            from = p.t_s;
            if middle < begin || middle >= end {
                continue;
            }
            requests += p.requests;
            errors += p.errors;
            seconds += 1;
            span += width;
            match second_histograms.get(i).and_then(|b| decode_base64(b)) {
                Some(h) => match merged.as_mut() {
                    Some(m) => decoded &= m.add(&h).is_ok(),
                    None => merged = Some(h),
                },
                None => decoded = false,
            }
        }
        let open = matches!(stage.target, StageTarget::Rate(_));
        out.push(StageFigures {
            index,
            start_s: begin,
            end_s: end,
            offered_rps: open.then_some(mean_planned),
            planned_connections: (!open).then_some(mean_planned),
            answered_rps: (span > 0.0 && requests > 0).then(|| requests as f64 / span),
            requests,
            errors,
            seconds,
            latency_us: merged
                .filter(|h| decoded && !h.is_empty())
                .map(|h| Percentiles::of(&h)),
        });
        begin = end;
        prev = target;
    }
    out
}
