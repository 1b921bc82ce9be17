//! The files a mix is read from: a TOML load file (`--load`) and a URL list
//! (`--urls-from-file`). Both are parsed whole before anything is sent; a problem is an
//! [`Error::BadRequestFile`] naming the file and the line.
//!
//! A load file:
//!
//! ```toml
//! url = "http://127.0.0.1:8080"      # optional: the URL on the command line wins
//! order = "round-robin"              # or "random"; optional
//! stages = "10s:500,30s:2000"        # optional, as --stages (which wins)
//!
//! [[request]]
//! name = "search"                    # optional: "METHOD path" by default
//! method = "GET"                     # optional: GET
//! path = "/search?q={rand:1..1000}"
//! headers = ["Accept: application/json"]   # or a table: { Accept = "application/json" }
//! body = ""                          # optional
//! weight = 7                         # optional: 1
//! ```
//!
//! A URL list, one request per line as vegeta's targets: `METHOD URL` or a bare URL (GET),
//! then optional `Name: value` header lines and an `@FILE` body (relative to the list), and
//! a blank line or the next request to end it; `#` starts a comment line. URLs may be whole
//! (`http://host:port/path`, all of one host and port) or paths (`/path`, of the URL given).

use std::path::Path;

use serde::Deserialize;

use tailscope_loadgen::error::Error;
use tailscope_loadgen::mix::{self, Order, RequestSpec};
use tailscope_loadgen::plan::{basic_authorization, parse_stages, redact_password, LoadStage};

/// What a request file says: the requests, and the URL and order it names, if it does.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestFile {
    /// The file, as named in messages.
    pub path: String,
    /// The scheme, host and port to send to (`url` in a load file, the first whole URL of a
    /// list), if the file names one.
    pub url: Option<String>,
    /// The line `url` is on (0 when the file names none).
    pub url_line: usize,
    /// The `Authorization` that a URL list's whole URLs carry in their `user:password@`
    /// (they all carry the same, or the list is refused); `None` for a load file, whose
    /// `url` is only a default.
    pub url_authorization: Option<String>,
    /// The order the file asks for (a load file's `order`).
    pub order: Option<Order>,
    /// The requests, in the file's order.
    pub requests: Vec<RequestSpec>,
    /// A load file's `stages = "10s:1000,30s:5000"` (as `--stages`, which wins over it).
    pub stages: Option<Vec<LoadStage>>,
}

impl RequestFile {
    /// Checks that the file's URL, if it names one, is of the same host and port as `url`
    /// (the URL the run connects to).
    pub fn check_origin(&self, url: &str) -> Result<(), Error> {
        let Some(own) = &self.url else { return Ok(()) };
        if origin(own) == origin(url) {
            return Ok(());
        }
        Err(self.bad(
            self.url_line,
            format!(
                "its requests go to {}, the run connects to {}: one run loads one host and port",
                redact_password(own),
                redact_password(url)
            ),
        ))
    }

    /// Checks that the credentials a URL list's lines carry, if any, are the run's
    /// (`authorization`, of the run's URL): the connections are the run's, so each line
    /// cannot send its own, and other ones would be dropped without a word.
    pub fn check_credentials(&self, authorization: Option<&str>) -> Result<(), Error> {
        match &self.url_authorization {
            Some(own) if Some(own.as_str()) != authorization => Err(self.bad(
                self.url_line,
                format!("its URLs carry credentials (user:password@) other than the run's URL's: {CREDENTIALS_ONCE}"),
            )),
            _ => Ok(()),
        }
    }

    fn bad(&self, line: usize, reason: String) -> Error {
        Error::BadRequestFile {
            path: self.path.clone(),
            line,
            reason,
        }
    }
}

/// `http://host:port` of a URL (the default port made explicit), or the URL itself when it
/// does not parse (it is refused elsewhere then).
fn origin(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}://{}:{}",
            u.scheme(),
            u.host_str().unwrap_or(""),
            u.port_or_known_default().unwrap_or(0)
        ),
        Err(_) => url.to_string(),
    }
}

/// What to do about a URL list's credentials that the run cannot send.
const CREDENTIALS_ONCE: &str =
    "give them once, in the run's URL (http://user:password@host/) or with -H 'Authorization: ...'";

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::BadRequestFile {
        path: path.display().to_string(),
        line: 0,
        reason: format!("cannot read it: {e}"),
    })
}

/// Reads a TOML load file (`--load`).
pub fn read_load_file(path: &Path) -> Result<RequestFile, Error> {
    parse_load_file(&path.display().to_string(), &read(path)?)
}

/// Reads a URL list (`--urls-from-file`); `@FILE` bodies are read relative to it.
pub fn read_url_file(path: &Path) -> Result<RequestFile, Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_url_file(&path.display().to_string(), &read(path)?, dir)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LoadToml {
    url: Option<toml::Spanned<String>>,
    order: Option<String>,
    stages: Option<toml::Spanned<String>>,
    #[serde(default)]
    request: Vec<toml::Spanned<RequestToml>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestToml {
    name: Option<String>,
    method: Option<String>,
    path: toml::Spanned<String>,
    headers: Option<toml::Spanned<Headers>>,
    body: Option<toml::Spanned<String>>,
    weight: Option<toml::Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Headers {
    List(Vec<String>),
    Table(std::collections::BTreeMap<String, String>),
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Splits `Name: value`.
fn header(line: &str) -> Result<(String, String), String> {
    let (k, v) = line
        .split_once(':')
        .ok_or_else(|| format!("header {line:?} has no ':': write 'Name: value'"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

/// Parses a TOML load file's text; `path` names it in messages.
pub fn parse_load_file(path: &str, text: &str) -> Result<RequestFile, Error> {
    let bad = |line: usize, reason: String| bad_line(path, line, reason);
    let doc: LoadToml = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        bad(line, e.message().trim().to_string())
    })?;
    let order = doc
        .order
        .as_deref()
        .map(Order::parse)
        .transpose()
        .map_err(|m| bad(line_of(text, text.find("order").unwrap_or(0)), m))?;
    let stages = doc
        .stages
        .as_ref()
        .map(|s| {
            parse_stages(s.get_ref())
                .map_err(|m| bad(line_of(text, s.span().start), format!("stages: {m}")))
        })
        .transpose()?;
    if doc.request.is_empty() {
        return Err(bad(
            0,
            "no [[request]]: give at least one, with a path (and a weight, a method, headers, a body)"
                .into(),
        ));
    }
    let requests = doc
        .request
        .iter()
        .map(|spanned| load_request(path, text, spanned))
        .collect::<Result<Vec<_>, _>>()?;
    let (url, url_line) = load_url(path, text, doc.url)?;
    let file = RequestFile {
        path: path.to_string(),
        url,
        url_line,
        url_authorization: None,
        order,
        requests,
        stages,
    };
    mix::validate(&file.requests).map_err(|e| file.bad(0, e.to_string()))?;
    Ok(file)
}

/// One `[[request]]` of a load file, each problem said on the line of the field it is in.
fn load_request(
    path: &str,
    text: &str,
    spanned: &toml::Spanned<RequestToml>,
) -> Result<RequestSpec, Error> {
    let bad = |line: usize, reason: String| bad_line(path, line, reason);
    // Each problem on the line of the field it is in (the table's own line otherwise).
    let line = line_of(text, spanned.span().start);
    let r = spanned.get_ref();
    let path_line = line_of(text, r.path.span().start);
    let method = r.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
    let weight = r.weight.as_ref().map_or(1, |w| *w.get_ref());
    let weight_line = r
        .weight
        .as_ref()
        .map_or(line, |w| line_of(text, w.span().start));
    let weight = u32::try_from(weight)
        .ok()
        .filter(|w| (1..=mix::MAX_WEIGHT).contains(w))
        .ok_or_else(|| {
            bad(
                weight_line,
                format!("weight must be 1..={}, got {weight}", mix::MAX_WEIGHT),
            )
        })?;
    let headers_line = r
        .headers
        .as_ref()
        .map_or(line, |h| line_of(text, h.span().start));
    let headers = match r.headers.as_ref().map(|h| h.get_ref()) {
        None => Vec::new(),
        Some(Headers::List(list)) => list
            .iter()
            .map(|h| header(h))
            .collect::<Result<_, _>>()
            .map_err(|m| bad(headers_line, m))?,
        Some(Headers::Table(t)) => t.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    };
    let path = r.path.get_ref();
    let spec = RequestSpec {
        name: r.name.clone().unwrap_or_else(|| format!("{method} {path}")),
        method,
        target: path.clone(),
        headers,
        body: r
            .body
            .as_ref()
            .map(|b| b.get_ref().clone().into_bytes())
            .unwrap_or_default(),
        weight,
    };
    mix::validate(std::slice::from_ref(&spec)).map_err(|e| bad(line, e.to_string()))?;
    // A placeholder's own error on the line of the field it is in; what is wrong with
    // the request as a whole (too many of them) on the table's.
    let marks = |text: &[u8]| mix::check_field_placeholders(text);
    mix::check_target(&spec.target).map_err(|m| bad(path_line, m))?;
    for (_, v) in &spec.headers {
        marks(v.as_bytes()).map_err(|m| bad(headers_line, m))?;
    }
    if let Some(b) = &r.body {
        marks(b.get_ref().as_bytes()).map_err(|m| bad(line_of(text, b.span().start), m))?;
    }
    mix::check_placeholders(&spec).map_err(|m| bad(line, m))?;
    Ok(spec)
}

/// A load file's `url`, checked (a host and port, no path), and its line.
fn load_url(
    path: &str,
    text: &str,
    url: Option<toml::Spanned<String>>,
) -> Result<(Option<String>, usize), Error> {
    let bad = |line: usize, reason: String| bad_line(path, line, reason);
    let url_line = url.as_ref().map_or(0, |u| line_of(text, u.span().start));
    let url = url.map(toml::Spanned::into_inner);
    if let Some(u) = &url {
        let shown = redact_password(u);
        let parsed = url::Url::parse(u).map_err(|e| {
            bad(
                url_line,
                format!("url {shown:?}: {e}; write http://HOST:PORT"),
            )
        })?;
        if parsed.path() != "/" || parsed.query().is_some() {
            return Err(bad(
                url_line,
                format!(
                    "url {shown:?} has a path: give http://HOST:PORT and each request its path"
                ),
            ));
        }
    }
    Ok((url, url_line))
}

/// A request file's error on `line` (0: the file as a whole).
fn bad_line(path: &str, line: usize, reason: String) -> Error {
    Error::BadRequestFile {
        path: path.to_string(),
        line,
        reason,
    }
}

/// A method as a URL list writes it: upper-case letters.
fn is_method(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// Parses a URL list's text; `path` names it in messages, `dir` is where `@FILE` bodies are.
pub fn parse_url_file(path: &str, text: &str, dir: &Path) -> Result<RequestFile, Error> {
    let bad = |line: usize, reason: String| bad_line(path, line, reason);
    let mut requests: Vec<RequestSpec> = Vec::new();
    let mut origin_seen = UrlListOrigin::default();
    // The request that header and body lines belong to: none after a blank line.
    let mut open = false;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            open = false;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (method, target) = match line.split_once(char::is_whitespace) {
            Some((m, rest)) if is_method(m) => (m.to_string(), rest.trim()),
            _ => ("GET".to_string(), line),
        };
        let is_target = target.starts_with('/') || target.contains("://");
        if is_target && !target.contains(char::is_whitespace) {
            let target = if target.starts_with('/') {
                target.to_string()
            } else {
                origin_seen.target_of(path, n, target)?
            };
            let spec = RequestSpec {
                name: format!("{method} {target}"),
                method,
                target,
                headers: Vec::new(),
                body: Vec::new(),
                weight: 1,
            };
            mix::check_target(&spec.target).map_err(|m| bad(n, m))?;
            mix::check_placeholders(&spec).map_err(|m| bad(n, m))?;
            requests.push(spec);
            open = true;
            continue;
        }
        let Some(current) = requests.last_mut().filter(|_| open) else {
            return Err(bad(
                n,
                format!("{:?} is not a request: write METHOD URL, a URL, or a path starting with '/' (headers and @body follow their request's line)", redact_password(line)),
            ));
        };
        follow_line(path, dir, current, line, n)?;
    }
    if requests.is_empty() {
        return Err(bad(
            0,
            "no requests: write one URL (or METHOD URL) a line".into(),
        ));
    }
    let file = RequestFile {
        path: path.to_string(),
        url: origin_seen.url.map(|(_, u)| u),
        url_line: origin_seen.url_line,
        url_authorization: origin_seen.credentials.and_then(|(_, a)| a),
        order: None,
        requests,
        stages: None,
    };
    mix::validate(&file.requests).map_err(|e| file.bad(0, e.to_string()))?;
    Ok(file)
}

/// What every whole URL of a URL list must share with the first: its host and port, and its
/// credentials.
#[derive(Default)]
struct UrlListOrigin {
    /// The first whole URL's origin, and the URL.
    url: Option<(String, String)>,
    url_line: usize,
    /// The first whole URL's line and its credentials: every whole URL must carry the same.
    credentials: Option<(usize, Option<String>)>,
}

impl UrlListOrigin {
    /// The request target of the whole URL `target` on line `n`, once its scheme, origin and
    /// credentials are checked against the first one's.
    fn target_of(&mut self, path: &str, n: usize, target: &str) -> Result<String, Error> {
        let bad = |line: usize, reason: String| bad_line(path, line, reason);
        let shown = redact_password(target);
        let parsed =
            url::Url::parse(target).map_err(|e| bad(n, format!("{shown:?} is not a URL: {e}")))?;
        if parsed.scheme() != "http" {
            return Err(bad(
                n,
                format!("{shown:?}: only http:// URLs can be loaded"),
            ));
        }
        let own = origin(target);
        match &self.url {
            None => {
                self.url = Some((own, target.to_string()));
                self.url_line = n;
            }
            Some((first, first_url)) if *first != own => {
                return Err(bad(
                    n,
                    format!("{shown:?} is not on the host and port of {:?}: one run loads one host and port", redact_password(first_url)),
                ))
            }
            Some(_) => {}
        }
        let own_credentials = basic_authorization(&parsed);
        match &self.credentials {
            None => self.credentials = Some((n, own_credentials)),
            Some((first, c)) if *c != own_credentials => {
                return Err(bad(
                    n,
                    format!("{shown:?} carries other credentials (user:password@) than line {first}'s URL: the run's connections send one set; {CREDENTIALS_ONCE}"),
                ))
            }
            Some(_) => {}
        }
        // The target as written, not as the URL parser re-encodes it: a placeholder's
        // braces must stay braces.
        let after_scheme = &target[target.find("://").map_or(0, |i| i + 3)..];
        let raw = after_scheme
            .find(['/', '?'])
            .map_or("/", |i| &after_scheme[i..]);
        let raw = raw.split('#').next().unwrap_or("/");
        Ok(if raw.starts_with('?') {
            format!("/{raw}")
        } else {
            raw.to_string()
        })
    }
}

/// A line under a request's: its `@FILE` body (read from `dir`) or one of its headers.
fn follow_line(
    path: &str,
    dir: &Path,
    current: &mut RequestSpec,
    line: &str,
    n: usize,
) -> Result<(), Error> {
    let bad = |line: usize, reason: String| bad_line(path, line, reason);
    if let Some(file) = line.strip_prefix('@') {
        let body_path = dir.join(file.trim());
        current.body = std::fs::read(&body_path).map_err(|e| {
            bad(
                n,
                format!("cannot read body file {}: {e}", body_path.display()),
            )
        })?;
    } else if line.starts_with('/')
        || line
            .split_whitespace()
            .find(|w| !is_method(w))
            .is_some_and(|w| w.contains("://"))
    {
        return Err(bad(
            n,
            format!(
                "{:?} is a URL with a space in it: write the space as %20",
                redact_password(line)
            ),
        ));
    } else {
        let h = header(line).map_err(|m| bad(n, m))?;
        current.headers.push(h);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `parsed` failed on line `line` of `file`, saying `needle`.
    fn assert_bad(parsed: Result<RequestFile, Error>, file: &str, line: usize, needle: &str) {
        let err = parsed.unwrap_err();
        let Error::BadRequestFile {
            line: l, reason, ..
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*l, line, "{err}");
        assert!(reason.contains(needle), "{err}");
        let at = if line == 0 {
            format!("{file}: ")
        } else {
            format!("{file}:{line}: ")
        };
        assert!(err.to_string().starts_with(&at), "{err}");
    }

    #[test]
    fn a_load_file_reads_every_field_and_defaults_the_rest() {
        let f = parse_load_file(
            "mix.toml",
            r#"
url = "http://127.0.0.1:8080"
order = "random"

[[request]]
name = "search"
path = "/search?q=1"
weight = 7
headers = ["Accept: application/json"]

[[request]]
method = "post"
path = "/upload"
body = "hello"
headers = { "Content-Type" = "text/plain" }
"#,
        )
        .unwrap();
        assert_eq!(f.url.as_deref(), Some("http://127.0.0.1:8080"));
        assert_eq!(f.order, Some(Order::Random));
        assert_eq!(f.requests.len(), 2);
        assert_eq!(f.requests[0].name, "search");
        assert_eq!(f.requests[0].weight, 7);
        assert_eq!(
            f.requests[0].headers,
            vec![("Accept".into(), "application/json".into())]
        );
        assert_eq!(f.requests[1].name, "POST /upload");
        assert_eq!(f.requests[1].method, "POST");
        assert_eq!(f.requests[1].body, b"hello");
        assert_eq!(f.requests[1].weight, 1);
        f.check_origin("http://127.0.0.1:8080/").unwrap();
        assert!(f.check_origin("http://127.0.0.1:9090/").is_err());
    }

    #[test]
    fn bad_load_files_name_the_line() {
        for (text, line, needle) in [
            (
                "[[request]]\npath = \"/a\"\nweight = 0\n",
                3,
                "weight must be",
            ),
            (
                "[[request]]\npath = \"/a\"\n\n[[request]]\npath = \"b\"\n",
                4,
                "start with '/'",
            ),
            (
                "[[request]]\npath = \"/a\"\nwieght = 2\n",
                3,
                "unknown field",
            ),
            ("[[request]]\npath = /a\n", 2, ""),
            ("url = \"http://h:1\"\n", 0, "no [[request]]"),
            (
                "[[request]]\npath = \"/a\"\nheaders = [\"nocolon\"]\n",
                3,
                "no ':'",
            ),
            (
                "[[request]]\nweight = 2\npath = \"/a/{id}\"\n",
                3,
                "{id} is not a placeholder",
            ),
            (
                "[[request]]\npath = \"/a\"\nbody = \"{rand:5..1}\"\n",
                3,
                "not a range",
            ),
        ] {
            assert_bad(parse_load_file("mix.toml", text), "mix.toml", line, needle);
        }
    }

    #[test]
    fn a_url_list_takes_bare_urls_methods_headers_and_bodies() {
        let dir = std::env::temp_dir().join(format!("ts-urls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("body.json"), b"{\"a\":1}").unwrap();
        let f = parse_url_file(
            "urls.txt",
            "# a comment\nhttp://127.0.0.1:8080/a?x=1\nPOST http://127.0.0.1:8080/b\nContent-Type: application/json\n@body.json\n\n/c\n",
            &dir,
        )
        .unwrap();
        assert_eq!(f.url.as_deref(), Some("http://127.0.0.1:8080/a?x=1"));
        let names: Vec<&str> = f.requests.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["GET /a?x=1", "POST /b", "GET /c"]);
        let referer = parse_url_file("u.txt", "/a\nReferer: http://example.com/x\n", &dir).unwrap();
        assert_eq!(
            referer.requests[0].headers,
            vec![("Referer".into(), "http://example.com/x".into())]
        );
        let braces = parse_url_file("u.txt", "http://h:1/i/{seq}?r={rand:1..9}#f\n", &dir).unwrap();
        assert_eq!(braces.requests[0].target, "/i/{seq}?r={rand:1..9}");
        assert_eq!(f.requests[1].body, b"{\"a\":1}");
        assert_eq!(
            f.requests[1].headers,
            vec![("Content-Type".into(), "application/json".into())]
        );
        for (text, line, needle) in [
            ("http://a:1/x\nhttp://b:1/y\n", 2, "one host and port"),
            ("http://a:1/x\n\nX-A: 1\n", 3, "is not a request"),
            ("http://a:1/x\n@missing\n", 2, "cannot read body file"),
            ("https://a:1/x\n", 1, "only http://"),
            (
                "http://a:1/x\nhttp://a:1/y?r={rand:3..2}\n",
                2,
                "not a range",
            ),
            ("", 0, "no requests"),
            ("/a\n/b c\n", 2, "a URL with a space in it"),
            ("/a\nGET http://a:1/b c\n", 2, "a URL with a space in it"),
        ] {
            assert_bad(
                parse_url_file("urls.txt", text, &dir),
                "urls.txt",
                line,
                needle,
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_url_lists_credentials_are_one_set_and_the_runs() {
        let dir = std::env::temp_dir();
        let basic = |c: &str| {
            let u = url::Url::parse(&format!("http://{c}@h/")).unwrap();
            basic_authorization(&u)
        };
        // The same on every whole URL (a path line has none of its own): the run's.
        let same =
            parse_url_file("u.txt", "http://u:p@h:1/a\n/b\nhttp://u:p@h:1/c\n", &dir).unwrap();
        assert_eq!(same.url_authorization, basic("u:p"));
        same.check_credentials(basic("u:p").as_deref()).unwrap();
        for run in [None, basic("u:other"), basic("v:p")] {
            let e = same
                .check_credentials(run.as_deref())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("u.txt:1:") && e.contains("-H 'Authorization"),
                "{e}"
            );
        }
        // None carried: the run's, whatever they are, go to every line.
        let none = parse_url_file("u.txt", "http://h:1/a\n", &dir).unwrap();
        assert_eq!(none.url_authorization, None);
        none.check_credentials(basic("u:p").as_deref()).unwrap();
        // Lines that differ from each other, or some with and some without.
        for text in [
            "http://u:p@h:1/a\nhttp://u:q@h:1/b\n",
            "http://u:p@h:1/a\nhttp://h:1/b\n",
            "http://h:1/a\nhttp://u:p@h:1/b\n",
        ] {
            assert_bad(
                parse_url_file("u.txt", text, &dir),
                "u.txt",
                2,
                "other credentials (user:password@) than line 1's URL",
            );
        }
    }

    #[test]
    fn a_files_refusals_do_not_show_a_urls_password() {
        let dir = std::env::temp_dir();
        let lists = [
            "http://u:s3cret@a:1/x
http://u:s3cret@b:1/y
",
            "http://a:1/x
http://u:s3cret@b:1/y
",
            "ftp://u:s3cret@a:1/x
",
            "http://u:s3cret@a:99999/x
",
            "http://a:1/x

http://u:s3cret@a:1/x y
",
            "/a
GET http://u:s3cret@a:1/b c
",
        ];
        for text in lists {
            let e = parse_url_file("urls.txt", text, &dir)
                .unwrap_err()
                .to_string();
            assert!(
                !e.contains("s3cret") && e.contains("u:***@"),
                "{text:?}: {e}"
            );
        }
        let loads = [
            "url = \"http://u:s3cret@h:1/p\"\n[[request]]\npath = \"/\"\n",
            "url = \"http://u:s3cret@h:99999\"\n[[request]]\npath = \"/\"\n",
        ];
        for text in loads {
            let e = parse_load_file("mix.toml", text).unwrap_err().to_string();
            assert!(
                !e.contains("s3cret") && e.contains("u:***@"),
                "{text:?}: {e}"
            );
        }
        let file = parse_load_file(
            "mix.toml",
            "url = \"http://u:s3cret@h:1\"\n[[request]]\npath = \"/\"\n",
        )
        .unwrap();
        let e = file
            .check_origin("http://v:other@g:2/")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret") && !e.contains("other"), "{e}");
        assert!(e.contains("u:***@") && e.contains("v:***@"), "{e}");
    }

    #[test]
    fn a_load_file_may_give_stages_and_a_bad_one_names_its_line() {
        let f = parse_load_file(
            "mix.toml",
            "stages = \"2s:100,3s:400\"\n[[request]]\npath = \"/\"\n",
        )
        .unwrap();
        let stages = f.stages.unwrap();
        assert_eq!(stages.len(), 2);
        assert_eq!(stages[1].duration, std::time::Duration::from_secs(3));
        let e = parse_load_file(
            "mix.toml",
            "order = \"random\"\nstages = \"2s:fast\"\n[[request]]\npath = \"/\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("mix.toml") && e.contains('2') && e.contains("stages"),
            "{e}"
        );
        let none = parse_load_file("m.toml", "[[request]]\npath = \"/\"\n").unwrap();
        assert!(none.stages.is_none());
    }
}
