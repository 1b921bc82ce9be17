//! Errors explained (issue 35): real servers configured to fail in one way each (nginx with too
//! few worker_connections, limit_req, keepalive_requests, a proxy to a closed port and to a
//! slow upstream; the reference server killed and restarted, and capped; a TLS server with no
//! cipher the client accepts; a server of the test's own that rate-limits), each named by its
//! cause with its numbers in the evidence and no other cause claimed; a healthy run names none.

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::tree::{free_port, nginx_bin};
use common::{run_json, Reply};

/// Kills and reaps a server when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The causes a report named, and its diagnosis as text for failure messages.
fn causes(r: &serde_json::Value) -> Vec<String> {
    r["diagnosis"]
        .as_array()
        .map(|d| {
            d.iter()
                .map(|d| d["cause"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The evidence of the one cause named `cause`.
fn evidence(r: &serde_json::Value, cause: &str) -> String {
    r["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["cause"] == cause)
        .map(|d| d["evidence"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// Waits until something listens on `port` (at most 5 s).
fn wait_listening(port: u16) {
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on port {port}");
}

/// nginx in the foreground, one worker, with `events` and a server block of `server` on a
/// free port (`{port}` is filled in), its files in `dir`. `None`, after saying so, without
/// nginx.
fn nginx(dir: &Path, events: &str, http: &str, server: &str) -> Option<(Killed, u16)> {
    nginx_as(dir, "master_process off;", events, http, server)
}

/// [`nginx`] with `master` (`master_process on;` for a master and its worker).
fn nginx_as(
    dir: &Path,
    master: &str,
    events: &str,
    http: &str,
    server: &str,
) -> Option<(Killed, u16)> {
    let Some(bin) = nginx_bin() else {
        common::skip("nginx not installed (apt-get install nginx)");
        return None;
    };
    let port = free_port();
    let d = dir.display();
    let server = server.replace("{port}", &port.to_string());
    std::fs::write(
        dir.join("nginx.conf"),
        format!(
            "worker_processes 1;\ndaemon off;\n{master}\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
events {{ {events} }}\n\
http {{ access_log off; client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
{http}\nserver {{ listen 127.0.0.1:{port}; {server} }} }}\n"
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    let child = Killed(child);
    wait_listening(port);
    Some((child, port))
}

const HELLO: &str = "location / { default_type text/plain; return 200 \"Hello, World!\"; }";

/// Runs against nginx configured so, and returns the report.
fn run_nginx(
    name: &str,
    events: &str,
    http: &str,
    server: &str,
    args: &[&str],
) -> Option<serde_json::Value> {
    let scratch = common::scratch_dir(name);
    let (_nginx, port) = nginx(scratch.path(), events, http, server)?;
    let (_, r, stderr) = run_json(&format!("http://127.0.0.1:{port}/"), args);
    assert!(r["diagnosis"].is_array(), "{stderr}");
    Some(r)
}

/// The causes that say why requests failed (the latency causes apart).
const ERROR_CAUSES: [&str; 9] = [
    "connection_cap",
    "rate_limited",
    "overload_shed",
    "upstream_failure",
    "keepalive_limit",
    "tls_failure",
    "server_crash_or_restart",
    "port_exhaustion",
    "fd_limit",
];

/// The run names `cause` and no other error cause. A latency cause beside it is left to the
/// spike rules' own tests: a test server's thread on this busy 2-CPU machine may really stall
/// 20-30 ms (seen: a real server_stall beside the 429s).
fn assert_only(r: &serde_json::Value, cause: &str) {
    let named: Vec<String> = causes(r)
        .into_iter()
        .filter(|c| ERROR_CAUSES.contains(&c.as_str()))
        .collect();
    eprintln!("{cause}: all named {:?}", causes(r));
    assert_eq!(
        named,
        vec![cause.to_string()],
        "diagnosis: {:#}\nerrors: {}\nstatus: {}",
        r["diagnosis"],
        r["errors"],
        r["status_codes"]
    );
}

#[test]
fn too_few_worker_connections_is_a_connection_cap() {
    let Some(r) = run_nginx(
        "errors-cap",
        "worker_connections 64;",
        "",
        HELLO,
        &["-c", "200", "-z", "3s"],
    ) else {
        return;
    };
    assert_only(&r, "connection_cap");
    let ev = evidence(&r, "connection_cap");
    assert!(ev.contains("of the 200 asked for"), "{ev}");
    assert!(ev.contains("first request on their connection"), "{ev}");
}

#[test]
fn limit_req_with_429_is_rate_limited_and_the_default_503_is_overload_shed() {
    let limit = "limit_req_zone $binary_remote_addr zone=one:1m rate=50r/s;";
    let Some(r) = run_nginx(
        "errors-429",
        "worker_connections 1024;",
        limit,
        // `return` answers before limit_req's phase: a content handler is limited.
        "location / { limit_req zone=one burst=5 nodelay; limit_req_status 429; add_header Retry-After 1 always; empty_gif; }",
        &["-c", "4", "-z", "2s"],
    ) else {
        return;
    };
    assert_only(&r, "rate_limited");
    let ev = evidence(&r, "rate_limited");
    assert!(ev.contains("429 Too Many Requests"), "{ev}");
    assert!(ev.contains("Server: nginx"), "{ev}");
    assert!(ev.contains("Retry-After: 1"), "{ev}");

    let Some(r) = run_nginx(
        "errors-503",
        "worker_connections 1024;",
        limit,
        "location / { limit_req zone=one burst=5 nodelay; empty_gif; }",
        &["-c", "4", "-z", "2s"],
    ) else {
        return;
    };
    assert_only(&r, "overload_shed");
    assert!(evidence(&r, "overload_shed").contains("503 Service Unavailable"));
}

#[test]
fn keepalive_requests_is_a_keepalive_limit_with_its_n() {
    let Some(r) = run_nginx(
        "errors-keepalive",
        "worker_connections 1024;",
        "keepalive_requests 100;",
        HELLO,
        &["-c", "4", "-z", "2s"],
    ) else {
        return;
    };
    assert_only(&r, "keepalive_limit");
    let ev = evidence(&r, "keepalive_limit");
    assert!(ev.contains("after exactly 100 responses"), "{ev}");
}

#[test]
fn a_proxy_to_a_closed_port_or_a_slow_upstream_is_an_upstream_failure() {
    let closed = free_port();
    let Some(r) = run_nginx(
        "errors-502",
        "worker_connections 1024;",
        "",
        &format!("location / {{ proxy_pass http://127.0.0.1:{closed}; }}"),
        &["-c", "4", "-z", "2s"],
    ) else {
        return;
    };
    assert_only(&r, "upstream_failure");
    let ev = evidence(&r, "upstream_failure");
    assert!(ev.contains("502 Bad Gateway"), "{ev}");
    assert!(ev.contains("Server: nginx"), "{ev}");

    // An upstream that accepts and never answers: nginx answers 504 after its time-out.
    let slow = common::serve(|_| Reply::Hang);
    let Some(r) = run_nginx(
        "errors-504",
        "worker_connections 1024;",
        "",
        &format!(
            "location / {{ proxy_pass http://{}; proxy_read_timeout 200ms; }}",
            slow.addr
        ),
        &["-c", "4", "-z", "2s"],
    ) else {
        return;
    };
    assert_only(&r, "upstream_failure");
    let ev = evidence(&r, "upstream_failure");
    assert!(ev.contains("504 Gateway Timeout"), "{ev}");
}

#[test]
fn a_server_killed_and_restarted_mid_run_is_named() {
    let Some((first, addr)) = common::spawn_serve(&[]) else {
        return;
    };
    let first = Killed(first);
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let restart = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        drop(first);
        std::thread::sleep(Duration::from_millis(700));
        let child = crate::common::tailscope_command()
            .args([
                "serve",
                "--threads",
                "1",
                "--addr",
                &format!("127.0.0.1:{port}"),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("serve restarts");
        Killed(child)
    });
    let (_, r, stderr) = run_json(&format!("http://{addr}/"), &["-c", "8", "-z", "3500ms"]);
    let _second = restart.join().unwrap();
    assert!(r["diagnosis"].is_array(), "{stderr}");
    assert_only(&r, "server_crash_or_restart");
    let ev = evidence(&r, "server_crash_or_restart");
    assert!(ev.contains("connects refused"), "{ev}");
    assert!(ev.contains("then it was back"), "{ev}");
}

#[test]
fn the_reference_servers_connection_limit_is_a_connection_cap() {
    let Some((server, addr)) = common::spawn_serve(&["--max-conns", "4"]) else {
        return;
    };
    let _server = Killed(server);
    let (_, r, _) = run_json(&format!("http://{addr}/"), &["-c", "16", "-z", "2s"]);
    assert_only(&r, "connection_cap");
    assert!(evidence(&r, "connection_cap").contains("of the 16 asked for"));
}

#[test]
fn a_tls_server_with_no_cipher_the_client_accepts_is_a_tls_failure() {
    if !common::has_tool("openssl", "version") || !common::has_tool("python3", "--version") {
        common::skip("openssl or python3 not installed (apt-get install openssl python3)");
        return;
    }
    let dir = common::scratch_dir("errors-tls");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    // TLS 1.2 with a static-RSA cipher alone: rustls offers none of it.
    const SERVER: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
c.maximum_version = ssl.TLSVersion.TLSv1_2
c.set_ciphers("AES128-SHA")
c.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut child = Command::new("python3")
        .args(["-c", SERVER])
        .args([&cert, &key])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    let stdout = child.stdout.take().unwrap();
    let _server = Killed(child);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).unwrap();
    let port: u16 = line.trim().parse().expect("python printed its port");
    let (_, r, _) = run_json(
        &format!("https://localhost:{port}/"),
        &["-c", "2", "-z", "1s", "--insecure"],
    );
    assert_only(&r, "tls_failure");
    let ev = evidence(&r, "tls_failure");
    assert!(ev.contains("TLS handshakes failed"), "{ev}");
}

#[test]
fn a_test_servers_429_with_retry_after_is_rate_limited() {
    // Every other request is refused with a 429 and a Retry-After: a limiter nginx cannot
    // make this exact.
    let server = common::serve(|i| {
        if i % 2 == 0 {
            Reply::Send(common::ok("ok"))
        } else {
            Reply::Send(
                b"HTTP/1.1 429 Too Many Requests\r\nServer: limiter/1\r\nRetry-After: 7\r\nContent-Length: 0\r\n\r\n"
                    .to_vec(),
            )
        }
    });
    let (_, r, _) = run_json(&server.url("/"), &["-c", "2", "-z", "1s"]);
    assert_only(&r, "rate_limited");
    let ev = evidence(&r, "rate_limited");
    assert!(ev.contains("Retry-After: 7"), "{ev}");
    assert!(ev.contains("Server: limiter/1"), "{ev}");
}

#[test]
fn a_healthy_run_names_no_error_cause() {
    let Some(r) = run_nginx(
        "errors-healthy",
        "worker_connections 1024;",
        "",
        HELLO,
        &["-c", "8", "-z", "2s"],
    ) else {
        return;
    };
    assert_eq!(r["summary"]["errors"], 0, "{}", r["errors"]);
    let named: Vec<String> = causes(&r)
        .into_iter()
        .filter(|c| ERROR_CAUSES.contains(&c.as_str()))
        .collect();
    assert_eq!(named, Vec::<String>::new(), "{:#}", r["diagnosis"]);
}

#[test]
fn errors_no_rule_explains_are_said_so_not_as_no_spike() {
    // One request in 20 is dropped unanswered on a connection that served before: no cap (not
    // the first on its connection), no crash (nothing refused), no limit (no graceful close).
    let server = common::serve(|i| {
        if i % 20 == 19 {
            Reply::Close
        } else {
            Reply::Send(common::ok("ok"))
        }
    });
    let out = common::tailscope(&["run", &server.url("/"), "-c", "2", "-z", "1s"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let diagnosis = text.split("Diagnosis:").nth(1).unwrap_or_default();
    assert!(diagnosis.contains("errors, no cause found"), "{text}");
    assert!(!diagnosis.contains("no spike cause found"), "{text}");
}

/// TCP connections established to 127.0.0.1:`port`, from /proc/net/tcp (the server's ends).
fn established_to(port: u16) -> usize {
    let local = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&local.as_str()) && f.get(3) == Some(&"01")
        })
        .count()
}

/// nginx with a master and one worker, serving [`HELLO`].
fn nginx_with_a_master(scratch: &Path) -> Option<(Killed, u16)> {
    nginx_as(
        scratch,
        "master_process on;",
        "worker_connections 1024;",
        "",
        HELLO,
    )
}

/// Waits until the load is on (8 connections established to `port`: a slow start on a busy
/// machine must not put a kill before the first request, which would leave nothing to see),
/// and a second into it.
fn a_second_into_the_load(port: u16) {
    let started = std::time::Instant::now();
    while established_to(port) < 8 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1000));
}

/// Sends `sig` (`-9`, `-STOP`) to `pid`.
fn signal(sig: &str, pid: u64) {
    let sent = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill {sig} {pid}");
}

/// SIGKILLs nginx's one worker alone: its master keeps the listener and starts another.
fn kill_the_worker(master_pid: u32) {
    let workers = common::children(master_pid);
    assert_eq!(workers.len(), 1, "one nginx worker: {workers:?}");
    signal("-9", workers[0]);
}

#[test]
fn an_nginx_worker_killed_and_respawned_is_a_crash_with_the_listener_kept() {
    let scratch = common::scratch_dir("errors-worker");
    let Some((mut master, port)) = nginx_with_a_master(scratch.path()) else {
        return;
    };
    let master_pid = master.0.id();
    let killer = std::thread::spawn(move || {
        a_second_into_the_load(port);
        kill_the_worker(master_pid);
    });
    let (_, r, stderr) = run_json(
        &format!("http://127.0.0.1:{port}/"),
        &["-c", "8", "-z", "3s"],
    );
    killer.join().unwrap();
    // SIGTERM, not the guard's SIGKILL: the master then stops its worker too.
    let _ = Command::new("kill")
        .args(["-TERM", &master_pid.to_string()])
        .status();
    common::wait_bounded(&mut master.0, Duration::from_secs(5));
    assert!(r["diagnosis"].is_array(), "{stderr}");
    assert_only(&r, "server_crash_or_restart");
    let ev = evidence(&r, "server_crash_or_restart");
    eprintln!("evidence: {ev}");
    assert!(ev.contains("while the listener stayed"), "{ev}");
}

/// CI's second failure made certain: the generator held off its CPU (SIGSTOP) when the worker
/// dies, so every connection has its last response waiting unread and no request in flight:
/// the kernel closes all 8 with a FIN, and not one request fails. Still the crash, with the
/// generator's stop named as the generator's.
#[test]
fn a_worker_killed_while_the_generator_was_stopped_is_still_a_crash() {
    let scratch = common::scratch_dir("errors-worker-stopped");
    let Some((mut master, port)) = nginx_with_a_master(scratch.path()) else {
        return;
    };
    let json = scratch.path().join("r.json");
    let run = common::tailscope_command()
        .args([
            "run",
            &format!("http://127.0.0.1:{port}/"),
            "-c",
            "8",
            "-z",
            "3s",
        ])
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    a_second_into_the_load(port);
    // Nothing between the stop and the go on may panic: a stopped tailscope would never end.
    let workers = common::children(master.0.id());
    signal("-STOP", u64::from(run.id()));
    std::thread::sleep(Duration::from_millis(200));
    let killed = workers.len() == 1
        && Command::new("kill")
            .args(["-9", &workers[0].to_string()])
            .status()
            .is_ok_and(|s| s.success());
    std::thread::sleep(Duration::from_millis(300));
    signal("-CONT", u64::from(run.id()));
    let out = run.wait_with_output().unwrap();
    assert!(killed, "one nginx worker killed: {workers:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let _ = Command::new("kill")
        .args(["-TERM", &master.0.id().to_string()])
        .status();
    common::wait_bounded(&mut master.0, Duration::from_secs(5));
    let r: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json).unwrap_or_else(|e| panic!("no report ({e}): {stderr}")),
    )
    .unwrap();
    let ev = evidence(&r, "server_crash_or_restart");
    assert!(
        ev.contains("8 established connections of the 8"),
        "{:#}\n{}",
        r["diagnosis"],
        r["errors"]
    );
    assert!(ev.contains("while the listener stayed"), "{ev}");
    // The stop was the generator's, and is said to be.
    assert!(
        causes(&r).contains(&"generator_saturated".to_string()),
        "{:#}",
        r["diagnosis"]
    );
}
