//! Whole user stacks without frame pointers: each `cpu-clock` sample also carries the user
//! registers and a bounded copy of the user stack ([`STACK_COPY_BYTES`]), and the target's
//! samples are unwound here, in user space, from the binaries' DWARF call-frame information
//! (`.eh_frame` through its `.eh_frame_hdr` index, or `.debug_frame`) with framehop.
//!
//! Cost, bounded three ways: the kernel copies at most [`STACK_COPY_BYTES`] per sample (at
//! 99 Hz, ~1.6 MB/s per busy CPU: a memcpy in the sample's interrupt); an unwind reads only
//! that copy and stops at [`MAX_STACK`] frames, with framehop's rule cache making a repeated
//! address a table look-up; and the unwind data of a file is read once for the run
//! ([`Sections`], shared by every process mapping it: nginx's workers read nginx once), a
//! process's module list once, re-read at most once a second when a sample runs outside it
//! (a library loaded later). All of it runs on the sampler's side, at drain time, never in
//! the server.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::{FrameAddress, MayAllocateDuringUnwind, Module, ModuleSectionInfo, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};

use super::symbols::MAX_STACK;

/// User stack bytes copied with each sample, from the stack pointer up. 16 KiB: twice perf's
/// own default for `--call-graph dwarf` (8 KiB, which covers most C servers from the leaf to
/// `main`), so that a few large frames (Rust futures, C++ buffers on the stack) still leave
/// room for their callers; not 32 or 64 KiB, because the kernel reserves the full size in
/// every sample record whatever the stack's real depth, which sets the ring buffer's size
/// ([`RING_BYTES_WITH_STACK`]) and the copy's cost per sample. A stack deeper than this is
/// unwound as far as the copy reaches, and the frame-pointer walk is kept where it went
/// further.
pub(crate) const STACK_COPY_BYTES: u32 = 16 * 1024;

/// Ring buffer per CPU when samples carry a stack copy: ~17 KiB a sample, 64 samples, about
/// 0.6 s at 99 Hz, so that a drain that comes late (the run drains every ~100 ms) loses none.
pub(crate) const RING_BYTES_WITH_STACK: usize = 1024 * 1024;

/// How often a process's mappings may be re-read when a sample runs outside every module
/// known (a library loaded after the first read).
const MAPS_REFRESH: Duration = Duration::from_secs(1);

type Data = Arc<[u8]>;
type NativeUnwinder = framehop::UnwinderNative<Data, MayAllocateDuringUnwind>;

#[cfg(target_arch = "x86_64")]
mod arch {
    /// `PERF_REG_X86_BP`, `_SP`, `_IP` (arch/x86/include/uapi/asm/perf_regs.h): all framehop
    /// needs; the kernel writes them in bit order.
    pub(super) const REGS_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);

    /// (pc, sp, registers to unwind from) out of the sampled registers.
    pub(super) fn start(regs: &[u64]) -> Option<(u64, u64, framehop::UnwindRegsNative)> {
        let &[bp, sp, ip] = regs else { return None };
        Some((ip, sp, framehop::x86_64::UnwindRegsX86_64::new(ip, sp, bp)))
    }

    /// Steps out of a CPython perf trampoline (`sub $8,%rsp; call *%rcx; add $8,%rsp; ret`,
    /// see [`super::super::jit`]) returned to: the caller's return address is above the 8
    /// bytes of padding, and the frame pointer is left as it was.
    pub(super) fn out_of_trampoline(
        regs: &mut framehop::UnwindRegsNative,
        read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
    ) -> Option<u64> {
        let sp = regs.sp();
        let ret = read_stack(sp.checked_add(8)?).ok()?;
        regs.set_sp(sp.checked_add(16)?);
        Some(ret)
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    /// `PERF_REG_ARM64_X29` (the frame pointer), `_LR`, `_SP`, `_PC`.
    pub(super) const REGS_MASK: u64 = (1 << 29) | (1 << 30) | (1 << 31) | (1 << 32);

    /// (pc, sp, registers to unwind from) out of the sampled registers.
    pub(super) fn start(regs: &[u64]) -> Option<(u64, u64, framehop::UnwindRegsNative)> {
        let &[fp, lr, sp, pc] = regs else { return None };
        Some((
            pc,
            sp,
            framehop::aarch64::UnwindRegsAarch64::new(lr, sp, fp),
        ))
    }

    /// CPython's aarch64 trampolines keep a frame record: framehop's frame-pointer
    /// fallback steps out of them.
    pub(super) fn out_of_trampoline(
        _regs: &mut framehop::UnwindRegsNative,
        _read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
    ) -> Option<u64> {
        None
    }
}

/// The user registers to sample (`sample_regs_user`).
pub(crate) const REGS_MASK: u64 = arch::REGS_MASK;

/// The unwind sections of one ELF file, read once for the run.
struct Sections {
    /// (section name, its address range in the file's own layout, its bytes when needed).
    sections: Vec<(&'static [u8], Range<u64>, Option<Data>)>,
    /// The executable PT_LOAD segments: (file offset, size in the file, address in the
    /// file's layout). Only those: a linker that packs segments (lld, gold, mold) puts the
    /// read-only one on the same file page as the start of the code, and the mapping of that
    /// page as code must take the code segment's bias.
    loads: Vec<(u64, u64, u64)>,
}

/// Sections framehop asks for; the bytes of only the first three are read.
const SECTIONS: [&[u8]; 5] = [
    b".eh_frame",
    b".eh_frame_hdr",
    b".debug_frame",
    b".text",
    b".got",
];

impl Sections {
    /// Reads the unwind sections of the file at `path`, without reading the rest of it.
    fn read(path: &str) -> Option<Sections> {
        let file = std::fs::File::open(path).ok()?;
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).ok()?;
        let has_eh_frame = elf.section_by_name(".eh_frame").is_some();
        let mut sections = Vec::new();
        for (i, name) in SECTIONS.iter().enumerate() {
            let Some(section) = std::str::from_utf8(name)
                .ok()
                .and_then(|n| elf.section_by_name(n))
            else {
                continue;
            };
            let range = section.address()..section.address() + section.size();
            // framehop reads .debug_frame only where there is no .eh_frame.
            let wanted = i < 2 || (i == 2 && !has_eh_frame);
            let data = if wanted {
                section.data().ok().map(Data::from)
            } else {
                None
            };
            sections.push((*name, range, data));
        }
        let loads = elf
            .segments()
            .filter(|s| match s.flags() {
                object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                _ => false,
            })
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        Some(Sections { sections, loads })
    }

    /// Where the file's address 0 is in a process that maps file offset `offset` at `start`.
    fn base_avma(&self, start: u64, offset: u64) -> Option<u64> {
        let page = 4096u64;
        let &(p_offset, _, p_vaddr) = self
            .loads
            .iter()
            .find(|&&(o, size, _)| (o & !(page - 1)) <= offset && offset < o + size)?;
        Some(
            start
                .wrapping_sub(offset)
                .wrapping_add(p_offset)
                .wrapping_sub(p_vaddr),
        )
    }
}

/// framehop's view of one [`Sections`]: ELF addresses start at 0.
struct SectionInfo<'a>(&'a Sections);

impl ModuleSectionInfo<Data> for SectionInfo<'_> {
    fn base_svma(&self) -> u64 {
        0
    }

    fn section_svma_range(&mut self, name: &[u8]) -> Option<Range<u64>> {
        self.0
            .sections
            .iter()
            .find(|s| s.0 == name)
            .map(|s| s.1.clone())
    }

    fn section_data(&mut self, name: &[u8]) -> Option<Data> {
        self.0
            .sections
            .iter()
            .find(|s| s.0 == name)
            .and_then(|s| s.2.clone())
    }
}

/// One process: its modules, as framehop sees them.
struct Process {
    unwinder: NativeUnwinder,
    /// The address ranges of the modules added.
    code: Vec<Range<u64>>,
    /// CPython's perf trampolines (sorted, disjoint), from its perf map.
    trampolines: Vec<Range<u64>>,
    read_at: Instant,
    /// An unwind stopped at code outside every module and trampoline known (a trampoline
    /// made since the perf map was read): read again once [`MAPS_REFRESH`] has passed.
    stale: bool,
}

/// A user stack unwound from a sample's registers and stack copy.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Unwound {
    /// Frames, leaf first: the instruction pointer, then return addresses (as the kernel's
    /// callchain gives them, so both name the same way).
    pub(crate) frames: Vec<u64>,
    /// The unwind reached the outermost frame (`_start`, a thread's start), rather than
    /// stopping at the end of the copy or at code without unwind information.
    pub(crate) complete: bool,
}

/// Unwinds the target's user stacks; keeps per-file sections and per-process modules.
#[derive(Default)]
pub(crate) struct UserUnwinder {
    /// Per (device, inode) of a mapped file; `None` when it could not be read.
    files: HashMap<(i32, i32, u64), Option<Arc<Sections>>>,
    processes: HashMap<u32, Process>,
    cache: Option<Box<framehop::CacheNative<MayAllocateDuringUnwind>>>,
}

impl UserUnwinder {
    /// Unwinds the user stack of a sample of `pid` from its `regs` (in [`REGS_MASK`] order)
    /// and `stack` (the copy from the stack pointer up). `None` when the sample has no
    /// usable registers.
    pub(crate) fn unwind(&mut self, pid: u32, regs: &[u64], stack: &[u8]) -> Option<Unwound> {
        let (pc, sp, regs) = arch::start(regs)?;
        if pc == 0 || stack.is_empty() {
            return None;
        }
        let stale = |p: &Process| {
            (p.stale || !p.code.iter().any(|r| r.contains(&pc)))
                && p.read_at.elapsed() >= MAPS_REFRESH
        };
        if self.processes.get(&pid).is_none_or(stale) {
            let process = self.read_process(pid);
            self.processes.insert(pid, process);
        }
        let process = self.processes.get_mut(&pid)?;
        let cache = self
            .cache
            .get_or_insert_with(|| Box::new(framehop::CacheNative::new()));
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let at = usize::try_from(addr.checked_sub(sp).ok_or(())?).map_err(|_| ())?;
            let word = stack.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let mut regs = regs;
        let mut address = FrameAddress::from_instruction_pointer(pc);
        let mut unwound = Unwound::default();
        while unwound.frames.len() < usize::from(MAX_STACK) {
            let at = address.address();
            unwound.frames.push(at);
            let trampoline =
                address.is_return_address() && super::jit::within(&process.trampolines, at);
            let stepped = match trampoline {
                true => arch::out_of_trampoline(&mut regs, &mut read_stack),
                false => None,
            };
            let next = match stepped {
                Some(ret) => Ok(Some(ret)),
                None => process
                    .unwinder
                    .unwind_frame(address, &mut regs, cache, &mut read_stack)
                    .map_err(|_| ()),
            };
            match next {
                Ok(Some(ret)) => match FrameAddress::from_return_address(ret) {
                    Some(a) => address = a,
                    None => break,
                },
                Ok(None) => {
                    unwound.complete = true;
                    break;
                }
                Err(()) => {
                    if !trampoline && !process.code.iter().any(|r| r.contains(&at)) {
                        process.stale = true;
                    }
                    break;
                }
            }
        }
        Some(unwound)
    }

    /// Forgets the processes that are no longer the target's (a pid may be reused).
    pub(crate) fn retain(&mut self, pids: &std::collections::HashSet<u32>) {
        self.processes.retain(|pid, _| pids.contains(pid));
    }

    /// The executable file mappings of `pid` as framehop modules.
    fn read_process(&mut self, pid: u32) -> Process {
        let mut unwinder = NativeUnwinder::new();
        let mut code = Vec::new();
        let maps = procfs::process::Process::new(pid as i32).and_then(|p| p.maps());
        for map in maps.into_iter().flatten() {
            let procfs::process::MMapPath::Path(path) = &map.pathname else {
                continue;
            };
            if !map.perms.contains(procfs::process::MMPermissions::EXECUTE) {
                continue;
            }
            let path = path.to_string_lossy();
            // Through the process's root: the path is its own (a container's).
            let sections = self
                .files
                .entry((map.dev.0, map.dev.1, map.inode))
                .or_insert_with(|| {
                    Sections::read(&format!("/proc/{pid}/root{path}"))
                        .or_else(|| Sections::read(&path))
                        .map(Arc::new)
                })
                .clone();
            let Some(sections) = sections else {
                continue;
            };
            let (start, end) = map.address;
            let Some(base) = sections.base_avma(start, map.offset) else {
                continue;
            };
            unwinder.add_module(Module::new(
                path.into_owned(),
                start..end,
                base,
                SectionInfo(&sections),
            ));
            code.push(start..end);
        }
        let trampolines = super::jit::perf_map_text(pid)
            .map(|text| super::jit::python_trampolines(&text))
            .unwrap_or_default();
        Process {
            unwinder,
            code,
            trampolines,
            read_at: Instant::now(),
            stale: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_of_a_mapping_follows_its_load_segment() {
        // A PIE whose code segment is at file offset 0x1000, address 0x1000, mapped at
        // 0x5555_5555_5000 from offset 0x1000: the file's address 0 is at 0x5555_5555_4000.
        let sections = Sections {
            sections: Vec::new(),
            loads: vec![(0x1000, 0x2345, 0x1000)],
        };
        assert_eq!(
            sections.base_avma(0x5555_5555_5000, 0x1000),
            Some(0x5555_5555_4000)
        );
        // lld's unaligned segments: offset 0x1234 at address 0x2234, mapped from page 0x1000
        // at 0x7000_0000. File offset 0x1234 is then at 0x7000_0234 and at 0x2234 in the
        // file's layout: address 0 is at 0x7000_0234 - 0x2234.
        let lld = Sections {
            sections: Vec::new(),
            loads: vec![(0x1234, 0x3000, 0x2234)],
        };
        assert_eq!(
            lld.base_avma(0x7000_0000, 0x1000),
            Some(0x7000_0234 - 0x2234)
        );
        assert_eq!(lld.base_avma(0x7000_0000, 0x9000), None);
        // The code segment of this project's release binary (lld): offset 0x20ec00 at
        // 0x20fc00, mapped from page 0x20e000, which the read-only segment before it
        // (offset 0, 0x20ebd0 bytes, address 0) also covers: only the code's bias is right.
        let packed = Sections {
            sections: Vec::new(),
            loads: vec![(0x20ec00, 0x75edb0, 0x20fc00)],
        };
        assert_eq!(
            packed.base_avma(0x5607_7c44_0000, 0x20e000),
            Some(0x5607_7c44_0000 + 0xc00 - 0x20fc00)
        );
    }

    #[test]
    fn the_modules_of_this_process_sit_where_its_symbols_say() {
        // Registers and a stack copy come from perf (tests/stacks.rs unwinds end to end);
        // here the module built for this test binary's code mapping must put the binary's
        // addresses where they are: this function's symbol plus the module's base is this
        // function. (A base off by the read-only segment's page would not be.)
        let here =
            the_modules_of_this_process_sit_where_its_symbols_say as *const () as usize as u64;
        let maps = procfs::process::Process::myself().unwrap().maps().unwrap();
        let code = maps
            .into_iter()
            .find(|m| m.address.0 <= here && here < m.address.1)
            .unwrap();
        let exe = std::env::current_exe().unwrap();
        let sections = Sections::read(exe.to_str().unwrap()).unwrap();
        let base = sections.base_avma(code.address.0, code.offset).unwrap();
        let file = std::fs::File::open(&exe).unwrap();
        let cache = object::ReadCache::new(file);
        let elf = object::File::parse(&cache).unwrap();
        use object::ObjectSymbol;
        let symbol = elf
            .symbols()
            .find(|s| {
                // The function itself, not one of the test harness's closures around it, which
                // an incremental build may place in another codegen unit, far from it.
                s.name().is_ok_and(|n| {
                    n.contains("the_modules_of_this_process_sit_where") && !n.contains("closure")
                })
            })
            .unwrap();
        assert_eq!(base.wrapping_add(symbol.address()), here);
        let mut unwinder = UserUnwinder::default();
        let process = unwinder.read_process(std::process::id());
        assert!(
            process.code.iter().any(|r| r.contains(&here)),
            "{:?}",
            process.code
        );
    }
}
