//! Each volume's samples across runs, kept in the state directory with the suite's state-file
//! code (`node::logs::state`: atomic, no link followed, a directory others can write refused),
//! and the prediction: a least-squares line over the samples of the window.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// At most this many samples per volume are kept (thinned to one per window / this).
pub const MAX_SAMPLES: usize = 64;

/// At most this many volumes are kept (those of the node now; a node has far fewer PVs).
pub const MAX_VOLUMES: usize = 4096;

/// One measurement of a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// When (epoch ms).
    pub t: i64,
    /// Size in bytes: a resize starts a new history.
    pub total: u64,
    /// Bytes in use, and available to a pod.
    pub used: u64,
    pub avail: u64,
    /// Inodes in use and free (0 and 0 when the filesystem has no inode limit).
    pub iused: u64,
    pub ifree: u64,
}

/// The state file: samples per volume key (the PV name, else the mount source).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    /// When it was written (epoch ms).
    #[serde(default)]
    pub saved_ms: Option<i64>,
    #[serde(default)]
    pub volumes: BTreeMap<String, Vec<Sample>>,
}

impl History {
    /// Drop what a clock set back would make count (samples dated after now), samples older than
    /// the window and those of another size than `now`'s; returns how many samples were dated
    /// after now.
    pub fn prune(&mut self, now: i64, window: Duration) -> usize {
        let oldest = now - window.as_millis() as i64;
        let mut future = 0;
        for v in self.volumes.values_mut() {
            future += node::logs::state::drop_future(v, now, |s| s.t);
            v.retain(|s| s.t >= oldest);
            v.sort_by_key(|s| s.t);
        }
        self.volumes.retain(|_, v| !v.is_empty());
        future
    }

    /// Add this run's samples (`key`, sample) and keep only these volumes: one sample per
    /// window/[`MAX_SAMPLES`] at most (the newest kept one is replaced sooner), at most
    /// [`MAX_SAMPLES`] per volume and [`MAX_VOLUMES`] volumes.
    pub fn record(&mut self, now: &[(String, Sample)], window: Duration, saved_ms: i64) {
        let step = (window.as_millis() as i64 / MAX_SAMPLES as i64).max(1);
        let mut kept: BTreeMap<String, Vec<Sample>> = BTreeMap::new();
        for (key, s) in now.iter().take(MAX_VOLUMES) {
            let mut v = self.volumes.remove(key).unwrap_or_default();
            // A resized (or replaced) volume starts afresh.
            v.retain(|o| o.total == s.total);
            match v.last() {
                // Thinning: keep the older sample, so the spacing stays at least `step`.
                Some(last) if s.t - last.t < step && v.len() >= 2 => {
                    let n = v.len();
                    if s.t - v[n - 2].t < step {
                        v[n - 1] = *s;
                    } else {
                        v.push(*s);
                    }
                }
                _ => v.push(*s),
            }
            if v.len() > MAX_SAMPLES {
                let drop = v.len() - MAX_SAMPLES;
                v.drain(..drop);
            }
            kept.insert(key.clone(), v);
        }
        self.volumes = kept;
        self.saved_ms = Some(saved_ms);
    }
}

/// A prediction of when a quantity reaches its limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fill {
    /// Growth per second (of the fitted line).
    pub per_sec: f64,
    /// Seconds until nothing is left, if it grows.
    pub secs_to_full: Option<f64>,
    /// How long the samples span (s), and how many there are.
    pub span_secs: f64,
    pub samples: usize,
}

/// The least-squares line through `(t ms, used)` points, and when `used` reaches
/// `used_now + left_now` at that rate. `None` with fewer than 3 points or a span under
/// `min_span` (too little history to say).
pub fn fit(points: &[(i64, u64)], left_now: u64, min_span: Duration) -> Option<Fill> {
    if points.len() < 3 {
        return None;
    }
    let t0 = points.iter().map(|p| p.0).min()?;
    let t1 = points.iter().map(|p| p.0).max()?;
    let span = (t1 - t0) as f64 / 1000.0;
    if span <= 0.0 || span < min_span.as_secs_f64() {
        return None;
    }
    let n = points.len() as f64;
    let xs: Vec<f64> = points.iter().map(|p| (p.0 - t0) as f64 / 1000.0).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1 as f64).collect();
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let per_sec = sxy / sxx;
    let secs_to_full = (per_sec > 0.0).then(|| left_now as f64 / per_sec);
    Some(Fill {
        per_sec,
        secs_to_full,
        span_secs: span,
        samples: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn s(t: i64, used: u64) -> Sample {
        Sample {
            t,
            total: 1000,
            used,
            avail: 1000 - used,
            iused: 0,
            ifree: 0,
        }
    }

    #[test]
    fn a_steady_fill_is_predicted() {
        // 10 bytes an hour, 100 left: 10 hours.
        let pts = [(0, 500), (H, 510), (2 * H, 520), (3 * H, 530)];
        let f = fit(&pts, 100, Duration::from_secs(3600)).unwrap();
        assert!((f.per_sec * 3600.0 - 10.0).abs() < 1e-9, "{f:?}");
        assert!((f.secs_to_full.unwrap() - 36_000.0).abs() < 1e-6);
        assert_eq!(f.samples, 4);
        // Shrinking or flat: never full.
        let f = fit(&[(0, 530), (H, 520), (2 * H, 510)], 100, Duration::ZERO).unwrap();
        assert_eq!(f.secs_to_full, None);
        let f = fit(&[(0, 5), (H, 5), (2 * H, 5)], 100, Duration::ZERO).unwrap();
        assert_eq!(f.secs_to_full, None);
        // Too little: fewer than 3 points, or a span under the minimum.
        assert_eq!(fit(&pts[..2], 100, Duration::ZERO), None);
        assert_eq!(fit(&pts, 100, Duration::from_secs(4 * 3600)), None);
        assert_eq!(fit(&[(H, 1), (H, 2), (H, 3)], 100, Duration::ZERO), None);
    }

    #[test]
    fn history_is_bounded_thinned_and_pruned() {
        let w = Duration::from_secs(6 * 3600);
        let mut h = History::default();
        // A run a minute for a day: at most MAX_SAMPLES kept, spaced by about window/64.
        for i in 0..1440i64 {
            let now = i * 60_000;
            h.prune(now, w);
            h.record(&[("pv-a".into(), s(now, 500))], w, now);
        }
        let v = &h.volumes["pv-a"];
        assert!(v.len() <= MAX_SAMPLES && v.len() >= 50, "{}", v.len());
        assert!(v.windows(2).all(|p| p[1].t > p[0].t));
        // A volume no longer on the node is dropped; a resize starts afresh.
        let now = 1440 * 60_000;
        let mut r = s(now, 500);
        r.total = 2000;
        h.record(&[("pv-b".into(), s(now, 1)), ("pv-a".into(), r)], w, now);
        assert_eq!(h.volumes.len(), 2);
        assert_eq!(h.volumes["pv-a"].len(), 1);
        // A clock set back: samples dated after now go.
        let mut h2 = h.clone();
        assert_eq!(h2.prune(now - 3_600_000, w), 2);
        assert!(h2.volumes.is_empty());
        // Old samples go.
        assert_eq!(h.prune(now + 7 * H, w), 0);
        assert!(h.volumes.is_empty());
    }
}
