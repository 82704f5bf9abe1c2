//! The forked worker: the check runs in a child the parent can always kill at the deadline,
//! reporting its stage, result or panic through a pipe.

use super::*;
use crate::parent::die_with_parent;

// Messages from the worker: one type byte, a u32 LE length, the payload.
pub(super) const MSG_STAGE: u8 = b'S';
const MSG_RESULT: u8 = b'R';
const MSG_PANIC: u8 = b'P';

/// The worker's end of the pipe, for the panic hook (-1 in the parent).
static WORKER_FD: AtomicI32 = AtomicI32::new(-1);

pub(super) fn send(fd: i32, kind: u8, payload: &[u8]) {
    let mut msg = Vec::with_capacity(payload.len() + 5);
    msg.push(kind);
    msg.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    msg.extend_from_slice(payload);
    let mut off = 0;
    while off < msg.len() {
        // SAFETY: writing our own buffer to our own pipe fd.
        let n = unsafe { libc::write(fd, msg[off..].as_ptr().cast(), msg.len() - off) };
        if n <= 0 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        off += n as usize;
    }
}

pub(super) fn run_forked<C: Check>(opts: C, out: impl Fn(&str)) -> i32 {
    let common = opts.common().clone();
    let start = Instant::now();
    let mut fds = [0i32; 2];
    // SAFETY: fds is a 2-element array as pipe2 requires.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        out(&format!(
            "{} UNKNOWN - cannot start: pipe: {}\n",
            C::NAME,
            std::io::Error::last_os_error()
        ));
        return Status::Unknown.code();
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: a plain id getter.
    let parent = unsafe { libc::getpid() };
    // SAFETY: this process is single-threaded here (nothing has spawned a thread yet), so the
    // child may do anything a fresh process may.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        out(&format!(
            "{} UNKNOWN - cannot start: fork: {}\n",
            C::NAME,
            std::io::Error::last_os_error()
        ));
        return Status::Unknown.code();
    }
    if pid == 0 {
        crate::parent::set(parent);
        die_with_parent();
        worker::<C>(opts, &common, rd, wr);
    }
    // SAFETY: the parent keeps the read end only.
    unsafe { libc::close(wr) };
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
        let mut pfd = libc::pollfd {
            fd: rd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n <= 0 {
            continue; // timeout (checked above) or EINTR
        }
        // SAFETY: reading into a local buffer from our own fd.
        let r = unsafe { libc::read(rd, chunk.as_mut_ptr().cast(), chunk.len()) };
        if r > 0 {
            buf.extend_from_slice(&chunk[..r as usize]);
        } else if r == 0 {
            // The worker ended without an answer.
            let mut status = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            let how = if libc::WIFSIGNALED(status) {
                let sig = libc::WTERMSIG(status);
                match nix::sys::signal::Signal::try_from(sig) {
                    // A mapped input file (--pods-json) truncated by another process.
                    Ok(nix::sys::signal::Signal::SIGBUS) => {
                        "killed by SIGBUS: an input file was truncated while it was read?"
                            .to_string()
                    }
                    Ok(s) => format!("killed by {}", s.as_str()),
                    Err(_) => format!("killed by signal {sig}"),
                }
            } else {
                format!("exit status {}", libc::WEXITSTATUS(status))
            };
            let report = Report::unknown(format!(
                "internal error: the check process ended without an answer ({how})"
            ));
            break Ok((
                Status::Unknown.code(),
                finish::<C>(&report, &common, &[], start.elapsed()),
            ));
        }
    };
    // SAFETY: closing our own fd.
    unsafe { libc::close(rd) };
    match answer {
        Ok((code, text)) => {
            reap(pid);
            out(&text);
            code
        }
        Err(stage) => {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            reap(pid);
            let report = timeout_report(&common, &stage);
            out(&finish::<C>(&report, &common, &[], start.elapsed()));
            report.status.code()
        }
    }
}

/// Wait a short, bounded while for the worker to go; one stuck in an uninterruptible wait is
/// left to init (it holds nothing the caller waits on).
fn reap(pid: i32) {
    const GRACE_MS: i32 = 500;
    // SAFETY: pidfd_open on our own child; a pidfd becomes readable when the process exits.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd >= 0 {
        let mut pfd = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; then reap and close our own descriptors.
        unsafe {
            libc::poll(&mut pfd, 1, GRACE_MS);
            let mut status = 0;
            libc::waitpid(pid, &mut status, libc::WNOHANG);
            libc::close(pidfd);
        }
        return;
    }
    // Kernels before 5.3: poll the child's state.
    let until = Instant::now() + Duration::from_millis(GRACE_MS as u64);
    loop {
        let mut status = 0;
        // SAFETY: non-blocking reap of our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if rc != 0 || Instant::now() >= until {
            return;
        }
        // SAFETY: a plain timed wait.
        unsafe { libc::poll(std::ptr::null_mut(), 0, 1) };
    }
}

fn worker<C: Check>(opts: C, common: &CommonArgs, rd: i32, wr: i32) -> ! {
    // SAFETY: plain fd operations on descriptors this process owns.
    unsafe {
        libc::close(rd);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            if !opts.reads_stdin() {
                libc::dup2(null, 0);
            }
            libc::dup2(null, 1);
            libc::dup2(null, 2);
            if null > 2 {
                libc::close(null);
            }
        }
    }
    WORKER_FD.store(wr, Ordering::SeqCst);
    let mut ctx = Ctx::new(work_budget(common.timeout.duration), common.verbose);
    ctx.sink = Some(wr);
    let report = outcome_report(opts.run(&ctx));
    let text = finish::<C>(&report, common, &ctx.take_debug(), ctx.elapsed());
    send(
        wr,
        MSG_RESULT,
        format!("{}\n{}", report.status.code(), text).as_bytes(),
    );
    // SAFETY: leave at once: no destructors, no atexit handlers of the parent's.
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
        let fd = WORKER_FD.load(Ordering::SeqCst);
        if fd >= 0 {
            // In the worker: the parent prints it.
            send(fd, MSG_PANIC, line.as_bytes());
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

    fn pdeathsig() -> i32 {
        let mut sig: libc::c_int = 0;
        // SAFETY: PR_GET_PDEATHSIG writes one int through the pointer.
        unsafe { libc::prctl(libc::PR_GET_PDEATHSIG, &mut sig as *mut libc::c_int) };
        sig
    }

    /// Run `f` in a forked child marked as a worker of this process; its exit code (0: passed).
    /// The child only makes syscalls (the test harness has threads: nothing that allocates).
    fn in_worker(f: fn() -> bool) -> i32 {
        // SAFETY: a plain id getter, then fork; the child makes only syscalls and leaves by _exit.
        let parent = unsafe { libc::getpid() };
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            crate::parent::set(parent);
            die_with_parent();
            // SAFETY: leaving the child at once.
            unsafe { libc::_exit(if f() { 0 } else { 1 }) }
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "child status {status}");
        libc::WEXITSTATUS(status)
    }

    /// Issue 27, finding 9: the worker is armed to die with its parent, and stays armed after a
    /// change of its filesystem ids (which makes the kernel clear the setting): the privilege
    /// layer re-arms it.
    #[test]
    fn finding_9_worker_dies_with_its_parent_even_after_a_credential_change() {
        assert_eq!(in_worker(|| pdeathsig() == libc::SIGKILL), 0);
        // SAFETY: a plain id getter.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("credential-change case skipped: needs root (setfsuid)");
            return;
        }
        assert_eq!(
            in_worker(|| {
                let before = crate::privilege::Level::current();
                // As root: the caller's level is root's own; lower to nobody's filesystem ids
                // by hand, as a privileged run's as_caller does for its caller.
                // SAFETY: setfsuid on this (single-threaded) child.
                unsafe { libc::syscall(libc::SYS_setfsuid, 65534) };
                let cleared = pdeathsig() == 0;
                before.set();
                // The kernel cleared it on the raw change; Level::set re-armed it.
                cleared && pdeathsig() == libc::SIGKILL
            }),
            0
        );
        // Outside a worker nothing is armed.
        assert_eq!(pdeathsig(), 0);
    }

    /// The worker of a parent that is already gone leaves at once instead of running.
    #[test]
    fn finding_9_a_worker_whose_parent_is_gone_does_not_run() {
        // SAFETY: fork; the child makes only syscalls and leaves by _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Claim a parent that is not ours (pid 1 never forks us): as if it had ended.
            crate::parent::set(i32::MAX);
            die_with_parent();
            // SAFETY: reached only if die_with_parent did not leave.
            unsafe { libc::_exit(0) }
        }
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status));
        assert_eq!(libc::WEXITSTATUS(status), Status::Unknown.code());
    }
}
