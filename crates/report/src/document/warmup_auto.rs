//! `run --warmup auto`: how long the warm-up lasted and whether the figures settled in it.

use serde::{Deserialize, Serialize};

/// The automatic warm-up: the JSON's `warmup_auto`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WarmupAuto {
    /// Whether the per-second throughput and p99 settled (MSER) within the cap.
    pub settled: bool,
    /// The seconds it took them to settle: the later of the two series' warm-ups; null when
    /// they did not.
    pub settled_after_s: Option<f64>,
    /// The whole seconds judged (MSER needs 10 to judge at all).
    pub judged_seconds: usize,
    /// How long the warm-up's load lasted before the measured run began (s).
    pub lasted_s: f64,
    /// The longest it may last (s).
    pub cap_s: f64,
}

impl WarmupAuto {
    /// The text summary's words for it, after the duration: `after an automatic warm-up of
    /// 10.3 s (the figures settled after 4 s, by MSER over 10 s)`.
    pub fn describe(&self) -> String {
        match self.settled_after_s {
            Some(after) => format!(
                "after an automatic warm-up of {:.1} s: the per-second figures settled after {after:.0} s (MSER over {} s)",
                self.lasted_s, self.judged_seconds
            ),
            None => format!(
                "after an automatic warm-up of {:.1} s that did not settle",
                self.lasted_s
            ),
        }
    }

    /// The warning of a warm-up that did not settle.
    pub fn warning(&self) -> Option<String> {
        (!self.settled).then(|| {
            format!(
                "--warmup auto: the per-second throughput and p99 had not settled after {:.0} s of warm-up (MSER): the run was measured as it was, still changing",
                self.lasted_s
            )
        })
    }
}
