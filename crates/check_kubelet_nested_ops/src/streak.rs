//! A volume's run of failures, known from every line ever read (this run's and, kept in the
//! state, earlier runs'): what tells a failure's true age past the window and log rotation.

use crate::parse::Failure;
use node::logs::state;
use std::collections::BTreeMap;

/// A gap between two failures of a volume longer than its backoff plus this ends a streak.
pub(crate) const STREAK_GRACE_MS: i64 = 180_000;

/// The `durationBeforeRetry` of an operation's first failure (pkg/util/goroutinemap/
/// exponentialbackoff `initialDurationBeforeRetry`): a run that starts with it starts there.
pub const INITIAL_BACKOFF_MS: u64 = 500;

/// One volume's run of failures: gaps no longer than the backoff + grace.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Streak {
    pub volume: String,
    /// The first failure seen of the run, and its backoff.
    pub start: i64,
    pub start_backoff_ms: u64,
    /// The last failure seen of the run, and its backoff.
    pub last: i64,
    pub last_backoff_ms: u64,
}

impl Streak {
    fn of(f: &Failure) -> Streak {
        Streak {
            volume: f.volume.clone(),
            start: f.t,
            start_backoff_ms: f.backoff_ms,
            last: f.t,
            last_backoff_ms: f.backoff_ms,
        }
    }
    /// A failure at `t` continues this run.
    pub(crate) fn reaches(&self, t: i64) -> bool {
        t <= self.last + self.last_backoff_ms as i64 + STREAK_GRACE_MS
    }
    /// The run is known from its first failure (the kubelet's first backoff), not from where the
    /// lines read begin.
    pub fn start_known(&self) -> bool {
        self.start_backoff_ms <= INITIAL_BACKOFF_MS
    }
}

/// Extend the runs of `prev` with `failures` (any order): per volume, the run in progress at its
/// latest failure (pure). Runs that ended before `since` are dropped.
pub fn streaks(prev: &[Streak], failures: &[Failure], since: i64, now: i64) -> Vec<Streak> {
    let mut by: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        if !state::from_future(f.t, now) {
            by.entry(f.volume.as_str()).or_default().push(f);
        }
    }
    let mut out: BTreeMap<String, Streak> = prev
        .iter()
        .filter(|s| !state::from_future(s.last, now))
        .map(|s| (s.volume.clone(), s.clone()))
        .collect();
    for (vol, mut evs) in by {
        evs.sort_by_key(|f| f.t);
        let mut cur = out.remove(vol);
        for f in evs {
            cur = Some(match cur {
                Some(mut s) if f.t >= s.start && s.reaches(f.t) => {
                    if f.t > s.last {
                        s.last = f.t;
                        s.last_backoff_ms = f.backoff_ms;
                    }
                    s
                }
                // Earlier than the run's start (lines read out of order, another source):
                // it starts the run earlier when the run reaches back to it.
                Some(mut s)
                    if f.t < s.start && f.t + f.backoff_ms as i64 + STREAK_GRACE_MS >= s.start =>
                {
                    s.start = f.t;
                    s.start_backoff_ms = f.backoff_ms;
                    s
                }
                Some(s) if f.t < s.start => s,
                _ => Streak::of(f),
            });
        }
        if let Some(s) = cur {
            out.insert(vol.to_string(), s);
        }
    }
    out.into_values()
        .filter(|s| s.last + s.last_backoff_ms as i64 + STREAK_GRACE_MS >= since)
        .collect()
}
