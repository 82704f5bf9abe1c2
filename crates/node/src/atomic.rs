//! Replacing a file atomically, once for the whole suite: the checks' state files
//! ([`crate::logs::state::StateDir::write`]) and container mode's textfile-collector files
//! (`textfile::write_atomic`) both go through [`replace`].
//!
//! A reader sees the old content or the new, never half a file, and a writer killed at any point
//! leaves the old file in place:
//! - the new content goes to a temporary file in the same directory (same filesystem, so the
//!   rename is atomic), is fsynced, then renamed over the final name, and the directory is fsynced
//!   so that the rename survives a crash;
//! - every step is relative to a descriptor of the directory (`openat`, `renameat`, `unlinkat`),
//!   so swapping a component of its path meanwhile changes nothing;
//! - the temporary name is `.<name>.tmp.<pid>.<64 random bits>` (a dot-file: the collector reads
//!   `*.prom` only) and is created `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`: a symlink or file
//!   planted at a guessed name makes the create fail (another name is tried), never write through;
//!   the final `renameat` replaces whatever sits at the final name (a link included) without
//!   following it;
//! - the mode is set on the open file (`fchmod`), whatever the umask;
//! - on failure the temporary file is removed.

use nix::fcntl::{renameat, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::{fsync, unlinkat, UnlinkatFlags};
use std::ffi::CString;
use std::io::Write;
use std::os::fd::BorrowedFd;

/// How many temporary names are tried before giving up (each taken one is a planted file or a
/// concurrent writer's).
const TRIES: usize = 16;

/// Replace the file `name` in the directory `dir` by `body` with permissions `mode`, atomically
/// and without following any link (see the module doc).
pub fn replace(dir: BorrowedFd<'_>, name: &str, body: &[u8], mode: u32) -> std::io::Result<()> {
    replace_with(dir, name, body, mode, || {
        format!(".{name}.tmp.{}.{:016x}", std::process::id(), random())
    })
}

/// [`replace`] with the temporary names taken from `tmp_name` (tests plant files at them).
fn replace_with(
    dir: BorrowedFd<'_>,
    name: &str,
    body: &[u8],
    mode: u32,
    mut tmp_name: impl FnMut() -> String,
) -> std::io::Result<()> {
    let nul = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "a name holds a NUL byte");
    let dst = CString::new(name).map_err(|_| nul())?;
    let mode = Mode::from_bits_truncate(mode);
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut tries = 0;
    let (tmp, fd) = loop {
        let tmp = CString::new(tmp_name()).map_err(|_| nul())?;
        match nix::fcntl::openat(dir, tmp.as_c_str(), flags, mode) {
            Ok(fd) => break (tmp, fd),
            Err(e) => {
                tries += 1;
                if e != nix::errno::Errno::EEXIST || tries >= TRIES {
                    return Err(e.into());
                }
            }
        }
    };
    let mut f = std::fs::File::from(fd);
    let res = (|| -> std::io::Result<()> {
        nix::sys::stat::fchmod(&f, mode)?;
        f.write_all(body)?;
        f.sync_all()?;
        renameat(dir, tmp.as_c_str(), dir, dst.as_c_str())?;
        // The rename is done; a directory that cannot be synced only loses durability.
        let _ = fsync(dir);
        Ok(())
    })();
    if res.is_err() {
        let _ = unlinkat(dir, tmp.as_c_str(), UnlinkatFlags::NoRemoveDir);
    }
    res
}

/// 64 random bits for a temporary name (not predictable from the pid or the time).
fn random() -> u64 {
    let mut v = [0u8; 8];
    // SAFETY: getrandom into a local buffer of its length (nix has no wrapper for it).
    let n = unsafe { libc::getrandom(v.as_mut_ptr().cast(), v.len(), 0) };
    if n != 8 {
        // No entropy source: the time still differs between tries; O_EXCL keeps it safe.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        return t ^ u64::from(std::process::id()).rotate_left(32);
    }
    u64::from_ne_bytes(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::path::Path;

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_with_the_mode_and_leaves_no_temporary_file() {
        let d = std::env::temp_dir().join(format!("node-atomic-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let dir = std::fs::File::open(&d).unwrap();
        replace(dir.as_fd(), "a.prom", b"one\n", 0o644).unwrap();
        replace(dir.as_fd(), "a.prom", b"two\n", 0o644).unwrap();
        assert_eq!(std::fs::read(d.join("a.prom")).unwrap(), b"two\n");
        let m = std::fs::metadata(d.join("a.prom")).unwrap();
        assert_eq!(m.permissions().mode() & 0o7777, 0o644);
        replace(dir.as_fd(), "b", b"", 0o600).unwrap();
        let m = std::fs::metadata(d.join("b")).unwrap();
        assert_eq!((m.permissions().mode() & 0o7777, m.len()), (0o600, 0));
        assert_eq!(names(&d), ["a.prom", "b"]);
        // A name with a NUL byte is refused before anything is created.
        let e = replace(dir.as_fd(), "c\0d", b"x", 0o600).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(names(&d), ["a.prom", "b"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A link (or file) planted at the temporary name is never written through: another name is
    /// taken; a link at the final name is replaced, not followed; after too many taken names the
    /// write fails and leaves the old file.
    #[test]
    fn planted_links_are_never_written_through() {
        let d = std::env::temp_dir().join(format!("node-atomic-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("out")).unwrap();
        let victim = d.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        let out = d.join("out");
        let dir = std::fs::File::open(&out).unwrap();
        symlink(&victim, out.join(".a.tmp.planted")).unwrap();
        let mut given = vec![".a.tmp.mine".to_string(), ".a.tmp.planted".to_string()];
        replace_with(dir.as_fd(), "a", b"metrics\n", 0o644, || {
            given.pop().unwrap()
        })
        .unwrap();
        assert!(
            given.is_empty(),
            "the planted name was skipped, the next one taken"
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "metrics\n");
        // A link at the final name is replaced, not followed.
        std::fs::remove_file(out.join("a")).unwrap();
        symlink(&victim, out.join("a")).unwrap();
        replace(dir.as_fd(), "a", b"new\n", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let m = std::fs::symlink_metadata(out.join("a")).unwrap();
        assert!(m.is_file(), "{m:?}");
        // Every name taken: the write fails after TRIES names, the old content stays.
        let mut tried = 0;
        let e = replace_with(dir.as_fd(), "a", b"newer\n", 0o644, || {
            tried += 1;
            ".a.tmp.planted".to_string()
        })
        .unwrap_err();
        assert_eq!(
            (e.raw_os_error(), tried),
            (Some(libc::EEXIST), TRIES),
            "{e}"
        );
        assert_eq!(std::fs::read_to_string(out.join("a")).unwrap(), "new\n");
        assert_eq!(names(&out), [".a.tmp.planted", "a"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A rename that fails (a directory sits at the final name) removes the temporary file.
    #[test]
    fn a_failed_rename_removes_the_temporary_file() {
        let d = std::env::temp_dir().join(format!("node-atomic-fail-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a/x")).unwrap();
        let dir = std::fs::File::open(&d).unwrap();
        let e = replace(dir.as_fd(), "a", b"x", 0o600).unwrap_err();
        assert!(
            matches!(e.raw_os_error(), Some(libc::EISDIR | libc::ENOTEMPTY)),
            "{e}"
        );
        assert_eq!(names(&d), ["a"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
