//! Each closed second's latency histogram (V2-deflate, a few hundred bytes to ~1 KB), kept
//! until the end of the run, where the report, the HDR log, the stage figures and the
//! confidence intervals read them all; nothing reads them while the run goes on but the
//! journal, which is handed each second as it closes.
//!
//! Held in memory they were the largest thing a long run's generator grew by (README "What
//! grows with a run's length": ~1.5–4 MB an hour, ~35–100 MB a day, plus the allocator's
//! share of some 3,600 small blocks an hour). So only the last [`SPILL_AFTER_SECONDS`] stay
//! in memory; older ones are appended to a spill file as they leave that window and read
//! back, by offset, when the run ends. What stays in memory per second is its offset and
//! length (16 bytes: ~58 KB an hour, ~1.4 MB a day, in a `Vec` that doubles).
//!
//! The spill file is an unlinked temporary file (`tempfile`, in `$TMPDIR`): it has no name
//! from the moment it exists, so it goes with the process on every exit path, `kill -9`
//! included. What it costs: a write of ~1 KB a second (to the page cache), one read of the
//! whole file at the end (~1.5–4 MB an hour), and the disk space until the run ends. A spill
//! file that cannot be made or written loses nothing: the seconds stay in memory (as before
//! it existed) and [`SecondHistograms::failure`] says so once.

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt as _;

/// How many of the latest seconds stay in memory: ten minutes, so that a run of up to ten
/// minutes never writes a spill file, and a longer one holds at most ~0.7 MB of them.
pub const SPILL_AFTER_SECONDS: usize = 600;

/// Overrides [`SPILL_AFTER_SECONDS`] (a number of seconds), for tests that want a short run
/// to spill. Not documented for users: nothing but memory changes with it.
pub const SPILL_AFTER_ENV: &str = "TAILSCOPE_SPILL_AFTER_SECONDS";

/// The closed seconds' serialized histograms, in order: the oldest in a spill file, the
/// latest `window` in memory.
pub struct SecondHistograms {
    /// Where each spilled second is in `file` (offset, length), in order.
    spilled: Vec<(u64, u32)>,
    /// The seconds after the spilled ones, in order.
    held: VecDeque<Vec<u8>>,
    /// How many seconds stay in memory before the oldest is spilled.
    window: usize,
    /// The spill file and how many bytes of it are spilled seconds; none until a second
    /// first leaves the window.
    file: Option<(File, u64)>,
    /// Why the spill file failed, once it has: every later second stays in memory (those
    /// spilled before stay readable in the file).
    failure: Option<String>,
    /// Makes the spill file (a test's may fail).
    make_file: fn() -> std::io::Result<File>,
}

impl Default for SecondHistograms {
    fn default() -> Self {
        SecondHistograms::new()
    }
}

impl SecondHistograms {
    /// A store keeping the latest seconds in memory: as many as the environment's
    /// [`SPILL_AFTER_ENV`] says when it holds a number, otherwise [`SPILL_AFTER_SECONDS`].
    pub fn new() -> SecondHistograms {
        let window = std::env::var(SPILL_AFTER_ENV)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(SPILL_AFTER_SECONDS);
        SecondHistograms::with_window(window, tempfile::tempfile)
    }

    /// A store keeping the latest `window` seconds in memory and spilling older ones into
    /// the file `make_file` makes (when it first has to).
    pub fn with_window(window: usize, make_file: fn() -> std::io::Result<File>) -> Self {
        SecondHistograms {
            spilled: Vec::new(),
            held: VecDeque::new(),
            window,
            file: None,
            failure: None,
            make_file,
        }
    }

    /// How many seconds it holds.
    pub fn len(&self) -> usize {
        self.spilled.len() + self.held.len()
    }

    /// True before the first second.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many seconds are in the spill file.
    pub fn spilled(&self) -> usize {
        self.spilled.len()
    }

    /// Copies the seconds from index `from` on into `to` (emptied first): the journal is
    /// handed each second as it closes, so they are in memory but after a window's worth
    /// closed at once, where the file is read.
    pub fn copy_from(&self, from: usize, to: &mut Vec<Vec<u8>>) {
        to.clear();
        for i in from..self.spilled.len() {
            to.push(self.read(i).unwrap_or_default());
        }
        let skip = from.saturating_sub(self.spilled.len());
        to.extend(self.held.iter().skip(skip).cloned());
    }

    /// The spilled second `i`, read back.
    fn read(&self, i: usize) -> std::io::Result<Vec<u8>> {
        let (Some((file, _)), Some(&(offset, len))) = (&self.file, self.spilled.get(i)) else {
            return Err(std::io::ErrorKind::NotFound.into());
        };
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }

    /// Why the spill file failed (the seconds stayed in memory from then on), if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Appends the next second, and spills the oldest held one if the window is full.
    pub fn push(&mut self, bytes: Vec<u8>) {
        self.held.push_back(bytes);
        if self.held.len() > self.window && self.failure.is_none() {
            if let Err(why) = self.spill_oldest() {
                self.failure = Some(why);
            }
        }
    }

    /// Writes the oldest held second after the spilled ones (the file made on first use),
    /// and lets it go from memory. On a failure it stays held.
    fn spill_oldest(&mut self) -> Result<(), String> {
        if self.file.is_none() {
            let file = (self.make_file)().map_err(|e| format!("it could not be made: {e}"))?;
            self.file = Some((file, 0));
        }
        let (Some((file, end)), Some(oldest)) = (self.file.as_mut(), self.held.front()) else {
            return Ok(());
        };
        let len = u32::try_from(oldest.len()).map_err(|_| "a second is over 4 GB".to_string())?;
        // Written at its offset rather than appended: a write that failed half-way leaves
        // bytes after `end` that nothing points to, and the next attempt (none: it fails
        // once) could not misplace a second.
        file.write_all_at(oldest, *end)
            .map_err(|e| format!("a write failed: {e}"))?;
        self.spilled.push((*end, len));
        *end += u64::from(len);
        self.held.pop_front();
        Ok(())
    }

    /// Every second, in order, the spilled ones read back; and why some could not be read,
    /// if they could not (each such second is then empty, as a histogram that could not be
    /// serialized is: it drops out of what reads it). The spill file is closed here, which
    /// frees its disk space (it has no name).
    pub fn into_vec(self) -> (Vec<Vec<u8>>, Option<String>) {
        let mut all = Vec::with_capacity(self.len());
        let mut unread = None;
        for i in 0..self.spilled.len() {
            let bytes = self.read(i).unwrap_or_else(|e| {
                unread.get_or_insert_with(|| {
                    format!("the spill file of the seconds' histograms could not be read back ({e}): those seconds are left out of the HDR log and the intervals")
                });
                Vec::new()
            });
            all.push(bytes);
        }
        all.extend(self.held);
        (all, unread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Second `i`'s bytes: lengths differ, so a misplaced offset would show.
    fn second(i: usize) -> Vec<u8> {
        (0..=i % 7 + i).map(|k| (k * 31 + i) as u8).collect()
    }

    fn no_file() -> std::io::Result<File> {
        panic!("no second left the window: no spill file should be made")
    }

    fn cannot_make() -> std::io::Result<File> {
        Err(std::io::Error::other("no room"))
    }

    /// Opened for reading only: every write to it fails.
    fn cannot_write() -> std::io::Result<File> {
        File::open("/dev/null")
    }

    #[test]
    fn seconds_come_back_in_order_with_the_oldest_spilled() {
        let mut store = SecondHistograms::with_window(3, tempfile::tempfile);
        for i in 0..20 {
            store.push(second(i));
        }
        assert_eq!(store.len(), 20);
        assert_eq!(store.spilled(), 17, "all but the window's 3 left memory");
        assert_eq!(store.held.len(), 3);
        let mut recent = Vec::new();
        store.copy_from(15, &mut recent);
        assert_eq!(recent, (15..20).map(second).collect::<Vec<_>>());
        let (all, unread) = store.into_vec();
        assert_eq!(unread, None);
        assert_eq!(all, (0..20).map(second).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_is_spilled_until_a_second_leaves_the_window() {
        let mut store = SecondHistograms::with_window(4, no_file);
        for i in 0..4 {
            store.push(second(i));
        }
        assert_eq!(store.spilled(), 0);
        let mut store = SecondHistograms {
            make_file: tempfile::tempfile,
            ..store
        };
        store.push(second(4));
        assert_eq!((store.spilled(), store.held.len()), (1, 4));
        assert!(store.failure().is_none());
        assert_eq!(store.into_vec().0, (0..5).map(second).collect::<Vec<_>>());
    }

    #[test]
    fn a_spill_file_that_cannot_be_made_or_written_keeps_the_seconds_in_memory() {
        for make in [cannot_make as fn() -> _, cannot_write] {
            let mut store = SecondHistograms::with_window(2, make);
            for i in 0..10 {
                store.push(second(i));
            }
            assert_eq!(store.spilled(), 0);
            assert_eq!(store.held.len(), 10);
            let why = store.failure().expect("the failure is kept").to_owned();
            assert!(
                why.contains("could not be made") || why.contains("a write failed"),
                "{why}"
            );
            let mut recent = Vec::new();
            store.copy_from(8, &mut recent);
            assert_eq!(recent, vec![second(8), second(9)]);
            let (all, unread) = store.into_vec();
            assert_eq!(unread, None);
            assert_eq!(all, (0..10).map(second).collect::<Vec<_>>());
        }
    }

    #[test]
    fn seconds_spilled_before_a_failure_stay_readable() {
        use std::os::fd::AsRawFd as _;
        let mut store = SecondHistograms::with_window(2, tempfile::tempfile);
        for i in 0..6 {
            store.push(second(i));
        }
        assert_eq!(store.spilled(), 4);
        // The disk fills: from now on the same file refuses writes (opened again, for
        // reading only, through /proc: it has no name).
        let (file, end) = store.file.take().expect("a file was made");
        let read_only = File::open(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
        store.file = Some((read_only, end));
        drop(file);
        for i in 6..10 {
            store.push(second(i));
        }
        assert!(store
            .failure()
            .is_some_and(|w| w.contains("a write failed")));
        assert_eq!((store.spilled(), store.held.len()), (4, 6));
        let (all, unread) = store.into_vec();
        assert_eq!(unread, None);
        assert_eq!(all, (0..10).map(second).collect::<Vec<_>>());
    }
}
