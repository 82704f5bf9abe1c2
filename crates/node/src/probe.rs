//! Bounded-time probes of mount points.
//!
//! `stat`, `statfs` or `readdir` on a dead NFS/FUSE/iSCSI mount can block forever, in a state no
//! signal interrupts. A thread blocked like that would keep the whole process alive after the
//! watchdog answered (a thread group exits only when its last thread does), and with it the
//! stdout pipe NRPE waits on. So each probe runs in a forked child that closes stdin, stdout and
//! stderr first and reports through a pipe of its own. Probes run concurrently; a probe that does
//! not answer in time is killed (FUSE and NFS waits are killable) and, if even that does not end
//! it, abandoned to init without holding anything the caller's caller waits on.

pub use nix::errno::Errno;
use nix::libc;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    fn from_u8(v: u8) -> Stage {
        match v {
            1 => Stage::Stat,
            2 => Stage::Statfs,
            3 => Stage::Open,
            _ => Stage::Readdir,
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

/// Result layout written by the child: [stage u8, ok u8, unused u8, is_dir u8, errno i32 LE].
const RESULT_LEN: usize = 8;

struct Running {
    pid: libc::pid_t,
    fd: libc::c_int,
    started: Instant,
    index: usize,
}

/// Probe one path.
pub fn probe(path: &Path, timeout: Duration) -> Outcome {
    probe_many(&[path.to_path_buf()], timeout, 1)
        .pop()
        .unwrap_or(Outcome::ProbeError("no result".into()))
}

/// Probe many paths concurrently (at most `parallel` at once), each bounded by `timeout`.
/// Results are in the order of `paths`. Total wall time is about `timeout` × ⌈hung / parallel⌉.
pub fn probe_many(paths: &[PathBuf], timeout: Duration, parallel: usize) -> Vec<Outcome> {
    let parallel = parallel.max(1);
    let mut results: Vec<Option<Outcome>> = vec![None; paths.len()];
    let mut next = 0usize;
    let mut running: Vec<Running> = Vec::new();
    loop {
        while running.len() < parallel && next < paths.len() {
            match spawn_probe(&paths[next]) {
                Ok((pid, fd)) => running.push(Running {
                    pid,
                    fd,
                    started: Instant::now(),
                    index: next,
                }),
                Err(e) => results[next] = Some(Outcome::ProbeError(e)),
            }
            next += 1;
        }
        if running.is_empty() {
            break;
        }
        // Wait until the earliest deadline among the running probes, or any answers.
        let now = Instant::now();
        let wait = running
            .iter()
            .map(|r| (r.started + timeout).saturating_duration_since(now))
            .min()
            .unwrap_or_default();
        let mut pfds: Vec<libc::pollfd> = running
            .iter()
            .map(|r| libc::pollfd {
                fd: r.fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: pfds is a valid array of pollfd for its length.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
        }
        let now = Instant::now();
        let mut still = Vec::new();
        for (r, p) in running.into_iter().zip(pfds.iter()) {
            if p.revents != 0 {
                results[r.index] = Some(collect(&r));
            } else if now >= r.started + timeout {
                abandon(&r);
                results[r.index] = Some(Outcome::Hung { after: timeout });
            } else {
                still.push(r);
            }
        }
        running = still;
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Outcome::ProbeError("no result".into())))
        .collect()
}

fn collect(r: &Running) -> Outcome {
    let mut buf = [0u8; RESULT_LEN];
    // SAFETY: reading into a local buffer of the given length from our own pipe fd.
    let n = unsafe { libc::read(r.fd, buf.as_mut_ptr() as *mut libc::c_void, RESULT_LEN) };
    // SAFETY: closing our own fd once.
    unsafe { libc::close(r.fd) };
    let mut status = 0;
    // SAFETY: reaping our own child; it has written its answer and is exiting.
    unsafe { libc::waitpid(r.pid, &mut status, 0) };
    if n != RESULT_LEN as isize {
        return Outcome::ProbeError("probe process ended without an answer".into());
    }
    let stage = Stage::from_u8(buf[0]);
    if buf[1] == 1 {
        Outcome::Answered {
            is_dir: buf[3] == 1,
        }
    } else {
        let errno = i32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]);
        Outcome::Failed {
            stage,
            errno: nix::errno::Errno::from_raw(errno),
        }
    }
}

fn abandon(r: &Running) {
    // SAFETY: signalling and reaping our own child; close our own fd.
    unsafe {
        libc::kill(r.pid, libc::SIGKILL);
        libc::close(r.fd);
    }
    // A killable wait (FUSE, NFS) ends at once; give it a moment to be reaped so no process is
    // left behind. One stuck in an uninterruptible wait is left to init.
    let until = Instant::now() + Duration::from_millis(200);
    loop {
        let mut status = 0;
        // SAFETY: non-blocking reap of our own child.
        let rc = unsafe { libc::waitpid(r.pid, &mut status, libc::WNOHANG) };
        if rc != 0 || Instant::now() >= until {
            break;
        }
        std::thread::yield_now();
        // Short poll on nothing: a bounded wait without sleeping on a timer we must tune.
        // SAFETY: poll with no fds is a plain timed wait.
        unsafe { libc::poll(std::ptr::null_mut(), 0, 5) };
    }
}

fn spawn_probe(path: &Path) -> Result<(libc::pid_t, libc::c_int), String> {
    let cpath =
        CString::new(path.as_os_str().as_bytes()).map_err(|_| "path contains NUL".to_string())?;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a 2-element array as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child only makes async-signal-safe raw syscalls on memory prepared before the
    // fork (cpath, a stack buffer) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        // SAFETY: closing our own fds.
        unsafe {
            libc::close(rd);
            libc::close(wr);
        }
        return Err(format!("fork: {e}"));
    }
    if pid == 0 {
        // SAFETY: see above; never returns.
        unsafe { child(cpath.as_ptr(), rd, wr) }
    }
    // SAFETY: the parent keeps only the read end.
    unsafe { libc::close(wr) };
    Ok((pid, rd))
}

/// The probe child. Async-signal-safe syscalls only.
unsafe fn child(path: *const libc::c_char, rd: libc::c_int, wr: libc::c_int) -> ! {
    libc::close(rd);
    // Never hold the caller's stdio: a stuck probe must not keep NRPE's pipe open.
    libc::close(0);
    libc::close(1);
    libc::close(2);
    let mut res = [0u8; RESULT_LEN];
    let fail = |res: &mut [u8; RESULT_LEN], stage: u8| {
        let errno = *libc::__errno_location();
        res[0] = stage;
        res[1] = 0;
        res[4..8].copy_from_slice(&errno.to_le_bytes());
    };
    let mut st: libc::stat = std::mem::zeroed();
    let mut sfs: libc::statfs = std::mem::zeroed();
    'probe: {
        if libc::stat(path, &mut st) != 0 {
            fail(&mut res, 1);
            break 'probe;
        }
        if libc::statfs(path, &mut sfs) != 0 {
            fail(&mut res, 2);
            break 'probe;
        }
        let is_dir = (st.st_mode & libc::S_IFMT) == libc::S_IFDIR;
        if is_dir {
            let fd = libc::open(path, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
            if fd < 0 {
                fail(&mut res, 3);
                break 'probe;
            }
            let mut buf = [0u8; 1024];
            let n = libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len());
            if n < 0 {
                fail(&mut res, 4);
                break 'probe;
            }
        }
        res[0] = 4;
        res[1] = 1;
        res[3] = u8::from(is_dir);
    }
    libc::write(wr, res.as_ptr() as *const libc::c_void, RESULT_LEN);
    libc::_exit(0);
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
