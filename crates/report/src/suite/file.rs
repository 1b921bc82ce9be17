//! The suite file (TOML): parsed and validated before anything starts, every problem named
//! with its line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tailscope_targets::TargetSpec;
use toml::Spanned;

use crate::mix_files as files;
use sections::{endpoints_of, target_spec};
use tailscope_loadgen::mix::{Order, RequestSpec};
use tailscope_loadgen::plan::{
    parse_duration_within, MAX_CONNECTIONS, MAX_DURATION, MAX_RATE, MAX_STREAMS, MAX_THREADS,
    MAX_TIMEOUT, MIN_RATE,
};
use tailscope_loadgen::{Pace, Plan, Stop};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    suite: SuiteSection,
    #[serde(default)]
    load: LoadSection,
    #[serde(default)]
    target: Vec<TargetSection>,
    #[serde(default)]
    endpoint: Vec<EndpointSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteSection {
    baseline: Option<Spanned<String>>,
    /// The seed of the rounds' shuffles.
    seed: Option<Spanned<i64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadSection {
    // Counts are read signed, so that `connections = -1` gets the range message below, not
    // serde's "invalid value: integer `-1`, expected usize".
    connections: Option<Spanned<i64>>,
    duration: Option<Spanned<String>>,
    warmup: Option<Spanned<String>>,
    /// A fixed count of measured requests per run, instead of a duration.
    requests: Option<Spanned<i64>>,
    /// A fixed count of warm-up requests, instead of a warm-up duration.
    warmup_requests: Option<Spanned<i64>>,
    runs: Option<Spanned<i64>>,
    pipeline: Option<Spanned<i64>>,
    rate: Option<Spanned<f64>>,
    arrival: Option<Spanned<String>>,
    /// `stages = "10s:1000,30s:5000"` or `"30s:c=64,30s:c=1024"`, as `--stages`.
    stages: Option<Spanned<String>>,
    threads: Option<Spanned<i64>>,
    timeout: Option<Spanned<String>>,
    server_cpus: Option<Spanned<String>>,
    client_cpus: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetSection {
    name: Spanned<String>,
    kind: Spanned<String>,
    threads: Option<Spanned<i64>>,
    backlog: Option<Spanned<i32>>,
    stall_every: Option<Spanned<String>>,
    stall_for: Option<Spanned<String>>,
    workers: Option<Spanned<i64>>,
    #[serde(rename = "static")]
    static_dir: Option<PathBuf>,
    /// nginx only: served over TLS with a throw-away certificate.
    tls: Option<Spanned<bool>>,
    /// nginx only: served over HTTP/2 (h2 with tls, else h2c).
    http2: Option<Spanned<bool>>,
    /// With http2: concurrent streams per connection (`--streams`).
    streams: Option<Spanned<i64>>,
    command: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    ready_path: Option<String>,
    ready_timeout: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointSection {
    path: Option<Spanned<String>>,
    /// A request mix's load file (`tailscope run --load`), relative to the suite file.
    load: Option<Spanned<String>>,
}

/// The load every run of a suite applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Connections.
    pub connections: usize,
    /// Each measured run.
    pub duration: Duration,
    /// The warm-up before an endpoint's runs (not recorded).
    pub warmup: Duration,
    /// Each measured run as a fixed count of requests instead of `duration` (the transport
    /// benchmark protocol's `requests = 2500`).
    pub requests: Option<u64>,
    /// The warm-up as a fixed count of requests instead of `warmup`.
    pub warmup_requests: Option<u64>,
    /// Measured runs per target and endpoint.
    pub runs: usize,
    /// Pipelining depth.
    pub pipeline: usize,
    /// Open loop rate, if any.
    pub rate: Option<f64>,
    /// Open loop: how requests arrive (`arrival = "poisson"`).
    pub arrival: tailscope_loadgen::plan::Arrival,
    /// `stages = "…"`: each measured run follows them (its length is their sum); the
    /// warm-up holds the first stage's target. Empty without.
    pub stages: Vec<tailscope_loadgen::plan::LoadStage>,
    /// Generator threads (default: one per generator CPU).
    pub threads: Option<usize>,
    /// Per-request timeout.
    pub timeout: Duration,
    /// CPUs for the servers (default: the first half).
    pub server_cpus: Option<Vec<usize>>,
    /// CPUs for the generator (default: the rest).
    pub client_cpus: Option<Vec<usize>>,
}

impl Load {
    /// How a measured run stops: after `requests` when given, else after `duration`.
    pub fn measured_stop(&self) -> Stop {
        if !self.stages.is_empty() {
            return Stop::Duration(tailscope_loadgen::plan::stages_duration(&self.stages));
        }
        self.requests
            .map_or(Stop::Duration(self.duration), Stop::Requests)
    }

    /// How the warm-up stops; None for no warm-up.
    pub fn warmup_stop(&self) -> Option<Stop> {
        match self.warmup_requests {
            Some(0) => None,
            Some(n) => Some(Stop::Requests(n)),
            None => (!self.warmup.is_zero()).then_some(Stop::Duration(self.warmup)),
        }
    }

    /// The measured run or the warm-up in words: `2500 requests`, `10s`.
    pub fn describe(stop: Option<Stop>) -> String {
        match stop {
            None => "none".into(),
            Some(Stop::Requests(n)) => format!("{n} requests"),
            Some(Stop::Duration(d)) => humantime::format_duration(d).to_string(),
        }
    }

    /// The plan of one run of this load against `url` from `client_cpus`, stopping at `stop`
    /// (a warm-up's or a measured run's length or count).
    pub fn plan(
        &self,
        url: &str,
        client_cpus: &[usize],
        stop: Stop,
    ) -> Result<Plan, tailscope_loadgen::Error> {
        let mut plan = Plan::new(url)?;
        plan.connections = self.connections;
        plan.pipeline = self.pipeline;
        plan.timeout = self.timeout;
        plan.grace = self.timeout.min(Duration::from_secs(1));
        plan.cpus = client_cpus.to_vec();
        plan.threads = self.threads.unwrap_or(client_cpus.len().max(1));
        plan.stop = stop;
        if let Some(r) = self.rate {
            plan.pace = Pace::Rate(r);
        }
        plan.arrival = self.arrival;
        self.shape(&mut plan, stop);
        plan.validate()?;
        Ok(plan)
    }

    /// With stages: the measured run (stopping at their sum) follows them, at the most
    /// connections or the highest rate they reach, as `--stages` sets a run; a warm-up holds
    /// the first stage's target.
    fn shape(&self, plan: &mut Plan, stop: Stop) {
        use tailscope_loadgen::plan::StageTarget;
        let Some(first) = self.stages.first() else {
            return;
        };
        if stop != self.measured_stop() {
            match first.target {
                StageTarget::Rate(r) => plan.pace = Pace::Rate(r.max(MIN_RATE)),
                StageTarget::Connections(c) => plan.connections = c.max(1),
            }
            return;
        }
        let mut highest = 0.0_f64;
        let mut most = 0;
        for s in &self.stages {
            match s.target {
                StageTarget::Rate(r) => highest = highest.max(r),
                StageTarget::Connections(c) => most = most.max(c),
            }
        }
        if most > 0 {
            plan.connections = most;
        } else {
            plan.pace = Pace::Rate(highest.max(MIN_RATE));
        }
        plan.stages = self.stages.clone();
    }
}

/// A validated suite.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The target the others are compared with.
    pub baseline: Option<String>,
    /// The seed of the rounds' shuffles (None: [`super::rounds::DEFAULT_SEED`]); recorded in
    /// the JSON either way.
    pub seed: Option<u64>,
    /// The load.
    pub load: Load,
    /// Targets in file order, by name.
    pub targets: Vec<(String, TargetSpec)>,
    /// HTTP/2 targets' streams per connection, by name (`streams = N`; 1 when not given).
    pub streams: BTreeMap<String, usize>,
    /// Endpoint paths in file order (`mix:FILE` for a mix).
    pub endpoints: Vec<String>,
    /// The endpoints that are request mixes, by their name in `endpoints`: the requests and
    /// their order.
    pub mixes: BTreeMap<String, (Vec<RequestSpec>, Order)>,
}

impl Suite {
    /// The plan of one run of `endpoint` against the target at `base_url` (`http://HOST:PORT`)
    /// from `client_cpus`, stopping after `stop`.
    pub fn plan(
        &self,
        endpoint: &str,
        base_url: &str,
        client_cpus: &[usize],
        stop: Stop,
    ) -> Result<Plan, tailscope_loadgen::Error> {
        let Some((requests, order)) = self.mixes.get(endpoint) else {
            return self
                .load
                .plan(&format!("{base_url}{endpoint}"), client_cpus, stop);
        };
        let mut plan = self.load.plan(&format!("{base_url}/"), client_cpus, stop)?;
        plan.requests = requests.clone();
        plan.order = *order;
        plan.validate()?;
        Ok(plan)
    }
}

/// The suite file being checked: its path and text, for problems named `FILE:LINE: …`.
pub(super) struct Source<'a> {
    /// The file's path, as given.
    file: &'a Path,
    /// Its text, for the line of a span.
    text: &'a str,
}

impl Source<'_> {
    /// `FILE:LINE: problem`.
    fn at<T>(&self, spanned: &Spanned<T>, problem: impl std::fmt::Display) -> String {
        let line = self.text[..spanned.span().start.min(self.text.len())]
            .matches('\n')
            .count()
            + 1;
        format!("{}:{line}: {problem}", self.file.display())
    }

    /// A duration field within `range` (the same ranges as the command line's flags).
    fn duration(
        &self,
        v: &Option<Spanned<String>>,
        default: Duration,
        range: std::ops::RangeInclusive<Duration>,
    ) -> Result<Duration, String> {
        match v {
            None => Ok(default),
            Some(s) => parse_duration_within(s.get_ref(), *range.start(), *range.end())
                .map_err(|e| self.at(s, format!("{:?}: {e}", s.get_ref()))),
        }
    }

    /// A count field within `range`, or `None` when absent; read signed, so that a negative
    /// count gets the same range message as any other out of range.
    fn count(
        &self,
        v: &Option<Spanned<i64>>,
        name: &str,
        range: std::ops::RangeInclusive<usize>,
    ) -> Result<Option<usize>, String> {
        let wide = i64::try_from(*range.start()).unwrap_or(i64::MAX)
            ..=i64::try_from(*range.end()).unwrap_or(i64::MAX);
        // Within a range of usizes, the value is a usize.
        Ok(self.number(v, name, wide)?.map(|n| n as usize))
    }

    /// A numeric field within `range`, or `None` when absent.
    fn number<T>(
        &self,
        v: &Option<Spanned<T>>,
        name: &str,
        range: std::ops::RangeInclusive<T>,
    ) -> Result<Option<T>, String>
    where
        T: PartialOrd + Copy + std::fmt::Display,
    {
        match v {
            None => Ok(None),
            Some(s) if range.contains(s.get_ref()) => Ok(Some(*s.get_ref())),
            Some(s) => Err(self.at(
                s,
                format!(
                    "{name} = {} is out of range: give {}..={}",
                    s.get_ref(),
                    range.start(),
                    range.end()
                ),
            )),
        }
    }

    fn cpu_list(&self, v: &Option<Spanned<String>>) -> Result<Option<Vec<usize>>, String> {
        v.as_ref()
            .map(|s| tailscope_targets::cpus::parse_list(s.get_ref()).map_err(|e| self.at(s, e)))
            .transpose()
    }
}

const MS: Duration = Duration::from_millis(1);
const HOUR: Duration = Duration::from_secs(3600);
/// The most measured runs per target and endpoint.
const MAX_RUNS: usize = 1000;
/// The most requests a counted run or warm-up may ask for.
const MAX_REQUESTS: usize = 1_000_000_000;

/// Whether the load's stages are rate stages (open loop).
fn rate_stages(l: &LoadSection) -> bool {
    l.stages.as_ref().is_some_and(|s| {
        tailscope_loadgen::plan::parse_stages(s.get_ref()).is_ok_and(|st| {
            st.iter()
                .all(|s| matches!(s.target, tailscope_loadgen::plan::StageTarget::Rate(_)))
        })
    })
}

/// `stages = "…"`, checked as `--stages` is: they set the run's length and its rate or
/// connections, so not with duration, requests, rate, or connection stages with arrival.
fn stages(
    src: &Source,
    l: &LoadSection,
) -> Result<Vec<tailscope_loadgen::plan::LoadStage>, String> {
    let Some(s) = &l.stages else {
        return Ok(Vec::new());
    };
    let stages = tailscope_loadgen::plan::parse_stages(s.get_ref())
        .map_err(|e| src.at(s, format!("stages: {e}")))?;
    let clash = [
        (l.duration.is_some(), "duration"),
        (l.requests.is_some(), "requests"),
        (l.rate.is_some(), "rate"),
        (l.arrival.is_some() && !rate_stages(l), "arrival"),
    ];
    if let Some((_, key)) = clash.iter().find(|(given, _)| *given) {
        return Err(src.at(
            s,
            format!("stages set each run's length and its rate or connections: drop {key}"),
        ));
    }
    Ok(stages)
}

/// The `[load]` section checked: every run's settings.
fn load_of(src: &Source, l: &LoadSection) -> Result<Load, String> {
    let runs = src.count(&l.runs, "runs", 1..=MAX_RUNS)?.unwrap_or(3);
    let load = Load {
        connections: src
            .count(&l.connections, "connections", 1..=MAX_CONNECTIONS)?
            .unwrap_or(64),
        duration: src.duration(&l.duration, Duration::from_secs(10), MS..=MAX_DURATION)?,
        warmup: src.duration(
            &l.warmup,
            Duration::from_secs(3),
            Duration::ZERO..=MAX_DURATION,
        )?,
        requests: src
            .count(&l.requests, "requests", 1..=MAX_REQUESTS)?
            .map(|n| n as u64),
        warmup_requests: src
            .count(&l.warmup_requests, "warmup_requests", 0..=MAX_REQUESTS)?
            .map(|n| n as u64),
        runs,
        pipeline: src.count(&l.pipeline, "pipeline", 1..=1024)?.unwrap_or(1),
        rate: src.number(&l.rate, "rate", MIN_RATE..=MAX_RATE)?,
        stages: stages(src, l)?,
        arrival: match &l.arrival {
            None => tailscope_loadgen::plan::Arrival::Uniform,
            Some(a) if l.rate.is_none() && !rate_stages(l) => {
                return Err(format!(
                    "{}: arrival = {:?} shapes an open-loop schedule: add rate = N",
                    src.file.display(),
                    a.get_ref()
                ))
            }
            Some(a) => tailscope_loadgen::plan::parse_arrival(a.get_ref())
                .map_err(|e| format!("{}: arrival: {e}", src.file.display()))?,
        },
        threads: src.count(&l.threads, "threads", 1..=MAX_THREADS)?,
        timeout: src.duration(&l.timeout, Duration::from_secs(20), MS..=MAX_TIMEOUT)?,
        server_cpus: src.cpu_list(&l.server_cpus)?,
        client_cpus: src.cpu_list(&l.client_cpus)?,
    };
    // A run is timed or counted, not both: which would end it would be a race.
    for (count, timed, what) in [
        (&l.requests, &l.duration, "requests and duration"),
        (&l.warmup_requests, &l.warmup, "warmup_requests and warmup"),
    ] {
        if let (Some(c), Some(_)) = (count, timed) {
            return Err(src.at(c,
                format!("{what} both given: a run stops after a count of requests or a duration, give one"),
            ));
        }
    }
    Ok(load)
}

/// Parses and validates a suite file's text.
pub fn parse(file: &Path, text: &str) -> Result<Suite, String> {
    let raw: File = toml::from_str(text).map_err(|e| format!("{}: {e}", file.display()))?;
    let src = &Source { file, text };
    let load = load_of(src, &raw.load)?;
    if raw.target.is_empty() {
        return Err(format!(
            "{}: no [[target]]: add at least one (kind = \"embedded\", \"nginx\" or \"command\")",
            file.display()
        ));
    }
    if raw.endpoint.is_empty() {
        return Err(format!(
            "{}: no [[endpoint]]: add at least one, e.g. path = \"/plaintext\"",
            file.display()
        ));
    }
    let mut targets: Vec<(String, TargetSpec)> = Vec::new();
    let mut streams = BTreeMap::new();
    for t in &raw.target {
        let name = t.name.get_ref().clone();
        if targets.iter().any(|(n, _)| *n == name) {
            return Err(src.at(&t.name, format!("target name {name:?} is used twice")));
        }
        for (flag, name) in [(&t.tls, "tls"), (&t.http2, "http2")] {
            if let Some(on) = flag.as_ref().filter(|b| *b.get_ref()) {
                if t.kind.get_ref() != "nginx" {
                    return Err(src.at(
                        on,
                        format!(
                            "{name} = true is for nginx targets (tailscope serves it that way)"
                        ),
                    ));
                }
            }
        }
        let spec = target_spec(src, t)?;
        if let Some(n) = &t.streams {
            if !spec.http2() {
                return Err(src.at(
                    n,
                    "streams is HTTP/2's (concurrent streams per connection): add http2 = true",
                ));
            }
        }
        let n = src.count(&t.streams, "streams", 1..=MAX_STREAMS)?;
        streams.insert(name.clone(), n.unwrap_or(1));
        targets.push((name, spec));
    }
    let (endpoints, mixes) = endpoints_of(src, &raw.endpoint)?;
    let baseline = match &raw.suite.baseline {
        Some(b) if !targets.iter().any(|(n, _)| n == b.get_ref()) => {
            let names: Vec<&str> = targets.iter().map(|(n, _)| n.as_str()).collect();
            return Err(src.at(
                b,
                format!(
                    "baseline {:?} is not a target (targets: {})",
                    b.get_ref(),
                    names.join(", ")
                ),
            ));
        }
        Some(b) => Some(b.get_ref().clone()),
        None => None,
    };
    let seed = src
        .number(&raw.suite.seed, "seed", 0..=i64::MAX)?
        .map(|n| n as u64);
    Ok(Suite {
        baseline,
        seed,
        load,
        targets,
        streams,
        endpoints,
        mixes,
    })
}

mod sections;

#[cfg(test)]
mod tests;
