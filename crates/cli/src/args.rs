//! The command line, as clap reads it. Doc comments are the help text. Every number is
//! checked against its range here, at parse time (clap exits 2 with a message naming the
//! range); `run::run_config` validates the flags against each other into a `RunConfig`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tailscope_loadgen::plan::{
    redact_password, without_credentials, MAX_CONNECTIONS, MAX_RATE, MAX_THREADS, MIN_RATE,
};

mod find_max;
mod run;
mod shape;

pub use find_max::FindMaxArgs;
pub use run::*;
pub use shape::{ShapeArgs, StagesArg};

/// The highest process id Linux hands out (PID_MAX_LIMIT on 64-bit).
const MAX_PID: u64 = 4_194_304;
/// The deepest pipelining the generator allows.
const MAX_PIPELINE: u64 = 1024;

/// Terminal-UI HTTP load tester and server profiler.
///
/// What bare `tailscope` does is said in the help's closing text (`after_help`).
#[derive(Debug, Parser)]
#[command(name = "tailscope", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
// Built once at startup; boxing the larger variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Load an HTTP server (HTTP/1.1, or HTTP/2 with --http2) and report throughput, latency and errors.
    #[command(after_help = "Examples:
  tailscope run http://127.0.0.1:8080/ -c 64 -z 30s --json run.json --csv seconds.csv
  tailscope run --target nginx -q 20000 -z 1m --fail-if 'p99 < 5ms'")]
    Run(RunArgs),
    /// Run the io_uring reference HTTP server (the calibration target and spike laboratory).
    #[command(after_help = "Example:
  tailscope serve --addr 127.0.0.1:8080 --threads 2 --stall-every 2s --stall-for 50ms")]
    Serve(ServeArgs),
    /// Profile this host's servers for runs on other hosts (run --agent HOST:PORT): TLS with
    /// a self-signed certificate whose fingerprint it prints, and a token.
    #[command(after_help = "Example:
  tailscope agent --listen 10.0.0.5:7070 --token-file /etc/tailscope/agent.token")]
    Agent(AgentArgs),
    /// Compare several servers on several endpoints, side by side, from a TOML suite file.
    #[command(after_help = "Example:
  tailscope suite examples/reference-vs-nginx.toml --markdown results.md --json suite.json")]
    Suite(SuiteArgs),
    /// Compare JSON reports (run or suite) metric by metric, each change judged against the
    /// noise; gate CI on regressions beyond it.
    #[command(after_help = "Examples:
  tailscope compare base.json new.json --fail-if-regression 5% --html compare.html
  tailscope compare --base a1.json a2.json a3.json --new b1.json b2.json b3.json --fail-if-regression 5%")]
    Compare(CompareArgs),
    /// Write a saved JSON report, or a run's journal (of a killed run too), as an HTML page
    /// with charts, a JSON report, the text summary or an HdrHistogram interval log.
    #[command(after_help = "Examples:
  tailscope report run.json --html run.html
  tailscope report tailscope-20261128T010203-4242.journal --json run.json --html run.html
  tailscope report tailscope-20261128T010203-4242.journal --hdr-log run.hlog")]
    Report(ReportArgs),
    /// Merge the reports of several generators (`run --segment I/N` on N hosts) into one:
    /// histograms added, counters summed, seconds aligned on wall-clock time.
    #[command(after_help = "Example:
  tailscope merge gen-0.json gen-1.json gen-2.json --json merged.json --html merged.html")]
    Merge(MergeArgs),
    /// Find the highest open-loop rate at which every SLO holds: a geometric climb, then
    /// bisection; the latency–throughput curve, and why the first failing step failed.
    #[command(
        after_help = "Example:
  tailscope find-max http://127.0.0.1:8080/ --slo 'p99<10ms' --slo 'error_rate<0.1%' -c 64 --json knee.json --html knee.html",
        override_usage = "tailscope find-max [OPTIONS] --slo EXPR [URL]"
    )]
    FindMax(FindMaxArgs),
    /// Print the shell completion script for SHELL on stdout (generated from these flags).
    #[command(after_help = "Examples:
  tailscope completions bash > ~/.local/share/bash-completion/completions/tailscope
  tailscope completions zsh > ~/.zfunc/_tailscope
  tailscope completions fish > ~/.config/fish/completions/tailscope.fish")]
    Completions(CompletionsArgs),
    /// Write the man pages (tailscope.1 and one per subcommand, tailscope-run.1, ...) into DIR.
    #[command(after_help = "Example:
  tailscope man /usr/local/share/man/man1 && man tailscope-run")]
    Man(ManArgs),
}

/// `tailscope completions SHELL`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `tailscope man DIR`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The directory to write the pages into (created if missing), e.g. a man1 directory on
    /// MANPATH.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
}

/// `tailscope agent [flags]`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address to listen on (nothing is exposed beyond this host unless asked); port 0
    /// picks a free one (printed).
    #[arg(long = "listen", default_value = "127.0.0.1:7070", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// The file holding the token runs must send (its first line, at least 16
    /// characters); without it a token is generated and printed once.
    #[arg(long = "token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Runs served at once; more are refused.
    #[arg(long = "max-clients", default_value_t = 8, value_name = "N", value_parser = count_in::<usize>(1, 1024))]
    pub max_clients: usize,
    /// Keep the TLS certificate in DIR (made there the first time), so that its
    /// fingerprint, pinned by the runs, stays the same across restarts; without it a new
    /// certificate is made at each start.
    #[arg(long = "cert-dir", value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    /// Let runs have the agent launch their server (`run --agent ... --target
    /// 'command:CMD {port}'`): whoever holds the token may then run any shell command on
    /// this host as the agent's user. The launched process tree is stopped when the run
    /// ends, when its connection drops, or when the agent ends.
    #[arg(long = "allow-launch")]
    pub allow_launch: bool,
}

/// `tailscope serve [flags]`.
#[derive(Debug, Args)]
#[command(allow_negative_numbers = true)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one (printed when ready).
    #[arg(long = "addr", default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub addr: std::net::SocketAddr,
    /// Worker threads, each with its own ring and SO_REUSEPORT listener (default: one per CPU, of --cpus when given).
    #[arg(long = "threads", value_name = "N", value_parser = count_in::<usize>(1, MAX_THREADS as u64))]
    pub threads: Option<usize>,
    /// Pin worker threads to these CPUs (e.g. 0 or 0,2-3).
    #[arg(long = "cpus", value_parser = parse_cpu_list, value_name = "LIST")]
    pub cpus: Option<CpuList>,
    /// Serve the files under DIR at /static/.
    #[arg(long = "static", value_name = "DIR")]
    pub static_dir: Option<PathBuf>,
    /// Listen backlog of each listener; a small one reproduces accept-queue overflow.
    #[arg(long = "backlog", default_value_t = 4096, value_name = "N", value_parser = count_in::<i32>(1, 65535))]
    pub backlog: i32,
    /// Fault injection: block each worker's loop every DUR (needs --stall-for).
    #[arg(long = "stall-every", value_parser = duration_in(MS, HOUR), value_name = "DUR", requires = "stall_for", allow_hyphen_values = true)]
    pub stall_every: Option<Duration>,
    /// Fault injection: how long each stall blocks the loop (needs --stall-every).
    #[arg(long = "stall-for", value_parser = duration_in(MS, HOUR), value_name = "DUR", requires = "stall_every", allow_hyphen_values = true)]
    pub stall_for: Option<Duration>,
    /// Fault injection: burn CPU on each worker's loop every DUR, in a function named
    /// burn_cpu_on_purpose (needs --burn-for).
    #[arg(long = "burn-every", value_parser = any_duration, value_name = "DUR", requires = "burn_for", allow_hyphen_values = true)]
    pub burn_every: Option<Duration>,
    /// Fault injection: how long each burn holds the loop (needs --burn-every).
    #[arg(long = "burn-for", value_parser = any_duration, value_name = "DUR", requires = "burn_every", allow_hyphen_values = true)]
    pub burn_for: Option<Duration>,
    /// Connections a worker keeps at once; more are closed as they are accepted.
    #[arg(long = "max-conns", default_value_t = 100_000, value_name = "N", value_parser = count_in::<usize>(1, MAX_CONNECTIONS as u64 * 10))]
    pub max_conns: usize,
    /// Close keep-alive connections idle for this long.
    #[arg(long = "idle-timeout", value_parser = duration_in(MS, DAY), default_value = "60s", value_name = "DUR", allow_hyphen_values = true)]
    pub idle_timeout: Duration,
    /// Close connections whose request head is not complete after this long (slowloris).
    #[arg(long = "header-timeout", value_parser = duration_in(MS, HOUR), default_value = "10s", value_name = "DUR", allow_hyphen_values = true)]
    pub header_timeout: Duration,
}

pub use tailscope_loadgen::plan::parse_duration;

const MS: Duration = Duration::from_millis(1);
const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// Duration flags take values that start with '-' (`allow_hyphen_values`), so that `-z -1s`
/// reaches the parser and its message, not clap's "to pass '-1' as a value, use '-- -1'" tip.
/// A value that is the next flag (`--warmup --json out.json`: the value was forgotten) is
/// refused here, saying so, and so is a negative one, naming the `range` it must be in.
fn not_a_flag(s: &str, range: &str) -> Result<(), String> {
    let Some(rest) = s.strip_prefix('-') else {
        return Ok(());
    };
    Err(
        if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            format!("{s} is negative: give {range}, e.g. 10s")
        } else {
            format!("{s} is a flag, not a duration: give a duration (e.g. 10s) before it")
        },
    )
}

/// The refusal to print for `argv`, which `cmd` refused with `err`. clap stops at an extra
/// word before it checks the value it took for a flag: `run URL -z --json x.json` (the
/// duration was forgotten, so `-z` took `--json`, which [`not_a_flag`] refuses) says
/// "unexpected argument 'x.json'", naming the symptom. Without the extra word clap reaches
/// the value and names the cause; that refusal is returned when it is one of a value.
pub fn real_refusal(
    cmd: clap::Command,
    argv: &[std::ffi::OsString],
    err: clap::Error,
) -> clap::Error {
    without_passwords(argv, refusal(cmd, argv, err))
}

/// `err` with every URL of `argv` that carries credentials shown as the reports show it:
/// clap's own refusals (`unexpected argument 'http://u:pass@b/'`, when removing that word
/// left another error) echo the word as given.
fn without_passwords(argv: &[std::ffi::OsString], err: clap::Error) -> clap::Error {
    let rendered = err.render().to_string();
    let mut shown = rendered.clone();
    for word in argv.iter().filter_map(|a| a.to_str()) {
        let redacted = redact_password(word);
        if redacted != word {
            shown = shown.replace(word, &redacted);
        }
    }
    if shown == rendered {
        return err;
    }
    // A raw error is printed as "error: " and its message, which the rendering starts with.
    let message = shown.strip_prefix("error: ").unwrap_or(&shown);
    clap::Error::raw(err.kind(), message)
}

/// [`real_refusal`] before the passwords are hidden.
fn refusal(cmd: clap::Command, argv: &[std::ffi::OsString], err: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if err.kind() != ErrorKind::UnknownArgument {
        return err;
    }
    let Some(ContextValue::String(extra)) = err.get(ContextKind::InvalidArg) else {
        return err;
    };
    let Some(at) = argv
        .iter()
        .rposition(|a| a.to_str() == Some(extra.as_str()))
    else {
        return err;
    };
    let mut without = argv.to_vec();
    without.remove(at);
    let mut run = cmd.clone();
    match cmd.try_get_matches_from(without) {
        Err(cause) if cause.kind() == ErrorKind::ValueValidation => cause,
        // `run URL URL`: clap's "unexpected argument" does not say that a run loads one
        // URL, nor what to use for several.
        Ok(matches) if looks_like_url(extra) => {
            let Some(first) = matches
                .subcommand_matches("run")
                .and_then(|m| m.get_one::<String>("url"))
            else {
                return err;
            };
            run.build();
            let Some(run) = run.find_subcommand_mut("run") else {
                return err;
            };
            // Either may carry a password (user:pass@): shown as the reports show it.
            run.error(
                ErrorKind::TooManyValues,
                several_urls(&redact_password(first), &redact_password(extra)),
            )
        }
        _ => err,
    }
}

/// A word given where a URL goes that is one: a scheme, or a path.
fn looks_like_url(word: &str) -> bool {
    word.contains("://") || word.starts_with('/')
}

/// The refusal of a second URL on `run`'s command line, with the ways to load several. A
/// path (`run http://a/ /other`) is not a second URL: most likely the path was meant to go
/// in the URL, which the refusal writes out.
fn several_urls(first: &str, second: &str) -> String {
    if second.starts_with('/') {
        let after_scheme = first.find("://").map_or(0, |i| i + 3);
        let origin = match first[after_scheme..].find(['/', '?', '#']) {
            Some(i) => &first[..after_scheme + i],
            None => first,
        };
        // A URL to copy: the `***` of a shown password would be sent as the password.
        let origin = without_credentials(origin);
        return format!(
            "'{second}' looks like a path, not a URL: put it in the URL ({origin}{second}), \
             or give it with --path when --target launches the server\n\
             \x20 several paths of one server: list them in a file, --urls-from-file FILE (one \
             URL a line) or --load FILE.toml (a weighted mix; README \"Request mixes\")"
        );
    }
    format!(
        "one URL per run: '{second}' is a second URL (after '{first}')\n\
         \x20 several paths of one server: list them in a file, --urls-from-file FILE (one URL \
         a line) or --load FILE.toml (a weighted mix; README \"Request mixes\")\n\
         \x20 several servers: one run each (--json A.json, --json B.json), then \
         'tailscope compare A.json B.json'"
    )
}

/// A duration parser that refuses values outside `lo..=hi`, naming the range.
pub fn duration_in(
    lo: Duration,
    hi: Duration,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    use tailscope_loadgen::plan::fmt_limit;
    // `-z -1s` named "0 or more" where 0s is refused too: the flag's real range.
    let range = format!("{}..={}", fmt_limit(lo), fmt_limit(hi));
    move |s: &str| {
        not_a_flag(s, &range)?;
        tailscope_loadgen::plan::parse_duration_within(s, lo, hi)
    }
}

/// Any duration [`parse_duration`] takes, refusing a flag as [`duration_in`] does.
fn any_duration(s: &str) -> Result<Duration, String> {
    not_a_flag(s, "a duration of 0s or more")?;
    parse_duration(s)
}

/// Parses `--fail-if-regression`'s percentage: a finite number, 0 or more.
fn parse_percentage(s: &str) -> Result<f64, String> {
    // `5` and `5%` are the same limit.
    let trimmed = s.trim();
    let p: f64 = trimmed
        .strip_suffix('%')
        .unwrap_or(trimmed)
        .trim_end()
        .parse()
        .map_err(|_| format!("{s:?} is not a percentage, e.g. 5"))?;
    if !p.is_finite() {
        return Err(format!(
            "{s} is not a finite number: give a percentage such as 5"
        ));
    }
    if p < 0.0 {
        return Err(format!("{s} is negative: give a percentage of 0 or more"));
    }
    Ok(p)
}

/// Parses a process id and checks it is one Linux can hand out.
pub fn parse_pid(s: &str) -> Result<u32, String> {
    let pid: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a process id (a number, as `pidof` prints it)"))?;
    if !(1..=MAX_PID).contains(&pid) {
        return Err(format!(
            "no process can have pid {pid}: pids are 1..={MAX_PID}"
        ));
    }
    Ok(pid as u32)
}

/// A whole-number flag's parser: a number in `min..=max`, and the range named whatever the
/// value. clap's ranged parser reads an i64 first, so past it (`-c 99999999999999999999`) it
/// said only "number too large to fit in target type", where `-c 2000000` named the range.
pub fn count_in<T>(min: u64, max: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64>,
{
    move |s: &str| {
        let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{s} is not a whole number: give {min}..={max}"));
        }
        // Too many digits for any integer type is out of the range too.
        let n = s.parse::<i128>().ok();
        match n.filter(|&n| n >= i128::from(min) && n <= i128::from(max)) {
            Some(n) => T::try_from(n as u64).map_err(|_| format!("{s} is not in {min}..={max}")),
            None => Err(format!("{s} is not in {min}..={max}")),
        }
    }
}

/// Parses an open-loop rate and checks its range.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of requests per second, e.g. 1000"))?;
    if !(MIN_RATE..=MAX_RATE).contains(&r) {
        return Err(format!(
            "{s} is out of range: give {MIN_RATE}..={MAX_RATE} requests per second"
        ));
    }
    Ok(r)
}

/// A list of CPU numbers, as `--cpus` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// Parses a CPU list such as `1`, `0,2` or `0-3,6`.
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    tailscope_targets::cpus::parse_list(s).map(CpuList)
}

/// `tailscope suite` arguments.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct SuiteArgs {
    /// The suite file (TOML): [suite] baseline, [load], [[target]]s and [[endpoint]]s.
    pub file: PathBuf,
    /// Write every run and the host's description as JSON here ('-' for stdout).
    #[arg(long = "json", value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Also write the markdown table here.
    #[arg(long = "markdown", value_name = "PATH")]
    pub markdown: Option<PathBuf>,
    /// Also write the suite as an HTML page here (self-contained: nothing fetched).
    #[arg(long = "html", value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

/// `tailscope compare` arguments.
#[derive(Debug, clap::Args)]
// `--fail-if-regression -5` reaches the value parser (and its message), not clap's tip.
#[command(allow_negative_numbers = true)]
pub struct CompareArgs {
    /// The reference report (from `run --json` or `suite --json`).
    #[arg(value_name = "BASE.json", conflicts_with_all = ["base_runs", "new_runs"])]
    pub base: Option<PathBuf>,
    /// The report to judge, of the same kind.
    #[arg(value_name = "NEW.json")]
    pub new: Option<PathBuf>,
    /// Several reference runs (one report each): each run is one unit, and the changes are
    /// judged against the spread from run to run (with --new).
    #[arg(long = "base", value_name = "BASE.json", num_args = 1..)]
    pub base_runs: Vec<PathBuf>,
    /// Several runs to judge (with --base).
    #[arg(long = "new", value_name = "NEW.json", num_args = 1..)]
    pub new_runs: Vec<PathBuf>,
    /// Exit 99 when req/s falls, or p99 rises, by more than PCT percent (`5` or `5%`) beyond
    /// the noise (the change is significant and its whole 95 % interval is beyond PCT), or the
    /// error rate rises by more than PCT percentage points. A change that cannot be judged
    /// (runs too short, one run against several) fails the gate too, saying what is needed,
    /// unless --point.
    #[arg(long = "fail-if-regression", value_name = "PCT", value_parser = parse_percentage)]
    pub fail_if_regression: Option<f64>,
    /// Compare the plain figures, without intervals: a gate then fails on any change beyond
    /// PCT, noise or not.
    #[arg(long = "point")]
    pub point: bool,
    /// The seed of the bootstrap's generator (recorded in the JSON), to reproduce a verdict.
    #[arg(long = "seed", value_name = "N")]
    pub seed: Option<u64>,
    /// Gate with --fail-if-regression even when the runs' settings differ (loop, rate,
    /// connections, pipeline, protocol, engine, target, or a duration more than 2× apart).
    #[arg(long = "allow-unlike", requires = "fail_if_regression")]
    pub allow_unlike: bool,
    /// Also write the comparison as JSON here (each change with its interval, method, seed and
    /// verdict).
    #[arg(long = "json", value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Also write the comparison as an HTML page here (self-contained: nothing fetched).
    #[arg(long = "html", value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

impl CompareArgs {
    /// The base and the new side's files, however they were given; a message saying how to
    /// give them when neither way is complete.
    pub fn sides(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
        match (&self.base, &self.new) {
            (Some(b), Some(n)) => Ok((vec![b.clone()], vec![n.clone()])),
            (None, None) if !self.base_runs.is_empty() && !self.new_runs.is_empty() => {
                Ok((self.base_runs.clone(), self.new_runs.clone()))
            }
            _ => Err(
                "compare needs both sides: BASE.json NEW.json, or several runs a side with --base A1.json A2.json --new B1.json B2.json"
                    .into(),
            ),
        }
    }
}

/// `tailscope merge A.json B.json ... [--json OUT] [--fail-if EXPR] [--force]`.
#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The generators' reports (written by `tailscope run --json`).
    #[arg(value_name = "FILE.json", required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the merged JSON report here ('-' for stdout; the text summary then goes to
    /// stderr).
    #[arg(long = "json", value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write the merged report as a self-contained HTML page.
    #[arg(long = "html", value_name = "PATH")]
    pub html: Option<PathBuf>,
    /// Fail (exit 99) unless this holds of the merged result, as for run (repeatable).
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,
    /// Merge even reports of different settings or overlapping segments (the merged report
    /// says what was overridden).
    #[arg(long = "force")]
    pub force: bool,
}

/// `tailscope report FILE.json --html OUT.html`.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct ReportArgs {
    /// A report written by `tailscope run --json` or `tailscope suite --json`, or a run's
    /// journal (`run --journal`), from which the run's report is rebuilt, even of a run that
    /// was killed.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Write the HTML page here: one self-contained file (no network access when opened).
    #[arg(long = "html", value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// Write the run's JSON report here ('-' for stdout).
    #[arg(long = "json", value_name = "OUT.json")]
    pub json: Option<PathBuf>,
    /// Print the text summary on stdout.
    #[arg(long = "text")]
    pub text: bool,
    /// Write the run's latency as an HdrHistogram interval log here, as `run --hdr-log` does
    /// (of one run's journal or JSON report, which have its seconds' histograms).
    #[arg(long = "hdr-log", value_name = "OUT.hlog")]
    pub hdr_log: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cpu_lists_and_durations() {
        assert_eq!(parse_cpu_list("1").unwrap().0, vec![1]);
        assert_eq!(parse_cpu_list("0,2-4").unwrap().0, vec![0, 2, 3, 4]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("10").unwrap_err().contains("unit"));
    }

    /// The message clap prints for `args`, which must fail.
    fn refusal(args: &[&str]) -> String {
        let err = Cli::try_parse_from(std::iter::once("tailscope").chain(args.iter().copied()))
            .expect_err("refused");
        err.to_string()
    }

    #[test]
    fn negative_values_reach_the_value_parsers() {
        // The refusal a user sees: clap's, as `real_refusal` rewrites it.
        let refused_as_told = |words: &[&str]| -> String {
            let argv: Vec<std::ffi::OsString> = std::iter::once("tailscope")
                .chain(words.iter().copied())
                .map(Into::into)
                .collect();
            let err = Cli::try_parse_from(&argv).expect_err("refused");
            real_refusal(Cli::command(), &argv, err).to_string()
        };
        for args in [
            &["compare", "a", "b", "--fail-if-regression", "-5"][..],
            &["run", "--target", "embedded", "--warmup", "-1s"],
            &["run", "--target", "embedded", "-z", "-1s"],
            &["serve", "--stall-every", "-1s", "--stall-for", "1s"],
        ] {
            let msg = refusal(args);
            assert!(!msg.contains("use '--"), "{args:?}: {msg}");
            assert!(msg.contains("invalid value '-"), "{args:?}: {msg}");
            assert!(msg.contains("is negative"), "{args:?}: {msg}");
        }
        // A negative duration is told the flag's real range: -z refuses 0s too.
        let msg = refusal(&["run", "--target", "embedded", "-z", "-1s"]);
        assert!(msg.contains("-1s is negative: give 1ms..=30days"), "{msg}");
        let msg = refusal(&["run", "--target", "embedded", "--warmup", "-1s"]);
        assert!(msg.contains("-1s is negative: give 0s..="), "{msg}");
        assert!(refusal(&["compare", "a", "b", "--fail-if-regression", "-5"]).contains("negative"));
        assert!(
            refusal(&["compare", "a", "b", "--fail-if-regression", "1e999"])
                .contains("not a finite number")
        );
        // A forgotten value does not take the next flag as one.
        let msg = refusal(&["run", "--target", "embedded", "-z", "--json", "x.json"]);
        assert!(msg.contains("--json is a flag, not a duration"), "{msg}");
        // Nor when the flag's value is followed by a word clap finds no place for (the URL
        // is given): clap names that word first, the real refusal names the flag.
        let argv: Vec<std::ffi::OsString> = [
            "tailscope",
            "run",
            "http://127.0.0.1:9/",
            "-z",
            "--json",
            "x.json",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let err = Cli::try_parse_from(&argv).expect_err("refused");
        assert!(
            err.to_string().contains("unexpected argument 'x.json'"),
            "{err}"
        );
        let msg = real_refusal(Cli::command(), &argv, err).to_string();
        assert!(msg.contains("--json is a flag, not a duration"), "{msg}");
        // A word that is extra for another reason is still named.
        let msg = refused_as_told(&["run", "http://a/", "extra"]);
        assert!(msg.contains("unexpected argument 'extra'"), "{msg}");
        // A second URL is told that a run loads one, and what loads several.
        let second = "http://b/";
        let msg = refused_as_told(&["run", "http://a/", second]);
        assert!(
            msg.contains(&format!(
                "one URL per run: '{second}' is a second URL (after 'http://a/')"
            )),
            "{msg}"
        );
        assert!(msg.contains("--urls-from-file FILE"), "{msg}");
        assert!(msg.contains("tailscope compare"), "{msg}");
        assert!(msg.contains("Usage: tailscope run"), "{msg}");
        // A path is told to go in the URL (or --path), not called a second URL.
        let msg = refused_as_told(&["run", "http://a:8080/x?q", "/other"]);
        assert!(
            msg.contains("'/other' looks like a path, not a URL: put it in the URL (http://a:8080/other), or give it with --path"),
            "{msg}"
        );
        assert!(!msg.contains("second URL"), "{msg}");
        assert!(msg.contains("--urls-from-file FILE"), "{msg}");
        // A URL's password is not repeated back.
        let msg = refused_as_told(&["run", "http://u:secret@a/", "http://u:other@b/"]);
        assert!(
            msg.contains("'http://u:***@b/' is a second URL (after 'http://u:***@a/')"),
            "{msg}"
        );
        // The path written into the URL to copy has no '***' for a password.
        let argv: Vec<std::ffi::OsString> =
            ["tailscope", "run", "http://u:secret@a:8080/", "/other"]
                .iter()
                .map(Into::into)
                .collect();
        let err = Cli::try_parse_from(&argv).expect_err("refused");
        let msg = real_refusal(Cli::command(), &argv, err).to_string();
        assert!(
            msg.contains("put it in the URL (http://a:8080/other)"),
            "{msg}"
        );
        // Nor when removing it leaves another error, and clap's own refusal is returned.
        let argv: Vec<std::ffi::OsString> = [
            "tailscope",
            "run",
            "http://a/",
            "http://u:s3cret@b/",
            "--bogus",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let err = Cli::try_parse_from(&argv).expect_err("refused");
        let kind = err.kind();
        let refused = real_refusal(Cli::command(), &argv, err);
        let msg = refused.to_string();
        assert!(!msg.contains("s3cret"), "{msg}");
        assert!(
            msg.starts_with("error: unexpected argument 'http://u:***@b/' found"),
            "{msg}"
        );
        assert_eq!(refused.kind(), kind);
    }

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn the_launcher_starts_the_embedded_server_with_flags_serve_accepts() {
        // targets::embedded_args is the launcher's half of the contract; this is the other.
        let args = tailscope_targets::embedded_args(
            2,
            "0-1",
            Some(16),
            Some((Duration::from_millis(700), Duration::from_millis(250))),
        );
        let cli = Cli::try_parse_from(std::iter::once("tailscope".to_string()).chain(args))
            .expect("serve accepts the launcher's flags");
        let Some(Command::Serve(serve)) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(serve.threads, Some(2));
        assert_eq!(serve.backlog, 16);
        assert_eq!(serve.stall_every, Some(Duration::from_millis(700)));
        assert_eq!(serve.stall_for, Some(Duration::from_millis(250)));
        assert_eq!(serve.addr.port(), 0);
    }
}
