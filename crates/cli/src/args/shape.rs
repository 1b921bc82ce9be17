//! The load's shape over time: `--stages`, `--arrival`, `--burst` (issue 34).

use clap::Args;
use tailscope_loadgen::plan::{parse_arrival, parse_burst, parse_stages, Arrival, LoadStage};

/// How the load changes over the run and how requests arrive.
#[derive(Debug, Args, Default, Clone)]
#[command(next_help_heading = "Load shape")]
pub struct ShapeArgs {
    /// Stages, each ramping linearly from the previous target (the first from 0) over its
    /// duration: open loop in requests per second ('10s:1000,30s:1000,10s:5000,1m:5000'),
    /// or closed loop in connections ('30s:c=64,30s:c=1024'). The run lasts the stages.
    #[arg(long = "stages", value_parser = parse_stages_arg, value_name = "DUR:RATE,...")]
    pub stages: Option<StagesArg>,
    /// Open loop: how requests are spread: uniform (evenly, one every 1/rate) or poisson
    /// (exponential gaps at the same mean rate, as independent clients arrive).
    #[arg(long = "arrival", value_parser = parse_arrival, value_name = "uniform|poisson")]
    pub arrival: Option<Arrival>,
    /// Open loop in bursts: N requests at once every DUR (100/1s); the rate is N/DUR.
    #[arg(long = "burst", value_parser = parse_burst, value_name = "N/DUR", conflicts_with_all = ["arrival", "rate", "stages"])]
    pub burst: Option<Arrival>,
}

/// `--stages` as parsed (a newtype: clap reads a bare `Vec` as a repeated flag).
#[derive(Debug, Clone)]
pub struct StagesArg(pub Vec<LoadStage>);

fn parse_stages_arg(s: &str) -> Result<StagesArg, String> {
    parse_stages(s).map(StagesArg)
}
