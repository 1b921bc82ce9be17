//! On-CPU stacks and off-CPU time end to end: the reference server burning CPU in a named
//! function in bursts is caught by name in the slow seconds, and one stalling its loop by its
//! blocking call; a healthy one has nothing claimed; a stripped program's frames stay as
//! module+offset. Each test skips, saying so, where perf sampling of
//! every process is not allowed (not root and kernel.perf_event_paranoid > 0) or io_uring is
//! unavailable.

mod common;

use std::process::Child;

use common::{n, run_json};
use tailscope_targets::stacks::{sampling_allowed, StackSampler, DEFAULT_FREQUENCY_HZ};

/// The sampled runs take turns: two at once would share the server's CPU.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn may_sample() -> bool {
    match sampling_allowed() {
        Ok(()) => true,
        Err(e) => {
            common::skip(format!("perf sampling not allowed here: {e}"));
            false
        }
    }
}

/// `tailscope serve` on CPU 0 with these flags; killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(flags: &[&str]) -> Option<Server> {
        let mut all = vec!["--cpus", "0"];
        all.extend_from_slice(flags);
        common::spawn_serve(&all).map(|(child, addr)| Server {
            child,
            url: format!("http://{addr}/plaintext"),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Loads `server` for 7 s with the stacks on; the report's `stacks` section.
fn sampled_run(server: &Server, extra: &[&str]) -> serde_json::Value {
    let pid = server.child.id().to_string();
    let mut args = vec![
        "-z", "7s", "-c", "20", "--cpus", "1", "--pid", &pid, "--stacks", "on",
    ];
    args.extend_from_slice(extra);
    let (code, report, stderr) = run_json(&server.url, &args);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("Server inside"), "{stderr}");
    report["stacks"].clone()
}

fn frames(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|o| o["frame"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_cpu_burn_is_named_as_the_top_over_represented_frame_of_the_slow_seconds() {
    let _turn = serial();
    if !may_sample() {
        return;
    }
    let Some(server) = Server::start(&["--burn-every", "2s", "--burn-for", "300ms"]) else {
        return;
    };
    let svg = std::env::temp_dir().join(format!("tailscope-stacks-{}.svg", std::process::id()));
    let stacks = sampled_run(&server, &["--flamegraph", svg.to_str().unwrap()]);
    assert_eq!(stacks["sampler"], "cpu-clock");
    assert!(n(&stacks["samples"]) > 0, "{stacks}");
    assert!(
        !stacks["slow_seconds"].as_array().unwrap().is_empty(),
        "{stacks}"
    );
    let over = frames(&stacks["over_represented"]);
    assert!(
        over.first()
            .is_some_and(|f| f.contains("burn_cpu_on_purpose")),
        "{over:?}\n{stacks:#}"
    );
    let top = &stacks["over_represented"][0];
    assert!(top["slow_share"].as_f64().unwrap() > top["normal_share"].as_f64().unwrap());
    let picture = std::fs::read_to_string(&svg).unwrap();
    let _ = std::fs::remove_file(&svg);
    assert!(picture.starts_with("<?xml"), "not an SVG");
    assert!(
        picture.contains("burn_cpu_on_purpose"),
        "the flame graph lacks the burn"
    );
}

#[test]
fn a_stall_is_named_as_the_blocking_call_of_the_slow_seconds() {
    let _turn = serial();
    if !may_sample() {
        return;
    }
    // --stall-every sleeps on the event loop: off CPU, in clock_nanosleep.
    let Some(server) = Server::start(&["--stall-every", "2s", "--stall-for", "300ms"]) else {
        return;
    };
    let stacks = sampled_run(&server, &[]);
    let over = stacks["off_cpu_over_represented"].as_array().unwrap();
    let top = over
        .first()
        .unwrap_or_else(|| panic!("nothing claimed: {stacks:#}"));
    assert!(
        ["clock_nanosleep", "nanosleep"].contains(&top["syscall"].as_str().unwrap()),
        "{stacks:#}"
    );
    assert_eq!(top["state"], "S");
    assert!(top["slow_share"].as_f64().unwrap() > top["normal_share"].as_f64().unwrap());
}

#[test]
fn a_healthy_server_has_nothing_claimed() {
    // The near miss: the same server and load, no burn. Whatever seconds the machine's noise
    // makes slow, no frame is claimed for them.
    let _turn = serial();
    if !may_sample() {
        return;
    }
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stacks = sampled_run(&server, &[]);
    assert!(n(&stacks["samples"]) > 0, "{stacks}");
    let over = frames(&stacks["over_represented"]);
    assert!(
        over.is_empty(),
        "claimed in a healthy run: {over:?}\n{stacks:#}"
    );
    let blocked = stacks["off_cpu_over_represented"].as_array().unwrap();
    assert!(blocked.is_empty(), "claimed in a healthy run: {blocked:?}");
    let on_cpu = stacks["on_cpu"].as_array().unwrap();
    assert!(!on_cpu.is_empty());
    assert!(
        !on_cpu
            .iter()
            .flat_map(|s| s["stack"].as_array().unwrap())
            .any(|f| f.as_str().unwrap().contains("burn_cpu_on_purpose")),
        "no burn without --burn-every"
    );
}

#[test]
fn a_stripped_program_shows_module_plus_offset_and_says_so() {
    let _turn = serial();
    if !may_sample() {
        return;
    }
    // Debian's /bin/sh (dash) is stripped: its own functions have no symbol to find.
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let module = sh.file_name().unwrap().to_str().unwrap().to_string();
    let mut busy = std::process::Command::new(&sh)
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let mut sampler = StackSampler::open(DEFAULT_FREQUENCY_HZ).unwrap();
    sampler.begin(tailscope_targets::stacks::monotonic_ns());
    for _ in 0..15 {
        sampler.set_pids(&[busy.id()]);
        std::thread::sleep(std::time::Duration::from_millis(100));
        sampler.drain();
    }
    let on_cpu = sampler.finish();
    let _ = busy.kill();
    let _ = busy.wait();
    assert!(on_cpu.samples > 0, "the busy loop was never on a CPU");
    let prefix = format!("{module}+0x");
    assert!(
        on_cpu
            .stacks
            .iter()
            .flatten()
            .any(|f| f.starts_with(&prefix)),
        "no {prefix}… frame in {:?}",
        on_cpu.stacks
    );
    assert!(
        on_cpu
            .missing
            .iter()
            .any(|m| m.contains(&module) && m.contains("no symbol")),
        "{:?}",
        on_cpu.missing
    );
}
