//! The agent's protocol: versioned, length-prefixed JSON messages.
//!
//! A frame is `TSAG`, the protocol version (u16, big endian), the body's length (u32, big
//! endian, at most [`MAX_MESSAGE`]) and the body: one [`Request`] or [`Reply`] as JSON. The
//! header is read before the body is buffered, so a peer that announces more than the cap
//! is refused before it costs memory, and a peer of another version is named as such
//! rather than as garbage. [`decode`] never panics, whatever the bytes (a property test and
//! the fuzz target in `fuzz/` hold it to that).

use std::collections::{BTreeMap, HashMap};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tailscope_targets::listen::{ListenReport, ListenSample};
use tailscope_targets::procstat::CpuUsage;
use tailscope_targets::profile::{Profile, TickCounters};
use tailscope_targets::stacks::Inside;

/// The protocol's version: a run and an agent of different versions refuse each other and
/// say so.
/// v2: the server's stacks (`Start.stacks`, `Begin.origin_unix_ns`, `Finish.seconds`,
/// `Finished.stacks`).
/// v3: a server launched by the agent (`Launch`, `Launched`; `agent --allow-launch`).
pub const PROTOCOL_VERSION: u16 = 3;
/// The first bytes of every frame.
pub const MAGIC: [u8; 4] = *b"TSAG";
/// Magic, version and length.
pub const HEADER_LEN: usize = 10;
/// The largest body accepted (1 MiB): a finished profile of a server of a few hundred
/// processes is some 100 KiB.
pub const MAX_MESSAGE: usize = 1 << 20;
/// The largest reply a run accepts from its agent (64 MiB): the finished profile with the
/// server's named stacks, which grow with the run's length and the server's code. A run
/// talks to the agent it pinned; the agent's own memory is what [`MAX_MESSAGE`] guards.
pub const MAX_REPLY: usize = 64 << 20;

/// What the run asks of the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// The first message: the agent's secret. Nothing else is served before it is checked.
    Hello {
        /// The token, as read from the run's `--agent-token` file.
        token: String,
    },
    /// One round trip of the clock-offset measurement.
    Clock,
    /// Launches a server on the agent's host (before `Start`, at most once per connection):
    /// refused unless the agent was started with `--allow-launch`. The agent tears its
    /// whole process tree down when the connection ends, however it ends.
    Launch {
        /// A shell command with `{port}` (a free port the agent picks) and optionally
        /// `{cpus}`, as `run --target 'command:CMD'` takes it.
        command: String,
        /// The path that must answer HTTP for the server to count as ready.
        ready_path: String,
    },
    /// Starts a profile.
    Start {
        /// The run's id: the agent runs one profile per id at once.
        run_id: String,
        /// What to profile.
        watch: Watch,
        /// The port whose listeners' accept queues are watched, when known.
        listen_port: Option<u16>,
        /// How often to sample, in ms (20 to 10 000).
        tick_ms: u64,
        /// The run begins with a warm-up: the measured window starts at `Begin`.
        warmup: bool,
        /// Whether to sample the server's stacks.
        #[serde(default)]
        stacks: StacksWanted,
    },
    /// The measured window has begun (the warm-up, if any, is over): its second 0 began at
    /// `origin_unix_ns` on the agent's clock (the run's, moved by the offset it measured).
    Begin {
        /// Second 0 of the run's time series, ns since the Unix epoch on the agent's clock.
        origin_unix_ns: u64,
    },
    /// Ends the profile, over the run's `requests`.
    Finish {
        /// The run's measured requests (the service demand's denominator).
        requests: u64,
        /// The run's time series, `(second, outliers, max_us)` each: the slow seconds the
        /// stacks are split by are found from it as for a local server.
        #[serde(default)]
        seconds: Vec<(u32, u64, u64)>,
    },
}

/// Whether the agent samples the server's stacks (the run's `--stacks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StacksWanted {
    /// No.
    #[default]
    Off,
    /// Where perf sampling is allowed on the agent's host; off-CPU time from /proc.
    Auto,
    /// Yes, off-CPU stacks from sched_switch included; refused where it cannot be had.
    On,
}

/// What the agent profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Watch {
    /// A process and its tree of descendants.
    Pid(u32),
    /// The process that owns the socket listening on this port (found by the agent).
    Port(u16),
    /// The host only (per-CPU, TCP counters): no process.
    Host,
}

/// What the agent answers, and streams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// The token is right.
    Welcome {
        /// The agent's tailscope version.
        version: String,
        /// The agent's host name.
        host: String,
    },
    /// The request is refused, and why; the agent closes the connection after it.
    Refused {
        /// What was wrong, said for the run's user.
        reason: String,
    },
    /// The server asked for by `Launch` is up and answers HTTP.
    Launched {
        /// The root of its process tree (what is profiled: the command the agent ran).
        pid: u32,
        /// The process that serves (the root when it cannot be told).
        server_pid: u32,
        /// The port it listens on, on the agent's host.
        port: u16,
        /// What it is called (the serving process's name).
        name: String,
        /// The command line the agent ran.
        command: String,
    },
    /// The agent's clock, read when the `Clock` request arrived.
    Clock {
        /// Nanoseconds since the Unix epoch.
        unix_ns: u64,
    },
    /// The profile runs.
    Started {
        /// The tree's root, when a process is profiled.
        target_pid: Option<u32>,
        /// What the agent could not do (no listener on the port: the host only).
        note: Option<String>,
        /// Why the server's stacks are not sampled, when they were asked for.
        #[serde(default)]
        stacks_not_sampled: Option<String>,
    },
    /// One tick's readings.
    Tick(Box<Tick>),
    /// The finished profile.
    Finished {
        /// What the local profiler's `finish` returns, read on the agent's host.
        profile: Box<Profile>,
        /// The accept queues over the run, when a port was watched.
        listen_queue: Option<ListenReport>,
        /// The server's stacks over the run, named on the agent's host (where its binaries
        /// are), when sampled.
        #[serde(default)]
        stacks: Option<Box<Inside>>,
    },
}

/// One tick of the server-side profiler, as the local one reads it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Tick {
    /// The agent's clock at the tick, ns since the Unix epoch.
    pub unix_ns: u64,
    /// Per-CPU usage since the previous tick.
    pub cpus: Option<Vec<CpuUsage>>,
    /// Per-CPU perf figures since the previous tick.
    pub counters: TickCounters,
    /// Each server thread's wait for a CPU in the tick, in seconds, by tid.
    pub run_queue_wait_s: Option<HashMap<u32, f64>>,
    /// Each server thread's time on a CPU in the tick, in seconds, by tid.
    pub run_time_s: HashMap<u32, f64>,
    /// The watched listeners' accept queues now.
    pub listen: Option<ListenSample>,
    /// The kernel's TCP counters' deltas since the window began.
    pub tcp: Option<BTreeMap<String, i64>>,
}

/// Why bytes are not a message.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Not a frame of this protocol at all.
    #[error("not a tailscope agent message (a plain-HTTP or other client?)")]
    BadMagic,
    /// A frame of another protocol version.
    #[error("the peer speaks agent protocol v{theirs}, this tailscope v{ours}: run the same tailscope version on both hosts")]
    Version {
        /// Ours.
        ours: u16,
        /// The peer's.
        theirs: u16,
    },
    /// A frame announcing more than the cap ([`MAX_MESSAGE`], [`MAX_REPLY`]).
    #[error("a message of {len} bytes announced: more than the {cap}-byte limit")]
    TooLarge {
        /// The announced length.
        len: u64,
        /// The limit.
        cap: usize,
    },
    /// A frame whose body is not the message expected.
    #[error("a malformed message: {0}")]
    Malformed(String),
}

/// One message as a frame, of at most `cap` bytes ([`MAX_MESSAGE`] for a request,
/// [`MAX_REPLY`] for a reply).
pub fn encode<T: Serialize>(message: &T, cap: usize) -> Result<Vec<u8>, WireError> {
    let body = serde_json::to_vec(message).map_err(|e| WireError::Malformed(e.to_string()))?;
    if body.len() > cap.min(MAX_REPLY) {
        return Err(WireError::TooLarge {
            len: body.len() as u64,
            cap: cap.min(MAX_REPLY),
        });
    }
    let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
    frame.extend_from_slice(&MAGIC);
    frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    // Fits: checked against MAX_REPLY above.
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// The body length a frame's header announces, once `buf` holds the header (`None` before):
/// checks the magic, the version and [`MAX_MESSAGE`], so that a bad peer is refused before
/// its body is waited for.
pub fn announced(buf: &[u8]) -> Result<Option<usize>, WireError> {
    announced_within(buf, MAX_MESSAGE)
}

/// [`announced`] with a cap of `cap` bytes.
pub fn announced_within(buf: &[u8], cap: usize) -> Result<Option<usize>, WireError> {
    let seen = buf.len().min(MAGIC.len());
    if buf[..seen] != MAGIC[..seen] {
        return Err(WireError::BadMagic);
    }
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let theirs = u16::from_be_bytes([header[4], header[5]]);
    if theirs != PROTOCOL_VERSION {
        return Err(WireError::Version {
            ours: PROTOCOL_VERSION,
            theirs,
        });
    }
    let len = u32::from_be_bytes([header[6], header[7], header[8], header[9]]);
    if len as usize > cap {
        return Err(WireError::TooLarge {
            len: len.into(),
            cap,
        });
    }
    Ok(Some(len as usize))
}

/// The first message in `buf` and the bytes it took, or `None` until `buf` holds a whole
/// frame of at most [`MAX_MESSAGE`] bytes.
pub fn decode<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, WireError> {
    decode_within(buf, MAX_MESSAGE)
}

/// [`decode`] with a cap of `cap` bytes.
pub fn decode_within<T: DeserializeOwned>(
    buf: &[u8],
    cap: usize,
) -> Result<Option<(T, usize)>, WireError> {
    let Some(len) = announced_within(buf, cap)? else {
        return Ok(None);
    };
    let Some(body) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    let message = serde_json::from_slice(body).map_err(|e| WireError::Malformed(e.to_string()))?;
    Ok(Some((message, HEADER_LEN + len)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn messages_round_trip() {
        let messages = [
            Request::Hello { token: "x".into() },
            Request::Start {
                run_id: "r".into(),
                watch: Watch::Port(8080),
                listen_port: Some(8080),
                tick_ms: 100,
                warmup: false,
                stacks: StacksWanted::Auto,
            },
            Request::Begin { origin_unix_ns: 12 },
            Request::Launch {
                command: "tailscope serve --addr 0.0.0.0:{port}".into(),
                ready_path: "/".into(),
            },
            Request::Finish {
                requests: 7,
                seconds: vec![(0, 1, 900)],
            },
        ];
        let tick = Reply::Tick(Box::new(Tick {
            run_queue_wait_s: Some([(7, 0.5)].into()),
            run_time_s: [(7, 0.25)].into(),
            ..Tick::default()
        }));
        let frame = encode(&tick, MAX_REPLY).unwrap();
        assert_eq!(decode::<Reply>(&frame).unwrap().unwrap().0, tick);
        for m in messages {
            let frame = encode(&m, MAX_MESSAGE).unwrap();
            let (back, used) = decode::<Request>(&frame).unwrap().unwrap();
            assert_eq!((back, used), (m, frame.len()));
            // A partial frame waits for more.
            assert!(decode::<Request>(&frame[..frame.len() - 1])
                .unwrap()
                .is_none());
        }
    }

    #[test]
    fn bad_frames_are_named() {
        assert!(matches!(
            decode::<Request>(b"GET / HTTP/1.1\r\n"),
            Err(WireError::BadMagic)
        ));
        let mut frame = encode(&Request::Clock, MAX_MESSAGE).unwrap();
        frame[5] = 9;
        assert!(matches!(
            decode::<Request>(&frame),
            Err(WireError::Version { theirs: 9, .. })
        ));
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(matches!(
            decode::<Request>(&huge),
            Err(WireError::TooLarge { .. })
        ));
        let mut garbage = MAGIC.to_vec();
        garbage.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
        garbage.extend_from_slice(&3u32.to_be_bytes());
        garbage.extend_from_slice(b"{{{");
        assert!(matches!(
            decode::<Request>(&garbage),
            Err(WireError::Malformed(_))
        ));
    }

    proptest! {
        /// Whatever the bytes, the decoder answers (a message, "more", or an error) and
        /// never panics; a decoded frame never claims more bytes than it was given.
        #[test]
        fn the_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(Some((_, used))) = decode::<Request>(&bytes) {
                prop_assert!(used <= bytes.len());
            }
            let _ = decode::<Reply>(&bytes);
        }

        /// The same with a valid header in front, so that the body's parser is reached.
        #[test]
        fn bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256), json in "\\PC{0,64}") {
            for b in [body, json.into_bytes()] {
                let mut frame = MAGIC.to_vec();
                frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
                frame.extend_from_slice(&(b.len() as u32).to_be_bytes());
                frame.extend_from_slice(&b);
                let _ = decode::<Request>(&frame);
                let _ = decode::<Reply>(&frame);
            }
        }
    }
}
