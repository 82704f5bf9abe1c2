//! The forked worker's tie to its parent: which process forked it, and the kernel's promise to
//! end the worker with it. A leaf module: the worker (`runtime`) records the parent, and
//! `privilege` renews the promise after each credential change.

use crate::Status;
use nix::libc;
use std::sync::atomic::{AtomicI32, Ordering};

/// In the worker, the pid of the process that forked it (0 everywhere else).
static PARENT: AtomicI32 = AtomicI32::new(0);

/// In the worker: have the kernel send it SIGKILL when its parent ends, however the parent ends
/// (SIGKILL or SIGTERM to its pid alone, a crash), then make sure the parent has not ended already
/// (it may have gone between `fork` and here, or between a credential change that cleared the
/// setting and this call): the worker is never left to init holding a FIFO, a probe or a mount
/// busy. Outside the worker it does nothing.
///
/// The kernel clears this setting on the calling thread whenever its filesystem ids or
/// capabilities change, so [`crate::privilege`] calls this again after each such change.
pub(crate) fn die_with_parent() {
    let parent = PARENT.load(Ordering::SeqCst);
    if parent == 0 {
        return;
    }
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if nix::unistd::getppid().as_raw() != parent {
        // The parent is gone (this process was reparented): nobody reads the answer.
        // SAFETY: _exit has no preconditions (nix has no wrapper for it).
        unsafe { libc::_exit(Status::Unknown.code()) }
    }
}

/// Record the parent's pid in the worker (`i32::MAX`: a worker whose parent check is off).
pub(crate) fn set(pid: i32) {
    PARENT.store(pid, Ordering::SeqCst);
}
