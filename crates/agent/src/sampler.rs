//! The server side of a run's profile, read on the server's host: the local profiler
//! ([`Profiler`]) and the listeners' accept queues ([`ListenWatch`]) sampled tick by tick.
//! The session samples through it when the server is local, the agent when it is not: one
//! piece of code reads the server for both.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tailscope_targets::listen::{listeners, ListenReport, ListenWatch};
use tailscope_targets::profile::{Profile, Profiler};

use crate::wire::{Tick, Watch};

/// Samples the server's host, and the server's tree when one is known.
pub struct ServerSampler {
    profiler: Profiler,
    listen: Option<ListenWatch>,
    /// The measured window has begun (the warm-up, if any, is over).
    begun: bool,
    window_started: Instant,
}

impl ServerSampler {
    /// Starts sampling `target_pid`'s tree (when given) and `listen`'s queues; `warmup`: the
    /// measured window begins later, at [`ServerSampler::begin`].
    pub fn new(target_pid: Option<u32>, listen: Option<ListenWatch>, warmup: bool) -> Self {
        ServerSampler {
            profiler: Profiler::new(target_pid),
            listen,
            begun: !warmup,
            window_started: Instant::now(),
        }
    }

    /// Also watches `listen`'s accept queues.
    pub fn watching(mut self, listen: ListenWatch) -> Self {
        self.listen = Some(listen);
        self
    }

    /// Starts the measured window now.
    pub fn begin(&mut self) {
        self.profiler.begin();
        if let Some(l) = self.listen.as_mut() {
            l.restart();
        }
        self.begun = true;
        self.window_started = Instant::now();
    }

    /// Whether the measured window has begun.
    pub fn begun(&self) -> bool {
        self.begun
    }

    /// One tick; `elapsed`: where the run is (the listeners' full seconds are counted by
    /// it), or `None` for the time since the window began.
    pub fn tick(&mut self, elapsed: Option<Duration>) -> Tick {
        let elapsed = elapsed.unwrap_or_else(|| self.window_started.elapsed());
        let listen = match (self.listen.as_mut(), self.begun) {
            (Some(l), true) => l.sample(elapsed),
            _ => None,
        };
        let (cpus, counters) = self.profiler.tick();
        Tick {
            unix_ns: crate::unix_ns(),
            cpus,
            counters,
            run_queue_wait_s: self.profiler.run_queue_wait_s().cloned(),
            run_time_s: self.profiler.run_time_s(),
            listen,
            tcp: self.profiler.tcp_so_far(),
        }
    }

    /// The live processes of the server's tree as of the last tick.
    pub fn tree_pids(&self) -> Vec<u32> {
        self.profiler.tree_pids()
    }

    /// The TCP counters' deltas since the window began, read now.
    pub fn tcp_so_far(&self) -> Option<BTreeMap<String, i64>> {
        self.profiler.tcp_so_far()
    }

    /// The accept queues seen so far, when watched.
    pub fn listen_so_far(&self) -> Option<ListenReport> {
        self.listen.as_ref().map(ListenWatch::so_far)
    }

    /// The profile and the accept queues as of now, over the run's `requests` so far: what
    /// [`ServerSampler::finish`] would give, the sampler going on.
    pub fn so_far(&mut self, requests: u64, interval: Duration) -> (Profile, Option<ListenReport>) {
        (
            self.profiler.so_far(requests, interval),
            self.listen_so_far(),
        )
    }

    /// The last tick's accept queues is in its [`Tick`]; this ends the profile over the
    /// run's `requests`, sampled every `interval`.
    pub fn finish(self, requests: u64, interval: Duration) -> (Profile, Option<ListenReport>) {
        (
            self.profiler.finish(requests, interval),
            self.listen.map(ListenWatch::finish),
        )
    }
}

/// What [`ServerSampler::for_watch`] found to profile.
pub struct Resolved {
    /// The tree's root, when a process is profiled.
    pub target_pid: Option<u32>,
    /// What could not be found, said for the run.
    pub note: Option<String>,
}

impl ServerSampler {
    /// A sampler for what a run asks the agent to watch: a pid's tree, the process that
    /// owns the listener on a port, or the host alone.
    pub fn for_watch(watch: Watch, listen_port: Option<u16>, warmup: bool) -> (Self, Resolved) {
        let (target_pid, note) = match watch {
            Watch::Pid(pid) if std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                (Some(pid), None)
            }
            Watch::Pid(pid) => (
                None,
                Some(format!(
                    "no process {pid} on the agent's host: only the host is profiled"
                )),
            ),
            Watch::Port(port) => match listener_owner(port)
                .and_then(|own| own.map_or_else(|| listener_owner_elsewhere(port), |p| Ok(Some(p))))
            {
                Ok(Some(pid)) => (Some(pid), None),
                Ok(None) => (None, Some(format!(
                    "no process of the agent's host (that the agent may read) listens on port {port}, in any network namespace: only the host is profiled"
                ))),
                Err(e) => (None, Some(format!(
                    "the listeners on port {port} cannot be read ({e}): only the host is profiled"
                ))),
            },
            Watch::Host => (None, None),
        };
        let listen = listen_port.or(match watch {
            Watch::Port(p) => Some(p),
            _ => None,
        });
        // A server in another network namespace (a container's): its listeners are read
        // there.
        let elsewhere = target_pid.filter(|&p| netns(p).is_some_and(|n| Some(n) != netns_self()));
        let listen = listen.map(|port| {
            let watch = ListenWatch::on_port(port);
            match elsewhere {
                Some(pid) => watch.in_netns_of(pid),
                None => watch,
            }
        });
        let sampler = ServerSampler::new(target_pid, listen, warmup);
        (sampler, Resolved { target_pid, note })
    }
}

/// The process that owns a socket listening on `port` in this network namespace (see
/// [`listener_owner_elsewhere`] for the others): of those holding one, the oldest
/// ([`tailscope_targets::listen::oldest_holder`]). `None` when no readable process holds one.
pub fn listener_owner(port: u16) -> std::io::Result<Option<u32>> {
    let sockets: Vec<String> = listeners(port)?
        .iter()
        .map(|l| format!("socket:[{}]", l.inode))
        .collect();
    if sockets.is_empty() {
        return Ok(None);
    }
    let all: Vec<_> = procfs::process::all_processes()
        .map_err(std::io::Error::other)?
        .flatten()
        .collect();
    Ok(tailscope_targets::listen::oldest_holder(&all, &sockets))
}

/// The network namespace `pid` is in (its /proc/PID/ns/net link, `net:[INODE]`).
fn netns(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

fn netns_self() -> Option<std::path::PathBuf> {
    std::fs::read_link("/proc/self/ns/net").ok()
}

/// The process that owns a socket listening on `port` in a network namespace other than
/// this one (a container's server, seen by an agent on the host): each namespace's
/// listeners are read from /proc/PID/net/tcp{,6} of one of its processes, and their sockets
/// looked for among the fds of that namespace's processes; of the holders, the oldest.
/// `None` when none does.
pub fn listener_owner_elsewhere(port: u16) -> std::io::Result<Option<u32>> {
    use std::collections::BTreeMap;
    let own = netns_self();
    let mut by_netns: BTreeMap<std::path::PathBuf, Vec<procfs::process::Process>> = BTreeMap::new();
    for p in procfs::process::all_processes()
        .map_err(std::io::Error::other)?
        .flatten()
    {
        if let Some(ns) = u32::try_from(p.pid).ok().and_then(netns) {
            if Some(&ns) != own.as_ref() {
                by_netns.entry(ns).or_default().push(p);
            }
        }
    }
    for processes in by_netns.values() {
        let Some(first) = processes.first() else {
            continue;
        };
        let listening = |table: procfs::ProcResult<Vec<procfs::net::TcpNetEntry>>| {
            table.into_iter().flatten().filter(|e| {
                e.state == procfs::net::TcpState::Listen && e.local_address.port() == port
            })
        };
        let sockets: Vec<String> = listening(first.tcp())
            .chain(listening(first.tcp6()))
            .map(|e| format!("socket:[{}]", e.inode))
            .collect();
        if sockets.is_empty() {
            continue;
        }
        let owner = tailscope_targets::listen::oldest_holder(processes, &sockets);
        if owner.is_some() {
            return Ok(owner);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_of_a_listener_is_found_by_its_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(listener_owner(port).unwrap(), Some(std::process::id()));
        drop(listener);
        assert_eq!(listener_owner(port).unwrap(), None);
    }

    #[test]
    fn a_port_nobody_listens_on_leaves_the_host_only() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let (mut sampler, resolved) = ServerSampler::for_watch(Watch::Port(port), None, false);
        assert_eq!(resolved.target_pid, None);
        assert!(resolved.note.unwrap().contains("listens on port"));
        let tick = sampler.tick(None);
        assert!(tick.run_time_s.is_empty());
        let (profile, listen) = sampler.finish(10, Duration::from_millis(100));
        assert!(profile.target.is_none());
        assert_eq!(listen.unwrap().samples, 0);
    }
}
