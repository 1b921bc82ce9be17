//! How long the server's threads were runnable but waited for a CPU: the scheduler's
//! `run_delay` (the second field of `/proc/PID/task/TID/schedstat`, in ns), summed over every
//! thread of the process tree. A server that others keep off its CPUs waits here; a server
//! that stopped by itself (a stall: blocked, sleeping, SIGSTOPped) does not, however busy the
//! machine. That is what tells `cpu_contention` from `server_stall`.

use std::collections::HashMap;

/// Follows the threads' `run_delay` from sample to sample.
#[derive(Debug, Default)]
pub(crate) struct RunQueue {
    /// Each thread's `run_delay` at the last sample, by tid.
    last: HashMap<u32, u64>,
    /// Each thread's time on a CPU at the last sample, by tid.
    last_cpu: HashMap<u32, u64>,
    /// Each thread's time on a CPU between the last two samples, in ns, by tid: which threads
    /// do the server's work (a Node event loop) and which mostly wait beside them (V8's
    /// helpers, waiting for the CPU the spinning loop holds).
    ran_ns: HashMap<u32, u64>,
    /// Waited since [`RunQueue::restart`], in ns; `None` until a sample could read one.
    total_ns: Option<u64>,
}

/// A task's `run_delay` in ns, from its schedstat line (`cpu_time run_delay timeslices`).
fn run_delay(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().nth(1)?.parse().ok()
}

/// A task's time on a CPU in ns, the first field of its schedstat line.
fn cpu_time(schedstat: &str) -> Option<u64> {
    schedstat.split_whitespace().next()?.parse().ok()
}

/// Each thread's figure now less the one at the last sample (a thread born since counts from
/// its start).
fn since(now: &HashMap<u32, u64>, last: &HashMap<u32, u64>) -> HashMap<u32, u64> {
    now.iter()
        .map(|(tid, v)| (*tid, v.saturating_sub(last.get(tid).copied().unwrap_or(0))))
        .collect()
}

impl RunQueue {
    /// The threads of `pids` and their `run_delay` now (unreadable ones left out: a thread
    /// that exited between listing and reading).
    fn read(pids: &[i32]) -> (HashMap<u32, u64>, HashMap<u32, u64>) {
        let mut now = HashMap::new();
        let mut cpu = HashMap::new();
        for pid in pids {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else {
                    continue;
                };
                let Ok(line) = std::fs::read_to_string(task.path().join("schedstat")) else {
                    continue;
                };
                if let (Some(d), Some(c)) = (run_delay(&line), cpu_time(&line)) {
                    now.insert(tid, d);
                    cpu.insert(tid, c);
                }
            }
        }
        (now, cpu)
    }

    /// Starts the window: the threads' figures now are the baseline.
    pub(crate) fn restart(&mut self, pids: &[i32]) {
        (self.last, self.last_cpu) = Self::read(pids);
        self.ran_ns.clear();
        self.total_ns = None;
    }

    /// The time each thread of `pids` waited for a CPU since the last sample (a thread born
    /// since counts from its start), in ns, by tid (those that waited); `None` when no
    /// thread's schedstat is readable.
    pub(crate) fn sample(&mut self, pids: &[i32]) -> Option<HashMap<u32, u64>> {
        let (now, cpu) = Self::read(pids);
        if now.is_empty() {
            self.ran_ns.clear();
            return None;
        }
        let mut waited = since(&now, &self.last);
        waited.retain(|_, w| *w > 0);
        self.ran_ns = since(&cpu, &self.last_cpu);
        self.last = now;
        self.last_cpu = cpu;
        self.total_ns = Some(self.total_ns.unwrap_or(0) + waited.values().sum::<u64>());
        Some(waited)
    }

    /// Each thread's time on a CPU between the last two samples, in ns, by tid (empty when
    /// no thread's schedstat was readable).
    pub(crate) fn ran_ns(&self) -> &HashMap<u32, u64> {
        &self.ran_ns
    }

    /// Waited since the window began, in seconds.
    pub(crate) fn total_s(&self) -> Option<f64> {
        self.total_ns.map(|ns| ns as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_field_is_the_wait() {
        assert_eq!(run_delay("1344303 86206 1\n"), Some(86206));
        assert_eq!(cpu_time("1344303 86206 1\n"), Some(1344303));
        assert_eq!(run_delay("1344303"), None);
        assert_eq!(run_delay(""), None);
    }

    /// Two threads kept runnable on one CPU take turns: each waits for the other.
    #[test]
    fn threads_sharing_a_cpu_wait_for_it() {
        let me = [std::process::id() as i32];
        let mut q = RunQueue::default();
        q.restart(&me);
        if q.last.is_empty() {
            eprintln!("skipped: no schedstat here (CONFIG_SCHED_INFO off)");
            return;
        }
        let cpu = crate::cpus::available()[0];
        let spin = move || {
            core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
            let end = std::time::Instant::now() + std::time::Duration::from_millis(300);
            while std::time::Instant::now() < end {
                std::hint::spin_loop();
            }
        };
        // Sampled while both still run: a thread's figures go with it when it exits.
        let (c, d) = (std::thread::spawn(spin), std::thread::spawn(spin));
        std::thread::sleep(std::time::Duration::from_millis(250));
        let waited: u64 = q.sample(&me).unwrap().values().sum();
        c.join().unwrap();
        d.join().unwrap();
        assert!(waited > 50_000_000, "waited {waited} ns");
    }
}
