//! Late sends put under "the generator's thread waited for a CPU": the generator is pinned
//! (`--cpus`) to a CPU that busy loops share, so its thread spends most of the run in the
//! run queue. Alone in its test binary: the busy loops would slow every test run beside it.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use common::{engine_tests, n, ok, serve, Engine, Reply};

/// Busy loops, killed when dropped.
struct Busy(Vec<Child>);

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The CPUs this process may run on (`Cpus_allowed_list` of /proc/self/status).
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let Some(list) = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
    else {
        return Vec::new();
    };
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
            cpus.extend(a..=b);
        }
    }
    cpus
}

/// One engine at a time: each test pins its own busy loops to the same CPU.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn late_sends_of_a_generator_that_shares_its_cpu_waited_for_a_cpu(e: Engine) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let cpus = allowed_cpus();
    let Some(&cpu) = cpus.last().filter(|_| cpus.len() >= 2) else {
        common::skip(format!(
            "needs two CPUs (one for the server), this process may use {cpus:?}"
        ));
        return;
    };
    if !common::has_tool("taskset", "--version") {
        common::skip("taskset (util-linux) not installed");
        return;
    }
    let server = serve(|_| Reply::Send(ok("x")));
    let cpu = cpu.to_string();
    // Three busy loops beside the generator's thread on its CPU: it gets about a quarter of
    // it, and waits in the run queue for most of the rest.
    let busy = Busy(
        (0..3)
            .map(|_| {
                Command::new("taskset")
                    .args(["-c", &cpu, "sh", "-c", "while :; do :; done"])
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("taskset runs")
            })
            .collect(),
    );
    let (code, r, stderr) = e.run_json(
        &server.url("/"),
        &[
            "-q",
            "2000",
            "-z",
            "2s",
            "-c",
            "8",
            "--threads",
            "1",
            "--cpus",
            &cpu,
        ],
    );
    drop(busy);
    assert_eq!(code, 0, "{stderr}");
    let s = &r["summary"];
    let (requests, late) = (n(&s["requests"]), n(&s["late_sends"]));
    let by = &s["late_sends_by_cause"];
    let Some(cpu_wait) = by["waited_for_cpu"].as_u64() else {
        assert!(by["waited_for_cpu"].is_null(), "{s}");
        common::skip("the run-queue wait cannot be read here (/proc/thread-self/schedstat)");
        return;
    };
    assert_eq!(
        cpu_wait + n(&by["no_free_connection"]) + n(&by["generator"]),
        late,
        "{s}"
    );
    if late < requests / 20 {
        common::inconclusive(format!(
            "only {late} of {requests} sends late beside three busy loops on CPU {cpu}: the scheduler gave the generator its time"
        ));
        return;
    }
    assert!(
        cpu_wait * 2 >= late,
        "most late sends waited for a CPU: {s}"
    );
    // Named as the cause, or (a loop held up 100 ms or more) as the generator falling behind
    // with the causes' counts.
    let warnings = r["warnings"].to_string();
    assert!(
        (warnings.contains("most while the generator's thread waited for a CPU")
            && warnings.contains("pin the generator away from other work"))
            || (warnings.contains("the generator fell behind")
                && warnings.contains("while the generator's thread waited for a CPU")),
        "{warnings}"
    );
}

engine_tests!(late_sends_of_a_generator_that_shares_its_cpu_waited_for_a_cpu);
