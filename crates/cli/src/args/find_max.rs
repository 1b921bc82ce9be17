//! `tailscope find-max`: the flags of the search; the rest are `run`'s (issue 34).

use std::time::Duration;

use clap::Args;

use super::{duration_in, parse_rate, RunArgs, MS};
use tailscope_loadgen::plan::MAX_DURATION;

/// The search for the highest open-loop rate that meets every SLO.
#[derive(Debug, Args)]
pub struct FindMaxArgs {
    /// What must hold, e.g. 'p99<10ms'; repeat for several ('error_rate<0.1%'): a latency
    /// percentile (p50 … p9999) or error_rate / non2xx_rate below a limit.
    #[arg(
        long = "slo",
        value_name = "EXPR",
        required = true,
        help_heading = "Search"
    )]
    pub slo: Vec<String>,
    /// The first rate tried, requests per second; the search doubles it until a step fails.
    #[arg(long = "start-rate", value_parser = parse_rate, default_value = "100", value_name = "RATE", help_heading = "Search")]
    pub start_rate: f64,
    /// The highest rate tried (default: the generator's limit).
    #[arg(long = "max-rate", value_parser = parse_rate, value_name = "RATE", help_heading = "Search")]
    pub max_rate: Option<f64>,
    /// Each step's length: long enough for the bootstrap over seconds (8 s or more) to
    /// judge the percentiles; shorter steps fall back to order statistics. A rate takes at
    /// most 7 × DUR and 4 warm-ups (an unsure step is run again twice as long, and a fail
    /// at that length twice more), and the search tries at most log2(max / start) + 1 rates
    /// climbing and log2(ln 2 / ln(1 + precision)) + 1 bisecting.
    #[arg(long = "step", value_parser = duration_in(MS, MAX_DURATION), default_value = "10s", value_name = "DUR", help_heading = "Search")]
    pub step: Duration,
    /// Stop once the lowest failing rate is within this many percent above the highest
    /// passing one.
    #[arg(long = "precision", default_value_t = 5.0, value_name = "PCT", value_parser = parse_precision, help_heading = "Search")]
    pub precision: f64,
    /// After the search, hold the rate found this long, measured from its first request as
    /// `run -q RATE -z DUR` is: a run that misses (or is not shown to meet) the SLO steps the
    /// rate down by --precision and holds again, at most 4 runs (40 s at the default, besides
    /// the search). 0: no confirmation.
    #[arg(long = "confirm", value_parser = parse_confirm, default_value = "10s", value_name = "DUR", allow_hyphen_values = true, help_heading = "Search")]
    pub confirm: Duration,
    /// The target, the request, the connections and the outputs, as `run` takes them.
    #[command(flatten)]
    pub run: RunArgs,
}

fn parse_precision(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.1..=100.0).contains(&p) => Ok(p),
        _ => Err(format!("{s:?}: give a percentage from 0.1 to 100, e.g. 5")),
    }
}

/// `--confirm`: 0 (no confirmation), or a run of 1 s or more.
fn parse_confirm(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" || super::parse_duration(s) == Ok(Duration::ZERO) {
        return Ok(Duration::ZERO);
    }
    duration_in(Duration::from_secs(1), MAX_DURATION)(s)
        .map_err(|e| format!("{e} (or 0: no confirmation)"))
}
