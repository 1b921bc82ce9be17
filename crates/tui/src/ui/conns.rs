//! The connections lines of the status & errors panel: the load's connections open,
//! opening and failed while they ramp up or fail, and the held populations (`--idle-conns`,
//! `--slow-conns`) open, closed by the server and failed, whenever the run has them.

use ratatui::text::{Line, Span};
use tailscope_loadgen::conns::HeldKind;
use tailscope_loadgen::Snapshot;

use super::fit::Fields;
use super::format::fmt_count;
use super::theme::{fg, BAD, DIM};

/// A count after its label (`failed` after, `server closed` before), in red when it is
/// a failure that happened.
fn failures(n: u64, before: &str, after: &str) -> Span<'static> {
    let style = if n > 0 { fg(BAD) } else { fg(DIM) };
    Span::styled(format!("{before}{}{after}", fmt_count(n)), style)
}

/// The lines, each fitted to `width`; none when there is nothing to say (every load
/// connection opened, none failed, no held ones).
pub fn lines(s: &Snapshot, asked: usize, width: usize) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let load = s.conns.load;
    let failed = s.totals.connect_failures;
    let held_seen = |k: HeldKind| {
        let c = &s.totals.held[k.index()];
        let g = &s.conns.held[k.index()];
        c.opened + c.connect_failures + g.opening > 0
    };
    let any_held = HeldKind::ALL.into_iter().any(held_seen);
    let ramping = (s.conns_peak.load.open as usize) < asked;
    if ramping || failed > 0 || any_held {
        out.push(
            Fields::new(" · ")
                .add(0, format!("connections: {} open", fmt_count(load.open)))
                .add(1, format!("{} opening", fmt_count(load.opening)))
                .add(2, failures(failed, "", " failed"))
                .fit(width),
        );
    }
    for (kind, name) in [(HeldKind::Idle, "idle"), (HeldKind::Slow, "slow")] {
        if !held_seen(kind) {
            continue;
        }
        let c = &s.totals.held[kind.index()];
        let g = &s.conns.held[kind.index()];
        out.push(
            Fields::new(" · ")
                .add(0, format!("{name}: {} open", fmt_count(g.open)))
                .add(1, failures(c.closed_by_server, "server closed ", ""))
                .add(2, failures(c.connect_failures + c.failed, "", " failed"))
                .add(3, format!("{} opening", fmt_count(g.opening)))
                .fit(width),
        );
    }
    out
}
