//! What the checks read from the API, by resource: pods (through a [`PodFilter`]), PersistentVolumes,
//! VolumeAttachments, Nodes and Events, each a paged list bounded by the client's deadline.

use crate::client::{Client, ListParams};
use crate::filter::PodFilter;
use crate::types::{Event, Node, PersistentVolume, Pod, VolumeAttachment};
use plugin::Unknown;

/// The name of the VolumeAttachment of a CSI volume on a node, as the kubelet and the
/// attach/detach controller compute it (kubernetes pkg/volume/csi/csi_attacher.go,
/// `getAttachmentName`): `csi-` + hex(sha256(volumeHandle + driverName + nodeName)).
pub fn attachment_name(volume_handle: &str, driver: &str, node: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(volume_handle.as_bytes());
    h.update(driver.as_bytes());
    h.update(node.as_bytes());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

impl Client {
    /// List the pods `filter` selects, page by page, calling `f` for each. Returns the count.
    pub fn list_pods(&self, filter: &PodFilter, mut f: impl FnMut(Pod)) -> Result<usize, Unknown> {
        let params = ListParams {
            label_selector: filter.labels.as_ref().map(|s| s.as_str().to_string()),
            field_selector: filter.node.as_ref().map(|n| format!("spec.nodeName={n}")),
            limit: 0,
        };
        let mut n = 0;
        let mut take = |p: Pod| {
            if filter.matches(&p) {
                n += 1;
                f(p)
            }
        };
        if filter.namespaces.is_empty() {
            self.list("/api/v1/pods", &params, &mut take)?;
        } else {
            for ns in &filter.namespaces {
                self.list(&format!("/api/v1/namespaces/{ns}/pods"), &params, &mut take)?;
            }
        }
        Ok(n)
    }

    /// All PersistentVolumes.
    pub fn list_pvs(&self, f: impl FnMut(PersistentVolume)) -> Result<usize, Unknown> {
        self.list("/api/v1/persistentvolumes", &ListParams::default(), f)
    }

    /// The PersistentVolume named `name`, if it exists: a list with
    /// `fieldSelector=metadata.name=…` (the `list` verb the RBAC grants, not `get`), so one
    /// node's run costs its own volumes, not the cluster's.
    pub fn list_pv_named(
        &self,
        name: &str,
        f: impl FnMut(PersistentVolume),
    ) -> Result<usize, Unknown> {
        self.list(
            "/api/v1/persistentvolumes",
            &ListParams {
                field_selector: Some(format!("metadata.name={name}")),
                ..Default::default()
            },
            f,
        )
    }

    /// The VolumeAttachment named `name` (see [`attachment_name`]), if it exists: a list with
    /// `fieldSelector=metadata.name=…`.
    pub fn list_volume_attachment_named(
        &self,
        name: &str,
        f: impl FnMut(VolumeAttachment),
    ) -> Result<usize, Unknown> {
        self.list(
            "/apis/storage.k8s.io/v1/volumeattachments",
            &ListParams {
                field_selector: Some(format!("metadata.name={name}")),
                ..Default::default()
            },
            f,
        )
    }

    /// One page of one item of a collection (`GET path?limit=1`, the `list` verb): proves this
    /// identity may list it, at the cost of one object — a missing grant then shows on every
    /// run, not only once the objects are needed.
    pub fn may_list(&self, path: &str) -> Result<(), Unknown> {
        self.get::<serde::de::IgnoredAny>(path, &[("limit", "1")])
            .map(|_| ())
    }

    /// All VolumeAttachments (storage.k8s.io/v1).
    pub fn list_volume_attachments(
        &self,
        f: impl FnMut(VolumeAttachment),
    ) -> Result<usize, Unknown> {
        self.list(
            "/apis/storage.k8s.io/v1/volumeattachments",
            &ListParams::default(),
            f,
        )
    }

    /// All Nodes (name and conditions).
    pub fn list_nodes(&self, f: impl FnMut(Node)) -> Result<usize, Unknown> {
        self.list("/api/v1/nodes", &ListParams::default(), f)
    }

    /// Core events of every namespace with this `reason` (`fieldSelector=reason=…`, served by
    /// the API server for core/v1 Events), e.g. `FailedAttachVolume`.
    pub fn list_events_with_reason(
        &self,
        reason: &str,
        mut f: impl FnMut(Event),
    ) -> Result<usize, Unknown> {
        self.list(
            "/api/v1/events",
            &ListParams {
                field_selector: Some(format!("reason={reason}")),
                ..Default::default()
            },
            |e: Event| {
                // Again here: a server that ignored the selector must not widen the answer.
                if e.reason == reason {
                    f(e)
                }
            },
        )
    }

    /// Core events about one object (`involvedObject.kind/name`) in `namespace`.
    pub fn events_for(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Result<Vec<Event>, Unknown> {
        let mut out = Vec::new();
        self.list(
            &format!("/api/v1/namespaces/{namespace}/events"),
            &ListParams {
                field_selector: Some(format!(
                    "involvedObject.kind={kind},involvedObject.name={name}"
                )),
                ..Default::default()
            },
            |e: Event| {
                if e.involved_object.name == name {
                    out.push(e)
                }
            },
        )?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_name_is_the_kubelets() {
        // sha256("vol-1" + "ebs.csi.aws.com" + "node-a"), computed independently (Python's
        // hashlib), in getAttachmentName's format.
        assert_eq!(
            attachment_name("vol-1", "ebs.csi.aws.com", "node-a"),
            "csi-7ba6b8ed285c3c863d675c3b4567d68ede4307ae1a37202e02bf2c4b9f42f28b"
        );
    }
}
