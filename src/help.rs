//! The top-level help's closing part: examples, what bare `tailscope` does, the exit codes.

use crate::exit;

/// Printed after the subcommands by `tailscope --help` (and in the man page of `tailscope`).
pub fn top_level() -> String {
    format!(
        "Examples:
  tailscope                      the reference server loaded for 10 s, on the dashboard
  tailscope run http://127.0.0.1:8080/ -c 64 -z 30s --json run.json
  tailscope run --target nginx -q 20000 -z 1m --fail-if 'p99 < 5ms'
  tailscope compare base.json new.json --fail-if-regression 5

Without a subcommand, tailscope starts the embedded io_uring reference server on the first half
of the CPUs and loads its /plaintext from the other half for 10 s (the dashboard on a terminal,
headless otherwise), prints the summary, stops the server and exits.

Exit codes:
{}",
        exit::help_table()
    )
}
