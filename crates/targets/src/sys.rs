//! The crate's only `unsafe`: what a child does between fork and exec (the PID namespace a
//! target runs in, and its init), and the guardian that tailscope forks to outlive it by a
//! moment.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sched::{sched_setaffinity, unshare, CloneFlags, CpuSet};
use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{dup2, fork, pipe2, setpgid, ForkResult, Pid};

/// Makes the launched command run only on `cpus` (empty: anywhere) and die with tailscope,
/// its whole tree included, however tailscope dies (SIGKILL of tailscope and its guardian
/// together included).
///
/// The command runs in a PID namespace of its own whose pid 1 is a tiny init of ours: when
/// the pid 1 of a PID namespace dies, the kernel SIGKILLs every process in it, and nothing
/// can leave a PID namespace (a shell's children, a daemon that calls setsid, workers whose
/// master died). PR_SET_PDEATHSIG alone reaches only the direct child: `sh -c 'server;
/// true'` lost the shell and left the server. The launched process is the pair's outer half:
///
/// ```text
/// tailscope ── ts-init (the launched process: outside, in tailscope's namespace)
///                └─ ts-init (pid 1 of the new namespace)
///                     └─ the command (sh -c …, nginx, tailscope serve) and its tree
/// ```
///
/// Both halves are forked between fork and exec (they never exec), outlive SIGTERM, SIGINT,
/// SIGQUIT, SIGHUP, SIGUSR1 and SIGUSR2 (tailscope signals the command itself, through its
/// process group and its tree; see [`OUTLIVED`]), and end as the command ended (its exit
/// code, or the signal that killed it), so tailscope reads the command's status from the
/// launched process as before. pid 1 reaps every orphan. The outer half dies with the thread that launched it
/// (PR_SET_PDEATHSIG, SIGKILL) and takes pid 1 with it (the same), which takes the
/// namespace. Every pid tailscope handles is still one of its own namespace (the kernel
/// reports the host's pids in tailscope's /proc), so the tree is profiled as before.
///
/// Creating a PID namespace needs CAP_SYS_ADMIN. Where unshare(2) refuses, the command is
/// exec'd directly as before, with PR_SET_PDEATHSIG set to SIGTERM: the last net for when the
/// guardian is killed too; a server's master that is killed outright leaves its workers
/// running (nginx's keep listening), while one told to terminate takes them down with it.
///
/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so
/// targets must be launched from a thread that lives as long as they do (the main thread).
pub fn contain_and_pin(cmd: &mut Command, cpus: &[usize]) {
    let mut set = CpuSet::new();
    let mut pin = false;
    for &cpu in cpus {
        pin |= set.set(cpu).is_ok();
    }
    // Read here, in tailscope: the forked halves write their title over the same addresses
    // (fork copies the address space) without reading /proc.
    let area = arg_area();
    // SAFETY: the closure runs in the forked child before exec, where tailscope's other
    // threads do not exist: it makes only plain system calls (prctl, sched_setaffinity,
    // unshare, pipe2, and in the two halves that never exec: dup2, open, close_range or
    // close, getrlimit, sigaction, waitpid, read, write, kill, _exit), allocates nothing and
    // touches no lock (`set` and `area` were computed before the fork and are copied in).
    // The halves never return into std's code: they end with _exit. The two forks are
    // glibc's fork(), which is not async-signal-safe (it runs atfork handlers and takes the
    // malloc and stdio locks): it is sound here only because this child is single-threaded,
    // so no other thread can hold those locks, and the first fork's child had them reset.
    unsafe {
        cmd.pre_exec(move || {
            if pin {
                sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)?;
            }
            if unshare(CloneFlags::CLONE_NEWPID).is_err() {
                set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
                return Ok(());
            }
            set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            // The command's exit status, from pid 1 to the outer half (raw, as waitpid
            // gives it).
            let (status_read, status_write) = pipe2(OFlag::O_CLOEXEC)?;
            if let ForkResult::Parent { child: init } = fork()? {
                drop(status_write);
                outer_half(init, status_read, area)
            }
            // pid 1 of the new namespace.
            drop(status_read);
            let _ = set_pdeathsig(Signal::SIGKILL);
            // The outer half may have died before the line above: the pipe then has no
            // reader, and nobody would end this namespace.
            let mut fds = [PollFd::new(status_write.as_fd(), PollFlags::POLLOUT)];
            if poll(&mut fds, 0u16).is_ok()
                && fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLERR))
            {
                nix::libc::_exit(1);
            }
            match fork()? {
                ForkResult::Parent { child: command } => init(command, status_write, area),
                // The command: std goes on to exec it (the pipe closes at exec).
                ForkResult::Child => Ok(()),
            }
        });
    }
}

/// Signals the two halves of a PID-namespace launch outlive (a handler that does nothing):
/// tailscope stops a target by signalling its process group and every member of its tree
/// (`ProcessTree::signal`), so the command has them already. Were the halves to pass them
/// on as well, a stopped command got SIGTERM up to six times (a server that takes a second
/// SIGTERM for "exit now" loses its graceful stop); were they to die of them, pid 1's death
/// would SIGKILL the namespace before the command had stopped.
const OUTLIVED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGHUP,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

extern "C" fn outlive(_sig: nix::libc::c_int) {}

/// Becomes one half of a PID-namespace launch: renamed, holding no file of tailscope's but
/// `keep` (as fd 3) and /dev/null (as 0–2), with tailscope's signal handlers replaced by
/// [`outlive`] for [`OUTLIVED`] (and the default for the rest). Async-signal-safe.
fn become_half(keep: OwnedFd, area: Option<(usize, usize)>) {
    rename(area, INIT_NAME, INIT_TITLE);
    let keep = keep.into_raw_fd();
    // SAFETY: plain system calls on descriptor numbers. Of this process's descriptors only
    // `keep` is in use (now as fd 3); the others are copies of tailscope's (std's exec-error
    // pipe among them, which must close so that spawn() returns) and the command's stdio,
    // which must reach EOF when the command's tree ends; no Rust object of this process
    // will use or drop them (it ends with _exit).
    unsafe {
        if keep != 3 {
            nix::libc::dup2(keep, 3);
        }
        if nix::libc::syscall(nix::libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
            // No close_range (Linux before 5.9, or a seccomp filter refuses it): one close
            // per descriptor up to the limit, or spawn() would wait on its exec-error pipe
            // for as long as the command runs.
            let mut limit = nix::libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            let top = if nix::libc::getrlimit(nix::libc::RLIMIT_NOFILE, &mut limit) == 0 {
                limit.rlim_cur.min(1 << 20) as i32
            } else {
                1 << 16
            };
            for fd in 4..top {
                nix::libc::close(fd);
            }
        }
        let null = nix::libc::open(c"/dev/null".as_ptr(), nix::libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                nix::libc::dup2(null, fd);
            }
            if null > 3 {
                nix::libc::close(null);
            }
        }
        // tailscope's handlers (signal-hook's) would write to a pipe this process closed.
        for sig in Signal::iterator() {
            if sig != Signal::SIGKILL && sig != Signal::SIGSTOP {
                let _ = signal(sig, SigHandler::SigDfl);
            }
        }
        for sig in OUTLIVED {
            let _ = signal(sig, SigHandler::Handler(outlive));
        }
    }
}

/// The outer half: waits for pid 1, then ends as the command did.
fn outer_half(init: Pid, status_read: OwnedFd, area: Option<(usize, usize)>) -> ! {
    become_half(status_read, area);
    let own = wait_for(init.as_raw());
    let mut raw = [0u8; 4];
    let got = loop {
        // SAFETY: reads into a local buffer from fd 3, which this process holds.
        let got = unsafe { nix::libc::read(3, raw.as_mut_ptr().cast(), raw.len()) };
        // A signal passed on to the command may interrupt the read.
        if got >= 0 || Errno::last() != Errno::EINTR {
            break got;
        }
    };
    // pid 1 writes the command's status before it exits; without it (pid 1 was killed), its
    // own.
    end_as(if got == 4 {
        i32::from_ne_bytes(raw)
    } else {
        own
    })
}

/// pid 1 of the namespace: reaps every process that ends in it, and once the command has
/// ended, hands its status to the outer half and exits (the kernel kills the rest).
fn init(command: Pid, status_write: OwnedFd, area: Option<(usize, usize)>) -> ! {
    become_half(status_write, area);
    let status = wait_for(command.as_raw());
    // SAFETY: writes a local buffer to fd 3, which this process holds (the pipe has room
    // for 4 bytes: nothing else is written to it); _exit ends it at once.
    unsafe {
        while nix::libc::write(3, status.to_ne_bytes().as_ptr().cast(), 4) < 0
            && Errno::last() == Errno::EINTR
        {}
        nix::libc::_exit(0)
    }
}

/// Reaps children (all of them: pid 1 inherits the namespace's orphans) until `pid` ends;
/// returns its raw wait status.
fn wait_for(pid: i32) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid writes the status into the local it is given.
        let reaped = unsafe { nix::libc::waitpid(-1, &mut status, 0) };
        if reaped == pid {
            return status;
        }
        if reaped < 0 && Errno::last() != Errno::EINTR {
            // No child left without the one waited for: cannot happen; end as failed.
            return 1 << 8;
        }
    }
}

/// Ends this process as the raw wait status `status` says its command ended.
fn end_as(status: i32) -> ! {
    // SAFETY: async-signal-safe calls; the process ends here.
    unsafe {
        if nix::libc::WIFSIGNALED(status) {
            let sig = nix::libc::WTERMSIG(status);
            // This process is a copy of tailscope's memory: no core file of it.
            let no_core = nix::libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            nix::libc::setrlimit(nix::libc::RLIMIT_CORE, &no_core);
            nix::libc::signal(sig, nix::libc::SIG_DFL);
            nix::libc::kill(nix::libc::getpid(), sig);
            nix::libc::_exit(128 + sig)
        }
        nix::libc::_exit(nix::libc::WEXITSTATUS(status))
    }
}

/// The name and command line of the two halves of a PID-namespace launch, set apart from
/// `tailscope run` as the guardian's are (see [`GUARDIAN_TITLE`]).
const INIT_NAME: &std::ffi::CStr = c"ts-init";
/// [`INIT_NAME`] as /proc/PID/stat shows it.
pub(crate) const INIT_COMM: &str = "ts-init";
const INIT_TITLE: &[u8] = b"tailscope-init";

/// A process forked from tailscope that kills a launched target's whole tree when tailscope
/// is gone, however it went (SIGKILL included), and removes the target's temporary directory.
///
/// It waits on a pipe whose only write end tailscope holds: the kernel closes that end when
/// tailscope's process dies, whichever thread launched the target, so unlike
/// PR_SET_PDEATHSIG (which reaches only the direct child, and fires when the launching
/// *thread* exits) nothing depends on thread lifetimes. Meanwhile it re-reads the tree every
/// second, so that processes reparented away from the root (a worker whose master died) are
/// still known when the time comes. It runs in its own process group and ignores the
/// terminal's signals: a Ctrl-C is tailscope's to handle.
pub struct Guardian {
    pid: Pid,
    wake: Option<OwnedFd>,
}

/// How often the guardian re-reads the target's tree while tailscope lives.
const GUARD_REFRESH_MS: u16 = 1000;

impl Guardian {
    /// Forks a guardian for the target whose root (and process group leader) is `root`.
    pub fn spawn(root: u32, temp_dir: Option<PathBuf>) -> std::io::Result<Guardian> {
        let (read_end, write_end) = pipe2(OFlag::O_CLOEXEC)?;
        let devnull = File::options().read(true).write(true).open("/dev/null")?;
        // SAFETY: tailscope has other threads, so the child may only rely on what fork keeps
        // consistent. Until tailscope dies the child makes plain system calls (setpgid,
        // sigaction, dup2, close_range, poll, read) and reads /proc with std, which allocates:
        // glibc's fork takes malloc's locks around the fork and resets them in the child, so
        // malloc works there; no other lock of the parent (stdout, the environment, a
        // tokio runtime) is touched. The child never returns into tailscope's code: it ends
        // with _exit, so no destructor or atexit handler of the parent's state runs twice.
        match unsafe { fork() }.map_err(std::io::Error::from)? {
            ForkResult::Parent { child } => {
                drop(read_end);
                Ok(Guardian {
                    pid: child,
                    wake: Some(write_end),
                })
            }
            ForkResult::Child => {
                drop(write_end);
                guard(read_end, devnull, root, temp_dir)
            }
        }
    }

    /// Tells the guardian that the target was stopped (its job is then only to exit) and
    /// reaps it.
    pub fn release(mut self) {
        self.wake.take();
        let _ = waitpid(self.pid, None);
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        if self.wake.take().is_some() {
            let _ = waitpid(self.pid, None);
        }
    }
}

/// The guardian's life: wait for tailscope's end, kill the tree, remove the directory, exit.
fn guard(wake: OwnedFd, devnull: File, root: u32, temp_dir: Option<PathBuf>) -> ! {
    let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
    retitle(GUARDIAN_TITLE);
    for sig in [
        Signal::SIGINT,
        Signal::SIGQUIT,
        Signal::SIGHUP,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
        Signal::SIGPIPE,
    ] {
        // SAFETY: SIG_IGN installs no handler code; the child is single-threaded.
        let _ = unsafe { signal(sig, SigHandler::SigIgn) };
    }
    // tailscope's SIGTERM handler (signal-hook's) would write to a pipe nobody reads here.
    // SAFETY: as above, SIG_DFL installs no handler code.
    let _ = unsafe { signal(Signal::SIGTERM, SigHandler::SigDfl) };
    // Hold none of tailscope's files: a test reading tailscope's stdout to its end, or a
    // listening socket, must not wait on this process.
    let null = devnull.as_raw_fd();
    for fd in 0..3 {
        let _ = dup2(null, fd);
    }
    let keep = wake.as_raw_fd();
    // SAFETY: close_range only closes descriptors; `keep` and 0–2 are left open, and no Rust
    // object of this single-threaded child owns the ones closed (the File and OwnedFd of
    // the parent's other descriptors are never used or dropped: the child ends with _exit).
    unsafe {
        if keep > 3 {
            nix::libc::syscall(nix::libc::SYS_close_range, 3u32, (keep - 1) as u32, 0u32);
        }
        nix::libc::syscall(
            nix::libc::SYS_close_range,
            (keep + 1) as u32,
            u32::MAX,
            0u32,
        );
    }
    let mut tree = crate::tree::ProcessTree::for_killing(root, Some(root));
    let mut buf = [0u8; 64];
    loop {
        let mut fds = [PollFd::new(wake.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, GUARD_REFRESH_MS) {
            Ok(0) => tree.refresh(),
            Ok(_) => match nix::unistd::read(keep, &mut buf) {
                Ok(0) => break,
                Ok(_) | Err(Errno::EINTR) | Err(Errno::EAGAIN) => {}
                Err(_) => break,
            },
            Err(Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    tree.kill_all(std::time::Duration::from_secs(1));
    if let Some(dir) = temp_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    // SAFETY: _exit ends the process at once; nothing of the parent's state is unwound.
    unsafe { nix::libc::_exit(0) }
}

/// The guardian's command line and name, so that `pgrep -f 'tailscope run …'` or `pkill
/// tailscope` (what a person types to stop a run) do not take the guardian with it.
const GUARDIAN_TITLE: &[u8] = b"tailscope-guardian";

/// Renames this process: its `comm` (15 bytes) and its command line.
fn retitle(title: &[u8]) {
    rename(arg_area(), c"ts-guardian", title);
}

/// This process's argument area, `[arg_start, arg_end)` as (start, length): where the kernel
/// wrote its command line at exec.
fn arg_area() -> Option<(usize, usize)> {
    let stat = procfs::process::Process::myself()
        .and_then(|p| p.stat())
        .ok()?;
    let (start, end) = (stat.arg_start?, stat.arg_end?);
    let len = usize::try_from(end.checked_sub(start)?).ok()?;
    (len > 0 && start > 0).then_some((start as usize, len))
}

/// Sets this process's `comm` to `name` and its command line to `title`, by overwriting the
/// argument area `area` (see [`arg_area`]) as setproctitle(3) and nginx do (changing where
/// the kernel reads it from needs CAP_SYS_RESOURCE). Async-signal-safe.
fn rename(area: Option<(usize, usize)>, name: &std::ffi::CStr, title: &[u8]) {
    let _ = nix::sys::prctl::set_name(name);
    let Some((start, len)) = area else {
        return;
    };
    // SAFETY: [start, start + len) is this process's argument area (read from its /proc
    // stat, by this process or by tailscope before forking it: fork keeps the addresses):
    // the kernel wrote it at exec at the top of the main stack, and it stays mapped and
    // writable for the process's life. The write stays inside it (`len` bytes, the title cut
    // to leave a NUL at the end). This process is single-threaded and never reads its
    // arguments again (std keeps pointers into the area for `env::args`, which nothing here
    // calls).
    unsafe {
        let area = start as *mut u8;
        std::ptr::write_bytes(area, 0, len);
        std::ptr::copy_nonoverlapping(title.as_ptr(), area, title.len().min(len - 1));
    }
}

/// Sets the filter of a perf tracepoint event (`PERF_EVENT_IOC_SET_FILTER`, which perf-event2
/// does not wrap): the kernel then writes only the records the expression accepts.
pub fn set_perf_filter(fd: std::os::fd::RawFd, filter: &std::ffi::CStr) -> std::io::Result<()> {
    // _IOW('$', 6, char *)
    const PERF_EVENT_IOC_SET_FILTER: nix::libc::c_ulong = (1 << 30)
        | ((std::mem::size_of::<*const nix::libc::c_char>() as nix::libc::c_ulong) << 16)
        | ((b'$' as nix::libc::c_ulong) << 8)
        | 6;
    // SAFETY: `fd` is an open perf event the caller owns for the duration of the call, and
    // `filter` is a NUL-terminated string that outlives it; the kernel copies the string
    // (strndup_user) and keeps no pointer to it.
    let rc = unsafe { nix::libc::ioctl(fd, PERF_EVENT_IOC_SET_FILTER as _, filter.as_ptr()) };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}
