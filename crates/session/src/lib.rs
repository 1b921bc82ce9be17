//! One tailscope session end to end, for the binary to call once its flags are validated.
//!
//! [`run::run`] takes a validated [`RunConfig`]: it launches the target (if any), follows it
//! tick by tick with the profiler ([`profiler`]) and the stack sampler ([`stacks`]), drives
//! the generator, feeds the dashboard or the
//! progress line, and ends in the report (text, JSON, HTML, HdrHistogram log) and its
//! [`Outcome`]. [`suite::run`] does the same for each target × endpoint of a suite file.
//! Around them: [`signals`] (a first Ctrl-C stops gracefully, a second kills), [`files`] (the
//! outputs checked before anything runs) and [`output`] (stdout that tolerates a closed pipe,
//! the report files). Nothing here parses the command line: `tailscope-cli` validates the flags
//! into a [`RunConfig`] (the binary reads a suite file into a [`suite::SuiteConfig`]), they
//! name the outputs' flags (in [`files::Output`]), and the binary maps the [`Outcome`] to an
//! exit code. A few progress lines still
//! name the flag a user would change (`--start-at`, `--server-cpus`): they moved here verbatim,
//! since the binary's output is kept byte for byte.
//!
//! Why a crate of its own: a run needs every other crate (loadgen, targets, forensics, the
//! report pages and the dashboard, fed from inside the generator's tick with the profiler's
//! live figures), and `loadgen` and `targets` depend on no crate of ours, `forensics` is the
//! spike rules. So the session sits on top of them all, under the binary. Errors are
//! `anyhow`'s, as the binary's were: this is the application's upper half, and its messages
//! (with their context) are printed as they were; bad input is a [`UsageError`] within.

/// Writes a line to stderr (held back while the dashboard has the terminal: see
/// [`stderr::Held`]). A closed stderr (`2>&-`, a pipe whose reader left) is not an error: the
/// run goes on and the exit code stays what the run decides (`eprintln!` panics).
#[macro_export]
macro_rules! say {
    () => {{
        $crate::stderr::write("\n");
    }};
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::stderr::write(&line);
    }};
}

/// [`say!`] without the newline.
#[macro_export]
macro_rules! say_part {
    ($($arg:tt)*) => {{
        $crate::stderr::write(&format!($($arg)*));
    }};
}

pub mod agent;
pub mod files;
pub mod find_max;
pub mod journal;
mod live;
pub mod output;
pub mod profiler;
pub mod run;
mod server_side;
pub mod signals;
pub mod stacks;
pub mod stderr;
pub mod suite;
pub mod until;
pub mod warmup;

pub use run::{Launch, RunConfig};

/// How a command ended (the binary maps it to its documented exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: the run finished and every threshold held.
    Success,
    /// 1: something failed at run time (could not start, could not write the report), or
    /// no request got any response (the run measured nothing).
    Failure,
    /// 2: bad flags, URL, threshold expression or input file, a number out of its range, an
    /// unwritable output path or one that is an input or another output, `-c` beyond the
    /// open-file limit; nothing was run.
    Usage,
    /// 99: the run finished but a `--fail-if` threshold did not hold.
    ThresholdFailed,
    /// 130: stopped early by Ctrl-C or SIGTERM; the summary was still printed.
    Interrupted,
    /// 3: the run finished (its load went on to the end) but an output could not be
    /// written whole (a full disk, a failing write): the journal, a report file or the HDR
    /// log; what was said on stderr names it.
    OutputIncomplete,
}

/// An error in what the user asked for (exit code 2), with a message that says what to do.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
