//! Per-CPU utilisation from /proc/stat, as deltas between two samples.
//!
//! The first piece of the profiler: the TUI's per-core bars read it every tick. A machine
//! where /proc/stat cannot be read gives `None`, shown as "n/a", never as zeros.

use procfs::CurrentSI;

/// What one CPU did between two samples, in percent of the interval.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct CpuUsage {
    /// CPU number (its position in /proc/stat).
    pub cpu: usize,
    /// User time, nice included.
    pub user_pct: f64,
    /// Kernel time outside interrupts.
    pub system_pct: f64,
    /// Hard interrupts.
    pub irq_pct: f64,
    /// Soft interrupts (network receive and transmit work lands here).
    pub softirq_pct: f64,
    /// Time the hypervisor gave to someone else.
    pub steal_pct: f64,
    /// Idle, iowait included.
    pub idle_pct: f64,
}

impl CpuUsage {
    /// Everything but idle.
    pub fn busy_pct(&self) -> f64 {
        (100.0 - self.idle_pct).clamp(0.0, 100.0)
    }

    /// Each CPU's mean over equally long samples, CPUs matched by number (a sample that
    /// lacks a CPU counts for those it has), in CPU order.
    pub fn mean(samples: &[Vec<CpuUsage>]) -> Vec<CpuUsage> {
        let cpus: std::collections::BTreeSet<usize> =
            samples.iter().flatten().map(|c| c.cpu).collect();
        cpus.into_iter()
            .map(|cpu| {
                let of_cpu: Vec<&CpuUsage> =
                    samples.iter().flatten().filter(|c| c.cpu == cpu).collect();
                let n = of_cpu.len() as f64;
                let avg = |f: fn(&CpuUsage) -> f64| of_cpu.iter().map(|c| f(c)).sum::<f64>() / n;
                CpuUsage {
                    cpu,
                    user_pct: avg(|c| c.user_pct),
                    system_pct: avg(|c| c.system_pct),
                    irq_pct: avg(|c| c.irq_pct),
                    softirq_pct: avg(|c| c.softirq_pct),
                    steal_pct: avg(|c| c.steal_pct),
                    idle_pct: avg(|c| c.idle_pct),
                }
            })
            .collect()
    }
}

/// Cumulative ticks of one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CpuTicks {
    /// user + nice.
    pub user: u64,
    /// system.
    pub system: u64,
    /// irq.
    pub irq: u64,
    /// softirq.
    pub softirq: u64,
    /// steal.
    pub steal: u64,
    /// idle + iowait.
    pub idle: u64,
}

impl CpuTicks {
    fn total(&self) -> u64 {
        self.user + self.system + self.irq + self.softirq + self.steal + self.idle
    }
}

/// The usage of one CPU between two cumulative samples.
pub fn usage(cpu: usize, before: &CpuTicks, after: &CpuTicks) -> CpuUsage {
    let total = after.total().saturating_sub(before.total()).max(1) as f64;
    let pct = |a: u64, b: u64| 100.0 * a.saturating_sub(b) as f64 / total;
    CpuUsage {
        cpu,
        user_pct: pct(after.user, before.user),
        system_pct: pct(after.system, before.system),
        irq_pct: pct(after.irq, before.irq),
        softirq_pct: pct(after.softirq, before.softirq),
        steal_pct: pct(after.steal, before.steal),
        idle_pct: pct(after.idle, before.idle),
    }
}

/// Reads every CPU's cumulative ticks.
pub fn read_ticks() -> Option<Vec<CpuTicks>> {
    let stats = procfs::KernelStats::current().ok()?;
    Some(
        stats
            .cpu_time
            .iter()
            .map(|c| CpuTicks {
                user: c.user + c.nice,
                system: c.system,
                irq: c.irq.unwrap_or(0),
                softirq: c.softirq.unwrap_or(0),
                steal: c.steal.unwrap_or(0),
                idle: c.idle + c.iowait.unwrap_or(0),
            })
            .collect(),
    )
}

/// Samples /proc/stat and turns consecutive samples into per-CPU usage.
#[derive(Debug, Default)]
pub struct CpuSampler {
    last: Option<Vec<CpuTicks>>,
}

impl CpuSampler {
    /// A sampler; the first [`CpuSampler::sample`] only sets the starting point.
    pub fn new() -> Self {
        CpuSampler { last: read_ticks() }
    }

    /// Usage of every CPU since the previous sample; `None` when /proc/stat is unreadable.
    pub fn sample(&mut self) -> Option<Vec<CpuUsage>> {
        let now = read_ticks()?;
        let out = self.last.as_ref().map(|before| {
            before
                .iter()
                .zip(&now)
                .enumerate()
                .map(|(cpu, (b, a))| usage(cpu, b, a))
                .collect()
        });
        self.last = Some(now);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_of_jiffy_steps_is_the_second_s_share() {
        let busy = |cpu, pct: f64| CpuUsage {
            cpu,
            user_pct: pct,
            idle_pct: 100.0 - pct,
            ..CpuUsage::default()
        };
        // A core 15 % busy reads 10 % and 20 % in alternate 100 ms ticks.
        let samples: Vec<Vec<CpuUsage>> = (0..10)
            .map(|i| {
                vec![
                    busy(0, if i % 2 == 0 { 10.0 } else { 20.0 }),
                    busy(1, 100.0),
                ]
            })
            .collect();
        let mean = CpuUsage::mean(&samples);
        assert_eq!(mean.len(), 2);
        assert!((mean[0].busy_pct() - 15.0).abs() < 1e-9, "{mean:?}");
        assert_eq!(mean[1].cpu, 1);
        assert!((mean[1].user_pct - 100.0).abs() < 1e-9);
        assert!(CpuUsage::mean(&[]).is_empty());
        // A tick without CPU 0 does not shift CPU 1's figures under CPU 0's name.
        let gap = CpuUsage::mean(&[vec![busy(0, 50.0), busy(1, 100.0)], vec![busy(1, 100.0)]]);
        assert_eq!(gap[0].cpu, 0);
        assert!((gap[0].busy_pct() - 50.0).abs() < 1e-9, "{gap:?}");
        assert!((gap[1].busy_pct() - 100.0).abs() < 1e-9, "{gap:?}");
    }

    #[test]
    fn deltas_become_percentages() {
        let before = CpuTicks {
            user: 100,
            system: 50,
            irq: 0,
            softirq: 10,
            steal: 0,
            idle: 1000,
        };
        let after = CpuTicks {
            user: 130,
            system: 70,
            irq: 0,
            softirq: 20,
            steal: 0,
            idle: 1040,
        };
        let u = usage(1, &before, &after);
        assert_eq!(u.cpu, 1);
        assert!((u.user_pct - 30.0).abs() < 1e-9);
        assert!((u.system_pct - 20.0).abs() < 1e-9);
        assert!((u.softirq_pct - 10.0).abs() < 1e-9);
        assert!((u.idle_pct - 40.0).abs() < 1e-9);
        assert!((u.busy_pct() - 60.0).abs() < 1e-9);
    }

    #[test]
    fn this_machine_reports_every_cpu() {
        let Some(ticks) = read_ticks() else {
            eprintln!("skipped: /proc/stat unreadable here");
            return;
        };
        assert!(!ticks.is_empty());
        let mut sampler = CpuSampler::new();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let usage = sampler.sample().unwrap();
        assert_eq!(usage.len(), ticks.len());
        for u in usage {
            let sum =
                u.user_pct + u.system_pct + u.irq_pct + u.softirq_pct + u.steal_pct + u.idle_pct;
            assert!(sum == 0.0 || (sum - 100.0).abs() < 1e-6, "{u:?}");
        }
    }
}
