//! The server side read by a `tailscope agent` on the server's host (`run --agent`): the
//! agent's ticks stand where the local profiler's would, the finished profile comes from
//! it, and an agent lost mid-run leaves the run going with the server side missing from
//! then on, said in the report.

use std::time::{Duration, Instant};

use tailscope_agent::client::{connect, AgentOptions, AgentRun, ClockOffset, Event, Launched};
use tailscope_agent::wire::{StacksWanted, Tick, Watch};
use tailscope_targets::listen::ListenReport;
use tailscope_targets::profile::{AgentLink, Profile, Profiler};
use tailscope_targets::stacks::Inside;

use crate::stacks::StacksMode;

/// Round trips of the clock-offset measurement.
const CLOCK_ROUNDS: u32 = 8;
/// How long the finished profile is waited for (the agent names the server's stacks first).
const FINISH_TIMEOUT: Duration = tailscope_agent::client::FINISH_SILENCE;

/// A profile running on an agent, seen from the run.
pub struct AgentSide {
    run: Option<AgentRun>,
    address: String,
    host: String,
    clock: ClockOffset,
    fingerprint: String,
    pinned: bool,
    /// When the measured window began here (the warm-up's end, or the start).
    window_started: Instant,
    /// Seconds into the measured window when the agent was lost, and why.
    lost: Option<(f64, String)>,
    /// The agent's last tick.
    last: Option<Tick>,
    /// This host's profiler, for the generator's own CPU time only.
    local: Profiler,
    /// What the agent said it could not do.
    note: Option<String>,
    /// Why the agent samples no stacks, when they were asked for.
    stacks_not_sampled: Option<String>,
    /// The measured window's start was sent to the agent.
    begun: bool,
    /// The server the agent launched for the run (`--target` through it).
    launched: Option<Launched>,
}

impl AgentSide {
    /// Connects, measures the clock offset, has the agent launch the run's server when
    /// `options` asks (`plan`'s URL then points at it, and it is what is watched), and
    /// starts the profile of `watch`.
    pub fn start(
        options: &AgentOptions,
        mut watch: Watch,
        plan: &mut tailscope_loadgen::Plan,
        stacks: StacksWanted,
    ) -> Result<AgentSide, tailscope_agent::Error> {
        let mut connected = connect(options)?;
        let clock = connected.clock(CLOCK_ROUNDS)?;
        let (host, fingerprint) = (connected.host.clone(), connected.fingerprint.clone());
        let launched = match &options.launch {
            Some(request) => {
                let launched = connected.launch(request)?;
                let url = format!(
                    "http://{}:{}{}",
                    agent_host(&options.address),
                    launched.port,
                    request.path
                );
                plan.set_url(&url).map_err(|e| {
                    tailscope_agent::Error::Usage(format!("the launched server's URL {url}: {e}"))
                })?;
                watch = Watch::Pid(launched.pid);
                Some(launched)
            }
            None => None,
        };
        let run_id = format!("{}-{}", std::process::id(), tailscope_agent::unix_ns());
        let (listen_port, tick, warmup) = (plan.addr.port(), plan.tick, !plan.warmup.is_zero());
        let run = connected.start(&run_id, watch, Some(listen_port), tick, warmup, stacks)?;
        let note = run.note.clone();
        let stacks_not_sampled = run.stacks_not_sampled.clone();
        Ok(AgentSide {
            run: Some(run),
            address: options.address.clone(),
            host,
            clock,
            fingerprint,
            pinned: options.fingerprint.is_some(),
            window_started: Instant::now(),
            lost: None,
            last: None,
            local: Profiler::new(None),
            note,
            stacks_not_sampled,
            begun: false,
            launched,
        })
    }

    /// The agent's host name.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The server the agent launched for the run, when it did.
    pub fn launched(&self) -> Option<&Launched> {
        self.launched.as_ref()
    }

    /// Why the agent samples no stacks, when they were asked for.
    pub fn stacks_not_sampled(&self) -> Option<&str> {
        self.stacks_not_sampled.as_deref()
    }

    /// The agent's host name, its clock offset and what it could not do, for the run's
    /// opening lines.
    pub fn describe(&self) -> String {
        format!(
            "agent {} at {}: clock offset {:+.3} ms ± {:.3} ms{}",
            self.host,
            self.address,
            self.clock.offset_ms,
            self.clock.uncertainty_ms,
            self.note
                .as_ref()
                .map_or_else(String::new, |n| format!("; {n}"))
        )
    }

    /// The measured window has begun (once; later calls do nothing): second 0 of the run's
    /// time series began `elapsed` ago, which the agent's stacks are counted from.
    pub fn begin(&mut self, elapsed: Duration) {
        if self.begun {
            return;
        }
        self.begun = true;
        self.local.begin();
        self.window_started = Instant::now()
            .checked_sub(elapsed)
            .unwrap_or_else(Instant::now);
        if let Some(run) = &self.run {
            let elapsed_ns = elapsed.as_nanos() as f64;
            let origin =
                tailscope_agent::unix_ns() as f64 - elapsed_ns + self.clock.offset_ms * 1e6;
            run.begin(origin.max(0.0) as u64);
        }
    }

    /// The ticks that arrived since the last call, each with its age: how long before now
    /// it was read, on this host's clock (the agent's clock less the offset measured at
    /// start), so that its readings land in the run's second they belong to. Notes the loss
    /// of the agent.
    pub fn ticks(&mut self) -> Vec<(Duration, Tick)> {
        let Some(run) = &self.run else {
            return Vec::new();
        };
        let now_ns = tailscope_agent::unix_ns();
        let mut ticks = Vec::new();
        for event in run.drain() {
            match event {
                Event::Tick(t) => {
                    ticks.push((tick_age(now_ns, t.unix_ns, self.clock.offset_ms), *t));
                }
                Event::Lost(why) => self.lose(why),
                Event::Finished(..) => {}
            }
        }
        if let Some((_, t)) = ticks.last() {
            self.last = Some(t.clone());
        }
        ticks
    }

    fn lose(&mut self, why: String) {
        if self.lost.is_none() {
            self.lost = Some((self.window_started.elapsed().as_secs_f64(), why));
        }
        self.run = None;
    }

    /// Whether the agent was lost.
    pub fn is_lost(&self) -> bool {
        self.lost.is_some()
    }

    /// The agent's last tick.
    pub fn last(&self) -> Option<&Tick> {
        self.last.as_ref()
    }

    /// The finished profile and the server's stacks (split by the run's `seconds`,
    /// `(second, outliers, max_us)` each), from the agent (or, when it was lost, the
    /// generator's side alone, with a note saying from when the server side is missing).
    pub fn finish(
        mut self,
        requests: u64,
        interval: Duration,
        seconds: Vec<(u32, u64, u64)>,
    ) -> (Profile, Option<ListenReport>, Option<Inside>) {
        let mut finished = None;
        let mut inside = None;
        if let Some(run) = self.run.take() {
            for event in run.finish(requests, seconds, FINISH_TIMEOUT) {
                match event {
                    Event::Finished(profile, listen, stacks) => {
                        finished = Some((*profile, listen));
                        inside = stacks.map(|s| *s);
                    }
                    Event::Lost(why) => self.lose(why),
                    Event::Tick(_) => {}
                }
            }
        }
        let here = self.local.finish(requests, interval);
        let (mut profile, listen) = finished.unwrap_or_else(|| {
            let mut p = here.clone();
            p.cpus.clear();
            p.target = None;
            p.tcp = None;
            p.notes.clear();
            (p, None)
        });
        profile.generator = here.generator;
        if let Some((at, why)) = &self.lost {
            profile.notes.push(format!(
                "the agent at {} was lost {at:.1} s into the measured run ({why}): the server side (its CPU, process tree, accept queue, TCP counters) is missing from then on, and nothing is judged from it",
                self.address
            ));
        }
        if let Some(note) = &self.note {
            profile.notes.push(format!("agent: {note}"));
        }
        profile.source = Some(format!("agent {}", self.host));
        profile.agent = Some(AgentLink {
            address: self.address.clone(),
            host: self.host.clone(),
            clock_offset_ms: self.clock.offset_ms,
            clock_uncertainty_ms: self.clock.uncertainty_ms,
            clock_round_trips: self.clock.round_trips,
            fingerprint: self.fingerprint.clone(),
            pinned: self.pinned,
            lost_at_s: self.lost.as_ref().map(|(at, _)| (at * 10.0).round() / 10.0),
            lost_because: self.lost.as_ref().map(|(_, why)| why.clone()),
        });
        (profile, listen, inside)
    }
}

/// How long before `now_ns` (this host's clock) a tick read at `tick_ns` on the agent's
/// clock was, given the agent's clock runs `offset_ms` ahead; 0 to 5 s (a tick "from the
/// future" is a clock that drifted since the offset was measured: taken as now).
fn tick_age(now_ns: u64, tick_ns: u64, offset_ms: f64) -> Duration {
    let here_ns = tick_ns as f64 - offset_ms * 1e6;
    Duration::from_secs_f64(((now_ns as f64 - here_ns) / 1e9).clamp(0.0, 5.0))
}

/// Starts the agent's profile for a run: of `pid` on the agent's host, or else of the
/// process listening on the port the run loads, with its stacks as `stacks` says; a refusal
/// (token, pin, version) is a usage error, said before anything is sent, and so is `--stacks
/// on` where the agent cannot sample them.
pub fn start_for(
    options: &AgentOptions,
    pid: Option<u32>,
    plan: &mut tailscope_loadgen::Plan,
    stacks: StacksMode,
) -> anyhow::Result<AgentSide> {
    let watch = pid.map_or(Watch::Port(plan.addr.port()), Watch::Pid);
    let wanted = match stacks {
        StacksMode::Off => StacksWanted::Off,
        StacksMode::Auto => StacksWanted::Auto,
        StacksMode::On => StacksWanted::On,
    };
    let started = AgentSide::start(options, watch, plan, wanted);
    match started {
        Ok(side) => match (stacks, side.stacks_not_sampled()) {
            (StacksMode::On, Some(why)) => Err(crate::UsageError(format!(
                "the agent at {} cannot sample the server's stacks (--stacks on): {why}: nothing was sent",
                options.address
            ))
            .into()),
            _ => Ok(side),
        },
        Err(
            e @ (tailscope_agent::Error::Refused(_)
            | tailscope_agent::Error::Tls(_)
            | tailscope_agent::Error::Wire(_)
            | tailscope_agent::Error::Usage(_)),
        ) => Err(crate::UsageError(format!(
            "the agent at {}: {e}: nothing was sent",
            options.address
        ))
        .into()),
        Err(e) => Err(anyhow::anyhow!(
            "the agent at {}: {e}: nothing was sent",
            options.address
        )),
    }
}

/// The host part of the agent's `HOST:PORT` (`[::1]:7070`'s `::1` in brackets kept, as a
/// URL wants it).
fn agent_host(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

/// The report's warnings about the agent: its certificate not pinned, its loss mid-run.
pub fn warnings(profile: &Profile) -> Vec<String> {
    let Some(link) = &profile.agent else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if !link.pinned {
        out.push(format!(
            "the agent's certificate was not pinned (its fingerprint: {}): a machine in the middle could have read its token; pin it with --agent-fingerprint",
            link.fingerprint
        ));
    }
    if let (Some(at), Some(why)) = (link.lost_at_s, &link.lost_because) {
        out.push(format!(
            "the agent at {} was lost {at:.1} s into the measured run ({why}): the server side is missing from then on",
            link.address
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_s_host_is_its_address_without_the_port() {
        assert_eq!(agent_host("10.0.0.5:7070"), "10.0.0.5");
        assert_eq!(agent_host("[::1]:7070"), "[::1]");
        assert_eq!(agent_host("agent.example:1"), "agent.example");
    }

    #[test]
    fn a_tick_s_age_is_read_on_this_host_s_clock() {
        let now = 1_000_000_000_000u64;
        // The agent's clock 250 ms ahead: its tick stamped now + 150 ms was read 100 ms ago.
        let age = tick_age(now, now + 150_000_000, 250.0);
        assert_eq!(age.as_millis(), 100);
        // Behind by 40 ms: stamped 60 ms ago on its clock, read 20 ms ago on ours.
        assert_eq!(tick_age(now, now - 60_000_000, -40.0).as_millis(), 20);
        // From the future, or very old: clamped.
        assert_eq!(tick_age(now, now + 1_000_000_000, 0.0), Duration::ZERO);
        assert_eq!(
            tick_age(now, now - 60_000_000_000, 0.0),
            Duration::from_secs(5)
        );
    }
}
