//! https:// end to end against nginx (its ssl module, a throw-away certificate tailscope
//! makes): `--target nginx --tls` trusts its own CA; a server whose certificate is not
//! trusted fails as `certificate` with a message that names the fix; `--cacert` with the
//! CA and `--insecure` get through; h2 and h2c with several streams, a request mix over h2
//! with idle connections held over TLS, slow ones over h2, a suite of TLS and HTTP/2 targets; bad TLS inputs exit
//! 2 before anything is sent.

use crate::common;

use common::{n, run_json, tailscope};
use tailscope_targets::{Target, TargetSpec};

/// nginx served over TLS by the targets crate (as `--target nginx --tls` does), or `None`
/// after a visible skip where nginx is not installed.
fn nginx_tls() -> Option<Target> {
    let spec = TargetSpec::parse("nginx")
        .unwrap()
        .serving(true, false)
        .unwrap();
    match Target::launch(&spec, &[]) {
        Ok(t) => Some(t),
        Err(e) if e.to_string().contains("nginx-light") => {
            common::skip("nginx not installed (apt-get install nginx-light)");
            None
        }
        Err(e) => panic!("nginx with TLS did not start: {e}"),
    }
}

#[test]
fn target_nginx_tls_serves_https_and_trusts_its_own_certificate() {
    if nginx_tls().is_none() {
        return;
    }
    let out = tailscope(&[
        "run", "--target", "nginx", "--tls", "-n", "2000", "-c", "8", "--json", "-",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(n(&r["summary"]["successes"]), 2000, "{stderr}");
    assert_eq!(n(&r["summary"]["errors"]), 0);
    assert!(r["config"]["url"]
        .as_str()
        .unwrap()
        .starts_with("https://127.0.0.1:"));
    assert_eq!(r["config"]["protocol"], "http/1.1");
    assert_eq!(r["config"]["tls"]["verify"], true);
    assert!(r["config"]["tls"]["cacert"]
        .as_str()
        .unwrap()
        .ends_with("ca.pem"));
    assert_eq!(r["config"]["engine"]["name"], "tokio");
    assert!(n(&r["tls_us"]["max"]) > 0, "{}", r["tls_us"]);
    assert!(n(&r["summary"]["transport"]["tls_handshakes"]) >= 8);
    assert!(common::gone(n(&r["target"]["pid"])));
}

#[test]
fn an_untrusted_certificate_fails_as_certificate_until_trusted_or_insecure() {
    let Some(target) = nginx_tls() else { return };
    let url = format!("{}/plaintext", target.base_url());
    let ca = target.tls_ca().unwrap().to_str().unwrap().to_string();

    // The built-in roots do not know the throw-away CA.
    let (code, r, stderr) = run_json(&url, &["-n", "50", "-c", "2"]);
    assert_eq!(code, 1, "no response is a failed run: {stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 0);
    assert_eq!(n(&r["errors"]["certificate"]), 50, "{}", r["errors"]);
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("TLS handshakes failed"), "{warnings}");
    assert!(
        warnings.contains("--cacert") && warnings.contains("--insecure"),
        "{warnings}"
    );
    assert!(stderr.contains("certificate"), "{stderr}");

    // Another CA than the one that signed it: still refused.
    let other = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tls-other-ca");
    std::fs::create_dir_all(&other).unwrap();
    let other_ca = tailscope_targets::cert::write_throwaway(&other).unwrap().ca;
    let (code, r, _) = run_json(
        &url,
        &[
            "-n",
            "20",
            "-c",
            "2",
            "--cacert",
            other_ca.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 1);
    assert_eq!(n(&r["errors"]["certificate"]), 20, "{}", r["errors"]);

    // Its own CA, then --insecure: every request answered.
    let (code, r, stderr) = run_json(&url, &["-n", "300", "-c", "4", "--cacert", &ca]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 300);
    assert_eq!(r["config"]["tls"]["cacert"], ca.as_str());
    let (code, r, stderr) = run_json(&url, &["-n", "300", "-c", "4", "-k"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(n(&r["summary"]["successes"]), 300);
    assert_eq!(r["config"]["tls"]["verify"], false);
    target.stop();
}

#[test]
fn http_to_nginx_s_tls_port_is_told_to_use_https() {
    let Some(target) = nginx_tls() else { return };
    let https = format!("{}/plaintext", target.base_url());
    let http = https.replacen("https://", "http://", 1);
    let (_, r, stderr) = run_json(&http, &["-n", "20", "-c", "2"]);
    // nginx: "400 The plain HTTP request was sent to HTTPS port", and a close.
    assert_eq!(n(&r["status_codes"]["400"]), 20, "{stderr}");
    assert_eq!(n(&r["summary"]["transport"]["tls_answers"]), 20);
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("the port speaks TLS") && warnings.contains(&https),
        "{warnings}"
    );
    assert!(!warnings.contains("check -m"), "{warnings}");
    assert!(stderr.contains("use https://"), "{stderr}");
    // h2c's preface gets a bare 400 (nginx fails "PRI *" as a request line before it
    // looks for TLS): not told from an HTTP/1.1-only server, which the reason names;
    // without --http2 the run then gets the hint above.
    let (code, r, stderr) = run_json(&http, &["-n", "20", "-c", "2", "--http2"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(n(&r["errors"]["bad_response"]), 20, "{}", r["errors"]);
    assert!(stderr.contains("does the server speak h2c?"), "{stderr}");
    target.stop();
}

#[test]
fn reconnects_to_nginx_resume_their_tls_session() {
    let Some(target) = nginx_tls() else { return };
    let url = format!("{}/plaintext", target.base_url());
    let ca = target.tls_ca().unwrap().to_str().unwrap().to_string();
    let (code, r, stderr) = run_json(
        &url,
        &["-n", "200", "-c", "2", "--no-keepalive", "--cacert", &ca],
    );
    assert_eq!(code, 0, "{stderr}");
    let t = &r["summary"]["transport"];
    assert!(n(&t["tls_handshakes"]) >= 200, "{t}");
    assert!(n(&t["tls_resumed"]) >= 100, "most reconnects resume: {t}");
    let (code, r, stderr) = run_json(
        &url,
        &[
            "-n",
            "100",
            "-c",
            "2",
            "--no-keepalive",
            "--cacert",
            &ca,
            "--no-tls-resume",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        n(&r["summary"]["transport"]["tls_resumed"]),
        0,
        "{}",
        r["summary"]
    );
    assert_eq!(r["config"]["tls"]["resume"], false);
    target.stop();
}

/// Runs `tailscope run --target nginx FLAGS --json -` and returns the report, or `None`
/// after a visible skip where nginx is not installed.
fn launched_nginx(flags: &[&str]) -> Option<serde_json::Value> {
    nginx_tls()?;
    let mut all = vec!["run", "--target", "nginx", "--json", "-"];
    all.extend_from_slice(flags);
    let out = tailscope(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{flags:?}: {stderr}");
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn nginx_h2_over_tls_with_several_streams() {
    let Some(r) = launched_nginx(&[
        "--tls",
        "--http2",
        "--streams",
        "8",
        "-n",
        "3000",
        "-c",
        "4",
    ]) else {
        return;
    };
    assert_eq!(n(&r["summary"]["successes"]), 3000);
    assert_eq!(n(&r["summary"]["errors"]), 0);
    assert_eq!(r["config"]["protocol"], "h2");
    assert_eq!(r["config"]["streams"], 8);
    assert!(r["config"]["url"].as_str().unwrap().starts_with("https://"));
    let t = &r["summary"]["transport"];
    // nginx's http2_max_concurrent_streams default.
    assert_eq!(n(&t["h2_max_streams"]), 128, "{t}");
    assert!(n(&t["tls_handshakes"]) >= 4, "{t}");
    // Transfer counts the frames read, not the bodies alone: each response is at least a
    // HEADERS frame (9 bytes and a status) and a DATA frame (9 bytes and "Hello, World!").
    let per_response = 9 + 1 + 9 + "Hello, World!".len() as u64;
    assert!(
        n(&r["summary"]["bytes_read"]) >= 3000 * per_response,
        "{}",
        r["summary"]
    );
}

#[test]
fn slow_connections_over_h2_hold_a_header_block_that_never_ends() {
    // 5 ms a byte for 2 s: the preface, the server's SETTINGS acknowledged, the request's
    // fields and a few hundred bytes of the x-slow header. nginx closes a connection whose
    // frames do not parse (a GOAWAY, then the close): none may be closed by it.
    let Some(r) = launched_nginx(&[
        "--tls",
        "--http2",
        "-z",
        "2s",
        "-c",
        "1",
        "--slow-conns",
        "3",
        "--slow-interval",
        "5ms",
    ]) else {
        return;
    };
    assert!(n(&r["summary"]["successes"]) > 0, "{}", r["summary"]);
    assert_eq!(n(&r["summary"]["errors"]), 0, "{}", r["summary"]);
    let slow = &r["connections"]["slow"];
    assert_eq!(n(&slow["opened"]), 3, "{slow}");
    for key in ["connect_failures", "closed_by_server", "failed"] {
        assert_eq!(n(&slow[key]), 0, "{key}: {slow}");
    }
    assert_eq!(n(&slow["open_at_end"]), 3, "{slow}");
}

#[test]
fn nginx_h2c_prior_knowledge() {
    let Some(r) = launched_nginx(&["--http2", "--streams", "4", "-n", "2000", "-c", "2"]) else {
        return;
    };
    assert_eq!(n(&r["summary"]["successes"]), 2000);
    assert_eq!(n(&r["summary"]["errors"]), 0);
    assert_eq!(r["config"]["protocol"], "h2c");
    assert!(r["config"]["tls"].is_null());
    assert!(r["config"]["url"].as_str().unwrap().starts_with("http://"));
}

#[test]
fn a_request_mix_over_nginx_h2_with_idle_connections_held_over_tls() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tls-h2-mix");
    std::fs::create_dir_all(&dir).unwrap();
    let mix = dir.join("mix.toml");
    std::fs::write(
        &mix,
        "[[request]]\nname = \"plain\"\npath = \"/plaintext?id={seq}\"\nweight = 3\n\
         [[request]]\nname = \"root\"\npath = \"/\"\n",
    )
    .unwrap();
    let Some(r) = launched_nginx(&[
        "--tls",
        "--http2",
        "--streams",
        "4",
        "--load",
        mix.to_str().unwrap(),
        "-n",
        "800",
        "-c",
        "2",
        "--idle-conns",
        "3",
    ]) else {
        return;
    };
    assert_eq!(n(&r["summary"]["successes"]), 800, "{}", r["summary"]);
    assert_eq!(r["config"]["protocol"], "h2");
    let by = &r["by_request"];
    assert_eq!(n(&by["plain"]["successes"]), 600, "{by}");
    assert_eq!(n(&by["root"]["successes"]), 200, "{by}");
    let idle = &r["connections"]["idle"];
    assert_eq!(n(&idle["opened"]), 3, "{idle}");
    assert_eq!(n(&idle["connect_failures"]), 0, "{idle}");
}

#[test]
fn a_suite_serves_nginx_over_tls_and_h2c() {
    if nginx_tls().is_none() {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tls-suite");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("suite.toml");
    std::fs::write(
        &file,
        r#"
[suite]
baseline = "https"
[load]
connections = 4
duration = "300ms"
runs = 1
[[target]]
name = "https"
kind = "nginx"
tls = true
[[target]]
name = "h2"
kind = "nginx"
tls = true
http2 = true
streams = 4
[[target]]
name = "h2c"
kind = "nginx"
http2 = true
[[endpoint]]
path = "/plaintext"
"#,
    )
    .unwrap();
    let r = common::run_suite(&file, &dir.join("suite.json"));
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 3, "{r}");
    for res in results {
        assert!(res["error"].is_null(), "{res}");
        assert!(res["rps_median"].as_f64().unwrap() > 0.0, "{res}");
        let run = &res["runs"][0];
        assert_eq!(n(&run["errors"]), 0, "{res}");
        assert!(n(&run["requests"]) > 0, "{res}");
    }
}

#[test]
fn bad_tls_inputs_exit_2_before_anything_is_sent() {
    // Nothing listens at port 1: a run that got as far as connecting would fail otherwise.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tls-bad-inputs");
    std::fs::create_dir_all(&dir).unwrap();
    let garbled = dir.join("garbled.pem");
    std::fs::write(
        &garbled,
        "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["https://127.0.0.1:1/", "--cacert", "/nonexistent/ca.pem"],
            "--cacert",
        ),
        (
            &[
                "https://127.0.0.1:1/",
                "--cacert",
                garbled.to_str().unwrap(),
            ],
            "garbled.pem",
        ),
        (
            &["https://127.0.0.1:1/", "--cacert", empty.to_str().unwrap()],
            "no certificate",
        ),
        (
            &[
                "https://127.0.0.1:1/",
                "--cert",
                empty.to_str().unwrap(),
                "--key",
                empty.to_str().unwrap(),
            ],
            "--cert",
        ),
        (&["http://127.0.0.1:1/", "--insecure"], "https://"),
        (&["https://127.0.0.1:1/", "--engine", "uring"], "TLS"),
    ];
    for (args, says) in cases {
        let mut all = vec!["run", "-n", "1", "--no-tui"];
        all.extend_from_slice(args);
        let out = tailscope(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("Summary"), "{args:?} ran: {stderr}");
    }
    let out = tailscope(&["run", "--target", "embedded", "--tls", "-n", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("are for --target nginx"));
}

/// A server process of the test's own, killed when dropped (a failed assertion included: a
/// server left running would hold the test's output open).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A Python HTTPS server (http.server wrapped in its ssl module) on 127.0.0.1:0 serving
/// `cert`/`key`; returns it and its port.
fn python_https(cert: &std::path::Path, key: &std::path::Path) -> (Killed, u16) {
    use std::io::BufRead;
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
c.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = c.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;
    let mut child = std::process::Command::new("python3")
        .args(["-c", SERVER])
        .args([cert, key])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 runs");
    let stdout = child.stdout.take().unwrap();
    let child = Killed(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("python's https server printed {line:?}"));
    (child, port)
}

/// The usual self-signed certificate (`openssl req -x509 … -addext subjectAltName=…`, which
/// makes it a CA) given in `--cacert` is trusted for the server that presents that very
/// certificate, as curl trusts it; its host name is still checked.
#[test]
fn a_self_signed_openssl_certificate_given_in_cacert_is_trusted() {
    if !common::has_tool("openssl", "version") || !common::has_tool("python3", "--version") {
        common::skip("openssl or python3 not installed (apt-get install openssl python3)");
        return;
    }
    let dir = common::scratch_dir("self-signed");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let (_server, port) = python_https(&cert, &key);
    let cacert = cert.to_str().unwrap();

    let url = format!("https://localhost:{port}/");
    let (code, r, stderr) = run_json(&url, &["-n", "40", "-c", "2", "--cacert", cacert]);
    assert_eq!(code, 0, "{stderr}\n{}", r["errors"]);
    assert_eq!(n(&r["summary"]["successes"]), 40, "{stderr}");

    // The certificate names localhost alone: 127.0.0.1 is still refused, for its name.
    let url = format!("https://127.0.0.1:{port}/");
    let (code, r, stderr) = run_json(&url, &["-n", "4", "-c", "1", "--cacert", cacert]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(n(&r["errors"]["certificate"]), 4, "{}", r["errors"]);
    assert!(stderr.contains("not for this host name"), "{stderr}");
}
