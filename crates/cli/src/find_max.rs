//! `tailscope find-max`: flags → a validated [`FindMaxConfig`] (the run's flags as `run`
//! validates them, less what the search sets itself).

use anyhow::Result;
use tailscope_loadgen::plan::MAX_RATE;
use tailscope_session::find_max::FindMaxConfig;
use tailscope_session::UsageError;

use crate::args::FindMaxArgs;

/// Validates the flags; every problem is a [`UsageError`] (exit code 2).
pub fn find_max_config(mut args: FindMaxArgs) -> Result<FindMaxConfig> {
    let usage = |e: String| anyhow::Error::new(UsageError(e));
    let load = &args.run.load;
    let set_by_search = [
        (load.rate.is_some(), "-q"),
        (load.duration.is_some(), "-z"),
        (load.requests.is_some(), "-n"),
        (load.shape.stages.is_some(), "--stages"),
        (load.shape.burst.is_some(), "--burst"),
        (load.warmup.is_some(), "--warmup"),
        (!args.run.output.fail_if.is_empty(), "--fail-if"),
    ];
    if let Some((_, flag)) = set_by_search.iter().find(|(given, _)| *given) {
        return Err(usage(format!(
            "{flag} is the search's to set (each step is an open-loop run of --step at one rate): drop it; the SLOs are --slo"
        )));
    }
    let slos = args
        .slo
        .iter()
        .map(|s| tailscope_report::knee::parse_slo(s).map_err(usage))
        .collect::<Result<Vec<_>>>()?;
    // Taken out: `run` refuses an arrival process without a rate, which the search sets.
    let arrival = args.run.load.shape.arrival.take();
    let mut run = crate::run::run_config(args.run)?;
    if !run.plan.stages.is_empty() {
        return Err(usage(
            "the --load file's stages are the search's to set (each step is one rate): drop its `stages`"
                .into(),
        ));
    }
    // The rate is the search's: a placeholder until the first step sets it.
    run.plan.pace = tailscope_loadgen::Pace::Rate(args.start_rate);
    if let Some(a) = arrival {
        run.plan.arrival = a;
    }
    let config = FindMaxConfig {
        run,
        slos,
        start_rate: args.start_rate,
        max_rate: args.max_rate.unwrap_or(MAX_RATE),
        step: args.step,
        precision: args.precision / 100.0,
        confirm: args.confirm,
    };
    config.validate()?;
    Ok(config)
}
