//! Who a mount belongs to (PV, driver, volume handle, pod), worked out from its path,
//! vol_data.json, the other mounts and the PV list when the API was read; and which mounts the
//! options select. Pure; `cluster`, `evaluate` and `text` build on it.

use crate::CsiMount;
use node::kubelet::Kind;
use regex_lite::Regex;

/// A PV as the API lists it: what identifies a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvInfo {
    pub name: String,
    /// `spec.csi.driver` / `spec.csi.volumeHandle` (absent for non-CSI PVs).
    pub driver: Option<String>,
    pub volume_handle: Option<String>,
    /// `spec.claimRef` as `namespace/name` (a bound PV).
    pub claim: Option<(String, String)>,
}

/// Who a mount belongs to, as far as the path, vol_data.json, the other mounts and the cluster tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub pv: Option<String>,
    /// Where the PV name came from (`path`, `vol_data.json`, `pod mount`, `PV list`, `volumeHandle`).
    pub pv_from: &'static str,
    pub driver: Option<String>,
    pub handle: Option<String>,
    pub pod_uid: Option<String>,
}

pub(crate) fn is_pod_mount(k: &Kind) -> bool {
    matches!(k, Kind::PodVolume { .. } | Kind::PodBlock { .. })
}

pub(crate) fn is_staging(k: &Kind) -> bool {
    matches!(k, Kind::CsiStaging { .. } | Kind::BlockStaging { .. })
}

/// Work out PV, driver, handle and pod of every mount (pure).
pub fn identify(mounts: &[CsiMount], pvs: Option<&[PvInfo]>) -> Vec<Identity> {
    mounts
        .iter()
        .map(|m| identify_one(m, mounts, pvs))
        .collect()
}

fn identify_one(m: &CsiMount, mounts: &[CsiMount], pvs: Option<&[PvInfo]>) -> Identity {
    let vd = m.vol_data.clone().unwrap_or_default();
    let mut id = Identity {
        driver: vd.driver_name.clone(),
        handle: vd.volume_handle.clone(),
        ..Default::default()
    };
    match &m.kind {
        Kind::PodVolume { pod_uid, name, .. } => {
            (id.pv, id.pv_from) = (Some(name.clone()), "path");
            id.pod_uid = Some(pod_uid.clone());
        }
        Kind::PodBlock { pod_uid, name } => {
            (id.pv, id.pv_from) = (Some(name.clone()), "path");
            id.pod_uid = pod_uid.clone();
        }
        Kind::BlockStaging { pv } => (id.pv, id.pv_from) = (Some(pv.clone()), "path"),
        Kind::CsiStaging { driver, pv, hash } => {
            if id.driver.is_none() {
                id.driver = driver.clone();
            }
            if let Some((pv, from)) = staging_pv(m, pv, hash, &vd, &id, mounts, pvs) {
                (id.pv, id.pv_from) = (Some(pv), from);
            }
        }
        Kind::PodSubpath { .. } | Kind::PluginDevice { .. } => {}
    }
    if id.driver.is_none() {
        // An in-tree network volume (NFS, iSCSI, …): its plugin is its driver.
        id.driver = m.kind.in_tree_plugin();
    }
    if id.driver.is_none() {
        // A pod mount without vol_data.json: the staging mount of the same device knows.
        id.driver = mounts
            .iter()
            .filter(|o| o.major == m.major && o.minor == m.minor)
            .find_map(|o| match &o.kind {
                Kind::CsiStaging { driver, .. } => driver.clone(),
                _ => None,
            });
    }
    if id.driver.is_none() {
        if let (Some(pv), Some(pvs)) = (&id.pv, pvs) {
            id.driver = pvs
                .iter()
                .find(|p| &p.name == pv)
                .and_then(|p| p.driver.clone());
        }
    }
    id
}

/// The PV of a CSI staging mount and where its name came from, first that tells: the path (old
/// scheme), vol_data.json's specVolID, a pod mount of the same device, the PV list (by volume
/// handle or its sha256 in the path), else the volume handle itself.
fn staging_pv(
    m: &CsiMount,
    path_pv: &Option<String>,
    hash: &Option<String>,
    vd: &node::kubelet::VolData,
    id: &Identity,
    mounts: &[CsiMount],
    pvs: Option<&[PvInfo]>,
) -> Option<(String, &'static str)> {
    if let Some(pv) = path_pv {
        return Some((pv.clone(), "path"));
    }
    if let Some(spec) = vd.spec_vol_id.clone().filter(|s| !s.is_empty()) {
        return Some((spec, "vol_data.json"));
    }
    let same_device = mounts.iter().find(|o| {
        matches!(o.kind, Kind::PodVolume { .. }) && o.major == m.major && o.minor == m.minor
    });
    if let Some(p) = same_device {
        return match &p.kind {
            Kind::PodVolume { name, .. } => Some((name.clone(), "pod mount")),
            _ => None,
        };
    }
    let listed = pvs.and_then(|pvs| {
        pvs.iter().find(|pv| {
            let h = pv.volume_handle.as_deref();
            (id.driver.is_none() || pv.driver == id.driver)
                && h.is_some()
                && (h == id.handle.as_deref()
                    || hash.as_deref() == h.map(node::kubelet::staging_hash).as_deref())
        })
    });
    if let Some(pv) = listed {
        return Some((pv.name.clone(), "PV list"));
    }
    id.handle.clone().map(|h| (h, "volumeHandle"))
}

/// --include/--exclude on the mount point, PV and driver (pure).
pub fn selected(m: &CsiMount, id: &Identity, include: &[Regex], exclude: &[Regex]) -> bool {
    let mp = m.mount_point.to_string_lossy();
    let subjects = [Some(mp.as_ref()), id.pv.as_deref(), id.driver.as_deref()];
    let hit = |re: &Regex| subjects.iter().flatten().any(|s| re.is_match(s));
    (include.is_empty() || include.iter().any(hit)) && !exclude.iter().any(hit)
}
