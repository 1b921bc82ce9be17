//! Code that runtimes generate at run time and describe in a perf map (`/tmp/perf-PID.map`,
//! one `START SIZE NAME` line per piece of code): where CPython's perf trampolines are, so
//! that the unwinder can step through them.
//!
//! CPython 3.12+ run with `-X perf` (or `PYTHONPERFSUPPORT=1`) enters every Python function
//! through a trampoline of its own, named `py::FUNCTION:FILE` in the perf map: that frame is
//! how a Python function shows in a native stack. CPython is built without frame pointers
//! and the trampolines have no unwind information; on x86_64 a trampoline is `sub $8,%rsp;
//! call *%rcx; add $8,%rsp; ret` (3.12 and 3.13 alike), so its caller's return address is
//! 8 bytes above the stack pointer at the call's return, and its frame is 16 bytes.

use std::ops::Range;

/// The perf map of process `pid`, read through its root (a container's /tmp is its own).
pub(crate) fn perf_map_text(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/root/tmp/perf-{pid}.map"))
        .or_else(|_| std::fs::read_to_string(format!("/tmp/perf-{pid}.map")))
        .ok()
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
