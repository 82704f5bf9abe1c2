//! The forked worker: the check runs in a child the parent can always kill at the deadline,
//! reporting its stage, result or panic through a pipe.

use super::*;
use crate::parent::die_with_parent;
use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{ForkResult, Pid};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::OnceLock;

// Messages from the worker: one type byte, a u32 LE length, the payload.
pub(super) const MSG_STAGE: u8 = b'S';
const MSG_RESULT: u8 = b'R';
const MSG_PANIC: u8 = b'P';

/// The worker's end of the pipe, for the panic hook (unset in the parent).
static WORKER_FD: OnceLock<OwnedFd> = OnceLock::new();

pub(super) fn send(fd: BorrowedFd<'_>, kind: u8, payload: &[u8]) {
    // The length field is 32 bits: a (never seen) larger payload is cut, not misframed.
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let payload = &payload[..len as usize];
    let mut msg = Vec::with_capacity(payload.len() + 5);
    msg.push(kind);
    msg.extend_from_slice(&len.to_le_bytes());
    msg.extend_from_slice(payload);
    let mut off = 0;
    while off < msg.len() {
        match nix::unistd::write(fd, &msg[off..]) {
            Ok(0) => return,
            Ok(n) => off += n,
            Err(Errno::EINTR) => {}
            Err(_) => return,
        }
    }
}

pub(super) fn run_forked<C: Check>(opts: C, out: impl Fn(&str)) -> i32 {
    let common = opts.common().clone();
    let start = Instant::now();
    let (rd, wr) = match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
        Ok(p) => p,
        Err(e) => {
            out(&format!(
                "{} UNKNOWN - cannot start: pipe: {}\n",
                C::NAME,
                std::io::Error::from(e)
            ));
            return Status::Unknown.code();
        }
    };
    let parent = nix::unistd::getpid();
    // SAFETY: this process is single-threaded here (nothing has spawned a thread yet), so the
    // child may do anything a fresh process may.
    let pid = match unsafe { nix::unistd::fork() } {
        Ok(ForkResult::Parent { child }) => child,
        Ok(ForkResult::Child) => {
            crate::parent::set(parent.as_raw());
            die_with_parent();
            worker::<C>(opts, &common, rd, wr);
        }
        Err(e) => {
            out(&format!(
                "{} UNKNOWN - cannot start: fork: {}\n",
                C::NAME,
                std::io::Error::from(e)
            ));
            return Status::Unknown.code();
        }
    };
    // The parent keeps the read end only.
    drop(wr);
    let deadline = start + common.timeout.duration;
    let mut buf: Vec<u8> = Vec::new();
    let mut stage = String::from("starting");
    let mut chunk = [0u8; 16 * 1024];
    let answer: Result<(i32, String), String> = loop {
        // Handle every complete message in the buffer.
        let mut done = None;
        while buf.len() >= 5 {
            let len = u32::from_le_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
            if buf.len() < 5 + len {
                break;
            }
            let kind = buf[0];
            let payload = String::from_utf8_lossy(&buf[5..5 + len]).into_owned();
            buf.drain(..5 + len);
            match kind {
                MSG_STAGE => stage = payload,
                MSG_RESULT => {
                    let (code, text) = payload.split_once('\n').unwrap_or(("3", ""));
                    done = Some(Ok((code.parse().unwrap_or(3), text.to_string())));
                }
                MSG_PANIC => done = Some(Ok((Status::Unknown.code(), payload))),
                _ => {}
            }
        }
        if let Some(d) = done {
            break d;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(stage.clone());
        }
        let mut pfd = [PollFd::new(rd.as_fd(), PollFlags::POLLIN)];
        let ms = PollTimeout::try_from(left.as_millis().clamp(1, i32::MAX as u128))
            .unwrap_or(PollTimeout::MAX);
        if !matches!(poll(&mut pfd, ms), Ok(n) if n > 0) {
            continue; // timeout (checked above) or EINTR
        }
        match nix::unistd::read(&rd, &mut chunk) {
            Ok(0) => {}
            Ok(r) => {
                buf.extend_from_slice(&chunk[..r]);
                continue;
            }
            Err(_) => continue,
        }
        // The worker ended without an answer.
        let how = match waitpid(pid, None) {
            // A mapped input file (--pods-json) truncated by another process.
            Ok(WaitStatus::Signaled(_, Signal::SIGBUS, _)) => {
                "killed by SIGBUS: an input file was truncated while it was read?".to_string()
            }
            Ok(WaitStatus::Signaled(_, s, _)) => format!("killed by {}", s.as_str()),
            Ok(WaitStatus::Exited(_, code)) => format!("exit status {code}"),
            Ok(other) => format!("{other:?}"),
            // nix decodes every signal it names; what it cannot name is a real-time one.
            Err(Errno::EINVAL) => "killed by a real-time signal".to_string(),
            Err(e) => format!("status unknown: {}", std::io::Error::from(e)),
        };
        let report = Report::unknown(format!(
            "internal error: the check process ended without an answer ({how})"
        ));
        break Ok((
            Status::Unknown.code(),
            finish::<C>(&report, &common, &[], start.elapsed()),
        ));
    };
    drop(rd);
    match answer {
        Ok((code, text)) => {
            reap(pid);
            out(&text);
            code
        }
        Err(stage) => {
            let _ = kill(pid, Signal::SIGKILL);
            reap(pid);
            let report = timeout_report(&common, &stage);
            out(&finish::<C>(&report, &common, &[], start.elapsed()));
            report.status.code()
        }
    }
}

/// Wait a short, bounded while for the worker to go; one stuck in an uninterruptible wait is
/// left to init (it holds nothing the caller waits on).
fn reap(pid: Pid) {
    const GRACE_MS: u16 = 500;
    // nix has no pidfd_open (Linux 5.3).
    // SAFETY: pidfd_open on our own child; a pidfd becomes readable when the process exits.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if let Ok(pidfd @ 0..) = i32::try_from(pidfd) {
        // SAFETY: a fresh descriptor nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        let _ = poll(
            &mut [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)],
            PollTimeout::from(GRACE_MS),
        );
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
        return;
    }
    // Kernels before 5.3: poll the child's state.
    let until = Instant::now() + Duration::from_millis(u64::from(GRACE_MS));
    loop {
        let gone = !matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        );
        if gone || Instant::now() >= until {
            return;
        }
        // A timed wait on no descriptor: 1 ms between looks.
        let _ = poll(&mut [], PollTimeout::from(1u8));
    }
}

fn worker<C: Check>(opts: C, common: &CommonArgs, rd: OwnedFd, wr: OwnedFd) -> ! {
    use nix::unistd::{dup2_stderr, dup2_stdin, dup2_stdout};
    drop(rd);
    if let Ok(null) = nix::fcntl::open(
        c"/dev/null",
        nix::fcntl::OFlag::O_RDWR,
        nix::sys::stat::Mode::empty(),
    ) {
        if !opts.reads_stdin() {
            let _ = dup2_stdin(&null);
        }
        let _ = dup2_stdout(&null);
        let _ = dup2_stderr(&null);
        if null.as_raw_fd() <= 2 {
            // It took the place of a closed standard descriptor: keep it open.
            let _ = null.into_raw_fd();
        }
    }
    let wr = WORKER_FD.get_or_init(|| wr).as_fd();
    let mut ctx = Ctx::new(work_budget(common.timeout.duration), common.verbose);
    ctx.sink = Some(wr);
    let report = outcome_report(opts.run(&ctx));
    let text = finish::<C>(&report, common, &ctx.take_debug(), ctx.elapsed());
    send(
        wr,
        MSG_RESULT,
        format!("{}\n{}", report.status.code(), text).as_bytes(),
    );
    // SAFETY: leave at once: no destructors, no atexit handlers of the parent's (nix has no
    // _exit).
    unsafe { libc::_exit(0) }
}

pub(super) fn install_panic_hook(name: &'static str, binary: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "panic".to_string()
        };
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let reason = format!("internal error: {}{}", crate::sanitize(&msg), place);
        let line = match current_format() {
            Format::Nagios => format!("{name} UNKNOWN - {reason}\n"),
            f => render_plain_as(name, binary, &Report::unknown(reason), f),
        };
        if let Some(fd) = WORKER_FD.get() {
            // In the worker: the parent prints it.
            send(fd.as_fd(), MSG_PANIC, line.as_bytes());
        } else {
            // Raw write: the stdout lock may be held by whoever panicked.
            let _ = nix_free_write(line.as_bytes());
        }
        std::process::exit(Status::Unknown.code());
    }));
}

fn nix_free_write(b: &[u8]) -> std::io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 1 is stdout for the life of the process; ManuallyDrop keeps it open.
    let f = unsafe { std::fs::File::from_raw_fd(1) };
    let mut f = std::mem::ManuallyDrop::new(f);
    f.write_all(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdeathsig() -> Option<Signal> {
        nix::sys::prctl::get_pdeathsig().ok().flatten()
    }

    /// Wait for our child `pid`; its exit code (panics on anything else).
    fn exit_code(pid: Pid) -> i32 {
        match waitpid(pid, None) {
            Ok(WaitStatus::Exited(_, code)) => code,
            other => panic!("child status {other:?}"),
        }
    }

    /// Run `f` in a forked child marked as a worker of this process; its exit code (0: passed).
    /// The child only makes syscalls (the test harness has threads: nothing that allocates).
    fn in_worker(f: fn() -> bool) -> i32 {
        let parent = nix::unistd::getpid();
        // SAFETY: the child makes only syscalls and leaves by _exit.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            ForkResult::Child => {
                crate::parent::set(parent.as_raw());
                die_with_parent();
                // SAFETY: leaving the child at once (nix has no _exit).
                unsafe { libc::_exit(i32::from(!f())) }
            }
            ForkResult::Parent { child } => exit_code(child),
        }
    }

    /// Issue 27, finding 9: the worker is armed to die with its parent, and stays armed after a
    /// change of its filesystem ids (which makes the kernel clear the setting): the privilege
    /// layer re-arms it.
    #[test]
    fn finding_9_worker_dies_with_its_parent_even_after_a_credential_change() {
        assert_eq!(in_worker(|| pdeathsig() == Some(Signal::SIGKILL)), 0);
        if !nix::unistd::geteuid().is_root() {
            eprintln!("credential-change case skipped: needs root (setfsuid)");
            return;
        }
        assert_eq!(
            in_worker(|| {
                let before = crate::privilege::Level::current();
                // As root: the caller's level is root's own; lower to nobody's filesystem ids
                // by hand, as a privileged run's as_caller does for its caller.
                nix::unistd::setfsuid(nix::unistd::Uid::from_raw(65534));
                let cleared = pdeathsig().is_none();
                before.set();
                // The kernel cleared it on the raw change; Level::set re-armed it.
                cleared && pdeathsig() == Some(Signal::SIGKILL)
            }),
            0
        );
        // Outside a worker nothing is armed.
        assert_eq!(pdeathsig(), None);
    }

    /// The worker of a parent that is already gone leaves at once instead of running.
    #[test]
    fn finding_9_a_worker_whose_parent_is_gone_does_not_run() {
        // SAFETY: the child makes only syscalls and leaves by _exit.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            ForkResult::Child => {
                // Claim a parent that is not ours (pid 1 never forks us): as if it had ended.
                crate::parent::set(i32::MAX);
                die_with_parent();
                // SAFETY: reached only if die_with_parent did not leave (nix has no _exit).
                unsafe { libc::_exit(0) }
            }
            ForkResult::Parent { child } => {
                assert_eq!(exit_code(child), Status::Unknown.code());
            }
        }
    }
}
