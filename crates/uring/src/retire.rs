//! Retiring a connection's ops: the one way both rings end what is armed on a socket that
//! closes, so that closing costs the same whatever else is armed.
//!
//! Never a cancel by descriptor (`CancelBuilder::fd(..).all()`): the kernel matches one
//! against every armed request of the ring (io_uring/poll.c `__io_poll_cancel`: with
//! IORING_ASYNC_CANCEL_FD it walks every bucket of the cancel table, `io_poll_file_find`, and
//! `.all()` walks it again after each match), so n connections closing among n armed
//! receives cost n²: 90 % of a one-worker server's CPU in `io_cancel_req_match`, a 2.5 s
//! stall, when 19,000 connections closed; the generator's teardown of `-c 16000` took 2.4 s.
//! A cancel by user data is looked up in the one bucket of that hash its user data falls in
//! (`io_poll_find`; a recv, send or connect waiting for its socket is put there by
//! `io_poll_req_insert`). Not quite O(1): the table has at most 256 buckets (io_uring.c
//! `io_ring_ctx_alloc` clamps its bits to 8), so a cancel walks ~n/256 entries; measured, a
//! close costs the same 6–8 µs at 1,000 and 19,000 connections (docs/scale-figures.md). An op
//! whose last completion was reaped (a recv that saw the peer's FIN, the common case) needs
//! no cancel at all, so the callers keep the user data of what is still armed.
//!
//! Not a shutdown op: the kernel runs that on a worker thread and looks the slot up only
//! there, when it may have been closed and given to the next connection (whose client then
//! saw a reset); a cancel and a close run inline, in submission order.

use io_uring::types::{CancelBuilder, Fixed};
use io_uring::{opcode, squeue};

/// The cancel of the one op submitted under `target` (its own user data), completing under
/// `user_data`.
pub fn cancel(target: u64, user_data: u64) -> squeue::Entry {
    opcode::AsyncCancel2::new(CancelBuilder::user_data(target))
        .build()
        .user_data(user_data)
}

/// The entries that retire the direct socket in `slot` at once, into `out`: a cancel of each
/// op still armed on it (`armed`, by user data; 0 is none), each hard-linked to the next so
/// that the close at the end runs whether or not anything was found to cancel. The close
/// drops the table's reference: the socket closes (its FIN) once the cancelled ops' go.
pub fn slot(
    slot: u32,
    armed: &[u64],
    cancel_data: u64,
    close_data: u64,
    out: &mut Vec<squeue::Entry>,
) {
    out.clear();
    for &target in armed.iter().filter(|&&u| u != 0) {
        out.push(cancel(target, cancel_data).flags(squeue::Flags::IO_HARDLINK));
    }
    out.push(close(slot, close_data));
}

/// The close of the direct socket in `slot`, completing under `user_data`.
pub fn close(slot: u32, user_data: u64) -> squeue::Entry {
    opcode::Close::new(Fixed(slot)).build().user_data(user_data)
}
