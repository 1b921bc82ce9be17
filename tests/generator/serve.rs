//! End-to-end tests of `tailscope serve` with a plain std `TcpStream` client.
//! Each test skips (with a message) where io_uring is unavailable.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A `tailscope serve` child, killed on drop.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    /// Starts the server on a free port; `None` (after saying why) where io_uring is
    /// unavailable.
    fn start(extra: &[&str]) -> Option<Serve> {
        common::spawn_serve(extra).map(|(child, addr)| Serve { child, addr })
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one Content-Length response; `None` at end of file.
fn read_response(r: &mut BufReader<TcpStream>, head_request: bool) -> Option<Response> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let status = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))?
        .1
        .parse()
        .ok()?;
    let mut body = vec![0; if head_request { 0 } else { len }];
    r.read_exact(&mut body).ok()?;
    Some(Response {
        status,
        headers,
        body,
    })
}

fn get(server: &Serve, request: &[u8]) -> Response {
    let mut s = server.connect();
    s.write_all(request).unwrap();
    read_response(&mut BufReader::new(s), request.starts_with(b"HEAD")).expect("a response")
}

/// Whether the server closed the connection without sending anything more. A reset counts:
/// a server that closes a socket with bytes it has not read (a slowloris' trickle that came
/// after its last read, or a write of ours after the close) makes the kernel send RST, not
/// FIN, and which of the two comes depends on when the server's sweep ran (CI saw both).
fn closed_after(mut r: BufReader<TcpStream>) -> bool {
    let mut rest = Vec::new();
    match r.read_to_end(&mut rest) {
        Ok(_) => rest.is_empty(),
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset && rest.is_empty(),
    }
}

#[test]
fn endpoints_answer_as_techempower_requires() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    for path in ["/plaintext", "/"] {
        let r = get(
            &server,
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
        );
        assert_eq!(r.status, 200);
        assert_eq!(r.body, b"Hello, World!");
        assert_eq!(r.header("Server"), Some("tailscope"));
        assert_eq!(r.header("Content-Type"), Some("text/plain"));
        assert_eq!(r.header("Content-Length"), Some("13"));
        assert!(
            r.header("Date")
                .is_some_and(|d| d.ends_with(" GMT") && d.len() == 29),
            "{:?}",
            r.header("Date")
        );
    }
    let r = get(&server, b"GET /json HTTP/1.1\r\n\r\n");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v, serde_json::json!({"message": "Hello, World!"}));
    let r = get(&server, b"GET /bytes/6000 HTTP/1.1\r\n\r\n");
    assert_eq!(r.body.len(), 6000);
    let r = get(&server, b"HEAD /plaintext HTTP/1.1\r\n\r\n");
    assert_eq!(
        (r.status, r.header("Content-Length"), r.body.len()),
        (200, Some("13"), 0)
    );
    let r = get(&server, b"GET /nope HTTP/1.1\r\n\r\n");
    assert_eq!(r.status, 404);
    let r = get(
        &server,
        b"POST /json HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    );
    assert_eq!(r.status, 405);
}

#[test]
fn delay_does_not_hold_up_other_connections() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let started = Instant::now();
    let mut slow = server.connect();
    slow.write_all(b"GET /delay/600 HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let fast = get(&server, b"GET /plaintext HTTP/1.1\r\n\r\n");
    assert_eq!(fast.status, 200);
    slow.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        matches!(slow.read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the delayed response is not there before the fast one"
    );
    slow.set_nonblocking(false).unwrap();
    let r = read_response(&mut BufReader::new(slow), false).unwrap();
    assert_eq!(r.body, b"Hello, World!");
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "answered no earlier than asked"
    );
}

#[test]
fn date_header_advances() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let first = get(&server, b"GET / HTTP/1.1\r\n\r\n")
        .header("Date")
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(1300));
    let second = get(&server, b"GET / HTTP/1.1\r\n\r\n")
        .header("Date")
        .unwrap()
        .to_string();
    assert_ne!(first, second);
}

#[test]
fn sixteen_pipelined_requests_are_answered_in_order() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let mut s = server.connect();
    let mut batch = Vec::new();
    for i in 0..16 {
        let path = match i % 4 {
            0 => "/plaintext".to_string(),
            1 => "/json".to_string(),
            2 => format!("/bytes/{i}"),
            _ => "/delay/5".to_string(),
        };
        batch.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    }
    s.write_all(&batch).unwrap();
    let mut r = BufReader::new(s);
    for i in 0..16 {
        let resp = read_response(&mut r, false).unwrap_or_else(|| panic!("response {i}"));
        match i % 4 {
            0 | 3 => assert_eq!(resp.body, b"Hello, World!", "response {i}"),
            1 => assert!(resp.body.starts_with(b"{\"message\""), "response {i}"),
            _ => assert_eq!(resp.body.len(), i, "response {i}"),
        }
    }
}

#[test]
fn http10_keep_alive_is_echoed_and_kept_open_and_plain_http10_is_closed() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let mut r = BufReader::new(server.connect());
    for _ in 0..3 {
        r.get_mut()
            .write_all(b"GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let resp = read_response(&mut r, false).expect("kept open");
        assert_eq!(resp.status, 200);
        assert_eq!(resp.header("Connection"), Some("keep-alive"));
        assert_eq!(resp.body, b"Hello, World!");
    }
    r.get_mut()
        .write_all(b"GET /plaintext HTTP/1.0\r\n\r\n")
        .unwrap();
    let resp = read_response(&mut r, false).unwrap();
    assert_eq!(resp.header("Connection"), Some("close"));
    assert!(
        closed_after(r),
        "an HTTP/1.0 request without keep-alive closes"
    );
}

/// `ab -k` speaks HTTP/1.0 with `Connection: Keep-Alive` and waits for a close unless the
/// answer echoes it; every one of its requests must reuse a connection.
#[test]
fn apachebench_keep_alive_completes() {
    if Command::new("ab").arg("-V").output().is_err() {
        common::skip("ab not installed (apt-get install apache2-utils)");
        return;
    }
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let url = format!("http://{}/plaintext", server.addr);
    let out = Command::new("ab")
        .args(["-k", "-n", "20000", "-c", "32", "-s", "20", &url])
        .output()
        .expect("ab runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ab failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {name} in {text}"))
    };
    assert_eq!(field("Complete requests:"), "20000", "{text}");
    assert_eq!(field("Failed requests:"), "0", "{text}");
    assert_eq!(field("Keep-Alive requests:"), "20000", "{text}");
}

#[test]
fn a_request_split_across_three_writes_is_reassembled() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let mut s = server.connect();
    s.set_nodelay(true).unwrap();
    for part in [&b"GET /js"[..], b"on HTTP/1.1\r\nHo", b"st: x\r\n\r\n"] {
        s.write_all(part).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let r = read_response(&mut BufReader::new(s), false).unwrap();
    assert_eq!(r.status, 200);
    assert!(r.body.starts_with(b"{\"message\""));
}

#[test]
fn bad_requests_are_answered_and_closed() {
    let Some(server) = Serve::start(&[]) else {
        return;
    };
    let mut big = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 10_000));
    big.extend_from_slice(b"\r\n\r\n");
    let cases: [(&[u8], u16); 4] = [
        (b"BLAH\r\n\r\n", 400),
        (&big, 431),
        (b"POST / HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n", 413),
        (
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            501,
        ),
    ];
    for (request, status) in cases {
        let mut s = server.connect();
        s.write_all(request).unwrap();
        let mut r = BufReader::new(s);
        let resp = read_response(&mut r, false).unwrap();
        assert_eq!(resp.status, status);
        assert_eq!(resp.header("Connection"), Some("close"));
        assert!(closed_after(r), "closed after {status}");
    }
    assert_eq!(
        get(&server, b"GET / HTTP/1.1\r\n\r\n").status,
        200,
        "still answering"
    );
}

#[test]
fn static_files_and_path_traversal() {
    let scratch = common::scratch_dir("serve-static");
    let dir = scratch.path();
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::write(dir.join("www/page.html"), "<p>seed 001</p>").unwrap();
    std::fs::write(dir.join("secret.txt"), "TOP SECRET").unwrap();
    let www = dir.join("www");
    let Some(server) = Serve::start(&["--static", www.to_str().unwrap()]) else {
        return;
    };
    let r = get(&server, b"GET /static/page.html HTTP/1.1\r\n\r\n");
    assert_eq!(
        (r.status, r.body.as_slice()),
        (200, &b"<p>seed 001</p>"[..])
    );
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    for attack in [
        "../secret.txt",
        "%2e%2e/secret.txt",
        "..%2fsecret.txt",
        "%2E%2E%2Fsecret.txt",
        "sub/../../secret.txt",
        "page.html%00.txt",
    ] {
        let r = get(
            &server,
            format!("GET /static/{attack} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(matches!(r.status, 400 | 404), "{attack}: {}", r.status);
        assert!(
            !String::from_utf8_lossy(&r.body).contains("SECRET"),
            "{attack}"
        );
    }
    assert_eq!(
        get(&server, b"GET /static/missing HTTP/1.1\r\n\r\n").status,
        404
    );
}

#[test]
fn slowloris_connections_are_closed_and_the_server_goes_on() {
    let Some(server) = Serve::start(&["--header-timeout", "300ms"]) else {
        return;
    };
    let mut s = server.connect();
    s.write_all(b"GET / HTTP/1.1\r\nX-Slow: ").unwrap();
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200));
        let _ = s.write_all(b"a");
    }
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        closed_after(BufReader::new(s)),
        "a trickled head is cut off"
    );
    assert_eq!(get(&server, b"GET / HTTP/1.1\r\n\r\n").status, 200);
}

#[test]
fn graceful_shutdown_finishes_in_flight_responses() {
    let Some(mut server) = Serve::start(&[]) else {
        return;
    };
    let mut s = server.connect();
    s.write_all(b"GET /delay/400 HTTP/1.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let ok = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    let r =
        read_response(&mut BufReader::new(s), false).expect("the in-flight response is finished");
    assert_eq!(r.body, b"Hello, World!");
    let status = server.child.wait().unwrap();
    // Exit 0 after finishing the response. (Whether the port still answers is not checked:
    // a parallel test's server may be given the same port as soon as it is free.)
    assert_eq!(status.code(), Some(0));
}

#[test]
fn injected_stalls_show_in_the_generator_report() {
    let Some(server) = Serve::start(&["--stall-every", "300ms", "--stall-for", "200ms"]) else {
        return;
    };
    let url = format!("http://{}/plaintext", server.addr);
    let (code, r, stderr) = common::run_json(&url, &["-z", "1s", "-c", "4", "--threads", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(common::n(&r["summary"]["errors"]), 0);
    assert!(
        common::n(&r["latency_us"]["max"]) >= 150_000,
        "a 200 ms stall shows: {}",
        r["latency_us"]
    );
}

#[test]
fn serve_rejects_bad_flags() {
    let out = common::tailscope(&["serve", "--threads", "0", "--addr", "127.0.0.1:0"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::tailscope(&["serve", "--stall-every", "1s"]);
    assert_eq!(out.status.code(), Some(2));
    let out = common::tailscope(&[
        "serve",
        "--static",
        "/nonexistent/dir",
        "--addr",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dir"));
}

/// `--cpus LIST` without `--threads` starts one worker per listed CPU: two workers pinned to
/// one CPU took turns on it, and the README's stall example read as CPU contention.
#[test]
fn cpus_without_threads_start_one_worker_per_listed_cpu() {
    let first = tailscope_targets::cpus::available()[0].to_string();
    let Some((mut child, _addr)) = common::spawn_serve_as(&["--cpus", &first]) else {
        return;
    };
    let workers = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .is_ok_and(|c| c.starts_with("tailscope-srv"))
        })
        .count();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(workers, 1, "one worker for one CPU");
}
