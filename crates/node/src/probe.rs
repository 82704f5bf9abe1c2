//! Bounded-time probes of mount points.
//!
//! `stat`, `statfs` or `readdir` on a dead NFS/FUSE/iSCSI mount can block forever. Probes run on
//! a small pool of threads; a probe that does not answer within its time is reported as hung and
//! its thread is abandoned (a replacement takes its place), so twenty hung mounts cost one probe
//! timeout, not twenty. An abandoned thread cannot hold the plugin's answer hostage: the plugin
//! runtime (`plugin::main`) runs every check in a worker process whose stdout is /dev/null and
//! which the answering process kills and leaves behind at the deadline.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

pub use nix::errno::Errno;

/// Which syscall a probe was in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Stat,
    Statfs,
    Open,
    Readdir,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Stat => "stat",
            Stage::Statfs => "statfs",
            Stage::Open => "open",
            Stage::Readdir => "readdir",
        }
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every syscall answered.
    Answered { is_dir: bool },
    /// A syscall failed with this errno.
    Failed {
        stage: Stage,
        errno: nix::errno::Errno,
    },
    /// No answer within the probe's time.
    Hung { after: Duration },
    /// The probe itself could not run (fork or pipe failed, child died).
    ProbeError(String),
}

impl Outcome {
    /// Kubernetes' mount-utils treats these errnos as a corrupted mount (IsCorruptedMnt).
    pub fn is_corrupted(&self) -> bool {
        use nix::errno::Errno::*;
        matches!(self, Outcome::Failed { errno, .. } if matches!(errno, ENOTCONN | ESTALE | EIO | EACCES | EHOSTDOWN))
    }

    /// Short text for output: `ok`, `stat: ENOTCONN (Transport endpoint is not connected)`,
    /// `no answer in 3s`.
    pub fn describe(&self) -> String {
        match self {
            Outcome::Answered { .. } => "answers".into(),
            Outcome::Failed { stage, errno } => {
                format!("{}: {:?} ({})", stage.name(), errno, errno.desc())
            }
            Outcome::Hung { after } => format!("no answer in {}", plugin::fmt_duration(*after)),
            Outcome::ProbeError(e) => format!("probe failed: {e}"),
        }
    }
}

/// Probe one path.
pub fn probe(path: &Path, timeout: Duration) -> Outcome {
    probe_many(&[path.to_path_buf()], timeout, 1)
        .pop()
        .unwrap_or(Outcome::ProbeError("no result".into()))
}

enum Msg {
    Started(usize, Instant),
    Done(usize, Outcome),
}

struct Pool {
    paths: Arc<Vec<PathBuf>>,
    next: Arc<Mutex<usize>>,
    tx: mpsc::Sender<Msg>,
}

impl Pool {
    fn spawn_worker(&self) -> bool {
        let paths = Arc::clone(&self.paths);
        let next = Arc::clone(&self.next);
        let tx = self.tx.clone();
        std::thread::Builder::new()
            .name("probe".into())
            .stack_size(64 * 1024)
            .spawn(move || loop {
                let idx = {
                    let Ok(mut n) = next.lock() else { return };
                    if *n >= paths.len() {
                        return;
                    }
                    *n += 1;
                    *n - 1
                };
                if tx.send(Msg::Started(idx, Instant::now())).is_err() {
                    return;
                }
                let out = probe_now(&paths[idx]);
                if tx.send(Msg::Done(idx, out)).is_err() {
                    return;
                }
            })
            .is_ok()
    }
}

/// Probe many paths concurrently on at most `parallel` threads, each probe bounded by `timeout`.
/// Results are in the order of `paths`. A hung probe's thread is replaced, so total wall time is
/// about `timeout` × ⌈hung / parallel⌉ plus the work of the ones that answer.
pub fn probe_many(paths: &[PathBuf], timeout: Duration, parallel: usize) -> Vec<Outcome> {
    let n = paths.len();
    if n == 0 {
        return Vec::new();
    }
    let (tx, rx) = mpsc::channel();
    let pool = Pool {
        paths: Arc::new(paths.to_vec()),
        next: Arc::new(Mutex::new(0)),
        tx,
    };
    let mut results: Vec<Option<Outcome>> = vec![None; n];
    for _ in 0..parallel.clamp(1, n) {
        if !pool.spawn_worker() {
            break;
        }
    }
    let mut in_flight: HashMap<usize, Instant> = HashMap::new();
    let mut left = n;
    while left > 0 {
        let now = Instant::now();
        let wait = in_flight
            .values()
            .map(|s| (*s + timeout).saturating_duration_since(now))
            .min()
            .unwrap_or(timeout);
        match rx.recv_timeout(wait) {
            Ok(Msg::Started(i, at)) => {
                in_flight.insert(i, at);
            }
            Ok(Msg::Done(i, out)) => {
                if in_flight.remove(&i).is_some() && results[i].is_none() {
                    results[i] = Some(out);
                    left -= 1;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if in_flight.is_empty() {
                    // A whole probe period with nothing in flight: no worker is left to take
                    // the remaining paths (threads could not be started).
                    break;
                }
                let now = Instant::now();
                let hung: Vec<usize> = in_flight
                    .iter()
                    .filter(|(_, s)| now >= **s + timeout)
                    .map(|(i, _)| *i)
                    .collect();
                for i in hung {
                    in_flight.remove(&i);
                    results[i] = Some(Outcome::Hung { after: timeout });
                    left -= 1;
                    // The stuck thread is abandoned; another takes its place in the pool.
                    pool.spawn_worker();
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Outcome::ProbeError("no result".into())))
        .collect()
}

/// stat, statfs, and for a directory open + one readdir: what a pod's first touch of its volume does.
fn probe_now(path: &Path) -> Outcome {
    let fail = |stage, e: std::io::Error| Outcome::Failed {
        stage,
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return fail(Stage::Stat, e),
    };
    if let Err(e) = nix::sys::statfs::statfs(path) {
        return Outcome::Failed {
            stage: Stage::Statfs,
            errno: e,
        };
    }
    if meta.is_dir() {
        let mut rd = match std::fs::read_dir(path) {
            Ok(r) => r,
            Err(e) => return fail(Stage::Open, e),
        };
        if let Some(Err(e)) = rd.next() {
            return fail(Stage::Readdir, e);
        }
    }
    Outcome::Answered {
        is_dir: meta.is_dir(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_on_a_live_directory() {
        let out = probe(Path::new("/"), Duration::from_secs(5));
        assert!(
            matches!(out, Outcome::Answered { is_dir: true, .. }),
            "{out:?}"
        );
    }

    #[test]
    fn missing_path_is_enoent_at_stat() {
        let out = probe(
            Path::new("/nonexistent/k8s-storage-checks"),
            Duration::from_secs(5),
        );
        assert_eq!(
            out,
            Outcome::Failed {
                stage: Stage::Stat,
                errno: nix::errno::Errno::ENOENT
            }
        );
        assert!(!out.is_corrupted());
        assert!(out.describe().starts_with("stat: ENOENT"));
    }

    #[test]
    fn many_probes_keep_their_order() {
        // Real hangs (a stopped FUSE daemon) are exercised end to end in tests/.
        let dir = std::env::temp_dir().join(format!("probe-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let paths = vec![
            dir.clone(),
            PathBuf::from("/nonexistent/x"),
            PathBuf::from("/"),
        ];
        let out = probe_many(&paths, Duration::from_secs(5), 2);
        assert_eq!(out.len(), 3);
        assert!(matches!(out[0], Outcome::Answered { .. }));
        assert!(matches!(out[1], Outcome::Failed { .. }));
        assert!(matches!(out[2], Outcome::Answered { .. }));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupted_set_matches_mount_utils() {
        use nix::errno::Errno::*;
        for e in [ENOTCONN, ESTALE, EIO, EACCES, EHOSTDOWN] {
            assert!(Outcome::Failed {
                stage: Stage::Stat,
                errno: e
            }
            .is_corrupted());
        }
        assert!(!Outcome::Failed {
            stage: Stage::Stat,
            errno: ENOENT
        }
        .is_corrupted());
        assert!(!Outcome::Hung {
            after: Duration::from_secs(3)
        }
        .is_corrupted());
    }
}
