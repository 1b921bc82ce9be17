//! Why a send left late (open loop): each late send is put in exactly one [`LateCause`], in
//! the order they are tried: the generator's thread waited for a CPU, else no connection
//! was free, else the generator's own loop or timer was too slow.

use std::time::{Duration, Instant};

use super::LATE_SLACK;

/// Why one send left more than [`LATE_SLACK`] after its intended time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LateCause {
    /// The generator's thread waited in the run queue (another thread had its CPU) at least
    /// as long as the send was late beyond the slack: had it run, it would have been on time.
    WaitedForCpu,
    /// The slot was claimed only after its intended time + the slack: every connection was
    /// still waiting for a response (the server did not keep up over `-c` connections).
    NoFreeConnection,
    /// The rest: the generator's loop or timer was too slow while it had a CPU and a free
    /// connection.
    Generator,
}

/// Puts a send intended at `intended` that left at `sent` in its cause. `cpu_wait` is the
/// thread's run-queue wait over [intended, sent] (`None`: not measurable here), and
/// `claimed_late` whether its slot was claimed after `intended` + the slack.
pub fn classify(
    intended: Instant,
    sent: Instant,
    cpu_wait: Option<Duration>,
    claimed_late: bool,
) -> LateCause {
    let beyond_slack = sent
        .saturating_duration_since(intended)
        .saturating_sub(LATE_SLACK);
    if cpu_wait.is_some_and(|w| w >= beyond_slack) {
        LateCause::WaitedForCpu
    } else if claimed_late {
        LateCause::NoFreeConnection
    } else {
        LateCause::Generator
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_send_gets_the_first_cause_that_explains_it() {
        let t = Instant::now();
        // 5 ms late: a 4 ms run-queue wait covers the 4 ms beyond the slack, even when the
        // slot was also claimed late.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(4)), true),
            LateCause::WaitedForCpu
        );
        // A 3 ms wait does not: the slot waited for a connection.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(3)), true),
            LateCause::NoFreeConnection
        );
        // Claimed in time, not explained by a wait: the generator's own.
        assert_eq!(
            classify(t, t + ms(5), Some(ms(3)), false),
            LateCause::Generator
        );
        assert_eq!(
            classify(t, t + ms(5), Some(Duration::ZERO), false),
            LateCause::Generator
        );
    }

    #[test]
    fn without_the_run_queue_wait_sends_fall_to_the_next_causes() {
        let t = Instant::now();
        assert_eq!(
            classify(t, t + ms(5), None, true),
            LateCause::NoFreeConnection
        );
        assert_eq!(classify(t, t + ms(5), None, false), LateCause::Generator);
    }
}
