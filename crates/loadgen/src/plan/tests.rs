//! Plans built, validated and encoded.

use std::net::IpAddr;

use super::*;

#[test]
fn request_is_encoded_with_host_and_user_headers() {
    let mut plan = Plan::new("http://127.0.0.1:8080/a?b=c").unwrap();
    plan.method = "POST".into();
    plan.headers.push(("X-Test".into(), "1".into()));
    plan.headers.push(("User-Agent".into(), "me".into()));
    plan.body = b"hi".to_vec();
    let req = String::from_utf8(plan.encode_request()).unwrap();
    assert!(
        req.starts_with("POST /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"),
        "{req}"
    );
    assert!(req.contains("Content-Length: 2\r\n"));
    assert!(req.contains("User-Agent: me\r\n"));
    assert!(!req.contains("tailscope/"));
    assert!(
        req.ends_with("X-Test: 1\r\nUser-Agent: me\r\n\r\nhi"),
        "{req}"
    );
}

#[test]
fn url_credentials_are_sent_as_basic_auth_and_never_shown() {
    // Percent-decoded before encoding, as curl does: "us@er" and "p:ss w".
    let mut plan = Plan::new("http://us%40er:p%3Ass%20w@127.0.0.1:8080/a").unwrap();
    assert_eq!(plan.url, "http://us%40er:***@127.0.0.1:8080/a");
    let req = String::from_utf8(plan.encode_request()).unwrap();
    // base64("us@er:p:ss w")
    assert!(
        req.contains("\r\nAuthorization: Basic dXNAZXI6cDpzcyB3\r\n"),
        "{req}"
    );
    assert!(req.contains("\r\nHost: 127.0.0.1:8080\r\n"), "{req}");
    // The user's own Authorization wins, whatever its case.
    plan.headers
        .push(("authorization".into(), "Bearer mine".into()));
    let req = String::from_utf8(plan.encode_request()).unwrap();
    assert!(!req.contains("Basic"), "{req}");
    assert!(req.contains("authorization: Bearer mine\r\n"), "{req}");
    // A user without a password sends an empty one, and is hidden whole: it is often a token.
    let user_only = Plan::new("http://me@127.0.0.1:8080/").unwrap();
    assert_eq!(user_only.url, "http://***@127.0.0.1:8080/");
    assert_eq!(user_only.url_authorization(), Some("Basic bWU6"));
    // set_url takes the new URL's credentials, or none.
    plan.set_url("https://a:b@localhost:8443/x").unwrap();
    assert_eq!(plan.url, "https://a:***@localhost:8443/x");
    assert_eq!(plan.url_authorization(), Some("Basic YTpi"));
    plan.set_url("http://127.0.0.1:8080/").unwrap();
    assert_eq!(plan.url_authorization(), None);
    // A refused URL does not show the password either.
    let refused = Plan::new("http://u:secret@127.0.0.1:0/").unwrap_err();
    assert!(!refused.to_string().contains("secret"), "{refused}");
    // Only the authority's '@' marks credentials; no password, nothing to hide.
    for kept in [
        "http://127.0.0.1:8080/a@b:c",
        "http://127.0.0.1:8080/?u=a:b@c",
        "http://127.0.0.1:8080",
    ] {
        assert_eq!(url::redact_password(kept), kept);
    }
}

#[test]
fn every_spelling_the_url_parser_accepts_has_its_password_hidden() {
    // Written the usual way: every other byte kept as written.
    assert_eq!(
        url::redact_password("HTTP://alice:s3cret@H:8080/a?b"),
        "HTTP://alice:***@H:8080/a?b"
    );
    // Spellings the parser reads as the same credentials, and '://' later in the query:
    // the parser's serialisation, without the password.
    for (given, shown) in [
        ("http:/alice:s3cret@h:8080/", "http://alice:***@h:8080/"),
        ("http:///alice:s3cret@h:8080/", "http://alice:***@h:8080/"),
        ("http:alice:s3cret@h:8080/", "http://alice:***@h:8080/"),
        (
            "http:/alice:s3cret@h:8080/?next=http://x",
            "http://alice:***@h:8080/?next=http://x",
        ),
    ] {
        assert_eq!(url::redact_password(given), shown, "{given}");
    }
    // And the run shows it so: it is sent, not shown.
    let plan = Plan::new("http:/alice:s3cret@127.0.0.1:8080/?next=http://x").unwrap();
    assert_eq!(plan.url, "http://alice:***@127.0.0.1:8080/?next=http://x");
    assert!(plan.url_authorization().is_some());
    // A user without a password is hidden whole, as written or not, and a refusal too.
    for (given, shown) in [
        ("https://TOKEN@h/x", "https://***@h/x"),
        ("https:/TOKEN@h/x", "https://***@h/x"),
        ("http://:pw@h/", "http://:***@h/"),
        ("//TOKEN@h/x", "//***@h/x"),
        ("http://TOKEN@h:99999/x", "http://***@h:99999/x"),
    ] {
        assert_eq!(url::redact_password(given), shown, "{given}");
    }
    // A URL a message suggests to run has no credentials: a copy would send '***'.
    for (shown, suggested) in [
        ("https://u:***@h:8443/a@b?c=d@e", "https://h:8443/a@b?c=d@e"),
        ("http://***@h/", "http://h/"),
        ("http://h/a@b", "http://h/a@b"),
    ] {
        assert_eq!(super::without_credentials(shown), suggested, "{shown}");
    }
    // URLs the parser refuses are echoed in the refusal: the password is hidden by text.
    for refused in [
        "//alice:s3cret@127.0.0.1:8080/",
        "http://alice:s3cret@127.0.0.1:99999/",
    ] {
        assert!(
            !url::redact_password(refused).contains("s3cret"),
            "{refused}"
        );
        let e = Plan::new(refused)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("alice:***@"), "{refused}: {e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
}

#[test]
fn source_addrs_auto_picks_loopback_addresses_as_the_connections_need() {
    let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
    plan.source_addrs = SourceAddrs::parse("auto").unwrap();
    plan.connections = 100;
    assert_eq!(
        plan.source_ips().unwrap(),
        vec![IpAddr::from([127, 0, 0, 1])]
    );
    plan.connections = 2 * CONNS_PER_SOURCE + 1;
    let picked: Vec<String> = plan
        .source_ips()
        .unwrap()
        .iter()
        .map(|ip| ip.to_string())
        .collect();
    assert_eq!(picked, ["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
    plan.set_url("http://[::1]:1/").unwrap();
    let err = plan.validate().unwrap_err().to_string();
    assert!(err.contains("one address (::1)"), "{err}");
    plan.connections = 10;
    assert_eq!(
        plan.source_ips().unwrap(),
        vec!["::1".parse::<IpAddr>().unwrap()]
    );
    assert_eq!(
        SourceAddrs::parse("127.0.0.2, 127.0.0.3,127.0.0.2").unwrap(),
        SourceAddrs::List(vec![
            IpAddr::from([127, 0, 0, 2]),
            IpAddr::from([127, 0, 0, 3])
        ])
    );
    assert!(SourceAddrs::parse("127.0.0.2,").is_err());
}

#[test]
fn bad_urls_and_settings_are_refused() {
    assert!(matches!(
        Plan::new("ftp://127.0.0.1/"),
        Err(Error::BadUrl { .. })
    ));
    let https = Plan::new("https://localhost:8443/x").unwrap();
    let tls = https.tls.as_ref().expect("https has TLS options");
    assert_eq!(tls.server_name, "localhost");
    assert!(tls.resume && !tls.insecure);
    assert_eq!(https.addr.port(), 8443);
    assert!(Plan::new("http://127.0.0.1/").unwrap().tls.is_none());
    assert!(matches!(
        Plan::new("127.0.0.1:80"),
        Err(Error::BadUrl { .. })
    ));
    // A host and port without their scheme is told what to write.
    for (given, written) in [
        ("127.0.0.1:8080", "http://127.0.0.1:8080"),
        ("localhost:8080/", "http://localhost:8080/"),
        ("example.com", "http://example.com"),
    ] {
        let err = Plan::new(given).unwrap_err().to_string();
        assert!(err.contains(&format!("write {written} ")), "{err}");
    }
    // Three slashes: no host (the parser took `path` for one, and resolving it failed).
    let no_host = Plan::new("http:///path").unwrap_err().to_string();
    assert!(no_host.contains("it has no host"), "{no_host}");
    let ftp = Plan::new("ftp://127.0.0.1/").unwrap_err().to_string();
    assert!(ftp.contains("use http:// or https://"), "{ftp}");
    let port_zero = Plan::new("http://127.0.0.1:0/").unwrap_err();
    assert!(
        port_zero
            .to_string()
            .contains("port 0 cannot be connected to"),
        "{port_zero}"
    );
    let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
    plan.validate().unwrap();
    plan.pipeline = 4;
    plan.keepalive = false;
    assert!(plan.validate().is_err());
    plan.keepalive = true;
    plan.pace = Pace::Rate(0.0);
    assert!(plan.validate().is_err());
    plan.pace = Pace::Rate(1e-20);
    assert!(plan.validate().unwrap_err().to_string().contains("0.01..="));
    plan.pace = Pace::Rate(10.0);
    plan.stop = Stop::Duration(Duration::from_secs(u64::MAX / 4));
    let err = plan.validate().unwrap_err().to_string();
    assert!(err.contains("1ms..=30days"), "{err}");
    plan.stop = Stop::Duration(Duration::from_secs(1));
    plan.timeout = Duration::from_secs(7200);
    assert!(plan.validate().unwrap_err().to_string().contains("1h"));
    plan.timeout = Duration::from_secs(1);
    plan.validate().unwrap();
    plan.headers.push(("Bad Name".into(), "v".into()));
    assert!(plan.validate().is_err());
}

/// A framing header that disagrees with how the body is sent desynchronises the
/// connection: refused; one that agrees is harmless.
#[test]
fn framing_headers_must_agree_with_the_body() {
    let mut plan = Plan::new("http://127.0.0.1:1/").unwrap();
    plan.body = b"hello".to_vec();
    plan.headers = vec![("content-length".into(), "5".into())];
    plan.validate().unwrap();
    plan.headers = vec![("Content-Length".into(), "99".into())];
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("disagrees with the body's 5 bytes"), "{e}");
    plan.body.clear();
    plan.headers = vec![("Content-Length".into(), "5".into())];
    assert!(plan.validate().is_err(), "a GET with no body");
    plan.headers = vec![("Transfer-Encoding".into(), "chunked".into())];
    let e = plan.validate().unwrap_err().to_string();
    assert!(e.contains("never chunked"), "{e}");
}

/// A mix is named by its origin: the default path is not what it sends.
#[test]
fn a_mix_is_shown_by_its_origin() {
    use super::url_shown;
    assert_eq!(
        url_shown("http://127.0.0.1:8080/plaintext", true),
        "http://127.0.0.1:8080"
    );
    assert_eq!(
        url_shown("https://[::1]:8443/a/b?c=d", true),
        "https://[::1]:8443"
    );
    assert_eq!(url_shown("http://h:1", true), "http://h:1");
    assert_eq!(
        url_shown("http://h:1/plaintext", false),
        "http://h:1/plaintext"
    );
}

/// What can be in flight at once counts HTTP/2's streams as HTTP/1.1's pipelining depth: the
/// spike rules read it as what one stall can hold.
#[test]
fn requests_in_flight_at_once_count_streams_and_pipelining() {
    let mut plan = Plan::new("http://127.0.0.1:8080/").unwrap();
    plan.connections = 2;
    assert_eq!(plan.max_in_flight(), 2);
    plan.pipeline = 8;
    assert_eq!(plan.max_in_flight(), 16);
    plan.pipeline = 1;
    plan.http2 = true;
    plan.streams = 100;
    plan.validate().unwrap();
    assert_eq!(plan.max_in_flight(), 200);
}
