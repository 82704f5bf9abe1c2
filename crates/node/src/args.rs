//! Command-line options of the node-side checks, defined once: a check flattens the ones it
//! needs (`#[command(flatten)]`), so every check spells, defaults and validates them the same way
//! (as `kube::args` does for the API options). A check that needs a sharper help text for one of
//! them says so with `#[command(mut_arg("include", |a| a.help("…")))]`.

use crate::host::Host;
use crate::kubelet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--host-root DIR`: where the host's `/` is mounted in container mode.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HostRootArg {
    /// Where the host's / is mounted when running in a container (e.g. /host): every host path
    /// below (mount table, sysfs, kubelet root, kernel log, journal) is read through it
    #[arg(long, value_name = "DIR")]
    pub host_root: Option<PathBuf>,
}

impl HostRootArg {
    pub fn host(&self) -> Host {
        Host::from_option(self.host_root.as_deref())
    }
}

/// `--mountinfo FILE`: the mount table.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MountinfoArg {
    /// Mount table to read [default: /proc/self/mountinfo, or <host-root>/proc/1/mountinfo]
    #[arg(long, value_name = "FILE")]
    pub mountinfo: Option<PathBuf>,
}

impl MountinfoArg {
    /// The file given, else the host's mount table.
    pub fn path(&self, host: &Host) -> PathBuf {
        self.mountinfo.clone().unwrap_or_else(|| host.mountinfo())
    }

    /// True when the mount table read is the node's own: none given, or the default itself
    /// written another way (`--mountinfo /proc/self/mountinfo` on the host): only then may a
    /// privileged check look into the mount points it lists.
    pub fn is_own(&self, host: &Host) -> bool {
        match &self.mountinfo {
            None => true,
            Some(p) => host.is_local() && kubelet::same_path(p, &host.mountinfo()),
        }
    }
}

/// `--sys DIR`: sysfs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SysArg {
    /// sysfs of the node [default: /sys, or <host-root>/sys]
    #[arg(long, value_name = "DIR")]
    pub sys: Option<PathBuf>,
}

impl SysArg {
    pub fn path(&self, host: &Host) -> PathBuf {
        self.sys.clone().unwrap_or_else(|| host.sys())
    }
}

/// `--kubelet-root DIR` (repeatable), with one validation for every check.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct KubeletRootArg {
    /// Kubelet root directory, repeatable [default: each that exists of /var/lib/kubelet,
    /// /var/snap/microk8s/common/var/lib/kubelet, /var/lib/k0s/kubelet, /var/lib/rancher/k3s/agent/kubelet]
    #[arg(long, value_name = "DIR")]
    pub kubelet_root: Vec<PathBuf>,
}

impl KubeletRootArg {
    /// The roots to look under: every one given must be a directory on the host (a mistyped
    /// `--kubelet-root` must not read as "no volumes on this node"), and without any given, at
    /// least one default must exist.
    pub fn resolve(&self, host: &Host) -> Result<Vec<PathBuf>, String> {
        let roots = self.resolve_if_any(host)?;
        if roots.is_empty() {
            return Err(format!(
                "no kubelet root found (looked for {}): give --kubelet-root",
                kubelet::DEFAULT_ROOTS.join(", ")
            ));
        }
        Ok(roots)
    }

    /// As [`resolve`](Self::resolve), but a node without any default root is fine (an empty
    /// list): for checks that only use the roots to name what they found.
    pub fn resolve_if_any(&self, host: &Host) -> Result<Vec<PathBuf>, String> {
        for r in &self.kubelet_root {
            check_dir(host, r)?;
        }
        Ok(kubelet::roots(&self.kubelet_root, host))
    }
}

fn check_dir(host: &Host, r: &Path) -> Result<(), String> {
    match std::fs::metadata(host.mount_path(r)) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("--kubelet-root {}: not a directory", r.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "--kubelet-root {}: no such directory on this node",
            r.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(privilege_text(host, r, &e))
        }
        Err(e) => Err(format!(
            "--kubelet-root {}: {}",
            r.display(),
            plugin::errtext(&e)
        )),
    }
}

/// What to say when a kubelet directory may not be read: what actually failed (see
/// [`crate::privilege::advice`]).
pub fn privilege_text(host: &Host, path: &Path, e: &std::io::Error) -> String {
    let container = if host.is_local() {
        ""
    } else {
        "; in container mode also hostPID and CAP_SYS_PTRACE (to reach the host through /proc/1/root)"
    };
    format!(
        "cannot read {}: {}: {}{container}",
        path.display(),
        plugin::errtext(e),
        crate::privilege::advice(
            "CAP_DAC_READ_SEARCH",
            "the kubelet's directories are root-only",
            crate::privilege::elevated_now(),
        )
    )
}

/// Refuse kubelet roots whose root-only directories (`subs` of each root, `""` for the root
/// itself) this thread may not list: without CAP_DAC_READ_SEARCH every probe below them fails
/// with EACCES, which a check would read as a broken mount. Other errors (a directory that does
/// not exist) are left to the check's own reading.
pub fn check_listable(host: &Host, roots: &[PathBuf], subs: &[&str]) -> Result<(), String> {
    for r in roots {
        for sub in subs {
            let p = if sub.is_empty() {
                r.clone()
            } else {
                r.join(sub)
            };
            if let Err(e) = std::fs::read_dir(host.mount_path(&p)) {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    return Err(privilege_text(host, &p, &e));
                }
            }
        }
    }
    Ok(())
}

/// `--include REGEX` / `--exclude REGEX`, both repeatable.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only items matching REGEX (repeatable: any of them)
    #[arg(long, value_name = "REGEX", value_parser = plugin::args::regex)]
    pub include: Vec<regex_lite::Regex>,

    /// Skip items matching REGEX, even when --include matches too (repeatable)
    #[arg(long, value_name = "REGEX", value_parser = plugin::args::regex)]
    pub exclude: Vec<regex_lite::Regex>,
}

impl FilterArgs {
    /// True when an item known by these names is selected: no `--exclude` matches any of them,
    /// and `--include` is absent or matches one of them.
    pub fn selects<'a>(&self, names: impl IntoIterator<Item = &'a str> + Clone) -> bool {
        let any = |res: &[regex_lite::Regex]| {
            names
                .clone()
                .into_iter()
                .any(|n| res.iter().any(|r| r.is_match(n)))
        };
        !any(&self.exclude) && (self.include.is_empty() || any(&self.include))
    }

    /// True when a filter was given (a check that selected nothing then says the filter did it).
    pub fn is_set(&self) -> bool {
        !self.include.is_empty() || !self.exclude.is_empty()
    }

    /// The filter as an operator wrote it, for "nothing matched" messages.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        parts.extend(
            self.include
                .iter()
                .map(|r| format!("--include '{}'", r.as_str())),
        );
        parts.extend(
            self.exclude
                .iter()
                .map(|r| format!("--exclude '{}'", r.as_str())),
        );
        parts.join(" ")
    }
}

/// `--probe-timeout DURATION`: how long one probe of a mount point may take. One rule for every
/// check: greater than zero.
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeTimeoutArg {
    /// How long one mount point may take to answer its probe (stat/statfs/readdir), capped by what
    /// is left of -t; must be greater than 0
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = plugin::args::positive_duration)]
    pub probe_timeout: Duration,
}

impl Default for ProbeTimeoutArg {
    fn default() -> Self {
        ProbeTimeoutArg {
            probe_timeout: Duration::from_secs(3),
        }
    }
}

/// `--run-dir DIR`: where stuck probes are remembered across runs.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunDirArg {
    /// Where stuck probes are remembered, so a mount stuck in uninterruptible I/O is not probed
    /// (and one more task left stuck) on every run [default: /run/k8s-storage-checks; none under
    /// --host-root]
    #[arg(long = "run-dir", value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct T {
        #[command(flatten)]
        host: HostRootArg,
        #[command(flatten)]
        roots: KubeletRootArg,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        probe: ProbeTimeoutArg,
    }

    #[test]
    fn kubelet_roots_given_must_exist_and_defaults_must_be_found() {
        let dir = std::env::temp_dir().join(format!("node-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("file");
        std::fs::write(&file, b"x").unwrap();
        let host = Host::local();
        let t = T::parse_from(["t", "--kubelet-root", dir.to_str().unwrap()]);
        assert_eq!(t.roots.resolve(&host).unwrap(), vec![dir.clone()]);
        let t = T::parse_from(["t", "--kubelet-root", "/nonexistent/kubelet"]);
        assert_eq!(
            t.roots.resolve(&host).unwrap_err(),
            "--kubelet-root /nonexistent/kubelet: no such directory on this node"
        );
        assert!(t.roots.resolve_if_any(&host).is_err());
        let t = T::parse_from(["t", "--kubelet-root", file.to_str().unwrap()]);
        assert!(t
            .roots
            .resolve(&host)
            .unwrap_err()
            .ends_with("not a directory"));
        // Nothing given, no default under an empty host root: named, not an empty success.
        let t = T::parse_from(["t", "--host-root", dir.to_str().unwrap()]);
        let e = t.roots.resolve(&t.host.host()).unwrap_err();
        assert!(
            e.starts_with("no kubelet root found (looked for /var/lib/kubelet"),
            "{e}"
        );
        assert_eq!(
            t.roots.resolve_if_any(&t.host.host()).unwrap(),
            Vec::<PathBuf>::new()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn filters_repeat_and_exclude_wins() {
        let t = T::parse_from(["t", "--include", "^a", "--include", "^b", "--exclude", "x$"]);
        assert!(t.filter.selects(["abc"]));
        assert!(t.filter.selects(["zzz", "bcd"]));
        assert!(!t.filter.selects(["zzz"]));
        assert!(!t.filter.selects(["abx"]));
        assert!(t.filter.is_set());
        assert_eq!(
            t.filter.describe(),
            "--include '^a' --include '^b' --exclude 'x$'"
        );
        let t = T::parse_from(["t"]);
        assert!(t.filter.selects(["anything"]));
        assert!(T::try_parse_from(["t", "--include", "("]).is_err());
    }

    #[test]
    fn probe_timeout_zero_is_refused_everywhere() {
        assert_eq!(
            T::parse_from(["t"]).probe.probe_timeout,
            Duration::from_secs(3)
        );
        let e = T::try_parse_from(["t", "--probe-timeout", "0"]).unwrap_err();
        assert!(e.to_string().contains("greater than 0"), "{e}");
        let t = T::parse_from(["t", "--probe-timeout", "500ms"]);
        assert_eq!(t.probe.probe_timeout, Duration::from_millis(500));
    }
}
