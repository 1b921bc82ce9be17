//! What to launch.

use std::path::PathBuf;
use std::time::Duration;

use crate::Error;

/// The most worker processes a launched nginx may have, wherever the number is given
/// (`--target nginx:N`, a suite's `workers`).
pub const MAX_NGINX_WORKERS: usize = 64;

fn nginx_workers_range() -> String {
    format!("the number of nginx worker processes must be 1 to {MAX_NGINX_WORKERS}")
}

/// Checks an nginx worker count, with the one message for its range.
pub fn check_nginx_workers(n: usize) -> Result<usize, String> {
    if (1..=MAX_NGINX_WORKERS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("{n} is out of range: {}", nginx_workers_range()))
    }
}

/// A server to launch and load.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetSpec {
    /// The reference server, run as `current_exe() serve` so it is profiled like any other.
    Embedded {
        /// Worker threads (default: one per server CPU).
        threads: Option<usize>,
        /// Listen backlog.
        backlog: Option<i32>,
        /// Injected stalls: every, for.
        stall: Option<(Duration, Duration)>,
    },
    /// nginx from a generated config.
    Nginx {
        /// Worker processes.
        workers: usize,
        /// Served under `/static/`.
        static_dir: Option<PathBuf>,
        /// Served over TLS with a throw-away certificate (`--tls`, a suite's `tls = true`).
        tls: bool,
        /// Served over HTTP/2 (`--http2`, a suite's `http2 = true`): h2 with `tls`, else h2c
        /// (prior knowledge only).
        http2: bool,
    },
    /// Any server, from a shell command template with `{port}` and `{cpus}`.
    Command {
        /// The template.
        template: String,
        /// Extra environment.
        env: Vec<(String, String)>,
        /// Working directory.
        cwd: Option<PathBuf>,
        /// Path that must answer HTTP for the server to count as ready.
        ready_path: String,
        /// How long it may take.
        ready_timeout: Duration,
    },
}

impl TargetSpec {
    /// Parses the command line's `--target`: `embedded`, `nginx`, `nginx:WORKERS`, or
    /// `command:TEMPLATE`.
    pub fn parse(s: &str) -> Result<TargetSpec, Error> {
        if let Some(template) = s.strip_prefix("command:") {
            if !template.contains("{port}") {
                return Err(Error::BadSpec(format!(
                    "command target {template:?} has no {{port}}: the server must listen where tailscope says, e.g. 'command:python3 -m http.server {{port}}'"
                )));
            }
            return Ok(TargetSpec::Command {
                template: template.to_string(),
                env: Vec::new(),
                cwd: None,
                ready_path: "/".into(),
                ready_timeout: Duration::from_secs(10),
            });
        }
        if let Some(workers) = s.strip_prefix("nginx:") {
            return match workers.parse::<usize>() {
                Ok(n) => check_nginx_workers(n)
                    .map(|workers| TargetSpec::Nginx {
                        workers,
                        static_dir: None,
                        tls: false,
                        http2: false,
                    })
                    .map_err(|e| Error::BadSpec(format!("nginx target {s:?}: {e}, e.g. nginx:2"))),
                Err(_) => Err(Error::BadSpec(format!(
                    "nginx target {s:?}: {}, e.g. nginx:2",
                    nginx_workers_range()
                ))),
            };
        }
        match s {
            "embedded" => Ok(TargetSpec::Embedded {
                threads: None,
                backlog: None,
                stall: None,
            }),
            "nginx" => Ok(TargetSpec::Nginx {
                workers: 1,
                static_dir: None,
                tls: false,
                http2: false,
            }),
            other => Err(Error::BadSpec(format!(
                "unknown target {other:?}: use embedded, nginx, nginx:WORKERS, or 'command:CMD --port {{port}}'"
            ))),
        }
    }

    /// The same target served over TLS (`--tls`) and/or HTTP/2 (`--http2`); only nginx
    /// can be.
    pub fn serving(self, tls: bool, http2: bool) -> Result<TargetSpec, Error> {
        match self {
            TargetSpec::Nginx {
                workers,
                static_dir,
                ..
            } => Ok(TargetSpec::Nginx {
                workers,
                static_dir,
                tls,
                http2,
            }),
            other => Err(Error::BadSpec(format!(
                "--tls and --http2 are for --target nginx: the {} target is served as it is (run it yourself and give its URL)",
                other.kind()
            ))),
        }
    }

    /// Whether the target is served over TLS (its URL is https://).
    pub fn tls(&self) -> bool {
        matches!(self, TargetSpec::Nginx { tls: true, .. })
    }

    /// Whether the target is served over HTTP/2 (h2 with TLS, h2c without).
    pub fn http2(&self) -> bool {
        matches!(self, TargetSpec::Nginx { http2: true, .. })
    }

    /// A short name for output: `embedded`, `nginx`, or the command's program.
    pub fn kind(&self) -> &'static str {
        match self {
            TargetSpec::Embedded { .. } => "embedded",
            TargetSpec::Nginx { .. } => "nginx",
            TargetSpec::Command { .. } => "command",
        }
    }

    /// Where readiness is checked.
    pub fn ready_path(&self) -> &str {
        match self {
            TargetSpec::Command { ready_path, .. } => ready_path,
            _ => "/plaintext",
        }
    }

    /// How long the server may take to become ready.
    pub fn ready_timeout(&self) -> Duration {
        match self {
            TargetSpec::Command { ready_timeout, .. } => *ready_timeout,
            _ => Duration::from_secs(10),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_kinds() {
        assert_eq!(TargetSpec::parse("embedded").unwrap().kind(), "embedded");
        assert_eq!(TargetSpec::parse("nginx").unwrap().kind(), "nginx");
        let c = TargetSpec::parse("command:python3 -m http.server {port}").unwrap();
        assert_eq!(c.kind(), "command");
        assert_eq!(c.ready_path(), "/");
        assert!(TargetSpec::parse("command:python3 -m http.server")
            .unwrap_err()
            .to_string()
            .contains("{port}"));
        assert_eq!(
            TargetSpec::parse("nginx:2").unwrap(),
            TargetSpec::Nginx {
                workers: 2,
                static_dir: None,
                tls: false,
                http2: false,
            }
        );
        let served = TargetSpec::parse("nginx:2").unwrap().serving(true, false);
        assert!(served.unwrap().tls());
        assert!(TargetSpec::parse("embedded")
            .unwrap()
            .serving(true, false)
            .is_err());
        assert!(TargetSpec::parse("nginx:0").is_err());
        assert!(TargetSpec::parse("nginx:x").is_err());
        assert!(TargetSpec::parse("apache")
            .unwrap_err()
            .to_string()
            .contains("unknown target"));
    }
}
