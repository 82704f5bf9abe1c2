//! The kubelet's volume layout on disk, and which mounts under it belong to which volume.
//!
//! - pod volume: `<root>/pods/<uid>/volumes/<plugin>/<name>[/mount]` (CSI: `kubernetes.io~csi/<pv>/mount`
//!   with `vol_data.json` beside `mount`; in-tree plugins mount the `<name>` directory itself)
//! - subPath: `<root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>`
//! - block publish: `<root>/pods/<uid>/volumeDevices/<plugin>/<name>` and
//!   `<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<uid>`
//! - block staging: `<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<pv>`
//! - CSI staging since 1.24: `<root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`;
//!   before: `<root>/plugins/kubernetes.io/csi/pv/<pv>/globalmount`
//! - other in-tree device mounts: `<root>/plugins/kubernetes.io/<plugin>/...`

use crate::host::Host;
use std::path::{Path, PathBuf};

/// Kubelet roots of the distributions our users run, in the order they are tried.
pub const DEFAULT_ROOTS: &[&str] = &[
    "/var/lib/kubelet",
    "/var/snap/microk8s/common/var/lib/kubelet",
    "/var/lib/k0s/kubelet",
    "/var/lib/rancher/k3s/agent/kubelet",
];

/// Volume plugins whose pod mounts are not PersistentVolumes (node-local, API-projected data).
const NON_PV_PLUGINS: &[&str] = &[
    "kubernetes.io~configmap",
    "kubernetes.io~secret",
    "kubernetes.io~projected",
    "kubernetes.io~downward-api",
    "kubernetes.io~empty-dir",
    "kubernetes.io~git-repo",
];

/// The kubelet's in-tree volume plugins on remote storage (a server, a session or a remote
/// device that can go away), as their directory names it without `kubernetes.io~`.
const NETWORK_PLUGINS: &[&str] = &[
    "nfs",
    "iscsi",
    "rbd",
    "cephfs",
    "glusterfs",
    "fc",
    "azure-file",
    "azure-disk",
    "aws-ebs",
    "gce-pd",
    "cinder",
    "vsphere-volume",
    "quobyte",
    "portworx-volume",
    "flocker",
    "scaleio",
    "storageos",
    "photon-pd",
];

/// A FlexVolume driver's directory name, `vendor~driver`, both parts plain names.
fn is_flex_volume(plugin: &str) -> bool {
    let plain = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    match plugin.split_once('~') {
        Some((vendor, driver)) => vendor != "kubernetes.io" && plain(vendor) && plain(driver),
        None => false,
    }
}

/// The kubelet roots to look under: those given, or each default that exists on the host.
pub fn roots(given: &[PathBuf], host: &Host) -> Vec<PathBuf> {
    if !given.is_empty() {
        return given.to_vec();
    }
    DEFAULT_ROOTS
        .iter()
        .map(PathBuf::from)
        .filter(|r| host.mount_path(r).is_dir())
        .collect()
}

/// True when the kubelet roots are the node's own: none given (the defaults are looked for), or
/// each given one is a default root, on the host itself (no `--host-root`). Only then may a
/// privileged check raise its privilege to look into them ([`crate::privilege::elevated_if`]).
/// Paths are compared by their components (`/var/lib/kubelet/`, `/var/lib//kubelet` and
/// `/var/lib/./kubelet` are the default root; a link is not resolved).
pub fn roots_are_own(given: &[PathBuf], host: &Host) -> bool {
    host.is_local()
        && given
            .iter()
            .all(|g| DEFAULT_ROOTS.iter().any(|d| same_path(g, Path::new(d))))
}

/// The same path written another way: equal components (a trailing slash, a doubled slash or a
/// `.` component make no difference; `..` and links are not resolved).
pub fn same_path(a: &Path, b: &Path) -> bool {
    a.components().eq(b.components())
}

/// The given kubelet roots that do not exist on the host (a mistyped `--kubelet-root` must not
/// read as "no PV mounts on this node").
pub fn missing_roots(given: &[PathBuf], host: &Host) -> Vec<PathBuf> {
    // Only what is really absent: a root we may not look into (EACCES) is reported by the
    // check as the missing privilege, not as a missing directory.
    given
        .iter()
        .filter(|r| match std::fs::metadata(host.mount_path(r)) {
            Ok(m) => !m.is_dir(),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        })
        .cloned()
        .collect()
}

/// What a mount under a kubelet root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A pod's volume mount (CSI publish or in-tree plugin).
    PodVolume {
        pod_uid: String,
        plugin: String,
        name: String,
    },
    /// A subPath bind mount of a pod volume.
    PodSubpath {
        pod_uid: String,
        volume: String,
        container: String,
    },
    /// A block-mode volume published to a pod.
    PodBlock {
        pod_uid: Option<String>,
        name: String,
    },
    /// CSI staging (`globalmount`); `hash` is the sha256 directory of the 1.24+ layout.
    CsiStaging {
        driver: Option<String>,
        pv: Option<String>,
        hash: Option<String>,
    },
    /// CSI block-mode staging.
    BlockStaging { pv: String },
    /// Another in-tree plugin's device mount (`plugins/kubernetes.io/<plugin>/...`).
    PluginDevice { plugin: String },
}

impl Kind {
    /// The plugin of an in-tree (or FlexVolume) volume on remote storage, as the kubelet names it
    /// (`kubernetes.io/nfs`, `kubernetes.io/iscsi`, `kubernetes.io/rbd`, `ceph.rook.io/rook`): a
    /// pod volume of a known in-tree network plugin (`…/volumes/kubernetes.io~nfs/<pv>`) or of a
    /// FlexVolume driver (`vendor~driver`), or such a plugin's device mount
    /// (`plugins/kubernetes.io/iscsi/…`). `None` for CSI mounts, subPaths, node-local volumes and
    /// a plugin directory it does not know (a mangled name is nobody's network volume). These hang on a dead server like a CSI mount does
    /// (issue 31).
    pub fn in_tree_plugin(&self) -> Option<String> {
        match self {
            Kind::PodVolume { plugin, .. } => match plugin.strip_prefix("kubernetes.io~") {
                Some(p) if NETWORK_PLUGINS.contains(&p) => Some(format!("kubernetes.io/{p}")),
                Some(_) => None,
                None if is_flex_volume(plugin) => Some(plugin.replace('~', "/")),
                None => None,
            },
            Kind::PluginDevice { plugin } if NETWORK_PLUGINS.contains(&plugin.as_str()) => {
                Some(format!("kubernetes.io/{plugin}"))
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletPath {
    pub root: PathBuf,
    pub kind: Kind,
}

impl KubeletPath {
    /// The PV (or volume) name the path itself tells, if any.
    pub fn volume_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::PodVolume { name, .. } => Some(name),
            Kind::PodSubpath { volume, .. } => Some(volume),
            Kind::PodBlock { name, .. } => Some(name),
            Kind::CsiStaging { pv, .. } => pv.as_deref(),
            Kind::BlockStaging { pv } => Some(pv),
            Kind::PluginDevice { .. } => None,
        }
    }

    pub fn pod_uid(&self) -> Option<&str> {
        match &self.kind {
            Kind::PodVolume { pod_uid, .. } | Kind::PodSubpath { pod_uid, .. } => Some(pod_uid),
            Kind::PodBlock { pod_uid, .. } => pod_uid.as_deref(),
            _ => None,
        }
    }

    pub fn is_staging(&self) -> bool {
        matches!(
            self.kind,
            Kind::CsiStaging { .. } | Kind::BlockStaging { .. } | Kind::PluginDevice { .. }
        )
    }

    /// See [`Kind::in_tree_plugin`].
    pub fn in_tree_plugin(&self) -> Option<String> {
        self.kind.in_tree_plugin()
    }

    pub fn is_csi(&self) -> bool {
        match &self.kind {
            Kind::PodVolume { plugin, .. } => plugin == "kubernetes.io~csi",
            Kind::PodBlock { .. } | Kind::CsiStaging { .. } | Kind::BlockStaging { .. } => true,
            Kind::PodSubpath { .. } | Kind::PluginDevice { .. } => false,
        }
    }
}

/// `mount_point` relative to `root`, component-wise like [`Path::strip_prefix`]. Mount points
/// from mountinfo are canonical (no `//`, no `.`), so a byte comparison decides when the root is
/// canonical too; anything else takes the component-wise path.
fn relative<'a>(mount_point: &'a [u8], root: &Path) -> Option<&'a [u8]> {
    use std::os::unix::ffi::OsStrExt;
    let r = root.as_os_str().as_bytes();
    let r = match r {
        [] | [b'/'] => r,
        [.., b'/'] => &r[..r.len() - 1],
        _ => r,
    };
    let canonical = r.first() == Some(&b'/')
        && !r.windows(2).any(|w| w == b"//")
        && !r.split(|&b| b == b'/').any(|c| c == b"." || c == b"..");
    if canonical {
        let rest = mount_point.strip_prefix(if r == b"/" { &b""[..] } else { r })?;
        match rest {
            [] => Some(rest),
            [b'/', tail @ ..] => Some(tail),
            _ => None,
        }
    } else {
        let mp = Path::new(std::ffi::OsStr::from_bytes(mount_point));
        Some(mp.strip_prefix(root).ok()?.as_os_str().as_bytes())
    }
}

/// What a mount under a kubelet root is, borrowed from its mount point: the one classifier
/// behind [`classify`] and the device-usage map ([`crate::usage`]), which classifies tens of
/// thousands of mount points per run without copying them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindRef<'a> {
    PodVolume {
        pod_uid: &'a str,
        plugin: &'a str,
        name: &'a str,
    },
    PodSubpath {
        pod_uid: &'a str,
        volume: &'a str,
        container: &'a str,
    },
    PodBlock {
        pod_uid: Option<&'a str>,
        name: &'a str,
    },
    CsiStaging {
        driver: Option<&'a str>,
        pv: Option<&'a str>,
        hash: Option<&'a str>,
    },
    BlockStaging {
        pv: &'a str,
    },
    PluginDevice {
        plugin: &'a str,
    },
}

impl<'a> KindRef<'a> {
    /// The PV (or volume) name the path itself tells, if any.
    pub fn volume_name(&self) -> Option<&'a str> {
        match *self {
            KindRef::PodVolume { name, .. } => Some(name),
            KindRef::PodSubpath { volume, .. } => Some(volume),
            KindRef::PodBlock { name, .. } => Some(name),
            KindRef::CsiStaging { pv, .. } => pv,
            KindRef::BlockStaging { pv } => Some(pv),
            KindRef::PluginDevice { .. } => None,
        }
    }

    pub fn pod_uid(&self) -> Option<&'a str> {
        match *self {
            KindRef::PodVolume { pod_uid, .. } | KindRef::PodSubpath { pod_uid, .. } => {
                Some(pod_uid)
            }
            KindRef::PodBlock { pod_uid, .. } => pod_uid,
            _ => None,
        }
    }

    /// A block-mode volume (published to a pod, or staged).
    pub fn is_block(&self) -> bool {
        matches!(
            self,
            KindRef::PodBlock { .. } | KindRef::BlockStaging { .. }
        )
    }

    pub fn to_owned(self) -> Kind {
        let s = |v: &str| v.to_string();
        match self {
            KindRef::PodVolume {
                pod_uid,
                plugin,
                name,
            } => Kind::PodVolume {
                pod_uid: s(pod_uid),
                plugin: s(plugin),
                name: s(name),
            },
            KindRef::PodSubpath {
                pod_uid,
                volume,
                container,
            } => Kind::PodSubpath {
                pod_uid: s(pod_uid),
                volume: s(volume),
                container: s(container),
            },
            KindRef::PodBlock { pod_uid, name } => Kind::PodBlock {
                pod_uid: pod_uid.map(s),
                name: s(name),
            },
            KindRef::CsiStaging { driver, pv, hash } => Kind::CsiStaging {
                driver: driver.map(s),
                pv: pv.map(s),
                hash: hash.map(s),
            },
            KindRef::BlockStaging { pv } => Kind::BlockStaging { pv: s(pv) },
            KindRef::PluginDevice { plugin } => Kind::PluginDevice { plugin: s(plugin) },
        }
    }
}

/// The kind of a path relative to a kubelet root.
fn kind_of(rel: &str) -> Option<KindRef<'_>> {
    // Volume paths are at most 7 components deep; deeper ones can only be plugin devices.
    let mut parts = [""; 8];
    let mut n = 0;
    for c in rel.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if n < parts.len() {
            parts[n] = c;
        }
        n += 1;
    }
    let s = &parts[..n.min(parts.len())];
    if n > parts.len() {
        return match *s {
            ["plugins", "kubernetes.io", plugin, ..] if plugin != "csi" => {
                Some(KindRef::PluginDevice { plugin })
            }
            _ => None,
        };
    }
    Some(match *s {
        ["pods", uid, "volumes", plugin, name]
        | ["pods", uid, "volumes", plugin, name, "mount"] => {
            if NON_PV_PLUGINS.contains(&plugin) {
                return None;
            }
            KindRef::PodVolume {
                pod_uid: uid,
                plugin,
                name,
            }
        }
        ["pods", uid, "volume-subpaths", volume, container, _idx] => KindRef::PodSubpath {
            pod_uid: uid,
            volume,
            container,
        },
        ["pods", uid, "volumeDevices", _plugin, name] => KindRef::PodBlock {
            pod_uid: Some(uid),
            name,
        },
        ["plugins", "kubernetes.io", "csi", "volumeDevices", "publish", pv, uid] => {
            KindRef::PodBlock {
                pod_uid: Some(uid),
                name: pv,
            }
        }
        ["plugins", "kubernetes.io", "csi", "volumeDevices", "staging", pv] => {
            KindRef::BlockStaging { pv }
        }
        ["plugins", "kubernetes.io", "csi", "pv", pv, "globalmount"] => KindRef::CsiStaging {
            driver: None,
            pv: Some(pv),
            hash: None,
        },
        ["plugins", "kubernetes.io", "csi", driver, hash, "globalmount"] => KindRef::CsiStaging {
            driver: Some(driver),
            pv: None,
            hash: Some(hash),
        },
        ["plugins", "kubernetes.io", plugin, ..] if s.len() > 3 && plugin != "csi" => {
            KindRef::PluginDevice { plugin }
        }
        _ => return None,
    })
}

/// Classify a mount point given as text (as the device-usage map holds it), borrowed: the index
/// of the kubelet root it is under and what it is. `None` for mounts that are not volumes.
pub fn classify_str<'a>(mount_point: &'a str, roots: &[PathBuf]) -> Option<(usize, KindRef<'a>)> {
    for (i, root) in roots.iter().enumerate() {
        let Some(rel) = relative(mount_point.as_bytes(), root) else {
            continue;
        };
        // `rel` is a tail of `mount_point` (or of its component-wise form, which only drops
        // separators): valid UTF-8 cut at a '/'.
        let rel = std::str::from_utf8(rel).unwrap_or("");
        return kind_of(rel).map(|k| (i, k));
    }
    None
}

/// Classify a mount point. Returns `None` for mounts that are not volumes (e.g. the kubelet root
/// itself, secrets, configmaps, emptyDirs).
pub fn classify(mount_point: &Path, roots: &[PathBuf]) -> Option<KubeletPath> {
    use std::os::unix::ffi::OsStrExt;
    let mp = plugin::render::lossy(mount_point.as_os_str().as_bytes());
    let (i, kind) = classify_str(&mp, roots)?;
    Some(KubeletPath {
        root: roots[i].clone(),
        kind: kind.to_owned(),
    })
}

/// The pod UID in a kubelet pod volume path (`…/pods/<uid>/volumes/…`, `…/volumeDevices/…`),
/// wherever the kubelet root is: for mount points that are named without knowing the roots.
pub fn pod_uid_in(mount_point: &Path) -> Option<String> {
    let parts: Vec<&str> = mount_point
        .iter()
        .map(|c| c.to_str().unwrap_or(""))
        .collect();
    parts.windows(3).find_map(|w| {
        (w[0] == "pods" && (w[2] == "volumes" || w[2] == "volumeDevices") && !w[1].is_empty())
            .then(|| w[1].to_string())
    })
}

/// `vol_data.json` as the kubelet's CSI plugin writes it (every key optional; unknown keys ignored).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolData {
    #[serde(rename = "specVolID")]
    pub spec_vol_id: Option<String>,
    pub volume_handle: Option<String>,
    pub driver_name: Option<String>,
    pub node_name: Option<String>,
    #[serde(rename = "attachmentID")]
    pub attachment_id: Option<String>,
    pub volume_lifecycle_mode: Option<String>,
}

/// Parse vol_data.json text.
pub fn parse_vol_data(text: &str) -> Result<VolData, String> {
    serde_json::from_str(text).map_err(|e| format!("garbled vol_data.json: {e}"))
}

/// The `vol_data.json` that belongs to a mount point: beside `mount` / `globalmount`.
/// Reading it never touches the mounted filesystem (it is in the parent directory).
pub fn vol_data_path(mount_point: &Path) -> Option<PathBuf> {
    let name = mount_point.file_name()?.to_str()?;
    if name == "mount" || name == "globalmount" {
        Some(mount_point.parent()?.join("vol_data.json"))
    } else {
        None
    }
}

/// The largest `vol_data.json` read (the kubelet writes a few hundred bytes).
pub const VOL_DATA_MAX: u64 = 64 * 1024;

/// Read the vol_data.json of a mount point through the host view. `Ok(None)` when absent.
pub fn read_vol_data(host: &Host, mount_point: &Path) -> Result<Option<VolData>, String> {
    let Some(p) = vol_data_path(mount_point) else {
        return Ok(None);
    };
    let real = host.mount_path(&p);
    // The file's size is not trusted: a file that never ends must not grow the check's memory.
    match std::fs::File::open(&real).and_then(|f| plugin::capped::read_capped(f, VOL_DATA_MAX)) {
        Ok(None) => Err(format!("{}: too large for a vol_data.json", p.display())),
        Ok(Some(b)) => parse_vol_data(&String::from_utf8_lossy(&b))
            .map(Some)
            .map_err(|e| format!("{}: {e}", p.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {}", p.display(), plugin::errtext(&e))),
    }
}

/// sha256 of a volume handle, hex: the staging directory name since Kubernetes 1.24.
pub fn staging_hash(volume_handle: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(volume_handle.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    /// Issue 31: in-tree network volumes (and their device mounts) are told apart from CSI and
    /// node-local ones.
    #[test]
    fn in_tree_network_volumes_are_named_by_their_plugin() {
        let roots = [std::path::PathBuf::from("/var/lib/kubelet")];
        let p = |mp: &str| {
            super::classify(std::path::Path::new(mp), &roots).and_then(|k| k.in_tree_plugin())
        };
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~nfs/pv-nfs").as_deref(),
            Some("kubernetes.io/nfs")
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~iscsi/pv-i").as_deref(),
            Some("kubernetes.io/iscsi")
        );
        assert_eq!(
            p("/var/lib/kubelet/plugins/kubernetes.io/iscsi/iface-default/10.0.0.1:3260-iqn.2016-09.com.openebs.jiva:pvc-1-lun-0").as_deref(),
            Some("kubernetes.io/iscsi")
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/ceph.rook.io~rook/pv-f").as_deref(),
            Some("ceph.rook.io/rook")
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pv/mount"),
            None
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~local-volume/pv-l"),
            None
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/s"),
            None
        );
        // A mangled plugin directory (a mount table with bad bytes) is nobody's network volume.
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kube\u{fffd}(rnetes.io~csi/pv/mount"),
            None
        );
        assert_eq!(
            p("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~unknown/pv"),
            None
        );
    }

    /// Issue 27, finding 10: the default root written another way is still the node's own.
    #[test]
    fn default_roots_written_another_way_are_own() {
        let host = Host::local();
        for g in [
            "/var/lib/kubelet/",
            "/var/lib//kubelet",
            "/var/lib/./kubelet",
        ] {
            assert!(super::roots_are_own(&[PathBuf::from(g)], &host), "{g}");
        }
        assert!(!super::roots_are_own(
            &[PathBuf::from("/var/lib/kubelet/..")],
            &host
        ));
        assert!(!super::roots_are_own(
            &[PathBuf::from("/tmp/kubelet")],
            &host
        ));
    }

    use super::*;

    fn roots() -> Vec<PathBuf> {
        vec![
            PathBuf::from("/var/lib/kubelet"),
            PathBuf::from("/var/snap/microk8s/common/var/lib/kubelet"),
        ]
    }
    fn c(p: &str) -> Option<Kind> {
        classify(Path::new(p), &roots()).map(|k| k.kind)
    }

    #[test]
    fn pod_csi_volume() {
        assert_eq!(
            c("/var/lib/kubelet/pods/8e1f/volumes/kubernetes.io~csi/pvc-a634/mount"),
            Some(Kind::PodVolume {
                pod_uid: "8e1f".into(),
                plugin: "kubernetes.io~csi".into(),
                name: "pvc-a634".into()
            })
        );
    }

    #[test]
    fn roots_match_component_wise_however_written() {
        let mp = Path::new("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-x/mount");
        for root in [
            "/var/lib/kubelet",
            "/var/lib/kubelet/",
            "/var/lib//kubelet",
            "/var/lib/./kubelet",
        ] {
            let k = classify(mp, &[PathBuf::from(root)]).unwrap_or_else(|| panic!("{root}"));
            assert_eq!(k.volume_name(), Some("pvc-x"), "{root}");
            assert_eq!(k.root, PathBuf::from(root));
        }
        let k = classify(
            Path::new("/pods/u/volumes/kubernetes.io~csi/pvc-r/mount"),
            &[PathBuf::from("/")],
        );
        assert_eq!(
            k.and_then(|k| k.volume_name().map(String::from)),
            Some("pvc-r".into())
        );
        // A sibling directory sharing the root's prefix is not below it.
        assert_eq!(
            c("/var/lib/kubelet2/pods/u/volumes/kubernetes.io~csi/pvc-x/mount"),
            None
        );
        assert_eq!(c("/var/lib/kubelet"), None);
        // Deeper than any volume path: only plugin devices go that deep.
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/rbd/mounts/a/b/c/d/e/f"),
            Some(Kind::PluginDevice {
                plugin: "rbd".into()
            })
        );
        assert_eq!(
            c("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-x/mount/a/b/c"),
            None
        );
        // Non-UTF-8 bytes survive as replacement characters.
        use std::os::unix::ffi::OsStrExt;
        let raw = std::ffi::OsStr::from_bytes(
            b"/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-\xff/mount",
        );
        assert_eq!(
            classify(Path::new(raw), &roots()).and_then(|k| k.volume_name().map(String::from)),
            Some("pvc-\u{FFFD}".into())
        );
    }

    #[test]
    fn microk8s_root_and_in_tree_plugin() {
        let k = classify(
            Path::new("/var/snap/microk8s/common/var/lib/kubelet/pods/u1/volumes/kubernetes.io~iscsi/pvc-1"),
            &roots(),
        )
        .unwrap();
        assert_eq!(
            k.root,
            PathBuf::from("/var/snap/microk8s/common/var/lib/kubelet")
        );
        assert_eq!(k.volume_name(), Some("pvc-1"));
        assert!(!k.is_csi());
    }

    #[test]
    fn non_pv_volumes_are_ignored() {
        assert_eq!(
            c("/var/lib/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access-x"),
            None
        );
        assert_eq!(
            c("/var/lib/kubelet/pods/u/volumes/kubernetes.io~empty-dir/cache"),
            None
        );
        assert_eq!(c("/var/lib/kubelet"), None);
        assert_eq!(c("/var/lib/kubelet/pods/u/containers/x"), None);
        assert_eq!(c("/srv/other"), None);
    }

    #[test]
    fn staging_both_schemes() {
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/csi/jiva.csi.openebs.io/0f3a9c/globalmount"),
            Some(Kind::CsiStaging {
                driver: Some("jiva.csi.openebs.io".into()),
                pv: None,
                hash: Some("0f3a9c".into())
            })
        );
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-81b6/globalmount"),
            Some(Kind::CsiStaging {
                driver: None,
                pv: Some("pvc-81b6".into()),
                hash: None
            })
        );
    }

    #[test]
    fn block_mode_and_subpaths() {
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-b/u9"),
            Some(Kind::PodBlock {
                pod_uid: Some("u9".into()),
                name: "pvc-b".into()
            })
        );
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-b"),
            Some(Kind::BlockStaging { pv: "pvc-b".into() })
        );
        assert_eq!(
            c("/var/lib/kubelet/pods/u/volume-subpaths/pvc-x/app/0"),
            Some(Kind::PodSubpath {
                pod_uid: "u".into(),
                volume: "pvc-x".into(),
                container: "app".into()
            })
        );
        assert_eq!(
            c("/var/lib/kubelet/plugins/kubernetes.io/iscsi/iface-default/10.0.0.1:3260-iqn.x-lun-0"),
            Some(Kind::PluginDevice { plugin: "iscsi".into() })
        );
    }

    #[test]
    fn vol_data() {
        let v = parse_vol_data(r#"{"attachmentID":"csi-123","driverName":"driver.longhorn.io","nodeName":"worker-04","specVolID":"pvc-81b676e6","volumeHandle":"pvc-81b676e6","volumeLifecycleMode":"Persistent","extra":1}"#).unwrap();
        assert_eq!(v.spec_vol_id.as_deref(), Some("pvc-81b676e6"));
        assert_eq!(v.driver_name.as_deref(), Some("driver.longhorn.io"));
        assert_eq!(parse_vol_data("{}").unwrap(), VolData::default());
        assert!(parse_vol_data("{\"specVolID\":").is_err());
        assert_eq!(
            vol_data_path(Path::new("/k/plugins/kubernetes.io/csi/d/h/globalmount")),
            Some(PathBuf::from(
                "/k/plugins/kubernetes.io/csi/d/h/vol_data.json"
            ))
        );
    }

    #[test]
    fn vol_data_that_never_ends_is_too_large_not_read_whole() {
        let d = std::env::temp_dir().join(format!("node-vol-data-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let m = d.join("pods/u/volumes/kubernetes.io~csi/pvc-a/mount");
        std::fs::create_dir_all(&m).unwrap();
        // An endless source (the read must stop one byte past the cap).
        std::os::unix::fs::symlink("/dev/zero", m.parent().unwrap().join("vol_data.json")).unwrap();
        let e = read_vol_data(&Host::local(), &m).unwrap_err();
        assert!(e.ends_with("too large for a vol_data.json"), "{e}");
        // A real one beside it reads.
        std::fs::remove_file(m.parent().unwrap().join("vol_data.json")).unwrap();
        std::fs::write(
            m.parent().unwrap().join("vol_data.json"),
            r#"{"specVolID":"pvc-a","driverName":"d"}"#,
        )
        .unwrap();
        let v = read_vol_data(&Host::local(), &m).unwrap().unwrap();
        assert_eq!(v.spec_vol_id.as_deref(), Some("pvc-a"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn staging_hash_is_sha256_hex() {
        // FIPS 180-4 test vector for "abc".
        assert_eq!(
            staging_hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
