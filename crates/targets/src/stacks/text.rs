//! The "Server inside" section of the text summary, and how a stack is said in one line.

use std::fmt::Write as _;

use super::on_cpu::OverRepresented;
use super::samplers::InsideReport;

/// Kernel frames of the scheduler and of the system call entry: where every wait ends, so they
/// say nothing about which wait it was.
fn is_plumbing(frame: &str) -> bool {
    let Some(f) = frame.strip_suffix("_[k]") else {
        return false;
    };
    f.contains("schedule")
        || f.starts_with("entry_SYSCALL")
        || f.starts_with("do_syscall")
        || f.starts_with("x64_sys_call")
        || f.starts_with("__x64_sys_")
        || f.starts_with("__arm64_sys_")
        || f.starts_with("el0")
        || f.starts_with("finish_task_switch")
}

/// Where in the code a wait was: its first user-space frames (the caller that waited), or,
/// for a thread with none (a kernel thread, a stack cut short), its kernel frames below the
/// scheduler; `module+0xoffset` frames stay as they are.
pub(crate) fn call_site(stack: &[String]) -> String {
    let frames = site_frames(stack);
    if frames.is_empty() {
        return "no frame".into();
    }
    short(&frames)
}

/// The frames [`call_site`] says, leaf first.
fn site_frames(stack: &[String]) -> Vec<&String> {
    let user: Vec<&String> = stack.iter().filter(|f| !f.ends_with("_[k]")).collect();
    if user.is_empty() {
        stack.iter().filter(|f| !is_plumbing(f)).collect()
    } else {
        user
    }
}

/// The places of waits shown together ([`call_site`] each), told apart as [`distinct`] tells
/// stacks apart.
fn distinct_places(blocked: &[&super::off_cpu::Blocked]) -> Vec<String> {
    let frames: Vec<Vec<&String>> = blocked.iter().map(|b| site_frames(&b.stack)).collect();
    let stacks: Vec<&[&String]> = frames.iter().map(Vec::as_slice).collect();
    let context: Vec<String> = blocked
        .iter()
        .map(|b| format!("{} {} {}", b.thread, b.state, b.syscall))
        .collect();
    distinct(&stacks, &context)
        .into_iter()
        .zip(blocked)
        .map(|(site, b)| b.place_at(if site.is_empty() { "no frame" } else { &site }))
        .collect()
}

/// Frames a stack's line shows before it is cut.
const SHOWN_FRAMES: usize = 4;

/// A stack on one line: its innermost frames, leaf first.
fn short<S: AsRef<str>>(stack: &[S]) -> String {
    shown(stack, &[])
}

/// A stack on one line: its innermost frames, leaf first, and the frames at `also` (indices
/// past the first [`SHOWN_FRAMES`]), each run of frames left out said by `…`.
fn shown<S: AsRef<str>>(stack: &[S], also: &[usize]) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let mut last: Option<usize> = None;
    for (i, frame) in stack.iter().enumerate() {
        if i >= SHOWN_FRAMES && !also.contains(&i) {
            continue;
        }
        if last.is_some_and(|l| i > l + 1) {
            parts.push("…");
        }
        parts.push(frame.as_ref());
        last = Some(i);
    }
    if last.is_some_and(|l| l + 1 < stack.len()) {
        parts.push("…");
    }
    parts.join(" ← ")
}

/// Stacks shown together on one line each, told apart: where two would read the same (the
/// same `context[i]`, their stacks differing only past the cut) both show, after their first
/// frames, the frames where they part (two "Server inside" lines once read identical).
fn distinct<S: AsRef<str>>(stacks: &[&[S]], context: &[String]) -> Vec<String> {
    let plain: Vec<(String, &String)> = stacks.iter().map(|s| short(s)).zip(context).collect();
    let common = |a: &[S], b: &[S]| {
        a.iter()
            .zip(b)
            .take_while(|(x, y)| x.as_ref() == y.as_ref())
            .count()
    };
    (0..stacks.len())
        .map(|i| {
            let mut group: Vec<usize> = (0..stacks.len())
                .filter(|&j| plain[j] == plain[i])
                .collect();
            if group.len() == 1 {
                return plain[i].0.clone();
            }
            // The same frame indices for the whole group, every pair's parting index among
            // them: before it two lines show the same frames, at it different ones (or one
            // line ends), so no two of the group read alike.
            group.sort_unstable();
            let mut also: Vec<usize> = Vec::new();
            for (k, &a) in group.iter().enumerate() {
                for &b in &group[k + 1..] {
                    also.push(common(stacks[a], stacks[b]));
                }
            }
            shown(stacks[i], &also)
        })
        .collect()
}

/// The lines of on-CPU stacks shown together, told apart ([`distinct`]).
fn on_cpu_lines(top: &[&&super::on_cpu::StackCount]) -> Vec<String> {
    let stacks: Vec<&[String]> = top.iter().map(|s| s.stack.as_slice()).collect();
    distinct(&stacks, &vec![String::new(); stacks.len()])
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "n/a".into()
    } else {
        format!("{:.1} %", part as f64 * 100.0 / whole as f64)
    }
}

fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What a frame's excess was when it is a kernel spin lock's wait (empty otherwise): said
/// beside it, so that a lock another CPU held is not read as the server's own work.
pub(crate) fn lock_wait_note(o: &OverRepresented) -> String {
    o.lock_wait.as_ref().map_or(String::new(), |taker| {
        format!(
            "; spinning for a kernel lock taken in {taker}: the CPU waited for another to let \
             the lock go (the kernel's packet delivery, another of the server's threads, or, on a VM, \
             a holder the hypervisor preempted: see the CPUs' steal), not for the server's own work"
        )
    })
}

/// The section: what stood out in the slow seconds, on and off CPU, the top stacks of the slow
/// seconds and of the others, and what was missing.
pub fn section(report: &InsideReport) -> String {
    let r = &report.on_cpu;
    let mut out = String::new();
    let normal_total = r.samples - r.slow_samples;
    let _ = writeln!(
        out,
        "\nServer inside (on-CPU stacks, {} at {} Hz per CPU: {} samples, {} in {} slow second(s); off-CPU: {}):",
        r.sampler,
        r.frequency_hz,
        count(r.samples),
        count(r.slow_samples),
        r.slow_seconds.len(),
        report.off_cpu_sampler.as_deref().unwrap_or("n/a")
    );
    for o in r.over_represented.iter().take(3) {
        let _ = writeln!(
            out,
            "  over-represented on CPU in the slow seconds: {}{} — {:.1} % of their samples vs {:.1} % of the others{}",
            o.frame,
            o.location.as_ref().map_or(String::new(), |l| format!(" ({l})")),
            o.slow_share * 100.0,
            o.normal_share * 100.0,
            lock_wait_note(o)
        );
    }
    let blocked: Vec<_> = report.off_cpu_over_represented.iter().take(3).collect();
    let places = distinct_places(&blocked.iter().map(|o| &o.blocked).collect::<Vec<_>>());
    for (o, place) in blocked.iter().zip(places) {
        let b = &o.blocked;
        let _ = writeln!(
            out,
            "  blocked in the slow seconds: thread {} ({}) {place} — {:.1} % of its time vs {:.1} % in the others",
            b.thread,
            b.state,
            o.slow_share * 100.0,
            o.normal_share * 100.0
        );
    }
    if r.over_represented.is_empty()
        && report.off_cpu_over_represented.is_empty()
        && !r.slow_seconds.is_empty()
    {
        let _ = writeln!(
            out,
            "  no stack or wait is clearly over-represented in the slow seconds"
        );
    }
    let mut slow: Vec<_> = r.on_cpu.iter().filter(|s| s.slow_samples > 0).collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.slow_samples));
    if !slow.is_empty() {
        let _ = writeln!(out, "  top on-CPU stacks in the slow seconds:");
        let top: Vec<_> = slow.iter().take(3).collect();
        for (s, line) in top.iter().zip(on_cpu_lines(&top)) {
            let _ = writeln!(
                out,
                "    {:>7}  {line}",
                pct(s.slow_samples, r.slow_samples)
            );
        }
    }
    let mut normal: Vec<_> = r
        .on_cpu
        .iter()
        .filter(|s| s.samples > s.slow_samples)
        .collect();
    normal.sort_by_key(|s| std::cmp::Reverse(s.samples - s.slow_samples));
    if !normal.is_empty() {
        let _ = writeln!(
            out,
            "  top on-CPU stacks in the {}:",
            if r.slow_seconds.is_empty() {
                "run"
            } else {
                "other seconds"
            }
        );
        let top: Vec<_> = normal.iter().take(3).collect();
        for (s, line) in top.iter().zip(on_cpu_lines(&top)) {
            let _ = writeln!(
                out,
                "    {:>7}  {line}",
                pct(s.samples - s.slow_samples, normal_total)
            );
        }
    }
    let waits: Vec<_> = report
        .off_cpu
        .iter()
        .filter(|t| t.blocked.state != "R")
        .take(3)
        .collect();
    if !waits.is_empty() {
        let _ = writeln!(out, "  longest off-CPU waits over the run (thread-time):");
        let places = distinct_places(&waits.iter().map(|t| &t.blocked).collect::<Vec<_>>());
        for (t, place) in waits.iter().zip(places) {
            let _ = writeln!(
                out,
                "    {:>9.1} ms  {} ({}) {place}",
                t.wall_us as f64 / 1000.0,
                t.blocked.thread,
                t.blocked.state,
            );
        }
    }
    for m in &r.missing {
        let _ = writeln!(out, "  missing: {m}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_wait_is_said_by_its_caller() {
        let stack = v(&[
            "__schedule_[k]",
            "schedule_[k]",
            "futex_wait_[k]",
            "__x64_sys_futex_[k]",
            "do_syscall_64_[k]",
            "syscall",
            "lock_contended",
            "handle",
            "serve",
            "main",
        ]);
        assert_eq!(
            call_site(&stack),
            "syscall ← lock_contended ← handle ← serve ← …"
        );
        assert_eq!(
            call_site(&v(&["__schedule_[k]", "worker_thread_[k]", "kthread_[k]"])),
            "worker_thread_[k] ← kthread_[k]"
        );
        assert_eq!(call_site(&[]), "no frame");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(pct(1, 0), "n/a");
    }

    #[test]
    fn stacks_that_differ_past_the_cut_read_differently() {
        let a = v(&["leaf", "parse", "handle", "serve", "loop", "from_a", "main"]);
        let b = v(&["leaf", "parse", "handle", "serve", "loop", "from_b", "main"]);
        let c = v(&["other", "parse", "handle", "serve", "loop", "main"]);
        // Cut after four frames, a and b read the same.
        assert_eq!(short(&a), short(&b));
        let lines = distinct(
            &[&a[..], &b[..], &c[..]],
            &[String::new(), String::new(), String::new()],
        );
        assert_eq!(
            lines,
            [
                "leaf ← parse ← handle ← serve ← … ← from_a ← …",
                "leaf ← parse ← handle ← serve ← … ← from_b ← …",
                // A line that was distinct already is left as it was.
                "other ← parse ← handle ← serve ← …",
            ]
        );
        // One stack the other's beginning: the longer shows where it goes on.
        let d = v(&["leaf", "parse", "handle", "serve", "loop"]);
        let e = v(&["leaf", "parse", "handle", "serve", "loop", "deeper"]);
        let lines = distinct(&[&d[..], &e[..]], &[String::new(), String::new()]);
        assert_ne!(lines[0], lines[1], "{lines:?}");
        assert_eq!(lines[1], "leaf ← parse ← handle ← serve ← … ← deeper");
        // Three alike, parting at two depths: all three read differently.
        let f = v(&["l", "a", "b", "c", "d", "x", "p"]);
        let g = v(&["l", "a", "b", "c", "d", "x", "q"]);
        let h = v(&["l", "a", "b", "c", "d", "y", "p"]);
        let lines = distinct(&[&f[..], &g[..], &h[..]], &vec![String::new(); 3]);
        assert_eq!(lines[0], "l ← a ← b ← c ← … ← x ← p");
        assert_eq!(lines[1], "l ← a ← b ← c ← … ← x ← q");
        assert_eq!(lines[2], "l ← a ← b ← c ← … ← y ← p");
        // Another context (another thread) is no twin.
        let lines = distinct(&[&a[..], &b[..]], &["t1".to_string(), "t2".to_string()]);
        assert_eq!(lines[0], lines[1]);
    }

    #[test]
    fn two_waits_that_differ_past_the_cut_read_differently() {
        let wait = |caller: &str| super::super::off_cpu::Blocked {
            thread: "node".into(),
            state: "S".into(),
            syscall: "epoll_wait".into(),
            stack: v(&[
                "__schedule_[k]",
                "epoll_wait",
                "uv_run",
                "node_start",
                "start",
                "run",
                caller,
                "main",
            ]),
        };
        let (a, b) = (wait("from_a"), wait("from_b"));
        assert_eq!(a.place(), b.place(), "the plain lines read the same");
        let places = distinct_places(&[&a, &b]);
        assert_eq!(
            places[0],
            "in epoll_wait: epoll_wait ← uv_run ← node_start ← start ← … ← from_a ← …"
        );
        assert_eq!(
            places[1],
            "in epoll_wait: epoll_wait ← uv_run ← node_start ← start ← … ← from_b ← …"
        );
    }
}
