//! The sending side of a [`Connection`]: which requests of the mix a batch is (one slice of
//! the encoded requests, or a patched copy for placeholders), moving them in flight, and
//! taking back those a partial write did not send.

use std::time::{Duration, Instant};

use super::{Connection, InFlight};

impl<S> Connection<S> {
    /// Picks the requests of the mix the queued claims send (the worker's next positions)
    /// and returns their bytes' range in `shared.requests`, one slice for the batch.
    /// [`Self::mark_sent`] then files each in flight under its position.
    pub(in crate::engine) fn take_batch(&mut self) -> std::ops::Range<usize> {
        let k = self.queued.len();
        self.batch_start = self.w.take_requests(k);
        self.batch_len = k;
        let range = self.shared.requests.range(self.batch_start, k);
        self.batch_at = range.start;
        range
    }

    /// The position in `shared.requests` of the batch just taken.
    pub(in crate::engine) fn batch_start(&self) -> usize {
        self.batch_start
    }

    /// A mix with placeholders: copies the batch just taken into `dst` (at `at` in what
    /// the engine sends from) with every placeholder given a new value; returns its length.
    pub(in crate::engine) fn patch_batch(&mut self, dst: &mut [u8], at: usize) -> usize {
        self.batch_at = at;
        let w = &*self.w;
        let values = crate::mix::Values {
            seq: &self.shared.placeholder_seq,
            seq_offset: self.shared.plan.seq_offset,
            seq_stride: self.shared.plan.seq_stride,
            rng: &w.placeholder_rng,
        };
        self.shared
            .requests
            .patch(dst, self.batch_start, self.batch_len, &values)
    }

    /// How many of the last batch's requests were not wholly sent when its bytes before
    /// `sent_to` (in what the engine sends from) were.
    pub(in crate::engine) fn unsent_after(&self, sent_to: usize) -> usize {
        let requests = &self.shared.requests;
        let base = requests.offset(self.batch_start);
        self.in_flight
            .iter()
            .rev()
            .take(self.batch_len)
            .take_while(|f| self.batch_at + (requests.end_of(f.pos as usize) - base) > sent_to)
            .count()
    }

    /// Moves every queued request in flight: they began at `now` (their connect, if
    /// `connect_time` says one was just made, else the write) and left at `sent`.
    pub(in crate::engine) fn mark_sent(
        &mut self,
        now: Instant,
        sent: Instant,
        connect_time: Option<Duration>,
    ) {
        self.requeued_sent(now);
        let w = &*self.w;
        let k = self.queued.len();
        let tls = self.handshake_tls.take().filter(|_| connect_time.is_some());
        let mut rec = w.rec.borrow_mut();
        if self.open_loop {
            rec.sample_run_queue(sent);
        }
        for (i, c) in self.queued.drain(..).enumerate() {
            if let Some(t) = c.intended {
                // A send that waited for its connection to open (a back-off, a
                // connect's turn, the handshake) had no connection free either.
                rec.record_send(t, sent, c.claimed_late || connect_time.is_some());
            }
            self.in_flight.push_back(InFlight {
                pos: (self.batch_start + i) as u32,
                intended: c.intended,
                begun: now,
                sent,
                first_byte: None,
                // Every request of a fresh connection's first batch waited for its set-up
                // (pipelined, or streams claimed while it connected), so each carries the
                // handshakes in its breakdown; the first one opened it, and only its
                // handshakes go into the connect and TLS histograms (one per connection).
                connect: connect_time,
                tls,
                first_on_connection: i == 0 && connect_time.is_some(),
                claimed_late: c.claimed_late,
            });
        }
        drop(rec);
        w.add_in_flight(k);
    }

    /// The last `n` requests in flight were not wholly sent: they go back to the front of
    /// the queue. Returns when they began.
    pub(in crate::engine) fn unsend(&mut self, n: usize) -> Option<Instant> {
        let n = n.min(self.in_flight.len());
        let mut begun = None;
        for f in self.in_flight.drain(self.in_flight.len() - n..).rev() {
            begun = Some(f.begun);
            self.queued.push_front(f.requeue());
        }
        self.w.sub_in_flight(n);
        begun
    }
}

#[cfg(test)]
mod tests {
    use super::super::{worker_of, Claim};
    use super::*;
    use crate::engine::http1::EARLY_WAKE;
    use crate::plan::Plan;

    #[test]
    fn a_batch_of_a_mix_is_one_slice_and_a_partial_send_counts_its_own_requests() {
        use crate::mix::RequestSpec;
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        plan.pipeline = 3;
        for (name, target) in [("a", "/a"), ("b", "/a-much-longer-target")] {
            plan.requests.push(RequestSpec {
                name: name.into(),
                method: "GET".into(),
                target: target.into(),
                headers: vec![],
                body: vec![],
                weight: 1,
            });
        }
        let w = worker_of(plan);
        let mut c: Connection<std::net::TcpStream> = Connection::new(w.clone(), EARLY_WAKE);
        let now = Instant::now();
        // One request, then a batch of three that wraps around the period of two.
        c.queued.push_back(Claim::now(None));
        c.take_batch();
        c.mark_sent(now, now, None);
        for _ in 0..3 {
            c.queued.push_back(Claim::now(None));
        }
        let batch = c.take_batch();
        c.mark_sent(now, now, None);
        let bytes = &w.shared.requests.bytes()[batch.clone()];
        let text = String::from_utf8_lossy(bytes);
        assert_eq!(
            text.matches("GET /a-much-longer-target ").count(),
            2,
            "{text}"
        );
        assert_eq!(text.matches("GET /a ").count(), 1, "{text}");
        let names: Vec<u32> = c.in_flight.iter().map(|f| w.name_of(f.pos)).collect();
        assert_eq!(names, [0, 1, 0, 1]);
        // Nothing of the batch sent: its three requests (not the one before it).
        assert_eq!(c.unsent_after(batch.start), 3);
        let first_end = batch.start + w.shared.requests.end_of(c.in_flight[1].pos as usize)
            - w.shared.requests.offset(c.in_flight[1].pos as usize);
        assert_eq!(c.unsent_after(first_end - 1), 3);
        assert_eq!(c.unsent_after(first_end), 2);
        assert_eq!(c.unsent_after(batch.end), 0);
    }
}
