//! A server as the whole tree of its processes: found, accounted and killed as one.
//!
//! A server is rarely one process (nginx's master and workers, gunicorn's arbiter and the
//! workers it respawns, the server a `sh -c` forks). [`ProcessTree`] follows every process
//! descended from a root pid (and, for a launched target, every member of its process group)
//! by scanning /proc/*/stat: this kernel, like many, has no /proc/PID/task/TID/children
//! (CONFIG_PROC_CHILDREN), and a scan of a few hundred stat files costs well under a
//! millisecond. Once seen, a process stays a member (by pid and start time) until it is gone,
//! so a worker whose parent died and that was reparented to init is still followed.
//!
//! CPU time is kept across deaths: a member that exits and is reaped by another member lands
//! in that member's `cutime`/`cstime` (exact, the kernel adds it at reaping); one reaped by
//! someone outside the tree (init, tailscope) keeps the time it had when last seen (at most one
//! sampling interval of it is missed). See [`ProcessTree::cpu_ticks`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;

/// What /proc/PID/stat says about one process, in clock ticks and pages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcStat {
    /// Process id.
    pub pid: i32,
    /// Parent's pid.
    pub ppid: i32,
    /// Process group.
    pub pgrp: i32,
    /// The kernel's short name (`comm`, 15 characters at most).
    pub comm: String,
    /// Whether it is a zombie (exited, not yet reaped).
    pub zombie: bool,
    /// Start time after boot, in ticks: with the pid, it names a process (pids are reused).
    pub starttime: u64,
    /// User time of its own threads.
    pub utime: u64,
    /// System time of its own threads.
    pub stime: u64,
    /// User time of the children it reaped (and of theirs).
    pub cutime: u64,
    /// System time of the children it reaped.
    pub cstime: u64,
    /// Threads.
    pub threads: i64,
    /// Resident pages now.
    pub rss_pages: u64,
}

/// Every process in /proc now (processes that vanish while being read are skipped).
pub fn scan() -> Vec<ProcStat> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .map(|s| ProcStat {
            pid: s.pid,
            ppid: s.ppid,
            pgrp: s.pgrp,
            comm: s.comm,
            zombie: s.state == 'Z',
            starttime: s.starttime,
            utime: s.utime,
            stime: s.stime,
            cutime: s.cutime.max(0) as u64,
            cstime: s.cstime.max(0) as u64,
            threads: s.num_threads,
            rss_pages: s.rss,
        })
        .collect()
}

/// The kernel's short name of `pid` (`comm`), `None` once it is gone or unreadable.
pub fn comm(pid: u32) -> Option<String> {
    let pid = i32::try_from(pid).ok()?;
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .ok()
        .map(|s| s.comm)
}

/// One process of the tree, as last seen.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its stat when last seen.
    pub stat: ProcStat,
    /// Its command line, shortened (empty for a kernel thread or when unreadable).
    pub command: String,
    /// Voluntary context switches summed over its threads, when last seen.
    pub voluntary: Option<u64>,
    /// Involuntary context switches summed over its threads.
    pub involuntary: Option<u64>,
    /// Peak resident memory (VmHWM), KiB.
    pub max_rss_kb: Option<u64>,
    /// Whether it is still there (a zombie counts: its times are final but it is not reaped).
    pub alive: bool,
    /// How many more refreshes re-read its command line while it reads as its parent's.
    echo_rereads: u8,
}

/// Refreshes in which a fork that still reads as its parent is read again: an nginx worker
/// retitles itself within milliseconds; a gunicorn worker never does, and is then left be.
const ECHO_REREADS: u8 = 3;

/// The processes descended from a root, followed over time.
#[derive(Debug)]
pub struct ProcessTree {
    root: i32,
    group: Option<i32>,
    members: BTreeMap<i32, Member>,
    /// (user, system) ticks of members that are gone and were not reaped by a member.
    gone_ticks: (u64, u64),
    /// Whether per-process details (context switches, peak RSS, command line) are read.
    details: bool,
}

const COMMAND_CHARS: usize = 60;

fn short_command(process: &procfs::process::Process) -> String {
    shorten(process.cmdline().unwrap_or_default())
}

/// A command line in [`COMMAND_CHARS`] at most, programs named without their directories.
fn shorten(mut words: Vec<String>) -> String {
    // The program's name, not its directory: `python3.11 -m gunicorn …` tells more in 60
    // characters than `/root/.pyenv/versions/3.11.7/bin/python3.11 …`. A process that set its
    // own title (nginx: `nginx: worker process`) has no slash to strip.
    let program = |word: &mut String| {
        if let Some((_, name)) = word.rsplit_once('/') {
            if !word.contains(' ') {
                *word = name.to_string();
            }
        }
    };
    if let Some(first) = words.first_mut() {
        program(first);
    }
    // An interpreter's script is the program a reader knows (`python3.11 gunicorn -w 3`).
    let interpreted = words.first().is_some_and(|w| {
        [
            "python", "node", "ruby", "perl", "php", "sh", "bash", "java",
        ]
        .iter()
        .any(|i| w.starts_with(i))
    });
    if interpreted {
        if let Some(script) = words.get_mut(1).filter(|w| w.starts_with('/')) {
            program(script);
        }
    }
    let mut line = words.join(" ");
    if line.chars().count() > COMMAND_CHARS {
        line = line.chars().take(COMMAND_CHARS - 1).collect::<String>() + "…";
    }
    line
}

fn context_switches(process: &procfs::process::Process) -> (Option<u64>, Option<u64>) {
    // Per thread in /proc (the leader's status counts only the main thread, which in a server
    // mostly waits): sum them over every task.
    let (mut voluntary, mut involuntary) = (None::<u64>, None::<u64>);
    if let Ok(tasks) = process.tasks() {
        for task in tasks.flatten() {
            if let Ok(st) = task.status() {
                if let Some(v) = st.voluntary_ctxt_switches {
                    voluntary = Some(voluntary.unwrap_or(0) + v);
                }
                if let Some(v) = st.nonvoluntary_ctxt_switches {
                    involuntary = Some(involuntary.unwrap_or(0) + v);
                }
            }
        }
    }
    (voluntary, involuntary)
}

/// The same process: same pid (the caller's) and start time, since pids are reused.
fn same_process(m: &Member, s: &ProcStat) -> bool {
    m.stat.starttime == s.starttime
}

impl ProcessTree {
    /// Follows `root` and its descendants; `group`: also every member of this process group
    /// (a launched target's, so that what the root's children fork is caught even when they
    /// are reparented). Reads the tree once.
    pub fn new(root: u32, group: Option<u32>) -> ProcessTree {
        let mut tree = ProcessTree {
            root: root as i32,
            group: group.map(|g| g as i32),
            members: BTreeMap::new(),
            gone_ticks: (0, 0),
            details: true,
        };
        tree.refresh();
        tree
    }

    /// A tree that reads only /proc/PID/stat (for killing: no per-process details).
    pub fn for_killing(root: u32, group: Option<u32>) -> ProcessTree {
        let mut tree = ProcessTree {
            root: root as i32,
            group: group.map(|g| g as i32),
            members: BTreeMap::new(),
            gone_ticks: (0, 0),
            details: false,
        };
        tree.refresh();
        tree
    }

    /// The root's pid.
    pub fn root(&self) -> u32 {
        self.root as u32
    }

    /// Re-reads /proc: new descendants join, members that vanished are accounted as gone.
    pub fn refresh(&mut self) {
        let now = scan();
        let by_pid: HashMap<i32, &ProcStat> = now.iter().map(|s| (s.pid, s)).collect();
        self.account_gone(&by_pid);
        self.join_new(&now, &by_pid);
        self.update_live(&by_pid);
    }

    /// Marks the members no longer there as gone, keeping the CPU time of those reaped
    /// outside the tree.
    fn account_gone(&mut self, by_pid: &HashMap<i32, &ProcStat>) {
        // Which members are still there (same pid and start time: pids are reused).
        let present: Vec<i32> = self
            .members
            .iter()
            .filter(|(pid, m)| m.alive && by_pid.get(pid).is_some_and(|s| same_process(m, s)))
            .map(|(pid, _)| *pid)
            .collect();
        let gone: Vec<i32> = self
            .members
            .iter()
            .filter(|(pid, m)| m.alive && !present.contains(pid))
            .map(|(pid, _)| *pid)
            .collect();
        for pid in gone {
            let parent_is_member = {
                let m = &self.members[&pid];
                let parent = m.stat.ppid;
                present.contains(&parent)
            };
            let Some(m) = self.members.get_mut(&pid) else {
                continue;
            };
            m.alive = false;
            if !parent_is_member {
                // Reaped outside the tree (by init, or by tailscope for the root): its time is
                // in no member's cutime, so keep what it had when last seen.
                self.gone_ticks.0 += m.stat.utime + m.stat.cutime;
                self.gone_ticks.1 += m.stat.stime + m.stat.cstime;
            }
        }
    }

    /// Adds the processes that joined since the last read.
    fn join_new(&mut self, now: &[ProcStat], by_pid: &HashMap<i32, &ProcStat>) {
        // Join: the root, the group, and children of members, until nothing new joins (a
        // child can have a lower pid than its parent after pid wrap-around). tailscope itself
        // never joins (`--pid` of the shell it was started from): the generator's work is not
        // the server's, and without it its children (the guardian) do not join either;
        // unless tailscope is the root itself (a test profiling its own process).
        let me = std::process::id() as i32;
        let root = self.root;
        loop {
            let mut joined = false;
            for s in now.iter().filter(|s| s.pid != me || s.pid == root) {
                let known = self
                    .members
                    .get(&s.pid)
                    .is_some_and(|m| m.alive && same_process(m, s));
                if known {
                    continue;
                }
                let parent_member = self.members.get(&s.ppid).is_some_and(|m| {
                    m.alive && by_pid.get(&s.ppid).is_some_and(|p| same_process(m, p))
                });
                if s.pid == self.root || Some(s.pgrp) == self.group || parent_member {
                    if s.pid == self.root && self.members.contains_key(&s.pid) {
                        // The root's pid came back as another process: not ours.
                        continue;
                    }
                    if let Some(old) = self.members.get(&s.pid) {
                        if !old.alive && old.stat.starttime == s.starttime {
                            continue;
                        }
                    }
                    self.members.insert(
                        s.pid,
                        Member {
                            stat: s.clone(),
                            command: String::new(),
                            voluntary: None,
                            involuntary: None,
                            max_rss_kb: None,
                            alive: true,
                            echo_rereads: ECHO_REREADS,
                        },
                    );
                    joined = true;
                }
            }
            if !joined {
                break;
            }
        }
    }

    /// Re-reads each live member's figures (and its command line when it may have changed).
    fn update_live(&mut self, by_pid: &HashMap<i32, &ProcStat>) {
        // Update the live ones. A fork keeps its parent's command line until it execs or
        // retitles itself (an nginx worker read just after the fork is "nginx: master
        // process"; its `comm` stays "nginx"), so one that still reads as its parent is read
        // again.
        let echoes: Vec<i32> = self
            .members
            .iter()
            .filter(|(_, m)| m.alive && m.echo_rereads > 0)
            .filter(|(_, m)| {
                self.members
                    .get(&m.stat.ppid)
                    .is_some_and(|p| p.alive && p.command == m.command)
            })
            .map(|(pid, _)| *pid)
            .collect();
        for (pid, m) in self.members.iter_mut().filter(|(_, m)| m.alive) {
            let Some(s) = by_pid.get(pid) else { continue };
            let echoes_parent = echoes.contains(pid);
            if echoes_parent {
                m.echo_rereads -= 1;
            }
            let renamed = m.stat.comm != s.comm || m.command.is_empty() || echoes_parent;
            m.stat = (*s).clone();
            if !self.details || s.zombie {
                continue;
            }
            let Ok(process) = procfs::process::Process::new(*pid) else {
                continue;
            };
            if renamed {
                // Read again after an exec (`sh -c 'exec server'`) or a retitle (nginx).
                m.command = short_command(&process);
            }
            let (v, i) = context_switches(&process);
            m.voluntary = v.or(m.voluntary);
            m.involuntary = i.or(m.involuntary);
            if let Some(hwm) = process.status().ok().and_then(|st| st.vmhwm) {
                m.max_rss_kb = Some(m.max_rss_kb.unwrap_or(0).max(hwm));
            }
        }
    }

    /// The tree's cumulative CPU time, (user, system) ticks: every live member's own time and
    /// that of the children it reaped, plus what members reaped outside the tree had when last
    /// seen. A member reaped by another member moves from its own line into its reaper's
    /// `cutime`, so nothing is counted twice.
    pub fn cpu_ticks(&self) -> (u64, u64) {
        let mut user = self.gone_ticks.0;
        let mut system = self.gone_ticks.1;
        for m in self.members.values().filter(|m| m.alive) {
            user += m.stat.utime + m.stat.cutime;
            system += m.stat.stime + m.stat.cstime;
        }
        (user, system)
    }

    /// Every process seen in the tree (live and gone), by pid.
    pub fn members(&self) -> impl Iterator<Item = &Member> {
        self.members.values()
    }

    /// The live members' pids (zombies excluded: they cannot be signalled into exiting).
    pub fn live_pids(&self) -> Vec<i32> {
        self.members
            .values()
            .filter(|m| m.alive && !m.stat.zombie)
            .map(|m| m.stat.pid)
            .collect()
    }

    /// Sends `signal` to the group (if any) and to every live member.
    pub fn signal(&self, signal: Signal) {
        if let Some(g) = self.group {
            let _ = killpg(Pid::from_raw(g), signal);
        }
        for pid in self.live_pids() {
            let _ = kill(Pid::from_raw(pid), signal);
        }
    }

    /// SIGKILLs the tree until no member is left alive (or `patience` runs out): a member can
    /// fork between the scan and the signal, so the tree is scanned and killed again.
    pub fn kill_all(&mut self, patience: Duration) {
        let deadline = Instant::now() + patience;
        loop {
            self.refresh();
            self.signal(Signal::SIGKILL);
            if Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
            self.refresh();
            if self.live_pids().is_empty() && !self.group_has_live_members() {
                return;
            }
        }
    }

    fn group_has_live_members(&self) -> bool {
        let Some(g) = self.group else { return false };
        scan().iter().any(|s| s.pgrp == g && !s.zombie)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_names_its_program_and_an_interpreter_s_script() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            shorten(words("/root/.pyenv/versions/3.11.7/bin/python3.11 /root/.pyenv/versions/3.11.7/bin/gunicorn -w 3 app:app")),
            "python3.11 gunicorn -w 3 app:app"
        );
        assert_eq!(
            shorten(words("/usr/sbin/nginx -c /tmp/x/nginx.conf")),
            "nginx -c /tmp/x/nginx.conf"
        );
        assert_eq!(
            shorten(vec!["nginx: worker process".into()]),
            "nginx: worker process"
        );
        let long = shorten(words(&format!("server {}", "x".repeat(100))));
        assert_eq!(long.chars().count(), COMMAND_CHARS);
        assert!(long.ends_with('…'));
    }
    use std::process::{Command, Stdio};

    #[test]
    fn tailscope_is_never_part_of_the_tree_it_profiles() {
        // `--pid` of the shell tailscope was started from: here, the test's parent.
        let parent = std::os::unix::process::parent_id();
        let tree = ProcessTree::new(parent, None);
        let me = std::process::id() as i32;
        assert!(tree.members().any(|m| m.stat.pid == parent as i32));
        assert!(tree.members().all(|m| m.stat.pid != me));
    }

    #[test]
    fn follows_children_and_keeps_the_cpu_of_the_dead() {
        // A shell that runs a busy child to completion and reaps it, then a second one that
        // is still busy when we look.
        let mut child = Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done' ; sleep 5 & wait",
            ])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut tree = ProcessTree::new(child.id(), None);
        let start = std::time::Instant::now();
        let mut seen_sleep = false;
        while start.elapsed() < Duration::from_secs(20) {
            tree.refresh();
            if tree.members().any(|m| m.stat.comm == "sleep" && m.alive) {
                seen_sleep = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(seen_sleep, "the grandchild `sleep` joined the tree");
        let (user, system) = tree.cpu_ticks();
        let root = tree
            .members()
            .find(|m| m.stat.pid == child.id() as i32)
            .unwrap();
        // The busy inner shell was reaped by the root: its time is in the root's cutime.
        assert!(root.stat.cutime + root.stat.cstime > 0, "{:?}", root.stat);
        assert!(user + system >= root.stat.utime + root.stat.cutime);
        let mut killer = ProcessTree::for_killing(child.id(), None);
        killer.kill_all(Duration::from_secs(2));
        let _ = child.wait();
        killer.refresh();
        assert!(killer.live_pids().is_empty(), "{:?}", killer.live_pids());
    }
}
