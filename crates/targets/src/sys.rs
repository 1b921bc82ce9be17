//! The crate's only `unsafe`: what a child does between fork and exec, and the guardian that
//! tailscope forks to outlive it by a moment.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{poll, PollFd, PollFlags};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::signal::{signal, SigHandler, Signal};
use nix::sys::wait::waitpid;
use nix::unistd::{dup2, fork, pipe2, setpgid, ForkResult, Pid};

/// Makes the child die with its parent and run only on `cpus` (empty: anywhere).
///
/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the process, so
/// targets must be launched from a thread that lives as long as they do (the main thread).
/// The signal is SIGTERM, not SIGKILL: it is the last net, for when the guardian is killed
/// too, and a server's master that is killed outright leaves its workers running (nginx's
/// keep listening), while one told to terminate takes them down with it.
pub fn die_with_parent_and_pin(cmd: &mut Command, cpus: &[usize]) {
    let mut set = CpuSet::new();
    let mut pin = false;
    for &cpu in cpus {
        pin |= set.set(cpu).is_ok();
    }
    // SAFETY: the closure runs in the forked child before exec and only makes two system
    // calls (prctl, sched_setaffinity), both async-signal-safe; it allocates nothing and
    // touches no lock (`set` was built before the fork and is copied in).
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
            if pin {
                sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)?;
            }
            Ok(())
        });
    }
}

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

/// Renames this process: its `comm` (15 bytes) and its command line, by overwriting the
/// argument area the kernel wrote at exec, as setproctitle(3) and nginx do (changing where
/// the kernel reads it from needs CAP_SYS_RESOURCE).
fn retitle(title: &[u8]) {
    let _ = nix::sys::prctl::set_name(c"ts-guardian");
    let Ok(stat) = procfs::process::Process::myself().and_then(|p| p.stat()) else {
        return;
    };
    let (Some(start), Some(end)) = (stat.arg_start, stat.arg_end) else {
        return;
    };
    let Some(len) = end.checked_sub(start).and_then(|l| usize::try_from(l).ok()) else {
        return;
    };
    if len == 0 || start == 0 {
        return;
    }
    // SAFETY: [arg_start, arg_end) is this process's argument area: the kernel wrote it at
    // exec at the top of the main stack, and it stays mapped and writable for the process's
    // life. The write stays inside it (`len` bytes, the title cut to leave a NUL at the
    // end). This child is single-threaded and never reads its arguments again (std keeps
    // pointers into the area for `env::args`, which nothing here calls).
    unsafe {
        let area = start as usize as *mut u8;
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
