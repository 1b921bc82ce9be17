//! The server's stacks on the agent's host: the local run's samplers
//! (`tailscope_targets::stacks::Session`) fed the tree the agent follows, their frames named
//! there (the server's binaries and their debug information are on that host), and the
//! [`Inside`] sent to the run, where it is read exactly as a local one.

use tailscope_targets::stacks::{self, Inside, Session};

use crate::wire::StacksWanted;

/// The stack samplers of one profile on the agent, or none.
pub struct AgentStacks {
    session: Option<Session>,
    /// The tree's root, fed alone before the profiler's first tick has found the tree.
    root: Option<u32>,
}

impl AgentStacks {
    /// Opens the samplers as `wanted` for the tree of `root`; the second value says why
    /// nothing is sampled when stacks were asked for and cannot be had.
    pub fn open(wanted: StacksWanted, root: Option<u32>) -> (AgentStacks, Option<String>) {
        let none = |why: Option<String>| {
            (
                AgentStacks {
                    session: None,
                    root,
                },
                why,
            )
        };
        if wanted == StacksWanted::Off {
            return none(None);
        }
        if root.is_none() {
            return none(Some(
                "no server process found on the agent's host to sample".into(),
            ));
        }
        // No generator runs on the agent's host: the /proc fallback's thread is not pinned.
        match Session::open(
            stacks::DEFAULT_FREQUENCY_HZ,
            &[],
            wanted == StacksWanted::On,
        ) {
            Ok(session) => (
                AgentStacks {
                    session: Some(session),
                    root,
                },
                None,
            ),
            Err(e) => none(Some(format!("on the agent's host: {e}"))),
        }
    }

    /// Second 0 of the run began at `origin_unix_ns` on this host's wall clock: the
    /// samplers count seconds on CLOCK_MONOTONIC from the same instant.
    pub fn begin(&mut self, origin_unix_ns: u64) {
        if let Some(session) = self.session.as_mut() {
            session.begin(monotonic_of(
                origin_unix_ns,
                crate::unix_ns(),
                stacks::monotonic_ns(),
            ));
        }
    }

    /// Follows the tree's processes (`tree`, the profiler's view this tick) and reads the
    /// samplers' buffers.
    pub fn tick(&mut self, tree: &[u32]) {
        let (Some(session), Some(root)) = (self.session.as_mut(), self.root) else {
            return;
        };
        let root_only = [root];
        session.tick(if tree.is_empty() { &root_only } else { tree });
    }

    /// Stops sampling and names the frames, over the run's `seconds` (`(second, outliers,
    /// max_us)` each): `None` when nothing was sampled.
    pub fn finish(self, seconds: &[(u32, u64, u64)]) -> Option<Inside> {
        self.session.map(|s| s.finish(seconds))
    }
}

/// The CLOCK_MONOTONIC reading at the instant `at_unix_ns`, given both clocks read now.
fn monotonic_of(at_unix_ns: u64, now_unix_ns: u64, now_monotonic_ns: u64) -> u64 {
    let ago = i128::from(now_unix_ns) - i128::from(at_unix_ns);
    u64::try_from((i128::from(now_monotonic_ns) - ago).max(0)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_on_the_wall_clock_is_placed_on_the_monotonic_one() {
        // 2.5 s ago on the wall clock is 2.5 s before now on the monotonic clock.
        assert_eq!(
            monotonic_of(10_000_000_000, 12_500_000_000, 7_000_000_000),
            4_500_000_000
        );
        // In the future (a clock stepped since): after now.
        assert_eq!(
            monotonic_of(13_000_000_000, 12_500_000_000, 7_000_000_000),
            7_500_000_000
        );
        // Before the monotonic clock's start: 0.
        assert_eq!(monotonic_of(0, 12_500_000_000, 7_000_000_000), 0);
    }

    #[test]
    fn off_samples_nothing_and_says_nothing() {
        let (stacks, why) = AgentStacks::open(StacksWanted::Off, Some(std::process::id()));
        assert!(why.is_none());
        assert!(stacks.finish(&[]).is_none());
    }

    #[test]
    fn no_process_to_sample_is_said() {
        let (stacks, why) = AgentStacks::open(StacksWanted::Auto, None);
        assert!(why.unwrap().contains("no server process"));
        assert!(stacks.finish(&[]).is_none());
    }

    #[test]
    fn off_cpu_time_travels_whole_and_a_malformed_one_is_trimmed() {
        use tailscope_targets::stacks::{Blocked, OffCpu};
        let mut off = OffCpu::new("/proc thread states");
        let sleep = Blocked {
            thread: "worker".into(),
            state: "S".into(),
            syscall: "clock_nanosleep".into(),
            stack: vec!["hrtimer_nanosleep_[k]".into()],
        };
        off.add(1, &sleep, 7, 600_000);
        off.watch(0, 7, 1_000_000);
        off.watch(1, 7, 1_000_000);
        let json = serde_json::to_string(&off).unwrap();
        let back: OffCpu = serde_json::from_str(&json).unwrap();
        assert_eq!(back, off);
        // A key past the list of ways (a broken peer) is dropped, not indexed.
        let mut value: serde_json::Value = serde_json::from_str(&json).unwrap();
        value["wall"] = serde_json::json!([[1, 0, 600000], [1, 5, 9]]);
        let trimmed: OffCpu = serde_json::from_value(value).unwrap();
        assert_eq!(trimmed, off);
        let slow = [1].into_iter().collect();
        assert_eq!(trimmed.differential(&slow).0.len(), 1);
    }
}
