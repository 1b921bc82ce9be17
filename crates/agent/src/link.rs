//! One end of an agent link: messages in and out over a stream, with a read buffer that
//! never holds more than one frame's worth (header, the cap, one read) so that a peer's
//! memory cost is bounded whatever it sends: [`MAX_MESSAGE`] on the agent's side, which
//! reads requests from anyone who can reach it, [`MAX_REPLY`] on the run's side, which
//! reads the named stacks from the agent it pinned.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::wire::{decode_within, encode, MAX_MESSAGE, MAX_REPLY};
use crate::Error;

/// A stream carrying frames of [`crate::wire`].
pub struct Link<S> {
    stream: S,
    buf: Vec<u8>,
    /// The largest frame body read.
    read_cap: usize,
    /// The largest frame body sent.
    send_cap: usize,
}

impl<S: Read + Write> Link<S> {
    /// The agent's end of a link over `stream` (its read timeout makes [`Link::poll`]
    /// return): requests of at most [`MAX_MESSAGE`] in, replies of at most [`MAX_REPLY`] out.
    pub fn agent_side(stream: S) -> Self {
        Link {
            stream,
            buf: Vec::new(),
            read_cap: MAX_MESSAGE,
            send_cap: MAX_REPLY,
        }
    }

    /// The run's end: requests out, replies of at most [`MAX_REPLY`] in.
    pub fn run_side(stream: S) -> Self {
        Link {
            stream,
            buf: Vec::new(),
            read_cap: MAX_REPLY,
            send_cap: MAX_MESSAGE,
        }
    }

    /// The stream, to set its timeouts.
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&mut self, message: &T) -> Result<(), Error> {
        self.stream.write_all(&encode(message, self.send_cap)?)?;
        self.stream.flush()?;
        Ok(())
    }

    /// The next message, or `None` when the stream's read timeout passed before a whole
    /// one arrived (what was read is kept for the next call).
    pub fn poll<T: DeserializeOwned>(&mut self) -> Result<Option<T>, Error> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some((message, used)) = decode_within(&self.buf, self.read_cap)? {
                self.buf.drain(..used);
                return Ok(Some(message));
            }
            // decode checked the announced length against the cap: the buffer holds at most
            // one frame and one read beyond it.
            debug_assert!(self.buf.len() <= self.read_cap + chunk.len() + crate::wire::HEADER_LEN);
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(Error::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Err(Error::Closed),
                Err(e) => return Err(Error::Io(e)),
            }
        }
    }

    /// The next message within `timeout` (the stream's own read timeout should be shorter).
    pub fn recv<T: DeserializeOwned>(&mut self, timeout: Duration, what: &str) -> Result<T, Error> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(message) = self.poll()? {
                return Ok(message);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout(format!(
                    "no {what} within {} s",
                    timeout.as_secs_f64()
                )));
            }
        }
    }
}
