//! The run's side of an agent link: connect, prove the token, measure the clock offset,
//! start a profile, and hand its ticks to the session as they come.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ClientConnection, StreamOwned};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::profile::Profile;
use tailscope_targets::stacks::Inside;

use crate::link::Link;
use crate::tls::{agent_name, run_tls};
use crate::wire::{Reply, Request, StacksWanted, Tick, Watch};
use crate::Error;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the agent may be silent once asked for the finished profile: it names the
/// server's stacks first, which takes seconds for a large binary.
pub const FINISH_SILENCE: Duration = Duration::from_secs(60);

type AgentStream = StreamOwned<ClientConnection, TcpStream>;

/// Where the agent is and how it is trusted.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// HOST:PORT.
    pub address: String,
    /// The agent's token.
    pub token: String,
    /// The agent's certificate fingerprint ([`crate::tls::parse_fingerprint`]'s form), or
    /// `None` to take the one presented (and say so).
    pub fingerprint: Option<String>,
    /// A server for the agent to launch (`run --agent ... --target 'command:CMD'`).
    pub launch: Option<LaunchRequest>,
}

/// A server the run asks the agent to launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchRequest {
    /// The shell command, with `{port}`.
    pub command: String,
    /// The path loaded, which must answer HTTP for the server to count as ready.
    pub path: String,
}

/// A server the agent launched for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The root of its tree on the agent's host (what is profiled).
    pub pid: u32,
    /// The process that serves.
    pub server_pid: u32,
    /// The port it listens on.
    pub port: u16,
    /// Its name.
    pub name: String,
    /// The command line the agent ran.
    pub command: String,
}

/// A link whose token was accepted.
pub struct Connected {
    link: Link<AgentStream>,
    /// The agent's host name.
    pub host: String,
    /// The agent's tailscope version.
    pub version: String,
    /// The fingerprint of the certificate it presented.
    pub fingerprint: String,
}

/// The agent's clock against the run's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockOffset {
    /// The agent's clock minus the run's, ms.
    pub offset_ms: f64,
    /// Half the round trip it was read over, ms.
    pub uncertainty_ms: f64,
    /// Round trips made.
    pub round_trips: u32,
}

/// Connects to the agent and proves the token.
pub fn connect(options: &AgentOptions) -> Result<Connected, Error> {
    let addrs: Vec<_> = options
        .address
        .to_socket_addrs()
        .map_err(|e| Error::Usage(format!("cannot resolve {} (--agent): {e}", options.address)))?
        .collect();
    let mut last = None;
    let mut sock = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => {
                sock = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let sock = sock.ok_or_else(|| {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            format!(
                "cannot connect to the agent at {}: {}",
                options.address,
                last.map_or_else(|| "no address".to_string(), |e| e.to_string())
            ),
        ))
    })?;
    sock.set_read_timeout(Some(REPLY_TIMEOUT))?;
    sock.set_write_timeout(Some(REPLY_TIMEOUT))?;
    let _ = sock.set_nodelay(true);
    let (config, seen) = run_tls(options.fingerprint.clone());
    let conn =
        ClientConnection::new(config, agent_name()).map_err(|e| Error::Tls(e.to_string()))?;
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset => Error::Tls(format!(
                "the agent at {} closed the connection during the handshake (it serves its most clients at once, or this is not a tailscope agent)",
                options.address
            )),
            _ => Error::Tls(format!("with the agent at {}: {e}", options.address)),
        })?;
    }
    let fingerprint = seen.seen().unwrap_or_default();
    let mut link = Link::run_side(tls);
    link.send(&Request::Hello {
        token: options.token.clone(),
    })?;
    match link.recv::<Reply>(REPLY_TIMEOUT, "answer to the token")? {
        Reply::Welcome { version, host } => Ok(Connected {
            link,
            host,
            version,
            fingerprint,
        }),
        Reply::Refused { reason } => Err(Error::Refused(reason)),
        other => Err(Error::Refused(format!("unexpected answer {other:?}"))),
    }
}

impl Connected {
    /// Measures the clock offset NTP-style over `rounds` round trips: the one with the
    /// shortest trip is kept, the agent's reading taken as made halfway through it.
    pub fn clock(&mut self, rounds: u32) -> Result<ClockOffset, Error> {
        let mut best: Option<(u64, f64)> = None;
        for _ in 0..rounds.max(1) {
            let sent = crate::unix_ns();
            self.link.send(&Request::Clock)?;
            let agent = match self.link.recv::<Reply>(REPLY_TIMEOUT, "clock reading")? {
                Reply::Clock { unix_ns } => unix_ns,
                other => return Err(Error::Refused(format!("unexpected answer {other:?}"))),
            };
            let back = crate::unix_ns();
            let trip = back.saturating_sub(sent);
            let offset = agent as f64 - (sent as f64 + back as f64) / 2.0;
            if best.is_none_or(|(t, _)| trip < t) {
                best = Some((trip, offset));
            }
        }
        let (trip, offset) = best.unwrap_or_default();
        Ok(ClockOffset {
            offset_ms: offset / 1e6,
            uncertainty_ms: trip as f64 / 2e6,
            round_trips: rounds.max(1),
        })
    }

    /// Has the agent launch `request`'s server and waits until it answers HTTP there.
    pub fn launch(&mut self, request: &LaunchRequest) -> Result<Launched, Error> {
        self.link.send(&Request::Launch {
            command: request.command.clone(),
            ready_path: request.path.clone(),
        })?;
        // The agent waits up to its ready timeout (10 s) for the server to answer.
        match self
            .link
            .recv::<Reply>(REPLY_TIMEOUT * 2, "launch of the server")?
        {
            Reply::Launched {
                pid,
                server_pid,
                port,
                name,
                command,
            } => Ok(Launched {
                pid,
                server_pid,
                port,
                name,
                command,
            }),
            Reply::Refused { reason } => Err(Error::Refused(reason)),
            other => Err(Error::Refused(format!("unexpected answer {other:?}"))),
        }
    }

    /// Starts the profile of `watch` (and of its stacks as `stacks` says) and hands the
    /// link to a thread that receives its ticks.
    pub fn start(
        mut self,
        run_id: &str,
        watch: Watch,
        listen_port: Option<u16>,
        tick: Duration,
        warmup: bool,
        stacks: StacksWanted,
    ) -> Result<AgentRun, Error> {
        self.link.send(&Request::Start {
            run_id: run_id.to_string(),
            watch,
            listen_port,
            tick_ms: u64::try_from(tick.as_millis()).unwrap_or(u64::MAX),
            warmup,
            stacks,
        })?;
        let (target_pid, note, stacks_not_sampled) = match self
            .link
            .recv::<Reply>(REPLY_TIMEOUT, "start of the profile")?
        {
            Reply::Started {
                target_pid,
                note,
                stacks_not_sampled,
            } => (target_pid, note, stacks_not_sampled),
            Reply::Refused { reason } => return Err(Error::Refused(reason)),
            other => return Err(Error::Refused(format!("unexpected answer {other:?}"))),
        };
        let (events_in, events) = mpsc::channel();
        let (requests, requests_out) = mpsc::channel();
        // Silence longer than this is a lost agent: it ticks every `tick`.
        let silence = (tick * 5).max(Duration::from_secs(3));
        let thread = std::thread::Builder::new()
            .name("agent-link".into())
            .spawn(move || follow(self.link, &requests_out, &events_in, silence))?;
        Ok(AgentRun {
            events,
            requests,
            thread: Some(thread),
            target_pid,
            note,
            stacks_not_sampled,
        })
    }
}

/// What the link's thread hands the session.
#[derive(Debug)]
pub enum Event {
    /// One tick's readings.
    Tick(Box<Tick>),
    /// The finished profile, the accept queues and the server's stacks (when sampled).
    Finished(Box<Profile>, Option<ListenReport>, Option<Box<Inside>>),
    /// The agent is gone, and why.
    Lost(String),
}

/// Receives the agent's messages and sends the session's requests until the profile is
/// finished or the agent is lost.
fn follow(
    mut link: Link<AgentStream>,
    requests: &Receiver<Request>,
    events: &Sender<Event>,
    silence: Duration,
) {
    let lost = |why: String| {
        let _ = events.send(Event::Lost(why));
    };
    if let Err(e) = link
        .stream_mut()
        .sock
        .set_read_timeout(Some(Duration::from_millis(20)))
    {
        return lost(e.to_string());
    }
    let mut heard = Instant::now();
    let mut silence = silence;
    loop {
        loop {
            match requests.try_recv() {
                Ok(r) => {
                    if matches!(r, Request::Finish { .. }) {
                        // The agent names the stacks before it answers: no ticks meanwhile.
                        silence = silence.max(FINISH_SILENCE);
                    }
                    if let Err(e) = link.send(&r) {
                        return lost(format!("cannot write to the agent: {e}"));
                    }
                }
                Err(TryRecvError::Empty) => break,
                // The session is gone: dropping the link closes it.
                Err(TryRecvError::Disconnected) => return,
            }
        }
        match link.poll::<Reply>() {
            Ok(Some(Reply::Tick(t))) => {
                heard = Instant::now();
                let _ = events.send(Event::Tick(t));
            }
            Ok(Some(Reply::Finished {
                profile,
                listen_queue,
                stacks,
            })) => {
                let stacks = match stacks.map(|s| s.checked()).transpose() {
                    Ok(s) => s.map(Box::new),
                    Err(why) => return lost(format!("the agent sent broken stacks: {why}")),
                };
                let _ = events.send(Event::Finished(profile, listen_queue, stacks));
                return;
            }
            Ok(Some(Reply::Refused { reason })) => {
                return lost(format!("the agent refused: {reason}"))
            }
            Ok(Some(_)) => heard = Instant::now(),
            Ok(None) if heard.elapsed() > silence => {
                return lost(format!(
                    "no word from the agent for {:.1} s",
                    heard.elapsed().as_secs_f64()
                ))
            }
            Ok(None) => {}
            Err(Error::Closed) => return lost("the agent closed the connection".into()),
            Err(e) => return lost(e.to_string()),
        }
    }
}

/// A profile running on the agent.
pub struct AgentRun {
    events: Receiver<Event>,
    requests: Sender<Request>,
    thread: Option<JoinHandle<()>>,
    /// The tree's root on the agent's host, when a process is profiled.
    pub target_pid: Option<u32>,
    /// What the agent could not do.
    pub note: Option<String>,
    /// Why the server's stacks are not sampled, when they were asked for.
    pub stacks_not_sampled: Option<String>,
}

impl AgentRun {
    /// The measured window has begun (the warm-up is over): its second 0 began at
    /// `origin_unix_ns` on the agent's clock.
    pub fn begin(&self, origin_unix_ns: u64) {
        let _ = self.requests.send(Request::Begin { origin_unix_ns });
    }

    /// What arrived since the last call.
    pub fn drain(&self) -> Vec<Event> {
        self.events.try_iter().collect()
    }

    /// Asks for the finished profile over `requests` (the stacks split by the run's
    /// `seconds`, `(second, outliers, max_us)` each) and waits for it (at most `timeout`);
    /// the events that came before it are returned too, in order.
    pub fn finish(
        mut self,
        requests: u64,
        seconds: Vec<(u32, u64, u64)>,
        timeout: Duration,
    ) -> Vec<Event> {
        let _ = self.requests.send(Request::Finish { requests, seconds });
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(e @ (Event::Finished(..) | Event::Lost(_))) => {
                    out.push(e);
                    break;
                }
                Ok(e) => out.push(e),
                Err(_) => {
                    out.push(Event::Lost(format!(
                        "no finished profile from the agent within {} s",
                        timeout.as_secs()
                    )));
                    break;
                }
            }
        }
        drop(self.requests);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        out
    }
}
