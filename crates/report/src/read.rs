//! A saved JSON report read back as its type: a run's (`tailscope run --json`) or a suite's
//! (`tailscope suite --json`).

use serde_json::Value;
use tailscope_loadgen::report::Report;

use crate::suite::SuiteReport;

/// The two kinds of report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One run.
    Run,
    /// A suite of runs.
    Suite,
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Run => "run",
            Kind::Suite => "suite",
        })
    }
}

/// A report of either kind.
#[derive(Debug, Clone, PartialEq)]
pub enum AnyReport {
    /// A run's.
    Run(Box<Report>),
    /// A suite's.
    Suite(Box<SuiteReport>),
}

/// Why a text is not a report.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Not JSON at all.
    #[error("not JSON ({0})")]
    NotJson(serde_json::Error),
    /// JSON, but neither a run's report nor a suite's.
    #[error("neither a run's nor a suite's report")]
    UnknownKind,
    /// A report of `kind` whose fields do not match that kind's schema.
    #[error("not a tailscope JSON report of its kind (a {kind} report with a field missing or wrong: {error})")]
    Schema {
        /// What it looks like.
        kind: Kind,
        /// What did not match.
        error: serde_json::Error,
    },
}

impl AnyReport {
    /// Reads a report from its JSON text.
    pub fn from_json(text: &str) -> Result<AnyReport, ReadError> {
        let value: Value = serde_json::from_str(text).map_err(ReadError::NotJson)?;
        let kind = if value["kind"] == "suite" {
            Kind::Suite
        } else if value.get("summary").is_some() && value.get("latency_us").is_some() {
            Kind::Run
        } else {
            return Err(ReadError::UnknownKind);
        };
        let schema = |error| ReadError::Schema { kind, error };
        Ok(match kind {
            Kind::Run => AnyReport::Run(Box::new(serde_json::from_value(value).map_err(schema)?)),
            Kind::Suite => {
                AnyReport::Suite(Box::new(serde_json::from_value(value).map_err(schema)?))
            }
        })
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            AnyReport::Run(_) => Kind::Run,
            AnyReport::Suite(_) => Kind::Suite,
        }
    }
}
