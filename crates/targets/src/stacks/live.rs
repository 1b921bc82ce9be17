//! The dashboard's "Server inside", live: once a second of the run is over (and its last
//! samples read, [`SETTLE_NS`] later), what the target did in it, in a few lines: the most
//! sampled on-CPU frames (leaf ← caller) and the ways its threads were off CPU (system call
//! and state), each with its share. [`super::Session::live`] sums up the seconds not yet
//! summed, naming only the two innermost frames of each new stack, with one blazesym
//! symbolizer kept for the run (it caches the files it parsed) and a label cache per stack:
//! the naming stays on the sampler's side and costs at most one pass a second, and only
//! when the dashboard asks.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::symbols::{Mapping, Names, RawStack};

/// Lines per list.
pub const LIVE_TOP: usize = 8;
/// A second is summed up this long after it ended: the ring buffers of its last tick have
/// been read by then (the run drains them every tick, ~100 ms).
pub const SETTLE_NS: u64 = 300_000_000;
/// Summaries kept, so the last slow second can still be shown a while after it.
const KEEP_SECONDS: usize = 600;

/// One line of the view: a frame or a wait, and its share.
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    /// `leaf ← caller`, or `syscall (state)`.
    pub what: String,
    /// Of the second's on-CPU samples, or of its threads' time (0..=1).
    pub share: f64,
}

/// One second of the run, from inside the server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SecondInside {
    /// Which second of the run (0 is the first).
    pub second: u32,
    /// The target's on-CPU samples in it.
    pub samples: u64,
    /// The most sampled frames (leaf ← caller), shares of `samples`.
    pub on_cpu: Vec<Share>,
    /// The ways its threads were off CPU, shares of their time in the second; `None` when
    /// off-CPU time is not seen.
    pub off_cpu: Option<Vec<Share>>,
}

/// What the dashboard shows in "Server inside".
#[derive(Debug, Clone, PartialEq)]
pub enum LiveInside {
    /// Nothing is sampled, and why.
    Unavailable(String),
    /// The samplers run.
    Sampling {
        /// Where off-CPU time comes from (`None`: not seen).
        off_cpu_source: Option<String>,
        /// The last second summed up (`None` before the first is over).
        last: Option<SecondInside>,
        /// The last slow second summed up (`None` when there was none yet).
        last_slow: Option<SecondInside>,
    },
}

/// The `LIVE_TOP` largest of `items` summed by label, as shares of `total`, most first.
pub(crate) fn top_shares(items: impl IntoIterator<Item = (String, u64)>, total: u64) -> Vec<Share> {
    let mut by: HashMap<String, u64> = HashMap::new();
    for (what, n) in items {
        *by.entry(what).or_insert(0) += n;
    }
    let mut list: Vec<(String, u64)> = by.into_iter().filter(|(_, n)| *n > 0).collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list.truncate(LIVE_TOP);
    list.into_iter()
        .map(|(what, n)| Share {
            what,
            share: if total == 0 {
                0.0
            } else {
                n as f64 / total as f64
            },
        })
        .collect()
}

/// A wait's label: the system call and the state, or the kernel function waited in when
/// the thread was in no system call the sampler could name.
pub(crate) fn wait_label(syscall: &str, state: &str, kernel_leaf: Option<&str>) -> String {
    match (syscall, kernel_leaf) {
        ("none" | "n/a" | "", Some(k)) => format!("{} ({state})", k.trim_end_matches("_[k]")),
        _ => format!("{syscall} ({state})"),
    }
}

/// The innermost two frames of `raw`: the leaf and its caller, kernel frames first.
fn innermost(raw: &RawStack) -> RawStack {
    let kernel: Vec<u64> = raw.kernel.iter().take(2).copied().collect();
    let user: Vec<u64> = raw.user.iter().take(2 - kernel.len()).copied().collect();
    RawStack {
        pid: raw.pid,
        kernel: kernel.into(),
        user: user.into(),
    }
}

/// The live side of a session: the symbolizer, the labels named so far, the summaries.
pub(crate) struct Live {
    symbolizer: blazesym::symbolize::Symbolizer,
    /// Raw stack id → `leaf ← caller`.
    on_labels: HashMap<u32, String>,
    /// Off-CPU way (sched_switch) → `syscall (state)`.
    off_labels: HashMap<u32, String>,
    seconds: BTreeMap<u32, SecondInside>,
    /// The next second to sum up.
    pub(crate) next: u32,
}

impl Live {
    pub(crate) fn new() -> Live {
        Live {
            symbolizer: blazesym::symbolize::Symbolizer::new(),
            on_labels: HashMap::new(),
            off_labels: HashMap::new(),
            seconds: BTreeMap::new(),
            next: 0,
        }
    }

    /// Names the frames of `cut` (one symbolizer pass for all of them).
    fn name(&self, cut: &[RawStack], maps: &HashMap<u32, Vec<Mapping>>) -> Names {
        // What cannot be named is module+offset here; the end of the run says why.
        let mut ignored = Vec::new();
        Names::resolve_with(&self.symbolizer, cut, maps, &mut ignored)
    }

    /// `leaf ← caller` of each on-CPU stack of `counts` (stack id, samples), most first.
    pub(crate) fn on_cpu(
        &mut self,
        counts: &[(u32, u64)],
        stacks: &[RawStack],
        maps: &HashMap<u32, Vec<Mapping>>,
    ) -> Vec<Share> {
        let total: u64 = counts.iter().map(|c| c.1).sum();
        let mut sorted = counts.to_vec();
        sorted.sort_by_key(|c| std::cmp::Reverse(c.1));
        // The stacks that can make the top lines; the tail would cost names for nothing.
        sorted.truncate(LIVE_TOP * 4);
        let new: Vec<u32> = sorted
            .iter()
            .map(|c| c.0)
            .filter(|id| !self.on_labels.contains_key(id))
            .collect();
        if !new.is_empty() {
            let cut: Vec<RawStack> = new
                .iter()
                .map(|&id| innermost(&stacks[id as usize]))
                .collect();
            let names = self.name(&cut, maps);
            for (id, raw) in new.into_iter().zip(&cut) {
                let frames = names.frames(raw);
                let label = match frames.as_slice() {
                    [] => "[no frame]".to_string(),
                    [leaf] => leaf.clone(),
                    [leaf, caller, ..] => format!("{leaf} ← {caller}"),
                };
                self.on_labels.insert(id, label);
            }
        }
        top_shares(
            sorted
                .iter()
                .map(|&(id, n)| (self.on_labels[&id].clone(), n)),
            total,
        )
    }

    /// `syscall (state)` of each sched_switch way of `wall` (way, µs), as shares of
    /// `watched_us`; `way_of` gives a way's state and stack.
    pub(crate) fn off_cpu_switches(
        &mut self,
        wall: &[(u32, u64)],
        watched_us: u64,
        way_of: impl Fn(u32) -> (char, u32),
        stacks: &[RawStack],
        maps: &HashMap<u32, Vec<Mapping>>,
    ) -> Vec<Share> {
        let new: BTreeSet<u32> = wall
            .iter()
            .map(|w| w.0)
            .filter(|w| !self.off_labels.contains_key(w))
            .collect();
        if !new.is_empty() {
            // The system call is the outermost kernel frame: the user stack is not needed.
            let cut: Vec<(u32, char, RawStack)> = new
                .into_iter()
                .map(|way| {
                    let (state, stack) = way_of(way);
                    let raw = &stacks[stack as usize];
                    let kernel = RawStack {
                        pid: raw.pid,
                        kernel: raw.kernel.clone(),
                        user: Box::new([]),
                    };
                    (way, state, kernel)
                })
                .collect();
            let raws: Vec<RawStack> = cut.iter().map(|c| c.2.clone()).collect();
            let names = self.name(&raws, maps);
            for (way, state, raw) in cut {
                let frames = names.frames(&raw);
                let label = wait_label(
                    &super::syscall_of(&frames),
                    &state.to_string(),
                    frames.first().map(String::as_str),
                );
                self.off_labels.insert(way, label);
            }
        }
        top_shares(
            wall.iter()
                .map(|&(way, us)| (self.off_labels[&way].clone(), us)),
            watched_us,
        )
    }

    /// Keeps the summary of a second.
    pub(crate) fn keep(&mut self, second: SecondInside) {
        self.seconds.insert(second.second, second);
        while self.seconds.len() > KEEP_SECONDS {
            self.seconds.pop_first();
        }
    }

    /// The last second summed up, and the last of `slow` that was.
    pub(crate) fn view(&self, off_cpu_source: Option<String>, slow: &BTreeSet<u32>) -> LiveInside {
        LiveInside::Sampling {
            off_cpu_source,
            last: self.seconds.last_key_value().map(|(_, s)| s.clone()),
            last_slow: slow.iter().rev().find_map(|s| self.seconds.get(s)).cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_summed_by_label_and_the_largest_come_first() {
        let top = top_shares(
            [
                ("burn ← handle".to_string(), 30),
                ("read ← loop".to_string(), 10),
                ("burn ← handle".to_string(), 30),
                ("idle".to_string(), 0),
            ],
            80,
        );
        assert_eq!(
            top,
            vec![
                Share {
                    what: "burn ← handle".into(),
                    share: 0.75
                },
                Share {
                    what: "read ← loop".into(),
                    share: 0.125
                },
            ]
        );
        let many = top_shares((0..9).map(|i| (format!("f{i}"), 1 + i)), 45);
        assert_eq!(many.len(), LIVE_TOP);
        assert_eq!(many[0].what, "f8");
        assert!(top_shares([("x".to_string(), 3)], 0)[0].share == 0.0);
    }

    #[test]
    fn a_wait_outside_a_system_call_is_named_by_its_kernel_function() {
        assert_eq!(
            wait_label("futex", "S", Some("futex_wait_[k]")),
            "futex (S)"
        );
        assert_eq!(
            wait_label("none", "D", Some("io_schedule_[k]")),
            "io_schedule (D)"
        );
        assert_eq!(wait_label("n/a", "S", None), "n/a (S)");
    }

    #[test]
    fn the_last_slow_second_is_the_latest_kept() {
        let mut live = Live::new();
        for s in 0..5 {
            live.keep(SecondInside {
                second: s,
                samples: u64::from(s),
                ..SecondInside::default()
            });
        }
        let LiveInside::Sampling {
            last, last_slow, ..
        } = live.view(None, &BTreeSet::from([1, 3, 9]))
        else {
            panic!("sampling")
        };
        assert_eq!(last.map(|s| s.second), Some(4));
        // 9 is not summed up yet: the last slow second shown is 3.
        assert_eq!(last_slow.map(|s| s.second), Some(3));
    }
}
