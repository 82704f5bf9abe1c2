//! One volume's aggregated failures ([`VolumeState`]) and the kubelet's backoff limits: what
//! `evaluate` decides on and `text` words, in a home of their own.

use plugin::{fmt_duration, Status};
use std::time::Duration;

/// The kubelet's maximum durationBeforeRetry: 2m2s (2m0s in old releases).
pub const MAX_BACKOFF_MS: u64 = 122_000;
/// A backoff this long counts as "at the maximum" (covers the old 2m0s cap).
pub(crate) const AT_MAX_MS: u64 = 120_000;

/// One volume's failures, aggregated.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeState {
    pub volume: String,
    pub pv: Option<String>,
    pub ops: Vec<String>,
    pub pods: Vec<String>,
    pub failures_in_window: usize,
    pub first_in_window: i64,
    pub last: i64,
    pub backoff_ms: u64,
    /// Start of the current run of failures (gaps no longer than backoff + grace).
    pub streak_start: i64,
    /// The run's start is its first failure (else it began before the first line read: "at
    /// least").
    pub start_known: bool,
    /// Still failing now: the last failure is within its backoff + grace.
    pub active: bool,
    pub error: String,
    pub status: Status,
}

impl VolumeState {
    pub fn failing_for_ms(&self) -> i64 {
        self.last - self.streak_start
    }
    pub fn label(&self) -> &str {
        self.pv.as_deref().unwrap_or(&self.volume)
    }
    /// `12m13s`, or `at least 12m13s` when the run began before the lines read.
    pub fn failing_for(&self) -> String {
        let d = fmt_duration(secs(self.failing_for_ms()));
        if self.start_known {
            d
        } else {
            format!("at least {d}")
        }
    }
    /// At the kubelet's maximum backoff, and still failing.
    pub fn at_max_backoff(&self) -> bool {
        self.backoff_ms >= AT_MAX_MS && self.active
    }

    /// What the finding is about: the PV, the CSI driver of the kubelet's unique volume name
    /// (`kubernetes.io/csi/<driver>^<handle>`), and the pod when exactly one is involved.
    pub fn subject(&self) -> plugin::Subject {
        let driver = self
            .volume
            .strip_prefix("kubernetes.io/csi/")
            .and_then(|r| r.split_once('^'))
            .map(|(d, _)| d);
        let pod = match self.pods.as_slice() {
            [p] => Some(p.as_str()),
            _ => None,
        };
        plugin::Subject::new()
            .maybe(plugin::Subject::pv, self.pv.as_deref())
            .maybe(plugin::Subject::driver, driver)
            .maybe(plugin::Subject::pod, pod)
    }
}

pub(crate) fn secs(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}
