//! The sections the session adds to a run's document beside the generator's: what the
//! profiler and the rules found (`profile`, `diagnosis`, `listen_queue`,
//! `slowest_by_request`: [`Findings`]) and the server's stacks (`stacks`). They are carried
//! in the document's `extra` map for now, typed where they are made and read back here.

use tailscope_forensics::Findings;

use crate::document::Report;

impl Report {
    /// Adds what the profiler and the rules found.
    pub fn add_findings(&mut self, findings: &Findings) {
        if let Ok(serde_json::Value::Object(sections)) = serde_json::to_value(findings) {
            self.extra.extend(sections);
        }
    }

    /// What the profiler and the rules found, read back, when the report has it (a run
    /// without the profiler, or a report written by another version, has none).
    pub fn findings(&self) -> Option<Findings> {
        let sections: serde_json::Map<String, serde_json::Value> =
            ["profile", "diagnosis", "listen_queue", "slowest_by_request"]
                .into_iter()
                .filter_map(|k| Some((k.to_string(), self.extra.get(k)?.clone())))
                .collect();
        serde_json::from_value(serde_json::Value::Object(sections)).ok()
    }

    /// Adds the server's stacks (`tailscope_session::stacks::RunStacks::finish`).
    pub fn add_stacks(&mut self, section: serde_json::Value) {
        self.extra.insert("stacks".into(), section);
    }
}
