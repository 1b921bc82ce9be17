//! What the profiler and the rules found over a run: the report's typed sections.

use serde::{Deserialize, Serialize};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::profile::Profile;
use tailscope_targets::stacks::Inside;

use crate::{pauses, Cause, Diagnosis, HeldBack, RequestShare};

/// What the profiler and the rules found over a run: the report's `profile`, `diagnosis` and
/// `listen_queue`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Findings {
    /// What the profiler measured.
    pub profile: Profile,
    /// The causes named, most specific first.
    pub diagnosis: Vec<Diagnosis>,
    /// Causes whose signature was there but that a veto kept from being named, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diagnosis_held_back: Vec<HeldBack>,
    /// The accept queues of the loaded listeners, when watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen_queue: Option<ListenReport>,
    /// In a mix: which requests the run's slowest were, the commonest first (empty for a
    /// single request).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slowest_by_request: Vec<RequestShare>,
}

impl Findings {
    /// Joins what the server was doing (its stacks over the run) to each diagnosis: the
    /// frame or wait that stands out in the slow seconds, the one the stack lists name first.
    /// A `server_stall` that the stacks explain is refined ([`crate::pauses`]): the causes
    /// they show (`gc_pause`, `blocking_io`, `lock_contention`, `cpu_burn`) are named before
    /// it, each with its evidence.
    pub fn look_inside(&mut self, inside: &Inside) {
        for d in &mut self.diagnosis {
            let window = d.window.map(|w| (w.start_s, w.end_s));
            d.inside = Some(inside.explain(window));
        }
        if let Some(at) = self
            .diagnosis
            .iter()
            .position(|d| d.cause == Cause::ServerStall)
        {
            let refined = pauses::refine(&self.diagnosis[at], &pauses::Seen::of(inside));
            self.diagnosis.splice(at..at, refined);
        }
    }
}
