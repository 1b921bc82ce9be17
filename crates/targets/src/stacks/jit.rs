//! Code that runtimes generate at run time and describe in a perf map (`/tmp/perf-PID.map`,
//! one `START SIZE NAME` line per piece of code) or a jitdump (`/tmp/jit-PID.dump`): where
//! CPython's perf trampolines are, so that the unwinder can step through them.
//!
//! CPython 3.12+ run with `-X perf` (or `PYTHONPERFSUPPORT=1`) enters every Python function
//! through a trampoline of its own, named `py::FUNCTION:FILE` in the perf map: that frame is
//! how a Python function shows in a native stack. CPython is built without frame pointers
//! and the trampolines have no unwind information; on x86_64 a trampoline is `sub $8,%rsp;
//! call *%rcx; add $8,%rsp; ret` (3.12 and 3.13 alike), so its caller's return address is
//! 8 bytes above the stack pointer at the call's return, and its frame is 16 bytes.

use std::io::Read;
use std::ops::Range;
use std::time::{Duration, SystemTime};

/// The perf map of process `pid`, read through its root (a container's /tmp is its own) and
/// named by its pid in its own PID namespace (a `--target command:` server runs in one, so
/// CPython writes `/tmp/perf-3.map`, not `perf-HOSTPID.map`: a newcomer's `-X perf` server
/// had no Python frames named); where it has none, its jitdump's code entries as perf-map
/// text ([`jitdump_as_perf_map`]). Only a file the process itself created is read
/// ([`own_file`]): the namespace pid is the same small number run after run, so the map of
/// an earlier run's server is there under the very name this one's would have.
pub(crate) fn perf_map_text(pid: u32) -> Option<String> {
    let started = started_at(pid)?;
    let [map, host_map, dump, host_dump] = jit_paths(pid);
    let read = |path: &str| match own_file(path, started) {
        JitFile::Own(bytes) => Some((bytes, false)),
        JitFile::Rewritten(bytes) => Some((bytes, true)),
        JitFile::Absent | JitFile::Earlier => None,
    };
    let (text, rewritten) = match read(&map).or_else(|| read(&host_map)) {
        Some((bytes, rewritten)) => (String::from_utf8_lossy(&bytes).into_owned(), rewritten),
        None => {
            let (bytes, rewritten) = read(&dump).or_else(|| read(&host_dump))?;
            (jitdump_as_perf_map(&bytes)?, rewritten)
        }
    };
    if !rewritten {
        return Some(text);
    }
    let mapped: Vec<Range<u64>> = procfs::process::Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .maps()
        .ok()?
        .into_iter()
        .map(|m| m.address.0..m.address.1)
        .collect();
    Some(entries_within(&text, &mapped))
}

/// The lines of a perf map's text whose code starts inside one of `mapped` (the process's
/// mappings): what is left of a map that an earlier process of the same name created and
/// this one appended to, once the earlier one's entries (its own address space's) are gone.
fn entries_within(perf_map: &str, mapped: &[Range<u64>]) -> String {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    perf_map
        .lines()
        .filter(|line| {
            line.split(' ')
                .next()
                .and_then(hex)
                .is_some_and(|start| mapped.iter().any(|m| m.contains(&start)))
        })
        .fold(String::new(), |text, line| text + line + "\n")
}

/// Where process `pid`'s perf map and jitdump are, in the order they are looked for: its
/// perf map through its root under its namespace pid, then in our /tmp under its host pid;
/// its jitdump the same.
fn jit_paths(pid: u32) -> [String; 4] {
    let own = ns_pid(pid).unwrap_or(pid);
    [
        format!("/proc/{pid}/root/tmp/perf-{own}.map"),
        format!("/tmp/perf-{pid}.map"),
        format!("/proc/{pid}/root/tmp/jit-{own}.dump"),
        format!("/tmp/jit-{pid}.dump"),
    ]
}

/// How much earlier than its process's start a file may seem to have been created and still
/// be the process's own: the start is known to a clock tick (10 ms, rounded down) and a
/// file's times come from the kernel's coarse clock (up to a jiffy behind).
const START_SLACK: Duration = Duration::from_millis(50);

/// A perf map or jitdump as looked for, for the process it would be of.
enum JitFile {
    /// Its bytes: the process created it.
    Own(Vec<u8>),
    /// None there, or none readable.
    Absent,
    /// One created before the process started and not written since: not its own.
    Earlier,
    /// One created before the process started and written since: truncated and written
    /// anew (V8's and the JVM's maps) or appended to (CPython's), so partly its own.
    Rewritten(Vec<u8>),
}

/// The file at `path`, for the process that started at `started`, told apart by its birth
/// time and its last change: CPython appends to a map that is there already (`O_APPEND`),
/// so an earlier run's map that this run's server appended to has a fresh mtime but an old
/// birth time, and its old entries would name this run's addresses wrongly. The file is
/// checked as opened (its inode, not its name, so a map in the process's own mount
/// namespace, read through its root, is judged, not ours) and read from the same
/// descriptor.
fn own_file(path: &str, started: SystemTime) -> JitFile {
    let Ok(mut file) = std::fs::File::open(path) else {
        return JitFile::Absent;
    };
    let Ok(meta) = file.metadata() else {
        return JitFile::Absent;
    };
    let Ok(modified) = meta.modified() else {
        return JitFile::Absent;
    };
    // No birth time (a file system that keeps none): the file may have been appended to.
    let created = meta.created().ok();
    if !created_by(modified, started) {
        return JitFile::Earlier;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    match file.read_to_end(&mut bytes) {
        Ok(_) if created.is_some_and(|c| created_by(c, started)) => JitFile::Own(bytes),
        Ok(_) => JitFile::Rewritten(bytes),
        Err(_) => JitFile::Absent,
    }
}

/// Whether a file created at `created` can be the work of a process started at `started`.
fn created_by(created: SystemTime, started: SystemTime) -> bool {
    created + START_SLACK >= started
}

/// When process `pid` started, on the wall clock file times are in: its start after boot
/// (`/proc/PID/stat`, in clock ticks) moved by how long ago boot was. `None` if it is gone.
fn started_at(pid: u32) -> Option<SystemTime> {
    let stat = procfs::process::Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .stat()
        .ok()?;
    let ticks = procfs::ticks_per_second().max(1);
    let since_boot = Duration::from_secs(stat.starttime / ticks)
        + Duration::from_secs(stat.starttime % ticks) / ticks as u32;
    let now_since_boot: Duration = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .ok()?
        .into();
    SystemTime::now().checked_sub(now_since_boot.checked_sub(since_boot)?)
}

/// Process `pid`'s pid in its innermost PID namespace (the last field of `NSpid:` in its
/// status), which is the pid it names its perf map and jitdump by.
pub(crate) fn ns_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    ns_pid_of(&status)
}

fn ns_pid_of(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// The code entries of a jitdump (`/tmp/jit-PID.dump`, what CPython 3.13's `-X perf_jit`
/// writes for `perf inject`), as perf-map text, one `START SIZE NAME` line per
/// `JIT_CODE_LOAD` record: the same trampolines, named the same (`py::FUNCTION:FILE`), as
/// `-X perf` puts in a perf map. `None` for a file that is not a little-endian jitdump; a
/// record cut short (the runtime still writing) ends the reading.
pub(crate) fn jitdump_as_perf_map(dump: &[u8]) -> Option<String> {
    const MAGIC: u32 = 0x4A69_5444; // "JiTD" as the writer's (little-endian) u32
    const CODE_LOAD: u32 = 0;
    let u32_at = |at: usize| Some(u32::from_le_bytes(dump.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(dump.get(at..at + 8)?.try_into().ok()?));
    if u32_at(0)? != MAGIC {
        return None;
    }
    let mut text = String::new();
    // The header's total_size; each record: id u32, total_size u32, timestamp u64, body.
    let mut at = u32_at(8)? as usize;
    while let (Some(id), Some(size)) = (u32_at(at), u32_at(at + 4)) {
        let size = size as usize;
        let Some(record) = dump.get(at..at.saturating_add(size)).filter(|_| size >= 16) else {
            break;
        };
        // JIT_CODE_LOAD: pid u32, tid u32, vma u64, code_addr u64, code_size u64,
        // code_index u64, then the name, NUL-terminated, then the code.
        if id == CODE_LOAD && record.len() > 56 {
            let (Some(addr), Some(len)) = (u64_at(at + 32), u64_at(at + 40)) else {
                break;
            };
            let name = &record[56..];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            text += &format!("{addr:x} {len:x} {}\n", String::from_utf8_lossy(name));
        }
        at += size;
    }
    Some(text)
}

/// The address ranges of CPython's perf trampolines in a perf map's text, sorted and merged
/// where they touch (they are laid end to end in arenas).
pub(crate) fn python_trampolines(perf_map: &str) -> Vec<Range<u64>> {
    let mut ranges: Vec<Range<u64>> = perf_map
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ' ');
            let start = u64::from_str_radix(fields.next()?, 16).ok()?;
            let size = u64::from_str_radix(fields.next()?, 16).ok()?;
            fields
                .next()?
                .starts_with("py::")
                .then(|| start..start.saturating_add(size))
        })
        .collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len().min(64));
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// The entries of a perf map's text, sorted by address: `START SIZE NAME`, hexadecimal with
/// or without `0x` (the JVM's `jcmd Compiler.perfmap` writes `0x`, which blazesym's reader
/// refuses, and with it every name of the process).
pub(crate) fn perf_map_entries(perf_map: &str) -> Vec<(Range<u64>, String)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut entries: Vec<(Range<u64>, String)> = perf_map
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ' ');
            let start = hex(fields.next()?)?;
            let size = hex(fields.next()?)?;
            let name = fields.next()?.trim();
            Some((start..start.saturating_add(size), name.to_string()))
        })
        .collect();
    entries.sort_by_key(|e| e.0.start);
    entries
}

/// The name of the perf-map entry holding `addr`, if one does (entries as
/// [`perf_map_entries`] returns them).
pub(crate) fn name_at(entries: &[(Range<u64>, String)], addr: u64) -> Option<&str> {
    let i = entries
        .partition_point(|e| e.0.start <= addr)
        .checked_sub(1)?;
    let (range, name) = &entries[i];
    range.contains(&addr).then_some(name.as_str())
}

/// Whether `addr` is in one of `ranges` (sorted, disjoint).
pub(crate) fn within(ranges: &[Range<u64>], addr: u64) -> bool {
    let i = ranges.partition_point(|r| r.end <= addr);
    ranges.get(i).is_some_and(|r| r.start <= addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_named_by_its_pid_in_its_own_namespace() {
        let status = "Name:\tpython3\nTgid:\t4242\nPid:\t4242\nNSpid:\t4242\t3\nNStgid:\t4242\t3\n";
        assert_eq!(ns_pid_of(status), Some(3));
        assert_eq!(ns_pid_of("Pid:\t10\nNSpid:\t10\n"), Some(10));
        assert_eq!(ns_pid_of("Pid:\t10\n"), None);
        assert!(ns_pid(std::process::id()).is_some());
    }

    /// A perf map there before the process started (an earlier run's server had the same
    /// namespace pid) is not read as the process's: not at all if it was not written since,
    /// only for the entries inside the process's mappings if it was (CPython appends).
    #[test]
    fn a_map_made_before_the_process_is_not_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("perf-3.map");
        std::fs::write(&path, "7f0000000000 b py::wrong_name:/srv/old.py\n").unwrap();
        let path = path.to_str().unwrap();
        let now = SystemTime::now();
        let later = now + Duration::from_secs(10);
        // Made and written before the process started: an earlier run's.
        assert!(matches!(own_file(path, later), JitFile::Earlier));
        // Made by it (when the file system keeps birth times; else it may have been
        // appended to, and only entries inside the process's mappings count).
        let own = own_file(path, now - Duration::from_secs(10));
        assert!(matches!(own, JitFile::Own(_) | JitFile::Rewritten(_)));
        // Made before it, written since (appended to, or truncated and written anew).
        let file = std::fs::File::options().append(true).open(path).unwrap();
        file.set_modified(later + Duration::from_secs(1)).unwrap();
        assert!(matches!(own_file(path, later), JitFile::Rewritten(_)));
        assert!(matches!(
            own_file(&format!("{path}.none"), now),
            JitFile::Absent
        ));
        // Within the slack of the start's tick and the file system's coarse clock.
        assert!(created_by(now, now + START_SLACK));
        assert!(!created_by(
            now,
            now + START_SLACK + Duration::from_millis(1)
        ));
    }

    #[test]
    fn an_appended_map_keeps_the_entries_of_the_process_mappings() {
        let map = "7f0000000000 b py::wrong_name:/srv/old.py\n\
                   7f1000000010 b py::do_GET:/srv/app.py\n\
                   0x7f1000000100 0x10 void Hello.main()\n\
                   not a line\n";
        assert_eq!(
            entries_within(map, &[0x1000..0x2000, 0x7f10_0000_0000..0x7f10_0000_1000]),
            "7f1000000010 b py::do_GET:/srv/app.py\n0x7f1000000100 0x10 void Hello.main()\n"
        );
        assert_eq!(entries_within(map, &[]), "");
    }

    /// This very process, whose map at its pid's name is older than it: none is read.
    #[test]
    fn a_stale_map_of_a_live_process_is_not_read() {
        let pid = std::process::id();
        let started = started_at(pid).unwrap();
        assert!(started <= SystemTime::now());
        let path = format!("/tmp/perf-{pid}.map");
        std::fs::write(&path, "7f0000000000 b py::wrong_name:/srv/old.py\n").unwrap();
        let file = std::fs::File::options().append(true).open(&path).unwrap();
        file.set_modified(started - Duration::from_secs(60))
            .unwrap();
        let text = perf_map_text(pid);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(text, None);
    }

    #[test]
    fn trampolines_are_the_py_entries_merged() {
        let map = "7f00000000 b py::_find_and_load:<frozen importlib._bootstrap>\n\
                   7f0000000b b py::burn_cpu_for:/srv/app.py\n\
                   7f00001000 b py::do_GET:/srv/app.py\n\
                   55000000 40 LazyCompile:*handle /srv/app.js\n\
                   not a line\n";
        let t = python_trampolines(map);
        assert_eq!(
            t,
            vec![0x7f00000000..0x7f00000016, 0x7f00001000..0x7f0000100b]
        );
        assert!(within(&t, 0x7f00000010));
        assert!(within(&t, 0x7f00001000));
        assert!(!within(&t, 0x7f00000016));
        assert!(!within(&t, 0x55000010));
        assert!(!within(&[], 1));
    }

    /// A jitdump as CPython 3.13's `-X perf_jit` writes one: the header, a code load, an
    /// unwinding-info record (skipped), a second code load, and a record cut short.
    #[test]
    fn a_jitdumps_code_loads_read_as_a_perf_map() {
        let mut dump = Vec::new();
        for v in [0x4A69_5444u32, 1, 40, 62, 0, 4242] {
            dump.extend(v.to_le_bytes());
        }
        dump.extend([0u8; 16]); // timestamp, flags
        let load = |dump: &mut Vec<u8>, addr: u64, name: &str| {
            let size = 56 + name.len() + 1 + 11;
            dump.extend(0u32.to_le_bytes());
            dump.extend((size as u32).to_le_bytes());
            dump.extend(0u64.to_le_bytes());
            dump.extend(4242u32.to_le_bytes());
            dump.extend(4242u32.to_le_bytes());
            for v in [addr, addr, 11, 1] {
                dump.extend(v.to_le_bytes());
            }
            dump.extend(name.as_bytes());
            dump.push(0);
            dump.extend([0x90u8; 11]);
        };
        load(&mut dump, 0x7f00_0000_0000, "py::burn_cpu_for:/srv/app.py");
        dump.extend(4u32.to_le_bytes());
        dump.extend(40u32.to_le_bytes());
        dump.extend([0u8; 32]);
        load(&mut dump, 0x7f00_0000_0110, "py::do_GET:/srv/app.py");
        dump.extend(0u32.to_le_bytes());
        dump.extend(200u32.to_le_bytes());
        dump.extend([0u8; 20]);
        let map = jitdump_as_perf_map(&dump).unwrap();
        assert_eq!(
            map,
            "7f0000000000 b py::burn_cpu_for:/srv/app.py\n7f0000000110 b py::do_GET:/srv/app.py\n"
        );
        assert_eq!(
            python_trampolines(&map),
            vec![
                0x7f00_0000_0000..0x7f00_0000_000b,
                0x7f00_0000_0110..0x7f00_0000_011b
            ]
        );
        // Not a jitdump, or nothing but a piece of one: nothing read, no panic.
        assert_eq!(jitdump_as_perf_map(b"7f00 b py::f\n"), None);
        assert_eq!(jitdump_as_perf_map(&dump[..6]), None);
        assert_eq!(jitdump_as_perf_map(&dump[..50]).as_deref(), Some(""));
    }

    #[test]
    fn the_jvms_perf_map_is_read_with_its_0x() {
        let map = "0x00007f0fb8ec7600 0x0000000000000338 void Hello.main(java.lang.String[])\n\
                   0x00007f0fb14001a0 0x0000000000000110 void java.lang.Object.<init>()\n\
                   7f0000000000 b py::f:<string>\n";
        let e = perf_map_entries(map);
        assert_eq!(
            name_at(&e, 0x7f0fb8ec7700),
            Some("void Hello.main(java.lang.String[])")
        );
        assert_eq!(
            name_at(&e, 0x7f0fb14001a0),
            Some("void java.lang.Object.<init>()")
        );
        assert_eq!(name_at(&e, 0x7f000000000a), Some("py::f:<string>"));
        assert_eq!(name_at(&e, 0x7f0fb14002b0), None);
        assert_eq!(name_at(&e, 1), None);
    }
}
