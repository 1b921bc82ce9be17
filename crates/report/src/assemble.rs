//! A run's document, assembled once from its parts: the generator's totals, what the session
//! knows of the target and the run's end, the profile and diagnosis, and the stacks. Nothing
//! fills the document afterwards.

use std::time::SystemTime;

use tailscope_forensics::Findings;
use tailscope_loadgen::segment::Segment;
use tailscope_loadgen::{Plan, RunTotals};

use crate::document::{Generator, Report, TargetInfo};
use crate::sections::{CpuBusy, StacksSection};

/// Where and when this host's generator ran: its report's `generator`.
#[derive(Debug, Clone, Copy)]
pub struct GeneratorClock {
    /// When the measured part began (after the warm-up), by the wall clock.
    pub measure_started: SystemTime,
    /// Its share of a load split over several generators (`--segment`).
    pub segment: Option<Segment>,
    /// The agreed start of such a load (`--start-at`).
    pub start_at: Option<SystemTime>,
}

/// Everything a run's document is made of.
#[derive(Debug, Clone)]
pub struct RunParts<'a> {
    /// What was run.
    pub plan: &'a Plan,
    /// What the generator measured.
    pub totals: &'a RunTotals,
    /// The session's own warnings (CPUs shared with the server, a server that exited),
    /// after the generator's.
    pub warnings: Vec<String>,
    /// Where and when the generator ran.
    pub generator: GeneratorClock,
    /// The signal that stopped the run, kept only when the run was cut short.
    pub signal: Option<String>,
    /// The server under test, when known.
    pub target: Option<TargetInfo>,
    /// Each measured second's busy % per CPU, for the time series.
    pub cpu_busy: CpuBusy,
    /// What the profiler and the rules found.
    pub findings: Option<Findings>,
    /// The server's stacks, or why they were not sampled.
    pub stacks: Option<StacksSection>,
    /// `--until`'s goals and what came of them.
    pub until: Option<crate::document::Until>,
    /// `--warmup auto`: how the warm-up went.
    pub warmup_auto: Option<crate::document::WarmupAuto>,
}

impl Report {
    /// The run's document, made once from its parts.
    pub fn assemble(parts: RunParts<'_>) -> Report {
        let mut report = Report::new(parts.plan, parts.totals);
        report.warnings.extend(parts.warnings);
        let clock = parts.generator;
        report.generator = Some(Generator::here(
            &report,
            clock.measure_started,
            clock.segment,
            clock.start_at,
        ));
        if report.interrupted {
            report.signal = parts.signal;
        }
        report.target = parts.target;
        parts.cpu_busy.fill(&mut report.timeseries);
        report.sections.findings = parts.findings;
        report.sections.stacks = parts.stacks;
        report.until = parts.until;
        report
            .warnings
            .extend(parts.warmup_auto.as_ref().and_then(|w| w.warning()));
        report.warmup_auto = parts.warmup_auto;
        report
    }
}
