//! The language runtimes a target runs on, told from its process, and what each needs for its
//! functions to have names in the stacks: CPython 3.12+ `-X perf` (its trampolines in a perf
//! map), Node's `--perf-basic-prof`, the JVM's perf map (asked of it with `jcmd PID
//! Compiler.perfmap` at the end of the run) and `-XX:+PreserveFramePointer`, Go's symbols.
//! A runtime found without what it needs gets one line saying how to turn it on.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest `jcmd` may take to have a JVM write its perf map.
const JCMD_TIMEOUT: Duration = Duration::from_secs(10);

/// A language runtime a process runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Runtime {
    /// CPython 3.`minor`.
    Python { minor: u32 },
    /// Node.js (V8).
    Node,
    /// A HotSpot JVM, its libjvm.so at this path.
    Jvm { libjvm: PathBuf },
    /// A Go program; `symbols`: its symbol table was kept.
    Go { symbols: bool },
}

/// The runtime process `pid` runs on, from its executable and its mappings.
pub(crate) fn detect(pid: u32) -> Option<Runtime> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let name = exe.file_name()?.to_string_lossy().into_owned();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    if let Some(minor) = python_minor(&name).or_else(|| {
        maps.split_whitespace()
            .filter_map(|p| p.rsplit('/').next()?.strip_prefix("libpython"))
            .find_map(python_minor_of_version)
    }) {
        return Some(Runtime::Python { minor });
    }
    if name == "node" || name == "nodejs" || maps.contains("/libnode.so") {
        return Some(Runtime::Node);
    }
    if let Some(libjvm) = maps.split_whitespace().find(|p| p.ends_with("/libjvm.so")) {
        return Some(Runtime::Jvm {
            libjvm: libjvm.into(),
        });
    }
    go_symbols(&format!("/proc/{pid}/exe")).map(|symbols| Runtime::Go { symbols })
}

/// `3.12` out of `python3.12` (an executable's name).
fn python_minor(name: &str) -> Option<u32> {
    python_minor_of_version(name.strip_prefix("python")?)
}

/// `12` out of `3.12`, `3.12.so.1.0`, `3.12d`.
fn python_minor_of_version(v: &str) -> Option<u32> {
    let rest = v.strip_prefix("3.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Whether the ELF file at `path` is a Go program (`None` if not), and whether it kept its
/// symbol table.
fn go_symbols(path: &str) -> Option<bool> {
    use object::Object;
    let file = std::fs::File::open(path).ok()?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    elf.section_by_name(".go.buildinfo")?;
    Some(elf.section_by_name(".symtab").is_some())
}

/// Whether the perf map of `pid` has entries whose names start with `prefix` (`py::`), or
/// any entry for an empty prefix.
fn perf_map_has(pid: u32, prefix: &str) -> bool {
    super::jit::perf_map_text(pid).is_some_and(|t| {
        t.lines().any(|l| {
            l.splitn(3, ' ')
                .nth(2)
                .is_some_and(|n| n.starts_with(prefix))
        })
    })
}

/// Asks a JVM to write its perf map (`jcmd PID Compiler.perfmap`, JDK 17+), with the `jcmd`
/// beside its libjvm.so or on PATH; says why not where it could not.
fn jvm_perf_map(pid: u32, libjvm: &Path) -> Result<(), String> {
    // .../lib/server/libjvm.so → .../bin/jcmd
    let beside = libjvm
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(|home| home.join("bin/jcmd"))
        .filter(|p| p.exists());
    let jcmd = beside.unwrap_or_else(|| PathBuf::from("jcmd"));
    let mut child = Command::new(&jcmd)
        .args([&pid.to_string(), "Compiler.perfmap"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{} could not run ({e})", jcmd.display()))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("jcmd {pid} Compiler.perfmap: {status}")),
            Ok(None) if started.elapsed() < JCMD_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "jcmd {pid} Compiler.perfmap did not finish in {} s",
                    JCMD_TIMEOUT.as_secs()
                ));
            }
        }
    }
}

/// Readies process `pid` to have its frames named (a JVM writes its perf map) and returns
/// the line saying what its runtime lacks to name them, if it lacks anything.
pub(crate) fn prepare(pid: u32) -> Option<String> {
    match detect(pid)? {
        Runtime::Python { minor } if minor < 12 => Some(format!(
            "python3.{minor}: run it with 3.12+ and -X perf to see Python functions"
        )),
        // A perf map (-X perf) or a jitdump (-X perf_jit, 3.13+): both are read.
        Runtime::Python { minor } if !perf_map_has(pid, "py::") => Some(format!(
            "python3.{minor}: run it with -X perf (or PYTHONPERFSUPPORT=1) to see Python functions"
        )),
        Runtime::Python { .. } => None,
        Runtime::Node if !perf_map_has(pid, "") => {
            Some("node: run it with --perf-basic-prof to see JavaScript functions".into())
        }
        Runtime::Node => None,
        Runtime::Jvm { libjvm } => {
            let mut lines = Vec::new();
            if let Err(e) = jvm_perf_map(pid, &libjvm) {
                lines.push(jvm_unnamed(pid, &e));
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if !String::from_utf8_lossy(&cmdline).contains("+PreserveFramePointer") {
                lines.push(
                    "java: run it with -XX:+PreserveFramePointer to see the callers of JIT-compiled methods"
                        .into(),
                );
            }
            (!lines.is_empty()).then(|| lines.join("; "))
        }
        Runtime::Go { symbols: false } => Some(
            "go: built without its symbol table (-ldflags=-s): rebuild without -s to see function names"
                .into(),
        ),
        Runtime::Go { symbols: true } => None,
    }
}

/// The line saying that a JVM's JIT-compiled methods have no names (`why`), with the perf map
/// jcmd would have had it write: named by its pid in its own PID namespace (a `--target
/// command:` JVM's is `/tmp/perf-2.map`, say, not that of its pid here), in its /tmp.
fn jvm_unnamed(pid: u32, why: &str) -> String {
    let own = super::jit::ns_pid(pid).unwrap_or(pid);
    format!(
        "java: its JIT-compiled methods have no names: {why} (jcmd of JDK 17+ writes /tmp/perf-{own}.map)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_versions_are_read_from_names() {
        assert_eq!(python_minor("python3.11"), Some(11));
        assert_eq!(python_minor("python3.13t"), Some(13));
        assert_eq!(python_minor("python3"), None);
        assert_eq!(python_minor_of_version("3.12.so.1.0"), Some(12));
        assert_eq!(python_minor("node"), None);
    }

    /// A CPython older than 3.12 gets the one line saying what to run: perf trampolines
    /// (`-X perf`) came with 3.12, so no flag of its own names its functions.
    #[test]
    fn an_older_cpython_is_told_to_run_3_12_with_x_perf() {
        let Some((minor, mut child)) = [9u32, 10, 11].into_iter().rev().find_map(|minor| {
            let child = std::process::Command::new(format!("python3.{minor}"))
                .args(["-c", "import time; time.sleep(30)"])
                .spawn()
                .ok()?;
            Some((minor, child))
        }) else {
            eprintln!("skipped: no CPython older than 3.12 here");
            return;
        };
        // Until it has exec'd (its /proc/PID/exe is python's).
        let mut note = None;
        for _ in 0..100 {
            note = prepare(child.id());
            if note.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            note.as_deref(),
            Some(
                format!("python3.{minor}: run it with 3.12+ and -X perf to see Python functions")
                    .as_str()
            )
        );
    }

    /// A JVM in a PID namespace of its own (as `--target command:` launches it) writes its
    /// perf map under its pid there: the line names that file, not its pid here.
    #[test]
    fn the_jvm_line_names_the_map_by_the_pid_in_its_namespace() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        crate::sys::contain_and_pin(&mut cmd, &[]);
        let mut child = cmd.spawn().unwrap();
        // The launched process is the namespace's outer half; its child is the namespace's
        // pid 1 (once forked).
        let mut inner = None;
        for _ in 0..100 {
            let children =
                std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
                    .unwrap_or_default();
            inner = children
                .split_whitespace()
                .find_map(|p| p.parse::<u32>().ok());
            if inner.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let ns = inner.and_then(|p| Some((p, super::super::jit::ns_pid(p)?)));
        let line = ns.map(|(pid, _)| jvm_unnamed(pid, "jcmd could not run"));
        let _ = child.kill();
        let _ = child.wait();
        let Some((pid, ns)) = ns.filter(|(pid, ns)| pid != ns) else {
            eprintln!("skipped: no PID namespace could be made here (it needs CAP_SYS_ADMIN)");
            return;
        };
        assert_eq!(ns, 1);
        assert_eq!(
            line.as_deref(),
            Some(
                "java: its JIT-compiled methods have no names: jcmd could not run (jcmd of JDK 17+ writes /tmp/perf-1.map)"
            ),
            "pid {pid}"
        );
    }

    #[test]
    fn this_test_binary_runs_on_no_runtime() {
        assert_eq!(detect(std::process::id()), None);
        assert_eq!(prepare(std::process::id()), None);
    }
}
