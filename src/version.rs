//! What `tailscope --version` says: the version, the commit it was built from (build.rs;
//! "unknown" outside a git checkout) and what is compiled in. Every engine and protocol below
//! is always built (no cargo features turn one off); io_uring is then used where the kernel
//! allows it, which the report's `config.engine` records per run.

/// `-V`: the version and the commit.
pub const SHORT: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TAILSCOPE_COMMIT"),
    ")"
);

/// `--version`: [`SHORT`], then the engines and protocols compiled in.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TAILSCOPE_COMMIT"),
    ")\n",
    "engines: io_uring (used where the kernel allows it), tokio (epoll)\n",
    "TLS: rustls with the ring provider (https:// URLs, client certificates, --tls targets)\n",
    "HTTP: HTTP/1.1 with pipelining, HTTP/2 (h2 over TLS by ALPN, h2c over cleartext)\n",
    "reference server: io_uring (tailscope serve, --target embedded)"
);
