//! The provided-buffer ring multishot recv fills: a page-aligned ring of entries the kernel
//! reads, and the buffers they point at.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::types::BufRingEntry;

/// Provided buffers the kernel fills for multishot recv: a page-aligned ring of entries
/// and one block of `count × size` bytes.
pub(super) struct BufRing {
    pub(super) entries: *mut BufRingEntry,
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
    pub(super) fn new(count: u16, size: usize) -> io::Result<BufRing> {
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

    /// Puts buffer `bid` at the tail; [`BufRing::publish`] shows it to the kernel.
    pub(super) fn push(&mut self, bid: u16) {
        let index = usize::from(self.tail & (self.count - 1));
        // SAFETY: `index` < count, so the entry lies inside the allocation; the kernel reads
        // entries only between its head and the published tail, and this one is past it.
        let entry = unsafe { &mut *self.entries.add(index) };
        assert!(bid < self.count, "buffer {bid} is not in the ring");
        // SAFETY: bid < count, so the buffer lies inside the allocation.
        let addr = unsafe { self.base.add(usize::from(bid) * self.size) };
        entry.set_addr(addr as u64);
        entry.set_len(self.size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    pub(super) fn publish(&self) {
        // SAFETY: the tail is the u16 overlaying the first entry's reserved field
        // (io_uring_buf_ring) of the live, zero-initialised allocation; the kernel reads it
        // concurrently, hence the atomic store.
        let tail = unsafe { &*BufRingEntry::tail(self.entries).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }

    pub(super) fn slice(&self, bid: u16, len: usize) -> &[u8] {
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
        // SAFETY: allocated in `new` with this layout. A registered `BufRing` is freed only
        // once unregistered: `Ring`'s drop unregisters it first, with no op left that could
        // use it (else leaks it), and `Ring::probe` drops its ring, which never had an op,
        // before it.
        unsafe { dealloc(self.entries.cast(), self.entries_layout) };
    }
}
