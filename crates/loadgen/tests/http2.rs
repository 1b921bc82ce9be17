//! HTTP/2 (`--http2`) against an h2 server of the test's own (the `h2` crate's server side):
//! -n is exact over several streams per connection, the server's stream limit is held and
//! reported, reset streams are counted as rst_stream, GOAWAY is counted once per connection
//! however its streams end, a stream that never answers times out alone, and open loop keeps
//! its schedule. tests/tls.rs (the binary's) runs nginx's h2.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tailscope_loadgen::{ErrorKind, Pace, Plan, RunControl, RunTotals, Stop};
use tailscope_report::document::Report;

/// How the test server answers.
#[derive(Clone, Copy, Default)]
struct Mode {
    /// SETTINGS_MAX_CONCURRENT_STREAMS it announces (none: h2's default, unlimited).
    max_streams: Option<u32>,
    /// Reset every Nth stream (RST_STREAM INTERNAL_ERROR) instead of answering.
    reset_every: u64,
    /// Never answer.
    silent: bool,
    /// Send GOAWAY (graceful: NO_ERROR) on a connection once it accepted this many streams.
    goaway_after: u64,
    /// That GOAWAY carries an error (ENHANCE_YOUR_CALM) and the connection closes at once.
    goaway_error: bool,
}

#[derive(Default)]
struct Seen {
    requests: AtomicU64,
    resets: AtomicU64,
    active: AtomicU64,
    most_active: AtomicU64,
    /// Connections whose HTTP/2 handshake was done.
    connections: AtomicU64,
    /// Connections the server sent GOAWAY on.
    goaways: AtomicU64,
    /// Every request's path and query, with its body's length.
    targets: std::sync::Mutex<Vec<(String, usize)>>,
    /// The Authorization header of the last request that had one.
    authorization: std::sync::Mutex<Option<String>>,
}

/// An h2c (prior knowledge) server on 127.0.0.1; returns its port and what it saw.
fn server(mode: Mode) -> (u16, Arc<Seen>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let stats = seen.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(serve(tcp, mode, stats.clone()));
            }
        });
    });
    (port, seen)
}

async fn serve(tcp: tokio::net::TcpStream, mode: Mode, seen: Arc<Seen>) {
    let mut builder = h2::server::Builder::new();
    if let Some(m) = mode.max_streams {
        builder.max_concurrent_streams(m);
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(tcp).await else {
        return;
    };
    seen.connections.fetch_add(1, Ordering::SeqCst);
    let mut accepted = 0;
    while let Some(Ok((request, mut respond))) = conn.accept().await {
        accepted += 1;
        if accepted == mode.goaway_after {
            seen.goaways.fetch_add(1, Ordering::SeqCst);
            if mode.goaway_error {
                conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
            } else {
                conn.graceful_shutdown();
            }
        }
        let n = seen.requests.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(a) = request.headers().get(http::header::AUTHORIZATION) {
            *seen.authorization.lock().unwrap() = Some(a.to_str().unwrap_or("").to_string());
        }
        let seen = seen.clone();
        tokio::spawn(async move {
            let target = request.uri().path_and_query().map(|p| p.to_string());
            let mut body = request.into_body();
            let mut length = 0;
            while let Some(Ok(data)) = body.data().await {
                length += data.len();
                let _ = body.flow_control().release_capacity(data.len());
            }
            seen.targets
                .lock()
                .unwrap()
                .push((target.unwrap_or_default(), length));
            let active = seen.active.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most_active.fetch_max(active, Ordering::SeqCst);
            if mode.silent {
                std::future::pending::<()>().await;
            }
            // A little work, so that streams overlap.
            tokio::time::sleep(Duration::from_millis(2)).await;
            seen.active.fetch_sub(1, Ordering::SeqCst);
            if mode.reset_every > 0 && n % mode.reset_every == 0 {
                seen.resets.fetch_add(1, Ordering::SeqCst);
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                return;
            }
            let head = http::Response::builder().status(200).body(()).unwrap();
            if let Ok(mut body) = respond.send_response(head, false) {
                let _ = body.send_data(Bytes::from_static(b"hello"), true);
            }
        });
    }
}

fn plan(port: u16, streams: usize) -> Plan {
    let mut plan = Plan::new(&format!("http://127.0.0.1:{port}/")).unwrap();
    plan.http2 = true;
    plan.streams = streams;
    plan.connections = 2;
    plan.threads = 1;
    plan.timeout = Duration::from_secs(5);
    plan
}

fn run(plan: &Plan) -> RunTotals {
    plan.validate().unwrap();
    tailscope_loadgen::run(plan, &RunControl::new(), |_| {}).unwrap()
}

#[test]
fn n_is_exact_over_many_streams_and_the_report_says_h2c() {
    let (port, seen) = server(Mode::default());
    let mut plan = plan(port, 8);
    plan.stop = Stop::Requests(1000);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 1000, "{:?}", totals.counters);
    assert_eq!(totals.counters.error_total(), 0);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1000);
    assert!(
        seen.most_active.load(Ordering::SeqCst) > 2,
        "several streams at once on 2 connections"
    );
    assert!(seen.most_active.load(Ordering::SeqCst) <= 16);
    let report = Report::new(&plan, &totals);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["config"]["protocol"], "h2c");
    assert_eq!(json["config"]["streams"], 8);
    assert!(json["config"]["tls"].is_null());
    assert!(report.to_text().contains("h2c, 8 streams per connection"));
}

#[test]
fn a_request_mix_is_sent_over_h2_with_its_weights_bodies_and_placeholders() {
    use tailscope_loadgen::mix::RequestSpec;
    let (port, seen) = server(Mode::default());
    let mut plan = plan(port, 8);
    plan.stop = Stop::Requests(400);
    let spec = |name: &str, method: &str, target: &str, body: &[u8], weight| RequestSpec {
        name: name.into(),
        method: method.into(),
        target: target.into(),
        headers: vec![("X-Test".into(), "1".into())],
        body: body.to_vec(),
        weight,
    };
    plan.requests = vec![
        spec("get", "GET", "/a?id={seq}", b"", 3),
        spec("post", "POST", "/b", b"0123456789", 1),
    ];
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 400, "{:?}", totals.counters);
    let targets = seen.targets.lock().unwrap().clone();
    let a: Vec<&(String, usize)> = targets
        .iter()
        .filter(|(t, _)| t.starts_with("/a?id="))
        .collect();
    let b = targets
        .iter()
        .filter(|(t, n)| t == "/b" && *n == 10)
        .count();
    assert_eq!((a.len(), b), (300, 100), "{targets:?}");
    // {seq}: every GET a value of its own.
    let ids: std::collections::HashSet<&String> = a.iter().map(|(t, _)| t).collect();
    assert_eq!(ids.len(), 300);
    // Each name's figures apart, in the mix's order.
    let by_name: Vec<u64> = totals
        .by_request
        .iter()
        .map(|r| r.as_ref().map_or(0, |r| r.counters.successes))
        .collect();
    assert_eq!(by_name, [300, 100]);
}

#[test]
fn url_credentials_are_sent_as_basic_auth_over_h2() {
    let (port, seen) = server(Mode::default());
    let mut plan = plan(port, 2);
    plan.set_url(&format!("http://u:p@127.0.0.1:{port}/"))
        .unwrap();
    plan.stop = Stop::Requests(10);
    assert_eq!(run(&plan).counters.successes, 10);
    // base64("u:p")
    assert_eq!(
        seen.authorization.lock().unwrap().as_deref(),
        Some("Basic dTpw")
    );
    plan.headers
        .push(("Authorization".into(), "Bearer mine".into()));
    run(&plan);
    assert_eq!(
        seen.authorization.lock().unwrap().as_deref(),
        Some("Bearer mine"),
        "the user's own header wins"
    );
}

#[test]
fn the_servers_stream_limit_is_held_and_reported() {
    let (port, seen) = server(Mode {
        max_streams: Some(3),
        ..Mode::default()
    });
    let mut plan = plan(port, 50);
    plan.connections = 1;
    plan.stop = Stop::Requests(300);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 300, "{:?}", totals.counters);
    assert!(seen.most_active.load(Ordering::SeqCst) <= 3);
    assert_eq!(totals.counters.transport.h2_max_streams, Some(3));
}

#[test]
fn streams_past_a_limit_of_100_or_more_wait_for_the_server_s_settings() {
    // Before the server's SETTINGS are read the limit is taken as 100 (as nghttp2 does):
    // a first burst of 1,024 streams into a server that allows 120 was refused by the
    // hundreds and retried in a storm.
    let (port, seen) = server(Mode {
        max_streams: Some(120),
        ..Mode::default()
    });
    let mut plan = plan(port, 1024);
    plan.connections = 1;
    plan.stop = Stop::Requests(3_000);
    let totals = run(&plan);
    let t = &totals.counters.transport;
    assert_eq!(totals.counters.successes, 3_000, "{:?}", totals.counters);
    assert_eq!((t.h2_retried, t.h2_resets), (0, 0), "{t:?}");
    assert_eq!(t.h2_max_streams, Some(120));
    assert!(seen.most_active.load(Ordering::SeqCst) <= 120);
}

/// What python's http.server answers to the h2c preface ("PRI * HTTP/2.0").
const HTTP1_ONLY: &[u8] = b"HTTP/1.0 505 HTTP Version Not Supported\r\nContent-Length: 0\r\n\r\n";

/// A server that reads, writes `answer` and closes; returns its port and how many
/// connections it accepted.
fn answering(answer: &'static [u8]) -> (u16, Arc<AtomicU64>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for mut tcp in listener.incoming().flatten() {
            use std::io::{Read, Write};
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 256];
            let _ = tcp.read(&mut buf);
            let _ = tcp.write_all(answer);
        }
    });
    (port, accepted)
}

#[test]
fn an_http1_server_s_answer_to_h2c_is_a_bad_response_not_a_goaway() {
    let (port, _) = answering(HTTP1_ONLY);
    let mut plan = plan(port, 4);
    plan.stop = Stop::Requests(20);
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.successes, 0);
    assert!(c.errors[ErrorKind::BadResponse.index()] > 0, "{c:?}");
    assert_eq!(c.errors[ErrorKind::Goaway.index()], 0, "{c:?}");
    assert_eq!(c.transport.h2_goaways, 0);
    let text = Report::new(&plan, &totals).to_text();
    assert!(text.contains("does the server speak h2c?"), "{text}");
}

#[test]
fn a_connection_that_answered_nothing_is_backed_off_like_a_refused_connect() {
    // Its handshake "succeeds" (h2's client handshake only writes the preface), and it
    // reconnected at once: 19,408 bad_response in a second from one run.
    let (port, accepted) = answering(HTTP1_ONLY);
    let mut plan = plan(port, 4);
    plan.connections = 1;
    plan.stop = Stop::Duration(Duration::from_secs(1));
    let totals = run(&plan);
    let c = &totals.counters;
    let connections = accepted.load(Ordering::SeqCst);
    // Back-offs of 1, 2, 4 ... 64 ms, then 100 ms: ~16 connects in a second, fewer on a
    // loaded machine; without them, thousands.
    assert!(
        (2..=40).contains(&connections),
        "{connections} connections in 1 s: {c:?}"
    );
    assert_eq!(c.successes, 0);
    assert!(
        c.errors[ErrorKind::BadResponse.index()] <= 4 * connections,
        "{c:?}"
    );
    let text = Report::new(&plan, &totals).to_text();
    assert!(text.contains("does the server speak h2c?"), "{text}");
}

#[test]
fn h2c_to_a_tls_port_says_the_port_speaks_tls() {
    // An OpenSSL server's alert (protocol_version) to the preface.
    let (port, _) = answering(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]);
    let mut plan = plan(port, 4);
    plan.stop = Stop::Requests(20);
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.successes, 0);
    let bad = c.errors[ErrorKind::BadResponse.index()];
    assert!(bad > 0, "{c:?}");
    assert_eq!(c.transport.tls_answers, bad);
    let why = Report::new(&plan, &totals).no_response_reason().unwrap();
    assert!(
        why.contains(&format!(
            "the port speaks TLS; use https://127.0.0.1:{port}/"
        )),
        "{why}"
    );
}

#[test]
fn reset_streams_are_counted_as_rst_stream() {
    let (port, seen) = server(Mode {
        reset_every: 3,
        ..Mode::default()
    });
    let mut plan = plan(port, 4);
    plan.stop = Stop::Requests(300);
    let totals = run(&plan);
    let resets = seen.resets.load(Ordering::SeqCst);
    assert_eq!(resets, 100);
    assert_eq!(totals.counters.errors[ErrorKind::RstStream.index()], resets);
    assert_eq!(totals.counters.successes, 200);
    assert_eq!(totals.counters.transport.h2_resets, resets);
}

#[test]
fn every_connection_that_got_goaway_is_counted_and_its_requests_retried() {
    let (port, seen) = server(Mode {
        goaway_after: 10,
        ..Mode::default()
    });
    let mut plan = plan(port, 4);
    plan.stop = Stop::Requests(400);
    let totals = run(&plan);
    let c = &totals.counters;
    // A graceful GOAWAY loses nothing: streams past its last one are sent again.
    assert_eq!(c.successes, 400, "{c:?}");
    assert_eq!(c.error_total(), 0, "{c:?}");
    let sent = seen.goaways.load(Ordering::SeqCst);
    assert!(sent >= 30, "the server sent GOAWAY on {sent} connections");
    // Each connection's GOAWAY once; only those that came as the run ended (at most one
    // per connection) may go unseen.
    let counted = c.transport.h2_goaways;
    assert!(
        counted <= sent && counted + plan.connections as u64 >= sent,
        "counted {counted} GOAWAYs, the server sent {sent}"
    );
}

#[test]
fn a_goaway_with_an_error_is_counted_once_and_fails_the_streams_it_ends_as_goaway() {
    let (port, seen) = server(Mode {
        goaway_after: 10,
        goaway_error: true,
        ..Mode::default()
    });
    let mut plan = plan(port, 4);
    plan.stop = Stop::Requests(400);
    let totals = run(&plan);
    let c = &totals.counters;
    // Its streams end with the connection's close (reset by the server), not a GOAWAY
    // frame of their own: they are the GOAWAY's all the same.
    let goaway = c.errors[ErrorKind::Goaway.index()];
    assert!(goaway > 0, "{c:?}");
    assert_eq!(c.successes + goaway, 400, "{c:?}");
    let sent = seen.goaways.load(Ordering::SeqCst);
    let counted = c.transport.h2_goaways;
    assert!(
        counted <= sent && counted + plan.connections as u64 >= sent && sent >= 20,
        "counted {counted} GOAWAYs, the server sent {sent}"
    );
}

#[test]
fn idle_connections_are_held_over_h2_and_slow_ones_send_a_header_block_that_never_ends() {
    use tailscope_loadgen::conns::HeldKind;
    let (port, seen) = server(Mode::default());
    let mut plan = plan(port, 2);
    plan.stop = Stop::Duration(Duration::from_millis(500));
    plan.connections = 1;
    plan.idle_conns = 3;
    let totals = run(&plan);
    let idle = &totals.counters.held[HeldKind::Idle.index()];
    assert_eq!(
        (idle.opened, idle.connect_failures, idle.open_at_end),
        (3, 0, 3),
        "{idle:?}"
    );
    // Each held connection did HTTP/2's handshake, beside the load's one.
    assert_eq!(seen.connections.load(Ordering::SeqCst), 4);

    // A slow one: its preface and SETTINGS make a connection for the h2 server, and its
    // header block, a byte a millisecond, goes past the HEADERS frame (about 1.1 kB) into
    // CONTINUATION frames. The server's HPACK decoder reads each frame whole: a field it
    // cannot decode is a connection error (a GOAWAY and the close), which would count as
    // closed_by_server; and the block never ends, so the server sees no request from it.
    let (port, seen) = server(Mode::default());
    let mut plan = crate::plan(port, 2);
    plan.stop = Stop::Duration(Duration::from_millis(4000));
    plan.connections = 1;
    plan.slow_conns = 1;
    plan.slow_interval = Duration::from_millis(1);
    let totals = run(&plan);
    let slow = &totals.counters.held[HeldKind::Slow.index()];
    assert_eq!(
        (
            slow.opened,
            slow.connect_failures,
            slow.closed_by_server,
            slow.failed,
            slow.open_at_end
        ),
        (1, 0, 0, 0, 1),
        "{slow:?}"
    );
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
    assert_eq!(
        seen.requests.load(Ordering::SeqCst),
        totals.counters.successes,
        "the slow connection's block ended"
    );
}

#[test]
fn a_stream_that_never_answers_times_out_alone() {
    let (port, _) = server(Mode {
        silent: true,
        ..Mode::default()
    });
    let mut plan = plan(port, 4);
    plan.connections = 1;
    plan.stop = Stop::Requests(4);
    plan.timeout = Duration::from_millis(300);
    let totals = run(&plan);
    assert_eq!(
        totals.counters.errors[ErrorKind::Timeout.index()],
        4,
        "{:?}",
        totals.counters
    );
}

#[test]
fn open_loop_keeps_its_schedule() {
    let (port, _) = server(Mode::default());
    let mut plan = plan(port, 4);
    plan.pace = Pace::Rate(400.0);
    plan.stop = Stop::Duration(Duration::from_secs(1));
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.error_total(), 0, "{c:?}");
    // 400 slots fell due in the second; each is a success or, at the very end, unfinished.
    assert!((390..=410).contains(&(c.successes + c.unfinished)), "{c:?}");
}

#[test]
fn http2_settings_that_cannot_go_together_are_refused() {
    let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
    plan.streams = 4;
    assert!(plan.validate().unwrap_err().to_string().contains("--http2"));
    plan.http2 = true;
    plan.pipeline = 2;
    assert!(plan
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--streams"));
    plan.pipeline = 1;
    plan.keepalive = false;
    assert!(plan.validate().is_err());
}

/// Streams sent with a fresh connection's first batch waited for its set-up: each shows the
/// handshake in its breakdown, and the connect histogram still counts one per connection (a
/// newcomer's slowest h2 requests showed 97 ms with 18 ms of it accounted for).
#[test]
fn the_first_batch_on_a_connection_carries_its_connect_time() {
    let (port, _seen) = server(Mode::default());
    let mut plan = plan(port, 8);
    plan.stop = Stop::Requests(16);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 16, "{:?}", totals.counters);
    assert_eq!(
        totals.histograms.connect.len(),
        2,
        "one connect per connection"
    );
    assert!(!totals.slowest.is_empty());
    for s in &totals.slowest {
        assert!(s.connect_us.is_some(), "{s:?}");
    }
    let openers = totals
        .slowest
        .iter()
        .filter(|s| s.first_on_connection)
        .count();
    assert!(openers <= 2, "{:?}", totals.slowest);
    assert!(
        totals.slowest.len() > openers,
        "streams that only waited are shown too: {:?}",
        totals.slowest
    );
}
