//! Many connections from one generator host: source addresses (`--source-addrs`), a bounded
//! connect rate (`--connect-rate`), and a run of tens of thousands of loopback connections.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener};
use std::sync::{Arc, Mutex};

use common::{engine_tests, n, Engine};

/// A keep-alive server that answers every request with a 200 and counts the connections it
/// accepted from each peer address.
fn peer_counting_server() -> (String, Arc<Mutex<BTreeMap<IpAddr, u64>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let peers = Arc::new(Mutex::new(BTreeMap::new()));
    let seen = peers.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let ip = conn.peer_addr().unwrap().ip();
            *seen.lock().unwrap().entry(ip).or_insert(0) += 1;
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
    (url, peers)
}

fn named_source_addrs_spread_the_connections(e: Engine) {
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
    let peers = peers.lock().unwrap().clone();
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
    let (url, peers) = peer_counting_server();
    let (code, r, stderr) = e.run_json(&url, &["-c", "4", "-n", "8", "--source-addrs", "auto"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 8, "{}", r["summary"]);
    let peers = peers.lock().unwrap().clone();
    assert_eq!(
        peers.keys().copied().collect::<Vec<_>>(),
        vec!["127.0.0.1".parse::<IpAddr>().unwrap()],
        "{peers:?}"
    );
}

engine_tests!(
    named_source_addrs_spread_the_connections,
    auto_source_addrs_on_loopback_start_at_127_0_0_1,
);

#[test]
fn source_addrs_that_cannot_work_exit_2_before_any_load() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let cases: [(&str, &[&str], &str); 4] = [
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
