//! The suite file's `[[target]]` and `[[endpoint]]` sections, checked (split from
//! [`super::parse`] to keep it readable).

use super::*;

/// A `[[target]]`'s kind and its settings, checked.
pub(super) fn target_spec(src: &Source, t: &TargetSection) -> Result<TargetSpec, String> {
    let spec = match t.kind.get_ref().as_str() {
        "embedded" => {
            let stall = match (&t.stall_every, &t.stall_for) {
                (Some(e), Some(f)) => Some((
                    src.duration(&Some(e.clone()), Duration::ZERO, MS..=HOUR)?,
                    src.duration(&Some(f.clone()), Duration::ZERO, MS..=HOUR)?,
                )),
                (None, None) => None,
                (Some(s), None) | (None, Some(s)) => {
                    return Err(src.at(s, "stall_every and stall_for go together"))
                }
            };
            TargetSpec::Embedded {
                threads: src.count(&t.threads, "threads", 1..=MAX_THREADS)?,
                backlog: src.number(&t.backlog, "backlog", 1..=65535)?,
                stall,
            }
        }
        "nginx" => TargetSpec::Nginx {
            workers: match &t.workers {
                Some(w) => match usize::try_from(*w.get_ref()) {
                    Ok(n) => tailscope_targets::check_nginx_workers(n),
                    Err(_) => Err(format!(
                        "{} is out of range: give 1..={}",
                        w.get_ref(),
                        tailscope_targets::MAX_NGINX_WORKERS
                    )),
                }
                .map_err(|e| src.at(w, format!("workers = {e}")))?,
                None => 1,
            },
            static_dir: t.static_dir.clone(),
            tls: t.tls.as_ref().is_some_and(|b| *b.get_ref()),
            http2: t.http2.as_ref().is_some_and(|b| *b.get_ref()),
        },
        "command" => {
            let Some(command) = &t.command else {
                return Err(src.at(
                    &t.kind,
                    "a command target needs command = \"... {port} ...\"",
                ));
            };
            if !command.get_ref().contains("{port}") {
                return Err(src.at(
                    command,
                    "the command has no {port}: the server must listen where tailscope says",
                ));
            }
            TargetSpec::Command {
                template: command.get_ref().clone(),
                env: t.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                cwd: t.cwd.clone(),
                ready_path: t.ready_path.clone().unwrap_or_else(|| "/".into()),
                ready_timeout: src.duration(
                    &t.ready_timeout,
                    Duration::from_secs(10),
                    MS..=HOUR,
                )?,
            }
        }
        other => {
            return Err(src.at(
                &t.kind,
                format!("unknown kind {other:?}: use \"embedded\", \"nginx\" or \"command\""),
            ));
        }
    };
    Ok(spec)
}

/// The suite's endpoints in order (a path, or `mix:FILE` for a load file) and the mixes
/// they name. A mix's `stages` are refused: the suite's stages are its `[load]`'s, the same
/// for every endpoint, and a mix's would be silently ignored otherwise.
#[allow(clippy::type_complexity)]
pub(super) fn endpoints_of(
    src: &Source,
    sections: &[EndpointSection],
) -> Result<(Vec<String>, BTreeMap<String, (Vec<RequestSpec>, Order)>), String> {
    let mut endpoints = Vec::new();
    let mut mixes = BTreeMap::new();
    for e in sections {
        match (&e.path, &e.load) {
            (Some(path), None) => {
                if !path.get_ref().starts_with('/') {
                    return Err(src.at(path,
                        format!("endpoint path {:?} must start with '/'", path.get_ref()),
                    ));
                }
                endpoints.push(path.get_ref().clone());
            }
            (None, Some(load)) => {
                let dir = src.file.parent().unwrap_or(Path::new("."));
                let mix = files::read_load_file(&dir.join(load.get_ref()))
                    .map_err(|e| src.at(load, e))?;
                if let Some(url) = &mix.url {
                    return Err(src.at(load,
                        format!(
                            "{}: names url = {:?}, and the suite launches each target itself: leave the url out",
                            mix.path,
                            tailscope_loadgen::plan::redact_password(url)
                        ),
                    ));
                }
                if mix.stages.is_some() {
                    return Err(src.at(load,
                        format!(
                            "{}: names stages, and a suite's stages are its [load]'s (every endpoint's): move them there",
                            mix.path
                        ),
                    ));
                }
                let name = format!("mix:{}", load.get_ref());
                mixes.insert(name.clone(), (mix.requests, mix.order.unwrap_or_default()));
                endpoints.push(name);
            }
            (Some(path), Some(_)) => {
                return Err(src.at(path,
                    "an endpoint is a path or a load file (a mix), not both",
                ))
            }
            (None, None) => {
                return Err(format!(
                    "{}: an [[endpoint]] has neither path nor load: give path = \"/plaintext\" or load = \"mix.toml\"",
                    src.file.display()
                ))
            }
        }
    }
    Ok((endpoints, mixes))
}
