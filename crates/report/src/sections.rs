//! The sections a run's document carries beside the generator's: what the profiler and the
//! rules found ([`Findings`]: `profile`, `diagnosis`, `listen_queue`, `slowest_by_request`)
//! and what the server's threads did (`stacks`), typed from where they are made to the JSON.
//! Keys of a report this version does not know (written by another) are kept as they were.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tailscope_forensics::Findings;
use tailscope_loadgen::TimePoint;
use tailscope_targets::stacks::InsideReport;

/// The sections of one run beside the generator's figures: at the top level of its report,
/// and under `sections` for each run of a merged one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunSections {
    /// What the profiler and the rules found; none in a report of the run so far, a merged
    /// report, or a run without the profiler.
    #[serde(flatten)]
    pub findings: Option<Findings>,
    /// The server's stacks (`--stacks`), or why they were not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<StacksSection>,
    /// Keys this version does not know, from a report written by another, kept as they were.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

/// The keys of [`Findings`] at the top level of a report.
const FINDINGS_KEYS: [&str; 5] = [
    "profile",
    "diagnosis",
    "diagnosis_held_back",
    "listen_queue",
    "slowest_by_request",
];

/// Read by hand rather than derived: a section this version cannot read (written by another,
/// or edited) stays in `other` as it was written, where serde's flatten would drop the keys
/// it had taken before failing.
impl<'de> Deserialize<'de> for RunSections {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut other = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let present: serde_json::Map<_, _> = FINDINGS_KEYS
            .into_iter()
            .filter_map(|k| Some((k.to_string(), other.get(k)?.clone())))
            .collect();
        let findings = match present.is_empty() {
            true => None,
            false => serde_json::from_value::<Findings>(present.into()).ok(),
        };
        if findings.is_some() {
            for k in FINDINGS_KEYS {
                other.remove(k);
            }
        }
        let stacks = other
            .get("stacks")
            .and_then(|s| serde_json::from_value::<StacksSection>(s.clone()).ok());
        if stacks.is_some() {
            other.remove("stacks");
        }
        Ok(RunSections {
            findings,
            stacks,
            other,
        })
    }
}

impl RunSections {
    /// No section at all.
    pub fn is_empty(&self) -> bool {
        self.findings.is_none() && self.stacks.is_none() && self.other.is_empty()
    }
}

/// The report's `stacks` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StacksSection {
    /// On-CPU stacks and off-CPU time, split into the slow seconds and the rest.
    Sampled(Box<InsideReport>),
    /// Asked for (or on by default) but not sampled, and why.
    NotSampled(StacksNotSampled),
}

/// A `stacks` section without samples: the sampler that would have run, no figures, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StacksNotSampled {
    /// The perf event that would have been sampled.
    pub sampler: String,
    /// Always null: nothing was sampled.
    pub frequency_hz: Option<u64>,
    /// Always null: nothing was sampled.
    pub samples: Option<u64>,
    /// Why not.
    pub missing: Vec<String>,
}

impl StacksSection {
    /// The section of a run whose stacks were not sampled, for `why`.
    pub fn not_sampled(why: String) -> StacksSection {
        StacksSection::NotSampled(StacksNotSampled {
            sampler: "cpu-clock".into(),
            frequency_hz: None,
            samples: None,
            missing: vec![why],
        })
    }
}

/// The mean busy % of each CPU per second of the run, by second (from 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuBusy(pub BTreeMap<u64, Vec<f64>>);

impl CpuBusy {
    /// Sets `cpu_busy_pct` of each point of a report's time series that has a second here.
    pub fn fill(&self, timeseries: &mut [TimePoint]) {
        for point in timeseries.iter_mut() {
            // ceil: a partial last point (t_s 3.002) is second 3, not second 2 again.
            let second = (point.t_s.ceil() as u64).saturating_sub(1);
            if let Some(busy) = self.0.get(&second) {
                point.cpu_busy_pct = busy.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Report;
    use tailscope_loadgen::{Plan, RunTotals};

    /// A report of a small run as JSON, with `sections` added at the top level.
    fn report_with(sections: serde_json::Value) -> serde_json::Value {
        let plan = Plan::new("http://127.0.0.1:9/").unwrap();
        let mut latency =
            tailscope_loadgen::recorder::new_histogram(std::time::Duration::from_secs(60));
        latency.record(100).unwrap();
        let totals = RunTotals::of_latency(
            std::time::Duration::from_secs(1),
            Default::default(),
            latency,
        );
        let mut json = serde_json::to_value(Report::new(&plan, &totals)).unwrap();
        let top = json.as_object_mut().unwrap();
        for (k, v) in sections.as_object().unwrap() {
            top.insert(k.clone(), v.clone());
        }
        json
    }

    #[test]
    fn a_stacks_section_not_sampled_and_unknown_keys_read_back_as_written() {
        let json = report_with(serde_json::json!({
            "stacks": {"sampler": "cpu-clock", "frequency_hz": null, "samples": null, "missing": ["--stacks off"]},
            "host": "gen-1",
        }));
        let report: Report = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(
            report.sections.stacks,
            Some(StacksSection::not_sampled("--stacks off".into()))
        );
        assert_eq!(
            report.sections.other.get("host"),
            Some(&serde_json::json!("gen-1"))
        );
        assert!(report.sections.findings.is_none());
        assert_eq!(serde_json::to_value(&report).unwrap(), json);
    }

    #[test]
    fn a_section_this_version_cannot_read_is_kept_as_written() {
        let json = report_with(serde_json::json!({"profile": "[redacted]", "diagnosis": []}));
        let report: Report = serde_json::from_value(json.clone()).unwrap();
        assert!(report.sections.findings.is_none());
        assert_eq!(serde_json::to_value(&report).unwrap(), json);
    }
}
