//! Bounded memory whatever the log holds (issue 27, finding 3): the failures read are streamed
//! into per-volume aggregates instead of being kept as records.
//!
//! - every failure extends its volume's run ([`streaks`]), folded in batches, then the record is
//!   dropped unless it is one of the volume's [`PER_VOLUME`] newest of the lookback;
//! - an older failure of the window that makes room is counted in the volume's [`Folded`]
//!   (count, first time, operations, pods), so the answer's counts stay exact;
//! - at most [`MAX_VOLUMES`] volumes are kept; a volume past the cap failing in the window is
//!   counted exactly (by a 64-bit hash of its name) and reported as "and N more volumes".

use crate::parse::Failure;
use crate::streak::{streaks, Streak, STREAK_GRACE_MS};
use node::logs::state;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Volumes kept with their failures and runs; the rest are counted.
pub const MAX_VOLUMES: usize = 5000;
/// Newest failures kept per volume (older ones of the window are counted in [`Folded`]).
pub const PER_VOLUME: usize = 8;
/// Failures read between two folds into the runs.
const BATCH: usize = 4096;
/// Operations and pods named per volume.
const MAX_NAMES: usize = 16;
/// Failures dated in the future kept (only their number is said).
const MAX_FUTURE: usize = 1000;

/// What a volume's failures that were not kept add to the answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Folded {
    /// Failures in the window not kept as records.
    pub in_window: u64,
    pub first_in_window: Option<i64>,
    pub ops: Vec<String>,
    pub pods: Vec<String>,
}

impl Folded {
    fn add(&mut self, f: &Failure) {
        self.in_window += 1;
        self.first_in_window = Some(self.first_in_window.map_or(f.t, |t| t.min(f.t)));
        add_name(&mut self.ops, &f.op);
        if let Some(p) = &f.pod {
            add_name(&mut self.pods, p);
        }
    }

    /// Merge another source's.
    pub fn merge(&mut self, o: &Folded) {
        self.in_window += o.in_window;
        self.first_in_window = match (self.first_in_window, o.first_in_window) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for x in &o.ops {
            add_name(&mut self.ops, x);
        }
        for x in &o.pods {
            add_name(&mut self.pods, x);
        }
    }
}

fn add_name(v: &mut Vec<String>, n: &str) {
    if v.len() < MAX_NAMES && !v.iter().any(|x| x == n) {
        v.push(n.to_string());
    }
}

fn hash(s: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // A fixed-key hasher: the same name gives the same hash in every source of the run.
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(s.as_bytes());
    h.finish()
}

/// The aggregates of one source.
pub struct Acc {
    now: i64,
    since: i64,
    window_start: i64,
    pending: Vec<Failure>,
    runs: Vec<Streak>,
    per: HashMap<String, VecDeque<Failure>>,
    folded: BTreeMap<String, Folded>,
    over: HashSet<u64>,
    future: Vec<Failure>,
    /// Volumes with a run or kept failures (at most [`MAX_VOLUMES`]).
    tracked: HashSet<String>,
    /// Volumes first admitted in the batch being folded.
    batch_volumes: Vec<String>,
    /// The runs were pruned in this batch.
    pruned: bool,
    /// See [`Acc::skip_again`].
    again: HashMap<(i64, String, String, u64), u32>,
}

fn key(f: &Failure) -> (i64, String, String, u64) {
    (f.t, f.volume.clone(), f.op.clone(), f.backoff_ms)
}

/// What an [`Acc`] ends with.
pub struct Aggregated {
    /// The kept failures (each volume's newest of the lookback) and up to [`MAX_FUTURE`] dated
    /// in the future.
    pub failures: Vec<Failure>,
    /// Each kept volume's run, runs that ended before the lookback dropped.
    pub streaks: Vec<Streak>,
    pub folded: BTreeMap<String, Folded>,
    /// Volumes past [`MAX_VOLUMES`] with a failure in the window.
    pub over_cap: u64,
}

impl Acc {
    /// Start from the kept runs of earlier runs.
    pub fn new(prev_runs: &[Streak], now: i64, since: i64, window_start: i64) -> Acc {
        Acc {
            now,
            since,
            window_start,
            pending: Vec::new(),
            runs: prev_runs.to_vec(),
            per: HashMap::new(),
            folded: BTreeMap::new(),
            over: HashSet::new(),
            future: Vec::new(),
            tracked: prev_runs.iter().map(|r| r.volume.clone()).collect(),
            batch_volumes: Vec::new(),
            pruned: false,
            again: HashMap::new(),
        }
    }

    /// Failures read again (a source re-read from its start) that are already pushed: each is
    /// skipped once when it comes again.
    pub fn skip_again(&mut self, kept: &[Failure]) {
        for f in kept {
            *self.again.entry(key(f)).or_default() += 1;
        }
    }

    pub fn push(&mut self, f: Failure) {
        if !self.again.is_empty() {
            if let Some(n) = self.again.get_mut(&key(&f)) {
                *n -= 1;
                if *n == 0 {
                    self.again.remove(&key(&f));
                }
                return;
            }
        }
        self.pending.push(f);
        if self.pending.len() >= BATCH {
            self.fold();
        }
    }

    fn admitted(&mut self, f: &Failure) -> bool {
        if self.tracked.contains(&f.volume) {
            return true;
        }
        if self.tracked.len() >= MAX_VOLUMES && !self.pruned {
            // Full: runs that ended before the lookback make room, once per batch.
            self.pruned = true;
            let since = self.since;
            self.runs
                .retain(|r| r.last + r.last_backoff_ms as i64 + STREAK_GRACE_MS >= since);
            let live: HashSet<&str> = self
                .runs
                .iter()
                .map(|r| r.volume.as_str())
                .chain(self.per.keys().map(String::as_str))
                .chain(self.batch_volumes.iter().map(String::as_str))
                .collect();
            let live: HashSet<String> = live.into_iter().map(str::to_string).collect();
            self.tracked = live;
        }
        if self.tracked.len() < MAX_VOLUMES {
            self.tracked.insert(f.volume.clone());
            self.batch_volumes.push(f.volume.clone());
            return true;
        }
        if f.t >= self.window_start {
            self.over.insert(hash(&f.volume));
        }
        false
    }

    fn fold(&mut self) {
        let batch = std::mem::take(&mut self.pending);
        let mut kept = Vec::with_capacity(batch.len());
        for f in batch {
            if state::from_future(f.t, self.now) {
                if self.future.len() < MAX_FUTURE {
                    self.future.push(f);
                }
                continue;
            }
            if self.admitted(&f) {
                kept.push(f);
            }
        }
        self.batch_volumes.clear();
        self.pruned = false;
        self.runs = streaks(&self.runs, &kept, i64::MIN, self.now);
        for f in kept {
            if f.t < self.since {
                continue;
            }
            let q = self.per.entry(f.volume.clone()).or_default();
            if q.iter().any(|x| *x == f) {
                continue;
            }
            // Mostly in order: from the back.
            let at = q.iter().rposition(|x| x.t <= f.t).map_or(0, |i| i + 1);
            q.insert(at, f);
            if q.len() > PER_VOLUME {
                let old = q.pop_front().expect("non-empty");
                if old.t >= self.window_start {
                    self.folded.entry(old.volume.clone()).or_default().add(&old);
                }
            }
        }
    }

    pub fn finish(mut self) -> Aggregated {
        self.fold();
        let mut failures: Vec<Failure> = self.per.into_values().flatten().collect();
        failures.sort_by_key(|f| f.t);
        failures.extend(self.future);
        let since = self.since;
        let streaks: Vec<Streak> = self
            .runs
            .into_iter()
            .filter(|s| s.last + s.last_backoff_ms as i64 + STREAK_GRACE_MS >= since)
            .collect();
        Aggregated {
            failures,
            streaks,
            folded: self.folded,
            over_cap: self.over.len() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(t: i64, vol: &str) -> Failure {
        Failure {
            t,
            volume: vol.into(),
            pv: None,
            op: "MountDevice".into(),
            pod: Some("p".into()),
            backoff_ms: 2000,
            error: "e".into(),
        }
    }

    /// Counts stay exact while records are bounded.
    #[test]
    fn bounded_with_exact_counts() {
        let now = 10_000_000;
        let mut a = Acc::new(&[], now, now - 900_000, now - 900_000);
        for i in 0..100 {
            a.push(f(now - 100_000 + i, "v1"));
        }
        // Older than the lookback: only the run.
        for i in 0..100 {
            a.push(f(now - 2_000_000 + i * 1000, "v2"));
        }
        for v in 0..(MAX_VOLUMES + 7) {
            a.push(f(now - 50_000, &format!("x{v}")));
        }
        let g = a.finish();
        assert_eq!(
            g.failures.iter().filter(|x| x.volume == "v1").count(),
            PER_VOLUME
        );
        assert_eq!(g.folded["v1"].in_window, 100 - PER_VOLUME as u64);
        assert!(!g.failures.iter().any(|x| x.volume == "v2"));
        // The x volumes past the cap are counted, each once; none is lost.
        let kept_x = g
            .failures
            .iter()
            .filter(|x| x.volume.starts_with('x'))
            .count() as u64;
        assert!(g.over_cap >= 7, "{}", g.over_cap);
        assert_eq!(kept_x + g.over_cap, MAX_VOLUMES as u64 + 7);
    }
}
