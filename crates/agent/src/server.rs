//! The agent: accepts runs over TLS, checks their token, profiles what they name and
//! streams it. Each client has its own thread (its work, reading /proc every tick, blocks
//! anyway), up to a limit; whatever a client does wrong ends that client only.

use std::collections::HashSet;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::{ServerConnection, StreamOwned};
use subtle::ConstantTimeEq;

use crate::link::Link;
use crate::sampler::ServerSampler;
use crate::stacks::AgentStacks;
use crate::tls::{agent_tls, AgentTls};
use crate::wire::{Reply, Request};
use crate::Error;
use tailscope_targets::{Target, TargetSpec};

/// What a run asking an agent without `--allow-launch` for a server is told.
pub const LAUNCH_REFUSED: &str = "this agent launches nothing: it was started without --allow-launch (start it with `tailscope agent --allow-launch`, or start the server on its host and give the run its URL)";

/// How long a client has for its handshake and each message before the profile starts.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// The slowest and fastest ticks a run may ask for.
const TICK_MS: std::ops::RangeInclusive<u64> = 20..=10_000;

/// How the agent is set up.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Where it listens.
    pub listen: SocketAddr,
    /// The secret every client must send first.
    pub token: String,
    /// Clients served at once; those beyond are refused.
    pub max_clients: usize,
    /// Where the certificate is kept across restarts (`None`: a new one each start).
    pub cert_dir: Option<std::path::PathBuf>,
    /// Whether runs may have it launch their server (`--allow-launch`): a token holder then
    /// runs any shell command as the agent's user.
    pub allow_launch: bool,
}

/// A bound agent, ready to serve.
pub struct Agent {
    listener: TcpListener,
    tls: AgentTls,
    shared: Arc<Shared>,
}

struct Shared {
    token_digest: [u8; 32],
    max_clients: usize,
    allow_launch: bool,
    clients: AtomicUsize,
    /// The run ids being profiled now: one profile per run id.
    runs: Mutex<HashSet<String>>,
}

fn digest(token: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

impl Agent {
    /// Binds the listener and makes the certificate.
    pub fn bind(config: &AgentConfig) -> Result<Agent, Error> {
        let listener = TcpListener::bind(config.listen).map_err(|e| {
            Error::Usage(format!(
                "cannot listen on {} (--listen): {e}",
                config.listen
            ))
        })?;
        Ok(Agent {
            listener,
            tls: agent_tls(config.cert_dir.as_deref())?,
            shared: Arc::new(Shared {
                token_digest: digest(config.token.as_bytes()),
                max_clients: config.max_clients.max(1),
                allow_launch: config.allow_launch,
                clients: AtomicUsize::new(0),
                runs: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Its certificate's SHA-256 fingerprint, for the runs to pin.
    pub fn fingerprint(&self) -> &str {
        &self.tls.fingerprint
    }

    /// Serves until the process ends; `log` receives one line per event worth saying
    /// (a client refused, a profile started or ended).
    pub fn serve(self, log: impl Fn(String) + Send + Sync + 'static) {
        let log = Arc::new(log);
        for stream in self.listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    log(format!("accept failed: {e}"));
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let peer = stream
                .peer_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string());
            let shared = self.shared.clone();
            if shared.clients.fetch_add(1, Ordering::SeqCst) >= shared.max_clients {
                shared.clients.fetch_sub(1, Ordering::SeqCst);
                log(format!(
                    "refused {peer}: already {} clients at once (--max-clients)",
                    shared.max_clients
                ));
                continue;
            }
            let (config, client_log) = (self.tls.config.clone(), log.clone());
            let spawned = std::thread::Builder::new()
                .name("agent-client".into())
                .spawn(move || {
                    if let Err(e) = serve_client(stream, config, &shared, &*client_log, &peer) {
                        client_log(format!("{peer}: {e}"));
                    }
                    shared.clients.fetch_sub(1, Ordering::SeqCst);
                });
            if let Err(e) = spawned {
                log(format!("cannot start a thread for a client: {e}"));
                self.shared.clients.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

/// Says to a client that does not speak TLS what it reached, and why it is refused.
fn refuse_plain(mut stream: &TcpStream, first: &[u8]) -> Error {
    let error = say_plain(stream, first);
    // What the client sent is read before the close: closing on unread bytes would reset
    // the connection, and the client might lose the answer.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 4096];
    let mut budget = 64 * 1024;
    while let Ok(n @ 1..) = std::io::Read::read(&mut stream, &mut sink) {
        budget -= n.min(budget);
        if budget == 0 {
            break;
        }
    }
    error
}

fn say_plain(mut stream: &TcpStream, first: &[u8]) -> Error {
    let http = first.len() >= 3 && first.iter().take(3).all(u8::is_ascii_uppercase);
    if http {
        let body = "this is a tailscope agent: it speaks TLS with its own protocol (tailscope run --agent HOST:PORT), not HTTP\n";
        let _ = write!(
            stream,
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        Error::Refused("refused: a plain-HTTP client (the agent speaks TLS)".into())
    } else {
        Error::Refused("refused: not a TLS client (garbage before any handshake)".into())
    }
}

type AgentLink = Link<StreamOwned<ServerConnection, TcpStream>>;

/// Refuses the request with `reason`, said to the client and returned for the log.
fn refuse(link: &mut AgentLink, reason: String) -> Error {
    let _ = link.send(&Reply::Refused {
        reason: reason.clone(),
    });
    Error::Refused(format!("refused: {reason}"))
}

fn serve_client(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    shared: &Shared,
    log: &(dyn Fn(String) + Send + Sync),
    peer: &str,
) -> Result<(), Error> {
    let mut link = accept(stream, config)?;
    welcome(&mut link, shared)?;
    // The server launched for this client: dropped (its whole tree stopped) when this
    // function returns, whatever ends the connection; its guardian process stops it if the
    // agent itself dies.
    let mut launched: Option<Target> = None;
    loop {
        let request: Request = link.recv(HANDSHAKE_TIMEOUT * 6, "request")?;
        match request {
            Request::Clock => link.send(&Reply::Clock {
                unix_ns: crate::unix_ns(),
            })?,
            Request::Launch {
                command,
                ready_path,
            } => {
                if launched.is_some() {
                    return Err(refuse(&mut link, "one launch per run".into()));
                }
                let target = launch(&mut link, shared, &command, &ready_path)?;
                log(format!(
                    "{peer}: launched {} (pid {}, port {})",
                    target.command_line(),
                    target.pid(),
                    target.port()
                ));
                launched = Some(target);
            }
            Request::Start {
                run_id,
                watch,
                listen_port,
                tick_ms,
                warmup,
                stacks,
            } => {
                let start = ProfileStart {
                    watch,
                    listen_port,
                    warmup,
                    stacks,
                };
                let result = run_profile(&mut link, shared, log, peer, &run_id, tick_ms, start);
                if let Some(target) = launched.take() {
                    target.stop();
                    log(format!(
                        "{peer}: run {run_id}: the launched server was stopped"
                    ));
                }
                return result;
            }
            other => {
                return Err(refuse(
                    &mut link,
                    format!("unexpected {other:?} before a profile started"),
                ))
            }
        }
    }
}

/// The TLS handshake, after a peek that tells a client not speaking TLS what it reached.
fn accept(stream: TcpStream, config: Arc<rustls::ServerConfig>) -> Result<AgentLink, Error> {
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 8];
    let n = stream.peek(&mut first)?;
    // 0x16: a TLS handshake record, what every TLS client sends first.
    if n == 0 || first[0] != 0x16 {
        return Err(refuse_plain(&stream, &first[..n]));
    }
    let conn = ServerConnection::new(config).map_err(|e| Error::Tls(e.to_string()))?;
    let mut tls = StreamOwned::new(conn, stream);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).map_err(|e| {
            Error::Tls(format!(
                "refused: handshake failed: {e} (a run whose --agent-fingerprint is not this agent's refuses its certificate)"
            ))
        })?;
    }
    Ok(Link::agent_side(tls))
}

/// Reads the client's hello and checks its token (in constant time); welcomes it.
fn welcome(link: &mut AgentLink, shared: &Shared) -> Result<(), Error> {
    let hello: Request = match link.recv(HANDSHAKE_TIMEOUT, "hello") {
        Ok(hello) => hello,
        Err(e @ Error::Wire(_)) => return Err(refuse(link, e.to_string())),
        Err(e) => return Err(e),
    };
    let token_ok = match &hello {
        Request::Hello { token } => bool::from(
            digest(token.as_bytes())
                .as_slice()
                .ct_eq(shared.token_digest.as_slice()),
        ),
        _ => false,
    };
    if !token_ok {
        let _ = link.send(&Reply::Refused {
            reason: "wrong token: the run's --agent-token file must hold the agent's token".into(),
        });
        return Err(Error::Refused("refused: wrong token".into()));
    }
    link.send(&Reply::Welcome {
        version: env!("CARGO_PKG_VERSION").to_string(),
        host: host_name(),
    })
}

/// Launches the server a run asked for, when this agent may (`--allow-launch`), and says
/// where it listens.
fn launch(
    link: &mut AgentLink,
    shared: &Shared,
    command: &str,
    ready_path: &str,
) -> Result<Target, Error> {
    if !shared.allow_launch {
        return Err(refuse(link, LAUNCH_REFUSED.into()));
    }
    let spec = match TargetSpec::parse(&format!("command:{command}")) {
        Ok(TargetSpec::Command {
            template,
            env,
            cwd,
            ready_timeout,
            ..
        }) => TargetSpec::Command {
            template,
            env,
            cwd,
            ready_path: ready_path.to_string(),
            ready_timeout,
        },
        Ok(_) => return Err(refuse(link, format!("{command:?} is not a command"))),
        Err(e) => return Err(refuse(link, e.to_string())),
    };
    let target = match Target::launch(&spec, &[]) {
        Ok(t) => t,
        Err(e) => return Err(refuse(link, format!("the server did not start here: {e}"))),
    };
    link.send(&Reply::Launched {
        pid: target.root_pid(),
        server_pid: target.pid(),
        port: target.port(),
        name: target.name().to_string(),
        command: target.command_line().to_string(),
    })?;
    Ok(target)
}

/// What a run's `Start` asks to profile.
struct ProfileStart {
    watch: crate::wire::Watch,
    listen_port: Option<u16>,
    warmup: bool,
    stacks: crate::wire::StacksWanted,
}

/// Checks a `Start`, starts the profile and streams it until the run finishes it.
fn run_profile(
    link: &mut AgentLink,
    shared: &Shared,
    log: &(dyn Fn(String) + Send + Sync),
    peer: &str,
    run_id: &str,
    tick_ms: u64,
    start: ProfileStart,
) -> Result<(), Error> {
    if !TICK_MS.contains(&tick_ms) {
        return Err(refuse(
            link,
            format!("a tick of {tick_ms} ms: from 20 to 10000 ms"),
        ));
    }
    if !shared
        .runs
        .lock()
        .is_ok_and(|mut r| r.insert(run_id.to_string()))
    {
        return Err(refuse(
            link,
            format!("run {run_id} is already being profiled here"),
        ));
    }
    let (sampler, resolved) =
        ServerSampler::for_watch(start.watch, start.listen_port, start.warmup);
    log(format!(
        "{peer}: run {run_id}: profiling {}",
        resolved.target_pid.map_or_else(
            || "the host".to_string(),
            |p| format!("process {p} and its tree")
        )
    ));
    let (stacks, stacks_not_sampled) = AgentStacks::open(start.stacks, resolved.target_pid);
    if let Some(why) = &stacks_not_sampled {
        log(format!("{peer}: run {run_id}: stacks not sampled: {why}"));
    }
    let result = link
        .send(&Reply::Started {
            target_pid: resolved.target_pid,
            note: resolved.note,
            stacks_not_sampled,
        })
        .and_then(|()| profile(link, sampler, stacks, Duration::from_millis(tick_ms)));
    if let Ok(mut r) = shared.runs.lock() {
        r.remove(run_id);
    }
    log(match &result {
        Ok(()) => format!("{peer}: run {run_id}: profile sent"),
        Err(e) => format!("{peer}: run {run_id}: client lost ({e}): profile dropped"),
    });
    result
}

/// Streams a tick every `tick` until the run asks for the finished profile.
fn profile(
    link: &mut AgentLink,
    mut sampler: ServerSampler,
    mut stacks: AgentStacks,
    tick: Duration,
) -> Result<(), Error> {
    let mut next = Instant::now() + tick;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        link.stream_mut()
            .sock
            .set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match link.poll::<Request>()? {
            Some(Request::Begin { origin_unix_ns }) => {
                // Without a warm-up the window began with the profile.
                if !sampler.begun() {
                    sampler.begin();
                }
                stacks.begin(origin_unix_ns);
            }
            Some(Request::Finish { requests, seconds }) => {
                // The profile first: naming the frames takes seconds, which are not the run's.
                let (profile, listen_queue) = sampler.finish(requests, tick);
                // Named here, where the server's binaries are; while the server still runs.
                let inside = stacks.finish(&seconds);
                link.stream_mut()
                    .sock
                    .set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
                return link.send(&Reply::Finished {
                    profile: Box::new(profile),
                    listen_queue,
                    stacks: inside.map(Box::new),
                });
            }
            Some(Request::Clock) => link.send(&Reply::Clock {
                unix_ns: crate::unix_ns(),
            })?,
            Some(other) => {
                let reason = format!("unexpected {other:?} during a profile");
                let _ = link.send(&Reply::Refused {
                    reason: reason.clone(),
                });
                return Err(Error::Refused(reason));
            }
            None => {}
        }
        if Instant::now() >= next {
            next += tick;
            let t = sampler.tick(None);
            stacks.tick(&sampler.tree_pids());
            link.send(&Reply::Tick(Box::new(t)))?;
        }
    }
}

/// This host's name, as the kernel has it.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}
