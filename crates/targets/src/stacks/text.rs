//! The "Server inside" section of the text summary, and how a stack is said in one line.

use std::fmt::Write as _;

use super::session::InsideReport;

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
    let user: Vec<&String> = stack.iter().filter(|f| !f.ends_with("_[k]")).collect();
    let frames: Vec<&String> = if user.is_empty() {
        stack.iter().filter(|f| !is_plumbing(f)).collect()
    } else {
        user
    };
    if frames.is_empty() {
        return "no frame".into();
    }
    short(&frames)
}

/// A stack on one line: its innermost frames, leaf first.
fn short<S: AsRef<str>>(stack: &[S]) -> String {
    let mut s = stack
        .iter()
        .take(4)
        .map(|f| f.as_ref())
        .collect::<Vec<_>>()
        .join(" ← ");
    if stack.len() > 4 {
        s += " ← …";
    }
    s
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

/// The section: what stood out in the slow seconds, on and off CPU, the top stacks of the slow
/// seconds and of the others, and what was missing.
pub(crate) fn section(report: &InsideReport) -> String {
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
            "  over-represented on CPU in the slow seconds: {}{} — {:.1} % of their samples vs {:.1} % of the others",
            o.frame,
            o.location.as_ref().map_or(String::new(), |l| format!(" ({l})")),
            o.slow_share * 100.0,
            o.normal_share * 100.0
        );
    }
    for o in report.off_cpu_over_represented.iter().take(3) {
        let b = &o.blocked;
        let _ = writeln!(
            out,
            "  blocked in the slow seconds: thread {} ({}) {} — {:.1} % of its time vs {:.1} % in the others",
            b.thread,
            b.state,
            b.place(),
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
        for s in slow.iter().take(3) {
            let _ = writeln!(
                out,
                "    {:>7}  {}",
                pct(s.slow_samples, r.slow_samples),
                short(&s.stack)
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
        for s in normal.iter().take(3) {
            let _ = writeln!(
                out,
                "    {:>7}  {}",
                pct(s.samples - s.slow_samples, normal_total),
                short(&s.stack)
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
        for t in waits {
            let _ = writeln!(
                out,
                "    {:>9.1} ms  {} ({}) {}",
                t.wall_us as f64 / 1000.0,
                t.blocked.thread,
                t.blocked.state,
                t.blocked.place()
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
}
