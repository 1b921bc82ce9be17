//! Many connections from one generator host: source addresses (`--source-addrs`), a bounded
//! connect rate (`--connect-rate`), and a run of tens of thousands of loopback connections.

#[path = "../common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{engine_tests, n, Engine};

/// Idle and slow connections held open beside the load (`--idle-conns`, `--slow-conns`).
mod held;

/// Many connections closing at once beside a probe of the reference server.
mod close_storm;

/// Tens of thousands of loopback connections use the machine's ports, CPU and memory: those
/// tests run alone, the others side by side (a held-connection test beside the 60,000 run
/// missed its figures on a loaded 2-core box).
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn heavy() -> std::sync::RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

fn light() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}

/// The connections a test server accepted: each one's peer address and when.
type Accepted = Arc<Mutex<Vec<(IpAddr, Instant)>>>;

/// Connections accepted from each peer address.
fn per_peer(accepted: &Accepted) -> BTreeMap<IpAddr, u64> {
    let mut peers = BTreeMap::new();
    for (ip, _) in accepted.lock().unwrap().iter() {
        *peers.entry(*ip).or_insert(0) += 1;
    }
    peers
}

/// A keep-alive server that answers every request with a 200 and notes every connection it
/// accepts.
fn peer_counting_server() -> (String, Accepted) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let accepted = Accepted::default();
    let seen = accepted.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let ip = conn.peer_addr().unwrap().ip();
            seen.lock().unwrap().push((ip, Instant::now()));
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(k) = conn.read(&mut chunk) {
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        if conn.write_all(&common::ok("hi")).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (url, accepted)
}

fn named_source_addrs_spread_the_connections(e: Engine) {
    let _turn = light();
    let (url, peers) = peer_counting_server();
    let (code, r, stderr) = e.run_json(
        &url,
        &[
            "-c",
            "8",
            "-n",
            "64",
            "--threads",
            "2",
            "--source-addrs",
            "127.0.0.2,127.0.0.3",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 64, "{}", r["summary"]);
    let peers = per_peer(&peers);
    let want: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
    assert_eq!(peers.keys().copied().collect::<Vec<_>>(), want, "{peers:?}");
    assert_eq!(peers.values().sum::<u64>(), 8, "{peers:?}");
    assert_eq!(
        peers.values().copied().collect::<Vec<_>>(),
        vec![4, 4],
        "round robin: {peers:?}"
    );
}

fn auto_source_addrs_on_loopback_start_at_127_0_0_1(e: Engine) {
    let _turn = light();
    let (url, peers) = peer_counting_server();
    let (code, r, stderr) = e.run_json(&url, &["-c", "4", "-n", "8", "--source-addrs", "auto"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 8, "{}", r["summary"]);
    let peers = per_peer(&peers);
    assert_eq!(
        peers.keys().copied().collect::<Vec<_>>(),
        vec!["127.0.0.1".parse::<IpAddr>().unwrap()],
        "{peers:?}"
    );
}

fn connect_rate_ramps_the_connections_up(e: Engine) {
    let _turn = light();
    let (url, accepted) = peer_counting_server();
    let (code, r, stderr) = e.run_json(
        &url,
        &[
            "-c",
            "20",
            "-z",
            "1s",
            "--threads",
            "2",
            "--connect-rate",
            "100/s",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let s = &r["summary"];
    assert_eq!(n(&s["connections_opened"]), 20, "{s}");
    assert_eq!(n(&s["connect_failures"]), 0, "{s}");
    assert_eq!(r["config"]["connect_rate"].as_f64(), Some(100.0));
    let times: Vec<Instant> = accepted.lock().unwrap().iter().map(|(_, t)| *t).collect();
    assert_eq!(times.len(), 20);
    // 20 connects at 100/s, split over two workers of 50/s: each worker's tenth connect
    // leaves 9 × 20 ms after its first. A burst would land within a few milliseconds; a
    // slow machine only spreads them further.
    let spread = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    assert!(
        spread >= Duration::from_millis(150),
        "connects spread over {spread:?}"
    );
    // And the text summary says so.
    let out = e.tailscope(&[
        "run",
        &url,
        "-c",
        "4",
        "-n",
        "8",
        "--connect-rate",
        "1000/s",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    // (At most 4 open at once: a connection may finish its requests before the last opens.)
    let line = text
        .lines()
        .find(|l| l.starts_with("  Connections:   4 opened, 0 connects failed, at most "))
        .unwrap_or_else(|| panic!("no Connections line: {text}"));
    assert!(
        line.ends_with(" open at once (--connect-rate 1000/s)"),
        "{line}"
    );
}

/// Whether this kernel searches a socket's own port range (`IP_LOCAL_PORT_RANGE`) without the
/// even-first order: the option since Linux 6.3, that search since 6.8.
fn kernel_searches_a_sockets_own_range_in_order() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().ok());
    let major = parts.next().flatten().unwrap_or(0);
    let minor = parts.next().flatten().unwrap_or(0);
    (major, minor) >= (6, 8)
}

/// Issue 32: the generator's connects take any free port, odd ones too, not the even ones
/// first. `connect()` takes even ports first and only scans for an odd one once every even
/// one is in use, a scan of ~14,100 ports per connect (1.6-5.2 ms in the kernel, inside the io_uring
/// submit) past ~14,100 connections to one server: the generator's loop was held 0.4-1.2 s a
/// second at -c 16000. Not a timing test: 64 connections' source ports, every one even before
/// the fix (the kernel's order), about half odd after (the chance that none is: 2^-64).
fn connects_take_odd_ports_too(e: Engine) {
    let _turn = light();
    if !kernel_searches_a_sockets_own_range_in_order() {
        common::skip("a kernel older than 6.8 may take even ports first whatever the socket asks");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let ports = Arc::new(Mutex::new(Vec::new()));
    let seen = ports.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            seen.lock().unwrap().push(conn.peer_addr().unwrap().port());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn.write_all(&common::ok("hi"));
                // Held open until the generator closes: every port stays in use meanwhile.
                while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    let (code, r, stderr) = e.run_json(&url, &["-c", "64", "-n", "64", "--threads", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        n(&r["summary"]["connections_opened"]),
        64,
        "{}",
        r["summary"]
    );
    let ports = ports.lock().unwrap().clone();
    assert_eq!(ports.len(), 64, "{ports:?}");
    let odd = ports.iter().filter(|p| *p % 2 == 1).count();
    assert!(odd > 0, "every source port even: {ports:?}");
}

fn failed_connects_are_counted_in_the_summary(e: Engine) {
    let _turn = light();
    // Nothing listens on a port just freed.
    let url = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/", l.local_addr().unwrap())
    };
    let (code, r, stderr) = e.run_json(&url, &["-c", "1", "-n", "3", "--connect-rate", "50/s"]);
    assert_eq!(code, 1, "{stderr}");
    let s = &r["summary"];
    assert_eq!(n(&s["connections_opened"]), 0, "{s}");
    assert_eq!(n(&s["connect_failures"]), 3, "{s}");
    assert_eq!(n(&r["errors"]["connect_refused"]), 3, "{}", r["errors"]);
}

/// More connections than one source address has ports toward one destination (~28 k), where
/// the open-file limit allows; else as many as it allows (a sandbox without CAP_SYS_RESOURCE
/// keeps a hard limit of 20 000: the 500-port namespace tests below show the port range
/// being spread; this one shows the scale).
const MANY: u64 = 30_000;

/// Raises this process's RLIMIT_NOFILE (inherited by the server and the generator it
/// starts) as far as `want` and the hard limit allow; the connections that fit.
fn raise_open_file_limit(want: u64) -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        common::skip("RLIMIT_NOFILE cannot be read");
        return None;
    };
    let need = want + 2_000;
    if soft >= need || setrlimit(Resource::RLIMIT_NOFILE, need, hard.max(need)).is_ok() {
        return Some(want);
    }
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    let fits = hard.saturating_sub(1_000).min(want);
    if fits < 10_000 {
        common::skip(format!(
            "RLIMIT_NOFILE is {soft}/{hard}: fewer than 10 000 connections fit (raising it needs CAP_SYS_RESOURCE)"
        ));
        return None;
    }
    Some(fits)
}

fn many_loopback_connections_each_complete_a_request(e: Engine) {
    let _turn = heavy();
    let Some(many) = raise_open_file_limit(MANY) else {
        return;
    };
    let Some((mut server, addr)) = common::spawn_serve(&["--max-conns", "40000"]) else {
        return;
    };
    let count = many.to_string();
    let (code, r, stderr) = e.run_json(
        &format!("http://{addr}/"),
        &[&["-c", &count, "-n", &count][..], &MANY_FLAGS].concat(),
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}");
    assert_each_opened_and_answered(&r, many);
}

/// The flags of a run of many connections: from as many loopback addresses as they need,
/// opened at a bounded rate, with time for the handshakes and the answers of a loaded box.
const MANY_FLAGS: [&str; 8] = [
    "--source-addrs",
    "auto",
    "--connect-rate",
    "20000/s",
    "--connect-timeout",
    "20s",
    "-t",
    "60s",
];

/// Every one of `many` connections opened and its request answered, without an error.
fn assert_each_opened_and_answered(r: &serde_json::Value, many: u64) {
    let s = &r["summary"];
    assert_eq!(n(&s["connections_opened"]), many, "{s}");
    assert_eq!(n(&s["connect_failures"]), 0, "{s}");
    assert_eq!(n(&s["successes"]), many, "{s} {}", r["errors"]);
    assert_eq!(n(&s["errors"]), 0, "{}", r["errors"]);
}

/// Runs `tailscope run http://127.0.0.1:18080/ -c 1200 -n 1200 ARGS --json -` against the
/// reference server in a network namespace of its own whose ephemeral port range is 500
/// ports wide (a fixed port is safe there: nothing else lives in it). `None`, after saying
/// why, where a namespace cannot be made or the reference server cannot run.
fn run_with_500_ports(e: Engine, args: &str) -> Option<(i32, serde_json::Value, String)> {
    if !common::has_tool("unshare", "--version") || !common::has_tool("ip", "-V") {
        common::skip("unshare or ip missing (apt-get install util-linux iproute2)");
        return None;
    }
    let bin = env!("CARGO_BIN_EXE_tailscope");
    let scratch = common::scratch_dir(&format!("c100k-ports-{}", e.name()));
    let dir = scratch.path();
    let script = format!(
        r#"ip link set lo up && echo "40000 40499" > /proc/sys/net/ipv4/ip_local_port_range || exit 97
"{bin}" serve --addr 127.0.0.1:18080 --threads 1 --max-conns 5000 > "{d}/serve.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null' EXIT
for i in $(seq 200); do grep -q listening "{d}/serve.out" && break; sleep 0.05; done
grep -q listening "{d}/serve.out" || {{ cat "{d}/serve.out" >&2; exit 98; }}
"{bin}" run http://127.0.0.1:18080/ -c 1200 -n 1200 --threads 2 --engine {e} {args} --json -
rc=$?
kill $server
wait $server
exit $rc"#,
        d = dir.display(),
        e = e.name()
    );
    let out = std::process::Command::new("unshare")
        .env("TAILSCOPE_JOURNAL_DIR", crate::common::JOURNAL_DIR)
        .args(["-n", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    match out.status.code() {
        Some(97) => {
            common::skip(format!(
                "cannot make a network namespace with a narrow port range: {stderr}"
            ));
            return None;
        }
        Some(98) if stderr.contains("io_uring") => {
            common::skip(format!("the reference server cannot run here: {stderr}"));
            return None;
        }
        _ => {}
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|err| panic!("not JSON ({err}): {stdout}\nstderr: {stderr}"));
    Some((out.status.code().unwrap_or(-1), report, stderr))
}

fn out_of_local_ports_is_no_local_port_and_names_the_fix(e: Engine) {
    let _turn = light();
    let Some((_, r, stderr)) = run_with_500_ports(e, "") else {
        return;
    };
    let s = &r["summary"];
    assert!(
        n(&r["errors"]["no_local_port"]) > 0,
        "{stderr} {}",
        r["errors"]
    );
    assert!(n(&s["successes"]) > 0, "{s}");
    assert!(n(&s["successes"]) <= 500, "one address, 500 ports: {s}");
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("--source-addrs auto") && warnings.contains("ip_local_port_range"),
        "{warnings}"
    );
}

fn more_source_addresses_are_more_ports(e: Engine) {
    let _turn = light();
    let Some((code, r, stderr)) =
        run_with_500_ports(e, "--source-addrs 127.0.0.1,127.0.0.2,127.0.0.3")
    else {
        return;
    };
    assert_eq!(code, 0, "{stderr}");
    let s = &r["summary"];
    assert_eq!(n(&s["connections_opened"]), 1200, "{s} {}", r["errors"]);
    assert_eq!(n(&s["successes"]), 1200, "{s} {}", r["errors"]);
}

engine_tests!(
    connects_take_odd_ports_too,
    out_of_local_ports_is_no_local_port_and_names_the_fix,
    more_source_addresses_are_more_ports,
    many_loopback_connections_each_complete_a_request,
    named_source_addrs_spread_the_connections,
    auto_source_addrs_on_loopback_start_at_127_0_0_1,
    connect_rate_ramps_the_connections_up,
    failed_connects_are_counted_in_the_summary,
);

#[test]
fn source_addrs_that_cannot_work_exit_2_before_any_load() {
    let _turn = light();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let cases: [(&str, &[&str], &str); 8] = [
        (
            &url,
            &["--source-addrs", "192.0.2.1"],
            "not an address of this host",
        ),
        (
            &url,
            &["--source-addrs", "::1"],
            "not of the target's family",
        ),
        (&url, &["--source-addrs", "nope"], "is not an IP address"),
        (
            "http://192.0.2.1:9/",
            &["--source-addrs", "auto"],
            "name this host's addresses",
        ),
        (&url, &["--connect-rate", "0/s"], "out of range"),
        (&url, &["--idle-conns", "-1"], "--idle-conns"),
        (&url, &["--slow-conns", "2000000"], "--slow-conns"),
        (&url, &["--slow-interval", "0s"], "--slow-interval"),
    ];
    for (target, flags, says) in cases {
        let mut args = vec!["run", target, "-n", "1", "-c", "1"];
        args.extend_from_slice(flags);
        let out = common::tailscope(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert!(
        listener.accept().is_err(),
        "nothing may connect before the flags are checked"
    );
}

/// Runs `tailscope run URL ARGS --engine uring --json -` with RLIMIT_NOFILE 1000 (soft and
/// hard: it cannot raise it). `None`, after saying why, where the engine cannot run or keeps
/// its sockets on plain descriptors here.
fn run_uring_under_1000_files(url: &str, args: &str) -> Option<(i32, serde_json::Value, String)> {
    if !Engine::Uring.available() {
        return None;
    }
    let out = std::process::Command::new("sh")
        .env("TAILSCOPE_JOURNAL_DIR", crate::common::JOURNAL_DIR)
        .args([
            "-c",
            &format!(
                "ulimit -n 1000 && exec {} run {url} {args} --engine uring --json -",
                env!("CARGO_BIN_EXE_tailscope")
            ),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    let reason = report["config"]["engine"]["reason"].to_string();
    if reason.contains("plain descriptors") {
        common::skip(format!("no io_uring direct descriptors here: {reason}"));
        return None;
    }
    Some((out.status.code().unwrap_or(-1), report, stderr))
}

#[test]
fn uring_direct_descriptors_hold_more_connections_than_the_open_file_limit() {
    let _turn = light();
    // The reference server is started from here, with this process's limits.
    let Some((mut server, addr)) = common::spawn_serve(&[]) else {
        return;
    };
    let url = format!("http://{addr}/");
    // 1,500 connections with 1,000 descriptors: the threads are raised until each ring's
    // file table (up to RLIMIT_NOFILE slots) holds its share.
    let run = run_uring_under_1000_files(&url, "-c 1500 -n 3000 --threads 1 --connect-timeout 20s");
    let Some((code, _, stderr)) = run else {
        let _ = server.kill();
        let _ = server.wait();
        return;
    };
    // --threads given and too few: refused before anything is sent, naming the fix.
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--threads 2"), "{stderr}");
    assert!(stderr.contains("RLIMIT_NOFILE"), "{stderr}");
    let (code, r, stderr) =
        run_uring_under_1000_files(&url, "-c 1500 -n 3000 --connect-timeout 20s").unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(code, 0, "{stderr}");
    let reason = r["config"]["engine"]["reason"].as_str().unwrap();
    assert!(reason.contains("direct descriptors"), "{reason}");
    assert!(n(&r["config"]["threads"]) >= 2, "{}", r["config"]);
    let s = &r["summary"];
    assert_eq!(n(&s["connections_opened"]), 1500, "{s}");
    assert_eq!(n(&s["successes"]), 3000, "{s} {}", r["errors"]);
    assert_eq!(n(&s["errors"]), 0, "{}", r["errors"]);
}

/// Issue 39 item 4: 3,000 connections that each open a socket per request (`--no-keepalive`)
/// or per refused connect, on the io_uring engine's direct descriptors, never count
/// `too_many_open_files`: no open-file limit is near (3,000 sockets under 20,000). Before the
/// fix, a connect that found every slot of its thread's file table in use or closing
/// counted one: 2,917 and 4,265 of them beside the refusals of a closed port, in two runs.
#[test]
fn uring_sockets_churned_by_3000_connections_are_never_too_many_open_files() {
    let _turn = heavy();
    if !Engine::Uring.available() {
        return;
    }
    let Some((mut server, addr)) = common::spawn_serve(&["--max-conns", "40000"]) else {
        return;
    };
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    for (target, what) in [
        (addr.to_string(), "the reference server"),
        (closed.to_string(), "a closed port"),
    ] {
        let (_, r, stderr) = Engine::Uring.run_json(
            &format!("http://{target}/plaintext"),
            &["-c", "3000", "--no-keepalive", "-z", "2s", "--threads", "2"],
        );
        let reason = r["config"]["engine"]["reason"].to_string();
        if reason.contains("plain descriptors") {
            common::skip(format!("no io_uring direct descriptors here: {reason}"));
            break;
        }
        let errors = &r["errors"];
        eprintln!("{what}: {errors}");
        assert_eq!(
            n(&errors["too_many_open_files"]),
            0,
            "{what}: {errors} {stderr}"
        );
        if what == "a closed port" {
            assert!(n(&errors["connect_refused"]) > 0, "{errors}");
        } else {
            assert!(n(&r["summary"]["successes"]) > 0, "{}", r["summary"]);
        }
    }
    let _ = server.kill();
    let _ = server.wait();
}

/// Peak resident memory (VmHWM, KiB) of live process `pid`; none once it has exited.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Issue 19's scale: 60,000 loopback connections (beyond one source address's ports, and
/// three times RLIMIT_NOFILE here) from one generator process, `--source-addrs auto`,
/// against the reference server, each completing a request, within 400 MiB of RSS. Both
/// processes hold their sockets on io_uring direct descriptors (each thread's or worker's
/// file table up to RLIMIT_NOFILE); the threads are raised as needed.
#[test]
fn sixty_thousand_connections_each_complete_a_request_within_400_mib() {
    let _turn = heavy();
    const CONNS: u64 = 60_000;
    if !Engine::Uring.available() {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_tailscope");
    // Workers enough that each one's file table (up to RLIMIT_NOFILE slots, the hard limit
    // once the server raised its soft one) holds its share whatever SO_REUSEPORT's spread:
    // 4 under this sandbox's 20,000.
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    // As root with CAP_SYS_RESOURCE the limit is raised past the connections (one table a
    // process then holds them all); without it, as here, it stays and workers are added.
    let _ = setrlimit(Resource::RLIMIT_NOFILE, 70_000, 70_000);
    let hard = getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(_, hard)| hard);
    let workers = (CONNS / hard.saturating_sub(5_000).max(1) + 1).to_string();
    if hard < 10_000 {
        common::skip(format!(
            "RLIMIT_NOFILE's hard limit is {hard}: the server would need more than 12 workers"
        ));
        return;
    }
    let mut server = std::process::Command::new(bin)
        .args(["serve", "--addr", "127.0.0.1:0", "--threads", &workers])
        .args(["--max-conns", "100000"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap()
        .to_string();
    let count = CONNS.to_string();
    let run = std::process::Command::new(bin)
        .env("TAILSCOPE_JOURNAL_DIR", crate::common::JOURNAL_DIR)
        .args([
            "run",
            &format!("http://{addr}/"),
            "--json",
            "-",
            "--engine",
            "uring",
        ])
        .args(["-c", &count, "-n", &count])
        .args(MANY_FLAGS)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = run.id();
    // Read while it runs: the peak is gone with the process.
    let sampler = std::thread::spawn(move || {
        let mut peak = None;
        while let Some(kib) = peak_rss_kib(pid) {
            peak = Some(kib);
            std::thread::sleep(Duration::from_millis(20));
        }
        peak
    });
    let out = run.wait_with_output().unwrap();
    let peak = sampler.join().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Refused because the sockets would be plain descriptors (a kernel without direct ones):
    // that message, not the one about the threads' file tables.
    if stderr.contains("open files, but this process may open only") {
        common::skip(format!(
            "the generator cannot hold {CONNS} sockets here: {stderr}"
        ));
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let reason = r["config"]["engine"]["reason"].to_string();
    if reason.contains("plain descriptors") {
        common::skip(format!("no io_uring direct descriptors here: {reason}"));
        return;
    }
    assert_each_opened_and_answered(&r, CONNS);
    // Sampled every 20 ms: VmHWM is the peak so far, so the last sample is the peak of all
    // but the last 20 ms (the teardown, which frees).
    let peak = peak.expect("the generator's RSS was read while it ran");
    assert!(peak < 400 * 1024, "peak RSS {} MiB", peak / 1024);
    eprintln!("60,000 connections: tailscope peak RSS {} MiB", peak / 1024);
}

/// Resident memory now (VmRSS, KiB) of live process `pid`.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Issue 32: a connection the reference server holds idle costs it no output buffer. Each
/// accepted connection used to get a 4 KiB one at accept, touched by the allocator: 4.2 KiB
/// of RSS a connection, 76 MB at 19,000 idle ones. Measured here over 5,000 connections that
/// never send anything (RSS is not timing: the figure does not depend on the machine's load).
/// Before the buffer was allocated lazily: 4.3 KiB a connection; after, under 1 KiB.
#[test]
fn an_idle_connection_holds_no_output_buffer_in_the_server() {
    let _turn = heavy();
    const IDLE: u64 = 5_000;
    let Some(room) = raise_open_file_limit(IDLE) else {
        return;
    };
    assert!(room >= IDLE, "room for {room} connections");
    let Some((mut server, addr)) = common::spawn_serve(&["--max-conns", "40000"]) else {
        return;
    };
    let pid = server.id();
    // One request answered on a connection opened after all the idle ones: the server's one
    // worker accepts in order, so by then it holds every idle connection.
    let answered = |addr: &str| {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 256];
        let got = s.read(&mut buf).unwrap();
        assert!(buf[..got].starts_with(b"HTTP/1.1 200"), "{got} bytes");
    };
    // A first batch warms the slab and the allocator up; the figure is the growth past it.
    let mut held: Vec<std::net::TcpStream> = (0..500)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    answered(&addr);
    let before = rss_kib(pid).expect("the server's RSS");
    held.extend((0..IDLE).map(|_| std::net::TcpStream::connect(&addr).unwrap()));
    answered(&addr);
    let after = rss_kib(pid).expect("the server's RSS");
    let _ = server.kill();
    let _ = server.wait();
    drop(held);
    let per_conn = after.saturating_sub(before) as f64 / IDLE as f64;
    eprintln!(
        "the server holding {IDLE} more idle connections: RSS {before} -> {after} KiB, \
         {per_conn:.2} KiB a connection"
    );
    assert!(per_conn < 1.0, "{per_conn:.2} KiB a held idle connection");
}
