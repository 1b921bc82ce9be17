//! The run's journal as it is written (`--journal`, on by default): each finished second,
//! handed over from the generator's per-tick snapshot, goes to a thread of its own that
//! encodes and appends it, so a slow disk never holds up the load. The format is
//! `tailscope_report::journal`'s (docs/journal.md).
//!
//! Durability: every record is written with one `write` as it comes (the page cache has it
//! at once: a killed tailscope loses nothing written), and `fdatasync` runs at most once every
//! [`SYNC_EVERY`] on the journal's thread (a machine that loses power loses at most that
//! much), and once at the end.
//!
//! A failing write (a full disk) stops the journal, not the run: it is said once on stderr (after
//! the dashboard, if one has the terminal: [`crate::stderr`]) and the run ends with the
//! incomplete-output exit code. Records already written stay whole.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tailscope_loadgen::snapshot::Histograms;
use tailscope_loadgen::{SlowRequest, Snapshot};
use tailscope_report::document::Report;
use tailscope_report::journal::{self, Header, ProfileRecord, SecondRecord};
use tailscope_report::sections::CpuBusy;
use tailscope_targets::listen::ListenSample;

/// The longest the journal goes without an `fdatasync`.
pub const SYNC_EVERY: Duration = Duration::from_secs(5);

/// Seconds that may wait for the journal's thread before the journal is given up as too
/// slow (ten minutes of a stuck disk): the load never waits for it.
const QUEUE: usize = 600;

enum Message {
    Second(Box<SecondRecord>, Vec<u8>),
    End(Box<Report>),
    Histograms(u64, Box<Histograms>),
    Profile(Box<ProfileRecord>),
}

/// The journal of a run being written.
pub struct JournalWriter {
    path: PathBuf,
    to_thread: Option<SyncSender<Message>>,
    thread: Option<JoinHandle<()>>,
    failed: Arc<AtomicBool>,
    /// Seconds handed to the thread so far.
    seconds: usize,
    /// The slowest list last written (a record carries it only when it changed).
    last_slowest: Vec<SlowRequest>,
}

/// Says once that the journal is no longer written, and why.
fn give_up(path: &Path, failed: &AtomicBool, why: &str) {
    if !failed.swap(true, Ordering::SeqCst) {
        say!(
            "tailscope: the journal {} is no longer being written: {why}; the run goes on, what was written stays readable, and the exit code will say the output is incomplete",
            path.display()
        );
    }
}

impl JournalWriter {
    /// Creates the journal at `path` with its header. A journal that cannot be created is
    /// said on stderr and the run goes on without it ([`Self::failed`] is then true).
    pub fn create(path: &Path, header: &Header) -> JournalWriter {
        let failed = Arc::new(AtomicBool::new(false));
        let mut writer = JournalWriter {
            path: path.to_path_buf(),
            to_thread: None,
            thread: None,
            failed: failed.clone(),
            seconds: 0,
            last_slowest: Vec::new(),
        };
        let mut bytes = journal::preamble();
        bytes.extend(journal::header_record(header));
        let file = File::create(path).and_then(|mut f| {
            f.write_all(&bytes)?;
            f.sync_data()?;
            Ok(f)
        });
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                give_up(path, &failed, &e.to_string());
                return writer;
            }
        };
        let (tx, rx) = sync_channel(QUEUE);
        let path_owned = path.to_path_buf();
        match std::thread::Builder::new()
            .name("tailscope-journal".into())
            .spawn(move || write_records(file, rx, &path_owned, &failed))
        {
            Ok(handle) => {
                writer.to_thread = Some(tx);
                writer.thread = Some(handle);
            }
            Err(e) => give_up(path, &writer.failed, &e.to_string()),
        }
        writer
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True once a write failed (or the journal could not be created).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    /// Hands the seconds this snapshot closed to the journal's thread (never waits).
    pub fn on_snapshot(
        &mut self,
        snap: &Snapshot,
        cpu_busy: &CpuBusy,
        listen: Option<ListenSample>,
    ) {
        let new = snap.new_second_histograms.len();
        if new == 0 || self.to_thread.is_none() {
            return;
        }
        let first_new = snap.seconds_closed.saturating_sub(new);
        let recent_first = snap
            .seconds_closed
            .saturating_sub(snap.recent_seconds.len());
        for (i, histogram) in snap.new_second_histograms.iter().enumerate() {
            let index = first_new + i;
            let Some(point) = index
                .checked_sub(recent_first)
                .and_then(|k| snap.recent_seconds.get(k))
            else {
                continue;
            };
            let slowest = (snap.slowest != self.last_slowest).then(|| {
                self.last_slowest.clone_from(&snap.slowest);
                snap.slowest.clone()
            });
            let record = SecondRecord {
                point: point.clone(),
                totals: snap.totals.clone(),
                slowest,
                cpu_busy_pct: cpu_busy.0.get(&(index as u64)).cloned().unwrap_or_default(),
                listen,
            };
            self.send(Message::Second(Box::new(record), histogram.clone()));
            self.seconds += 1;
        }
        if let Some(h) = &snap.checkpoint {
            self.send(Message::Histograms(snap.seconds_closed as u64, h.clone()));
        }
    }

    /// Hands the server's profile as of `seconds` closed seconds to the journal's thread (the
    /// run gives it with each snapshot that carries a histograms checkpoint, once a minute).
    pub fn on_profile(&mut self, record: ProfileRecord) {
        self.send(Message::Profile(Box::new(record)));
    }

    fn send(&mut self, message: Message) {
        let Some(tx) = &self.to_thread else { return };
        match tx.try_send(message) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                give_up(
                    &self.path,
                    &self.failed,
                    "its disk fell more than ten minutes behind",
                );
                self.to_thread = None;
            }
            Err(TrySendError::Disconnected(_)) => self.to_thread = None,
        }
    }

    /// Ends the journal: the run's final histograms and its report as its end record (a
    /// normal end), then the last sync. Returns false when the journal is incomplete.
    pub fn finish(mut self, report: Option<&Report>, histograms: Option<&Histograms>) -> bool {
        if let Some(h) = histograms {
            self.send(Message::Histograms(
                self.seconds as u64,
                Box::new(h.clone()),
            ));
        }
        if let Some(r) = report {
            // The run's profile too, as the histograms: a journal cut before its end record
            // (a kill while the report was being written) still has them as of the end.
            if let Some(f) = &r.sections.findings {
                self.on_profile(ProfileRecord {
                    seconds: self.seconds as u64,
                    profile: f.profile.clone(),
                    listen_queue: f.listen_queue.clone(),
                });
            }
            self.send(Message::End(Box::new(r.clone())));
        }
        drop(self.to_thread.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        !self.failed()
    }
}

/// The journal's thread: appends each record, syncs at most every [`SYNC_EVERY`].
fn write_records(mut file: File, rx: Receiver<Message>, path: &Path, failed: &AtomicBool) {
    let mut synced = Instant::now();
    let mut seconds = journal::SecondsEncoder::default();
    for message in rx {
        if failed.load(Ordering::SeqCst) {
            continue;
        }
        let bytes = match message {
            Message::Second(record, histogram) => seconds.record(&record, &histogram),
            Message::End(report) => journal::end_record(&report),
            Message::Histograms(seconds, h) => journal::histograms_record(seconds, &h),
            Message::Profile(record) => journal::profile_record(&record),
        };
        if let Err(e) = file.write_all(&bytes) {
            give_up(path, failed, &e.to_string());
            // A record half written stays at the end, where a reader stops: the whole records
            // before it are not touched.
            continue;
        }
        if synced.elapsed() >= SYNC_EVERY {
            synced = Instant::now();
            if let Err(e) = file.sync_data() {
                give_up(path, failed, &e.to_string());
            }
        }
    }
    if !failed.load(Ordering::SeqCst) {
        if let Err(e) = file.sync_data() {
            give_up(path, failed, &e.to_string());
        }
    }
}

/// The report of a run rebuilt from its journal, `plan` being the run's own (re-read from the
/// journal's command line). With an end record, the report the run wrote, as it was. Without
/// one (the run was killed), a report of every whole second recorded, its diagnosis made
/// anew by the rules, marked `interrupted` with a warning that says what was lost.
pub fn rebuild(journal: &journal::Journal, plan: &tailscope_loadgen::Plan) -> Report {
    use tailscope_forensics::{judge, Evidence, Findings, Load, Roles};
    if let Some(end) = &journal.end {
        return end.clone();
    }
    let totals = journal.totals();
    let header = &journal.header;
    let server_cpus = header
        .target
        .as_ref()
        .map(|t| t.server_cpus.clone())
        .unwrap_or_default();
    let roles = Roles {
        server: &server_cpus,
        client: &plan.cpus,
    };
    let last = totals.timeseries.last().map_or(0.0, |p| p.t_s);
    let (profile, listen_queue) = match &journal.profile {
        Some(r) => {
            let mut profile = r.profile.clone();
            profile.notes.push(format!(
                "rebuilt from the journal of a run that did not end: the profile is as of second {} (the journal writes it once a minute)",
                r.seconds
            ));
            (profile, r.listen_queue.clone())
        }
        None => (
            tailscope_targets::profile::Profile {
                interval_ms: plan.tick.as_millis() as u64,
                duration_s: last,
                cpus: Vec::new(),
                target: None,
                generator: None,
                tcp: None,
                notes: vec![
                    "rebuilt from the journal of a run that did not end: no profile was written before it stopped (the journal writes one a minute; none through an agent): only each second's per-CPU busy is here".into(),
                ],
                source: None,
                agent: None,
            },
            None,
        ),
    };
    let verdict = judge(&Evidence::new(
        Load::of_totals(plan, &totals),
        profile.tcp.clone(),
        listen_queue.clone(),
        journal.profile.as_ref().map(|_| &profile),
        roles,
    ));
    let cpu_busy = CpuBusy(
        journal
            .seconds
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.record.cpu_busy_pct.is_empty())
            .map(|(i, s)| (i as u64, s.record.cpu_busy_pct.clone()))
            .collect(),
    );
    let lost = match &journal.tail {
        journal::Tail::Clean => String::new(),
        journal::Tail::Damaged { bytes, .. } => {
            format!(" (and a last record cut short, {bytes} bytes, was left out)")
        }
    };
    let others = match &journal.histograms {
        Some(h) => format!("the connect, TLS, first-request, body and uncorrected histograms are as of second {} (the journal writes them once a minute)", h.seconds),
        None => "the connect, TLS, first-request, body and uncorrected histograms are not (the journal writes them once a minute: the run stopped before its first)".to_string(),
    };
    let profiled = match &journal.profile {
        Some(r) => format!("the profile (per-CPU, the server's processes, the generator's CPU, TCP counters) is as of second {} (written once a minute)", r.seconds),
        None => "no profile was written before it stopped (once a minute; none through an agent): only each second's per-CPU busy".to_string(),
    };
    let warning = format!(
        "Rebuilt from the journal of a run that did not end normally (killed, or its machine stopped): the {} whole seconds recorded are here, up to {last:.0} s; what came after, at most the second being recorded when it stopped, is lost{lost}; {others}; {profiled}. Not in a journal: figures per name of a mix, the stacks.",
        journal.seconds.len()
    );
    let measure_started =
        std::time::UNIX_EPOCH + Duration::from_millis(header.measure_started_unix_ms);
    let mut report = Report::assemble(tailscope_report::RunParts {
        plan,
        totals: &totals,
        warnings: vec![warning],
        generator: tailscope_report::GeneratorClock {
            measure_started,
            segment: None,
            start_at: None,
        },
        signal: Some(
            "a kill or a crash, none recorded: the run did not end (rebuilt from its journal)"
                .into(),
        ),
        target: header.target.clone(),
        cpu_busy,
        findings: Some(Findings {
            profile,
            diagnosis: verdict.named,
            diagnosis_held_back: verdict.held_back,
            listen_queue,
            slowest_by_request: Vec::new(),
        }),
        stacks: None,
        until: None,
        warmup_auto: None,
    });
    report.interrupted = true;
    report
}

/// The default journal path: `tailscope-<UTC time>-<pid>.journal` in the directory of `beside`
/// (the first report output), or in the working directory. The pid keeps two runs started in
/// the same second in the same directory apart (a soak's two generators once wrote into one
/// file, each truncating the other's).
pub fn default_path(beside: Option<&Path>, now: std::time::SystemTime, pid: u32) -> PathBuf {
    let stamp: String = humantime::format_rfc3339_seconds(now)
        .to_string()
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    let name = format!("tailscope-{stamp}-{pid}.journal");
    match beside.and_then(Path::parent) {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(name),
        _ => PathBuf::from(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_journal_goes_beside_the_first_output() {
        let at = std::time::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            default_path(Some(Path::new("out/r.json")), at, 42),
            PathBuf::from("out/tailscope-20231114T221320-42.journal")
        );
        assert_eq!(
            default_path(Some(Path::new("r.json")), at, 42),
            PathBuf::from("tailscope-20231114T221320-42.journal")
        );
        assert_eq!(
            default_path(None, at, 42),
            PathBuf::from("tailscope-20231114T221320-42.journal")
        );
        // Two processes started in the same second get two journals.
        assert_ne!(default_path(None, at, 42), default_path(None, at, 43));
    }
}
