//! Small JSON state files: one per check and source, written atomically (temp file in the same
//! directory, fsync, rename, fsync of the directory), so a check killed mid-write leaves the old
//! state, never half a file.
//!
//! Writes cannot be redirected (a check may run as root in a directory another user can write):
//! - the directory is opened `O_DIRECTORY|O_NOFOLLOW` and every later step is relative to that
//!   descriptor (`openat`, `renameat`), so swapping a path component afterwards changes nothing;
//! - a directory owned by someone other than the effective user or root, or writable by group or
//!   others without the sticky bit, is refused with a note: nothing is read from it or written to it;
//! - the temp file has a random name and is created `O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`: a planted
//!   symlink or hard link at that name makes the create fail (another name is tried), never write
//!   through; the final `renameat` replaces whatever sits at the final name (a link included)
//!   without following it;
//! - reads open the state file `O_NOFOLLOW` (a symlink is ignored with a note) and read at most
//!   [`MAX_STATE_BYTES`].

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The largest state file read back (a state holds at most a few thousand kept entries).
pub const MAX_STATE_BYTES: u64 = 16 << 20;

/// Kept entries (failures, kernel records) dated later than this after now are not trusted: they
/// come from a clock that was set back or a state that is not this node's, and kept, they would
/// start counting once the clock reaches them. Clock skew below this is tolerated.
pub const FUTURE_SLACK_MS: i64 = 300_000;

/// True when epoch-ms `t` lies beyond [`FUTURE_SLACK_MS`] after `now`.
pub fn from_future(t: i64, now: i64) -> bool {
    t > now + FUTURE_SLACK_MS
}

/// Drop the entries of `v` dated in the future (by `t`, epoch ms); returns how many went.
pub fn drop_future<T>(v: &mut Vec<T>, now: i64, t: impl Fn(&T) -> i64) -> usize {
    let before = v.len();
    v.retain(|x| !from_future(t(x), now));
    before - v.len()
}

/// `<dir>/<check>.<source id>.json`; the source id is reduced to `[A-Za-z0-9._-]`.
pub fn path(dir: &Path, check: &str, source: &str) -> PathBuf {
    let id: String = source
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let id = id.trim_matches('_');
    let id = if id.len() > 150 {
        &id[id.len() - 150..]
    } else {
        id
    };
    dir.join(format!("{check}.{id}.json"))
}

fn cstr(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| format!("{} holds a NUL byte", p.display()))
}

fn last_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Why a state directory cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub enum DirError {
    /// It could not be opened (missing, not a directory, a symlink, no permission): the reason.
    Open(String),
    /// It was opened but its owner or mode make it unsafe: the whole note.
    Refused(String),
}

/// A state directory opened for safe use: a descriptor every read and write is relative to.
pub struct StateDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Why a directory's owner and mode make it unsafe for this process, if they do.
/// `uid`/`mode` are the directory's, `euid` the process's effective user.
pub fn unsafe_dir_reason(uid: u32, mode: u32, euid: u32) -> Option<String> {
    if uid != euid && uid != 0 {
        return Some(format!(
            "it is owned by uid {uid}, neither this process's user (uid {euid}) nor root"
        ));
    }
    let sticky = mode & libc::S_ISVTX != 0;
    if mode & 0o022 != 0 && !sticky {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group and others",
            (true, false) => "its group",
            _ => "others",
        };
        return Some(format!(
            "it is writable by {who} (mode {:04o}) without the sticky bit",
            mode & 0o7777
        ));
    }
    None
}

impl StateDir {
    /// Open `dir` (creating it when `create` and it is missing) and check its owner and mode.
    pub fn open(dir: &Path, create: bool) -> Result<StateDir, DirError> {
        let c = cstr(dir).map_err(DirError::Open)?;
        let open = || {
            // SAFETY: a NUL-terminated path; the descriptor is owned below.
            unsafe {
                libc::open(
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            }
        };
        let mut fd = open();
        if fd < 0 && create && last_err().raw_os_error() == Some(libc::ENOENT) {
            if let Err(e) = std::fs::create_dir_all(dir) {
                return Err(DirError::Open(format!(
                    "cannot create its directory: {}",
                    plugin::errtext(&e)
                )));
            }
            fd = open();
        }
        if fd < 0 {
            let e = last_err();
            let why = match e.raw_os_error() {
                Some(libc::ELOOP | libc::ENOTDIR)
                    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) =>
                {
                    "it is a symbolic link (not followed)".to_string()
                }
                _ => plugin::errtext(&e),
            };
            return Err(DirError::Open(format!("{}: {why}", dir.display())));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: fstat into a zeroed struct we own, on our descriptor.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(DirError::Open(format!(
                "{}: {}",
                dir.display(),
                plugin::errtext(&last_err())
            )));
        }
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        if let Some(why) = unsafe_dir_reason(st.st_uid, st.st_mode, euid) {
            return Err(DirError::Refused(format!(
                "state directory {} refused: {why}; another user could redirect or forge the state, so it is neither read nor written (make it owned by this user, mode 0750 or 0700)",
                dir.display()
            )));
        }
        Ok(StateDir {
            fd,
            path: dir.to_path_buf(),
        })
    }

    /// The bytes of the file `name` in this directory, `Ok(None)` when there is none. A
    /// symbolic link, a non-regular file or a file over `max` bytes is an error.
    pub fn read(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>, String> {
        let shown = self.path.join(name);
        let c = CString::new(name).map_err(|_| format!("{} holds a NUL byte", shown.display()))?;
        // SAFETY: openat on our directory descriptor with a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            let e = last_err();
            return match e.raw_os_error() {
                Some(libc::ENOENT) => Ok(None),
                Some(libc::ELOOP) => Err(format!(
                    "state file {} is a symbolic link: ignored (not followed)",
                    shown.display()
                )),
                _ => Err(format!(
                    "cannot read state file {}: {}",
                    shown.display(),
                    plugin::errtext(&e)
                )),
            };
        }
        // SAFETY: fd is a fresh descriptor we own.
        let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let md = f.metadata().map_err(|e| {
            format!(
                "cannot read state file {}: {}",
                shown.display(),
                plugin::errtext(&e)
            )
        })?;
        if md.is_dir() {
            return Err(format!(
                "cannot read state file {}: {}",
                shown.display(),
                plugin::errtext(&std::io::Error::from_raw_os_error(libc::EISDIR))
            ));
        }
        if !md.is_file() {
            return Err(format!(
                "cannot read state file {}: not a regular file",
                shown.display()
            ));
        }
        let mut b = Vec::new();
        (&f).take(max + 1).read_to_end(&mut b).map_err(|e| {
            format!(
                "cannot read state file {}: {}",
                shown.display(),
                plugin::errtext(&e)
            )
        })?;
        if b.len() as u64 > max {
            return Err(format!(
                "state file {} is larger than {} (the cap of a state file): ignored",
                shown.display(),
                plugin::fmt_bytes(max)
            ));
        }
        Ok(Some(b))
    }

    /// Remove the file `name` from this directory (a link itself, never what it points at).
    pub fn remove(&self, name: &str) {
        if let Ok(c) = CString::new(name) {
            // SAFETY: unlinkat of a name in our directory descriptor.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
    }

    /// Replace the file `name` in this directory by `body`, atomically and without following
    /// any link.
    pub fn write(&self, name: &str, body: &[u8]) -> Result<(), String> {
        let shown = self.path.join(name);
        let fail = |e: std::io::Error| {
            format!(
                "cannot write state file {}: {}",
                shown.display(),
                plugin::errtext(&e)
            )
        };
        let dst =
            CString::new(name).map_err(|_| format!("{} holds a NUL byte", shown.display()))?;
        let dfd = self.fd.as_raw_fd();
        let mut tries = 0;
        let (tmp, fd) = loop {
            let tmp = CString::new(format!(
                ".{name}.tmp.{}.{:016x}",
                std::process::id(),
                random()
            ))
            .map_err(|_| format!("{} holds a NUL byte", shown.display()))?;
            // SAFETY: openat on our directory descriptor with a NUL-terminated name.
            let fd = unsafe {
                libc::openat(
                    dfd,
                    tmp.as_ptr(),
                    libc::O_WRONLY
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600 as libc::c_uint,
                )
            };
            if fd >= 0 {
                break (tmp, fd);
            }
            let e = last_err();
            tries += 1;
            if e.raw_os_error() != Some(libc::EEXIST) || tries >= 16 {
                return Err(fail(e));
            }
        };
        // SAFETY: fd is a fresh descriptor we own.
        let mut f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let res = (|| -> std::io::Result<()> {
            f.write_all(body)?;
            f.sync_all()?;
            // SAFETY: renameat within our directory descriptor, NUL-terminated names.
            if unsafe { libc::renameat(dfd, tmp.as_ptr(), dfd, dst.as_ptr()) } != 0 {
                return Err(last_err());
            }
            // SAFETY: fsync of our directory descriptor.
            unsafe { libc::fsync(dfd) };
            Ok(())
        })();
        if let Err(e) = res {
            // SAFETY: unlinkat of the temp name we created, in our directory.
            unsafe { libc::unlinkat(dfd, tmp.as_ptr(), 0) };
            return Err(fail(e));
        }
        Ok(())
    }
}

/// 64 random bits for a temp name (not predictable from the pid or the time).
fn random() -> u64 {
    let mut v = [0u8; 8];
    // SAFETY: getrandom into a local buffer of its length.
    let n = unsafe { libc::getrandom(v.as_mut_ptr().cast(), v.len(), 0) };
    if n != 8 {
        // No entropy source: the time still differs between tries; O_EXCL keeps it safe.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        return t ^ (std::process::id() as u64).rotate_left(32);
    }
    u64::from_ne_bytes(v)
}

fn split(path: &Path) -> Result<(&Path, &str), String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("state file {} has no usable name", path.display()))?;
    Ok((dir, name))
}

/// Read a state file. `Ok(None)` when there is none yet (or no directory yet); `Err` when it
/// exists but cannot be read or parsed, or its directory is refused (the caller starts afresh
/// and says so).
pub fn load<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    let (dir, name) = split(path)?;
    let d = match StateDir::open(dir, false) {
        Ok(d) => d,
        Err(_) if std::fs::symlink_metadata(dir).is_err() => return Ok(None),
        Err(DirError::Refused(e)) => return Err(e),
        Err(DirError::Open(e)) => {
            return Err(format!("cannot read state file {}: {e}", path.display()))
        }
    };
    let Some(b) = d.read(name, MAX_STATE_BYTES)? else {
        return Ok(None);
    };
    serde_json::from_slice(&b).map(Some).map_err(|e| {
        format!(
            "state file {} is unreadable ({e}); starting afresh",
            path.display()
        )
    })
}

/// Write a state file atomically (see the module doc), creating its directory if needed.
pub fn save<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let (dir, name) = split(path)?;
    let body = serde_json::to_vec(value).map_err(|e| format!("cannot encode state: {e}"))?;
    match StateDir::open(dir, true) {
        Ok(d) => d.write(name, &body),
        Err(DirError::Refused(e)) => Err(e),
        Err(DirError::Open(e)) => Err(format!("cannot write state file {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_names() {
        let dir = std::env::temp_dir().join(format!("state-test-{}", std::process::id()));
        let p = path(&dir, "kubelet_nested_ops", "file:/var/log/kubelet.log");
        assert_eq!(
            p.file_name().unwrap().to_str().unwrap(),
            "kubelet_nested_ops.file__var_log_kubelet.log.json"
        );
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), None);
        save(&p, &vec![1u32, 2]).unwrap();
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![1, 2]));
        std::fs::write(&p, b"{garbled").unwrap();
        assert!(load::<Vec<u32>>(&p).is_err());
        // No temp files are left behind.
        save(&p, &vec![3u32]).unwrap();
        let n = std::fs::read_dir(&dir).unwrap().count();
        assert_eq!(n, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unsafe_directories_are_named() {
        assert_eq!(unsafe_dir_reason(1000, 0o40750, 1000), None);
        assert_eq!(unsafe_dir_reason(0, 0o40755, 1000), None);
        assert_eq!(unsafe_dir_reason(0, 0o41777, 0), None, "sticky /tmp-like");
        assert!(unsafe_dir_reason(1000, 0o40700, 0)
            .unwrap()
            .contains("owned by uid 1000"));
        assert!(unsafe_dir_reason(0, 0o40770, 0)
            .unwrap()
            .contains("writable by its group (mode 0770)"));
        assert!(unsafe_dir_reason(0, 0o40777, 0)
            .unwrap()
            .contains("group and others"));
    }

    #[test]
    fn links_are_never_followed() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("state-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, b"precious").unwrap();
        let p = dir.join("c.src.json");
        symlink(&target, &p).unwrap();
        // Reading: a symlinked state file is ignored with a note.
        let e = load::<Vec<u32>>(&p).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // Writing replaces the link itself, never the file it points at.
        save(&p, &vec![7u32]).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&p).unwrap().is_file());
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![7]));
        // A state directory that is a symlink is refused.
        let via = dir.join("via");
        symlink(&dir, &via).unwrap();
        let e = save(&via.join("c.src.json"), &vec![1u32]).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // A group-writable directory is refused for reading and writing.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = save(&p, &vec![8u32]).unwrap_err();
        assert!(e.contains("refused") && e.contains("its group"), "{e}");
        assert!(load::<Vec<u32>>(&p).unwrap_err().contains("refused"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1770)).unwrap();
        save(&p, &vec![9u32]).unwrap();
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![9]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn oversized_state_is_ignored() {
        let dir = std::env::temp_dir().join(format!("state-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = StateDir::open(&dir, false).unwrap();
        d.write("big", &[b' '; 100]).unwrap();
        assert!(d.read("big", 99).unwrap_err().contains("larger than 99 B"));
        assert_eq!(d.read("big", 100).unwrap().unwrap().len(), 100);
        assert_eq!(d.read("none", 100).unwrap(), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
