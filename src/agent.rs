//! `tailscope agent`: the server-side profiler for runs on other hosts, in the foreground
//! until a signal ends the process.

use std::io::Write;

use anyhow::Result;
use tailscope_agent::server::{Agent, AgentConfig};
use tailscope_cli::args::AgentArgs;

use crate::exit::{Outcome, UsageError};

/// Reads or makes the token, binds, prints where it listens, the certificate's fingerprint
/// (and the token, when generated), and serves.
pub fn agent(args: AgentArgs) -> Result<Outcome> {
    let usage = |e: tailscope_agent::Error| anyhow::Error::new(UsageError(e.to_string()));
    let (token, generated) = match &args.token_file {
        Some(path) => (
            tailscope_agent::read_token(path, "--token-file").map_err(usage)?,
            false,
        ),
        None => (tailscope_agent::new_token()?, true),
    };
    let agent = Agent::bind(&AgentConfig {
        listen: args.listen,
        token: token.clone(),
        max_clients: args.max_clients,
        cert_dir: args.cert_dir,
        allow_launch: args.allow_launch,
    })
    .map_err(usage)?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "tailscope agent listening on {}", agent.local_addr()?);
    let _ = writeln!(out, "fingerprint SHA256:{}", agent.fingerprint());
    if args.allow_launch {
        let _ = writeln!(
            out,
            "launching allowed: a run holding the token may start any command here, as this user"
        );
    }
    if generated {
        // Printed once: the runs need it in a file (--agent-token).
        let _ = writeln!(out, "token {token}");
    }
    let _ = out.flush();
    drop(out);
    agent.serve(|line| say!("tailscope agent: {line}"));
    Ok(Outcome::Success)
}
