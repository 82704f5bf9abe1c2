//! Elevated privilege serves the node's own sources, never a path the caller chose.
//!
//! When a check runs with more privilege than its real user (`AT_SECURE`: file capabilities such
//! as `cap_dac_read_search` or `cap_syslog`), the runtime lowers the whole process to the caller's
//! privilege before any check code runs ([`plugin::privilege::lower_process`]). From then on:
//!
//! - every path a user can name (`--mountinfo`, `--kmsg`, `--log-file`, `--pods-json`,
//!   `--state-dir`, `--kubeconfig` and the files it names, `--sys`, `--host-root`, ...) is opened
//!   with the caller's own privilege, whatever code opens it: nothing is raised by default, so a
//!   new option cannot forget the boundary; the readers of user paths still open through
//!   [`open`]/[`read`] so that they stay at the caller's level even inside an elevated section;
//! - privilege is raised only around the node's own default sources (the default kubelet roots,
//!   `/dev/kmsg`), with [`elevated_if`], and only when no option redirected them.
//!
//! Capabilities and filesystem ids are per thread: a raise or lower changes the calling thread
//! (and threads it spawns meanwhile, e.g. probe threads), and is undone when the closure returns.

use plugin::privilege::Level;
use std::path::Path;

pub use plugin::privilege::secure as is_privileged;

/// Undoes a level change on drop.
struct Restore(Option<Level>);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Some(l) = self.0.take() {
            l.set();
        }
    }
}

fn at(level: Level) -> Restore {
    let before = Level::current();
    if before == level {
        return Restore(None);
    }
    level.set();
    Restore(Some(before))
}

/// Run `f` with the binary's own privilege on this thread when `own_source` is true (the check
/// reads a default host source no option redirected) and the process is privileged; otherwise run
/// it as it is.
pub fn elevated_if<T>(own_source: bool, f: impl FnOnce() -> T) -> T {
    if !own_source || !is_privileged() {
        return f();
    }
    let _r = at(Level::own());
    f()
}

/// Run `f` with the caller's own privilege on this thread.
pub fn as_caller<T>(f: impl FnOnce() -> T) -> T {
    if !is_privileged() {
        return f();
    }
    let _r = at(Level::caller());
    f()
}

/// Open a path a user named, read-only, with the caller's privilege.
pub fn open(path: &Path) -> std::io::Result<std::fs::File> {
    as_caller(|| std::fs::File::open(path))
}

/// Open a path a user named with these options, with the caller's privilege.
pub fn open_with(path: &Path, opts: &std::fs::OpenOptions) -> std::io::Result<std::fs::File> {
    as_caller(|| opts.open(path))
}

/// The whole content of a file a user named, read with the caller's privilege.
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    as_caller(|| std::fs::read(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unprivileged_process_reads_as_it_is() {
        // The test process is not AT_SECURE: both wrappers are plain calls.
        assert!(!is_privileged());
        assert_eq!(elevated_if(true, || 7), 7);
        assert_eq!(as_caller(|| 8), 8);
        let own = read(Path::new("/proc/self/status")).unwrap();
        assert!(!own.is_empty());
        assert!(open(Path::new("/nonexistent/h1")).is_err());
    }
}
