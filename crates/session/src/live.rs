//! What a run shows while it goes: the dashboard started and fed shared snapshots, the
//! progress line of a headless run, and the page of the run so far saved from the dashboard.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tailscope_loadgen::{Phase, Plan, RunControl, RunTotals, Snapshot};
use tailscope_report::document::{progress_line, Report, TargetInfo};
use tailscope_report::sections::CpuBusy;
use tailscope_targets::Target;
use tailscope_tui::app::{Action, RunInfo};
use tailscope_tui::Feed;

use crate::run::RunConfig;

/// Starts the dashboard for this run; `None` (after saying why) if the terminal cannot be used,
/// and the run goes on headless.
pub(crate) fn start_dashboard(
    config: &RunConfig,
    target: Option<&Target>,
    agent: Option<&crate::agent::AgentSide>,
    control: &RunControl,
    saves: tailscope_tui::SaveRequests,
) -> Option<(Feed, std::thread::JoinHandle<std::io::Result<()>>)> {
    let mut info = RunInfo::new(&config.plan, target);
    if let Some(agent) = agent {
        let launched = agent.launched().map(|l| (l.name.as_str(), l.server_pid));
        info = info.through_agent(agent.host(), launched);
    }
    match tailscope_tui::spawn(info, control.clone(), saves) {
        Ok(d) => Some(d),
        Err(e) => {
            say!("tailscope: cannot start the dashboard ({e}); running headless");
            None
        }
    }
}

/// The snapshots the dashboard is handed, each reused once the dashboard has let go of it
/// (it keeps the one it shows; others may wait in its channel): a copy into a used buffer
/// allocates nothing, a fresh one a histogram of some 100 KiB ten times a second.
#[derive(Default)]
pub(crate) struct SharedSnapshots(Vec<Arc<Snapshot>>);

/// How many shared snapshots are kept for reuse.
const SHARED_SNAPSHOTS: usize = 4;

impl SharedSnapshots {
    /// `snap`, in a buffer nobody else holds.
    pub(crate) fn share(&mut self, snap: &Snapshot) -> Arc<Snapshot> {
        for kept in &mut self.0 {
            if let Some(free) = Arc::get_mut(kept) {
                free.clone_from(snap);
                return kept.clone();
            }
        }
        let fresh = Arc::new(snap.clone());
        if self.0.len() < SHARED_SNAPSHOTS {
            self.0.push(fresh.clone());
        }
        fresh
    }
}

/// One line on stderr, rewritten in place, while a headless run goes on.
#[derive(Default)]
pub(crate) struct Progress {
    last_shown: Option<Duration>,
}

impl Progress {
    pub(crate) fn show(&mut self, snap: &Snapshot) {
        let shown_recently = self
            .last_shown
            .is_some_and(|t| snap.elapsed < t + Duration::from_millis(500));
        if shown_recently && snap.phase != Phase::Done {
            return;
        }
        self.last_shown = Some(snap.elapsed);
        let line = progress_line(snap);
        say_part!("\r\x1b[2K{line}");
    }
}

/// Where the page of the run so far goes: beside the `--html` page when there is one
/// (`report-at-12s.html`), otherwise `tailscope-at-12s.html` in the working directory.
fn so_far_path(html: Option<&Path>, snap: &Snapshot) -> PathBuf {
    let at = format!("at-{}s.html", snap.elapsed.as_secs());
    match html {
        Some(p) => {
            let stem = p
                .file_stem()
                .map_or("tailscope".into(), |s| s.to_string_lossy());
            p.with_file_name(format!("{stem}-{at}"))
        }
        None => PathBuf::from(format!("tailscope-{at}")),
    }
}

/// Saves the HTML page of the run so far (the dashboard's `s`) on a thread of its own, so the
/// run's snapshots are not held up by the drawing, and tells the dashboard where it went.
pub(crate) fn save_so_far(
    plan: &Plan,
    snap: &Snapshot,
    cpu_busy: CpuBusy,
    target: Option<&TargetInfo>,
    html: Option<&Path>,
    feed: &Feed,
) {
    let path = so_far_path(html, snap);
    let (plan, snap, target, to_dashboard) =
        (plan.clone(), snap.clone(), target.cloned(), feed.clone());
    let saving = std::thread::Builder::new()
        .name("tailscope-save".into())
        .spawn(move || {
            let mut report = Report::new(&plan, &RunTotals::so_far(&snap));
            report.target = target;
            cpu_busy.fill(&mut report.timeseries);
            report.warnings.insert(
                0,
                format!(
                    "Saved from the dashboard {:.1} s into the run while it went on: connect times and the uncorrected latency are not in this page, the time series holds the last two minutes, and the profile (but for per-CPU busy) and the diagnosis come at the end.",
                    snap.elapsed.as_secs_f64()
                ),
            );
            let note = match std::fs::write(&path, tailscope_report::run_page_so_far(&report)) {
                Ok(()) => format!("saved {}", path.display()),
                Err(e) => format!("cannot save {}: {e}", path.display()),
            };
            let _ = to_dashboard.send(Action::Note(note));
        });
    if let Err(e) = saving {
        let _ = feed.send(Action::Note(format!("cannot save the report: {e}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailscope_loadgen::aggregate::Aggregator;

    #[test]
    fn the_dashboard_s_snapshots_are_reused_once_it_lets_go() {
        let agg = Aggregator::new(1, Duration::from_secs(60), Duration::from_millis(100), 3);
        let mut snap = agg.new_snapshot();
        let mut shared = SharedSnapshots::default();
        let at = |s| {
            move |snap: &mut Snapshot| {
                snap.elapsed = Duration::from_secs(s);
                snap.histogram.record(s * 1_000).unwrap();
            }
        };
        at(1)(&mut snap);
        let first = shared.share(&snap);
        at(2)(&mut snap);
        // The dashboard still holds the first: the second goes elsewhere.
        let second = shared.share(&snap);
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!((first.histogram.len(), second.histogram.len()), (1, 2));
        let first_buffer = Arc::as_ptr(&first);
        drop(first);
        at(3)(&mut snap);
        let third = shared.share(&snap);
        assert_eq!(
            Arc::as_ptr(&third),
            first_buffer,
            "the buffer let go of is reused"
        );
        assert_eq!(third.elapsed, Duration::from_secs(3));
        assert_eq!(
            third.histogram.len(),
            3,
            "with the run so far, not the old copy"
        );
        assert_eq!(
            second.elapsed,
            Duration::from_secs(2),
            "one still held is untouched"
        );
    }
}
