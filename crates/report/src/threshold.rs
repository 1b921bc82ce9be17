//! `--fail-if` thresholds for CI: `p99 < 5ms`, `rps > 50000`, `error_rate < 0.1%`.
//!
//! A threshold states what must hold; the run fails when it does not. Expressions are parsed
//! before any load so a typo fails fast. `METRIC[NAME]` judges one request of a mix
//! (`p99[search] < 20ms`) by its figures in `by_request`.

use std::fmt;

use crate::document::{fmt_us, Report};
use tailscope_loadgen::error::Error;

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency percentile or statistic, in microseconds.
    Latency(LatencyStat),
    /// Requests per second.
    Rps,
    /// errors / requests.
    ErrorRate,
    /// non-2xx responses / requests.
    Non2xxRate,
    /// Timed-out requests.
    Timeouts,
}

/// Which latency statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LatencyStat {
    /// Median.
    P50,
    /// 75th.
    P75,
    /// 90th.
    P90,
    /// 95th.
    P95,
    /// 99th.
    P99,
    /// 99.9th.
    P999,
    /// 99.99th.
    P9999,
    /// Mean.
    Mean,
    /// Slowest.
    Max,
    /// Fastest.
    Min,
}

/// Comparison operator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    fn holds(self, actual: f64, limit: f64) -> bool {
        match self {
            Op::Lt => actual < limit,
            Op::Le => actual <= limit,
            Op::Gt => actual > limit,
            Op::Ge => actual >= limit,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The expression as written.
    pub expr: String,
    /// What it measures.
    pub metric: Metric,
    /// How it compares.
    pub op: Op,
    /// The limit in the metric's base unit (µs, req/s, a fraction, a count).
    pub limit: f64,
    /// The request name of a mix it judges (`p99[search]`); none: the whole run.
    pub request: Option<String>,
}

/// The outcome of checking one threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The threshold.
    pub threshold: Threshold,
    /// The measured value, formatted; "n/a" when nothing was measured.
    pub actual: String,
    /// Whether it held.
    pub passed: bool,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = if self.passed { "ok" } else { "FAILED" };
        write!(
            f,
            "threshold {word}: {} (actual {})",
            self.threshold.expr, self.actual
        )
    }
}

const HELP: &str = "write METRIC OP VALUE, e.g. 'p99 < 5ms', 'rps > 50000', 'error_rate < 0.1%'; \
metrics: p50 p75 p90 p95 p99 p999 p9999 mean min max rps error_rate non2xx_rate timeouts; \
operators: < <= > >=; latency units: us ms s";

impl Threshold {
    /// Parses `METRIC OP VALUE`.
    pub fn parse(expr: &str) -> Result<Threshold, Error> {
        Threshold::parse_with_help(expr, HELP)
    }

    /// Parses `METRIC OP VALUE`, an error ending with `help` (what the flag takes: find-max's
    /// SLOs are fewer than `--fail-if`'s thresholds, and its error must not suggest others).
    pub fn parse_with_help(expr: &str, help: &str) -> Result<Threshold, Error> {
        let bad = |reason: String| Error::BadThreshold {
            expr: expr.to_string(),
            reason: format!("{reason}; {help}"),
        };
        let op_at = expr
            .find(['<', '>'])
            .ok_or_else(|| bad("no comparison operator".into()))?;
        let (name, rest) = expr.split_at(op_at);
        let (name, request) = match name.trim().split_once('[') {
            Some((metric, tail)) => {
                let request = tail
                    .strip_suffix(']')
                    // Up to the last ']': a name may hold brackets (?filter[a]=1).
                    .filter(|r| !r.trim().is_empty())
                    .ok_or_else(|| {
                        bad(format!(
                            "{:?} does not name a request as METRIC[NAME], e.g. p99[search]",
                            name.trim()
                        ))
                    })?;
                (metric, Some(request.trim().to_string()))
            }
            None => (name, None),
        };
        let (op, value) = if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            (Op::Gt, &rest[1..])
        };
        let name = name.trim().to_ascii_lowercase();
        let value = value.trim();
        let metric = match name.as_str() {
            "p50" => Metric::Latency(LatencyStat::P50),
            "p75" => Metric::Latency(LatencyStat::P75),
            "p90" => Metric::Latency(LatencyStat::P90),
            "p95" => Metric::Latency(LatencyStat::P95),
            "p99" => Metric::Latency(LatencyStat::P99),
            "p999" | "p99.9" => Metric::Latency(LatencyStat::P999),
            "p9999" | "p99.99" => Metric::Latency(LatencyStat::P9999),
            "mean" => Metric::Latency(LatencyStat::Mean),
            "max" => Metric::Latency(LatencyStat::Max),
            "min" => Metric::Latency(LatencyStat::Min),
            "rps" => Metric::Rps,
            "error_rate" => Metric::ErrorRate,
            "non2xx_rate" => Metric::Non2xxRate,
            "timeouts" => Metric::Timeouts,
            "" => return Err(bad("no metric".into())),
            other => return Err(bad(format!("unknown metric {other:?}"))),
        };
        if value.starts_with('-') {
            return Err(bad(format!(
                "{value:?}: a threshold is not negative (every metric is 0 or more)"
            )));
        }
        let number_end = value
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(value.len());
        let (number, unit) = value.split_at(number_end);
        let number: f64 = number
            .parse()
            .map_err(|_| bad(format!("{value:?} is not a number")))?;
        let unit = unit.trim();
        let limit = match (metric, unit) {
            (Metric::Latency(_), "us" | "µs") => number,
            (Metric::Latency(_), "ms") => number * 1e3,
            (Metric::Latency(_), "s") => number * 1e6,
            (Metric::Latency(_), _) => {
                return Err(bad(format!(
                    "a latency needs a unit (us, ms, s), got {unit:?}"
                )))
            }
            (Metric::ErrorRate | Metric::Non2xxRate, "%") if number <= 100.0 => number / 100.0,
            (Metric::ErrorRate | Metric::Non2xxRate, "") if number <= 1.0 => number,
            (Metric::ErrorRate | Metric::Non2xxRate, _) => {
                return Err(bad(format!(
                    "a rate is a percentage up to 100% (0.1%) or a fraction up to 1, got {value:?}"
                )))
            }
            (Metric::Rps | Metric::Timeouts, "") => number,
            (Metric::Rps | Metric::Timeouts, _) => {
                return Err(bad(format!(
                    "{name} takes a plain number, got unit {unit:?}"
                )))
            }
        };
        Ok(Threshold {
            expr: expr.trim().to_string(),
            metric,
            op,
            limit,
            request,
        })
    }

    /// Refuses a threshold that names a request the run does not send (checked before any
    /// load: a typo would otherwise fail only after the run).
    pub fn check_names(&self, names: &[String]) -> Result<(), Error> {
        let Some(request) = &self.request else {
            return Ok(());
        };
        if names.iter().any(|n| n == request) {
            return Ok(());
        }
        let reason = if names.is_empty() {
            "the run sends a single request; names exist only in a mix (--load, --urls-from-file)"
                .to_string()
        } else {
            format!("the mix's requests are {}", names.join(", "))
        };
        Err(Error::BadThreshold {
            expr: self.expr.clone(),
            reason: format!("no request is named {request:?}: {reason}"),
        })
    }

    /// Checks the threshold against a report. A latency threshold on a run with no complete
    /// responses fails: there is nothing to show it held.
    pub fn check(&self, report: &Report) -> Verdict {
        if let Some(name) = &self.request {
            return self.check_request(report, name);
        }
        let s = &report.summary;
        let actual: Option<(f64, String)> = match self.metric {
            Metric::Latency(stat) => report.latency_us.as_ref().map(|p| {
                let v = latency_stat(p, stat);
                (v, fmt_us(v.round() as u64))
            }),
            Metric::Rps => Some((s.rps, format!("{:.1} req/s", s.rps))),
            Metric::ErrorRate => Some((s.error_rate, format!("{:.3} %", s.error_rate * 100.0))),
            Metric::Non2xxRate => Some((s.non2xx_rate, format!("{:.3} %", s.non2xx_rate * 100.0))),
            Metric::Timeouts => Some((s.timeouts as f64, s.timeouts.to_string())),
        };
        self.verdict(actual)
    }

    /// Checks against one request name's figures.
    fn check_request(&self, report: &Report, name: &str) -> Verdict {
        let Some(r) = report.by_request.get(name) else {
            return Verdict {
                threshold: self.clone(),
                actual: format!("n/a (the report has no request named {name:?})"),
                passed: false,
            };
        };
        if r.requests == 0 {
            // No rate of nothing: an error rate of 0 % for a name that was never sent (its
            // connects all failed) would pass a run in which every request failed.
            return Verdict {
                threshold: self.clone(),
                actual: format!("n/a (no request named {name:?} was sent)"),
                passed: false,
            };
        }
        let non2xx_rate = crate::document::ratio(r.non2xx, r.requests);
        let actual = match self.metric {
            Metric::Latency(stat) => r.latency_us.as_ref().map(|p| {
                let v = latency_stat(p, stat);
                (v, fmt_us(v.round() as u64))
            }),
            Metric::Rps => r.rps.map(|rps| (rps, format!("{rps:.1} req/s"))),
            Metric::ErrorRate => Some((r.error_rate, format!("{:.3} %", r.error_rate * 100.0))),
            Metric::Non2xxRate => Some((non2xx_rate, format!("{:.3} %", non2xx_rate * 100.0))),
            Metric::Timeouts => Some((r.timeouts as f64, r.timeouts.to_string())),
        };
        self.verdict(actual)
    }

    fn verdict(&self, actual: Option<(f64, String)>) -> Verdict {
        match actual {
            Some((v, shown)) => Verdict {
                threshold: self.clone(),
                actual: shown,
                passed: self.op.holds(v, self.limit),
            },
            None => Verdict {
                threshold: self.clone(),
                actual: "n/a (no complete responses)".into(),
                passed: false,
            },
        }
    }
}

fn latency_stat(p: &tailscope_loadgen::snapshot::Percentiles, stat: LatencyStat) -> f64 {
    match stat {
        LatencyStat::P50 => p.p50 as f64,
        LatencyStat::P75 => p.p75 as f64,
        LatencyStat::P90 => p.p90 as f64,
        LatencyStat::P95 => p.p95 as f64,
        LatencyStat::P99 => p.p99 as f64,
        LatencyStat::P999 => p.p999 as f64,
        LatencyStat::P9999 => p.p9999 as f64,
        LatencyStat::Mean => p.mean,
        LatencyStat::Max => p.max as f64,
        LatencyStat::Min => p.min as f64,
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {} {}", self.metric, self.op.as_str(), self.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tailscope_loadgen::recorder::new_histogram;
    use tailscope_loadgen::snapshot::{Counters, RunTotals};

    #[test]
    fn parses_every_documented_form() {
        let t = Threshold::parse("p99 < 5ms").unwrap();
        assert_eq!(
            (t.metric, t.op, t.limit),
            (Metric::Latency(LatencyStat::P99), Op::Lt, 5_000.0)
        );
        let t = Threshold::parse("rps>50000").unwrap();
        assert_eq!((t.metric, t.op, t.limit), (Metric::Rps, Op::Gt, 50_000.0));
        let t = Threshold::parse("error_rate < 0.1%").unwrap();
        assert!((t.limit - 0.001).abs() < 1e-12);
        let t = Threshold::parse("non2xx_rate <= 0.01").unwrap();
        assert_eq!((t.op, t.limit), (Op::Le, 0.01));
        let t = Threshold::parse("max <= 2s").unwrap();
        assert_eq!(t.limit, 2e6);
        let t = Threshold::parse("p99.9 >= 250us").unwrap();
        assert_eq!(
            (t.metric, t.op, t.limit),
            (Metric::Latency(LatencyStat::P999), Op::Ge, 250.0)
        );
        assert_eq!(Threshold::parse("timeouts < 1").unwrap().limit, 1.0);
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        for (expr, needle) in [
            ("p99 5ms", "no comparison operator"),
            ("p98 < 5ms", "unknown metric"),
            ("p99 < 5", "needs a unit"),
            ("p99 < fast", "not a number"),
            ("rps > 5k", "plain number"),
            ("error_rate < 5", "percentage"),
            ("error_rate < 150%", "up to 100%"),
            ("< 5ms", "no metric"),
            ("rps > -1", "not negative"),
            ("p99[] < 5ms", "does not name a request"),
            ("p99 < -5ms", "not negative"),
        ] {
            let err = Threshold::parse(expr).unwrap_err().to_string();
            assert!(err.contains(needle), "{expr}: {err}");
        }
    }

    fn report(latencies: &[u64], errors: u64) -> Report {
        let mut latency = new_histogram(Duration::from_secs(60));
        for &v in latencies {
            latency.record(v).unwrap();
        }
        let mut counters = Counters {
            successes: latencies.len() as u64,
            ..Counters::default()
        };
        counters.status_codes = vec![(200, latencies.len() as u64)];
        counters.errors[0] = errors;
        let totals = RunTotals::of_latency(Duration::from_secs(1), counters, latency);
        Report::new(
            &tailscope_loadgen::Plan::new("http://127.0.0.1:9/").unwrap(),
            &totals,
        )
    }

    #[test]
    fn checks_hold_and_fail_on_the_boundary() {
        let r = report(&[1_000; 99], 1);
        assert!(Threshold::parse("p99 <= 1ms").unwrap().check(&r).passed);
        assert!(!Threshold::parse("p99 < 1ms").unwrap().check(&r).passed);
        assert!(Threshold::parse("rps >= 100").unwrap().check(&r).passed);
        assert!(!Threshold::parse("rps > 100").unwrap().check(&r).passed);
        assert!(
            !Threshold::parse("error_rate < 1%")
                .unwrap()
                .check(&r)
                .passed
        );
        assert!(
            Threshold::parse("error_rate <= 1%")
                .unwrap()
                .check(&r)
                .passed
        );
        let empty = report(&[], 5);
        let v = Threshold::parse("p99 < 1s").unwrap().check(&empty);
        assert!(!v.passed);
        assert!(v.actual.starts_with("n/a"));
    }

    #[test]
    fn a_request_name_may_hold_brackets() {
        let t = Threshold::parse("p99[GET /items?filter[a]=1] < 20ms").unwrap();
        assert_eq!(t.request.as_deref(), Some("GET /items?filter[a]=1"));
    }

    /// A name whose requests were never sent (every connect failed) has no error rate: its
    /// thresholds fail as n/a instead of reading 0 % and passing.
    #[test]
    fn a_name_never_sent_fails_its_thresholds() {
        let mut r = report(&[1_000; 10], 0);
        let unsent: crate::document::RequestReport = serde_json::from_value(serde_json::json!({
            "method": "GET", "target": "/search", "weight": 1, "requests": 0, "successes": 0,
            "errors": 0, "timeouts": 0, "unfinished": 0, "share": 0.0, "rps": 0.0,
            "error_rate": 0.0, "non2xx": 0, "bytes_read": 0, "latency_us": null,
            "status_codes": {}, "errors_by_kind": {},
            "histogram": serde_json::to_value(&r.histogram).unwrap()
        }))
        .unwrap();
        r.by_request.insert("search".into(), unsent);
        for expr in [
            "error_rate[search] < 1%",
            "timeouts[search] < 1",
            "non2xx_rate[search] < 1%",
        ] {
            let v = Threshold::parse(expr).unwrap().check(&r);
            assert!(!v.passed, "{expr}: {}", v.actual);
            assert!(
                v.actual.contains("no request named \"search\" was sent"),
                "{}",
                v.actual
            );
        }
    }
}
