//! Stacks as the kernel gave them and their names: callchains split into kernel and user
//! frames, interned once per distinct stack ([`StackTable`]), and named once at the end with
//! blazesym (the processes' ELF/DWARF through /proc/PID, the kernel through /proc/kallsyms).
//! A frame nobody can name stays as `module+0xoffset`, never dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Frames kept per callchain (the kernel's default `perf_event_max_stack` is 127).
pub(crate) const MAX_STACK: u16 = 127;

/// `PERF_CONTEXT_*` markers in a callchain are the values above this one (`(u64)-4095`).
const PERF_CONTEXT_MAX: u64 = -4095_i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128_i64 as u64;
const PERF_CONTEXT_USER: u64 = -512_i64 as u64;

/// A callchain as the kernel gave it, split at its context markers; leaf first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RawStack {
    pub(crate) pid: u32,
    pub(crate) kernel: Box<[u64]>,
    pub(crate) user: Box<[u64]>,
}

impl RawStack {
    pub(crate) fn from_callchain(pid: u32, chain: &[u64]) -> RawStack {
        let (mut kernel, mut user) = (Vec::new(), Vec::new());
        let mut into_kernel = true;
        for &ip in chain {
            if ip >= PERF_CONTEXT_MAX {
                into_kernel = match ip {
                    PERF_CONTEXT_KERNEL => true,
                    PERF_CONTEXT_USER => false,
                    // Hypervisor or guest frames: not ours to name; kept with the kernel's.
                    _ => true,
                };
                continue;
            }
            if into_kernel {
                kernel.push(ip);
            } else {
                user.push(ip);
            }
        }
        RawStack {
            pid,
            kernel: kernel.into(),
            user: user.into(),
        }
    }
}

/// One mapping of /proc/PID/maps that has a file or a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// The file offset mapped at `start`.
    pub file_offset: u64,
    /// The file's path or the mapping's name (`[heap]`, `[vdso]`); empty for anonymous memory.
    pub path: String,
}

/// Parses /proc/PID/maps.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let (start, end) = fields.next()?.split_once('-')?;
            let _perms = fields.next()?;
            let offset = fields.next()?;
            let _dev = fields.next()?;
            let _inode = fields.next()?;
            let path = fields.collect::<Vec<_>>().join(" ");
            Some(Mapping {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                file_offset: u64::from_str_radix(offset, 16).ok()?,
                path,
            })
        })
        .collect()
}

/// How an address nobody could name is shown: `module+0xoffset` (the offset in the file for
/// a file mapping, from the mapping's start otherwise), `[unknown]+0xaddress` outside every
/// mapping. Returns the frame and the module it is in.
pub fn unresolved_frame(maps: &[Mapping], addr: u64) -> (String, String) {
    match maps.iter().find(|m| m.start <= addr && addr < m.end) {
        Some(m) if m.path.starts_with('/') => {
            let module = m.path.rsplit('/').next().unwrap_or(&m.path).to_string();
            let offset = addr - m.start + m.file_offset;
            (format!("{module}+{offset:#x}"), module)
        }
        Some(m) => {
            let module = if m.path.is_empty() {
                "[anon]".to_string()
            } else {
                m.path.clone()
            };
            (format!("{module}+{:#x}", addr - m.start), module)
        }
        None => (format!("[unknown]+{addr:#x}"), "[unknown]".into()),
    }
}

/// Distinct stacks of the target's processes, each stored once, and the mappings of every
/// process when it was first seen (to show the frames of one that is gone by the end).
#[derive(Debug, Default)]
pub(crate) struct StackTable {
    interned: HashMap<RawStack, u32>,
    pub(crate) stacks: Vec<RawStack>,
    pub(crate) maps: HashMap<u32, Vec<Mapping>>,
}

impl StackTable {
    /// The id of this callchain of process `pid`.
    pub(crate) fn intern(&mut self, pid: u32, chain: &[u64]) -> u32 {
        self.intern_raw(RawStack::from_callchain(pid, chain))
    }

    /// The id of this stack (a callchain whose user part may have been unwound again).
    pub(crate) fn intern_raw(&mut self, raw: RawStack) -> u32 {
        if let Some(&id) = self.interned.get(&raw) {
            return id;
        }
        let id = self.stacks.len() as u32;
        self.stacks.push(raw.clone());
        self.interned.insert(raw, id);
        id
    }

    /// Reads the mappings of a process seen for the first time.
    pub(crate) fn note_process(&mut self, pid: u32) {
        self.maps.entry(pid).or_insert_with(|| {
            std::fs::read_to_string(format!("/proc/{pid}/maps"))
                .map(|t| parse_maps(&t))
                .unwrap_or_default()
        });
    }
}

/// The system call a stack is in, from its kernel frames: the outermost `__x64_sys_NAME`
/// (or another arch's) frame, or, where the kernel inlined it (6.x dispatches through
/// `x64_sys_call`), the frame next to the system-call entry with its `kernel_`/`ksys_`/`do_`
/// prefix taken off (`kernel_wait4` → `wait4`). `none` when the stack is not in one.
pub fn syscall_of(stack: &[String]) -> String {
    const SYS: [&str; 5] = [
        "__x64_sys_",
        "__arm64_sys_",
        "__ia32_sys_",
        "__se_sys_",
        "__do_sys_",
    ];
    let kernel: Vec<&str> = stack
        .iter()
        .filter_map(|f| f.strip_suffix("_[k]"))
        .collect();
    if let Some(name) = kernel
        .iter()
        .rev()
        .find_map(|f| SYS.iter().find_map(|p| f.strip_prefix(p)))
    {
        return name.to_string();
    }
    let is_entry = |f: &&str| {
        f.starts_with("do_syscall_")
            || f.starts_with("x64_sys_call")
            || f.starts_with("entry_SYSCALL")
            || f.starts_with("invoke_syscall")
            || f.starts_with("el0_svc")
    };
    let Some(entry) = kernel.iter().position(is_entry) else {
        return "none".into();
    };
    let Some(call) = entry.checked_sub(1).map(|i| kernel[i]) else {
        return "none".into();
    };
    ["kernel_", "ksys_", "__sys_", "do_sys_", "do_"]
        .iter()
        .find_map(|p| call.strip_prefix(p))
        .unwrap_or(call)
        .to_string()
}

/// A symbol's name with `suffix`, its file:line kept in `locations` where debug info has one.
fn sym_name(
    sym: &blazesym::symbolize::Sym<'_>,
    suffix: &str,
    locations: &mut BTreeMap<String, String>,
) -> String {
    let name = format!("{}{suffix}", sym.name);
    if let Some(code) = &sym.code_info {
        if let Some(line) = code.line {
            locations
                .entry(name.clone())
                .or_insert_with(|| format!("{}:{line}", code.to_path().display()));
        }
    }
    name
}

/// Names of each process's user addresses: by blazesym from the live process, else from
/// the JIT's perf map, else module+offset (a process that exited: from `maps`).
fn resolve_user(
    symbolizer: &blazesym::symbolize::Symbolizer,
    user_addrs: &BTreeMap<u32, BTreeSet<u64>>,
    maps: &HashMap<u32, Vec<Mapping>>,
    locations: &mut BTreeMap<String, String>,
    unnamed: &mut BTreeMap<String, u64>,
    missing: &mut Vec<String>,
) -> HashMap<(u32, u64), String> {
    use blazesym::symbolize::source::{Process, Source};
    use blazesym::symbolize::{Input, Symbolized};
    use blazesym::Pid;

    let mut resolved_user = HashMap::new();
    for (pid, addrs) in user_addrs {
        let addrs: Vec<u64> = addrs.iter().copied().collect();
        let live_maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .ok()
            .map(|t| parse_maps(&t));
        let maps = live_maps
            .as_deref()
            .or(maps.get(pid).map(Vec::as_slice))
            .unwrap_or(&[]);
        // blazesym reads no perf map: the JIT code is named by our own reading of it below,
        // which takes only a map the process wrote (blazesym's would take an earlier run's
        // under the same namespace pid) and reads the JVM's `0x` (which fails every name of
        // the process in blazesym's).
        let mut src = Process::new(Pid::from(*pid));
        src.perf_map = false;
        let symbolized = if live_maps.is_some() {
            symbolizer
                .symbolize(&Source::Process(src), Input::AbsAddr(&addrs))
                .ok()
        } else {
            missing.push(format!(
                "pid {pid} exited before the end: its frames are module+offset"
            ));
            None
        };
        let mut jit: Option<Vec<(std::ops::Range<u64>, String)>> = None;
        for (i, &addr) in addrs.iter().enumerate() {
            let name = match symbolized.as_ref().map(|s| &s[i]) {
                Some(Symbolized::Sym(sym)) => sym_name(sym, "", locations),
                _ => {
                    // JIT code the perf map names (also where blazesym could not read it).
                    let entries = jit.get_or_insert_with(|| {
                        super::jit::perf_map_text(*pid)
                            .map(|t| super::jit::perf_map_entries(&t))
                            .unwrap_or_default()
                    });
                    if let Some(name) = super::jit::name_at(entries, addr) {
                        resolved_user.insert((*pid, addr), name.to_string());
                        continue;
                    }
                    let (frame, module) = unresolved_frame(maps, addr);
                    *unnamed.entry(module).or_insert(0) += 1;
                    frame
                }
            };
            resolved_user.insert((*pid, addr), name);
        }
    }
    resolved_user
}

/// Names of the kernel addresses, from /proc/kallsyms; `[kernel]+0x...` where none.
fn resolve_kernel(
    symbolizer: &blazesym::symbolize::Symbolizer,
    kernel_addrs: BTreeSet<u64>,
    locations: &mut BTreeMap<String, String>,
    unnamed: &mut BTreeMap<String, u64>,
    missing: &mut Vec<String>,
) -> HashMap<u64, String> {
    use blazesym::symbolize::source::{Kernel, Source};
    use blazesym::symbolize::{Input, Symbolized};

    let kernel_addrs: Vec<u64> = kernel_addrs.into_iter().collect();
    let kernel_src = Source::Kernel(Kernel {
        // /proc/kallsyms only: looking for a vmlinux image costs time and is rarely there.
        vmlinux: blazesym::MaybeDefault::None,
        ..Kernel::default()
    });
    let kernel_syms = if kernel_addrs.is_empty() {
        None
    } else {
        match symbolizer.symbolize(&kernel_src, Input::AbsAddr(&kernel_addrs)) {
            Ok(s) => Some(s),
            Err(e) => {
                missing.push(format!("kernel frames without names (/proc/kallsyms: {e})"));
                None
            }
        }
    };
    let mut resolved_kernel = HashMap::new();
    for (i, &addr) in kernel_addrs.iter().enumerate() {
        let name = match kernel_syms.as_ref().map(|s| &s[i]) {
            // perf's convention, which inferno colours as kernel code.
            Some(Symbolized::Sym(sym)) => sym_name(sym, "_[k]", locations),
            _ => {
                *unnamed.entry("[kernel]".into()).or_insert(0) += 1;
                format!("[kernel]+{addr:#x}")
            }
        };
        resolved_kernel.insert(addr, name);
    }
    resolved_kernel
}

/// Names of every address of the sampled stacks, resolved once.
pub(crate) struct Names {
    user: HashMap<(u32, u64), String>,
    kernel: HashMap<u64, String>,
    /// file:line of a function, where debug info had one.
    pub(crate) locations: BTreeMap<String, String>,
}

impl Names {
    pub(crate) fn resolve<'a>(
        stacks: impl IntoIterator<Item = &'a RawStack>,
        maps: &HashMap<u32, Vec<Mapping>>,
        missing: &mut Vec<String>,
    ) -> Names {
        Names::resolve_with(
            &blazesym::symbolize::Symbolizer::new(),
            stacks,
            maps,
            missing,
        )
    }

    /// [`Names::resolve`] with a `symbolizer` kept between calls: it caches the files it
    /// parsed (the live view names a few new frames a second with one).
    pub(crate) fn resolve_with<'a>(
        symbolizer: &blazesym::symbolize::Symbolizer,
        stacks: impl IntoIterator<Item = &'a RawStack>,
        maps: &HashMap<u32, Vec<Mapping>>,
        missing: &mut Vec<String>,
    ) -> Names {
        let mut user_addrs: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
        let mut kernel_addrs = BTreeSet::new();
        for raw in stacks {
            user_addrs
                .entry(raw.pid)
                .or_default()
                .extend(raw.user.iter().copied());
            kernel_addrs.extend(raw.kernel.iter().copied());
        }
        let mut locations = BTreeMap::new();
        // Frames without a name, per module: what the `missing` notes say.
        let mut unnamed: BTreeMap<String, u64> = BTreeMap::new();
        let user = resolve_user(
            symbolizer,
            &user_addrs,
            maps,
            &mut locations,
            &mut unnamed,
            missing,
        );
        let kernel = resolve_kernel(
            symbolizer,
            kernel_addrs,
            &mut locations,
            &mut unnamed,
            missing,
        );
        for (module, n) in unnamed {
            missing.push(format!(
                "{n} distinct addresses in {module} have no symbol (stripped, or not a file): shown as {module}+0xoffset"
            ));
        }
        Names {
            user,
            kernel,
            locations,
        }
    }

    /// The frames of a stack, leaf first: kernel frames, then user frames.
    pub(crate) fn frames(&self, raw: &RawStack) -> Vec<String> {
        let kernel = raw.kernel.iter().map(|a| {
            self.kernel
                .get(a)
                .cloned()
                .unwrap_or_else(|| format!("[kernel]+{a:#x}"))
        });
        let user = raw.user.iter().map(|a| {
            self.user
                .get(&(raw.pid, *a))
                .cloned()
                .unwrap_or_else(|| format!("[unknown]+{a:#x}"))
        });
        kernel.chain(user).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callchains_split_at_their_context_markers() {
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_0001,
            0xffff_0002,
            PERF_CONTEXT_USER,
            0x10,
            0x20,
        ];
        let raw = RawStack::from_callchain(7, &chain);
        assert_eq!(&*raw.kernel, &[0xffff_0001, 0xffff_0002]);
        assert_eq!(&*raw.user, &[0x10, 0x20]);
        let user_only = RawStack::from_callchain(7, &[PERF_CONTEXT_USER, 0x30]);
        assert!(user_only.kernel.is_empty());
        assert_eq!(&*user_only.user, &[0x30]);
    }

    #[test]
    fn unnamed_addresses_are_module_plus_offset() {
        let maps = parse_maps(
            "55d0a0000000-55d0a0010000 r-xp 00002000 08:01 1234 /usr/bin/my server\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n",
        );
        assert_eq!(maps.len(), 3);
        assert_eq!(
            unresolved_frame(&maps, 0x55d0a0000010),
            ("my server+0x2010".to_string(), "my server".to_string())
        );
        assert_eq!(unresolved_frame(&maps, 0x7f0000000040).0, "[anon]+0x40");
        assert_eq!(unresolved_frame(&maps, 0x7ffd00000008).0, "[vdso]+0x8");
        assert_eq!(unresolved_frame(&maps, 0x42).0, "[unknown]+0x42");
    }

    #[test]
    fn an_address_in_no_mapping_is_kept_and_noted() {
        // This process's own pid, an address no mapping covers: blazesym cannot name it, the
        // frame stays (as [unknown]+0x...) and the notes say why.
        let pid = std::process::id();
        let raw = RawStack {
            pid,
            kernel: Box::new([]),
            user: Box::new([0x1000]),
        };
        let mut missing = Vec::new();
        let maps = HashMap::from([(pid, Vec::new())]);
        let names = Names::resolve(std::slice::from_ref(&raw), &maps, &mut missing);
        assert_eq!(names.frames(&raw), vec!["[unknown]+0x1000".to_string()]);
        assert!(
            missing.iter().any(|m| m.contains("[unknown]")),
            "{missing:?}"
        );
    }

    #[test]
    fn a_function_of_this_binary_is_named() {
        let pid = std::process::id();
        let addr = a_function_of_this_binary_is_named as *const () as usize as u64;
        let raw = RawStack {
            pid,
            kernel: Box::new([]),
            user: Box::new([addr]),
        };
        let mut missing = Vec::new();
        let names = Names::resolve(std::slice::from_ref(&raw), &HashMap::new(), &mut missing);
        let frame = &names.frames(&raw)[0];
        assert!(
            frame.contains("a_function_of_this_binary_is_named"),
            "{frame}"
        );
    }

    #[test]
    fn the_syscall_is_the_outermost_sys_frame() {
        let stack: Vec<String> = [
            "__schedule_[k]",
            "futex_wait_[k]",
            "__x64_sys_futex_[k]",
            "do_syscall_64_[k]",
            "syscall",
            "main",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(syscall_of(&stack), "futex");
        assert_eq!(syscall_of(&stack[4..]), "none");
        let inlined: Vec<String> = [
            "__schedule_[k]",
            "do_wait_[k]",
            "kernel_wait4_[k]",
            "do_syscall_64_[k]",
            "entry_SYSCALL_64_after_hwframe_[k]",
            "__GI___wait4",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(syscall_of(&inlined), "wait4");
    }
}
