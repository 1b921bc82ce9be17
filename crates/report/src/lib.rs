//! The run's document and every form of it.
//!
//! [`document::Report`] is the run's typed document (the JSON of `tailscope run --json`, schema
//! in README.md): made from the generator's totals by [`document::Report::new`], or, for a
//! whole run, assembled once from its parts ([`RunParts`]: the totals, the session's
//! warnings, the target, the profile and diagnosis and the stacks as typed [`sections`]).
//! Its forms: the text summary ([`document`]'s text, with the profiler and diagnosis sections
//! of [`findings`]), the warnings, [`threshold`] checks for CI, the merge of N generators'
//! reports, the HdrHistogram log, and the pages: [`run_page`] turns a report into a page with
//! its header, key figures, charts (throughput, latency over time on a log axis, the
//! percentile spectrum, the histogram in log buckets, per-CPU busy, errors over time), the
//! slowest requests and the diagnosis; [`suite::page`] and [`compare::page`] do the same for a
//! suite and a comparison. The charts are SVG drawn by plotters when the page is built
//! ([`chart`]); the page ([`page`]) fetches nothing when opened, so it works offline, in CI
//! artefacts and on paper. Beside them: the request mix's files ([`mix_files`]), the suite's
//! file, statistics and markdown ([`suite`]), the change table and regression gate
//! ([`compare`]), and [`AnyReport`], a saved JSON report read back as its type.

mod assemble;
pub mod chart;
mod chart_style;
pub mod compare;
pub mod csv;
pub mod document;
pub mod findings;
pub mod journal;
pub mod knee;
pub mod mix_files;
pub mod page;
mod read;
mod run_page;
pub mod sections;
pub mod stats;
pub mod suite;
pub mod threshold;

pub use assemble::{GeneratorClock, RunParts};
pub use read::{AnyReport, Kind, ReadError};
pub use run_page::{run_page, run_page_so_far};
