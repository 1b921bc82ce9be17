//! `--stages`, `--arrival`, `--burst` into the plan, checked against `-q`, `-z`, `-n`.

use tailscope_loadgen::plan::{stages_duration, Arrival, StageTarget, MIN_RATE};
use tailscope_loadgen::{Pace, Plan, Stop};

use crate::args::{ShapeArgs, StagesArg};

/// Sets the plan's shape; `length_given`: -z or -n was on the command line. An error is a
/// usage error's message.
pub(crate) fn apply(shape: &ShapeArgs, plan: &mut Plan, length_given: bool) -> Result<(), String> {
    if let Some(burst @ Arrival::Burst { size, every }) = shape.burst {
        plan.pace = Pace::Rate(size as f64 / every.as_secs_f64());
        plan.arrival = burst;
    }
    if let Some(arrival) = shape.arrival {
        plan.arrival = arrival;
    }
    let Some(StagesArg(stages)) = &shape.stages else {
        if plan.arrival != Arrival::Uniform && plan.pace == Pace::Max {
            return Err(
                "--arrival shapes an open-loop schedule: give a rate (-q) or --stages with rates"
                    .into(),
            );
        }
        return Ok(());
    };
    if !plan.warmup.is_zero() {
        return Err(
            "--stages begin at the start: drop --warmup (make the first stage the warm-up)".into(),
        );
    }
    if length_given {
        return Err("--stages set the run's length (their sum): drop -z and -n".into());
    }
    let mut highest = 0.0_f64;
    let mut most = 0;
    for s in stages {
        match s.target {
            StageTarget::Rate(r) => highest = highest.max(r),
            StageTarget::Connections(c) => most = most.max(c),
        }
    }
    if most > 0 {
        if plan.pace != Pace::Max {
            return Err(
                "connection stages (DUR:c=N) are closed loop: drop -q and --arrival".into(),
            );
        }
        plan.connections = most;
    } else {
        if plan.pace != Pace::Max {
            return Err("rate stages (DUR:RATE) set the rate: drop -q".into());
        }
        plan.pace = Pace::Rate(highest.max(MIN_RATE));
    }
    plan.stages = stages.clone();
    plan.stop = Stop::Duration(stages_duration(stages));
    Ok(())
}
