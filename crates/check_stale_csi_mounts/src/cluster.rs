//! The cluster view: what the API knows about this node's pods, the PVs and their attachments.
//!
//! `evaluate` only sees [`ClusterView`], plain data. Today it comes from `kubectl ... -o json`
//! documents (`--pods-json`, `--pvs-json`); the API path (`crates/kube`) will fill the same struct.
//! Each part is `None` when it was not supplied, so the check can say which cross-check it skipped.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`; `None` for a pod not scheduled yet.
    pub node: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvInfo {
    pub name: String,
    /// `spec.csi.driver` / `spec.csi.volumeHandle` (absent for non-CSI PVs).
    pub driver: Option<String>,
    pub volume_handle: Option<String>,
    /// `spec.claimRef` as `namespace/name` (a bound PV).
    pub claim: Option<(String, String)>,
}

/// The shared resolver's [`kube::Names`] from what the cross-checks already read (no further
/// request): pods by UID, PVs (by name and volume handle) to their claims, claims to their pods.
pub fn names(view: &ClusterView) -> kube::Names {
    let mut n = kube::Names::default();
    for p in view.pods.iter().flatten() {
        n.pods.insert(
            p.uid.clone(),
            kube::names::PodName {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                node: p.node.clone(),
            },
        );
    }
    for pv in view.pvs.iter().flatten() {
        if let Some(c) = &pv.claim {
            n.claims.insert(pv.name.clone(), c.clone());
            if let Some(h) = pv.volume_handle.as_ref().filter(|h| !h.is_empty()) {
                n.claims.entry(h.clone()).or_insert_with(|| c.clone());
            }
        }
    }
    n
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub pv: String,
    pub node: String,
    /// `spec.attacher`: the CSI driver name.
    pub attacher: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    pub name: String,
    /// `spec.attachRequired` (the API default is true).
    pub attach_required: bool,
}

/// Where the view came from, as far as the API is concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApiUse {
    /// Not asked (`--pods-json`/`--pvs-json` given, or a test).
    #[default]
    NotUsed,
    /// Read from the API server (the description names server and credential source).
    Used(String),
    /// No credentials were found and none were asked for: cross-checks skipped, with the reason.
    Skipped(String),
    /// Credentials were given or found but the API failed: the reason (HTTP status, hint).
    Failed(String),
}

/// What the cluster says. `None` parts were not supplied: their cross-checks are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub api: ApiUse,
    /// The node this check runs for (`--node`, default the host name).
    pub node: String,
    /// Every pod supplied (all nodes); evaluate keeps those on `node`.
    pub pods: Option<Vec<PodInfo>>,
    pub pvs: Option<Vec<PvInfo>>,
    /// VolumeAttachments; `None` when the documents held none (cannot tell "none exist").
    pub attachments: Option<Vec<Attachment>>,
    /// CSIDriver objects, when supplied: they tell which drivers need a VolumeAttachment.
    pub drivers: Vec<DriverInfo>,
}

impl ClusterView {
    pub fn local_only(node: impl Into<String>) -> ClusterView {
        ClusterView {
            node: node.into(),
            ..Default::default()
        }
    }

    pub fn pods_on_node(&self) -> Option<impl Iterator<Item = &PodInfo>> {
        self.pods.as_ref().map(|p| {
            p.iter()
                .filter(|p| p.node.as_deref() == Some(self.node.as_str()))
        })
    }

    pub fn pod(&self, uid: &str) -> Option<&PodInfo> {
        self.pods.as_ref()?.iter().find(|p| p.uid == uid)
    }

    /// Does a PV by this name, or a CSI PV with this driver and volume handle, exist?
    pub fn pv_exists(
        &self,
        name: Option<&str>,
        driver: Option<&str>,
        handle: Option<&str>,
    ) -> Option<bool> {
        let pvs = self.pvs.as_ref()?;
        Some(pvs.iter().any(|pv| {
            name.is_some_and(|n| pv.name == n)
                || (handle.is_some()
                    && pv.volume_handle.as_deref() == handle
                    && (driver.is_none() || pv.driver.as_deref() == driver))
        }))
    }

    /// Whether the VolumeAttachment rule applies to a driver: the CSIDriver object says it needs
    /// attaching (API default: yes); without CSIDriver objects, when any VolumeAttachment of the
    /// driver exists in the cluster (drivers with attachRequired=false have none at all).
    pub fn needs_attachment(&self, driver: &str) -> bool {
        if let Some(d) = self.drivers.iter().find(|d| d.name == driver) {
            return d.attach_required;
        }
        self.attachments
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.attacher == driver))
    }

    pub fn attached_here(&self, pv: &str) -> Option<bool> {
        let a = self.attachments.as_ref()?;
        Some(a.iter().any(|a| a.pv == pv && a.node == self.node))
    }
}

// ---- the API (crates/kube) ----------------------------------------------------------------

/// The view from the API server: the pods bound to `node` (field selector), every PV and every
/// VolumeAttachment. CSIDriver objects are not read (the VolumeAttachment rule then applies to
/// drivers that have VolumeAttachments somewhere).
pub fn from_api(client: &kube::Client, node: &str) -> Result<ClusterView, plugin::Unknown> {
    let filter = kube::PodFilter {
        node: Some(node.to_string()),
        ..Default::default()
    };
    let mut pods = Vec::new();
    client.list_pods(&filter, |p| {
        pods.push(PodInfo {
            uid: p.metadata.uid,
            namespace: p.metadata.namespace,
            name: p.metadata.name,
            node: p.spec.node_name,
        })
    })?;
    let mut pvs = Vec::new();
    client.list_pvs(|pv| {
        let csi = pv.spec.csi;
        pvs.push(PvInfo {
            name: pv.metadata.name,
            driver: csi.as_ref().map(|c| c.driver.clone()),
            volume_handle: csi.map(|c| c.volume_handle),
            claim: pv
                .spec
                .claim_ref
                .filter(|c| !c.name.is_empty())
                .map(|c| (c.namespace, c.name)),
        })
    })?;
    let mut attachments = Vec::new();
    client.list_volume_attachments(|va| {
        if let Some(pv) = va.spec.source.persistent_volume_name {
            attachments.push(Attachment {
                pv,
                node: va.spec.node_name,
                attacher: va.spec.attacher,
            })
        }
    })?;
    Ok(ClusterView {
        api: ApiUse::Used(client.description.clone()),
        node: node.to_string(),
        pods: Some(pods),
        pvs: Some(pvs),
        attachments: Some(attachments),
        drivers: Vec::new(),
    })
}

// ---- kubectl -o json documents -------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Item {
    kind: Option<String>,
    metadata: Option<Meta>,
    spec: Option<Spec>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Spec {
    // Pod, VolumeAttachment
    node_name: Option<String>,
    // PersistentVolume
    csi: Option<PvCsi>,
    claim_ref: Option<ClaimRef>,
    // VolumeAttachment
    attacher: Option<String>,
    source: Option<VaSource>,
    // CSIDriver
    attach_required: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ClaimRef {
    namespace: Option<String>,
    name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PvCsi {
    driver: Option<String>,
    volume_handle: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct VaSource {
    persistent_volume_name: Option<String>,
}

/// Objects found in the supplied documents, by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Objects {
    pub pods: Vec<PodInfo>,
    pub pvs: Vec<PvInfo>,
    pub attachments: Vec<Attachment>,
    pub drivers: Vec<DriverInfo>,
    /// A List of this kind was seen even if empty (e.g. `VolumeAttachmentList`).
    pub saw_attachment_list: bool,
    pub ignored: usize,
}

/// Parse a `kubectl get <kinds> -o json` document (a List, a typed `PodList`, or one object) and
/// add its Pods, PersistentVolumes, VolumeAttachments and CSIDrivers to `into`. Items without a
/// `kind` take the list's kind (`PodList` → `Pod`) or else `default_kind`.
pub fn parse_objects(
    text: &str,
    what: &str,
    default_kind: &str,
    into: &mut Objects,
) -> Result<(), String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("{what}: not a JSON document: {e}"))?;
    let list_kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let items: Vec<serde_json::Value> = match v.get("items") {
        Some(serde_json::Value::Array(a)) => a.clone(),
        Some(serde_json::Value::Null) => Vec::new(),
        Some(_) => return Err(format!("{what}: 'items' is not a list")),
        None if v.is_object() && v.get("metadata").is_some() => vec![v.clone()],
        None => {
            return Err(format!(
                "{what}: neither a List nor a Kubernetes object (no 'items', no 'metadata')"
            ))
        }
    };
    let item_default = list_kind
        .strip_suffix("List")
        .filter(|k| !k.is_empty())
        .unwrap_or(default_kind)
        .to_string();
    if list_kind == "VolumeAttachmentList" {
        into.saw_attachment_list = true;
    }
    for (i, raw) in items.into_iter().enumerate() {
        let item: Item = serde_json::from_value(raw)
            .map_err(|e| format!("{what}: item {i}: unexpected shape: {e}"))?;
        let kind = item.kind.clone().unwrap_or_else(|| item_default.clone());
        let meta = item.metadata.unwrap_or_default();
        let spec = item.spec.unwrap_or_default();
        let name = meta.name.unwrap_or_default();
        match kind.as_str() {
            "Pod" => {
                let Some(uid) = meta.uid.filter(|u| !u.is_empty()) else {
                    return Err(format!("{what}: pod '{name}' has no metadata.uid"));
                };
                into.pods.push(PodInfo {
                    uid,
                    namespace: meta.namespace.unwrap_or_default(),
                    name,
                    node: spec.node_name.filter(|n| !n.is_empty()),
                });
            }
            "PersistentVolume" => {
                if name.is_empty() {
                    return Err(format!("{what}: item {i}: PersistentVolume without a name"));
                }
                let csi = spec.csi.unwrap_or_default();
                into.pvs.push(PvInfo {
                    name,
                    driver: csi.driver,
                    volume_handle: csi.volume_handle,
                    claim: spec.claim_ref.and_then(|c| {
                        Some((
                            c.namespace.unwrap_or_default(),
                            c.name.filter(|n| !n.is_empty())?,
                        ))
                    }),
                });
            }
            "VolumeAttachment" => {
                // Inline (migrated in-tree) volumes carry no PV name: nothing to match.
                let pv = spec.source.and_then(|s| s.persistent_volume_name);
                if let (Some(pv), Some(node)) = (pv, spec.node_name) {
                    into.attachments.push(Attachment {
                        pv,
                        node,
                        attacher: spec.attacher.unwrap_or_default(),
                    });
                } else {
                    into.ignored += 1;
                }
                into.saw_attachment_list = true;
            }
            "CSIDriver" => into.drivers.push(DriverInfo {
                name,
                attach_required: spec.attach_required.unwrap_or(true),
            }),
            _ => into.ignored += 1,
        }
    }
    Ok(())
}

impl Objects {
    /// The view these objects make: pods known when a pods document was given, PVs when a PV
    /// document was given, attachments when any VolumeAttachment (or their List) was seen.
    pub fn into_view(self, node: String, pods_given: bool, pvs_given: bool) -> ClusterView {
        let saw_va = self.saw_attachment_list || !self.attachments.is_empty();
        ClusterView {
            api: ApiUse::NotUsed,
            node,
            pods: pods_given.then_some(self.pods),
            pvs: pvs_given.then_some(self.pvs),
            attachments: saw_va.then_some(self.attachments),
            drivers: self.drivers,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PODS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop","uid":"u-1"},"spec":{"nodeName":"worker-04","containers":[]},"status":{"phase":"Running"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"db-0","namespace":"shop","uid":"u-2"},"spec":{"nodeName":"worker-01"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"pending","namespace":"shop","uid":"u-3"},"spec":{}}
    ],"metadata":{"resourceVersion":""}}"#;

    const PVS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pvc-81b676e6"},"spec":{"csi":{"driver":"driver.longhorn.io","volumeHandle":"pvc-81b676e6"},"claimRef":{"kind":"PersistentVolumeClaim","namespace":"shop","name":"data-web-0"}}},
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-nfs"},"spec":{"nfs":{"server":"x","path":"/"}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"csi-1"},"spec":{"attacher":"driver.longhorn.io","nodeName":"worker-04","source":{"persistentVolumeName":"pvc-81b676e6"}},"status":{"attached":true}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"csi-2"},"spec":{"attacher":"x","nodeName":"worker-04","source":{"inlineVolumeSpec":{}}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"nfs.csi.k8s.io"},"spec":{"attachRequired":false}}
    ]}"#;

    fn view(pods: Option<&str>, pvs: Option<&str>) -> ClusterView {
        let mut o = Objects::default();
        if let Some(p) = pods {
            parse_objects(p, "--pods-json", "Pod", &mut o).unwrap();
        }
        if let Some(p) = pvs {
            parse_objects(p, "--pvs-json", "PersistentVolume", &mut o).unwrap();
        }
        o.into_view("worker-04".into(), pods.is_some(), pvs.is_some())
    }

    #[test]
    fn pods_of_all_nodes_are_kept_and_filtered_by_node() {
        let v = view(Some(PODS), None);
        assert_eq!(v.pods.as_ref().unwrap().len(), 3);
        let here: Vec<_> = v.pods_on_node().unwrap().map(|p| p.uid.as_str()).collect();
        assert_eq!(here, ["u-1"]);
        assert!(v.pvs.is_none() && v.attachments.is_none());
    }

    #[test]
    fn pvs_attachments_and_drivers_from_one_list() {
        let v = view(None, Some(PVS));
        assert!(v.pods.is_none());
        assert_eq!(v.pv_exists(Some("pvc-81b676e6"), None, None), Some(true));
        assert_eq!(v.pv_exists(Some("pvc-gone"), None, None), Some(false));
        assert_eq!(
            v.pv_exists(
                Some("other"),
                Some("driver.longhorn.io"),
                Some("pvc-81b676e6")
            ),
            Some(true)
        );
        assert_eq!(v.attachments.as_ref().unwrap().len(), 1);
        assert_eq!(v.attached_here("pvc-81b676e6"), Some(true));
        assert_eq!(v.attached_here("pvc-gone"), Some(false));
        assert!(v.needs_attachment("driver.longhorn.io"));
        assert!(!v.needs_attachment("nfs.csi.k8s.io"));
        assert!(!v.needs_attachment("never.seen"));
    }

    #[test]
    fn names_from_the_view_without_another_request() {
        let v = view(Some(PODS), Some(PVS));
        let n = names(&v);
        assert_eq!(n.pod("u-1").as_deref(), Some("shop/web-0"));
        assert_eq!(n.claim("pvc-81b676e6").as_deref(), Some("shop/data-web-0"));
        assert_eq!(n.claim("pv-nfs"), None);
        assert_eq!(
            n.volume("pvc-81b676e6", ["u-1"]),
            "shop/web-0 (PVC shop/data-web-0, pvc-81b676e6)"
        );
    }

    #[test]
    fn typed_lists_and_single_objects() {
        let mut o = Objects::default();
        parse_objects(
            r#"{"kind":"PodList","items":[{"metadata":{"name":"a","namespace":"n","uid":"x"},"spec":{"nodeName":"worker-04"}}]}"#,
            "p",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        parse_objects(
            r#"{"kind":"VolumeAttachmentList","items":[]}"#,
            "v",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        parse_objects(
            r#"{"kind":"PersistentVolume","metadata":{"name":"pv1"},"spec":{}}"#,
            "v",
            "Pod",
            &mut o,
        )
        .unwrap();
        assert_eq!(o.pods[0].uid, "x");
        assert_eq!(o.pvs[0].name, "pv1");
        let v = o.into_view("worker-04".into(), true, true);
        assert_eq!(v.attachments, Some(vec![]));
    }

    #[test]
    fn garbage_is_an_error_naming_the_option() {
        let mut o = Objects::default();
        for bad in [
            "",
            "{",
            "[1,2]",
            r#"{"items":5}"#,
            r#"{"items":[{"kind":"Pod","metadata":{"name":"x"}}]}"#,
            r#"{"items":[{"metadata":"str"}]}"#,
        ] {
            let e = parse_objects(bad, "--pods-json x.json", "Pod", &mut o).unwrap_err();
            assert!(e.starts_with("--pods-json x.json: "), "{bad}: {e}");
        }
    }
}
