//! Per-CPU perf counters: which events are opened, and one CPU's readings.

use perf_event::events::{Hardware, Software};
use perf_event::{Builder, Counter};

/// The perf counters opened on each CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PerfEvent {
    CpuClock,
    ContextSwitches,
    CpuMigrations,
    PageFaults,
    Cycles,
    Instructions,
    CacheMisses,
    BranchMisses,
}

impl PerfEvent {
    /// Every event, in the order of a [`PerfReading`].
    pub(super) const ALL: [PerfEvent; 8] = [
        PerfEvent::CpuClock,
        PerfEvent::ContextSwitches,
        PerfEvent::CpuMigrations,
        PerfEvent::PageFaults,
        PerfEvent::Cycles,
        PerfEvent::Instructions,
        PerfEvent::CacheMisses,
        PerfEvent::BranchMisses,
    ];

    pub(super) fn builder(self) -> Builder<'static> {
        match self {
            PerfEvent::CpuClock => Builder::new(Software::CPU_CLOCK),
            PerfEvent::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
            PerfEvent::CpuMigrations => Builder::new(Software::CPU_MIGRATIONS),
            PerfEvent::PageFaults => Builder::new(Software::PAGE_FAULTS),
            PerfEvent::Cycles => Builder::new(Hardware::CPU_CYCLES),
            PerfEvent::Instructions => Builder::new(Hardware::INSTRUCTIONS),
            PerfEvent::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
            PerfEvent::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
        }
    }
}

/// One CPU's counters read at one moment; an event is `None` where the kernel refused it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PerfReading(pub(super) [Option<u64>; PerfEvent::ALL.len()]);

impl PerfReading {
    pub(super) fn get(&self, e: PerfEvent) -> Option<u64> {
        self.0[e as usize]
    }

    /// How much `e` counted between `before` and this reading.
    pub(super) fn since(&self, before: &PerfReading, e: PerfEvent) -> Option<u64> {
        Some(self.get(e)?.saturating_sub(before.get(e)?))
    }
}

/// One CPU's counters; a slot is `None` where the kernel refused that event.
pub(super) struct CpuCounters {
    counters: Vec<Option<Counter>>,
}

impl CpuCounters {
    pub(super) fn open(cpu: usize) -> CpuCounters {
        let counters = PerfEvent::ALL
            .iter()
            .map(|&e| {
                // Kernel work included (perf-event2 excludes it by default): on a loopback
                // benchmark most of the CPU time, and every context switch, is in the kernel.
                // Where the kernel refuses that, count user space only.
                let mut builder = e.builder();
                builder
                    .one_cpu(cpu)
                    .any_pid()
                    .enabled(true)
                    .exclude_kernel(false);
                builder.build().ok().or_else(|| {
                    let mut user_only = e.builder();
                    user_only.one_cpu(cpu).any_pid().enabled(true);
                    user_only.build().ok()
                })
            })
            .collect();
        CpuCounters { counters }
    }

    /// Whether the kernel gave this CPU the event.
    pub(super) fn has(&self, e: PerfEvent) -> bool {
        self.counters.get(e as usize).is_some_and(Option::is_some)
    }

    pub(super) fn read(&mut self) -> PerfReading {
        let mut out = PerfReading::default();
        for (slot, counter) in out.0.iter_mut().zip(self.counters.iter_mut()) {
            *slot = counter.as_mut().and_then(|c| c.read().ok());
        }
        out
    }
}
