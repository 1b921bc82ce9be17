//! The io_uring plumbing of tailscope, and all of its io_uring `unsafe`: the reference
//! server's ring ([`server`]) and the generator's ([`client`]), over what they share, so that a
//! mistake in it is made once, and fixed once: the provided-buffer ring multishot recv fills
//! ([`BufRing`]), the retirement of a closing connection's ops by their own user data, never
//! by descriptor ([`retire`]), typed op tokens ([`OpToken`] for the generator's, which live in
//! the user data; the server's ring keeps its tokens in its table of ops), what the running
//! kernel has ([`kernel_at_least`]), the open-file limit that bounds a registered file table
//! ([`open_file_limit`], [`raise_open_file_limit`]), and which errors of a submit mean "try
//! again" ([`submit_error_is_transient`]).
//!
//! The rule that makes the `unsafe` here sound (tokio-uring's): memory the kernel may touch
//! belongs to its owner until the completion that releases it has been reaped, and a
//! registered buffer ring outlives its registration. Each block says how it keeps it.
#![allow(unsafe_code)]

mod bufs;
pub mod client;
pub mod retire;
pub mod server;

pub use bufs::BufRing;

/// What an op is for, carried in its user data: a typed token the ring hands back with each
/// completion, encoded and decoded by the caller's own scheme (a shift or two: no table to
/// look up in the hot path). The ring's own ops (a retired socket's cancels and close) use
/// the top byte values 0xfe and 0xff: a token's encoding keeps its top byte below 0xfe.
pub trait OpToken: Copy {
    /// The op's user data.
    fn encode(self) -> u64;
    /// The token of `user_data`, or `None` where it is no token of this kind.
    fn decode(user_data: u64) -> Option<Self>;
}

use std::io;

/// Whether the running kernel's release is at least `major.minor` (what a probe of opcodes
/// cannot tell: multishot recv, a cancel by slot).
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    kernel_release() >= (major, minor)
}

/// The running kernel's `major.minor`, (0, 0) where it cannot be read.
pub fn kernel_release() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut version = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (version.next().unwrap_or(0), version.next().unwrap_or(0))
}

/// Whether an error of `io_uring_enter` leaves everything as it was, to be tried again: a
/// signal (EINTR), a completion queue too full to take more (EBUSY: reap first), no memory
/// for the request just now (EAGAIN), or a timed wait that ran out (ETIME).
pub fn submit_error_is_transient(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EINTR | libc::EBUSY | libc::EAGAIN | libc::ETIME)
    )
}

/// RLIMIT_NOFILE's soft limit: the most descriptors the process may open, and the most slots
/// a registered file table may have. 1024 where it cannot be read.
pub fn open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the live local it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// Raises RLIMIT_NOFILE's soft limit to the hard limit (where it is lower) and returns the
/// soft limit then.
pub fn raise_open_file_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the live local it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the live local it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return raised.rlim_cur;
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_release_is_read() {
        let (major, _) = kernel_release();
        assert!(major >= 3, "{:?}", kernel_release());
        assert!(kernel_at_least(3, 0));
        assert!(!kernel_at_least(u32::MAX, 0));
    }

    #[test]
    fn only_retryable_submit_errors_are_transient() {
        for errno in [libc::EINTR, libc::EBUSY, libc::EAGAIN, libc::ETIME] {
            assert!(submit_error_is_transient(&io::Error::from_raw_os_error(
                errno
            )));
        }
        for errno in [libc::EBADF, libc::EINVAL, libc::EFAULT] {
            assert!(!submit_error_is_transient(&io::Error::from_raw_os_error(
                errno
            )));
        }
    }

    #[test]
    fn raising_the_open_file_limit_never_lowers_it() {
        let before = open_file_limit();
        assert!(raise_open_file_limit() >= before);
        assert_eq!(open_file_limit(), raise_open_file_limit());
    }
}
