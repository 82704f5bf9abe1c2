//! Decide (pure): the gathered failures of each volume aggregated, its state judged from its run
//! of failures, the report built; unit tests feed it in-memory data.

use crate::gather::{Data, SourceInfo};
use crate::parse::{self, Failure};
use crate::streak::{Streak, INITIAL_BACKOFF_MS, STREAK_GRACE_MS};
use crate::text;
use crate::volume::{secs, VolumeState, AT_MAX_MS};
use node::logs::state;
use plugin::{fmt_duration, Finding, Perfdata, Report, Status, Thresholds, Uom};
use std::collections::BTreeMap;

/// How failures are judged, from the options.
#[derive(Debug, Clone)]
pub struct Policy {
    pub window_ms: i64,
    pub stuck_ms: i64,
    /// -w/-c on the number of failing volumes: when either is given, they decide instead of the
    /// per-volume rules.
    pub thresholds: Thresholds,
}

impl Policy {
    /// How far back failures matter: the window, or longer when --stuck is longer.
    pub fn lookback_ms(&self) -> i64 {
        self.window_ms.max(self.stuck_ms)
    }
    fn overridden(&self) -> bool {
        self.thresholds.warning.is_some() || self.thresholds.critical.is_some()
    }
}

/// Aggregate failures per volume (pure); `known` runs (from every line read, and kept across
/// runs) carry a run's start past the lookback.
pub fn volumes(
    failures: &[Failure],
    known: &[Streak],
    policy: &Policy,
    now: i64,
) -> Vec<VolumeState> {
    let lookback = policy.lookback_ms();
    let mut by: BTreeMap<&str, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        // Ignore what is older than the lookback and what claims to be far in the future
        // (evaluate notes the latter).
        if f.t < now - lookback || state::from_future(f.t, now) {
            continue;
        }
        by.entry(f.volume.as_str()).or_default().push(f);
    }
    let mut out: Vec<VolumeState> = by
        .into_iter()
        .filter_map(|(vol, evs)| volume(vol, evs, known, policy, now))
        .collect();
    // Worst and longest first.
    out.sort_by_key(|v| (std::cmp::Reverse(v.status.rank()), -v.failing_for_ms()));
    out
}

/// One volume's state from its failures of the lookback; `None` when none is in the window.
fn volume(
    vol: &str,
    mut evs: Vec<&Failure>,
    known: &[Streak],
    policy: &Policy,
    now: i64,
) -> Option<VolumeState> {
    evs.sort_by_key(|f| f.t);
    evs.dedup_by(|a, b| a == b);
    let in_window: Vec<&Failure> = evs
        .iter()
        .copied()
        .filter(|f| f.t >= now - policy.window_ms)
        .collect();
    let first_in_window = in_window.first()?.t;
    let (streak_start, start_backoff) = run_start(vol, &evs, known);
    let last = *evs.last().expect("non-empty");
    let active = now - last.t <= last.backoff_ms as i64 + STREAK_GRACE_MS;
    let mut ops: Vec<String> = Vec::new();
    let mut pods: Vec<String> = Vec::new();
    for f in &in_window {
        if !ops.contains(&f.op) {
            ops.push(f.op.clone());
        }
        if let Some(p) = &f.pod {
            if !pods.contains(p) {
                pods.push(p.clone());
            }
        }
    }
    let pv = evs.iter().rev().find_map(|f| f.pv.clone());
    let mut v = VolumeState {
        volume: vol.to_string(),
        pv,
        ops,
        pods,
        failures_in_window: in_window.len(),
        first_in_window,
        last: last.t,
        backoff_ms: last.backoff_ms,
        streak_start,
        start_known: start_backoff <= INITIAL_BACKOFF_MS,
        active,
        error: last.error.clone(),
        status: Status::Warning,
    };
    if active && (v.failing_for_ms() > policy.stuck_ms || v.backoff_ms >= AT_MAX_MS) {
        v.status = Status::Critical;
    }
    Some(v)
}

/// Start of the run of failures in progress at the last one (sorted `evs`), and its backoff: a
/// known run that reaches back past the lines of the lookback began earlier.
fn run_start(vol: &str, evs: &[&Failure], known: &[Streak]) -> (i64, u64) {
    let mut start = evs[0].t;
    let mut backoff = evs[0].backoff_ms;
    for w in evs.windows(2) {
        if w[1].t - w[0].t > w[0].backoff_ms as i64 + STREAK_GRACE_MS {
            start = w[1].t;
            backoff = w[1].backoff_ms;
        }
    }
    for k in known.iter().filter(|k| k.volume == vol) {
        if k.start < start && k.reaches(start) {
            start = k.start;
            backoff = k.start_backoff_ms;
        }
    }
    (start, backoff)
}

/// Decide (pure), at the time the data was gathered.
pub fn evaluate(data: &Data, policy: &Policy) -> Report {
    let now = data.now;
    let mut vols = volumes(&data.failures, &data.streaks, policy, now);
    // The failures of the window that were counted, not kept as records.
    for v in &mut vols {
        if let Some(fo) = data.folded.get(&v.volume) {
            v.failures_in_window += fo.in_window as usize;
            if let Some(t) = fo.first_in_window {
                v.first_in_window = v.first_in_window.min(t);
            }
            for o in &fo.ops {
                if !v.ops.contains(o) {
                    v.ops.push(o.clone());
                }
            }
            for p in &fo.pods {
                if !v.pods.contains(p) {
                    v.pods.push(p.clone());
                }
            }
        }
    }
    // Volumes failing in the window past the cap of volumes kept: counted, at least WARNING.
    let failing = vols.len() as u64 + data.over_cap;
    let status = if policy.overridden() {
        policy.thresholds.evaluate(failing as f64)
    } else {
        let worst = vols.iter().fold(Status::Ok, |a, v| a.worst(v.status));
        if data.over_cap > 0 {
            worst.worst(Status::Warning)
        } else {
            worst
        }
    };
    let window = fmt_duration(secs(policy.window_ms));
    let mut report =
        Report::new(status, text::summary(&vols, data.over_cap, &window)).unit("volume", "volumes");
    if data.over_cap > 0 {
        report = report.note(text::over_cap_note(data.over_cap));
    }
    let future = data
        .failures
        .iter()
        .filter(|f| state::from_future(f.t, now))
        .count();
    if future > 0 {
        report = report.note(text::future_note(future));
    }
    let incomplete: Vec<&str> = data
        .sources
        .iter()
        .filter(|s| !s.complete)
        .map(|s| s.name.as_str())
        .collect();
    if !incomplete.is_empty() {
        report = report.note(text::deadline_note(&incomplete));
        if vols.is_empty() && data.over_cap == 0 {
            report.status = Status::Unknown;
            report.summary = text::deadline_summary(&incomplete);
        }
    }
    // No OK on nothing: a source that gave nothing at all checked nothing.
    let empty: Vec<&str> = data
        .sources
        .iter()
        .filter(|s| s.empty)
        .map(|s| s.name.as_str())
        .collect();
    if !empty.is_empty() && report.status == Status::Ok {
        report.status = Status::Unknown;
        report.summary = text::empty_summary(&empty);
    }
    for v in &vols {
        // Under -w/-c the volumes are listed at most as bad as the answer.
        let st = if policy.overridden() {
            v.status.min_rank(status)
        } else {
            v.status
        };
        report = report.finding(volume_finding(v, st, &window));
    }
    for s in &data.sources {
        report = report.finding(source_finding(s));
        for n in &s.notes {
            report = report.note(n.clone());
        }
    }
    perfdata(report, &vols, failing, &policy.thresholds)
}

fn volume_finding(v: &VolumeState, status: Status, window: &str) -> Finding {
    let f = Finding::new(status, text::volume(v, window))
        .signal(if v.status == Status::Critical {
            "volume_op_stuck"
        } else {
            "volume_op_failing"
        })
        .subject(v.subject())
        .detail(format!("error: {}", parse::shorten(&v.error, 600)));
    if v.pv.is_some() {
        f.detail(format!("volume {}", v.volume))
    } else {
        f
    }
}

fn source_finding(s: &SourceInfo) -> Finding {
    Finding::new(Status::Ok, text::source(s)).signal("log_source_read")
}

fn perfdata(report: Report, vols: &[VolumeState], failing: u64, t: &Thresholds) -> Report {
    let failed_ops: usize = vols.iter().map(|v| v.failures_in_window).sum();
    let max_backoff = vols.iter().map(|v| v.backoff_ms).max().unwrap_or(0);
    let longest = vols.iter().map(|v| v.failing_for_ms()).max().unwrap_or(0);
    report
        .perf(Perfdata::new("failed_operations", failed_ops as f64).min(0.0))
        .perf(
            Perfdata::new("failing_volumes", failing as f64)
                .thresholds(t)
                .min(0.0),
        )
        .perf(
            Perfdata::new("max_backoff", max_backoff as f64 / 1000.0)
                .uom(Uom::Seconds)
                .min(0.0),
        )
        .perf(
            Perfdata::new("longest_failing", longest.max(0) as f64 / 1000.0)
                .uom(Uom::Seconds)
                .min(0.0),
        )
}
