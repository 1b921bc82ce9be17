//! What a `server_stall` was, read from the server's stacks in the slow seconds: a runtime's
//! garbage collector (`gc_pause`), lock waits (`lock_contention`), waits for the disk
//! (`blocking_io`) or one hot function (`cpu_burn`). Each refines the stall it explains, with
//! its own evidence, and is named only beside a stall (a healthy run names none), only from
//! what stood out in the slow seconds against the others, never from what was merely there.

use tailscope_targets::stacks::{BlockedOverRepresented, Inside, OverRepresented, Standout};

use crate::{Cause, Diagnosis};

/// What the stacks showed in the slow seconds, as the rules read it (built from an
/// [`Inside`], or by hand in the tests).
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The on-CPU frames over-represented in the slow seconds, most first.
    pub(crate) on_cpu: Vec<OverRepresented>,
    /// The off-CPU waits over-represented in the slow seconds, most first.
    pub(crate) off_cpu: Vec<BlockedOverRepresented>,
    /// The frame or wait that stands out most is a frame on CPU.
    pub(crate) running_stands_out: bool,
    /// The samples with a collector's frame on their stack, where clearly more of the slow
    /// seconds' than of the others'.
    pub(crate) collector: Option<OverRepresented>,
    /// Go's frames that stop its goroutines for the collector ([`go_stops`]) seen in the
    /// slow seconds, on CPU or off it, most time first.
    pub(crate) go_stops: Vec<String>,
}

impl Seen {
    /// What `inside` saw.
    pub(crate) fn of(inside: &Inside) -> Seen {
        let report = &inside.report;
        Seen {
            on_cpu: report.on_cpu.over_represented.clone(),
            off_cpu: report.off_cpu_over_represented.clone(),
            running_stands_out: matches!(report.standout(), Some(Standout::Running(_))),
            collector: inside.on_cpu_share(|f| collector_of(f).is_some()),
            go_stops: inside.seen_in_slow(go_stops),
        }
    }
}

/// The runtime whose garbage collector `frame` belongs to, if it is one of a collector's:
/// V8's (Node), Go's (its mark workers and assists, stop-the-world), HotSpot's (the JVM's
/// collectors and safepoints) or CPython's cyclic collector.
pub(crate) fn collector_of(frame: &str) -> Option<&'static str> {
    if frame.ends_with("_[k]") {
        return None;
    }
    if let Some(f) = frame.strip_prefix("v8::internal::") {
        const V8: [&str; 10] = [
            "Heap::CollectGarbage",
            "Heap::CollectAllGarbage",
            "Heap::PerformGarbageCollection",
            "GCExtension",
            "Collector",
            "Marking",
            "Scaveng",
            "Sweeper",
            "Evacuat",
            "GCTracer",
        ];
        return V8.iter().any(|p| f.contains(p)).then_some("V8");
    }
    if let Some(f) = frame.strip_prefix("runtime.") {
        // The wrapper a `go` statement starts a goroutine through (gcBgMarkStartWorkers'
        // gowrap1) sits under every mark worker's stack: chosen as the evidence's frame, it
        // named the starter of the workers instead of the workers.
        if f.contains(".gowrap") {
            return None;
        }
        const GO: [&str; 14] = [
            "gc",
            "GC",
            "markroot",
            "scanobject",
            "scanblock",
            "scanframe",
            "scanstack",
            "greyobject",
            "stopTheWorld",
            "bgsweep",
            "sweepone",
            "(*gcWork)",
            "(*mspan).sweep",
            "(*gcControllerState)",
        ];
        return GO.iter().any(|p| f.starts_with(p)).then_some("Go");
    }
    // HotSpot's C++ frames (JIT-compiled Java and perf-map names have no `::`).
    const HOTSPOT: [&str; 19] = [
        "CollectedHeap",
        "G1",
        "VM_GC",
        "VM_G1",
        "VM_Gen",
        "VM_Parallel",
        "GCTask",
        "PSScavenge",
        "PSParallelCompact",
        "MarkSweep",
        "SafepointSynchronize",
        "Shenandoah",
        "ZDriver",
        "ZHeap",
        "DefNewGeneration",
        "TenuredGeneration",
        "ParallelScavengeHeap",
        "Generation",
        "CompactibleSpace",
    ];
    let class = frame.split_once("::").map(|(c, _)| c);
    if class.is_some_and(|c| HOTSPOT.iter().any(|p| c.contains(p) && !c.contains(' '))) {
        return Some("the JVM");
    }
    const CPYTHON: [&str; 5] = [
        "gc_collect",
        "_PyGC_Collect",
        "collect_with_callback",
        "deduce_unreachable",
        "PyGC_Collect",
    ];
    CPYTHON
        .iter()
        .any(|p| frame.starts_with(p))
        .then_some("CPython")
}

/// Whether `frame` is one of Go's that stop the program's goroutines for its collector: the
/// world stopped (a cycle's start, its mark termination), a goroutine made to assist the
/// marking as it allocates, or one blocked in a forced collection (`runtime.GC()`). Go marks
/// concurrently: its mark workers on CPU beside running goroutines stop nothing, and read
/// alone they named a pause wherever a cycle ran in the slow seconds.
pub(crate) fn go_stops(frame: &str) -> bool {
    const STOPS: [&str; 6] = [
        "gcStart",
        "gcMarkDone",
        "gcMarkTermination",
        "gcAssistAlloc",
        "gcParkAssist",
        "gcWaitOnMark",
    ];
    frame.strip_prefix("runtime.").is_some_and(|f| {
        // stopTheWorld, stopTheWorldWithSema, stopTheWorldGC; the others, their closures
        // (gcMarkTermination.func1) and numbered halves (gcAssistAlloc1).
        f == "GC"
            || f.starts_with("stopTheWorld")
            || STOPS.iter().any(|p| {
                f.strip_prefix(p)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '1']))
            })
    })
}

/// What to do about a collector's pauses, per runtime.
fn collector_advice(runtime: &str) -> &'static str {
    match runtime {
        "V8" => "a full collection of a large live heap (global.gc(), or a heap near --max-old-space-size): keep less alive, or watch --trace-gc",
        "Go" => "the collector marked a large pointer graph (runtime.GC(), or GOGC's pace): fewer pointers, or a higher GOGC/GOMEMLIMIT; GODEBUG=gctrace=1 shows each cycle",
        "the JVM" => "a stop-the-world collection (System.gc(), a full GC of a big heap): -Xlog:gc shows each pause",
        _ => "the cyclic collector walked many objects: gc.freeze() after start-up, or gc.set_threshold()",
    }
}

/// The causes that explain `stall` (a `server_stall`) from what the stacks saw in the slow
/// seconds, most specific first: each with the stall's window, requests and inside line.
pub(crate) fn refine(stall: &Diagnosis, seen: &Seen) -> Vec<Diagnosis> {
    let gc = gc_pause(seen);
    // A collection stops the other threads at a safepoint or a lock of its own, and its
    // frames are no hot function of the server's: with one, neither is asked.
    let collector = gc.is_some();
    let others = |cause: fn(&Seen) -> Option<(Cause, String)>| {
        if collector {
            None
        } else {
            cause(seen)
        }
    };
    [
        gc,
        blocking_io(seen),
        others(lock_contention),
        others(cpu_burn),
    ]
    .into_iter()
    .flatten()
    .map(|(cause, evidence)| Diagnosis {
        cause,
        evidence,
        ..stall.clone()
    })
    .collect()
}

/// A garbage collection's pause: the collector on the server's on-CPU stacks in the slow
/// seconds, or threads stopped where the collector stops them.
fn gc_pause(seen: &Seen) -> Option<(Cause, String)> {
    // Go's collector is a pause only where it stopped goroutines (its evidence says how).
    let stops = || {
        (!seen.go_stops.is_empty()).then(|| {
            seen.go_stops
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        })
    };
    let stopped_go = |runtime: &str| runtime != "Go" || !seen.go_stops.is_empty();
    let on_cpu = seen.collector.as_ref().and_then(|c| {
        let runtime = collector_of(&c.frame)?;
        stopped_go(runtime).then_some((c, runtime))
    });
    // Threads stopped for a collection wait where the collector stops them (HotSpot's
    // SafepointSynchronize::block): a stop-the-world pause seen from the threads it stopped.
    let stopped = seen.off_cpu.iter().find_map(|w| {
        let frame = w.blocked.stack.iter().find(|f| collector_of(f).is_some())?;
        let runtime = collector_of(frame)?;
        stopped_go(runtime).then_some((w, frame, runtime))
    });
    if let Some((c, runtime)) = on_cpu {
        return Some((
            Cause::GcPause,
            format!(
                "{:.0} % of the server's on-CPU samples in the slow seconds had {runtime}'s garbage collector on their stack \
                 ({}{}) against {:.1} % in the other seconds{}: the stall was a collection, {}",
                c.slow_share * 100.0,
                c.frame,
                c.location.as_ref().map_or(String::new(), |l| format!(" at {l}")),
                c.normal_share * 100.0,
                go_stopped(runtime, stops()),
                collector_advice(runtime)
            ),
        ));
    } else if let Some((w, frame, runtime)) = stopped {
        return Some((
            Cause::GcPause,
            format!(
                "thread {} was stopped by {runtime}'s garbage collector ({frame}) {:.0} % of its time in the slow seconds \
                 against {:.1} % in the others{}: the stall was a stop-the-world pause, {}",
                w.blocked.thread,
                w.slow_share * 100.0,
                w.normal_share * 100.0,
                go_stopped(runtime, stops()),
                collector_advice(runtime)
            ),
        ));
    }
    None
}

/// Blocking file I/O: a serving thread waiting for the disk in the slow seconds.
fn blocking_io(seen: &Seen) -> Option<(Cause, String)> {
    let w = seen.off_cpu.iter().find(|w| is_disk_wait(w))?;
    Some((
        Cause::BlockingIo,
        format!(
            "thread {} waited for the disk ({}) {} {:.0} % of its time in the slow seconds against {:.1} % in the \
             others: the stall was blocking file I/O on a serving thread (move it off the request path, or to a thread pool)",
            w.blocked.thread,
            w.blocked.state,
            w.blocked.place(),
            w.slow_share * 100.0,
            w.normal_share * 100.0
        ),
    ))
}

/// Lock contention: threads waiting on a futex in the slow seconds (asked only when no
/// collection explains the stall).
fn lock_contention(seen: &Seen) -> Option<(Cause, String)> {
    let futex: Vec<&BlockedOverRepresented> = seen
        .off_cpu
        .iter()
        .filter(|w| w.blocked.syscall == "futex" && !idle_park(&w.blocked.stack))
        .collect();
    if let Some(first) = futex.first() {
        let threads: usize = futex.iter().map(|w| w.threads.max(1)).sum();
        return Some((
            Cause::LockContention,
            format!(
                "{threads} thread(s) waited on a lock (futex) in the slow seconds: thread {} {} {:.0} % of its time against \
                 {:.1} % in the others: the stall was lock contention (shorten what is done under the lock, or split it)",
                first.blocked.thread,
                first.blocked.place(),
                first.slow_share * 100.0,
                first.normal_share * 100.0
            ),
        ));
    }
    None
}

/// A function burning the CPU: the hottest frame of the server's own code standing out in
/// the slow seconds (asked only when no collection explains the stall).
fn cpu_burn(seen: &Seen) -> Option<(Cause, String)> {
    // The hottest frame of the user's code: kernel frames say where, not whose. A frame
    // that stands out only by spinning for a kernel lock burned no CPU on work of its own:
    // it waited for another CPU to let the lock go.
    let working = || seen.on_cpu.iter().filter(|o| o.lock_wait.is_none());
    let hot = working()
        .find(|o| !o.frame.ends_with("_[k]"))
        .or(working().next());
    // A collector's own frame is no hot function of the server's (Go's mark workers, where
    // nothing says they stopped a goroutine).
    let hot = hot.filter(|o| collector_of(&o.frame).is_none());
    if let (true, Some(o)) = (seen.running_stands_out, hot) {
        return Some((
            Cause::CpuBurn,
            format!(
                "{:.0} % of the server's on-CPU samples in the slow seconds were in {}{} against {:.1} % in the other \
                 seconds: the stall was this function burning the CPU ({} samples)",
                o.slow_share * 100.0,
                o.frame,
                o.location.as_ref().map_or(String::new(), |l| format!(" at {l}")),
                o.normal_share * 100.0,
                o.slow_samples
            ),
        ));
    }
    None
}

/// What Go's collector did to the goroutines, said after its share (nothing for the others).
fn go_stopped(runtime: &str, stops: Option<String>) -> String {
    match (runtime, stops) {
        ("Go", Some(frames)) => format!(
            ", and stopped goroutines for it in those seconds (stop-the-world or mark assist: {frames})"
        ),
        _ => String::new(),
    }
}

/// A runtime's thread with no work, parked on a futex: Go's idle Ms (`runtime.stopm`; a
/// goroutine waiting for a sync.Mutex parks the goroutine, not its thread), libuv's idle
/// pool threads. A healthy Go server's idle Ms read as lock contention in a noisy second.
fn idle_park(stack: &[String]) -> bool {
    const IDLE: [&str; 6] = [
        "runtime.stopm",
        "runtime.mPark",
        "runtime.stoplockedm",
        "runtime.templateThread",
        "uv_cond_wait",
        "uv_sem_wait",
    ];
    stack.iter().any(|f| IDLE.contains(&f.as_str()))
}

/// A wait for the disk: a sync call, or a file read or write in uninterruptible sleep.
fn is_disk_wait(w: &BlockedOverRepresented) -> bool {
    const SYNC: [&str; 6] = [
        "fsync",
        "fdatasync",
        "sync_file_range",
        "msync",
        "syncfs",
        "sync",
    ];
    const FILE: [&str; 11] = [
        "read",
        "pread64",
        "readv",
        "preadv",
        "preadv2",
        "write",
        "pwrite64",
        "writev",
        "pwritev",
        "openat",
        "io_getevents",
    ];
    let call = w.blocked.syscall.as_str();
    SYNC.contains(&call) || (w.blocked.state == "D" && FILE.contains(&call))
}

#[cfg(test)]
mod tests {
    use tailscope_targets::stacks::Blocked;

    use super::*;

    fn stall() -> Diagnosis {
        Diagnosis {
            cause: Cause::ServerStall,
            evidence: "held together".into(),
            requests_affected: 40,
            window: None,
            inside: Some("inside".into()),
            requests: Vec::new(),
        }
    }

    fn frame(name: &str, slow: f64, normal: f64) -> OverRepresented {
        OverRepresented {
            frame: name.into(),
            location: None,
            slow_share: slow,
            normal_share: normal,
            slow_samples: 60,
            lock_wait: None,
        }
    }

    fn wait(syscall: &str, state: &str, threads: usize) -> BlockedOverRepresented {
        BlockedOverRepresented {
            blocked: Blocked {
                thread: "srv".into(),
                state: state.into(),
                syscall: syscall.into(),
                stack: vec![format!("__x64_sys_{syscall}_[k]"), "handle".into()],
            },
            slow_share: 0.6,
            normal_share: 0.01,
            slow_wall_us: 900_000,
            threads,
        }
    }

    fn causes(seen: &Seen) -> Vec<Cause> {
        refine(&stall(), seen).iter().map(|d| d.cause).collect()
    }

    #[test]
    fn collectors_are_told_by_their_frames() {
        for (frame, runtime) in [
            ("v8::internal::Heap::CollectGarbage", "V8"),
            ("v8::internal::MarkCompactCollector::MarkLiveObjects", "V8"),
            ("runtime.gcBgMarkWorker", "Go"),
            ("runtime.scanobject", "Go"),
            ("runtime.stopTheWorldWithSema", "Go"),
            ("G1CollectedHeap::do_full_collection(bool, bool)", "the JVM"),
            ("SafepointSynchronize::begin()", "the JVM"),
            // Serial GC, the JVM's choice on one CPU.
            ("GenCollectedHeap::do_collection(bool, bool)", "the JVM"),
            ("GenMarkSweep::mark_sweep_phase3()", "the JVM"),
            ("VM_G1CollectFull::doit()", "the JVM"),
            ("gc_collect_main", "CPython"),
        ] {
            assert_eq!(collector_of(frame), Some(runtime), "{frame}");
        }
        // Near misses: allocation, a user's function named like one, JIT code, the kernel.
        for frame in [
            "v8::internal::Heap::AllocateRaw",
            "runtime.mallocgc",
            "main.gcLike",
            "py::gc_collect_main:/srv/app.py",
            "G1Visitor",
            "gc_collect_[k]",
            "runtime.gcBgMarkStartWorkers.gowrap1",
        ] {
            assert_eq!(collector_of(frame), None, "{frame}");
        }
    }

    #[test]
    fn a_collection_is_named_before_the_waits_it_causes() {
        let seen = Seen {
            on_cpu: vec![frame("v8::internal::MarkCompactCollector::Sweep", 0.5, 0.0)],
            off_cpu: vec![wait("futex", "S", 4)],
            running_stands_out: true,
            collector: Some(frame("v8::internal::Heap::CollectGarbage", 0.7, 0.02)),
            ..Seen::default()
        };
        let named = refine(&stall(), &seen);
        assert_eq!(named.len(), 1, "{named:?}");
        assert_eq!(named[0].cause, Cause::GcPause);
        assert!(
            named[0].evidence.contains("V8's garbage collector")
                && named[0]
                    .evidence
                    .contains("v8::internal::Heap::CollectGarbage"),
            "{}",
            named[0].evidence
        );
        // The stall's window, requests and inside line go with it.
        assert_eq!(named[0].requests_affected, 40);
        assert_eq!(named[0].inside.as_deref(), Some("inside"));
    }

    #[test]
    fn gos_collector_is_a_pause_only_where_it_stopped_goroutines() {
        for frame in [
            "runtime.stopTheWorldWithSema",
            "runtime.gcStart",
            "runtime.gcMarkTermination.func1",
            "runtime.gcAssistAlloc1",
            "runtime.gcParkAssist",
            "runtime.GC",
        ] {
            assert!(go_stops(frame), "{frame}");
        }
        for frame in [
            "runtime.gcBgMarkWorker",
            "runtime.gcDrain",
            "runtime.GCstats",
            "runtime.gcStartX",
            "main.GC",
            "runtime.mallocgc",
        ] {
            assert!(!go_stops(frame), "{frame}");
        }
        // Its mark workers stood out in the slow seconds, and nothing stopped: a cycle ran
        // beside the goroutines. No pause, and no cpu_burn of the collector's own frames.
        let concurrent = Seen {
            on_cpu: vec![
                frame("runtime.gcDrain", 0.44, 0.0),
                frame("runtime.gcBgMarkWorker", 0.44, 0.0),
            ],
            running_stands_out: true,
            collector: Some(frame("runtime.gcBgMarkWorker", 0.45, 0.0)),
            ..Seen::default()
        };
        assert!(
            causes(&concurrent).is_empty(),
            "{:?}",
            refine(&stall(), &concurrent)
        );
        // The same with the world stopped (or goroutines made to assist) in those seconds.
        let stopped = Seen {
            go_stops: vec!["runtime.gcMarkTermination".into(), "runtime.GC".into()],
            ..concurrent
        };
        let named = refine(&stall(), &stopped);
        assert_eq!(causes(&stopped), [Cause::GcPause], "{named:?}");
        assert!(
            named[0].evidence.contains("Go's garbage collector")
                && named[0]
                    .evidence
                    .contains("mark assist: runtime.gcMarkTermination, runtime.GC"),
            "{}",
            named[0].evidence
        );
        // Other runtimes' collectors need no such frame.
        let v8 = Seen {
            collector: Some(frame("v8::internal::Heap::CollectGarbage", 0.5, 0.0)),
            ..Seen::default()
        };
        assert_eq!(causes(&v8), [Cause::GcPause]);
    }

    #[test]
    fn threads_stopped_at_a_safepoint_are_a_collection_not_a_lock() {
        let mut stopped = wait("futex", "S", 1);
        stopped.blocked.stack = [
            "__x64_sys_futex_[k]",
            "syscall",
            "SafepointSynchronize::block(JavaThread*)",
            "ServiceThread::service_thread_entry(JavaThread*, JavaThread*)",
        ]
        .map(String::from)
        .to_vec();
        let seen = Seen {
            off_cpu: vec![wait("futex", "S", 1), stopped],
            ..Seen::default()
        };
        let named = refine(&stall(), &seen);
        assert_eq!(causes(&seen), [Cause::GcPause], "{named:?}");
        assert!(
            named[0].evidence.contains("SafepointSynchronize::block"),
            "{}",
            named[0].evidence
        );
    }

    #[test]
    fn a_hot_function_is_named_as_a_cpu_burn() {
        let seen = Seen {
            on_cpu: vec![
                frame("clear_page_erms_[k]", 0.6, 0.1),
                frame("py::burn_cpu_for:/srv/app.py", 0.55, 0.0),
            ],
            running_stands_out: true,
            ..Seen::default()
        };
        let named = refine(&stall(), &seen);
        assert_eq!(causes(&seen), [Cause::CpuBurn]);
        assert!(
            named[0].evidence.contains("in py::burn_cpu_for"),
            "{named:?}"
        );
        // Where a wait stood out more, the frames on CPU are not the stall.
        let waited = Seen {
            running_stands_out: false,
            ..seen
        };
        assert!(causes(&waited).is_empty());
    }

    /// A stall whose on-CPU excess is the server spinning for a kernel lock another CPU held
    /// names no hot function: the spin's frames, the server's own included, waited.
    #[test]
    fn spinning_for_a_kernel_lock_is_no_cpu_burn() {
        let spin = |name: &str, slow, normal| OverRepresented {
            lock_wait: Some("lock_sock_nested_[k]".into()),
            ..frame(name, slow, normal)
        };
        let seen = Seen {
            on_cpu: vec![
                spin("__pv_queued_spin_lock_slowpath_[k]", 0.39, 0.11),
                spin("serve_connection", 0.45, 0.2),
            ],
            running_stands_out: true,
            ..Seen::default()
        };
        assert!(causes(&seen).is_empty());
        // The near miss: a function of the server's that stands out by its own work beside
        // the spin is still named.
        let mut burning = seen;
        burning
            .on_cpu
            .push(frame("py::burn_cpu_for:/srv/app.py", 0.3, 0.0));
        let named = refine(&stall(), &burning);
        assert_eq!(causes(&burning), [Cause::CpuBurn]);
        assert!(
            named[0].evidence.contains("in py::burn_cpu_for"),
            "{named:?}"
        );
    }

    #[test]
    fn waits_are_named_by_what_they_waited_for() {
        let lock = Seen {
            off_cpu: vec![wait("futex", "S", 3)],
            ..Seen::default()
        };
        let named = refine(&stall(), &lock);
        assert_eq!(named[0].cause, Cause::LockContention);
        assert!(named[0].evidence.starts_with("3 thread(s)"), "{named:?}");
        // A Go runtime thread with nothing to run parks on a futex too: not a lock.
        let mut idle = wait("futex", "S", 2);
        idle.blocked.stack = [
            "__x64_sys_futex_[k]",
            "runtime.futex",
            "runtime.notesleep",
            "runtime.stopm",
        ]
        .map(String::from)
        .to_vec();
        let parked = Seen {
            off_cpu: vec![idle],
            ..Seen::default()
        };
        assert!(causes(&parked).is_empty());
        let disk = Seen {
            off_cpu: vec![wait("fsync", "D", 1)],
            ..Seen::default()
        };
        assert_eq!(causes(&disk), [Cause::BlockingIo]);
        // A socket read asleep is a server waiting for its clients, not for the disk.
        let idle = Seen {
            off_cpu: vec![wait("read", "S", 1)],
            ..Seen::default()
        };
        assert!(causes(&idle).is_empty());
        // Nothing stood out: nothing named.
        assert!(causes(&Seen::default()).is_empty());
    }
}
