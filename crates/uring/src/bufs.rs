//! The provided-buffer ring multishot recv fills: a page-aligned ring of entries the kernel
//! reads, and the buffers they point at.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;
use io_uring::Submitter;

/// Provided buffers the kernel fills for multishot recv: a page-aligned ring of `count`
/// entries and one block of `count × size` bytes. A buffer the kernel named in a completion
/// is the reader's until it is pushed back ([`BufRing::recycle`]).
pub struct BufRing {
    entries: *mut BufRingEntry,
    entries_layout: Layout,
    /// Owns the buffers' memory; only ever reached through `base`, so that no reference to
    /// all of it exists while the kernel writes into some of it.
    _buffers: Vec<u8>,
    base: *mut u8,
    count: u16,
    size: usize,
    tail: u16,
}

impl BufRing {
    /// `count` (a power of two) buffers of `size` bytes, none yet given to the kernel.
    pub fn new(count: u16, size: usize) -> io::Result<BufRing> {
        assert!(
            count.is_power_of_two(),
            "buffer ring size is a power of two"
        );
        let entries_layout = Layout::from_size_align(
            usize::from(count) * std::mem::size_of::<BufRingEntry>(),
            4096,
        )
        .map_err(|e| io::Error::other(e.to_string()))?;
        // SAFETY: the layout has a non-zero size (count >= 1); null is handled below.
        let entries = unsafe { alloc_zeroed(entries_layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::OutOfMemory,
                "cannot allocate the provided-buffer ring",
            ));
        }
        let mut buffers = vec![0; usize::from(count) * size];
        Ok(BufRing {
            entries,
            entries_layout,
            base: buffers.as_mut_ptr(),
            _buffers: buffers,
            count,
            size,
            tail: 0,
        })
    }

    /// Registers the ring as buffer group `group` of `submitter`'s io_uring and gives the
    /// kernel every buffer.
    ///
    /// # Safety
    ///
    /// The kernel reads the entries and writes into the buffers until the group is
    /// unregistered or the io_uring is dropped: `self` must not be dropped before either
    /// (its memory is on the heap, so moving it is fine).
    pub unsafe fn register(&mut self, submitter: &Submitter<'_>, group: u16) -> io::Result<()> {
        // SAFETY: the entries are page aligned and `count` long; the caller keeps them alive
        // while registered.
        unsafe {
            submitter.register_buf_ring_with_flags(self.entries as u64, self.count, group, 0)?;
        }
        for bid in 0..self.count {
            self.push(bid);
        }
        self.publish();
        Ok(())
    }

    /// Gives buffer `bid` back to the kernel, once its bytes have been read.
    pub fn recycle(&mut self, bid: u16) {
        self.push(bid);
        self.publish();
    }

    /// Puts buffer `bid` at the tail; [`BufRing::publish`] shows it to the kernel.
    fn push(&mut self, bid: u16) {
        assert!(bid < self.count, "buffer {bid} is not in the ring");
        let index = usize::from(self.tail & (self.count - 1));
        // SAFETY: `index` < count, so the entry lies inside the allocation; the kernel reads
        // entries only between its head and the published tail, and this one is past it.
        let entry = unsafe { &mut *self.entries.add(index) };
        // SAFETY: bid < count, so the buffer lies inside the allocation.
        let addr = unsafe { self.base.add(usize::from(bid) * self.size) };
        entry.set_addr(addr as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail is the u16 overlaying the first entry's reserved field
        // (io_uring_buf_ring) of the live, zero-initialised allocation; the kernel reads it
        // concurrently, hence the atomic store.
        let tail = unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    /// The `len` bytes a completion said the kernel put in buffer `bid`.
    pub fn slice(&self, bid: u16, len: usize) -> &[u8] {
        assert!(
            bid < self.count && len <= self.size,
            "buffer {bid} of {len} bytes is out of range"
        );
        // SAFETY: the range lies inside the allocation (checked above). The kernel wrote
        // `len` bytes into buffer `bid` and posted the completion that named it; it does not
        // write there again until the buffer is pushed back, which takes `&mut self` and so
        // cannot happen while this borrow lives.
        unsafe { std::slice::from_raw_parts(self.base.add(usize::from(bid) * self.size), len) }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout; `register`'s caller frees a
        // registered ring only once unregistered (or its io_uring dropped).
        unsafe { dealloc(self.entries.cast(), self.entries_layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_ring_hands_its_buffers_to_multishot_recv() {
        // Declared before the ring, so dropped after it, a panic's unwinding included.
        let mut bufs = BufRing::new(4, 64).unwrap();
        let Ok(mut ring) = io_uring::IoUring::new(8) else {
            eprintln!("skipped: no io_uring here");
            return;
        };
        // SAFETY: `bufs` outlives `ring` (declared before it).
        if let Err(e) = unsafe { bufs.register(&ring.submitter(), 0) } {
            eprintln!("skipped: no provided-buffer rings here: {e}");
            return;
        }
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let recv = io_uring::opcode::RecvMulti::new(
            io_uring::types::Fd(std::os::fd::AsRawFd::as_raw_fd(&b)),
            0,
        )
        .build()
        .user_data(7);
        std::io::Write::write_all(&mut a, b"hello").unwrap();
        // SAFETY: the entry points at no memory but the registered ring's.
        unsafe { ring.submission().push(&recv).unwrap() };
        ring.submit_and_wait(1).unwrap();
        let cqe = ring.completion().next().expect("a completion");
        let bid = io_uring::cqueue::buffer_select(cqe.flags()).expect("a buffer");
        assert_eq!(bufs.slice(bid, cqe.result() as usize), b"hello");
        bufs.recycle(bid);
    }
}
