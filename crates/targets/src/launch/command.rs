//! The command that starts each kind of target: the embedded server's arguments, nginx's
//! configuration in a directory of its own, a command template's shell line; and the name a
//! command target goes by.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::cpus::format_list;
use crate::{nginx, Error, TargetSpec};

/// The arguments after the tailscope executable that start the embedded server for a
/// launch: `serve` on a free loopback port with these settings. The binary's tests parse
/// them with its own command line, so the two cannot drift apart.
pub fn embedded_args(
    threads: usize,
    cpu_list: &str,
    backlog: Option<i32>,
    stall: Option<(Duration, Duration)>,
) -> Vec<String> {
    let mut args: Vec<String> = ["serve", "--addr", "127.0.0.1:0", "--threads"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(threads.to_string());
    if !cpu_list.is_empty() {
        args.extend(["--cpus".to_string(), cpu_list.to_string()]);
    }
    if let Some(b) = backlog {
        args.extend(["--backlog".to_string(), b.to_string()]);
    }
    if let Some((every, duration)) = stall {
        args.extend([
            "--stall-every".to_string(),
            format!("{}ms", every.as_millis()),
            "--stall-for".to_string(),
            format!("{}ms", duration.as_millis()),
        ]);
    }
    args
}

/// A target's command, ready to spawn, with what the launch must keep beside it.
pub(super) struct Prepared {
    /// What the target is called in messages (a command target: the program that listens).
    pub name: String,
    pub cmd: Command,
    /// The port it will listen on; `None` when it announces its own (the embedded server).
    pub port: Option<u16>,
    /// A directory of its own (nginx's), removed when the target stops.
    pub temp_dir: Option<PathBuf>,
    /// Served over TLS: its throw-away certificate's files (in `temp_dir`).
    pub tls: Option<crate::cert::TlsFiles>,
}

/// The command that starts `spec` on `server_cpus`, with a free port picked (and nginx's
/// configuration written) for it.
pub(super) fn prepare(spec: &TargetSpec, server_cpus: &[usize]) -> Result<Prepared, Error> {
    let cpu_list = format_list(server_cpus);
    let mut tls_files = None;
    let (name, cmd, port, temp_dir) = match spec {
        TargetSpec::Embedded {
            threads,
            backlog,
            stall,
        } => {
            let exe = std::env::current_exe().map_err(|error| Error::Spawn {
                name: "embedded".into(),
                error,
            })?;
            let mut cmd = Command::new(exe);
            let threads = threads.unwrap_or(server_cpus.len().max(1));
            cmd.args(embedded_args(threads, &cpu_list, *backlog, *stall));
            ("embedded".to_string(), cmd, None, None)
        }
        TargetSpec::Nginx {
            workers,
            static_dir,
            tls,
            http2,
        } => {
            let bin = nginx::find()?;
            let port = free_port()?;
            // Directories left by a tailscope that was killed before its guardian could
            // remove them.
            nginx::sweep_stale_dirs(&std::env::temp_dir());
            let dir =
                std::env::temp_dir().join(format!("tailscope-nginx-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|error| Error::Write {
                path: dir.clone(),
                error,
            })?;
            tls_files = match tls {
                true => Some(crate::cert::write_throwaway(&dir)?),
                false => None,
            };
            let conf = nginx::write_config(
                &dir,
                port,
                *workers,
                server_cpus,
                static_dir.as_deref(),
                tls_files.as_ref(),
                *http2,
            )?;
            let mut cmd = Command::new(bin);
            cmd.arg("-p")
                .arg(&dir)
                .arg("-e")
                .arg(dir.join("error.log"))
                .arg("-c")
                .arg(conf);
            ("nginx".to_string(), cmd, Some(port), Some(dir))
        }
        TargetSpec::Command {
            template, env, cwd, ..
        } => {
            let port = free_port()?;
            let line = template
                .replace("{port}", &port.to_string())
                .replace("{cpus}", &cpu_list);
            let mut cmd = Command::new("sh");
            cmd.arg("-c")
                .arg(&line)
                .envs(env.iter().map(|(k, v)| (k, v)));
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            let program = program_of(template);
            (program, cmd, Some(port), None)
        }
    };
    Ok(Prepared {
        name,
        cmd,
        port,
        temp_dir,
        tls: tls_files,
    })
}

/// As a person would type it: the program and its arguments, space-separated (a
/// `Command`'s Debug form quotes every word).
pub(super) fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn free_port() -> Result<u16, Error> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|error| Error::Spawn {
            name: "a free port".into(),
            error,
        })
}

/// The program a command target is named after: the first word of the shell command that
/// has `{port}` (the server must listen there), past `exec` and `VAR=value` words. A newcomer's
/// `echo cpus={cpus} >&2; python3 -m http.server {port}` was named `echo`. Quotes are read as
/// the shell reads them: `python3 -c "import sys; sys.exit(3)" {port}` is python3's, not a
/// command `sys.exit(3)"` cut at the `;` inside its quotes.
fn program_of(template: &str) -> String {
    let commands: Vec<Vec<String>> = shell_commands(template)
        .into_iter()
        .filter(|c| !c.is_empty())
        .collect();
    let server = commands
        .iter()
        .find(|c| c.iter().any(|w| w.contains("{port}")))
        .or(commands.first());
    server
        .and_then(|c| {
            c.iter()
                .find(|w| *w != "exec" && !w.contains('=') && *w != "(" && *w != "{")
        })
        .map_or("command".to_string(), |w| {
            w.rsplit('/').next().unwrap_or(w).to_string()
        })
}

/// A shell line's commands (split at `;`, `&`, `|` and newlines) as their words (split at
/// blanks), both outside quotes only, the quotes and backslashes taken off as `sh` does.
fn shell_commands(line: &str) -> Vec<Vec<String>> {
    let (mut commands, mut words, mut word) = (Vec::new(), Vec::new(), String::new());
    let mut quote = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, c) if c.is_whitespace() || matches!(c, ';' | '&' | '|') => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                if c != ' ' && c != '\t' && !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[cfg(test)]
mod program_tests {
    use super::program_of;

    #[test]
    fn a_command_target_is_named_after_the_command_that_listens() {
        assert_eq!(program_of("python3 -m http.server {port}"), "python3");
        assert_eq!(
            program_of("echo cpus={cpus} >&2; python3 -m http.server {port} --bind 127.0.0.1"),
            "python3"
        );
        assert_eq!(
            program_of("cd /srv && PORT={port} exec /usr/bin/gunicorn -w 3 app:app"),
            "gunicorn"
        );
        assert_eq!(program_of("./server"), "server");
        // A `;` inside quotes does not end the command.
        assert_eq!(
            program_of(r#"python3 -c "import sys; sys.exit(3)" {port}"#),
            "python3"
        );
        assert_eq!(
            program_of("sh -c 'echo up; exec ./srv --port {port}'"),
            "sh"
        );
        assert_eq!(program_of(r"PORT={port} /opt/my\ server"), "my server");
        assert_eq!(program_of("  "), "command");
    }
}
