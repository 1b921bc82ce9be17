//! https:// against a TLS server of the test's own (rustls, certificates made by rcgen): the
//! handshake is its own phase, sessions are resumed on reconnect unless told not to, a
//! certificate nobody trusts fails as `certificate` with its reason, --cacert and --insecure
//! let it through, a client certificate is offered (and one refused after a TLS 1.3 handshake
//! is a certificate error), idle and slow connections are held over TLS, and bad files are
//! refused before the run.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tailscope_loadgen::conns::HeldKind;
use tailscope_loadgen::{EngineChoice, ErrorKind, Plan, RunControl, RunTotals, Stop};
use tailscope_report::document::Report;

/// A CA, a server certificate it signed for localhost and 127.0.0.1, and a client
/// certificate it signed, written as PEM into a directory of the test's own.
struct Pki {
    dir: PathBuf,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
    ca_der: CertificateDer<'static>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
        let client = CertificateParams::new(vec!["client".into()]).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client_cert = client.signed_by(&client_key, &ca_cert, &ca_key).unwrap();
        std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.join("server.pem"), leaf_cert.pem()).unwrap();
        std::fs::write(dir.join("client.pem"), client_cert.pem()).unwrap();
        std::fs::write(dir.join("client.key"), client_key.serialize_pem()).unwrap();
        std::fs::write(
            dir.join("garbled.pem"),
            "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        Pki {
            dir,
            server_chain: vec![leaf_cert.der().clone()],
            server_key: leaf_key.serialize_der(),
            ca_der: ca_cert.der().clone(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// How the test server treats its connections.
#[derive(Clone, Copy, Default)]
struct ServerMode {
    /// Close every connection after one response (every request is a reconnect).
    close_each: bool,
    /// Require a client certificate signed by the CA.
    client_auth: bool,
    /// Offer HTTP/1.1 alone in ALPN, as nginx does without `http2 on;` (a client that asks
    /// for h2 alone gets the alert NoApplicationProtocol). Without it, no ALPN at all.
    alpn_http1_only: bool,
}

/// A TLS server on 127.0.0.1 answering every request with `200 ok`; returns its port.
fn server(pki: &Pki, mode: ServerMode) -> u16 {
    server_seen(pki, mode).0
}

/// [`server`], with the most bytes of an unfinished request head it decrypted on any one
/// connection.
fn server_seen(pki: &Pki, mode: ServerMode) -> (u16, Arc<AtomicUsize>) {
    let most_pending = Arc::new(AtomicUsize::new(0));
    let seen = most_pending.clone();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if mode.client_auth {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone()));
    let mut config = builder
        .with_single_cert(pki.server_chain.clone(), key)
        .unwrap();
    if mode.alpn_http1_only {
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
    }
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(tcp) = tcp else { continue };
            let config = config.clone();
            let most_pending = most_pending.clone();
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut buf = [0u8; 4096];
                let mut pending = Vec::new();
                loop {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => pending.extend_from_slice(&buf[..n]),
                    }
                    most_pending.fetch_max(pending.len(), Ordering::SeqCst);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let response: &[u8] = if mode.close_each {
                            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
                        } else {
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                        };
                        let ok = tls.write_all(response).and_then(|()| tls.flush());
                        if ok.is_err() {
                            return;
                        }
                        if mode.close_each {
                            tls.conn.send_close_notify();
                            let _ = tls.flush();
                            return;
                        }
                    }
                }
            });
        }
    });
    (port, seen)
}

fn plan(host: &str, port: u16, requests: u64) -> Plan {
    let mut plan = Plan::new(&format!("https://{host}:{port}/")).unwrap();
    plan.connections = 2;
    plan.threads = 1;
    plan.stop = Stop::Requests(requests);
    plan.timeout = Duration::from_secs(5);
    plan.engine = EngineChoice::Auto;
    plan
}

/// A server of `mode` with certificates of its own (`name`), a plan of `requests` to it by
/// the name its certificate gives that trusts its CA, and the most bytes of an unfinished head
/// the server saw (see [`server_seen`]).
fn trusted(name: &str, mode: ServerMode, requests: u64) -> (Pki, Plan, Arc<AtomicUsize>) {
    let pki = Pki::new(name);
    let (port, seen) = server_seen(&pki, mode);
    let mut plan = plan("localhost", port, requests);
    plan.tls.as_mut().unwrap().cacert = Some(pki.path("ca.pem"));
    (pki, plan, seen)
}

fn run(plan: &Plan) -> RunTotals {
    tailscope_loadgen::run(plan, &RunControl::new(), |_| {}).unwrap()
}

fn errors(totals: &RunTotals, kind: ErrorKind) -> u64 {
    totals.counters.errors[kind.index()]
}

/// The report's warning of failed TLS handshakes.
fn tls_warning(report: &Report) -> &str {
    report
        .warnings
        .iter()
        .find(|w| w.contains("TLS handshakes failed"))
        .unwrap_or_else(|| panic!("{:?}", report.warnings))
}

#[test]
fn https_with_the_ca_trusted_times_the_handshake_as_its_own_phase() {
    let (_pki, plan, _) = trusted("trusted", ServerMode::default(), 200);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 200, "{:?}", totals.counters);
    assert_eq!(totals.counters.error_total(), 0);
    assert_eq!(totals.engine.name, "tokio", "{:?}", totals.engine);
    assert!(totals.engine.reason.contains("TLS"), "{:?}", totals.engine);
    let t = &totals.counters.transport;
    assert_eq!(t.tls_handshakes, 2, "one per connection: {t:?}");
    assert_eq!(
        totals.histograms.tls.len(),
        2,
        "a TLS time per connection opened"
    );
    assert_eq!(totals.histograms.connect.len(), 2);
    let report = Report::new(&plan, &totals);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert!(
        json["tls_us"]["p50"].as_u64().unwrap() > 0,
        "{}",
        json["tls_us"]
    );
    assert_eq!(json["config"]["tls"]["verify"], true);
    assert_eq!(json["config"]["tls"]["server_name"], "localhost");
    assert_eq!(json["config"]["protocol"], "http/1.1");
    assert_eq!(json["errors"]["certificate"], 0);
    let text = report.to_text();
    assert!(text.contains("TLS handshake:"), "{text}");
}

#[test]
fn a_certificate_nobody_trusts_fails_as_certificate_with_the_reason() {
    let pki = Pki::new("untrusted");
    let port = server(
        &pki,
        ServerMode {
            close_each: false,
            client_auth: false,
            alpn_http1_only: false,
        },
    );
    let plan = plan("localhost", port, 20);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 0);
    assert_eq!(
        errors(&totals, ErrorKind::Certificate),
        20,
        "{:?}",
        totals.counters
    );
    let why = totals.counters.transport.tls_failure.clone().unwrap();
    assert!(
        why.contains("it is signed by a CA this run does not trust"),
        "{why}"
    );
    let report = Report::new(&plan, &totals);
    let warning = tls_warning(&report);
    assert!(warning.contains("--cacert"), "{warning}");

    // The same server with --insecure: every request answered.
    let mut plan = plan;
    plan.tls.as_mut().unwrap().insecure = true;
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 20, "{:?}", totals.counters);
}

/// A server that reads, writes `answer` and closes; returns its port.
fn answering(answer: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut tcp in listener.incoming().flatten() {
            let mut buf = [0u8; 512];
            let _ = tcp.read(&mut buf);
            let _ = tcp.write_all(answer);
        }
    });
    port
}

#[test]
fn https_to_a_plain_http_port_says_the_answer_is_not_tls() {
    let port = answering(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    let totals = run(&plan("127.0.0.1", port, 10));
    assert_eq!(totals.counters.successes, 0);
    assert!(
        errors(&totals, ErrorKind::TlsHandshake) > 0,
        "{:?}",
        totals.counters
    );
    let why = totals.counters.transport.tls_failure.clone().unwrap();
    assert!(why.contains("then write http://"), "{why}");
}

#[test]
fn http_to_a_tls_port_says_the_port_speaks_tls() {
    // What an OpenSSL server answers to plain HTTP: an alert record (protocol_version), then
    // it closes.
    let port = answering(&[0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46]);
    let mut plan = Plan::new(&format!("http://127.0.0.1:{port}/plaintext")).unwrap();
    plan.connections = 2;
    plan.threads = 1;
    plan.stop = Stop::Requests(10);
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.successes, 0);
    assert!(errors(&totals, ErrorKind::BadResponse) > 0, "{c:?}");
    assert_eq!(
        c.transport.tls_answers,
        errors(&totals, ErrorKind::BadResponse)
    );
    let report = Report::new(&plan, &totals);
    let why = report.no_response_reason().unwrap();
    assert!(
        why.contains(&format!(
            "the port speaks TLS; use https://127.0.0.1:{port}/plaintext"
        )),
        "{why}"
    );
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(
        json["summary"]["transport"]["tls_answers"],
        c.transport.tls_answers
    );
}

#[test]
fn http2_to_a_server_offering_http1_only_says_so_and_what_to_do() {
    let mode = ServerMode {
        alpn_http1_only: true,
        ..ServerMode::default()
    };
    let (_pki, mut plan, _) = trusted("h1-only", mode, 10);
    plan.http2 = true;
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.successes, 0, "{c:?}");
    assert_eq!(errors(&totals, ErrorKind::TlsHandshake), 10, "{c:?}");
    let why = c.transport.tls_failure.clone().unwrap();
    for part in [
        "does not offer HTTP/2 over TLS (ALPN h2",
        "NoApplicationProtocol",
        "drop --http2",
        "http2 on;",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let report = Report::new(&plan, &totals);
    let warning = tls_warning(&report);
    assert!(warning.contains("drop --http2"), "{warning}");
    // The line a failed run ends with says it too, and the warnings say it once.
    let why = report.no_response_reason().unwrap();
    assert!(why.contains("drop --http2"), "{why}");
    let said = report
        .warnings
        .iter()
        .filter(|w| w.contains("drop --http2"));
    assert_eq!(said.count(), 1, "{:?}", report.warnings);
    assert!(report.to_text().contains("drop --http2"));
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert!(
        json["summary"]["transport"]["tls_failure"]
            .as_str()
            .is_some_and(|w| w.contains("drop --http2")),
        "{}",
        json["summary"]["transport"]
    );

    // The same server, HTTP/1.1: every request answered.
    plan.http2 = false;
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 10, "{:?}", totals.counters);
}

#[test]
fn http2_to_a_server_without_alpn_says_it_chose_no_protocol_and_both_ways_out() {
    // No ALPN at all: the handshake succeeds with no protocol chosen (no alert to quote).
    let (_pki, mut plan, _) = trusted("no-alpn", ServerMode::default(), 10);
    plan.http2 = true;
    let totals = run(&plan);
    let c = &totals.counters;
    assert_eq!(c.successes, 0, "{c:?}");
    assert_eq!(errors(&totals, ErrorKind::TlsHandshake), 10, "{c:?}");
    let why = c.transport.tls_failure.clone().unwrap();
    for part in [
        "chose no application protocol in the TLS handshake (ALPN; it was offered h2 alone)",
        "speaks only HTTP/1.1 over TLS, or it lacks ALPN",
        "drop --http2 to speak HTTP/1.1",
        "enable HTTP/2 on the server (nginx: `http2 on;`)",
    ] {
        assert!(why.contains(part), "{part:?} in {why}");
    }
    let report = Report::new(&plan, &totals);
    assert!(
        tls_warning(&report).contains("chose no application protocol"),
        "{:?}",
        report.warnings
    );
    let why = report.no_response_reason().unwrap();
    assert!(why.contains("`http2 on;`"), "{why}");
    assert!(report.to_text().contains("or it lacks ALPN"));

    // The same server, HTTP/1.1: every request answered.
    plan.http2 = false;
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 10, "{:?}", totals.counters);
}

#[test]
fn a_wrong_name_is_a_certificate_error() {
    let pki = Pki::new("wrong-name");
    let port = server(
        &pki,
        ServerMode {
            close_each: false,
            client_auth: false,
            alpn_http1_only: false,
        },
    );
    // The certificate names localhost and 127.0.0.1; the name checked is another.
    let mut plan = plan("127.0.0.1", port, 10);
    let tls = plan.tls.as_mut().unwrap();
    tls.cacert = Some(pki.path("ca.pem"));
    tls.server_name = "elsewhere.example".into();
    let totals = run(&plan);
    assert_eq!(
        errors(&totals, ErrorKind::Certificate),
        10,
        "{:?}",
        totals.counters
    );
    let why = totals.counters.transport.tls_failure.clone().unwrap();
    assert!(why.to_lowercase().contains("name"), "{why}");
}

#[test]
fn reconnects_resume_their_session_unless_told_not_to() {
    let (_pki, mut plan, _) = trusted(
        "resume",
        ServerMode {
            close_each: true,
            ..ServerMode::default()
        },
        40,
    );
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 40, "{:?}", totals.counters);
    let t = &totals.counters.transport;
    assert!(t.tls_handshakes >= 40, "a handshake per request: {t:?}");
    // The first handshakes of the two connections are full; later ones resume.
    assert!(t.tls_resumed >= t.tls_handshakes / 2, "{t:?}");

    plan.tls.as_mut().unwrap().resume = false;
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 40, "{:?}", totals.counters);
    let t = &totals.counters.transport;
    assert!(t.tls_handshakes >= 40, "{t:?}");
    assert_eq!(t.tls_resumed, 0, "--no-tls-resume: {t:?}");
}

#[test]
fn a_client_certificate_is_offered() {
    let (pki, mut plan, _) = trusted(
        "client-auth",
        ServerMode {
            client_auth: true,
            ..ServerMode::default()
        },
        10,
    );
    let tls = plan.tls.as_mut().unwrap();
    tls.cert = Some(pki.path("client.pem"));
    tls.key = Some(pki.path("client.key"));
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 10, "{:?}", totals.counters);
}

#[test]
fn a_client_certificate_refused_after_the_handshake_is_a_certificate_error() {
    // No --cert: on TLS 1.3 our side of the handshake is done before the server judges
    // (and refuses) the missing certificate, so the refusal comes with the first read.
    let client_auth = ServerMode {
        client_auth: true,
        ..ServerMode::default()
    };
    let (_pki, plan, _) = trusted("client-auth-refused", client_auth, 10);
    let totals = run(&plan);
    assert_eq!(totals.counters.successes, 0, "{:?}", totals.counters);
    assert_eq!(
        errors(&totals, ErrorKind::IoOther),
        0,
        "{:?}",
        totals.counters
    );
    assert!(
        errors(&totals, ErrorKind::Certificate) > 0,
        "{:?}",
        totals.counters
    );
    let why = totals.counters.transport.tls_failure.clone().unwrap();
    assert!(why.contains("--cert"), "{why}");
}

#[test]
fn idle_and_slow_connections_are_held_over_tls() {
    let (_pki, mut plan, most_pending) = trusted("held", ServerMode::default(), 0);
    plan.connections = 1;
    plan.stop = Stop::Duration(Duration::from_millis(800));
    plan.idle_conns = 2;
    plan.slow_conns = 2;
    plan.slow_interval = Duration::from_millis(20);
    plan.validate().unwrap();
    let totals = run(&plan);
    for kind in [HeldKind::Idle, HeldKind::Slow] {
        let held = &totals.counters.held[kind.index()];
        // Opened counts a finished TLS handshake: a failed one is a connect failure.
        assert_eq!(
            (held.opened, held.connect_failures, held.open_at_end),
            (2, 0, 2),
            "{kind:?}: {held:?}"
        );
    }
    // The slow head arrived through TLS, a byte at a time, and never ended.
    let most = most_pending.load(Ordering::SeqCst);
    assert!(
        most >= 10,
        "the server decrypted {most} bytes of a slow head"
    );
}

#[test]
fn bad_tls_files_are_refused_before_the_run() {
    let pki = Pki::new("bad-files");
    let mut plan = plan("localhost", 1, 1);
    let tls = plan.tls.as_mut().unwrap();
    tls.cacert = Some(pki.path("missing.pem"));
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("missing.pem") && e.contains("--cacert"), "{e}");

    plan.tls.as_mut().unwrap().cacert = Some(pki.path("garbled.pem"));
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("garbled.pem"), "{e}");

    // A key file where the certificate should be: no certificate in it.
    plan.tls.as_mut().unwrap().cacert = Some(pki.path("client.key"));
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("no certificate"), "{e}");

    let tls = plan.tls.as_mut().unwrap();
    tls.cacert = None;
    tls.cert = Some(pki.path("client.pem"));
    tls.key = Some(pki.path("ca.pem"));
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("--key"), "{e}");

    // io_uring cannot do TLS: asked for, it is an error before the run.
    let mut plan = Plan::new("https://localhost:1/").unwrap();
    plan.engine = EngineChoice::Uring;
    let e = tailscope_loadgen::resolve_engine_for(&plan)
        .unwrap_err()
        .to_string();
    assert!(e.contains("TLS"), "{e}");
}
