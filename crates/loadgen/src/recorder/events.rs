//! What an engine tells its recorder of one request: finished, or still unfinished at the
//! end, and what TCP_INFO said of its connection.

use std::time::{Duration, Instant};

use crate::snapshot::Stage;
use crate::sys::TcpFacts;

/// One request that finished with a complete response, as the engine timed it.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    /// Open loop: when the schedule meant the request to leave.
    pub intended: Option<Instant>,
    /// When the generator began the request: its connect, if it opened one, else its write.
    pub begun: Instant,
    /// When its bytes were written.
    pub sent: Instant,
    /// When the first byte of its response arrived.
    pub first_byte: Instant,
    /// When the last byte of its response arrived.
    pub end: Instant,
    /// The TCP handshake, when this request waited for its connection to open (it opened
    /// it, or was sent with the one that did).
    pub connect: Option<Duration>,
    /// The TLS handshake, likewise (https).
    pub tls: Option<Duration>,
    /// The first request on its connection.
    pub first_on_connection: bool,
    /// Connection number within the worker.
    pub conn: u64,
    /// Status code.
    pub status: u16,
    /// Response bytes, head and body.
    pub bytes: u64,
    /// Its connection's TCP_INFO when it ended, read for slow requests only.
    pub tcp: Option<TcpFacts>,
    /// Its name's index in the mix (0 for a single request).
    pub request: u32,
}

impl Finished {
    /// Latency as the report counts it: from the intended time in open loop (or from when it
    /// actually began, if it left early within the timer's resolution), else from `begun`.
    pub fn latency(&self) -> Duration {
        let start = match self.intended {
            Some(i) => i.min(self.begun),
            None => self.begun,
        };
        self.end.saturating_duration_since(start)
    }
}

/// A request still unfinished when the run ended, as the engine saw it then.
#[derive(Debug, Clone, Copy)]
pub struct Unfinished {
    /// When it began (its intended time in open loop).
    pub start: Instant,
    /// When its bytes were written, if they were.
    pub sent: Option<Instant>,
    /// When the first byte of its response arrived, if one did.
    pub first_byte: Option<Instant>,
    /// What it was waiting for.
    pub stage: Stage,
    /// It opened (or was opening) its connection.
    pub first_on_connection: bool,
    /// Connection number within the worker.
    pub conn: u64,
    /// Its connection's TCP_INFO at the end, when it had a connection.
    pub tcp: Option<TcpFacts>,
    /// Its name's index in the mix, once it was sent (which request a claim sends is
    /// picked when it is written).
    pub request: Option<u32>,
}
