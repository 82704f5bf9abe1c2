//! Which tests of the one test binary may run at the same time.
//!
//! Most tests are hermetic (temp dirs, private mount namespaces, loopback ports of their own) and
//! run in parallel. A few change the machine itself: they install into system paths
//! (`/usr/lib/nagios/plugins`, `/etc/nagios/nrpe.d`, `/etc/sudoers.d`, `/run/k8s-storage-checks`,
//! `/etc/kubernetes`), start system daemons, debootstrap into the shared cache, or leave a task of
//! ours stuck in D state on purpose. Each of those takes [`exclusive`] for its whole run.
//!
//! Exclusive also waits for, and holds off, every test that makes mounts and runs checks on them
//! ([`shared`], taken by every [`crate::Ns`] for its lifetime): a check on a hung mount remembers
//! its stuck probe in `/run/k8s-storage-checks` when that directory exists, and the role installs
//! it for the duration of the deployment test; a D-state count must see only its own tasks. Tests
//! that touch neither (file inputs, the API server, `--help`) ignore the lock.
//!
//! A reader-preferring lock: a test holding [`shared`] may take it again (a second namespace)
//! while an exclusive test waits, and the thread holding [`exclusive`] gets its namespaces
//! without waiting on itself.
//!
//! The machine is shared by every test process on it (two people's `cargo test`, the lead's run
//! beside an engineer's): the process also holds `flock` on [`LOCK_FILE`] — exclusive while one
//! of its tests is, shared while any of its tests is — so machine-changing tests of different
//! processes do not overlap either.

use nix::fcntl::{Flock, FlockArg};
use std::cell::Cell;
use std::fs::File;
use std::io::Write;
use std::sync::{Condvar, Mutex, MutexGuard};

/// The machine-wide lock between test processes.
pub const LOCK_FILE: &str = "/tmp/k8s-storage-checks-e2e.lock";

struct State {
    exclusive: bool,
    shared: usize,
    /// This process's hold on [`LOCK_FILE`] (none when nothing is held, or the file cannot be
    /// opened: then only this process's tests are ordered).
    machine: Option<Flock<File>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    exclusive: false,
    shared: 0,
    machine: None,
});

/// The parent of a process (`/proc/<pid>/stat`, field 4), if it can be read.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// True when the process holding the machine exclusively (its pid written in [`LOCK_FILE`]) is
/// this process's ancestor: a program a machine-changing test runs (the quickstart's `./try-all`
/// and the replay it starts) works under that test's hold and must not wait for it.
fn under_exclusive_holder() -> bool {
    let Some(holder) = std::fs::read_to_string(LOCK_FILE)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        return false;
    };
    let mut pid = std::process::id();
    for _ in 0..64 {
        match parent_of(pid) {
            Some(p) if p == holder => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// Take the machine-wide lock (waiting for other processes); `None` when the lock file cannot be
/// opened at all, or when an ancestor of this process holds it exclusively (see
/// [`under_exclusive_holder`]).
fn machine_lock(how: FlockArg) -> Option<Flock<File>> {
    if how == FlockArg::LockShared && under_exclusive_holder() {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(LOCK_FILE)
        .or_else(|_| File::open(LOCK_FILE))
        .ok()?;
    let mut file = file;
    loop {
        match Flock::lock(file, how) {
            Ok(l) => {
                if how == FlockArg::LockExclusive {
                    // Who holds it, for the programs its tests start.
                    let _ = l.set_len(0);
                    let _ = (&*l).write_all(std::process::id().to_string().as_bytes());
                }
                return Some(l);
            }
            Err((f, nix::errno::Errno::EINTR)) => file = f,
            Err(_) => return None,
        }
    }
}
static CHANGED: Condvar = Condvar::new();

thread_local! {
    static HOLDS_EXCLUSIVE: Cell<bool> = const { Cell::new(false) };
}

/// The state, whether or not a test panicked while holding the lock (the guards below release in
/// their `Drop`, which runs during unwinding too).
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn wait(s: MutexGuard<'static, State>) -> MutexGuard<'static, State> {
    CHANGED.wait(s).unwrap_or_else(|e| e.into_inner())
}

/// Held by a test that changes the machine: no other exclusive test and no [`shared`] holder runs
/// meanwhile. Released on drop.
#[must_use = "the lock is released when this guard is dropped"]
pub struct Exclusive(());

/// Wait until this test may change the machine, then hold it until the guard drops.
pub fn exclusive() -> Exclusive {
    assert!(
        !HOLDS_EXCLUSIVE.with(Cell::get),
        "e2e::exclusive() taken twice by one test"
    );
    let mut s = state();
    while s.exclusive || s.shared > 0 {
        s = wait(s);
    }
    // Nothing of this process holds the machine now: wait for the other processes.
    s.machine = machine_lock(FlockArg::LockExclusive);
    s.exclusive = true;
    HOLDS_EXCLUSIVE.with(|h| h.set(true));
    Exclusive(())
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        let mut s = state();
        if let Some(l) = &s.machine {
            let _ = l.set_len(0);
        }
        s.machine = None;
        s.exclusive = false;
        HOLDS_EXCLUSIVE.with(|h| h.set(false));
        CHANGED.notify_all();
    }
}

/// Held by a test that makes mounts and runs checks on them: no exclusive test runs meanwhile.
#[must_use = "the lock is released when this guard is dropped"]
pub struct Shared {
    counted: bool,
}

/// Wait until no exclusive test runs (unless this thread is that test), then hold the machine
/// shared until the guard drops.
pub fn shared() -> Shared {
    if HOLDS_EXCLUSIVE.with(Cell::get) {
        return Shared { counted: false };
    }
    let mut s = state();
    while s.exclusive {
        s = wait(s);
    }
    if s.shared == 0 {
        s.machine = machine_lock(FlockArg::LockShared);
    }
    s.shared += 1;
    Shared { counted: true }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.counted {
            let mut s = state();
            s.shared -= 1;
            if s.shared == 0 {
                s.machine = None;
            }
            CHANGED.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::time::Duration;

    /// Exclusive waits for every shared holder and holds off new ones; its own thread's shared
    /// takes pass. (One test: the lock is process-wide.)
    #[test]
    fn exclusive_excludes_shared_and_itself() {
        let inside = Arc::new(AtomicUsize::new(0));
        let a = shared();
        let (tx, rx) = mpsc::channel();
        let i = inside.clone();
        let t = std::thread::spawn(move || {
            let _x = exclusive();
            i.fetch_add(1, Ordering::SeqCst);
            // Its own namespaces do not wait on itself.
            let _own = shared();
            tx.send(()).unwrap();
            // Hold it until the main thread has tried to take shared.
            std::thread::park();
        });
        // Not while `a` is held: the exclusive thread cannot have got in.
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        assert_eq!(inside.load(Ordering::SeqCst), 0);
        drop(a);
        rx.recv_timeout(Duration::from_secs(10))
            .expect("exclusive gets in once shared is released");
        // Now shared must wait for the exclusive holder.
        let (tx2, rx2) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _s = shared();
            tx2.send(()).unwrap();
        });
        assert!(rx2.recv_timeout(Duration::from_millis(300)).is_err());
        t.thread().unpark();
        t.join().unwrap();
        rx2.recv_timeout(Duration::from_secs(10))
            .expect("shared gets in once exclusive is released");
        waiter.join().unwrap();
    }
}
