//! One worker thread: its ring, its listener, its connections, its clock.
//!
//! Connections live in a slab indexed by the token of their ops (slot and generation). A
//! connection is freed only when none of its ops is in flight, so a completion never finds
//! its connection gone or reused. Requests are answered in order: every complete request in
//! the input is answered into one output buffer and sent with one send; a `/delay` holds the
//! requests behind it until its timeout fires; a partial send is continued, never dropped.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::closing::{Closing, Pace};
use crate::http::{self, Delayed, Limits, Parsed, Parser, Reply, Site, Status};
use crate::Config;
use tailscope_uring::server::{Completion, OpId, Payload, Ring, Socket};

/// What an op of the worker's ring is for, handed back with its completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    /// The worker's periodic tick.
    Tick,
    /// The listener's multishot accept.
    Accept,
    /// An op whose completion needs nothing done (a direct socket's cancel and close).
    Ignored,
    /// The timeout that brings the loop back for the next batch of closes.
    ClosePace,
    /// The recv or send of the connection in `slot` of `generation` (the completion tells
    /// them apart: a send's carries its buffer).
    Io { slot: u32, generation: u32 },
    /// The `/delay` timeout of the connection in `slot` of `generation`.
    Delay { slot: u32, generation: u32 },
}

/// The token of the recv or send of the connection in `slot` of `generation`.
fn io(slot: usize, generation: u32) -> Token {
    Token::Io {
        slot: slot as u32,
        generation,
    }
}
/// How often the tick runs: shutdown, stalls, the Date header and idle sweeps.
const TICK_EVERY: Duration = Duration::from_millis(100);
/// Input and output a connection may hold before it is paused (output) or closed (input).
const MAX_PENDING_OUTPUT: usize = 4 * 1024 * 1024;
/// The output buffer a connection gets with its first response (not at accept: 19,000 idle
/// connections held 76 MB of them, each allocation touching its own page).
const OUTPUT_CAPACITY: usize = 4096;
/// How long a graceful shutdown waits for in-flight responses.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Where a connection is in its life; it only moves down this list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    /// Reading requests and answering them.
    Open,
    /// No more requests are read: what is owed is answered and sent, then it closes (the
    /// client closed its side or asked for a close, sent something bad, or the server is
    /// shutting down).
    Draining,
    /// Shut down; the slot is freed once its last op has completed.
    Closing,
}

struct Conn {
    socket: Socket,
    generation: u32,
    input: Vec<u8>,
    output: Vec<u8>,
    spare: Vec<u8>,
    life: Life,
    /// The ops the kernel may still complete: a multishot recv, one send, one `/delay`
    /// timeout (whose answer waits here). The slot is reused only when all three are done.
    /// The recv and the send are kept by id, for a close to cancel them (and only them).
    recv: Option<OpId>,
    send: Option<OpId>,
    delayed: Option<Delayed>,
    last_activity: Instant,
    partial_since: Option<Instant>,
}

impl Conn {
    fn ops_in_flight(&self) -> bool {
        self.recv.is_some() || self.send.is_some() || self.delayed.is_some()
    }

    /// Nothing sent or owed: closing now loses no answer.
    fn quiet(&self) -> bool {
        self.send.is_none() && self.output.is_empty() && self.delayed.is_none()
    }

    /// Moves to `Draining` unless already further along.
    fn drain(&mut self) {
        if self.life == Life::Open {
            self.life = Life::Draining;
        }
    }
}

pub(crate) struct Worker {
    ring: Ring<Token>,
    listener: OwnedFd,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    next_generation: u32,
    parser: Parser,
    site: Site,
    config: Arc<Config>,
    shutdown: Arc<AtomicBool>,
    accepting: bool,
    /// A multishot accept is armed. One that ended on an error (a full file table, ENFILE or
    /// EMFILE) is armed again at the next tick: at once, it would fail again at once, a spin.
    accept_armed: bool,
    shutdown_started: Option<Instant>,
    next_stall: Option<Instant>,
    next_burn: Option<Instant>,
    date_second: u64,
    last_sweep: Instant,
    completions: Vec<Completion<Token>>,
    /// Sockets whose connection is done, closed a slice of time at a time (see [`Closing`]).
    closing: Closing,
    /// When the ring last returned: the time of everything reaped with it (one clock read
    /// per wake-up, not one per batch of requests).
    woke: Instant,
}

/// On purpose: a stand-in for a hot loop on the event loop (a regex gone quadratic, a large
/// encode). Never inlined, so a profiler names it; returns its arithmetic so it is not elided.
/// The inner loop is plain shifts and xors: no call, even unoptimised, so the samples land in
/// this function and not in a helper (iterators are calls in a debug build).
#[inline(never)]
fn burn_cpu_on_purpose(duration: Duration) -> u64 {
    let end = Instant::now() + duration;
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    while Instant::now() < end {
        let mut i = 0u32;
        while i < 100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            i += 1;
        }
        x = std::hint::black_box(x);
    }
    x
}

/// A connection's output buffer to write a response into, allocated the first time one is
/// written (a connection that never asks for anything holds none). A free function over the
/// field, so that the connection's input may stay borrowed meanwhile.
fn output(buf: &mut Vec<u8>) -> &mut Vec<u8> {
    if buf.capacity() == 0 {
        buf.reserve(OUTPUT_CAPACITY);
    }
    buf
}

fn now_second() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Worker {
    pub(crate) fn new(
        listener: OwnedFd,
        config: Arc<Config>,
        shutdown: Arc<AtomicBool>,
    ) -> std::io::Result<Worker> {
        // Accepted sockets' slots: as many as the kernel allows one table (RLIMIT_NOFILE),
        // each worker a table of its own.
        let slots = tailscope_uring::raise_open_file_limit().min(1 << 20) as u32;
        let ring = Ring::new(4096, 1024, 16 * 1024, slots)?;
        let now = Instant::now();
        Ok(Worker {
            ring,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            next_generation: 0,
            parser: Parser::new(Limits::default()),
            site: Site::new(
                config.static_dir.clone(),
                http::http_date(SystemTime::now()),
            ),
            next_stall: config.stall.map(|s| now + s.every),
            next_burn: config.burn.map(|s| now + s.every),
            config,
            shutdown,
            accepting: true,
            accept_armed: true,
            shutdown_started: None,
            date_second: now_second(),
            last_sweep: now,
            completions: Vec::with_capacity(1024),
            closing: Closing::new(now),
            woke: now,
        })
    }

    /// Serves until shutdown is asked for and the last connection is done.
    pub(crate) fn run(mut self) -> std::io::Result<()> {
        self.ring.accept_multi(&self.listener, Token::Accept)?;
        self.ring.timeout(TICK_EVERY, Token::Tick)?;
        loop {
            if let Pace::WakeIn(after) = self.closing.pass(&mut self.ring, Token::Ignored)? {
                self.ring.timeout(after, Token::ClosePace)?;
            }
            self.ring.submit_and_wait()?;
            self.woke = Instant::now();
            let mut completions = std::mem::take(&mut self.completions);
            self.ring.reap(&mut completions);
            for c in completions.drain(..) {
                self.complete(c)?;
            }
            self.completions = completions;
            if !self.accepting
                && (self.live == 0
                    || self
                        .shutdown_started
                        .is_some_and(|t| t.elapsed() > SHUTDOWN_GRACE))
            {
                return Ok(());
            }
        }
    }

    fn complete(&mut self, c: Completion<Token>) -> std::io::Result<()> {
        match c.token {
            Token::Tick => self.tick(),
            Token::Accept => self.accepted(c),
            Token::Ignored => Ok(()),
            Token::ClosePace => {
                self.closing.timer_fired();
                Ok(())
            }
            Token::Io { slot, generation } => {
                self.conn_completion(slot as usize, generation, false, c);
                Ok(())
            }
            Token::Delay { slot, generation } => {
                self.conn_completion(slot as usize, generation, true, c);
                Ok(())
            }
        }
    }

    fn tick(&mut self) -> std::io::Result<()> {
        let now = Instant::now();
        if let (Some(at), Some(stall)) = (self.next_stall, self.config.stall) {
            if now >= at {
                // On purpose: a stand-in for a GC pause or a blocking call on the event loop.
                std::thread::sleep(stall.duration);
                self.next_stall = Some(Instant::now() + stall.every);
            }
        }
        if let (Some(at), Some(burn)) = (self.next_burn, self.config.burn) {
            if now >= at {
                burn_cpu_on_purpose(burn.duration);
                self.next_burn = Some(Instant::now() + burn.every);
            }
        }
        // A stall or a burn just took the loop's time: what is reaped after it happened now.
        self.woke = Instant::now();
        let second = now_second();
        if second != self.date_second {
            self.date_second = second;
            self.site.set_date(http::http_date(SystemTime::now()));
        }
        if self.accepting && self.shutdown.load(Ordering::SeqCst) {
            self.begin_shutdown(now);
        }
        if self.accepting && !self.accept_armed {
            self.ring.accept_multi(&self.listener, Token::Accept)?;
            self.accept_armed = true;
        }
        if now.duration_since(self.last_sweep) >= Duration::from_millis(250) {
            self.last_sweep = now;
            self.sweep(now);
        }
        self.ring.timeout(TICK_EVERY, Token::Tick)
    }

    /// Closes connections that sent half a request too long ago (slowloris) or sat idle.
    fn sweep(&mut self, now: Instant) {
        let header_timeout = self.config.header_timeout;
        let idle_timeout = self.config.idle_timeout;
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if conn.life == Life::Closing {
                continue;
            }
            let slow = conn
                .partial_since
                .is_some_and(|t| now.duration_since(t) > header_timeout);
            let idle = conn.input.is_empty()
                && conn.send.is_none()
                && conn.delayed.is_none()
                && now.duration_since(conn.last_activity) > idle_timeout;
            if slow || idle {
                self.begin_close(slot);
            }
        }
    }

    fn begin_shutdown(&mut self, now: Instant) {
        self.accepting = false;
        self.shutdown_started = Some(now);
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            conn.drain();
            if conn.quiet() {
                self.begin_close(slot);
            }
        }
    }

    fn accepted(&mut self, c: Completion<Token>) -> std::io::Result<()> {
        if let Payload::Accepted(socket) = c.payload {
            if self.accepting && self.live < self.config.max_conns {
                self.add_conn(socket)?;
            } else {
                // Over --max-conns, or shutting down.
                self.ring.close(socket, Token::Ignored)?;
            }
        }
        if !c.more {
            self.accept_armed = false;
            if self.accepting && c.result >= 0 {
                self.ring.accept_multi(&self.listener, Token::Accept)?;
                self.accept_armed = true;
            }
        }
        Ok(())
    }

    fn add_conn(&mut self, socket: Socket) -> std::io::Result<()> {
        // A direct socket has no descriptor to set it on: it inherited the listener's.
        if let Socket::Plain(fd) = &socket {
            let _ = socket2::SockRef::from(fd).set_nodelay(true);
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        self.next_generation = self.next_generation.wrapping_add(1);
        let generation = self.next_generation;
        let recv = self.ring.recv_multi(&socket, io(slot, generation))?;
        self.conns[slot] = Some(Conn {
            socket,
            generation,
            input: Vec::new(),
            // Allocated by the first response (`output`), not here.
            output: Vec::new(),
            spare: Vec::new(),
            life: Life::Open,
            recv: Some(recv),
            send: None,
            delayed: None,
            last_activity: Instant::now(),
            partial_since: None,
        });
        self.live += 1;
        Ok(())
    }

    fn conn_completion(&mut self, slot: usize, generation: u32, delay: bool, c: Completion<Token>) {
        let live = self
            .conns
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.generation == generation);
        if !live {
            // Never expected (a slot is freed only when its ops are done); keep the buffer ring whole.
            if let Some(bid) = c.buffer {
                self.ring.recycle(bid);
            }
            return;
        }
        match c.payload {
            Payload::Sent(buf, offset) => self.sent(slot, buf, offset, c.result),
            _ if delay => self.delay_done(slot),
            _ => self.received(slot, &c),
        }
        self.maybe_free(slot);
    }

    fn received(&mut self, slot: usize, c: &Completion<Token>) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        // Bytes that arrive on an empty input are answered straight from the provided buffer
        // (the common case: a whole batch in one recv); only what is left over is copied.
        let mut fresh = None;
        if let Some(bid) = c.buffer {
            if c.result > 0 && conn.life == Life::Open && conn.input.is_empty() {
                fresh = Some((bid, c.result as usize));
            } else {
                if c.result > 0 && conn.life != Life::Closing {
                    conn.input
                        .extend_from_slice(self.ring.buffer(bid, c.result as usize));
                }
                self.ring.recycle(bid);
            }
        }
        if !c.more {
            conn.recv = None;
        }
        if conn.life == Life::Closing {
            return;
        }
        if c.result == 0 {
            // The client closed its side: answer what was asked, then close.
            conn.drain();
            if conn.quiet() {
                self.begin_close(slot);
                return;
            }
        } else if c.result < 0 && c.result != -libc::ENOBUFS {
            self.begin_close(slot);
            return;
        }
        let conn = self.conns[slot].as_mut().expect("live connection");
        if conn.recv.is_none() && conn.life == Life::Open {
            // The kernel ended the multishot recv (no buffer free, or its own limit): re-arm.
            conn.recv = self
                .ring
                .recv_multi(&conn.socket, io(slot, conn.generation))
                .ok();
        }
        if c.result > 0 {
            self.answer(slot, fresh);
        }
    }

    fn delay_done(&mut self, slot: usize) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        let Some(delayed) = conn.delayed.take() else {
            return;
        };
        if conn.life == Life::Closing {
            return;
        }
        http::write_delayed(&delayed, &self.site, output(&mut conn.output));
        if delayed.connection == http::Connection::Close {
            conn.drain();
        }
        self.process_input(slot);
    }

    fn sent(&mut self, slot: usize, mut buf: Vec<u8>, offset: usize, result: i32) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        conn.send = None;
        if conn.life == Life::Closing {
            return;
        }
        if result < 0 {
            self.begin_close(slot);
            return;
        }
        let done = offset + result as usize;
        if done < buf.len() {
            // A partial send: finish it before anything else goes out.
            match self
                .ring
                .send(&conn.socket, buf, done, io(slot, conn.generation))
            {
                Ok(send) => conn.send = Some(send),
                Err(_) => self.begin_close(slot),
            }
            return;
        }
        buf.clear();
        conn.spare = buf;
        if !conn.input.is_empty() && conn.delayed.is_none() {
            // Requests held back while output was over its limit.
            self.process_input(slot);
        } else {
            self.flush(slot);
        }
    }

    /// Answers every complete request at the front of the input, then sends.
    fn process_input(&mut self, slot: usize) {
        self.answer(slot, None);
    }

    /// Answers every complete request at the front of the input, or of `fresh` (a provided
    /// buffer and its length, received into an empty input: read in place, then given back
    /// to the ring), keeps what is left for later, then sends.
    fn answer(&mut self, slot: usize, fresh: Option<(u16, usize)>) {
        let Worker {
            conns,
            ring,
            site,
            parser,
            woke,
            ..
        } = self;
        let conn = conns[slot].as_mut().expect("live connection");
        let bytes = match fresh {
            Some((bid, len)) => ring.buffer(bid, len),
            None => &conn.input[..],
        };
        let mut consumed = 0;
        let mut due = None;
        // Nothing left is a partial request: not asked of the parser (httparse, a miss).
        while consumed < bytes.len()
            && due.is_none()
            && conn.delayed.is_none()
            && conn.life == Life::Open
            && conn.output.len() < MAX_PENDING_OUTPUT
        {
            let request = match parser.parse(&bytes[consumed..]) {
                Parsed::Partial => break,
                Parsed::Reject(status) => {
                    http::write_error(output(&mut conn.output), status, site.date());
                    conn.life = Life::Draining;
                    consumed = bytes.len();
                    break;
                }
                Parsed::Request(r) => r,
            };
            consumed += request.len;
            match http::respond(&request, site, output(&mut conn.output)) {
                Reply::Written { close: false } => {}
                Reply::Written { close: true } => conn.life = Life::Draining,
                Reply::Delayed(delayed) => due = Some(delayed),
            }
        }
        let leftover = bytes.len() - consumed;
        if consumed > 0 {
            conn.last_activity = *woke;
        }
        match fresh {
            Some((bid, len)) => {
                if leftover > 0 {
                    conn.input
                        .extend_from_slice(&ring.buffer(bid, len)[consumed..]);
                }
                ring.recycle(bid);
            }
            None if leftover == 0 => conn.input.clear(),
            None => {
                conn.input.drain(..consumed);
            }
        }
        if let Some(delayed) = due {
            let tok = Token::Delay {
                slot: slot as u32,
                generation: conn.generation,
            };
            if ring.timeout(delayed.after, tok).is_ok() {
                conn.delayed = Some(delayed);
            } else {
                http::write_error(output(&mut conn.output), Status::BadRequest, site.date());
                conn.drain();
            }
        }
        conn.partial_since = if conn.input.is_empty() || conn.life != Life::Open {
            None
        } else {
            Some(conn.partial_since.unwrap_or(*woke))
        };
        let limits = parser.limits();
        if conn.input.len() > limits.max_head + limits.max_body + MAX_PENDING_OUTPUT {
            // A client that pipelines without reading: stop before memory runs away.
            self.begin_close(slot);
            return;
        }
        self.flush(slot);
    }

    /// Starts a send of the pending output, or closes if that was the last of it.
    fn flush(&mut self, slot: usize) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        if conn.send.is_some() || conn.life == Life::Closing {
            return;
        }
        if conn.output.is_empty() {
            if conn.life == Life::Draining && conn.delayed.is_none() {
                self.begin_close(slot);
            }
            return;
        }
        let buf = std::mem::replace(&mut conn.output, std::mem::take(&mut conn.spare));
        match self
            .ring
            .send(&conn.socket, buf, 0, io(slot, conn.generation))
        {
            Ok(send) => conn.send = Some(send),
            Err(_) => self.begin_close(slot),
        }
    }

    /// Shuts the socket down so that its ops finish; the slot is freed when they have.
    fn begin_close(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if conn.life != Life::Closing {
            conn.life = Life::Closing;
            let armed = conn.recv.into_iter().chain(conn.send);
            let shutdown = self.ring.shutdown(&conn.socket, armed, Token::Ignored);
            debug_assert!(shutdown.is_ok(), "{shutdown:?}");
        }
        self.maybe_free(slot);
    }

    fn maybe_free(&mut self, slot: usize) {
        let done = self.conns[slot]
            .as_ref()
            .is_some_and(|c| c.life == Life::Closing && !c.ops_in_flight());
        if let Some(conn) = self.conns[slot].take_if(|_| done) {
            self.closing.push(conn.socket);
            self.free.push(slot);
            self.live -= 1;
        }
    }
}
