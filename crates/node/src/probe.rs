//! Bounded-time probes of mount points.
//!
//! `stat`, `statfs` or `readdir` on a dead NFS/FUSE/iSCSI mount can block forever. Probes run on
//! a small pool of threads; a probe that does not answer within its time is reported as hung and
//! its thread is abandoned (a replacement takes its place), so twenty hung mounts cost one probe
//! timeout, not twenty. An abandoned thread cannot hold the plugin's answer hostage: the plugin
//! runtime (`plugin::main`) runs every check in a worker process whose stdout is /dev/null and
//! which the answering process kills and leaves behind at the deadline.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
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

/// Shared state of one `probe_many` call. Workers claim paths with an atomic counter and record
/// when each probe started; results go into write-once slots (a worker's answer and the
/// collector's "hung" verdict race, the first wins). The collector sleeps until every probe has
/// an outcome or the earliest in-flight probe's time is up: no message per probe.
struct Shared {
    paths: Vec<PathBuf>,
    next: AtomicUsize,
    /// Nanoseconds after `base` (+1) when probe i started; 0 = not started.
    started: Vec<AtomicU64>,
    results: Vec<OnceLock<Outcome>>,
    done: AtomicUsize,
    live_workers: AtomicUsize,
    base: Instant,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Shared {
    fn finish(&self, i: usize, out: Outcome) {
        if self.results[i].set(out).is_ok() {
            let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
            if done == self.paths.len() {
                let _g = self.lock.lock();
                self.wake.notify_all();
            }
        }
    }
}

fn spawn_worker(sh: &Arc<Shared>) -> bool {
    let sh2 = Arc::clone(sh);
    sh.live_workers.fetch_add(1, Ordering::SeqCst);
    let ok = std::thread::Builder::new()
        .name("probe".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            loop {
                let i = sh2.next.fetch_add(1, Ordering::SeqCst);
                if i >= sh2.paths.len() {
                    break;
                }
                let t = sh2.base.elapsed().as_nanos() as u64 + 1;
                sh2.started[i].store(t, Ordering::SeqCst);
                let out = probe_now(&sh2.paths[i]);
                sh2.finish(i, out);
            }
            sh2.live_workers.fetch_sub(1, Ordering::SeqCst);
            let _g = sh2.lock.lock();
            sh2.wake.notify_all();
        })
        .is_ok();
    if !ok {
        sh.live_workers.fetch_sub(1, Ordering::SeqCst);
    }
    ok
}

/// Probe many paths concurrently on at most `parallel` threads, each probe bounded by `timeout`.
/// Results are in the order of `paths`. A hung probe's thread is abandoned and replaced, so total
/// wall time is about `timeout` × ⌈hung / parallel⌉ plus the work of the ones that answer.
pub fn probe_many(paths: &[PathBuf], timeout: Duration, parallel: usize) -> Vec<Outcome> {
    let n = paths.len();
    if n == 0 {
        return Vec::new();
    }
    let sh = Arc::new(Shared {
        paths: paths.to_vec(),
        next: AtomicUsize::new(0),
        started: (0..n).map(|_| AtomicU64::new(0)).collect(),
        results: (0..n).map(|_| OnceLock::new()).collect(),
        done: AtomicUsize::new(0),
        live_workers: AtomicUsize::new(0),
        base: Instant::now(),
        lock: Mutex::new(()),
        wake: Condvar::new(),
    });
    for _ in 0..parallel.clamp(1, n) {
        if !spawn_worker(&sh) {
            break;
        }
    }
    let timeout_ns = timeout.as_nanos() as u64;
    loop {
        if sh.done.load(Ordering::SeqCst) >= n {
            break;
        }
        // Declare the probes whose time is up hung; find the next deadline.
        let now = sh.base.elapsed().as_nanos() as u64 + 1;
        let mut earliest: Option<u64> = None;
        for i in 0..n {
            let st = sh.started[i].load(Ordering::SeqCst);
            if st == 0 || sh.results[i].get().is_some() {
                continue;
            }
            let deadline = st + timeout_ns;
            if now >= deadline {
                if sh.results[i].set(Outcome::Hung { after: timeout }).is_ok() {
                    sh.done.fetch_add(1, Ordering::SeqCst);
                    // The stuck thread is abandoned; another takes its place.
                    spawn_worker(&sh);
                }
            } else {
                earliest = Some(earliest.map_or(deadline, |e: u64| e.min(deadline)));
            }
        }
        if sh.done.load(Ordering::SeqCst) >= n {
            break;
        }
        if sh.live_workers.load(Ordering::SeqCst) == 0 && sh.next.load(Ordering::SeqCst) >= n {
            break; // nobody left to answer (threads could not be started)
        }
        let wait = match earliest {
            Some(d) => Duration::from_nanos(d.saturating_sub(now).max(1_000)),
            None => timeout,
        };
        let guard = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Re-check under the lock: a worker finishing now notifies while holding it.
        if sh.done.load(Ordering::SeqCst) >= n {
            break;
        }
        let _ = sh.wake.wait_timeout(guard, wait);
    }
    (0..n)
        .map(|i| {
            sh.results[i]
                .get()
                .cloned()
                .unwrap_or(Outcome::ProbeError("no result".into()))
        })
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
