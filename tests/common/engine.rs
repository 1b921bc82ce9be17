//! The generator engines the end-to-end run tests are parameterised over.
//!
//! A test written once as `fn name(e: Engine)` runs against both engines with
//! `engine_tests!(name, …)`, which makes a `tokio_engine::name` and a `uring_engine::name`
//! test of it; the io_uring one says "skipped" where this machine cannot run that engine.

use std::sync::OnceLock;

/// A generator engine (`tailscope run --engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// epoll, through tokio.
    Tokio,
    /// io_uring.
    Uring,
}

impl Engine {
    /// The value of `--engine`.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Tokio => "tokio",
            Engine::Uring => "uring",
        }
    }

    /// `args` (a `tailscope run …` command line) with `--engine NAME` added.
    pub fn args<'a>(self, args: &[&'a str]) -> Vec<&'a str> {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--engine", self.name()]);
        all
    }

    /// Whether this machine runs the engine; says "skipped" (see [`super::skip`]) when not.
    pub fn available(self) -> bool {
        static URING: OnceLock<Result<(), String>> = OnceLock::new();
        if self == Engine::Tokio {
            return true;
        }
        // A run that cannot connect ends at once; one whose engine cannot run here is
        // refused before it starts, naming io_uring.
        let probe = URING.get_or_init(|| {
            let out = super::tailscope(&[
                "run",
                "http://127.0.0.1:1/",
                "-n",
                "1",
                "-c",
                "1",
                "--engine",
                "uring",
            ]);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            match stderr.find("the io_uring engine cannot run here") {
                Some(at) => Err(stderr[at..].trim().to_string()),
                None => Ok(()),
            }
        });
        match probe {
            Ok(()) => true,
            Err(why) => {
                super::skip(why);
                false
            }
        }
    }

    /// [`super::run_json`] on this engine.
    pub fn run_json(self, url: &str, args: &[&str]) -> (i32, serde_json::Value, String) {
        let (code, r, stderr) = super::run_json(url, &self.args(args));
        assert_eq!(
            r["config"]["engine"]["name"],
            self.name(),
            "the engine asked for ran: {}",
            r["config"]
        );
        (code, r, stderr)
    }

    /// [`super::tailscope`] on this engine (`args` start with `run`).
    pub fn tailscope(self, args: &[&str]) -> std::process::Output {
        super::tailscope(&self.args(args))
    }
}

/// Runs each named `fn(Engine)` as a test on each engine: `tokio_engine::NAME` and
/// `uring_engine::NAME`.
#[allow(unused_macros)] // Test binaries that share `common` without running load.
macro_rules! engine_tests {
    ($($name:ident),* $(,)?) => {
        mod tokio_engine {
            $(#[test]
            fn $name() {
                super::$name($crate::common::Engine::Tokio)
            })*
        }
        mod uring_engine {
            $(#[test]
            fn $name() {
                if $crate::common::Engine::Uring.available() {
                    super::$name($crate::common::Engine::Uring)
                }
            })*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use engine_tests;
