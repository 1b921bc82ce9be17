//! A saved JSON report read back as its type: a run's (`tailscope run --json`) or a suite's
//! (`tailscope suite --json`).

use crate::document::Report;
use serde_json::Value;

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
    /// A report written by a newer tailscope, in a schema this one does not know: its fields
    /// may mean something else, so it is not read as if they did not.
    #[error("a {kind} report of schema_version {version}, newer than this tailscope reads (up to {supported}): read it with the tailscope that wrote it ({writer}) or a newer one")]
    NewerSchema {
        /// What it looks like.
        kind: Kind,
        /// Its `schema_version`.
        version: u64,
        /// The highest this build reads.
        supported: u32,
        /// `tool.version` of the writer, or "an unknown version".
        writer: String,
    },
    /// A run's report with a histogram that cannot be decoded: read on, its pages would
    /// show empty charts as if nothing had been measured.
    #[error(
        "a damaged run report: its {field} cannot be decoded (the file was damaged or edited)"
    )]
    DamagedHistogram {
        /// The JSON field (`histogram.data`).
        field: String,
    },
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
        let supported = match kind {
            Kind::Run => crate::document::SCHEMA_VERSION,
            Kind::Suite => crate::suite::SCHEMA_VERSION,
        };
        if let Some(version) = value["schema_version"]
            .as_u64()
            .filter(|v| *v > u64::from(supported))
        {
            return Err(ReadError::NewerSchema {
                kind,
                version,
                supported,
                writer: value["tool"]["version"].as_str().map_or_else(
                    || "an unknown version".to_string(),
                    |v| format!("tailscope {v}"),
                ),
            });
        }
        let schema = |error| ReadError::Schema { kind, error };
        Ok(match kind {
            Kind::Run => {
                let run: Report = serde_json::from_value(value).map_err(schema)?;
                if let Some(field) = run.undecodable_histogram() {
                    return Err(ReadError::DamagedHistogram { field });
                }
                AnyReport::Run(Box::new(run))
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_of_a_newer_schema_is_refused_saying_so() {
        let run = r#"{"schema_version": 7, "tool": {"name": "tailscope", "version": "9.0.0"}, "summary": {}, "latency_us": null}"#;
        let err = AnyReport::from_json(run).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "a run report of schema_version 7, newer than this tailscope reads (up to 1)"
            ),
            "{err}"
        );
        assert!(err.contains("tailscope 9.0.0"), "{err}");
        let suite = r#"{"schema_version": 2, "kind": "suite", "results": []}"#;
        let err = AnyReport::from_json(suite).unwrap_err().to_string();
        assert!(err.contains("a suite report of schema_version 2"), "{err}");
        assert!(err.contains("an unknown version"), "{err}");
        // The current version goes on to the schema check.
        let current = r#"{"schema_version": 1, "kind": "suite", "results": []}"#;
        assert!(matches!(
            AnyReport::from_json(current),
            Err(ReadError::Schema { .. })
        ));
    }
}
