//! The agent over loopback: a run that knows its token and fingerprint gets a profile; a
//! wrong token, a wrong fingerprint, plain HTTP, garbage and an oversized message are each
//! refused with a clear message on both sides, and the agent keeps serving.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustls::StreamOwned;
use tailscope_agent::client::{connect, AgentOptions, Event, LaunchRequest};
use tailscope_agent::server::{Agent, AgentConfig};
use tailscope_agent::tls::{agent_name, run_tls};
use tailscope_agent::wire::{StacksWanted, Watch, MAGIC, PROTOCOL_VERSION};
use tailscope_agent::Error;

const TOKEN: &str = "0123456789abcdef0123";

fn start_agent() -> (SocketAddr, String, mpsc::Receiver<String>) {
    let agent = Agent::bind(&AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: TOKEN.into(),
        max_clients: 4,
        cert_dir: None,
        allow_launch: false,
    })
    .unwrap();
    let (addr, fp) = (agent.local_addr().unwrap(), agent.fingerprint().to_string());
    let (tx, logs) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    std::thread::spawn(move || {
        agent.serve(move |line| {
            let _ = tx.lock().unwrap().send(line);
        })
    });
    (addr, fp, logs)
}

fn options(addr: SocketAddr, token: &str, fingerprint: Option<&str>) -> AgentOptions {
    AgentOptions {
        address: addr.to_string(),
        token: token.into(),
        fingerprint: fingerprint.map(str::to_string),
        launch: None,
    }
}

/// Whether the agent logs a line holding `needle` within 10 s (it logs from each client's
/// thread, so lines of an earlier client may come first).
fn logged(logs: &mpsc::Receiver<String>, needle: &str) -> bool {
    while let Ok(line) = logs.recv_timeout(Duration::from_secs(10)) {
        if line.contains(needle) {
            return true;
        }
    }
    false
}

/// A good run still gets its profile from the agent: what each refusal must leave intact.
fn profile_works(addr: SocketAddr, fp: &str) {
    let mut c = connect(&options(addr, TOKEN, Some(fp))).expect("the right token and pin");
    assert_eq!(c.fingerprint, fp);
    let clock = c.clock(5).unwrap();
    assert!(
        clock.uncertainty_ms >= 0.0 && clock.offset_ms.abs() < 1000.0,
        "{clock:?}"
    );
    let run = c
        .start(
            "run-1",
            Watch::Pid(std::process::id()),
            None,
            Duration::from_millis(50),
            false,
            StacksWanted::Off,
        )
        .unwrap();
    assert_eq!(run.target_pid, Some(std::process::id()));
    std::thread::sleep(Duration::from_millis(300));
    let ticks = run
        .drain()
        .into_iter()
        .filter(|e| matches!(e, Event::Tick(_)))
        .count();
    assert!(ticks >= 1, "ticks stream while the run goes on");
    let end = run.finish(100, Vec::new(), Duration::from_secs(10));
    match end.last() {
        Some(Event::Finished(profile, _, stacks)) => {
            assert!(stacks.is_none(), "stacks were not asked for");
            assert_eq!(profile.target.as_ref().unwrap().pid, std::process::id());
        }
        other => panic!("no finished profile: {other:?}"),
    }
}

#[test]
fn refusals_are_clear_and_the_agent_keeps_serving() {
    let (addr, fp, logs) = start_agent();
    profile_works(addr, &fp);

    // A wrong token.
    let e = connect(&options(addr, "wrong-token-wrong-token", Some(&fp)))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::Refused(r) if r.contains("wrong token")),
        "{e}"
    );
    assert!(logged(&logs, "wrong token"));

    // A wrong fingerprint: the run refuses the agent, and the agent hears why.
    let other = tailscope_agent::tls::fingerprint(b"another certificate");
    let e = connect(&options(addr, TOKEN, Some(&other))).err().unwrap();
    assert!(e.to_string().contains("not the pinned"), "{e}");
    assert!(logged(&logs, "handshake failed"));

    // Plain HTTP gets an HTTP answer that says what it reached.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    plain.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 400") && answer.contains("tailscope agent"),
        "{answer}"
    );
    assert!(logged(&logs, "plain-HTTP"));

    // Garbage before any handshake.
    let mut garbage = TcpStream::connect(addr).unwrap();
    garbage.write_all(&[0x00, 0xff, 0x13, 0x37]).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);
    assert!(logged(&logs, "not a TLS client"));

    // An oversized message after the handshake: refused before its body is read.
    let (config, _) = run_tls(Some(fp.clone()));
    let conn = rustls::ClientConnection::new(config, agent_name()).unwrap();
    let mut tls = StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    let mut frame = MAGIC.to_vec();
    frame.extend_from_slice(&PROTOCOL_VERSION.to_be_bytes());
    frame.extend_from_slice(&u32::MAX.to_be_bytes());
    tls.write_all(&frame).unwrap();
    tls.flush().unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer);
    assert!(
        String::from_utf8_lossy(&answer).contains("limit"),
        "the client is told why"
    );
    assert!(logged(&logs, "limit"));

    // Another protocol version: both sides say so.
    let (config, _) = run_tls(Some(fp.clone()));
    let conn = rustls::ClientConnection::new(config, agent_name()).unwrap();
    let mut tls = StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    let mut frame = MAGIC.to_vec();
    frame.extend_from_slice(&(PROTOCOL_VERSION + 1).to_be_bytes());
    frame.extend_from_slice(&2u32.to_be_bytes());
    frame.extend_from_slice(b"{}");
    tls.write_all(&frame).unwrap();
    tls.flush().unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer);
    assert!(String::from_utf8_lossy(&answer).contains("protocol v"));
    assert!(logged(&logs, "protocol v"));

    profile_works(addr, &fp);
}

#[test]
fn a_run_id_is_profiled_once_at_a_time() {
    let (addr, fp, _logs) = start_agent();
    let first = connect(&options(addr, TOKEN, Some(&fp)))
        .unwrap()
        .start(
            "same",
            Watch::Host,
            None,
            Duration::from_millis(50),
            false,
            StacksWanted::Off,
        )
        .unwrap();
    let again = connect(&options(addr, TOKEN, Some(&fp))).unwrap().start(
        "same",
        Watch::Host,
        None,
        Duration::from_millis(50),
        false,
        StacksWanted::Off,
    );
    assert!(
        matches!(&again, Err(Error::Refused(r)) if r.contains("already")),
        "{:?}",
        again.err()
    );
    let end = first.finish(0, Vec::new(), Duration::from_secs(10));
    assert!(matches!(end.last(), Some(Event::Finished(..))));
}

#[test]
fn clients_beyond_the_limit_are_refused_and_the_agent_says_so() {
    let agent = Agent::bind(&AgentConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: TOKEN.into(),
        max_clients: 1,
        cert_dir: None,
        allow_launch: false,
    })
    .unwrap();
    let (addr, fp) = (agent.local_addr().unwrap(), agent.fingerprint().to_string());
    let (tx, logs) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    std::thread::spawn(move || {
        agent.serve(move |line| {
            let _ = tx.lock().unwrap().send(line);
        })
    });
    let first = connect(&options(addr, TOKEN, Some(&fp))).expect("the first client is served");
    let second = connect(&options(addr, TOKEN, Some(&fp)));
    let e = second.err().expect("a second client at once is refused");
    assert!(e.to_string().contains("closed the connection"), "{e}");
    assert!(logged(&logs, "already 1 clients at once"));
    drop(first);
    // Its slot is given back once it is gone.
    let served = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        connect(&options(addr, TOKEN, Some(&fp))).is_ok()
    });
    assert!(served);
}

/// Burns CPU in a function of its own, for the agent's sampler to name.
#[inline(never)]
fn burn_for_the_agent(until: Instant) -> u64 {
    let mut x = 1u64;
    while Instant::now() < until {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
    }
    x
}

#[test]
fn the_server_s_stacks_are_sampled_and_named_on_the_agent_s_host() {
    if let Err(e) = tailscope_targets::stacks::sampling_allowed() {
        println!("skipped: {e}");
        eprintln!("skipped: {e}");
        return;
    }
    let (addr, fp, _logs) = start_agent();
    let mut c = connect(&options(addr, TOKEN, Some(&fp))).unwrap();
    let offset = c.clock(3).unwrap();
    let run = c
        .start(
            "stacks",
            Watch::Pid(std::process::id()),
            None,
            Duration::from_millis(50),
            false,
            StacksWanted::Auto,
        )
        .unwrap();
    assert_eq!(run.stacks_not_sampled, None);
    // Second 0 begins now, on the agent's clock.
    let now = tailscope_agent::unix_ns() as f64 + offset.offset_ms * 1e6;
    run.begin(now as u64);
    let burner =
        std::thread::spawn(|| burn_for_the_agent(Instant::now() + Duration::from_millis(1500)));
    burner.join().unwrap();
    // Second 1 is the slow one.
    let seconds = vec![(0, 0, 1_000), (1, 50, 90_000)];
    let end = run.finish(100, seconds, Duration::from_secs(60));
    let Some(Event::Finished(_, _, Some(inside))) = end.last() else {
        panic!("no stacks: {:?}", end.last());
    };
    assert_eq!(
        inside.slow_seconds().iter().copied().collect::<Vec<_>>(),
        vec![1]
    );
    let on_cpu = &inside.report.on_cpu;
    assert!(on_cpu.samples > 20, "{} samples", on_cpu.samples);
    assert!(
        on_cpu
            .on_cpu
            .iter()
            .any(|s| s.stack.iter().any(|f| f.contains("burn_for_the_agent"))),
        "the burning function is named: {:?}",
        on_cpu.on_cpu.iter().take(3).collect::<Vec<_>>()
    );
}

#[test]
fn a_kept_certificate_keeps_its_fingerprint_across_restarts() {
    let dir = std::env::temp_dir().join(format!("tailscope-agent-cert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let bind = || {
        Agent::bind(&AgentConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            token: TOKEN.into(),
            max_clients: 1,
            cert_dir: Some(dir.clone()),
            allow_launch: false,
        })
    };
    let first = bind().unwrap().fingerprint().to_string();
    let again = bind().unwrap().fingerprint().to_string();
    assert_eq!(first, again, "the pinned fingerprint stays valid");
    let fresh = start_agent().1;
    assert_ne!(
        first, fresh,
        "without --cert-dir a new certificate each start"
    );
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join(tailscope_agent::tls::KEY_FILE);
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Half a pair is refused, and said.
    std::fs::remove_file(&key).unwrap();
    let e = bind().err().unwrap().to_string();
    assert!(e.contains("without the other"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An agent started without `--allow-launch` launches nothing: the run is told why (and
/// how to allow it), the agent logs the refusal, runs nothing, and serves on.
#[test]
fn an_agent_without_allow_launch_refuses_to_launch() {
    let (addr, fp, logs) = start_agent();
    let marker = format!("ts-launch-refused-{}", std::process::id());
    let mut c = connect(&options(addr, TOKEN, Some(&fp))).unwrap();
    let refused = c.launch(&LaunchRequest {
        command: format!("sh -c 'echo > /tmp/{marker}; sleep 5' {{port}}"),
        path: "/".into(),
    });
    match refused {
        Err(Error::Refused(reason)) => assert!(reason.contains("--allow-launch"), "{reason}"),
        Err(other) => panic!("not a refusal: {other}"),
        Ok(l) => panic!("launched without --allow-launch: {l:?}"),
    }
    assert!(logged(&logs, "--allow-launch"));
    assert!(!std::path::Path::new(&format!("/tmp/{marker}")).exists());
    profile_works(addr, &fp);
}
