//! The suite report's `load`: the load every run had, with the CPUs it ran on, typed.
//!
//! The JSON is byte for byte what the untyped `json!` object wrote before it (serde_json here
//! sorts a map's keys): the fields are declared in alphabetical order, and a stage's keys are
//! written sorted too. Reading, a field a hand-made or older suite lacks stays absent (None),
//! so that compare can tell "not recorded" from "recorded as null".

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::file::Load;
use crate::document::StagePlan;

/// What every run of the suite loaded (`load` in the suite's JSON report).
///
/// Fields in alphabetical order: the order of the JSON's keys. The outer `Option` of a field
/// is whether the report has the key at all; the inner one whether its value is null.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SuiteLoad {
    /// Open loop or stages: how requests arrive (`uniform`, `poisson`); null otherwise.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub arrival: Option<Option<String>>,
    /// The generator's CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpus: Option<Vec<usize>>,
    /// Connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<usize>,
    /// Each measured run's length in seconds; null for a counted run.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub duration_s: Option<Option<f64>>,
    /// Pipelining depth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<usize>,
    /// The open loop's rate (requests per second); null for a closed loop.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate: Option<Option<f64>>,
    /// Each measured run's count of requests; null for a timed run.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub requests: Option<Option<u64>>,
    /// Measured runs per target and endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<usize>,
    /// The servers' CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<Vec<usize>>,
    /// The stages each measured run followed (empty without).
    #[serde(
        default,
        serialize_with = "stages_sorted",
        skip_serializing_if = "Option::is_none"
    )]
    pub stages: Option<Vec<StagePlan>>,
    /// Generator threads; null for one per generator CPU.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub threads: Option<Option<usize>>,
    /// The warm-up's count of requests; null for a timed warm-up.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub warmup_requests: Option<Option<u64>>,
    /// The warm-up's length in seconds; null for a counted warm-up.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub warmup_s: Option<Option<f64>>,
}

impl Load {
    /// The load as the suite's JSON report records it, with the CPUs it ran on.
    pub fn report(&self, server_cpus: &[usize], client_cpus: &[usize]) -> SuiteLoad {
        SuiteLoad {
            // Open loop or stages only: a closed loop's arrival means nothing.
            arrival: Some(
                (self.rate.is_some() || !self.stages.is_empty())
                    .then(|| self.arrival.name().to_string()),
            ),
            client_cpus: Some(client_cpus.to_vec()),
            connections: Some(self.connections),
            // A counted run or warm-up has no duration: null, not the unused default.
            duration_s: Some(
                self.requests
                    .is_none()
                    .then_some(self.duration.as_secs_f64()),
            ),
            pipeline: Some(self.pipeline),
            rate: Some(self.rate),
            requests: Some(self.requests),
            runs: Some(self.runs),
            server_cpus: Some(server_cpus.to_vec()),
            stages: Some(crate::document::stage_plans(&self.stages)),
            threads: Some(self.threads),
            warmup_requests: Some(self.warmup_requests),
            warmup_s: Some(
                self.warmup_requests
                    .is_none()
                    .then_some(self.warmup.as_secs_f64()),
            ),
        }
    }
}

/// A key that is present: `Some(value)`, its value null or not (an absent key takes the
/// field's default, None).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The stages with each one's keys sorted, as the suite's report has always written them (the
/// run report's `config.stages` keeps [`StagePlan`]'s own order).
fn stages_sorted<S: Serializer>(stages: &Option<Vec<StagePlan>>, s: S) -> Result<S::Ok, S::Error> {
    /// One stage, its fields in alphabetical order.
    #[derive(Serialize)]
    struct Sorted {
        #[serde(skip_serializing_if = "Option::is_none")]
        connections: Option<usize>,
        duration_s: f64,
        #[serde(skip_serializing_if = "Option::is_none")]
        rate: Option<f64>,
    }
    let sorted: Option<Vec<Sorted>> = stages.as_ref().map(|v| {
        v.iter()
            .map(|p| Sorted {
                connections: p.connections,
                duration_s: p.duration_s,
                rate: p.rate,
            })
            .collect()
    });
    sorted.serialize(s)
}

#[cfg(test)]
mod tests;
