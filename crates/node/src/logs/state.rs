//! Small JSON state files: one per check and source, written atomically by
//! [`crate::atomic::replace`] (temp file in the same directory, fsync, rename, fsync of the
//! directory), so a check killed mid-write leaves the old state, never half a file.
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

use nix::fcntl::{renameat, AtFlags, OFlag, AT_FDCWD};
use nix::sys::stat::{fstatat, mkdirat, FileStat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};
use std::ffi::{CStr, CString};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
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

/// A backwards clock step seen in a kept state: the state was written, or holds entries dated,
/// later than now (beyond [`FUTURE_SLACK_MS`]). `saved_ms` is when the state was written (by the
/// wall clock of that run), `newest` its newest kept entry. Returns how far ahead the state is
/// (ms). A state's position (sequence number, inode + offset, cursor) says nothing about the
/// clock; after such a step the caller re-reads its source from its start, so that what the
/// source still holds is dated again with the clock of now, rather than trusting entries that
/// only the future would count.
pub fn clock_went_back(saved_ms: Option<i64>, newest: Option<i64>, now: i64) -> Option<i64> {
    let ahead = saved_ms.into_iter().chain(newest).max()?;
    from_future(ahead, now).then_some(ahead - now)
}

/// The note a check gives, once, on the run that sees a backwards clock step (`ahead_ms`: how
/// far the state is ahead of now).
pub fn clock_note(state: &Path, ahead_ms: i64, dropped: usize, source: &str) -> String {
    format!(
        "the clock was set back: state file {} is {} ahead of now ({dropped} kept entr{} dated after now dropped); {source} is read again from its start so that what it still holds counts",
        state.display(),
        plugin::fmt_duration(std::time::Duration::from_millis(u64::try_from(ahead_ms).unwrap_or(0))),
        if dropped == 1 { "y" } else { "ies" }
    )
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
/// A directory writable by group or others is refused unless it is this user's own (the sticky
/// bit does not help: another user may still plant a file under the name a state will have).
pub fn unsafe_dir_reason(uid: u32, mode: u32, euid: u32) -> Option<String> {
    if uid != euid && uid != 0 {
        return Some(format!(
            "it is owned by uid {uid}, neither this process's user (uid {euid}) nor root"
        ));
    }
    if mode & 0o022 != 0 && uid != euid {
        let who = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group and others",
            (true, false) => "its group",
            _ => "others",
        };
        let sticky = if mode & libc::S_ISVTX != 0 {
            ", sticky or not"
        } else {
            ""
        };
        return Some(format!(
            "it is writable by {who} (mode {:04o}{sticky}) and not this process's user's own (uid {euid})",
            mode & 0o7777
        ));
    }
    None
}

/// Why a directory on the way to a state directory cannot be gone through, if it cannot: one
/// owned by another user than root or this process's (it could swap the next component for a
/// link to anywhere, and a root run would create or write there).
fn unsafe_component_reason(uid: u32, euid: u32) -> Option<String> {
    (uid != euid && uid != 0).then(|| {
        format!("it is owned by uid {uid}, neither this process's user (uid {euid}) nor root")
    })
}

/// The effective user.
fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

fn fstat(fd: impl AsFd) -> std::io::Result<FileStat> {
    Ok(nix::sys::stat::fstat(fd)?)
}

/// `openat(2)` of `name` under `dir`, always `O_CLOEXEC`; `mode` for a file `O_CREAT` makes.
fn openat(dir: impl AsFd, name: &CStr, flags: OFlag, mode: u32) -> std::io::Result<OwnedFd> {
    let mode = Mode::from_bits_truncate(mode);
    Ok(nix::fcntl::openat(
        dir,
        name,
        flags | OFlag::O_CLOEXEC,
        mode,
    )?)
}

/// The most symbolic links followed on the way to a state directory.
const MAX_LINKS: usize = 40;

/// Open the directory `dir` by walking it component by component from `/` (or the working
/// directory) with `openat(O_NOFOLLOW)`, never through a directory or a symbolic link owned by
/// another user than root or this process's (a link of root's or ours is followed, resolved the
/// same way). Missing components are created (`mkdirat`) when `create`. The last component must
/// be a directory itself, not a link. Returns the opened directory (`O_RDONLY`).
fn walk(dir: &Path, create: bool) -> Result<OwnedFd, DirError> {
    use std::path::Component;
    let euid = euid();
    let shown = dir.display();
    let open_err = |e: std::io::Error| DirError::Open(format!("{shown}: {}", plugin::errtext(&e)));
    let start = |abs: bool| -> Result<OwnedFd, DirError> {
        let c = if abs { c"/" } else { c"." };
        openat(AT_FDCWD, c, OFlag::O_PATH | OFlag::O_DIRECTORY, 0).map_err(open_err)
    };
    // Components still to go, last first.
    let mut todo: Vec<std::ffi::OsString> = Vec::new();
    let push_path = |todo: &mut Vec<std::ffi::OsString>, p: &Path| -> bool {
        let mut v: Vec<std::ffi::OsString> = Vec::new();
        for c in p.components() {
            match c {
                Component::Normal(n) => v.push(n.to_owned()),
                Component::ParentDir => v.push("..".into()),
                Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
            }
        }
        v.reverse();
        todo.extend(v);
        p.has_root()
    };
    let abs = push_path(&mut todo, dir);
    let mut cur = start(abs)?;
    let mut links = 0;
    let mut walked = if abs {
        PathBuf::from("/")
    } else {
        PathBuf::new()
    };
    while let Some(name) = todo.pop() {
        let last = todo.is_empty();
        let c = CString::new(name.as_bytes())
            .map_err(|_| DirError::Open(format!("{shown} holds a NUL byte")))?;
        let here = walked.join(&name);
        let flags = OFlag::O_DIRECTORY
            | OFlag::O_NOFOLLOW
            | if last { OFlag::O_RDONLY } else { OFlag::O_PATH };
        let next = match openat(&cur, &c, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && create => {
                let mode = Mode::from_bits_truncate(if last { 0o750 } else { 0o755 });
                match mkdirat(&cur, c.as_c_str(), mode) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => {
                        return Err(DirError::Open(format!(
                            "cannot create its directory {}: {}",
                            here.display(),
                            plugin::errtext(&std::io::Error::from(e))
                        )));
                    }
                }
                openat(&cur, &c, flags, 0).map_err(open_err)?
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                // A symbolic link (or not a directory at all): looked at without following it.
                let st = match fstatat(&cur, c.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => st,
                    _ => return Err(open_err(e)),
                };
                if last {
                    return Err(DirError::Open(format!(
                        "{shown}: it is a symbolic link (not followed)"
                    )));
                }
                if let Some(why) = unsafe_component_reason(st.st_uid, euid) {
                    return Err(DirError::Refused(format!(
                        "state directory {shown} refused: the symbolic link {} on its way is not followed: {why}; another user could point it anywhere (give a path through directories of root's or this user's only)",
                        here.display()
                    )));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(open_err(std::io::Error::from_raw_os_error(libc::ELOOP)));
                }
                let target = nix::fcntl::readlinkat(&cur, c.as_c_str())
                    .map(PathBuf::from)
                    .map_err(|e| open_err(e.into()))?;
                if push_path(&mut todo, &target) {
                    cur = start(true)?;
                    walked = PathBuf::from("/");
                }
                continue;
            }
            Err(e) => return Err(open_err(e)),
        };
        let st = fstat(&next).map_err(open_err)?;
        // The state directory's own parent may be another user's (the role's sudo mode keeps
        // root's state in `<agent's state dir>/root`): the directory itself is opened without
        // following a link and must be root's or ours, so that user can only delete it. What lies
        // further up is never gone through when another user owns it.
        let parent_of_last = todo.len() == 1;
        if !last && !parent_of_last {
            if let Some(why) = unsafe_component_reason(st.st_uid, euid) {
                return Err(DirError::Refused(format!(
                    "state directory {shown} refused: the directory {} on its way is not gone through: {why}; another user could redirect it (give a path through directories of root's or this user's only)",
                    here.display()
                )));
            }
        }
        walked = here;
        cur = next;
    }
    if walked.as_os_str().is_empty() || walked == Path::new("/") {
        // `.` or `/` itself: reopen readable.
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY;
        cur = openat(&cur, c".", flags, 0).map_err(open_err)?;
    }
    Ok(cur)
}

impl StateDir {
    /// Open `dir` (creating it when `create` and it is missing) and check its owner and mode.
    /// It is reached component by component from `/`, never through a directory or link of
    /// another user (see [`walk`]).
    pub fn open(dir: &Path, create: bool) -> Result<StateDir, DirError> {
        let fd = walk(dir, create)?;
        let st = fstat(&fd)
            .map_err(|e| DirError::Open(format!("{}: {}", dir.display(), plugin::errtext(&e))))?;
        if let Some(why) = unsafe_dir_reason(st.st_uid, st.st_mode, euid()) {
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
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let fd = match openat(&self.fd, &c, flags, 0) {
            Ok(fd) => fd,
            Err(e) => {
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
                }
            }
        };
        let f = std::fs::File::from(fd);
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
        {
            use std::os::unix::fs::MetadataExt;
            let euid = euid();
            if md.uid() != euid {
                return Err(format!(
                    "state file {} is owned by uid {}, not this process's user (uid {euid}): ignored, another user may have planted it (the source is read afresh)",
                    shown.display(),
                    md.uid()
                ));
            }
            if md.nlink() > 1 {
                return Err(format!(
                    "state file {} has {} hard links: ignored, it may be another file's (the source is read afresh)",
                    shown.display(),
                    md.nlink()
                ));
            }
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

    /// Where this directory is, as the operator named it (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Create or open `name` for appending (created 0640; with `excl`, only a new file), never
    /// through a link; anything but a regular file of this user with one link is refused.
    /// The file and its size.
    pub fn open_append(&self, name: &str, excl: bool) -> Result<(std::fs::File, u64), String> {
        let shown = self.path.join(name);
        let c = CString::new(name).map_err(|_| format!("{} holds a NUL byte", shown.display()))?;
        let flags = OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_CREAT
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | if excl { OFlag::O_EXCL } else { OFlag::empty() };
        let file = std::fs::File::from(openat(&self.fd, &c, flags, 0o640).map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                format!("{} is a symbolic link: not written", shown.display())
            } else {
                format!("{}: {}", shown.display(), plugin::errtext(&e))
            }
        })?);
        let st =
            fstat(&file).map_err(|e| format!("{}: {}", shown.display(), plugin::errtext(&e)))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(format!(
                "{} is not a regular file: not written",
                shown.display()
            ));
        }
        if st.st_nlink > 1 {
            return Err(format!(
                "{} has {} hard links: not written (it may be another file)",
                shown.display(),
                st.st_nlink
            ));
        }
        if st.st_uid != euid() {
            return Err(format!(
                "{} is owned by uid {}, not this user: not written",
                shown.display(),
                st.st_uid
            ));
        }
        Ok((file, u64::try_from(st.st_size).unwrap_or(0)))
    }

    /// Rename `from` to `to` within this directory (replacing `to`); a missing `from` is no
    /// error.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), String> {
        let (Ok(f), Ok(t)) = (CString::new(from), CString::new(to)) else {
            return Err(format!("{from} or {to} holds a NUL byte"));
        };
        match renameat(&self.fd, f.as_c_str(), &self.fd, t.as_c_str()) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(format!(
                "cannot rename {} to {to}: {}",
                self.path.join(from).display(),
                plugin::errtext(&std::io::Error::from(e))
            )),
        }
    }

    /// The last `max` bytes of the regular file `name` (never through a link); `None` when
    /// there is no such file or it cannot be read.
    pub fn read_tail(&self, name: &str, max: u64) -> Option<Vec<u8>> {
        use std::io::Seek;
        let c = CString::new(name).ok()?;
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK;
        let mut f = std::fs::File::from(openat(&self.fd, &c, flags, 0).ok()?);
        let st = fstat(&f).ok()?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return None;
        }
        f.seek(std::io::SeekFrom::Start(
            u64::try_from(st.st_size).unwrap_or(0).saturating_sub(max),
        ))
        .ok()?;
        let mut b = Vec::new();
        f.take(max).read_to_end(&mut b).ok()?;
        Some(b)
    }

    /// Remove the file `name` from this directory (a link itself, never what it points at).
    pub fn remove(&self, name: &str) {
        let _ = unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir);
    }

    /// Replace the file `name` in this directory by `body` (mode 0600), atomically and without
    /// following any link ([`crate::atomic::replace`]).
    pub fn write(&self, name: &str, body: &[u8]) -> Result<(), String> {
        let shown = self.path.join(name);
        let fail = |e: std::io::Error| {
            format!(
                "cannot write state file {}: {}",
                shown.display(),
                plugin::errtext(&e)
            )
        };
        if name.contains('\0') {
            return Err(format!("{} holds a NUL byte", shown.display()));
        }
        crate::atomic::replace(self.fd.as_fd(), name, body, 0o600).map_err(fail)
    }
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

/// The bytes of a state file of at most `max` bytes, read as [`StateDir::read`] reads.
/// `Ok(None)` when there is none yet (or no directory yet); `Err` when it exists but cannot be
/// read, is larger than `max`, or its directory is refused (the caller starts afresh and says so).
pub fn read_bytes(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    let (dir, name) = split(path)?;
    let d = match StateDir::open(dir, false) {
        Ok(d) => d,
        Err(_) if std::fs::symlink_metadata(dir).is_err() => return Ok(None),
        Err(DirError::Refused(e)) => return Err(e),
        Err(DirError::Open(e)) => {
            return Err(format!("cannot read state file {}: {e}", path.display()))
        }
    };
    d.read(name, max)
}

/// Read a state file. `Ok(None)` when there is none yet (or no directory yet); `Err` when it
/// exists but cannot be read or parsed, or its directory is refused (the caller starts afresh
/// and says so).
pub fn load<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, String> {
    let Some(b) = read_bytes(path, MAX_STATE_BYTES)? else {
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
        assert!(unsafe_dir_reason(0, 0o40770, 1000)
            .unwrap()
            .contains("writable by its group (mode 0770)"));
        assert!(unsafe_dir_reason(0, 0o40777, 1000)
            .unwrap()
            .contains("group and others"));
        // Issue 27, finding 2: a sticky directory others may write is refused too, unless it is
        // this user's own.
        assert!(unsafe_dir_reason(0, 0o41777, 1000)
            .unwrap()
            .contains("mode 1777, sticky or not"));
        assert_eq!(unsafe_dir_reason(1000, 0o40770, 1000), None);
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
        // A group-writable directory of this user's own is used (a file planted in it is
        // refused by its owner, see `planted_files_and_foreign_links_are_refused`).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1770)).unwrap();
        save(&p, &vec![9u32]).unwrap();
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![9]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 27, findings 2 and 8 (as root, the attacker being uid 65534): a state file another
    /// user planted is refused, and so is a path through another user's directory or link, for
    /// reading and for creating directories.
    #[test]
    fn planted_files_and_foreign_links_are_refused() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        if euid() != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        let chown = |p: &Path, follow: bool| {
            use nix::unistd::{fchownat, Gid, Uid};
            let flags = if follow {
                AtFlags::empty()
            } else {
                AtFlags::AT_SYMLINK_NOFOLLOW
            };
            let (u, g) = (Some(Uid::from_raw(65534)), Some(Gid::from_raw(65534)));
            fchownat(AT_FDCWD, p, u, g, flags).unwrap();
        };
        let base = std::env::temp_dir().join(format!("state-foreign-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).unwrap();
        // A planted state file in this user's directory: refused by its owner.
        let p = base.join("c.src.json");
        std::fs::write(&p, b"[1]").unwrap();
        chown(&p, true);
        let e = load::<Vec<u32>>(&p).unwrap_err();
        assert!(
            e.contains("owned by uid 65534") && e.contains("planted"),
            "{e}"
        );
        // Rewritten, it is this user's again.
        save(&p, &vec![2u32]).unwrap();
        assert_eq!(load::<Vec<u32>>(&p).unwrap(), Some(vec![2]));
        // A directory of another user on the way, and a link of another user to elsewhere.
        let theirs = base.join("theirs");
        let target = base.join("target");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::create_dir_all(&target).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
        chown(&theirs, true);
        let e = save(&theirs.join("a/new/c.json"), &vec![1u32]).unwrap_err();
        assert!(e.contains("refused") && e.contains("theirs"), "{e}");
        assert!(!theirs.join("a").exists());
        // Its directory may sit right in another user's (sudo mode: `<agent's dir>/root`).
        save(&theirs.join("root/c.json"), &vec![4u32]).unwrap();
        assert_eq!(
            load::<Vec<u32>>(&theirs.join("root/c.json")).unwrap(),
            Some(vec![4])
        );
        let link = base.join("link");
        symlink(&target, &link).unwrap();
        chown(&link, false);
        let e = save(&link.join("newdir/c.json"), &vec![1u32]).unwrap_err();
        assert!(
            e.contains("symbolic link") && e.contains("not followed"),
            "{e}"
        );
        assert!(!target.join("newdir").exists(), "created through the link");
        // A link of this user's own is followed, and the directory made behind it.
        let mine = base.join("mine");
        symlink(&target, &mine).unwrap();
        save(&mine.join("newdir/c.json"), &vec![3u32]).unwrap();
        assert_eq!(
            load::<Vec<u32>>(&target.join("newdir/c.json")).unwrap(),
            Some(vec![3])
        );
        std::fs::remove_dir_all(&base).unwrap();
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
