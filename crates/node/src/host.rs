//! The one "host root" notion every reader goes through.
//!
//! On an ordinary node the checks read the host directly: `/proc/self/mountinfo`, `/sys`,
//! `/dev/kmsg`, and probe mount points by their own paths. In container mode the host is mounted
//! at a prefix (`--host-root /host`): the host's mount table is `/host/proc/1/mountinfo` (the
//! host's init sees the host's mounts), `/sys` is `/host/sys`, and a host mount point `<p>` is
//! reached through the host init's root, `/host/proc/1/root/<p>`, which crosses into the host's
//! mount namespace even for mounts made after the container started.

use std::path::{Path, PathBuf};

/// The mount table of the caller's mount namespace: what an operator's `grep` on the node reads.
pub const MOUNTINFO: &str = "/proc/self/mountinfo";

/// `path` with its links resolved (a kubelet root may be a link to another disk), or as given
/// when it cannot be resolved.
pub fn canonical_or_same(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Host {
    /// Where the host's `/` is visible; `None` on the host itself.
    root: Option<PathBuf>,
}

impl Host {
    /// The host as seen from itself.
    pub fn local() -> Host {
        Host { root: None }
    }

    /// The host as seen from a container that mounts it at `root` (e.g. `/host`).
    /// An empty path or `/` means the host itself.
    pub fn at(root: impl Into<PathBuf>) -> Host {
        let root = root.into();
        if root.as_os_str().is_empty() || root == Path::new("/") {
            Host::local()
        } else {
            Host { root: Some(root) }
        }
    }

    pub fn from_option(root: Option<&Path>) -> Host {
        root.map(Host::at).unwrap_or_default()
    }

    pub fn is_local(&self) -> bool {
        self.root.is_none()
    }

    pub fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// A host file that is the same in every mount namespace of the host (`/sys/...`,
    /// `/proc/...`, `/dev/kmsg`, `/var/log/journal`): `<root>/<path>`.
    pub fn file(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let p = host_path.as_ref();
        match &self.root {
            None => p.to_path_buf(),
            Some(r) => r.join(p.strip_prefix("/").unwrap_or(p)),
        }
    }

    /// The host's mount table: `/proc/self/mountinfo` locally, `<root>/proc/1/mountinfo` in a container.
    pub fn mountinfo(&self) -> PathBuf {
        match &self.root {
            None => PathBuf::from(MOUNTINFO),
            Some(r) => r.join("proc/1/mountinfo"),
        }
    }

    /// A path of the host's mount namespace (a mount point from the host's mountinfo), reachable
    /// from here: itself locally, `<root>/proc/1/root/<path>` in a container.
    pub fn mount_path(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let p = host_path.as_ref();
        match &self.root {
            None => p.to_path_buf(),
            Some(r) => r.join("proc/1/root").join(p.strip_prefix("/").unwrap_or(p)),
        }
    }

    /// In container mode, why the host's mount namespace cannot be entered, if it cannot: reading
    /// `<root>/proc/1/root` is a ptrace-read of the host's init, which takes CAP_SYS_PTRACE (and,
    /// on AppArmor nodes, a profile that allows it). Checks that probe host paths can call this
    /// first, so that a missing privilege reads as such rather than as "no kubelet root found".
    pub fn access_problem(&self) -> Option<String> {
        let r = self.root.as_ref()?;
        let p = r.join("proc/1/root/");
        match std::fs::metadata(&p) {
            Ok(_) => None,
            Err(e) if matches!(e.raw_os_error(), Some(nix::libc::EACCES | nix::libc::EPERM)) => {
                Some(format!(
                    "cannot enter the host's mount namespace through {}: {} \
                     (needs CAP_SYS_PTRACE; on AppArmor nodes also an unconfined profile)",
                    p.display(),
                    plugin::errtext(&e)
                ))
            }
            Err(e) => Some(format!(
                "cannot read the host's root {}: {} (is the host's /proc mounted at {}/proc?)",
                p.display(),
                plugin::errtext(&e),
                r.display()
            )),
        }
    }

    /// `/sys` of the host.
    pub fn sys(&self) -> PathBuf {
        self.file("/sys")
    }

    /// `/proc` of the host.
    pub fn proc(&self) -> PathBuf {
        self.file("/proc")
    }

    /// The kernel release of the host (`/proc/sys/kernel/osrelease`).
    pub fn kernel_release(&self) -> Option<String> {
        crate::read_small(&self.file("/proc/sys/kernel/osrelease"))
    }

    /// A kernel value of the host under `/proc/sys` (`kernel/random/boot_id`,
    /// `kernel/dmesg_restrict`), trimmed; `None` when it cannot be read.
    pub fn proc_sys(&self, key: &str) -> Option<String> {
        crate::read_small(&self.file("/proc/sys").join(key))
    }

    /// The host's name, as the kubelet uses it for the node name by default.
    ///
    /// In a container `<root>/proc/sys/kernel/hostname` is no help: that file shows the UTS
    /// namespace of the *reader* (the pod's name), not the host's. So container mode takes
    /// `$NODE_NAME` (the DaemonSet sets it from `spec.nodeName`), then the host's `/etc/hostname`
    /// through the host's root.
    pub fn hostname(&self) -> Option<String> {
        if self.root.is_some() {
            let clean = |s: String| Some(s.trim().to_lowercase()).filter(|s| !s.is_empty());
            return std::env::var("NODE_NAME")
                .ok()
                .and_then(clean)
                .or_else(|| crate::read_small(&self.mount_path("/etc/hostname")).and_then(clean));
        }
        let from_file = crate::read_small(&self.file("/proc/sys/kernel/hostname"))
            .map(|s| s.to_lowercase())
            .filter(|s| !s.is_empty());
        from_file.or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .map(|s| s.to_lowercase())
        })
    }
}

/// Whether the calling thread holds a capability in its effective set
/// (`/proc/thread-self/status` CapEff: capabilities are per thread, see [`crate::privilege`]);
/// e.g. 2 = CAP_DAC_READ_SEARCH, 1 = CAP_DAC_OVERRIDE, 34 = CAP_SYSLOG.
pub fn has_capability(bit: u32) -> bool {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| bit < 64 && caps & (1u64 << bit) != 0)
}

/// Parse a kernel release like `5.4.0-231-generic` or `6.14.8` into (major, minor, patch).
pub fn parse_kernel_version(release: &str) -> Option<(u32, u32, u32)> {
    let core = release
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()?;
    let mut it = core.split('.');
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    let patch = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_unchanged() {
        let h = Host::local();
        assert_eq!(h.mountinfo(), PathBuf::from("/proc/self/mountinfo"));
        assert_eq!(h.file("/sys/fs/ext4"), PathBuf::from("/sys/fs/ext4"));
        assert_eq!(
            h.mount_path("/var/lib/kubelet/x"),
            PathBuf::from("/var/lib/kubelet/x")
        );
        assert_eq!(Host::at("/"), Host::local());
    }

    #[test]
    fn container_paths_go_through_the_host_init() {
        let h = Host::at("/host");
        assert_eq!(h.mountinfo(), PathBuf::from("/host/proc/1/mountinfo"));
        assert_eq!(
            h.file("/sys/class/iscsi_session"),
            PathBuf::from("/host/sys/class/iscsi_session")
        );
        assert_eq!(h.file("/dev/kmsg"), PathBuf::from("/host/dev/kmsg"));
        assert_eq!(
            h.mount_path("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount"),
            PathBuf::from(
                "/host/proc/1/root/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pv/mount"
            )
        );
    }

    #[test]
    fn container_hostname_is_the_hosts_not_the_pods() {
        if std::env::var_os("NODE_NAME").is_some() {
            return; // the environment decides; covered by the container-mode e2e test
        }
        let d = std::env::temp_dir().join(format!("node-host-{}", std::process::id()));
        std::fs::create_dir_all(d.join("proc/1/root/etc")).unwrap();
        std::fs::create_dir_all(d.join("proc/sys/kernel")).unwrap();
        std::fs::write(d.join("proc/sys/kernel/hostname"), "pod-name-xyz\n").unwrap();
        std::fs::write(d.join("proc/1/root/etc/hostname"), "Worker-04\n").unwrap();
        assert_eq!(Host::at(&d).hostname().as_deref(), Some("worker-04"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn access_problem_names_a_missing_host_proc() {
        assert_eq!(Host::local().access_problem(), None);
        let d = std::env::temp_dir().join(format!("node-host-ap-{}", std::process::id()));
        let p = Host::at(&d).access_problem().unwrap();
        assert!(p.contains("No such file or directory (ENOENT)"), "{p}");
        assert!(p.contains("/proc mounted at"), "{p}");
        std::fs::create_dir_all(d.join("proc/1/root")).unwrap();
        assert_eq!(Host::at(&d).access_problem(), None);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn kernel_versions() {
        assert_eq!(parse_kernel_version("5.4.0-231-generic"), Some((5, 4, 0)));
        assert_eq!(parse_kernel_version("6.14.8"), Some((6, 14, 8)));
        assert_eq!(parse_kernel_version("6.18.44-fc-v1045"), Some((6, 18, 44)));
        assert_eq!(parse_kernel_version("6.12"), Some((6, 12, 0)));
        assert_eq!(parse_kernel_version("garbage"), None);
    }
}
