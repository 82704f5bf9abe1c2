//! Bounded-time probes of mount points.
//!
//! `stat`, `statfs` or `readdir` on a dead NFS/FUSE/iSCSI mount can block forever. Probes run on
//! a small pool of threads; a probe that does not answer within its time is reported as hung and
//! its thread is abandoned (a replacement takes its place), so twenty hung mounts cost one probe
//! timeout, not twenty. An abandoned thread cannot hold the plugin's answer hostage: the plugin
//! runtime (`plugin::main`) runs every check in a worker process whose stdout is /dev/null and
//! which the answering process kills and leaves behind at the deadline.
//!
//! A probe stuck in *uninterruptible* I/O (a block device whose backing store stopped: the task
//! sleeps in D state) cannot be killed by anyone: when the worker exits, that one thread stays
//! until the I/O completes, possibly forever. So that every run does not add one more such task,
//! a stuck probe is remembered ([`Memory`]): a marker in the run directory (default
//! `/run/k8s-storage-checks`), keyed by device and mount point, holding the stuck thread's id, its
//! start time (`/proc/<tid>/stat` field 22, so a reused id is not mistaken for it) and since when.
//! The next run that finds that task alive and still in D state reports the mount as still hung
//! ([`Outcome::StillHung`]) without starting another probe. What remains: the stuck task itself,
//! one per stuck device and mount, until the kernel completes or fails its I/O.

use std::collections::HashSet;
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
    /// Not probed: the probe of an earlier run (task `tid`) is still stuck in the kernel on this
    /// mount, in D state, since `since_ms` (epoch ms).
    StillHung { since_ms: i64, tid: i32 },
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
            Outcome::StillHung { since_ms, tid } => format!(
                "still hung since {} (the probe of an earlier run, task {tid}, is stuck in the kernel in D state; not probed again)",
                crate::fsstate::utc((*since_ms / 1000).max(0) as u64)
            ),
            Outcome::ProbeError(e) => format!("probe failed: {e}"),
        }
    }
}

/// A duration in nanoseconds, saturating (584 years fit).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
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
    /// Thread id of the probe of path i (0 = not started).
    tids: Vec<std::sync::atomic::AtomicI32>,
    results: Vec<OnceLock<Outcome>>,
    /// What `statvfs` said of path i, when it answered.
    spaces: Vec<OnceLock<Space>>,
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
            // The thread's id, asked once: every probe it runs is on this thread.
            let tid = nix::unistd::gettid().as_raw();
            loop {
                let i = sh2.next.fetch_add(1, Ordering::SeqCst);
                if i >= sh2.paths.len() {
                    break;
                }
                sh2.tids[i].store(tid, Ordering::SeqCst);
                let t = nanos(sh2.base.elapsed()) + 1;
                sh2.started[i].store(t, Ordering::SeqCst);
                let out = probe_now(&sh2.paths[i], &sh2.spaces[i]);
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
    probe_many_tids(paths.to_vec(), timeout, parallel).0
}

/// A filesystem's size and use as `statvfs` tells it (the probe's own `statfs` stage), in bytes
/// and inodes: what `df` and `df -i` show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Space {
    /// Size in bytes (`f_blocks × f_frsize`).
    pub total: u64,
    /// Free bytes (`f_bfree`), the root reserve included.
    pub free: u64,
    /// Bytes an unprivileged writer (a pod) may still use (`f_bavail`).
    pub avail: u64,
    /// Inodes (`f_files`); 0 when the filesystem has no inode limit (btrfs, NFS may say so).
    pub files: u64,
    /// Free inodes (`f_ffree`).
    pub files_free: u64,
}

impl Space {
    /// Bytes in use (`total - free`).
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.free)
    }

    /// Inodes in use.
    pub fn files_used(&self) -> u64 {
        self.files.saturating_sub(self.files_free)
    }
}

/// [`probe_many`], also returning the thread id each probe ran on (0: never started) and what
/// `statvfs` said of each path that answered it.
fn probe_many_tids(
    paths: Vec<PathBuf>,
    timeout: Duration,
    parallel: usize,
) -> (Vec<Outcome>, Vec<i32>, Vec<Option<Space>>) {
    let n = paths.len();
    if n == 0 {
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let sh = Arc::new(Shared {
        paths,
        next: AtomicUsize::new(0),
        started: (0..n).map(|_| AtomicU64::new(0)).collect(),
        tids: (0..n)
            .map(|_| std::sync::atomic::AtomicI32::new(0))
            .collect(),
        results: (0..n).map(|_| OnceLock::new()).collect(),
        spaces: (0..n).map(|_| OnceLock::new()).collect(),
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
    let timeout_ns = nanos(timeout);
    loop {
        if sh.done.load(Ordering::SeqCst) >= n {
            break;
        }
        // Declare the probes whose time is up hung; find the next deadline.
        let now = nanos(sh.base.elapsed()) + 1;
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
        let guard = sh
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Re-check under the lock: a worker finishing now notifies while holding it.
        if sh.done.load(Ordering::SeqCst) >= n {
            break;
        }
        let _ = sh.wake.wait_timeout(guard, wait);
    }
    let out = (0..n)
        .map(|i| {
            sh.results[i]
                .get()
                .cloned()
                .unwrap_or(Outcome::ProbeError("no result".into()))
        })
        .collect();
    let tids = sh.tids.iter().map(|t| t.load(Ordering::SeqCst)).collect();
    // Only the space of a probe that answered in time: a late answer is not this run's.
    let spaces = (0..n)
        .map(|i| match sh.results[i].get() {
            Some(Outcome::Answered { .. }) => sh.spaces[i].get().copied(),
            _ => None,
        })
        .collect();
    (out, tids, spaces)
}

/// The run directory where stuck probes are remembered (installed by the role and the package:
/// owned by the agent user, mode 0750, from a tmpfiles.d snippet).
pub const RUN_DIR: &str = "/run/k8s-storage-checks";

/// State letter and start time (clock ticks after boot) of a task, from its `/proc/<id>/stat`
/// text: `pid (comm) S ppid … starttime(22) …`. The command name may hold spaces and `)`.
pub fn parse_stat(text: &str) -> Option<(char, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let mut f = rest.split_ascii_whitespace();
    let state = f.next()?.chars().next()?;
    // Fields 4..=21 come between the state (3) and the start time (22).
    let start = f.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// State and start time of task `tid` of this machine's /proc (any process's thread).
fn task_stat(tid: i32) -> Option<(char, u64)> {
    let t = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    parse_stat(&t)
}

/// A stuck probe, as remembered.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Marker {
    pub device: String,
    pub mount: String,
    pub tid: i32,
    pub start_time: u64,
    pub since_ms: i64,
}

/// Markers of stuck probes in a run directory, written with the state writer (no link followed,
/// a directory others can write refused).
pub struct Memory {
    dir: crate::logs::state::StateDir,
}

impl Memory {
    /// Use `dir` (it must exist: the run directory is installed, not made by a check).
    pub fn open(dir: &Path) -> Result<Memory, String> {
        use crate::logs::state::{DirError, StateDir};
        match StateDir::open(dir, false) {
            Ok(d) => Ok(Memory { dir: d }),
            Err(DirError::Refused(e)) => Err(e),
            Err(DirError::Open(e)) => Err(format!("run directory {e}")),
        }
    }

    /// The marker file of a device and mount point.
    pub fn name(device: &str, mount: &Path) -> String {
        use sha2::Digest;
        let h = sha2::Sha256::digest(mount.as_os_str().as_encoded_bytes());
        let hex: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
        let dev: String = device
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(32)
            .collect();
        format!("stuck-probe.{dev}.{hex}.json")
    }

    /// The stuck probe of an earlier run on this device and mount, if its task is still alive
    /// (same start time) and in D state. A marker whose task ended (or never stuck for good) is
    /// removed.
    pub fn recall(&self, device: &str, mount: &Path) -> Option<Marker> {
        let name = Self::name(device, mount);
        let b = self.dir.read(&name, 64 * 1024).ok()??;
        let m: Marker = match serde_json::from_slice(&b) {
            Ok(m) => m,
            Err(_) => {
                self.dir.remove(&name);
                return None;
            }
        };
        if m.device == device && m.mount == mount.to_string_lossy() {
            if let Some((state, start)) = task_stat(m.tid) {
                if start == m.start_time && state == 'D' {
                    return Some(m);
                }
            }
        }
        self.dir.remove(&name);
        None
    }

    /// The names of the markers there now (`None`: the directory could not be listed): a node
    /// with thousands of volumes and no stuck probe costs one listing, not one `open` per volume.
    fn markers(&self) -> Option<HashSet<String>> {
        std::fs::read_dir(self.dir.path())
            .ok()?
            .map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.as_ref().is_none_or(|n| n.starts_with("stuck-probe.")))
            .collect()
    }

    /// Remember that the probe on thread `tid` of this process is stuck on this device and mount.
    pub fn remember(
        &self,
        device: &str,
        mount: &Path,
        tid: i32,
        since_ms: i64,
    ) -> Result<(), String> {
        let (_, start_time) = task_stat(tid)
            .ok_or_else(|| format!("cannot read /proc/{tid}/stat of the stuck probe"))?;
        let m = Marker {
            device: device.to_string(),
            mount: mount.to_string_lossy().into_owned(),
            tid,
            start_time,
            since_ms,
        };
        let body = serde_json::to_vec(&m).map_err(|e| e.to_string())?;
        self.dir.write(&Self::name(device, mount), &body)
    }
}

/// Probe `(path, device)` targets like [`probe_many`], remembering stuck probes in `memory`: a
/// target whose earlier probe is still stuck in D state is not probed again
/// ([`Outcome::StillHung`]); a probe that hangs now is remembered. Returns notes (a marker that
/// could not be written, no memory at all while a probe hung).
pub fn probe_remembered(
    targets: &[(PathBuf, String)],
    timeout: Duration,
    parallel: usize,
    memory: Result<&Memory, &str>,
) -> (Vec<Outcome>, Vec<String>) {
    let (out, _, notes) = probe_remembered_space(targets, timeout, parallel, memory);
    (out, notes)
}

/// [`probe_remembered`], also returning what `statvfs` said of each target that answered
/// ([`Space`]; `None` for a target that did not answer, failed, or was not probed).
pub fn probe_remembered_space(
    targets: &[(PathBuf, String)],
    timeout: Duration,
    parallel: usize,
    memory: Result<&Memory, &str>,
) -> (Vec<Outcome>, Vec<Option<Space>>, Vec<String>) {
    let mut out: Vec<Option<Outcome>> = vec![None; targets.len()];
    let mut notes = Vec::new();
    if let Ok(mem) = memory {
        // Only the targets with a marker are looked at (all of them if the directory cannot be
        // listed).
        let listed = mem.markers();
        for (i, (path, dev)) in targets.iter().enumerate() {
            if listed
                .as_ref()
                .is_some_and(|l| l.is_empty() || !l.contains(&Memory::name(dev, path)))
            {
                continue;
            }
            if let Some(m) = mem.recall(dev, path) {
                out[i] = Some(Outcome::StillHung {
                    since_ms: m.since_ms,
                    tid: m.tid,
                });
            }
        }
    }
    let todo: Vec<usize> = (0..targets.len()).filter(|&i| out[i].is_none()).collect();
    let paths: Vec<PathBuf> = todo.iter().map(|&i| targets[i].0.clone()).collect();
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    let started = now_ms();
    let (res, tids, got) = probe_many_tids(paths, timeout, parallel);
    let mut spaces: Vec<Option<Space>> = vec![None; targets.len()];
    for (&i, sp) in todo.iter().zip(got) {
        spaces[i] = sp;
    }
    for ((&i, o), tid) in todo.iter().zip(res).zip(tids) {
        if matches!(o, Outcome::Hung { .. }) && tid > 0 {
            let (path, dev) = &targets[i];
            match memory {
                Ok(mem) => {
                    if let Err(e) = mem.remember(dev, path, tid, started) {
                        notes.push(format!(
                            "the stuck probe of {} could not be remembered ({e}): the next run probes it again and may leave one more stuck task",
                            path.display()
                        ));
                    }
                }
                Err(why) => notes.push(format!(
                    "the stuck probe of {} is not remembered ({why}): the next run probes it again and may leave one more stuck task",
                    path.display()
                )),
            }
        }
        out[i] = Some(o);
    }
    (
        out.into_iter()
            .map(|o| o.unwrap_or(Outcome::ProbeError("no result".into())))
            .collect(),
        spaces,
        notes,
    )
}

/// The memory of stuck probes for a check: `--run-dir` when given; else [`RUN_DIR`] on the node
/// itself; none under `--host-root` (another pid namespace's tasks) without `--run-dir`. `Err` says
/// why there is none.
pub fn memory_for(run_dir: Option<&Path>, host_root: Option<&Path>) -> Result<Memory, String> {
    match (run_dir, host_root) {
        (Some(d), _) => Memory::open(d),
        (None, Some(_)) => Err("no --run-dir given under --host-root".into()),
        (None, None) => Memory::open(Path::new(RUN_DIR)),
    }
}

/// stat, statfs, and for a directory open + one readdir: what a pod's first touch of its volume does.
/// The filesystem's size and use are kept in `space` (the `statfs` stage is `statvfs`, which
/// makes the same system call).
fn probe_now(path: &Path, space: &OnceLock<Space>) -> Outcome {
    let fail = |stage, e: std::io::Error| Outcome::Failed {
        stage,
        errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)),
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return fail(Stage::Stat, e),
    };
    match nix::sys::statvfs::statvfs(path) {
        // fsblkcnt_t and c_ulong are u64 here, u32 on 32-bit targets.
        #[allow(clippy::useless_conversion)]
        Ok(v) => {
            let frsize = u64::from(v.fragment_size());
            let _ = space.set(Space {
                total: u64::from(v.blocks()).saturating_mul(frsize),
                free: u64::from(v.blocks_free()).saturating_mul(frsize),
                avail: u64::from(v.blocks_available()).saturating_mul(frsize),
                files: u64::from(v.files()),
                files_free: u64::from(v.files_free()),
            });
        }
        Err(e) => {
            return Outcome::Failed {
                stage: Stage::Statfs,
                errno: e,
            };
        }
    }
    if meta.is_dir() {
        if let Err((stage, errno)) = open_and_read_once(path) {
            return Outcome::Failed { stage, errno };
        }
    }
    Outcome::Answered {
        is_dir: meta.is_dir(),
    }
}

/// `open(O_DIRECTORY)`, one `getdents64` into a buffer on the stack, `close`: what a pod's first
/// listing of its volume does, with no allocation and no `fcntl` (a `DIR` stream sets
/// close-on-exec again and allocates its buffer; thousands of probe threads' allocations
/// contended on the allocator's lock).
fn open_and_read_once(path: &Path) -> Result<(), (Stage, Errno)> {
    use nix::fcntl::{openat, OFlag, AT_FDCWD};
    use nix::sys::stat::Mode;
    use std::os::fd::AsRawFd;
    // openat, not open: musl's open() follows O_CLOEXEC with an fcntl(F_SETFD) for kernels older
    // than 2.6.23; its openat() is the system call alone.
    let dir = openat(
        AT_FDCWD,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| (Stage::Open, e))?;
    let mut buf = [0u8; 2048];
    // SAFETY: the descriptor is open (owned by `dir` until the end of this function) and `buf`
    // is writable for its length.
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err((Stage::Readdir, Errno::last()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answering_probe_keeps_the_filesystems_space() {
        let t = [(PathBuf::from("/"), "root".to_string())];
        let (out, spaces, notes) =
            probe_remembered_space(&t, Duration::from_secs(5), 1, Err("none in tests"));
        assert!(matches!(out[0], Outcome::Answered { .. }), "{out:?}");
        assert!(notes.is_empty(), "{notes:?}");
        let s = spaces[0].expect("statvfs of /");
        assert!(
            s.total > 0 && s.used() <= s.total && s.avail <= s.free,
            "{s:?}"
        );
        // A path that fails keeps none.
        let t = [(PathBuf::from("/nonexistent/x"), "none".to_string())];
        let (_, spaces, _) = probe_remembered_space(&t, Duration::from_secs(5), 1, Err("-"));
        assert_eq!(spaces, vec![None]);
    }

    #[test]
    fn the_listing_stage_opens_a_directory_and_reads_it_once() {
        assert_eq!(open_and_read_once(Path::new("/")), Ok(()));
        assert_eq!(
            open_and_read_once(Path::new("/proc/self/status")),
            Err((Stage::Open, Errno::ENOTDIR))
        );
        assert_eq!(
            open_and_read_once(Path::new("/nonexistent/x")),
            Err((Stage::Open, Errno::ENOENT))
        );
    }

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

    #[test]
    fn task_stat_fields() {
        let t = "1234 (probe) D 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 2 0 987654 123 456";
        assert_eq!(parse_stat(t), Some(('D', 987654)));
        // A command name with spaces and a ')' of its own.
        let t = "77 (a) b (c) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 42 1 2";
        assert_eq!(parse_stat(t), Some(('S', 42)));
        assert_eq!(parse_stat("77 (x) S 1 2"), None);
        assert_eq!(parse_stat(""), None);
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        assert!(matches!(parse_stat(&own), Some(('R', s)) if s > 0));
    }

    #[test]
    fn markers_of_dead_or_running_tasks_are_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("probe-mem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
        let mem = Memory::open(&dir).unwrap();
        let mp = Path::new("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount");
        // This thread is alive but running, not in D: remembered, then not recalled, and the
        // marker is gone.
        let tid = nix::unistd::gettid().as_raw();
        mem.remember("7:0", mp, tid, 1000).unwrap();
        let f = dir.join(Memory::name("7:0", mp));
        let m: Marker = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        assert_eq!((m.tid, m.device.as_str(), m.since_ms), (tid, "7:0", 1000));
        std::fs::write(dir.join("not-a-marker"), b"x").unwrap();
        let listed = mem.markers().unwrap();
        assert_eq!(
            listed.into_iter().collect::<Vec<_>>(),
            [Memory::name("7:0", mp)]
        );
        assert!(mem.recall("7:0", mp).is_none());
        assert!(!f.exists());
        assert_eq!(mem.markers(), Some(HashSet::new()));
        // A marker naming a task that does not exist.
        std::fs::write(
            &f,
            br#"{"device":"7:0","mount":"/x","tid":999999999,"start_time":1,"since_ms":1}"#,
        )
        .unwrap();
        assert!(mem.recall("7:0", mp).is_none());
        assert!(!f.exists());
        // A garbled marker is dropped too.
        std::fs::write(&f, b"{").unwrap();
        assert!(mem.recall("7:0", mp).is_none());
        assert!(!f.exists());
        // Without memory, a probe that answers needs no note.
        let (o, notes) = probe_remembered(
            &[(PathBuf::from("/"), "0:1".into())],
            Duration::from_secs(5),
            1,
            Err("none"),
        );
        assert!(matches!(o[0], Outcome::Answered { .. }) && notes.is_empty());
        assert!(memory_for(None, Some(Path::new("/host")))
            .err()
            .unwrap()
            .contains("--run-dir"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
