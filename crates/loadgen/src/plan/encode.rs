//! The request bytes of a plan (one request or a mix), encoded once for the whole run.

use super::Plan;
use crate::error::Error;
use crate::mix::{self, Encoded, EncodedRequest, Order};

impl Plan {
    /// The Host header (the `:authority` of HTTP/2) and the request target (path and
    /// query).
    pub fn authority_and_path(&self) -> (&str, &str) {
        (&self.host_header, &self.path)
    }

    /// The Authorization header of the URL's credentials (`user:password@`), sent unless a
    /// request has its own.
    pub fn url_authorization(&self) -> Option<&str> {
        self.authorization.as_deref()
    }

    /// The request bytes, encoded once for the whole run.
    pub fn encode_request(&self) -> Vec<u8> {
        self.encode_one(&self.method, &self.path, &self.headers, &self.body)
    }

    /// Every request of the run laid out for batches of `pipeline` (see [`Encoded`]): the
    /// mix, or the single request as a mix of one.
    pub(crate) fn encode(&self) -> Result<Encoded, Error> {
        if self.requests.is_empty() {
            let single = EncodedRequest {
                bytes: self.encode_request(),
                slots: Vec::new(),
            };
            // HTTP/2 claims up to `streams` requests at once, as pipelining claims `pipeline`.
            let depth = self.pipeline.max(self.streams);
            return Encoded::new(&[single], &[0], &[1], Order::RoundRobin, depth);
        }
        let (_, name_of) = mix::names(&self.requests);
        let encoded = self
            .requests
            .iter()
            .map(|r| {
                mix::encode_with_placeholders(r, |target, headers, body| {
                    self.encode_one(&r.method, target, headers, body)
                })
                .map_err(|m| Error::InvalidPlan(format!("request {:?}: {m}", r.name)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let weights: Vec<u32> = self.requests.iter().map(|r| r.weight).collect();
        let depth = self.pipeline.max(self.streams);
        let encoded = Encoded::new(&encoded, &name_of, &weights, self.order, depth)?;
        // Placeholders are patched into each connection's own copy of its batch.
        let copies = encoded.batch_room(depth) as u64 * self.connections as u64;
        if encoded.templated() && copies > mix::MAX_ENCODED_BYTES as u64 * 4 {
            return Err(Error::InvalidPlan(format!(
                "a mix with placeholders keeps a copy of a batch per connection: {copies} bytes at -c {} and {} requests a batch (--pipeline, --streams); at most {} (fewer connections, a shallower pipeline or shorter requests)",
                self.connections,
                depth,
                mix::MAX_ENCODED_BYTES * 4
            )));
        }
        Ok(encoded)
    }

    fn encode_one(
        &self,
        method: &str,
        target: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + body.len());
        let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
        out.extend_from_slice(format!("{method} {target} HTTP/1.1\r\n").as_bytes());
        if !has("host") {
            out.extend_from_slice(format!("Host: {}\r\n", self.host_header).as_bytes());
        }
        if !has("user-agent") {
            out.extend_from_slice(
                concat!("User-Agent: tailscope/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            );
        }
        if !has("accept") {
            out.extend_from_slice(b"Accept: */*\r\n");
        }
        if let Some(credentials) = self
            .authorization
            .as_ref()
            .filter(|_| !has("authorization"))
        {
            out.extend_from_slice(format!("Authorization: {credentials}\r\n").as_bytes());
        }
        if !self.keepalive && !has("connection") {
            out.extend_from_slice(b"Connection: close\r\n");
        }
        if (!body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH"))
            && !has("content-length")
        {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        for (k, v) in headers {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        out
    }
}
