//! One end of an agent link: messages in and out over a stream, with a read buffer that
//! never holds more than one frame's worth (header, [`MAX_MESSAGE`], one read) so that a
//! peer's memory cost is bounded whatever it sends.

use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::wire::{decode, encode, MAX_MESSAGE};
use crate::Error;

/// A stream carrying frames of [`crate::wire`].
pub struct Link<S> {
    stream: S,
    buf: Vec<u8>,
}

impl<S: Read + Write> Link<S> {
    /// Frames over `stream` (its read timeout makes [`Link::poll`] return).
    pub fn new(stream: S) -> Self {
        Link {
            stream,
            buf: Vec::new(),
        }
    }

    /// The stream, to set its timeouts.
    pub fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Sends one message.
    pub fn send<T: Serialize>(&mut self, message: &T) -> Result<(), Error> {
        self.stream.write_all(&encode(message)?)?;
        self.stream.flush()?;
        Ok(())
    }

    /// The next message, or `None` when the stream's read timeout passed before a whole
    /// one arrived (what was read is kept for the next call).
    pub fn poll<T: DeserializeOwned>(&mut self) -> Result<Option<T>, Error> {
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Some((message, used)) = decode(&self.buf)? {
                self.buf.drain(..used);
                return Ok(Some(message));
            }
            // decode checked the announced length against the cap: the buffer holds at most
            // one frame and one read beyond it.
            debug_assert!(self.buf.len() <= MAX_MESSAGE + chunk.len() + crate::wire::HEADER_LEN);
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
