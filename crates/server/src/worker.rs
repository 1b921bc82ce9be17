//! One worker thread: its ring, its listener, its connections, its clock.
//!
//! Connections live in a slab indexed by the token of their ops (slot and generation). A
//! connection is freed only when none of its ops is in flight, so a completion never finds
//! its connection gone or reused. Requests are answered in order: every complete request in
//! the input is answered into one output buffer and sent with one send; a `/delay` holds the
//! requests behind it until its timeout fires; a partial send is continued, never dropped.

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::http::{self, HttpDate, Limits, Parsed, Route, Status};
use crate::static_files;
use crate::uring::{Completion, Payload, Ring};
use crate::Config;

/// The token of the worker's periodic tick.
const TICK: u64 = u64::MAX;
/// The token of the listener's accept.
const ACCEPT: u64 = u64::MAX - 1;
/// How often the tick runs: shutdown, stalls, the Date header and idle sweeps.
const TICK_EVERY: Duration = Duration::from_millis(100);
/// Input and output a connection may hold before it is paused (output) or closed (input).
const MAX_PENDING_OUTPUT: usize = 4 * 1024 * 1024;
/// How long a graceful shutdown waits for in-flight responses.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

struct Conn {
    fd: OwnedFd,
    generation: u32,
    input: Vec<u8>,
    output: Vec<u8>,
    spare: Vec<u8>,
    send_in_flight: bool,
    recv_armed: bool,
    delay_pending: Option<DelayedReply>,
    close_after_flush: bool,
    closing: bool,
    ops: u32,
    last_activity: Instant,
    partial_since: Option<Instant>,
}

#[derive(Clone, Copy)]
struct DelayedReply {
    head_only: bool,
    close: bool,
}

/// What a worker needs to know besides its own state.
struct Ctx {
    limits: Limits,
    static_root: Option<PathBuf>,
    date: HttpDate,
    json: Vec<u8>,
}

#[derive(serde::Serialize)]
struct Message {
    message: &'static str,
}

pub(crate) struct Worker {
    ring: Ring,
    listener: OwnedFd,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    next_generation: u32,
    ctx: Ctx,
    config: Arc<Config>,
    shutdown: Arc<AtomicBool>,
    accepting: bool,
    shutdown_started: Option<Instant>,
    next_stall: Option<Instant>,
    next_burn: Option<Instant>,
    date_second: u64,
    last_sweep: Instant,
    completions: Vec<Completion>,
}

/// Marks a connection's `/delay` timeout among its ops (the others are recv and send, which
/// the completion itself tells apart).
const DELAY_BIT: u64 = 1 << 63;

/// A connection op's token: slot in the low 32 bits, a 31-bit generation above it.
fn token(slot: usize, generation: u32) -> u64 {
    (u64::from(generation & 0x7fff_ffff) << 32) | slot as u64
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
        let ring = Ring::new(4096, 1024, 16 * 1024)?;
        let now = Instant::now();
        Ok(Worker {
            ring,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            live: 0,
            next_generation: 0,
            ctx: Ctx {
                limits: Limits::default(),
                static_root: config.static_dir.clone(),
                date: http::http_date(SystemTime::now()),
                json: Vec::with_capacity(64),
            },
            next_stall: config.stall.map(|s| now + s.every),
            next_burn: config.burn.map(|s| now + s.every),
            config,
            shutdown,
            accepting: true,
            shutdown_started: None,
            date_second: now_second(),
            last_sweep: now,
            completions: Vec::with_capacity(1024),
        })
    }

    /// Serves until shutdown is asked for and the last connection is done.
    pub(crate) fn run(mut self) -> std::io::Result<()> {
        self.ring.accept_multi(&self.listener, ACCEPT)?;
        self.ring.timeout(TICK_EVERY, TICK)?;
        loop {
            self.ring.submit_and_wait()?;
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

    fn complete(&mut self, c: Completion) -> std::io::Result<()> {
        match c.token {
            TICK => self.tick(),
            ACCEPT => self.accepted(c),
            t => {
                self.conn_completion(t, c);
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
        let second = now_second();
        if second != self.date_second {
            self.date_second = second;
            self.ctx.date = http::http_date(SystemTime::now());
        }
        if self.accepting && self.shutdown.load(Ordering::SeqCst) {
            self.begin_shutdown(now);
        }
        if now.duration_since(self.last_sweep) >= Duration::from_millis(250) {
            self.last_sweep = now;
            self.sweep(now);
        }
        self.ring.timeout(TICK_EVERY, TICK)
    }

    /// Closes connections that sent half a request too long ago (slowloris) or sat idle.
    fn sweep(&mut self, now: Instant) {
        let header_timeout = self.config.header_timeout;
        let idle_timeout = self.config.idle_timeout;
        for slot in 0..self.conns.len() {
            let Some(conn) = self.conns[slot].as_mut() else {
                continue;
            };
            if conn.closing {
                continue;
            }
            let slow = conn
                .partial_since
                .is_some_and(|t| now.duration_since(t) > header_timeout);
            let idle = conn.input.is_empty()
                && !conn.send_in_flight
                && conn.delay_pending.is_none()
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
            conn.close_after_flush = true;
            let idle =
                !conn.send_in_flight && conn.output.is_empty() && conn.delay_pending.is_none();
            if idle {
                self.begin_close(slot);
            }
        }
    }

    fn accepted(&mut self, c: Completion) -> std::io::Result<()> {
        if let Payload::Accepted(fd) = c.payload {
            if self.accepting && self.live < self.config.max_conns {
                self.add_conn(fd)?;
            }
            // Otherwise dropping `fd` closes it: over --max-conns, or shutting down.
        }
        if !c.more && self.accepting {
            self.ring.accept_multi(&self.listener, ACCEPT)?;
        }
        Ok(())
    }

    fn add_conn(&mut self, fd: OwnedFd) -> std::io::Result<()> {
        let _ = socket2::SockRef::from(&fd).set_nodelay(true);
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.conns.len() - 1
            }
        };
        self.next_generation = self.next_generation.wrapping_add(1) & 0x7fff_ffff;
        let generation = self.next_generation;
        self.ring.recv_multi(&fd, token(slot, generation))?;
        self.conns[slot] = Some(Conn {
            fd,
            generation,
            input: Vec::new(),
            output: Vec::with_capacity(4096),
            spare: Vec::new(),
            send_in_flight: false,
            recv_armed: true,
            delay_pending: None,
            close_after_flush: false,
            closing: false,
            ops: 1,
            last_activity: Instant::now(),
            partial_since: None,
        });
        self.live += 1;
        Ok(())
    }

    fn conn_completion(&mut self, tok: u64, c: Completion) {
        let slot = (tok & 0xffff_ffff) as usize;
        let generation = ((tok & !DELAY_BIT) >> 32) as u32;
        let Some(conn) = self
            .conns
            .get_mut(slot)
            .and_then(Option::as_mut)
            .filter(|c| c.generation == generation)
        else {
            // Never expected (a slot is freed only when its ops are done); keep the buffer ring whole.
            if let Some(bid) = c.buffer {
                self.ring.recycle(bid);
            }
            return;
        };
        if !c.more {
            conn.ops -= 1;
        }
        match c.payload {
            Payload::Sent(buf, offset) => self.sent(slot, buf, offset, c.result),
            _ if tok & DELAY_BIT != 0 => self.delay_done(slot),
            _ => self.received(slot, &c),
        }
        self.maybe_free(slot);
    }

    fn received(&mut self, slot: usize, c: &Completion) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        if let Some(bid) = c.buffer {
            if c.result > 0 && !conn.closing {
                conn.input
                    .extend_from_slice(self.ring.buffer(bid, c.result as usize));
            }
            self.ring.recycle(bid);
        }
        if !c.more {
            conn.recv_armed = false;
        }
        if conn.closing {
            return;
        }
        if c.result == 0 {
            // The client closed its side: answer what was asked, then close.
            conn.close_after_flush = true;
            if !conn.send_in_flight && conn.output.is_empty() && conn.delay_pending.is_none() {
                self.begin_close(slot);
                return;
            }
        } else if c.result < 0 && c.result != -libc::ENOBUFS {
            self.begin_close(slot);
            return;
        }
        let conn = self.conns[slot].as_mut().expect("live connection");
        if !conn.recv_armed && !conn.close_after_flush {
            // The kernel ended the multishot recv (no buffer free, or its own limit): re-arm.
            if self
                .ring
                .recv_multi(&conn.fd, token(slot, conn.generation))
                .is_ok()
            {
                conn.recv_armed = true;
                conn.ops += 1;
            }
        }
        if c.result > 0 {
            self.process_input(slot);
        }
    }

    fn delay_done(&mut self, slot: usize) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        let Some(reply) = conn.delay_pending.take() else {
            return;
        };
        if conn.closing {
            return;
        }
        http::write_response(
            &mut conn.output,
            Status::Ok,
            "text/plain",
            b"Hello, World!",
            &self.ctx.date,
            reply.head_only,
            reply.close,
        );
        if reply.close {
            conn.close_after_flush = true;
        }
        self.process_input(slot);
    }

    fn sent(&mut self, slot: usize, mut buf: Vec<u8>, offset: usize, result: i32) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        conn.send_in_flight = false;
        if conn.closing {
            return;
        }
        if result < 0 {
            self.begin_close(slot);
            return;
        }
        let done = offset + result as usize;
        if done < buf.len() {
            // A partial send: finish it before anything else goes out.
            if self
                .ring
                .send(&conn.fd, buf, done, token(slot, conn.generation))
                .is_ok()
            {
                conn.send_in_flight = true;
                conn.ops += 1;
            } else {
                self.begin_close(slot);
            }
            return;
        }
        buf.clear();
        conn.spare = buf;
        if !conn.input.is_empty() && conn.delay_pending.is_none() {
            // Requests held back while output was over its limit.
            self.process_input(slot);
        } else {
            self.flush(slot);
        }
    }

    /// Answers every complete request at the front of the input, then sends.
    fn process_input(&mut self, slot: usize) {
        let Worker {
            conns, ring, ctx, ..
        } = self;
        let conn = conns[slot].as_mut().expect("live connection");
        let mut consumed = 0;
        while conn.delay_pending.is_none()
            && !conn.close_after_flush
            && conn.output.len() < MAX_PENDING_OUTPUT
        {
            let request = match http::parse(&conn.input[consumed..], &ctx.limits) {
                Parsed::Partial => break,
                Parsed::Reject(status) => {
                    http::write_error(&mut conn.output, status, &ctx.date);
                    conn.close_after_flush = true;
                    consumed = conn.input.len();
                    break;
                }
                Parsed::Request(r) => r,
            };
            consumed += request.len;
            let close = !request.keep_alive;
            let out = &mut conn.output;
            match request.route {
                Route::Plaintext => http::write_response(
                    out,
                    Status::Ok,
                    "text/plain",
                    b"Hello, World!",
                    &ctx.date,
                    request.head_only,
                    close,
                ),
                Route::Json => {
                    ctx.json.clear();
                    serde_json::to_writer(
                        &mut ctx.json,
                        &Message {
                            message: "Hello, World!",
                        },
                    )
                    .expect("a struct of one string serializes");
                    http::write_response(
                        out,
                        Status::Ok,
                        "application/json",
                        &ctx.json,
                        &ctx.date,
                        request.head_only,
                        close,
                    );
                }
                Route::Bytes(n) => {
                    http::write_head(
                        out,
                        Status::Ok,
                        "application/octet-stream",
                        n,
                        &ctx.date,
                        close,
                    );
                    if !request.head_only {
                        out.resize(out.len() + n, b'x');
                    }
                }
                Route::Delay(ms) => {
                    if ring
                        .timeout(
                            Duration::from_millis(ms),
                            token(slot, conn.generation) | DELAY_BIT,
                        )
                        .is_ok()
                    {
                        conn.ops += 1;
                        conn.delay_pending = Some(DelayedReply {
                            head_only: request.head_only,
                            close,
                        });
                    } else {
                        http::write_error(out, Status::BadRequest, &ctx.date);
                        conn.close_after_flush = true;
                    }
                }
                Route::Static(path) => match ctx
                    .static_root
                    .as_deref()
                    .ok_or(Status::NotFound)
                    .and_then(|root| static_files::resolve(root, path))
                {
                    // Reading a file blocks this loop briefly; the reference server serves
                    // small files from the page cache, not a file system under load.
                    Ok(file) => match std::fs::read(&file) {
                        Ok(body) => http::write_response(
                            out,
                            Status::Ok,
                            static_files::content_type(&file),
                            &body,
                            &ctx.date,
                            request.head_only,
                            close,
                        ),
                        Err(_) => http::write_error(out, Status::NotFound, &ctx.date),
                    },
                    Err(status) => {
                        http::write_error(out, status, &ctx.date);
                        conn.close_after_flush = true;
                    }
                },
                Route::NotFound => http::write_response(
                    out,
                    Status::NotFound,
                    "text/plain",
                    b"not found\n",
                    &ctx.date,
                    request.head_only,
                    close,
                ),
                Route::MethodNotAllowed => http::write_response(
                    out,
                    Status::MethodNotAllowed,
                    "text/plain",
                    b"method not allowed\n",
                    &ctx.date,
                    false,
                    close,
                ),
            }
            if close {
                conn.close_after_flush = true;
            }
        }
        if consumed > 0 {
            conn.last_activity = Instant::now();
            if consumed == conn.input.len() {
                conn.input.clear();
            } else {
                conn.input.drain(..consumed);
            }
        }
        conn.partial_since = if conn.input.is_empty() || conn.close_after_flush {
            None
        } else {
            Some(conn.partial_since.unwrap_or_else(Instant::now))
        };
        if conn.input.len() > ctx.limits.max_head + ctx.limits.max_body + MAX_PENDING_OUTPUT {
            // A client that pipelines without reading: stop before memory runs away.
            self.begin_close(slot);
            return;
        }
        self.flush(slot);
    }

    /// Starts a send of the pending output, or closes if that was the last of it.
    fn flush(&mut self, slot: usize) {
        let conn = self.conns[slot].as_mut().expect("live connection");
        if conn.send_in_flight || conn.closing {
            return;
        }
        if conn.output.is_empty() {
            if conn.close_after_flush && conn.delay_pending.is_none() {
                self.begin_close(slot);
            }
            return;
        }
        let buf = std::mem::replace(&mut conn.output, std::mem::take(&mut conn.spare));
        if self
            .ring
            .send(&conn.fd, buf, 0, token(slot, conn.generation))
            .is_ok()
        {
            conn.send_in_flight = true;
            conn.ops += 1;
        } else {
            self.begin_close(slot);
        }
    }

    /// Shuts the socket down so that its ops finish; the slot is freed when they have.
    fn begin_close(&mut self, slot: usize) {
        let Some(conn) = self.conns[slot].as_mut() else {
            return;
        };
        if !conn.closing {
            conn.closing = true;
            let _ = socket2::SockRef::from(&conn.fd).shutdown(std::net::Shutdown::Both);
        }
        self.maybe_free(slot);
    }

    fn maybe_free(&mut self, slot: usize) {
        let done = self.conns[slot]
            .as_ref()
            .is_some_and(|c| c.closing && c.ops == 0);
        if done {
            // Dropping the connection closes its socket.
            self.conns[slot] = None;
            self.free.push(slot);
            self.live -= 1;
        }
    }
}
