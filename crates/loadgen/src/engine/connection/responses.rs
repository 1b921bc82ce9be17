//! The receiving side of a [`Connection`]: responses parsed straight from the bytes an
//! engine received (only a response that has not all arrived is copied), an end of file, and
//! how each is recorded.

use std::time::Instant;

use super::{Closed, Connection, InFlight, BUSY_CLOSE, KEEP_PARTIAL, MIN_BACKOFF};
use crate::error::ErrorKind;
use crate::recorder::{Finished, TcpFacts};

impl<S: std::os::fd::AsRawFd> Connection<S> {
    /// Bytes were received (into the worker's buffer, or a provided buffer): every
    /// complete response is recorded, in order, straight from them; only a response that
    /// has not all arrived is copied, to wait for the rest.
    pub(in crate::engine) fn on_received(&mut self, bytes: &[u8], now: Instant) {
        let outcome = if self.partial.is_empty() {
            let (used, outcome) = self.parse_responses(bytes, now);
            if outcome.is_none() && used < bytes.len() {
                self.partial.extend_from_slice(&bytes[used..]);
            }
            outcome
        } else {
            let mut partial = std::mem::take(&mut self.partial);
            partial.extend_from_slice(bytes);
            let (used, outcome) = self.parse_responses(&partial, now);
            partial.drain(..used);
            self.partial = partial;
            outcome
        };
        match outcome {
            Some(outcome) => self.close_after_parse(outcome, now),
            None if self.partial.is_empty() && self.partial.capacity() > KEEP_PARTIAL => {
                self.partial = Vec::new();
            }
            None => {}
        }
    }

    /// Forgets the bytes of a response of a connection that is gone.
    pub(super) fn clear_partial(&mut self) {
        self.partial.clear();
        if self.partial.capacity() > KEEP_PARTIAL {
            self.partial = Vec::new();
        }
    }

    /// partial one failed, and the requests behind it are sent again.
    pub(in crate::engine) fn on_eof(&mut self, now: Instant) {
        let outcome = if self.in_flight.is_empty() {
            // No `Connection: close` came (that closes at the parse): the server closed a
            // keep-alive connection unannounced. Soon after a response it was a busy one.
            let busy = self
                .last_response
                .is_some_and(|t| now.saturating_duration_since(t) < BUSY_CLOSE);
            if busy && self.shared.plan.keepalive {
                self.w.rec.borrow_mut().record_cut(now);
            }
            Closed::Graceful
        } else {
            match self.parser.on_eof(self.partial.len()) {
                Ok(Some(done)) => {
                    let f = self.in_flight.pop_front().expect("checked non-empty");
                    self.w.sub_in_flight(1);
                    let tcp = self.slow_tcp(&f, now);
                    self.finish(&f, now, done.status, done.bytes, tcp);
                    Closed::Graceful
                }
                Ok(None) => Closed::Graceful,
                Err(kind) => Closed::Failed {
                    front: kind,
                    rest: ErrorKind::EofBeforeResponse,
                },
            }
        };
        self.close(outcome);
    }

    /// Records every complete response in `data`, in order. Returns how many bytes it used
    /// and how the connection must close, if it must: a `Connection: close`, bytes nobody
    /// asked for, or a response that cannot be parsed.
    fn parse_responses(&mut self, data: &[u8], now: Instant) -> (usize, Option<Closed>) {
        let mut pos = 0;
        while pos < data.len() {
            let start = pos;
            let Some(front) = self.in_flight.front_mut() else {
                // Bytes nobody asked for: the stream cannot be trusted any more.
                return (pos, Some(Closed::Graceful));
            };
            if front.first_byte.is_none() {
                front.first_byte = Some(now);
            }
            match self.parser.parse(&data[pos..]) {
                Ok(progress) => {
                    pos += progress.consumed;
                    let Some(done) = progress.completed else {
                        break;
                    };
                    let f = self.in_flight.pop_front().expect("checked non-empty");
                    self.w.sub_in_flight(1);
                    let tcp = self.slow_tcp(&f, now);
                    if done.status == 400 {
                        self.tls_answered(&data[start..pos]);
                    }
                    self.finish(&f, now, done.status, done.bytes, tcp);
                    if done.close || !self.shared.plan.keepalive {
                        return (pos, Some(Closed::Graceful));
                    }
                }
                Err(kind) => {
                    self.tls_answered(&data[pos..]);
                    return (pos, Some(Closed::failed(kind)));
                }
            }
        }
        (pos, None)
    }

    /// Counts `answer` (a 400, or bytes that are no HTTP response) if a TLS server gave it
    /// to an `http://` request: the report then says to use https://.
    fn tls_answered(&self, answer: &[u8]) {
        if self.shared.tls.is_none() && crate::transport::is_tls_answer(answer) {
            self.w.rec.borrow_mut().transport().tls_answers += 1;
        }
    }

    /// Closes after parsing stopped. A bad response poisons only its own request; the rest
    /// are sent again.
    fn close_after_parse(&mut self, outcome: Closed, now: Instant) {
        let outcome = match outcome {
            Closed::Failed { front, .. }
                if front == ErrorKind::BadResponse || front == ErrorKind::HeaderTooLarge =>
            {
                let f = self
                    .in_flight
                    .pop_front()
                    .expect("a request was being parsed");
                self.w.sub_in_flight(1);
                self.w.rec.borrow_mut().record_failed(
                    front,
                    f.start(),
                    now,
                    self.conn_id,
                    f.first_on_connection,
                    Some(self.w.name_of(f.pos)),
                );
                Closed::Graceful
            }
            other => other,
        };
        self.close(outcome);
    }

    pub(in crate::engine) fn slow_tcp(&mut self, f: &InFlight, end: Instant) -> Option<TcpFacts> {
        let latency = end.saturating_duration_since(f.start().min(f.begun));
        if self.w.rec.borrow().is_slow(latency) {
            self.facts_for_slow(f.sent, end)
        } else {
            None
        }
    }

    /// Records a complete response: the connection answered (see [`MIN_BACKOFF`]).
    pub(in crate::engine) fn finish(
        &mut self,
        f: &InFlight,
        end: Instant,
        status: u16,
        bytes: u64,
        tcp: Option<TcpFacts>,
    ) {
        self.unanswered = false;
        self.backoff = MIN_BACKOFF;
        if self.served == 0 && self.stream.is_some() {
            self.w.serving.set(self.w.serving.get() + 1);
        }
        self.served += 1;
        self.last_response = Some(end);
        let mut rec = self.w.rec.borrow_mut();
        let first_byte = f.first_byte.unwrap_or(end);
        rec.record_head(
            status,
            f.start(),
            first_byte.saturating_duration_since(f.sent),
            self.parser.tag(),
        );
        rec.record_finished(&Finished {
            intended: f.intended,
            begun: f.begun,
            sent: f.sent,
            first_byte,
            end,
            connect: f.connect,
            tls: f.tls,
            first_on_connection: f.first_on_connection,
            conn: self.conn_id,
            status,
            bytes,
            tcp,
            request: self.w.name_of(f.pos),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;
    use std::time::Duration;

    use super::super::worker_of;
    use super::*;
    use crate::engine::http1::EARLY_WAKE;
    use crate::engine::{Claim, Worker};
    use crate::plan::Plan;

    fn worker() -> Rc<Worker> {
        let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
        // The test sends batches of four.
        plan.pipeline = 4;
        worker_of(plan)
    }

    #[test]
    fn responses_split_anywhere_are_parsed_and_an_idle_connection_keeps_no_buffer() {
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        let long_head = {
            let mut r = b"HTTP/1.1 200 OK\r\nX-Filler: ".to_vec();
            r.extend(std::iter::repeat_n(b'a', 3 * KEEP_PARTIAL));
            r.extend_from_slice(b"\r\nContent-Length: 0\r\n\r\n");
            r
        };
        let stream: Vec<u8> = [&response[..], &response[..], &long_head, &response[..]].concat();
        for piece in [1, 7, 40, stream.len()] {
            let w = worker();
            let mut c: Connection<std::net::TcpStream> = Connection::new(w.clone(), EARLY_WAKE);
            c.depth = 4;
            let now = Instant::now();
            for _ in 0..4 {
                c.queued.push_back(Claim::now(None));
            }
            c.take_batch();
            c.mark_sent(now, now, None);
            for bytes in stream.chunks(piece) {
                c.on_received(bytes, Instant::now());
            }
            let data = w
                .rec
                .borrow_mut()
                .take_interval(Instant::now(), Duration::from_millis(100));
            assert_eq!(data.counters.successes, 4, "pieces of {piece}");
            assert_eq!(data.counters.error_total(), 0, "pieces of {piece}");
            assert!(c.in_flight.is_empty());
            assert!(c.partial.is_empty(), "pieces of {piece}");
            assert!(
                c.partial.capacity() <= KEEP_PARTIAL,
                "pieces of {piece}: an idle connection holds {} bytes",
                c.partial.capacity()
            );
        }
    }
}
