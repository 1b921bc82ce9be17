//! Closing finished connections' sockets, spread over time so that a crowd of clients leaving
//! together does not hold up the requests of those that stay (issue 32).
//!
//! What a close costs, and where: closing a socket (a direct descriptor's `IORING_OP_CLOSE`,
//! or `close(2)` of a plain one) drops the last reference to its file, and `fput` then queues
//! the file's teardown as task work of the calling thread (`TWA_RESUME`): `__fput` runs when
//! the thread leaves the system call, here the `io_uring_enter` that carried the closes.
//! `__fput` is `tcp_close`: the FIN goes out, and on loopback the peer's side of it (its ACK,
//! the peer socket going to TIME_WAIT) runs in the softirq of the same CPU, inside the same
//! exit. That is ~6–8 µs of the server's thread per socket, whatever else is open
//! (docs/scale-figures.md), and nothing of it can be reaped or served meanwhile.
//!
//! How a count per pass failed: with 128 closes a pass, a pass took ~1 ms, but 19,000 clients
//! leaving queue 19,000 end-of-file receives as the ring's deferred task work
//! (`DEFER_TASKRUN`), which the kernel runs in order, a few dozen per `io_uring_enter`
//! (`IO_LOCAL_TW_DEFAULT_MAX`), the rest waiting for the next one. While every pass also
//! paid for its closes, the queue of end-of-file work grew faster than the passes drained it,
//! and a request from a client that stayed waited behind thousands of them: a probe's p99.9 of
//! 24–38 ms, the server's samples in `__fput`.
//!
//! So the close work is paced by time, measured: a batch of closes is submitted on its own
//! and timed (its `__fput`s run inside that submit), the batch is sized to take about
//! [`CLOSE_SLICE`] at the cost per close measured so far, and after a batch that took `d`,
//! the next waits `d` (closes take at most half of the loop's time), with a timeout op to
//! wake the loop if nothing else does. The rest of the time drains the deferred work, so a
//! request waits for one slice at most, rather than for a crowd's worth of teardown.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tailscope_uring::server::{Ring, Socket};

/// The close work one batch aims at: what a request that arrives meanwhile may wait for it.
pub(crate) const CLOSE_SLICE: Duration = Duration::from_micros(250);
/// The most sockets one batch closes, whatever the measured cost.
const MAX_BATCH: usize = 128;
/// The cost per close assumed before one was measured (docs/scale-figures.md: 6–8 µs).
const FIRST_ESTIMATE: Duration = Duration::from_micros(8);
/// The shortest pacing wait armed: below it, a timeout costs more than it spaces.
const MIN_WAIT: Duration = Duration::from_micros(20);

/// Sockets whose connection is done, waiting for their turn to close.
pub(crate) struct Closing {
    queue: VecDeque<Socket>,
    /// The cost of one close, a moving average of the batches measured.
    per_close: Duration,
    /// No batch before this: the previous one's length after it.
    next_batch: Instant,
    /// A pacing timeout is armed (its completion clears it).
    timer_armed: bool,
}

/// What [`Closing::pass`] wants of the loop.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Nothing is waiting to close, or a timeout to come back is armed already.
    Nothing,
    /// Arm a timeout of this length so that the loop comes back for the next batch.
    WakeIn(Duration),
}

impl Closing {
    pub(crate) fn new(now: Instant) -> Closing {
        Closing {
            queue: VecDeque::new(),
            per_close: FIRST_ESTIMATE,
            next_batch: now,
            timer_armed: false,
        }
    }

    /// Queues `socket` to be closed.
    pub(crate) fn push(&mut self, socket: Socket) {
        self.queue.push_back(socket);
    }

    /// The pacing timeout fired.
    pub(crate) fn timer_fired(&mut self) {
        self.timer_armed = false;
    }

    /// How many sockets the next batch closes: [`CLOSE_SLICE`] at the measured cost.
    fn batch_len(&self) -> usize {
        let per_close = self.per_close.as_nanos().max(1);
        ((CLOSE_SLICE.as_nanos() / per_close) as usize).clamp(1, MAX_BATCH)
    }

    /// Learns from a batch of `closed` sockets that took `took`, and spaces the next one.
    fn measured(&mut self, closed: usize, took: Duration, end: Instant) {
        let per_close = took / closed.max(1) as u32;
        self.per_close = (self.per_close * 3 + per_close) / 4;
        self.next_batch = end + took;
    }

    /// Closes a batch if its turn has come (`token` for the close ops, their completions of
    /// no interest) and says whether the loop must arm a timeout to come back.
    pub(crate) fn pass<T: Copy>(&mut self, ring: &mut Ring<T>, token: T) -> std::io::Result<Pace> {
        if self.queue.is_empty() {
            return Ok(Pace::Nothing);
        }
        let now = Instant::now();
        if now >= self.next_batch {
            // What the last pass queued goes first, so that the timed submit carries the
            // closes alone (and the sends of the last pass are not held back by them).
            ring.submit()?;
            let n = self.batch_len().min(self.queue.len());
            let start = Instant::now();
            for socket in self.queue.drain(..n) {
                ring.close(socket, token)?;
            }
            ring.submit()?;
            let end = Instant::now();
            self.measured(n, end - start, end);
        }
        if self.queue.is_empty() || self.timer_armed {
            return Ok(Pace::Nothing);
        }
        self.timer_armed = true;
        Ok(Pace::WakeIn(
            self.next_batch
                .saturating_duration_since(Instant::now())
                .max(MIN_WAIT),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_a_slice_of_close_work_at_the_measured_cost() {
        let now = Instant::now();
        let mut closing = Closing::new(now);
        // 8 µs assumed: 31 closes to a 250 µs slice.
        assert_eq!(closing.batch_len(), 31);
        // Measured dearer (50 µs each, a loaded machine): the batch shrinks towards 5.
        for _ in 0..20 {
            closing.measured(10, Duration::from_micros(500), now);
        }
        assert_eq!(closing.batch_len(), 5);
        // Measured very cheap: never more than MAX_BATCH.
        for _ in 0..40 {
            closing.measured(100, Duration::from_micros(10), now);
        }
        assert_eq!(closing.batch_len(), MAX_BATCH);
        // Never none, however dear.
        for _ in 0..40 {
            closing.measured(1, Duration::from_millis(5), now);
        }
        assert_eq!(closing.batch_len(), 1);
    }

    #[test]
    fn the_next_batch_waits_as_long_as_the_last_one_took() {
        let now = Instant::now();
        let mut closing = Closing::new(now);
        closing.measured(30, Duration::from_micros(300), now);
        assert_eq!(closing.next_batch, now + Duration::from_micros(300));
    }
}
