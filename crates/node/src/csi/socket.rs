//! Connecting to a plugin's unix socket without following a link out of the kubelet root.
//!
//! The check runs as root in a privileged setup, and the sockets it connects to live in
//! directories that the plugin pods themselves write (`plugins_registry/`, `plugins/<driver>/`,
//! both hostPath mounts of those pods), and the driver's endpoint is whatever the registration
//! service answers. A pod that plants `plugins_registry/x-reg.sock -> /run/containerd/containerd.sock`
//! or answers GetInfo with `endpoint: /var/run/docker.sock` must not make the check talk to
//! another daemon's socket. So a socket is reached only as a path beneath a kubelet root
//! (lexically: absolute, no `..`), walked one component at a time from the root with
//! `O_PATH | O_NOFOLLOW` (a link anywhere below the root is refused, never followed; the root
//! itself is the operator's and may be a link), the last component must be a socket, and the
//! connection is made to that very inode through `/proc/self/fd/N` (no second lookup by name
//! that a rename could redirect).

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path, PathBuf};

/// Why a socket was not connected to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketError {
    /// Nothing at that path (the socket is gone).
    Missing(String),
    /// Refused by the rules above: outside the kubelet roots, a link, not a socket.
    Refused(String),
    /// connect(2) or open failed otherwise (ECONNREFUSED: no process listens).
    Failed(String),
}

impl std::fmt::Display for SocketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SocketError::Missing(s) | SocketError::Refused(s) | SocketError::Failed(s) => {
                f.write_str(s)
            }
        }
    }
}

/// The kubelet root `path` lies beneath (lexically) and the components below it: `None` when
/// it is not beneath any (or is relative, or has `..`/`.` components).
pub fn beneath<'a>(path: &'a Path, roots: &'a [PathBuf]) -> Option<(&'a Path, Vec<&'a str>)> {
    if !path.is_absolute() {
        return None;
    }
    let comps: Vec<Component> = path.components().collect();
    if comps
        .iter()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return None;
    }
    for r in roots {
        if let Ok(rest) = path.strip_prefix(r) {
            let parts: Option<Vec<&str>> =
                rest.components().map(|c| c.as_os_str().to_str()).collect();
            let parts = parts?;
            if parts.is_empty() {
                return None;
            }
            return Some((r.as_path(), parts));
        }
    }
    None
}

fn errno_text(e: nix::errno::Errno) -> String {
    plugin::errtext(&std::io::Error::from(e))
}

/// Open the socket at `path` (a host path) beneath one of `roots` (host paths), `real` mapping
/// a host path to where this process sees it (`Host::mount_path`), as an `O_PATH` descriptor.
pub fn open_beneath(
    path: &Path,
    roots: &[PathBuf],
    real: impl Fn(&Path) -> PathBuf,
) -> Result<OwnedFd, SocketError> {
    let shown = path.display();
    let Some((root, parts)) = beneath(path, roots) else {
        return Err(SocketError::Refused(format!(
            "{shown} is not beneath the kubelet root ({}): not connected (this check connects only to sockets there)",
            roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
        )));
    };
    let root_real = real(root);
    let mut fd: OwnedFd = std::fs::File::open(&root_real)
        .map(OwnedFd::from)
        .map_err(|e| SocketError::Failed(format!("{}: {}", root.display(), plugin::errtext(&e))))?;
    let last = parts.len() - 1;
    let mut so_far = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        so_far.push(part);
        let dir = if i < last {
            OFlag::O_DIRECTORY
        } else {
            OFlag::empty()
        };
        let next = openat(
            &fd,
            *part,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | dir,
            Mode::empty(),
        );
        fd = match next {
            Ok(f) => f,
            Err(nix::errno::Errno::ENOENT) => {
                return Err(SocketError::Missing(format!("{}: no such file", so_far.display())))
            }
            Err(nix::errno::Errno::ELOOP) | Err(nix::errno::Errno::ENOTDIR) => {
                return Err(SocketError::Refused(format!(
                    "{}: a symbolic link or not a directory: not followed (a link beneath the kubelet root could lead the check to another socket)",
                    so_far.display()
                )))
            }
            Err(e) => {
                return Err(SocketError::Failed(format!("{}: {}", so_far.display(), errno_text(e))))
            }
        };
    }
    let st = fstat(&fd).map_err(|e| SocketError::Failed(format!("{shown}: {}", errno_text(e))))?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFLNK {
        return Err(SocketError::Refused(format!(
            "{shown} is a symbolic link: not followed (it could lead the check to another socket)"
        )));
    }
    if kind != SFlag::S_IFSOCK {
        return Err(SocketError::Refused(format!("{shown} is not a socket")));
    }
    Ok(fd)
}

/// Connect to the socket an [`open_beneath`] descriptor holds (through `/proc/self/fd/N`: the
/// same inode, no lookup by name again).
pub fn connect_fd(fd: &OwnedFd, shown: &Path) -> Result<UnixStream, SocketError> {
    let via = format!("/proc/self/fd/{}", fd.as_raw_fd());
    UnixStream::connect(&via).map_err(|e| {
        let what = match e.raw_os_error() {
            Some(libc::ECONNREFUSED) => "connection refused (no process listens on it)".to_string(),
            Some(libc::EACCES) | Some(libc::EPERM) => {
                return SocketError::Refused(format!(
                    "{}: {}: connecting needs write permission on the socket (run the check as root, as the DaemonSet does)",
                    shown.display(),
                    plugin::errtext(&e)
                ))
            }
            _ => plugin::errtext(&e),
        };
        SocketError::Failed(format!("{}: {what}", shown.display()))
    })
}

/// [`open_beneath`] then [`connect_fd`].
pub fn connect_beneath(
    path: &Path,
    roots: &[PathBuf],
    real: impl Fn(&Path) -> PathBuf,
) -> Result<UnixStream, SocketError> {
    let fd = open_beneath(path, roots, real)?;
    connect_fd(&fd, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("node-csi-sock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn lexical_rules() {
        let roots = vec![PathBuf::from("/var/lib/kubelet")];
        assert!(beneath(Path::new("/var/lib/kubelet/plugins/x/csi.sock"), &roots).is_some());
        assert!(beneath(Path::new("/var/lib/kubelet/../../run/docker.sock"), &roots).is_none());
        assert!(beneath(Path::new("/run/docker.sock"), &roots).is_none());
        assert!(beneath(Path::new("plugins/x/csi.sock"), &roots).is_none());
        assert!(beneath(Path::new("/var/lib/kubelet"), &roots).is_none());
        assert!(beneath(Path::new("/var/lib/kubeletx/a.sock"), &roots).is_none());
    }

    #[test]
    fn connects_beneath_and_refuses_links() {
        let root = tmp("links");
        let outside = tmp("links-outside");
        std::fs::create_dir_all(root.join("plugins/d")).unwrap();
        let listener = UnixListener::bind(root.join("plugins/d/csi.sock")).unwrap();
        let _o = UnixListener::bind(outside.join("other.sock")).unwrap();
        let roots = vec![root.clone()];
        let id = |p: &Path| p.to_path_buf();
        assert!(connect_beneath(&root.join("plugins/d/csi.sock"), &roots, id).is_ok());
        // A link as the last component, and as a directory on the way.
        std::os::unix::fs::symlink(outside.join("other.sock"), root.join("plugins/evil.sock"))
            .unwrap();
        std::os::unix::fs::symlink(&outside, root.join("plugins/evildir")).unwrap();
        let e = connect_beneath(&root.join("plugins/evil.sock"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Refused(_)), "{e:?}");
        let e = connect_beneath(&root.join("plugins/evildir/other.sock"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Refused(_)), "{e:?}");
        // Outside the root, by name.
        let e = connect_beneath(&outside.join("other.sock"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Refused(_)), "{e:?}");
        // Gone, and a regular file.
        let e = connect_beneath(&root.join("plugins/d/nope.sock"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Missing(_)), "{e:?}");
        std::fs::write(root.join("plugins/d/file"), "x").unwrap();
        let e = connect_beneath(&root.join("plugins/d/file"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Refused(_)), "{e:?}");
        // A socket nobody listens on.
        drop(listener);
        let e = connect_beneath(&root.join("plugins/d/csi.sock"), &roots, id).unwrap_err();
        assert!(matches!(e, SocketError::Failed(_)), "{e:?}");
        std::fs::remove_dir_all(&root).unwrap();
        std::fs::remove_dir_all(&outside).unwrap();
    }
}
