//! The parser and `respond` on hand-written requests, bad input included.

use std::time::Duration;

use super::*;

fn req(bytes: &[u8]) -> Parsed<'_> {
    parse(bytes, &Limits::default())
}

#[test]
fn routes() {
    let cases: [(&[u8], Route<'_>); 7] = [
        (b"GET / HTTP/1.1\r\n\r\n", Route::Plaintext),
        (b"GET /plaintext?x=1 HTTP/1.1\r\n\r\n", Route::Plaintext),
        (b"GET /json HTTP/1.1\r\n\r\n", Route::Json),
        (b"GET /bytes/6000 HTTP/1.1\r\n\r\n", Route::Bytes(6000)),
        (b"GET /delay/25 HTTP/1.1\r\n\r\n", Route::Delay(25)),
        (
            b"GET /static/a%20b.txt HTTP/1.1\r\n\r\n",
            Route::Static("a%20b.txt"),
        ),
        (
            b"POST /json HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
            Route::MethodNotAllowed,
        ),
    ];
    for (bytes, want) in cases {
        match req(bytes) {
            Parsed::Request(r) => {
                assert_eq!(r.route, want, "{:?}", String::from_utf8_lossy(bytes));
                assert_eq!(r.len, bytes.len());
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        req(b"GET /nope HTTP/1.1\r\n\r\n"),
        Parsed::Request(Request {
            route: Route::NotFound,
            ..
        })
    ));
    assert!(matches!(
        req(b"GET /bytes/99999999999 HTTP/1.1\r\n\r\n"),
        Parsed::Request(Request {
            route: Route::NotFound,
            ..
        })
    ));
}

#[test]
fn partial_pipelined_and_keep_alive() {
    assert_eq!(req(b"GET / HTTP/1.1\r\nHost: x\r\n"), Parsed::Partial);
    assert_eq!(
        req(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab"),
        Parsed::Partial
    );
    let two = b"GET / HTTP/1.1\r\n\r\nGET /json HTTP/1.1\r\n\r\n";
    let Parsed::Request(first) = req(two) else {
        panic!()
    };
    assert_eq!(first.len, 18);
    assert!(first.keep_alive());
    let Parsed::Request(r) = req(b"HEAD / HTTP/1.1\r\nConnection: close\r\n\r\n") else {
        panic!()
    };
    assert!(!r.keep_alive() && r.head_only);
}

#[test]
fn http10_is_kept_open_only_when_it_asks_and_then_hears_so() {
    let cases: [(&[u8], Connection); 7] = [
        (b"GET / HTTP/1.0\r\n\r\n", Connection::Close),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            Connection::KeepAlive,
        ),
        // ApacheBench's spelling.
        (
            b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
            Connection::KeepAlive,
        ),
        (
            b"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
            Connection::Close,
        ),
        (b"GET / HTTP/1.1\r\n\r\n", Connection::Persistent),
        (
            b"GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n",
            Connection::Persistent,
        ),
        (
            b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
            Connection::Close,
        ),
    ];
    for (bytes, want) in cases {
        let Parsed::Request(r) = req(bytes) else {
            panic!("{:?}", String::from_utf8_lossy(bytes))
        };
        assert_eq!(r.connection, want, "{:?}", String::from_utf8_lossy(bytes));
        assert_eq!(r.keep_alive(), want != Connection::Close);
    }
    let date = http_date(std::time::UNIX_EPOCH);
    let head = |connection| {
        let mut out = Vec::new();
        write_head(&mut out, Status::Ok, "text/plain", 0, &date, connection);
        String::from_utf8(out).unwrap()
    };
    assert!(head(Connection::KeepAlive).ends_with("\r\nConnection: keep-alive\r\n\r\n"));
    assert!(head(Connection::Close).ends_with("\r\nConnection: close\r\n\r\n"));
    assert!(!head(Connection::Persistent).contains("Connection:"));
}

fn answer(bytes: &[u8], site: &Site) -> (Reply, String) {
    let Parsed::Request(r) = req(bytes) else {
        panic!("{:?}", String::from_utf8_lossy(bytes))
    };
    let mut out = Vec::new();
    let reply = respond(&r, site, &mut out);
    (reply, String::from_utf8(out).unwrap())
}

#[test]
fn respond_routes_and_says_what_is_left() {
    let site = Site::new(None, http_date(std::time::UNIX_EPOCH));
    let keep = Reply::Written { close: false };
    let (reply, text) = answer(b"GET /plaintext HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, keep);
    assert_eq!(
        text,
        "HTTP/1.1 200 OK\r\nServer: tailscope\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\
         Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
    );
    let mut later = site.clone();
    later.set_date(http_date(
        std::time::UNIX_EPOCH + Duration::from_secs(86400 + 3661),
    ));
    let (_, text) = answer(b"GET /plaintext HTTP/1.1\r\n\r\n", &later);
    assert!(
        text.contains("\r\nDate: Fri, 02 Jan 1970 01:01:01 GMT\r\n"),
        "{text}"
    );
    let (reply, text) = answer(b"GET /json HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, keep);
    assert!(text.contains("application/json\r\nContent-Length: 27\r\n"));
    assert!(text.ends_with("\r\n\r\n{\"message\":\"Hello, World!\"}"));
    let (_, text) = answer(b"HEAD /bytes/5 HTTP/1.1\r\n\r\n", &site);
    assert!(text.ends_with("Content-Length: 5\r\n\r\n"));
    let (_, text) = answer(b"GET /bytes/5 HTTP/1.1\r\n\r\n", &site);
    assert!(text.ends_with("\r\n\r\nxxxxx"));
    let (reply, text) = answer(b"GET /delay/7 HTTP/1.0\r\n\r\n", &site);
    assert_eq!(
        reply,
        Reply::Delayed(Delayed {
            after: Duration::from_millis(7),
            head_only: false,
            connection: Connection::Close,
        })
    );
    assert!(text.is_empty(), "nothing written before the delay");
    let (reply, text) = answer(b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n", &site);
    assert_eq!(reply, Reply::Written { close: true });
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"));
    assert!(text.contains("\r\nConnection: close\r\n"));
    let (reply, text) = answer(b"DELETE / HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, keep);
    assert!(text.starts_with("HTTP/1.1 405 "));
    // /static/ without --static: 404 and a close.
    let (reply, text) = answer(b"GET /static/a.txt HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, Reply::Written { close: true });
    assert!(text.starts_with("HTTP/1.1 404 "));
}

#[test]
fn respond_serves_static_files_and_refuses_traversal() {
    let dir = std::env::temp_dir().join(format!("tailscope-respond-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.txt"), b"static body").unwrap();
    let site = Site::new(
        Some(dir.canonicalize().unwrap()),
        http_date(std::time::UNIX_EPOCH),
    );
    let (reply, text) = answer(b"GET /static/a.txt HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, Reply::Written { close: false });
    assert!(text.ends_with("\r\n\r\nstatic body"), "{text}");
    let (reply, text) = answer(b"GET /static/../x HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, Reply::Written { close: true });
    assert!(text.starts_with("HTTP/1.1 400 "), "{text}");
    let (reply, _) = answer(b"GET /static/missing HTTP/1.1\r\n\r\n", &site);
    assert_eq!(reply, Reply::Written { close: true });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The limits of the randomized tests: small, so that corruptions cross them.
const SMALL_LIMITS: Limits = Limits {
    max_head: 200,
    max_body: 50,
};

/// Requests of every shape and random corruptions of them (a byte changed, inserted or
/// removed, the input cut short), the same sequence every run.
fn corrupted_requests() -> Vec<Vec<u8>> {
    let seeds: [&[u8]; 12] = [
        b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
        b"HEAD /json?x=1 HTTP/1.0\r\nConnection: Keep-Alive\r\nUser-Agent: ab\r\n\r\n",
        b"GET /bytes/12 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        b"GET / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        b"GET / HTTP/1.1\r\nContent-Length: 99\r\n\r\n",
        b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET /static/a%20b.txt HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n",
        b"GET / HTTP/1.1\r\nX:\r\nY: \t v \r\n\r\nGET / HTTP/1.1\r\n\r\n",
        b"GET /delay/5 HTTP/1.1\nHost: x\n\n",
        b"GET http://x/ HTTP/1.1\r\nHost : x\r\n\r\n",
        b"GET / HTTP/1.2\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    ];
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let interesting = b"\r\n :\t,?/%\x00\x7f\x80\xffaZ09";
    let mut inputs = Vec::new();
    for seed in seeds {
        for round in 0..3000 {
            let mut input = seed.to_vec();
            for _ in 0..round % 4 {
                let at = next(input.len());
                match next(4) {
                    0 => input[at] = interesting[next(interesting.len())],
                    1 => input[at] = next(256) as u8,
                    2 => input.insert(at, interesting[next(interesting.len())]),
                    _ => {
                        input.remove(at);
                    }
                }
            }
            if round % 5 == 0 {
                input.truncate(next(input.len() + 1));
            }
            inputs.push(input);
        }
    }
    inputs
}

/// The hand-written path either declines or says exactly what `httparse` says, on
/// requests of every shape and on their random corruptions.
#[test]
fn the_simple_path_agrees_with_httparse() {
    let mut agreed = 0;
    for input in corrupted_requests() {
        if let Some(simple) = parse_simple(&input, &SMALL_LIMITS) {
            assert_eq!(
                simple,
                parse_general(&input, &SMALL_LIMITS),
                "{:?}",
                String::from_utf8_lossy(&input)
            );
            agreed += 1;
        }
    }
    assert!(agreed > 5000, "the simple path took only {agreed} inputs");
}

/// The remembering parser says what `parse` says, whatever came before; and it does answer
/// from memory (most corruptions leave the front of a request, or all of it, unchanged).
#[test]
fn the_parser_remembers_only_what_parsing_would_say() {
    let mut parser = Parser::new(SMALL_LIMITS);
    let mut remembered = 0;
    let mut previous: Vec<u8> = Vec::new();
    for input in corrupted_requests() {
        let from_memory = parser.last_request.is_some() && input.starts_with(&parser.last);
        let expected = parse(&input, &SMALL_LIMITS);
        assert_eq!(
            parser.parse(&input),
            expected,
            "{:?} after {:?}",
            String::from_utf8_lossy(&input),
            String::from_utf8_lossy(&previous)
        );
        // The same request again, now from memory if the hand-written path read it.
        if let Parsed::Request(r) = expected {
            let simple = parse_simple(&input, &SMALL_LIMITS).is_some();
            if simple && !matches!(r.route, Route::Static(_)) {
                assert_eq!(parser.parse(&input), expected);
                assert!(input.starts_with(&parser.last));
            }
        }
        remembered += usize::from(from_memory);
        previous = input;
    }
    assert!(
        remembered > 1000,
        "only {remembered} answers came from memory"
    );
    // A pipelined pair whose first request is the remembered one.
    let mut parser = Parser::new(Limits::default());
    let one = b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n";
    assert!(matches!(parser.parse(one), Parsed::Request(_)));
    let two = [&one[..], b"HEAD / HTTP/1.0\r\n\r\n"].concat();
    let Parsed::Request(first) = parser.parse(&two) else {
        panic!("the remembered request")
    };
    assert_eq!((first.len, first.route), (one.len(), Route::Json));
    assert_eq!(
        parser.parse(&two[first.len..]),
        parse(&two[first.len..], &Limits::default())
    );
    // Cut short, the remembered request is not there: partial, as parse says.
    assert_eq!(parser.parse(&one[..one.len() - 1]), Parsed::Partial);
}

#[test]
fn skip_printable_stops_at_the_first_byte_outside() {
    let text = b"abcdefgh ijklmno~pqrstuvwxyz0123";
    assert_eq!(skip_printable(text, 0, b' '), 32);
    assert_eq!(
        skip_printable(text, 0, b'!'),
        8,
        "the space ends the first word"
    );
    for bad in [b'\r', b'\t', 0x1f, 0x7f, 0x80, 0xff, 0] {
        for at in 0..24 {
            let mut t = text.to_vec();
            t[at] = bad;
            t[at + 3] = bad;
            assert_eq!(skip_printable(&t, 0, b' '), at, "{bad:#x} at {at}");
            assert_eq!(skip_printable(&t, at / 2, b' '), at, "{bad:#x} at {at}");
        }
    }
    assert_eq!(
        skip_printable(b"abcdef", 0, b' '),
        0,
        "short tails are the caller's"
    );
}

#[test]
fn rejects() {
    assert_eq!(req(b"GARBAGE\r\n\r\n"), Parsed::Reject(Status::BadRequest));
    assert_eq!(
        req(b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"),
        Parsed::Reject(Status::BadRequest)
    );
    assert_eq!(
        req(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"),
        Parsed::Reject(Status::NotImplemented)
    );
    assert_eq!(
        req(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"),
        Parsed::Reject(Status::PayloadTooLarge)
    );
    let mut big = b"GET / HTTP/1.1\r\nX-A: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    assert_eq!(req(&big), Parsed::Reject(Status::HeaderFieldsTooLarge));
    let mut many = b"GET / HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-{i}: a\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(req(&many), Parsed::Reject(Status::HeaderFieldsTooLarge));
}

#[test]
fn responses_are_well_formed() {
    let date = http_date(std::time::UNIX_EPOCH);
    assert_eq!(&date, b"Thu, 01 Jan 1970 00:00:00 GMT");
    let mut out = Vec::new();
    write_response(
        &mut out,
        Status::Ok,
        "text/plain",
        b"Hello, World!",
        &date,
        false,
        Connection::Persistent,
    );
    assert_eq!(
        out,
        b"HTTP/1.1 200 OK\r\nServer: tailscope\r\nDate: Thu, 01 Jan 1970 00:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!"
    );
    out.clear();
    write_error(&mut out, Status::NotFound, &date);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"));
    assert!(text.contains("Connection: close\r\n"));
    assert!(text.ends_with("\r\n\r\nnot found\n"));
}
