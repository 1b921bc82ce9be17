//! nginx as a target: a config written into a temporary directory, nginx in the foreground.

use std::path::{Path, PathBuf};

use crate::cert::TlsFiles;
use crate::Error;

/// Finds the nginx binary (it lives in /usr/sbin, which is not always on PATH).
pub fn find() -> Result<PathBuf, Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([
            PathBuf::from("/usr/sbin"),
            PathBuf::from("/usr/local/sbin"),
            PathBuf::from("/usr/local/nginx/sbin"),
        ])
        .map(|dir| dir.join("nginx"))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::NotInstalled {
            program: "nginx".into(),
            hint: "install it (apt-get install nginx-light) or use --target 'command:...'".into(),
        })
}

/// One worker per CPU in turn (`auto`), and only on the server's CPUs: a bare `auto` binds
/// worker N to CPU N whatever the master's own affinity, which put the second worker on the
/// generator's CPU. The mask is nginx's: one character per CPU, CPU 0 rightmost.
fn affinity_line(workers: usize, cpus: &[usize]) -> String {
    if workers < 2 {
        return String::new();
    }
    match cpus.iter().max() {
        None => "worker_cpu_affinity auto;\n".to_string(),
        Some(&top) => {
            let mask: String = (0..=top)
                .rev()
                .map(|c| if cpus.contains(&c) { '1' } else { '0' })
                .collect();
            format!("worker_cpu_affinity auto {mask};\n")
        }
    }
}

/// Writes `nginx.conf` into `dir`: `workers` workers, no access log, keep-alive without a
/// request cap, `/plaintext`, `/` and `/json` answered like the reference server,
/// `/static/` from `static_dir` when given, over TLS with `tls`'s certificate when given,
/// over HTTP/2 when `http2`; several workers are spread over `cpus` (empty: every CPU).
pub fn write_config(
    dir: &Path,
    port: u16,
    workers: usize,
    cpus: &[usize],
    static_dir: Option<&Path>,
    tls: Option<&TlsFiles>,
    http2: bool,
) -> Result<PathBuf, Error> {
    let d = dir.display();
    let affinity = affinity_line(workers, cpus);
    let static_location = static_dir.map_or(String::new(), |s| {
        format!("        location /static/ {{ alias {}/; }}\n", s.display())
    });
    // `listen ... ssl` rather than `ssl on;` (gone in 1.25) or `http2 on;` (new in 1.25.1):
    // the one form every nginx since 1.15 reads. A shared session cache lets a reconnect
    // resume on any worker.
    let (ssl, tls_lines) = match tls {
        Some(f) => (
            " ssl",
            format!(
                "        ssl_certificate {};\n        ssl_certificate_key {};\n        ssl_session_cache shared:TS:10m;\n",
                f.cert.display(),
                f.key.display()
            ),
        ),
        None => ("", String::new()),
    };
    // `listen ... http2` (not `http2 on;`, new in 1.25.1): h2 by ALPN with ssl, h2c prior
    // knowledge without.
    let h2 = if http2 { " http2" } else { "" };
    // Several workers each listen on their own socket (`reuseport`), so the kernel spreads
    // connections over them. On one shared socket Linux wakes one worker for most accepts,
    // and a newcomer's `nginx:2` ran every connection of a short run on one worker, the
    // other at 0.00 s CPU.
    let reuseport = if workers > 1 { " reuseport" } else { "" };
    let config = format!(
        "worker_processes {workers};\n{affinity}daemon off;\nmaster_process on;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
events {{ worker_connections 16384; }}\n\
http {{\n    access_log off;\n    keepalive_requests 1000000000;\n    keepalive_timeout 75s;\n\
    client_body_temp_path {d}/body;\n    proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n\
    uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n\
    server {{\n        listen 127.0.0.1:{port} backlog=4096{reuseport}{ssl}{h2};\n{tls_lines}\
        location = /plaintext {{ default_type text/plain; return 200 \"Hello, World!\"; }}\n\
        location = / {{ default_type text/plain; return 200 \"Hello, World!\"; }}\n\
        location = /json {{ default_type application/json; return 200 '{{\"message\":\"Hello, World!\"}}'; }}\n\
{static_location}    }}\n}}\n"
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).map_err(|error| Error::Write {
        path: path.clone(),
        error,
    })?;
    Ok(path)
}

/// Removes `tailscope-nginx-PID-PORT` directories under `tmp` whose tailscope (PID) is no
/// longer running: what a tailscope killed before its guardian could clean up left behind.
pub fn sweep_stale_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tailscope-nginx-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{owner}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_bound_only_to_the_server_s_cpus() {
        assert_eq!(affinity_line(1, &[0]), "");
        assert_eq!(affinity_line(2, &[]), "worker_cpu_affinity auto;\n");
        assert_eq!(affinity_line(2, &[0]), "worker_cpu_affinity auto 1;\n");
        assert_eq!(
            affinity_line(4, &[1, 3]),
            "worker_cpu_affinity auto 1010;\n"
        );
    }

    /// Several workers each listen on their own socket; one worker needs none of it.
    #[test]
    fn several_workers_listen_with_reuseport() {
        let dir = std::env::temp_dir().join(format!("ts-nginx-conf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let listen = |workers| {
            let path = write_config(&dir, 8080, workers, &[0], None, None, false).unwrap();
            let conf = std::fs::read_to_string(path).unwrap();
            conf.lines()
                .find(|l| l.trim_start().starts_with("listen "))
                .unwrap()
                .trim()
                .to_string()
        };
        assert_eq!(listen(2), "listen 127.0.0.1:8080 backlog=4096 reuseport;");
        assert_eq!(listen(1), "listen 127.0.0.1:8080 backlog=4096;");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn sweeps_only_the_dirs_of_dead_owners() {
        let tmp = std::env::temp_dir().join(format!("ts-sweep-{}", std::process::id()));
        let mine = tmp.join(format!("tailscope-nginx-{}-8080", std::process::id()));
        // Pid numbers stop well below this (pid_max is at most 2^22).
        let dead = tmp.join("tailscope-nginx-999999999-8080");
        let other = tmp.join("tailscope-other-1");
        for d in [&mine, &dead, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        sweep_stale_dirs(&tmp);
        assert!(mine.exists() && other.exists());
        assert!(!dead.exists());
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
