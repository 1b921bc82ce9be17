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

use std::ops::Range;

/// The perf map of process `pid`, read through its root (a container's /tmp is its own);
/// where it has none, its jitdump's code entries as perf-map text ([`jitdump_as_perf_map`]).
pub(crate) fn perf_map_text(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/root/tmp/perf-{pid}.map"))
        .or_else(|_| std::fs::read_to_string(format!("/tmp/perf-{pid}.map")))
        .ok()
        .or_else(|| {
            let dump = std::fs::read(format!("/proc/{pid}/root/tmp/jit-{pid}.dump"))
                .or_else(|_| std::fs::read(format!("/tmp/jit-{pid}.dump")))
                .ok()?;
            jitdump_as_perf_map(&dump)
        })
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
