//! tailscope's reports for people, and the saved reports they are made from.
//!
//! [`run_page`] turns a run's [`Report`] (as `tailscope run --json` writes it) into a page with
//! its header, key figures, charts (throughput, latency over time on a log axis, the percentile
//! spectrum, the histogram in log buckets, per-CPU busy, errors over time), the slowest
//! requests and the diagnosis; [`suite::page`] and [`compare::page`] do the same for a suite
//! and a comparison. The charts are SVG drawn by plotters when the page is built ([`chart`]);
//! the page ([`page`]) fetches nothing when opened, so it works offline, in CI artefacts and
//! on paper. Beside the pages: the text summary's profiler and diagnosis sections
//! ([`findings`]), the suite's file, statistics and markdown ([`suite`]), the change table and
//! regression gate ([`compare`]), and [`AnyReport`], a saved JSON report read back as its type.

pub mod chart;
pub mod compare;
mod figures;
pub mod findings;
pub mod page;
mod read;
mod run;
pub mod stats;
pub mod suite;

pub use read::{AnyReport, Kind, ReadError};
pub use run::{run_page, run_page_so_far};
