//! The live ratatui dashboard (issue: tui).
//!
//! Not built yet. It will be a pure function of the generator's `Snapshot`: throughput,
//! latency percentiles and histogram, errors and timeouts, per-core counters and the slowest
//! requests, with one `App::update(Action)` where state changes.
