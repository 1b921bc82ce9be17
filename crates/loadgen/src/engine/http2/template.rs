//! The requests of a run as HTTP/2 streams send them: built once per connection task, and
//! a mix's request with placeholders read back from its patched HTTP/1.1 bytes.

use bytes::Bytes;

use super::super::Shared;

/// Headers that are HTTP/1.1's connection and not HTTP/2's (RFC 9113 8.2.2); Host becomes
/// :authority.
fn http1_only(lower: &str) -> bool {
    matches!(
        lower,
        "host" | "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
    )
}

/// A request's headers as HTTP/2 sends them: its own (HTTP/1.1's connection headers left
/// out), the defaults it does not set, and the URL's credentials (`url_authorization`)
/// unless it gives an Authorization of its own. Values are taken as bytes, as HTTP/1.1 sends
/// them: a user's Authorization that `HeaderValue::from_str` refuses (obs-text) was dropped,
/// and the URL's Basic sent in its place.
fn header_map(headers: &[(String, String)], url_authorization: Option<&str>) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (k, v) in headers {
        let lower = k.to_ascii_lowercase();
        if http1_only(&lower) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(lower.as_bytes()),
            http::HeaderValue::from_bytes(v.as_bytes()),
        ) {
            let value = sensitive(&name, value);
            map.append(name, value);
        }
    }
    let defaults = [
        (
            "user-agent",
            concat!("tailscope/", env!("CARGO_PKG_VERSION")),
        ),
        ("accept", "*/*"),
    ];
    for (k, v) in defaults {
        if !map.contains_key(k) {
            map.insert(k, http::HeaderValue::from_static(v));
        }
    }
    let own_authorization = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    if let Some(credentials) = url_authorization.filter(|_| !own_authorization) {
        if let Ok(value) = http::HeaderValue::from_str(credentials) {
            map.insert(
                http::header::AUTHORIZATION,
                sensitive(&http::header::AUTHORIZATION, value),
            );
        }
    }
    map
}

/// `value`, marked sensitive (never put in HPACK's tables) when it is an Authorization: the
/// credentials stay out of what a proxy's compression state keeps.
fn sensitive(name: &http::header::HeaderName, mut value: http::HeaderValue) -> http::HeaderValue {
    if name == http::header::AUTHORIZATION {
        value.set_sensitive(true);
    }
    value
}

/// One request of the run as streams send it, built once per connection task.
pub(super) struct Template {
    pub(super) method: http::Method,
    pub(super) uri: http::Uri,
    pub(super) headers: http::HeaderMap,
    pub(super) body: Bytes,
}

impl Template {
    /// `method target` with `headers` and `body` at the plan's authority. Validated with the
    /// plan: method, authority and target are what HTTP/1.1 sends too.
    fn new(
        shared: &Shared,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Template {
        let (authority, _) = shared.plan.authority_and_path();
        let scheme = if shared.plan.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let uri = format!("{scheme}://{authority}{target}")
            .parse()
            .unwrap_or_else(|_| http::Uri::from_static("/"));
        let map = header_map(headers, shared.plan.url_authorization());
        Template {
            method: http::Method::from_bytes(method.as_bytes()).unwrap_or(http::Method::GET),
            uri,
            headers: map,
            body: Bytes::copy_from_slice(body),
        }
    }

    /// One template per request of the run: the mix's, in its order, or the single one.
    pub(super) fn all(shared: &Shared) -> Vec<Template> {
        let plan = &shared.plan;
        if plan.requests.is_empty() {
            let (_, path) = plan.authority_and_path();
            return vec![Template::new(
                shared,
                &plan.method,
                path,
                &plan.headers,
                &plan.body,
            )];
        }
        plan.requests
            .iter()
            .map(|r| Template::new(shared, &r.method, &r.target, &r.headers, &r.body))
            .collect()
    }

    /// A request of a mix with placeholders, read back from its patched HTTP/1.1 bytes (the
    /// placeholders are filled there, where both engines fill them); none if they do not
    /// parse, which the plan's validation rules out.
    pub(super) fn patched(&self, bytes: &[u8]) -> Option<(http::Request<()>, Bytes)> {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut parsed = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(head) = parsed.parse(bytes).ok()? else {
            return None;
        };
        let mut r = http::Request::new(());
        *r.method_mut() = http::Method::from_bytes(parsed.method?.as_bytes()).ok()?;
        let mut uri = self.uri.clone().into_parts();
        uri.path_and_query = Some(parsed.path?.parse().ok()?);
        *r.uri_mut() = http::Uri::from_parts(uri).ok()?;
        let map = r.headers_mut();
        for h in parsed.headers.iter() {
            let lower = h.name.to_ascii_lowercase();
            if http1_only(&lower) {
                continue;
            }
            if let (Ok(name), Ok(value)) = (
                http::header::HeaderName::from_bytes(lower.as_bytes()),
                http::HeaderValue::from_bytes(h.value),
            ) {
                let value = sensitive(&name, value);
                map.append(name, value);
            }
        }
        Some((r, Bytes::copy_from_slice(&bytes[head..])))
    }

    pub(super) fn request(&self) -> http::Request<()> {
        let mut r = http::Request::new(());
        *r.method_mut() = self.method.clone();
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_own_authorization_wins_over_the_urls_and_is_sensitive() {
        let basic = Some("Basic dTpw");
        // None of its own: the URL's, sensitive.
        let map = header_map(&[], basic);
        let auth = &map[http::header::AUTHORIZATION];
        assert_eq!(auth, "Basic dTpw");
        assert!(auth.is_sensitive());
        // Its own, whatever its case, even one from_str refuses (obs-text): its own is sent,
        // as HTTP/1.1 sends it, never the URL's in its place.
        for own in ["Bearer mine", "Bearer caf\u{e9}"] {
            let map = header_map(&[("AuthoriZation".into(), own.into())], basic);
            let values: Vec<&[u8]> = map
                .get_all(http::header::AUTHORIZATION)
                .iter()
                .map(http::HeaderValue::as_bytes)
                .collect();
            assert_eq!(values, [own.as_bytes()], "{own}");
            assert!(map[http::header::AUTHORIZATION].is_sensitive());
        }
    }

    #[test]
    fn a_patched_requests_authorization_is_sensitive() {
        let template = Template {
            method: http::Method::GET,
            uri: "http://h:1/".parse().unwrap(),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        };
        let bytes =
            b"GET /a?n=1 HTTP/1.1\r\nhost: h:1\r\nauthorization: Basic dTpw\r\nx-a: 1\r\n\r\n";
        let (r, _) = template.patched(bytes).unwrap();
        assert!(r.headers()[http::header::AUTHORIZATION].is_sensitive());
        assert!(!r.headers()["x-a"].is_sensitive());
        assert!(!r.headers().contains_key(http::header::HOST));
    }
}
