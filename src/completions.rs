//! `tailscope completions SHELL` and `tailscope man DIR`: what a shell and `man` need, generated
//! from the same clap definition that parses the command line, so they cannot drift from it.

use std::path::Path;

use anyhow::Result;
use clap_complete::Shell;

use crate::exit::{Outcome, UsageError};

/// Prints the completion script of `shell` for `cmd` on stdout (a closed pipe is not an error).
pub fn completions(mut cmd: clap::Command, shell: Shell) -> Result<Outcome> {
    // Into memory first: clap_complete panics when its writer fails (`| head`).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "tailscope", &mut script);
    tailscope_session::output::print_stdout(&String::from_utf8_lossy(&script))?;
    Ok(Outcome::Success)
}

/// Writes `tailscope.1` and a page per subcommand (`tailscope-run.1`, ...) into `dir`,
/// creating it if needed, and names each page on stderr.
pub fn man(cmd: clap::Command, dir: &Path) -> Result<Outcome> {
    let unwritable = |e: std::io::Error| {
        UsageError(format!(
            "cannot write the man pages into {}: {e} (give a directory you can write to)",
            dir.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    // Built, so that each subcommand's display name is `tailscope-run` (its page's name);
    // `help` is not a page of its own.
    // The version section is one paragraph in roff: the short version (and commit) reads
    // there; `--version` lists the features.
    let mut cmd = cmd
        .disable_help_subcommand(true)
        .long_version(None::<&'static str>);
    cmd.build();
    // Every page's footer names the tool, not its subcommand (`run 0.1.0`).
    let source = format!("tailscope {}", cmd.get_version().unwrap_or_default());
    let subcommands = cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned();
    let pages: Vec<clap::Command> = std::iter::once(cmd.clone()).chain(subcommands).collect();
    for page in pages {
        let path = clap_mangen::Man::new(page)
            .source(source.clone())
            .manual("tailscope manual")
            .generate_to(dir)
            .map_err(unwritable)?;
        say!("tailscope: wrote {}", path.display());
    }
    Ok(Outcome::Success)
}
