//! `tailscope agent`: the server-side profiler on the server's host, for a run on another.
//!
//! The agent ([`server`]) listens for runs over TLS with a self-signed certificate
//! ([`tls`]) whose fingerprint the run pins; a run's first message is the agent's token,
//! checked in constant time before anything else is served. On request it profiles a
//! process tree, the process behind a listening port, or the host alone, with the local
//! profiler's own code ([`sampler`]), and streams every tick what it read, then the finished
//! profile; the server's stacks ([`stacks`]) are sampled and named there, and sent at the
//! end. The run's side ([`client`]) connects, measures the clock offset between the
//! hosts, and hands the session the ticks. The protocol ([`wire`]) is versioned JSON in
//! length-prefixed frames with a hard cap; [`link`] reads it with a bounded buffer.

pub mod client;
pub mod link;
pub mod sampler;
pub mod server;
pub mod stacks;
pub mod tls;
pub mod wire;

/// Why the link to or from an agent failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The peer sent something that is not this protocol.
    #[error(transparent)]
    Wire(#[from] wire::WireError),
    /// The connection failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection.
    #[error("the connection was closed by the other side")]
    Closed,
    /// TLS could not be set up, or the handshake failed.
    #[error("TLS: {0}")]
    Tls(String),
    /// The agent refused the request, and said why.
    #[error("the agent refused: {0}")]
    Refused(String),
    /// Nothing came in time.
    #[error("{0}")]
    Timeout(String),
    /// A setting is wrong (a token file, an address).
    #[error("{0}")]
    Usage(String),
}

/// Reads a token file: its first line, trimmed; an error names the file and what is
/// wrong with it.
pub fn read_token(path: &std::path::Path, flag: &str) -> Result<String, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Usage(format!("cannot read {} ({flag}): {e}", path.display())))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 {
        return Err(Error::Usage(format!(
            "{} ({flag}) holds a token of {} characters: at least 16 are needed (the agent prints a good one when started without --token-file)",
            path.display(),
            token.len()
        )));
    }
    Ok(token)
}

/// A fresh random token: 24 random bytes as hex.
pub fn new_token() -> Result<String, Error> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::Tls("no randomness from the system for a token".into()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Nanoseconds since the Unix epoch, now.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
