//! What a report warns of: why nothing got a response, TLS failures, ports run out,
//! non-2xx answers, connection set-up that ate the run.

use super::fmt::{fmt_pct, url_authority};
use super::{fmt_count, fmt_us, LateSendsByCause, Report};
use tailscope_loadgen::error::ErrorKind;
use tailscope_loadgen::recorder::LateCause;
use tailscope_loadgen::snapshot::RateChange;

pub use tailscope_loadgen::snapshot::GENERATOR_LAG_WARN_US;
/// Open loop: this share of the sends leaving more than 1 ms late (`late_sends`) is warned of.
pub const LATE_SHARE_WARN: f64 = 0.10;
/// Open loop: the share of requests never sent by the end that is warned of (see
/// `unanswered_schedule`).
const UNANSWERED_SHARE_WARN: f64 = 0.10;

/// The fix named wherever connects ran out of local ports (EADDRNOTAVAIL).
const NO_LOCAL_PORT_FIX: &str = "one source address has ~28 k ephemeral ports per destination; spread the connections with --source-addrs auto (a loopback target) or more --source-addrs, or widen net.ipv4.ip_local_port_range";

impl LateSendsByCause {
    /// The cause most late sends had (ties: in the order the causes are tried).
    pub(super) fn dominant(&self) -> LateCause {
        let cpu = self.waited_for_cpu.unwrap_or(0);
        if cpu >= self.no_free_connection && cpu >= self.generator && cpu > 0 {
            LateCause::WaitedForCpu
        } else if self.no_free_connection >= self.generator {
            LateCause::NoFreeConnection
        } else {
            LateCause::Generator
        }
    }
}

impl Report {
    /// Why no request got a response, when none did: the run measured nothing, and the
    /// caller should fail (exit 1) with this reason. `None` when any response came back.
    pub fn no_response_reason(&self) -> Option<String> {
        let s = &self.summary;
        if s.successes > 0 {
            return None;
        }
        let addr = url_authority(&self.config.url);
        let (kind, n) = self
            .errors
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(k, n)| (k.as_str(), *n))
            .unwrap_or(("", 0));
        if n == 0 {
            return Some(if s.still_connecting > 0 {
                format!(
                    "no request got a response: {} connection(s) to {addr} were still opening when the run ended",
                    fmt_count(s.still_connecting)
                )
            } else if s.unfinished > 0 {
                format!(
                    "no request got a response: {} were still waiting for {addr} when the run ended, up to {} (-t is {:.1} s)",
                    fmt_count(s.unfinished),
                    s.unfinished_max_us.map_or("n/a".into(), fmt_us),
                    self.config.timeout_s
                )
            } else {
                format!("no request got a response from {addr}: none was sent")
            });
        }
        let why = match kind {
            "connect_refused" => format!(
                "nothing is listening at {addr} (every connect was refused: {}); is the server running, and is the port right?",
                fmt_count(n)
            ),
            "connect_timeout" => format!(
                "no connection to {addr} was accepted within --connect-timeout {:.1} s ({} tries)",
                self.config.connect_timeout_s,
                fmt_count(n)
            ),
            "timeout" => format!(
                "{addr} accepted connections but answered nothing within -t {:.1} s ({} timeouts)",
                self.config.timeout_s,
                fmt_count(n)
            ),
            "too_many_open_files" => format!(
                "out of file descriptors ({} too_many_open_files): raise `ulimit -n` or lower -c",
                fmt_count(n)
            ),
            "no_local_port" => format!(
                "no local port left to connect to {addr} ({} no_local_port): {}",
                fmt_count(n),
                NO_LOCAL_PORT_FIX
            ),
            "bad_response" if self.tls_answers() > 0 => format!(
                "{addr} answered in TLS, not HTTP ({} bad_response): the port speaks TLS; use {}",
                fmt_count(n),
                self.https_url()
            ),
            // What failed them is the reason (the server's certificate, HTTP/2 not offered).
            "tls_handshake" | "certificate" => self.tls_failures().unwrap_or_default(),
            "bad_response" if self.config.protocol == "h2c" => format!(
                "every request to {addr} failed, mostly bad_response ({}): its answers to HTTP/2 with prior knowledge were not HTTP/2 (does the server speak h2c? without --http2 the run speaks HTTP/1.1)",
                fmt_count(n)
            ),
            other => format!(
                "every request to {addr} failed, mostly {other} ({})",
                fmt_count(n)
            ),
        };
        Some(format!("no request got a response: {why}"))
    }

    /// Answers to `http://` that were a TLS server's (see `TransportCounters::tls_answers`).
    fn tls_answers(&self) -> u64 {
        self.summary.transport.as_ref().map_or(0, |t| t.tls_answers)
    }

    /// The run's URL with https:// for http://, without its credentials: a URL to copy, and
    /// the password in the run's is `***`.
    fn https_url(&self) -> String {
        let url = &tailscope_loadgen::plan::without_credentials(&self.config.url);
        match url.strip_prefix("http://") {
            Some(rest) => format!("https://{rest}"),
            None => format!("https:// ({url})"),
        }
    }

    /// How many TLS handshakes failed, of which kind, and why (the first reason recorded);
    /// none when none failed.
    fn tls_failures(&self) -> Option<String> {
        let count = |k: ErrorKind| self.errors.get(k.as_str()).copied().unwrap_or(0);
        let (certificate, handshake) = (
            count(ErrorKind::Certificate),
            count(ErrorKind::TlsHandshake),
        );
        if certificate + handshake == 0 {
            return None;
        }
        let why = self
            .summary
            .transport
            .as_ref()
            .and_then(|t| t.tls_failure.as_deref())
            .unwrap_or("reason not recorded");
        Some(format!(
            "{} TLS handshakes failed (certificate {}, tls_handshake {}): {why}",
            fmt_count(certificate + handshake),
            fmt_count(certificate),
            fmt_count(handshake),
        ))
    }

    pub(crate) fn compute_warnings(&self) -> Vec<String> {
        let s = &self.summary;
        let mut out = Vec::new();
        if let Some(reason) = self.no_response_reason() {
            out.push(reason);
        }
        // Said once: when no request got a response for it, the reason above says it.
        if let Some(tls) = self.tls_failures() {
            if !out.iter().any(|w| w.contains(&tls)) {
                out.push(tls);
            }
        }
        let server_max = self
            .summary
            .transport
            .as_ref()
            .and_then(|t| t.h2_max_streams);
        if let (Some(asked), Some(max)) = (self.config.streams, server_max) {
            if (max as usize) < asked {
                out.push(format!(
                    "--streams {asked} was held at {max} per connection: the server allows no more (its SETTINGS_MAX_CONCURRENT_STREAMS)"
                ));
            }
        }
        let no_port = self
            .errors
            .get(ErrorKind::NoLocalPort.as_str())
            .copied()
            .unwrap_or(0);
        if no_port > 0 && s.successes > 0 {
            out.push(format!(
                "{} connects found no local port (no_local_port): {NO_LOCAL_PORT_FIX}",
                fmt_count(no_port)
            ));
        }
        out.extend(self.status_code_warnings());
        out.extend(self.connect_setup_warning());
        if let Some(w) = self.never_opened() {
            out.push(w);
        }
        if let Some(c) = &self.connections {
            out.extend(c.warnings());
        }
        let stopped = self.stopped_answering();
        // The requests never sent are said apart only by a server that still answered: one
        // that stopped, or never answered, is told by its own warning above or below.
        let unsent_applies = stopped.is_none() && self.no_response_reason().is_none();
        out.extend(self.pace_warnings(unsent_applies));
        out.extend(stopped);
        out.extend(self.littles_law_lost_time());
        out.extend(self.stationarity_warnings());
        out
    }

    /// One warning per status code other than 2xx, with its share of the responses and what
    /// it usually means.
    fn status_code_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        let responses = self.summary.successes;
        for (code, n) in &self.status_codes {
            let is_2xx = code.starts_with('2') && code.len() == 3;
            if is_2xx || *n == 0 || responses == 0 {
                continue;
            }
            let pct = 100.0 * *n as f64 / responses as f64;
            let tls_port;
            let hint = match code.as_str() {
                "400" if self.tls_answers() > 0 => {
                    tls_port = format!(
                        ": the port speaks TLS (\"The plain HTTP request was sent to HTTPS port\"); use {}",
                        self.https_url()
                    );
                    &tls_port
                }
                "404" => ": is --path (or the URL's path) right?",
                "405" => &*format!(": does the server take {} there (-m)?", self.config.method),
                "400" | "411" | "413" | "415" | "422" | "431" => {
                    ": the server rejected the request; check -m, -H and the body"
                }
                "401" | "403" => ": the server wants credentials (-H 'Authorization: ...')",
                "429" | "503" => ": the server is shedding load",
                // Not a failure of the server: python's http.server answers POST so.
                "501" => &*format!(
                    ": Not Implemented, the server does not support {} (-m) there",
                    self.config.method
                ),
                c if c.starts_with('5') => ": the server failed",
                c if c.starts_with('3') => ": a redirect, which tailscope does not follow",
                _ => "",
            };
            out.push(format!(
                "{} % of responses were {code} ({}){hint}",
                fmt_pct(pct),
                fmt_count(*n)
            ));
        }
        out
    }

    /// Connections still opening at the end, or connects that took a good part of the run:
    /// the run measured connection set-up.
    fn connect_setup_warning(&self) -> Option<String> {
        let s = &self.summary;
        // A server that closes its connections (gunicorn's sync workers, `Connection:
        // close`) has some reopening at any moment: that is its steady state, not a set-up
        // the run did not get past (a newcomer was told "fewer -c" beside "more -c").
        let churned = s.reconnects >= self.config.connections as u64;
        if s.still_connecting > 0 && !churned {
            let connects = match &self.connect_us {
                Some(p) => format!(
                    "the connects that finished took p50 {}, max {}",
                    fmt_us(p.p50),
                    fmt_us(p.max)
                ),
                None => "no connect finished".to_string(),
            };
            return Some(format!(
                "{} of {} connections were still opening when the run ended ({connects}): the run measured connection set-up; give a longer -z, a --warmup, or fewer -c",
                fmt_count(s.still_connecting),
                fmt_count(self.config.connections as u64)
            ));
        } else if let (false, Some(p)) = (churned, &self.connect_us) {
            // Connects that all finished but took a good part of the run: with many
            // connections the run measured set-up, not the steady state (-c 20000 -z 3s).
            let window_us = s.duration_s * 1e6;
            if window_us > 0.0 && p.p99 as f64 >= 0.1 * window_us {
                return Some(format!(
                    "connects took up to {} (p50 {}, p99 {}) in a {:.2} s run: much of it measured connection set-up; give a --warmup, a longer -z, or fewer -c",
                    fmt_us(p.max),
                    fmt_us(p.p50),
                    fmt_us(p.p99),
                    s.duration_s
                ));
            }
        }
        None
    }

    /// Open loop: a share of the schedule's requests never answered by the end, from a
    /// server that still answered (else [`Self::stopped_answering`] says it). Late sends count
    /// only requests that left, so a server far behind the rate, whose slots mostly never
    /// left, read fewer late sends than one a little behind (a newcomer's python at -q 20000:
    /// 96,731 of 100,000 unfinished, 3.3 % late sends, and no warning, where -q 1000 warned).
    /// Counted by the requests never sent (still queued for a connection at the end): a
    /// slow endpoint that kept up with the rate, its last requests sent and still waiting,
    /// needs more --grace, not a lower -q. With connections still opening at the end it does
    /// not offer more -c (the set-up warnings may say fewer). `generator_behind`: the
    /// generator's own delay is warned of too, so part of the queue may be its own: then it
    /// neither offers more -c (the generator's warning says fewer) nor names a rate the
    /// server takes (a review finding: "fewer -c" and "more -c" side by side).
    fn unanswered_schedule(&self, generator_behind: bool) -> Option<String> {
        let s = &self.summary;
        let rate = self.config.rate?;
        if s.requests == 0
            || s.successes == 0
            || s.duration_s <= 0.0
            || (s.unfinished_unsent as f64) < UNANSWERED_SHARE_WARN * s.requests as f64
        {
            return None;
        }
        let answered_rate = s.successes as f64 / s.duration_s;
        let asked = rate_asked(rate, &self.rate_changes, s.duration_s);
        // With the generator behind, what the server takes is not known from this run, and
        // more connections are the opposite of the generator's own advice (fewer -c, more
        // --threads): the queue is told to wait for that, not blamed on the server.
        let (whose, advice) = if generator_behind {
            (
                "so the schedule queued behind it, and behind the generator's own delay (warned of apart)",
                "free the generator first (its warning), then lower -q if the queue remains",
            )
        } else if s.still_connecting == 0 {
            (
                "so the schedule queued behind it",
                "lower -q to what the server takes, or give it more connections (-c) if it can take them",
            )
        } else {
            (
                "so the schedule queued behind it",
                "lower -q to what the server takes",
            )
        };
        Some(format!(
            "{} of {} requests ({} %) were never sent by the end (unfinished, queued for a connection, up to {}): the server answered {}/s of {asked}, {whose}; the corrected latency counts that queue: {advice}",
            fmt_count(s.unfinished_unsent),
            fmt_count(s.requests),
            fmt_pct(100.0 * s.unfinished_unsent as f64 / s.requests as f64),
            s.unfinished_max_us.map_or("n/a".into(), fmt_us),
            fmt_count(answered_rate.round() as u64),
        ))
    }

    /// Whether the schedule was kept, and whose the delay was when it was not: the requests
    /// never sent ([`Self::unanswered_schedule`], when `unsent_applies`), the late sends, and
    /// the generator's own loop held up. Each is said when its evidence is there, and the
    /// side most of it points to comes first.
    ///
    /// The generator itself can fall behind (a busy or shared CPU, too many connections for its
    /// threads): its own delay is then in the latency, charged to the server (a newcomer's
    /// `-q 5000` beside busy loops on its CPU: loop lag 868 ms, 60 % of sends late, corrected
    /// p50 236 ms against 7.5 ms uncorrected, and no warning). Told by the loop's own lag, and
    /// by the late sends' dominant cause ([`LateSendsByCause`]): a send is late because the
    /// generator's thread waited for a CPU, because no connection was free (the server had
    /// not answered: the corrected latency charges that wait to the server, as it should, and
    /// more connections (-c) offer the rate; a review finding: a 20 ms server at `-q 500 -c 4`
    /// was told to use fewer connections), or by the generator's own loop.
    ///
    /// A loop held up while most late sends waited for a free connection is the lesser story:
    /// a newcomer's python at -q 5000 left 16,631 of 25,000 requests unsent, 8,345 of its
    /// 8,368 late sends for a free connection, and was told only that the generator fell
    /// behind (fewer -c, more --threads). Then the server's side is said first, and the hold
    /// after it, without "fewer -c" (which contradicts "more -c").
    fn pace_warnings(&self, unsent_applies: bool) -> Vec<String> {
        let s = &self.summary;
        let lag_us = self.timeseries.iter().map(|p| p.generator_lag_us).max();
        let lagged = lag_us.filter(|&us| us >= GENERATOR_LAG_WARN_US);
        let late_share = match self.config.rate {
            Some(_) if s.requests > 0 => s.late_sends as f64 / s.requests as f64,
            _ => 0.0,
        };
        let dominant = s.late_sends_by_cause.map(|by| by.dominant());
        let late_warned = late_share >= LATE_SHARE_WARN;
        let unsent_warned = unsent_applies && self.unanswered_schedule(false).is_some();
        // The late sends' own evidence puts them on the server's side (the loop's hold, if
        // any, did not make most of them late), when there are enough of them, or of
        // requests never sent, to be a story at all: a long hold beside a few late sends is
        // the generator's.
        let server_side = dominant == Some(LateCause::NoFreeConnection)
            && s.late_sends_by_cause
                .is_some_and(|by| by.no_free_connection > 0)
            && (late_warned || unsent_warned);
        let late = late_warned.then(|| {
            format!(
                "{} of {} sends ({} %) left more than 1 ms after their intended time (late_sends{})",
                fmt_count(s.late_sends),
                fmt_count(s.requests),
                fmt_pct(100.0 * late_share),
                s.late_sends_by_cause
                    .map_or_else(String::new, |by| format!(": {}", by.describe()))
            )
        });
        let p50s = match (&self.latency_us, &self.latency_uncorrected_us) {
            (Some(c), Some(u)) => format!(
                " (p50 {} corrected, {} from the actual sends)",
                fmt_us(c.p50),
                fmt_us(u.p50)
            ),
            _ => String::new(),
        };
        let own_delay = format!("{OWN_DELAY}{p50s}, not only the server's");
        let generator_side = match (lagged, &late) {
            (Some(_), _) => !server_side,
            (None, Some(_)) => matches!(
                dominant,
                Some(LateCause::WaitedForCpu | LateCause::Generator)
            ),
            (None, None) => false,
        };
        let unsent = unsent_applies
            .then(|| self.unanswered_schedule(generator_side))
            .flatten();
        let late_warning = late.clone().map(|late| match dominant {
            Some(LateCause::WaitedForCpu) => format!(
                "{late}; most while the generator's thread waited for a CPU (its run-queue wait covered their lateness): other threads took its CPU, other work or the machine's own kernel threads; {own_delay}: pin the generator away from other work (--cpus apart from the server's, taskset), and see the run-queue wait of its CPU (perf sched latency)"
            ),
            Some(LateCause::Generator) => format!(
                "{late}; most the generator's own, while it had a CPU: its loop or timer could not keep the schedule (a loop busy throughout does not get to a connection whose response has come); {own_delay}: give it more threads (--threads) or a lower rate (-q)"
            ),
            Some(LateCause::NoFreeConnection) | None => format!(
                "{late} while {}: every connection was waiting on a response, so the server did not keep up with {} over {} connections; the corrected latency counts that wait{p50s}, as it should: more connections (-c) offer the rate, if the server can take them",
                if lagged.is_some() {
                    "most waited for a free connection"
                } else {
                    "the generator kept up"
                },
                self.config.rate.map_or_else(String::new, |r| rate_asked(r, &self.rate_changes, s.duration_s)),
                fmt_count(self.config.connections as u64)
            ),
        });
        let mut out = Vec::new();
        match lagged {
            None => {
                if generator_side {
                    out.extend(late_warning);
                    out.extend(unsent);
                } else {
                    out.extend(unsent);
                    out.extend(late_warning);
                }
            }
            Some(us) if server_side => {
                out.extend(unsent);
                out.extend(late_warning);
                let waited = s.late_sends_by_cause.map_or(0, |b| b.no_free_connection);
                out.push(format!(
                    "a generator thread's event loop was also {} {LAG_FIELD}, though {} of the {} late sends waited for a free connection (the server's side, above): the hold is in the latency measured then; check that nothing else busy runs on the generator's CPUs (top; --cpus apart from the server's), or give it more threads (--threads)",
                    loop_held(us),
                    fmt_count(waited),
                    fmt_count(s.late_sends)
                ));
            }
            Some(us) => {
                let mut what = vec![format!(
                    "a generator thread's event loop was {} {LAG_FIELD}",
                    loop_held(us)
                )];
                what.extend(late);
                out.push(format!(
                    "the generator fell behind: {}; {own_delay}: check that nothing else busy runs on the generator's CPUs (top; --cpus apart from the server's), or give it fewer connections (-c) or more threads (--threads)",
                    what.join(", and ")
                ));
                out.extend(unsent);
            }
        }
        out
    }

    /// A closed-loop run of a duration whose connections were never all open at once, with
    /// nothing closing them: the rest had not opened when it ended (a newcomer's `-c 20000
    /// -z 2s` opened 14,608 and said nothing of the others).
    fn never_opened(&self) -> Option<String> {
        let c = &self.config;
        let s = &self.summary;
        let open = self.connections.as_ref()?.peak_open;
        let plain = c.requests.is_none()
            && c.rate.is_none()
            && c.connect_rate.is_none()
            && c.keepalive
            && s.reconnects == 0
            && s.connect_failures == 0
            && s.successes > 0;
        (plain && open < c.connections as u64).then(|| {
            format!(
                "at most {} of the {} connections were open at once: the others had not opened when the run ended (the server accepted them at its pace, or the generator could not open them sooner); give a --warmup, a longer -z, or fewer -c",
                fmt_count(open),
                fmt_count(c.connections as u64)
            )
        })
    }

    /// A server that answered and then stopped: whole seconds after its last response with
    /// no response, while requests failed or were left waiting. The connect back-off keeps
    /// the failures few (a newcomer's python server killed 1 s into a 3 s run: 108 errors
    /// against 59,472 successes, an error rate of 0.18 %, exit 0 and no word, though 2 of
    /// the 3 seconds had no answer), and a hung server's requests count once each.
    fn stopped_answering(&self) -> Option<String> {
        // A second's requests count its failures and, in the last, the unfinished.
        let answered = |p: &tailscope_loadgen::snapshot::TimePoint| {
            p.requests > p.errors.saturating_add(p.unfinished)
        };
        // The run's own whole seconds: those that began in its load window (-z), not the
        // grace period's after it (a 3 s run read "of the run's 4 whole seconds"). A
        // measured window may end a hair before its last second's end.
        let window_s = self.summary.duration_s;
        let whole = |p: &&tailscope_loadgen::snapshot::TimePoint| {
            !p.partial && p.t_s - 1.0 < window_s - 0.01
        };
        let last = self.timeseries.iter().rposition(answered)?;
        let dead: Vec<_> = self.timeseries[last + 1..].iter().filter(whole).collect();
        let failed: u64 = dead.iter().map(|p| p.errors).sum();
        let waiting = self.summary.unfinished;
        if dead.is_empty() || (failed == 0 && waiting == 0) {
            return None;
        }
        let seconds = self.timeseries.iter().filter(whole).count();
        let kinds: Vec<String> = {
            let mut k: Vec<_> = self.errors.iter().filter(|(_, n)| **n > 0).collect();
            k.sort_by(|a, b| b.1.cmp(a.1));
            k.iter()
                .take(3)
                .map(|(k, n)| format!("{k} {}", fmt_count(**n)))
                .collect()
        };
        let since = self.timeseries[last].t_s;
        let waiting = if waiting > 0 {
            format!(", {} still waiting at the end", fmt_count(waiting))
        } else {
            String::new()
        };
        let kinds = if kinds.is_empty() {
            "none".to_string()
        } else {
            kinds.join(", ")
        };
        Some(format!(
            "the server stopped answering by {since:.1} s: {} of the run's {seconds} whole seconds after its last response got none ({} requests failed then{waiting}; the run's errors: {kinds}); the run's totals and error rate understate that, since failed connects back off and a request left waiting counts once",
            dead.len(),
            fmt_count(failed),
        ))
    }

    /// Little's law says the generator lost time between requests (see
    /// [`super::LittlesLaw::generator_lost_time`]): a warning in the JSON too, where CI reads it,
    /// not only in the text.
    fn littles_law_lost_time(&self) -> Option<String> {
        let l = self
            .littles_law
            .as_ref()
            .filter(|l| l.generator_lost_time())?;
        Some(format!(
            "{:.1} % of the connections' time ({:.2} of {:.2} s) is in no request: {LOST_TIME} (saturated, or a bug); the figures describe the generator too",
            l.unaccounted_pct,
            l.connection_s - l.accounted_s,
            l.connection_s
        ))
    }
}

/// What every warning that the generator's own delay is in the latency says (the loop held
/// up, late sends that were the generator's): [`is_generator_warning`] finds them by it.
const OWN_DELAY: &str = "the latency then includes the generator's own delay";
/// The field a warning of the generator's held-up loop names.
const LAG_FIELD: &str = "(generator_lag_us)";
/// What the warning of connections' time in no request says.
const LOST_TIME: &str = "the generator lost time between requests";

/// Whether a run's warning says that its figures are partly the generator's (its loop held
/// up, sends late by its own delay, time lost between requests): what a comparison of the
/// run carries over, since its changes are then partly the generator's too.
pub fn is_generator_warning(warning: &str) -> bool {
    [OWN_DELAY, LAG_FIELD, LOST_TIME]
        .iter()
        .any(|marker| warning.contains(marker))
}

/// How long a generator thread's event loop was held (the longest single hold in some
/// second, `generator_lag_us`). A hold of a second or more is one hold that outlasted its
/// second: "up to 3.89s in one second" read as more time than the second had.
fn loop_held(us: u64) -> String {
    if us >= 1_000_000 {
        format!("held once for {}", fmt_us(us))
    } else {
        format!("held up to {} in one second", fmt_us(us))
    }
}

/// The open-loop rate a warning holds the server to, for a figure of the whole load window:
/// `-q R`, or after live changes (the dashboard's +/-) the highest rate in force in the
/// window, with the -q it started at. Not the last rate: after a decrease the server was
/// behind the higher one, and after + then - the last is the start again. A change after
/// the window (`t_s` past `duration_s`: in the grace period, when nothing more was sent)
/// changed no rate the window ran at; one in the warm-up set the rate the window started at.
fn rate_asked(start: f64, changes: &[RateChange], duration_s: f64) -> String {
    let count = |r: f64| fmt_count(r.round() as u64);
    let at_start = changes
        .iter()
        .rev()
        .find(|c| c.t_s <= 0.0)
        .map_or(start, |c| c.rate);
    let in_window: Vec<f64> = std::iter::once(at_start)
        .chain(
            changes
                .iter()
                .filter(|c| c.t_s > 0.0 && c.t_s <= duration_s)
                .map(|c| c.rate),
        )
        .collect();
    let highest = in_window.iter().copied().fold(f64::MIN, f64::max);
    if in_window.iter().all(|&r| r == start) {
        format!("-q {}", count(start))
    } else if in_window.iter().all(|&r| r == highest) {
        format!(
            "{}/s (-q {}, changed live before measuring)",
            count(highest),
            count(start)
        )
    } else {
        format!(
            "rates up to {}/s (-q {}, changed live: see Rate changes)",
            count(highest),
            count(start)
        )
    }
}
