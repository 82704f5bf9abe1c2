//! Typed subsets of the API objects the checks read. Only the fields a check uses are kept
//! (everything else — managedFields, annotations, specs of containers — is skipped while parsing,
//! never allocated). Every field is optional in practice: missing or `null` values become
//! defaults, unknown fields are ignored, so one odd object never fails a whole list.

use crate::time::{de_time, Time};
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// `null` or missing → `Default`.
fn nd<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    /// Empty for cluster-scoped objects.
    #[serde(deserialize_with = "nd")]
    pub namespace: String,
    #[serde(deserialize_with = "nd")]
    pub uid: String,
    #[serde(deserialize_with = "nd")]
    pub labels: BTreeMap<String, String>,
    #[serde(deserialize_with = "de_time")]
    pub creation_timestamp: Option<Time>,
    #[serde(deserialize_with = "de_time")]
    pub deletion_timestamp: Option<Time>,
    #[serde(deserialize_with = "nd")]
    pub owner_references: Vec<OwnerReference>,
    /// Finalizers still present (a deleted object stays until the list is empty).
    #[serde(deserialize_with = "nd")]
    pub finalizers: Vec<String>,
    /// The grace period a deletion was requested with (set with `deletion_timestamp`).
    pub deletion_grace_period_seconds: Option<i64>,
}

impl ObjectMeta {
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(|s| s.as_str())
    }
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct OwnerReference {
    #[serde(deserialize_with = "nd")]
    pub kind: String,
    #[serde(deserialize_with = "nd")]
    pub name: String,
}

// ---------------------------------------------------------------- Pod

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: PodSpec,
    #[serde(deserialize_with = "nd")]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodSpec {
    /// Set by the scheduler; `None` while unscheduled.
    pub node_name: Option<String>,
    #[serde(deserialize_with = "nd")]
    pub volumes: Vec<PodVolume>,
    pub termination_grace_period_seconds: Option<i64>,
    /// The pod's tolerations (check_jiva_rep_crashloop's `--min-toleration`).
    #[serde(deserialize_with = "nd")]
    pub tolerations: Vec<Toleration>,
}

/// One toleration of a pod (`spec.tolerations[]`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Toleration {
    #[serde(deserialize_with = "nd")]
    pub key: String,
    /// `Exists` or `Equal` (empty means `Equal`).
    #[serde(deserialize_with = "nd")]
    pub operator: String,
    /// `NoSchedule`, `PreferNoSchedule`, `NoExecute`; empty matches every effect.
    #[serde(deserialize_with = "nd")]
    pub effect: String,
    /// For `NoExecute`: how long the pod stays bound after the taint; `None` is forever.
    pub toleration_seconds: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodVolume {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    pub persistent_volume_claim: Option<ClaimSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClaimSource {
    #[serde(deserialize_with = "nd")]
    pub claim_name: String,
    /// `readOnly: true`: the pod mounts the claim read-only.
    #[serde(deserialize_with = "nd")]
    pub read_only: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodStatus {
    /// Pending, Running, Succeeded, Failed, Unknown ("" when absent).
    #[serde(deserialize_with = "nd")]
    pub phase: String,
    #[serde(deserialize_with = "nd")]
    pub reason: String,
    #[serde(deserialize_with = "nd")]
    pub conditions: Vec<PodCondition>,
    #[serde(deserialize_with = "de_time")]
    pub start_time: Option<Time>,
    #[serde(deserialize_with = "nd")]
    pub init_container_statuses: Vec<ContainerStatus>,
    #[serde(deserialize_with = "nd")]
    pub container_statuses: Vec<ContainerStatus>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(rename = "type", deserialize_with = "nd")]
    pub type_: String,
    /// "True", "False", "Unknown".
    #[serde(deserialize_with = "nd")]
    pub status: String,
    #[serde(deserialize_with = "de_time")]
    pub last_transition_time: Option<Time>,
    #[serde(deserialize_with = "nd")]
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    pub ready: bool,
    pub restart_count: i64,
    #[serde(deserialize_with = "nd")]
    pub state: ContainerState,
    #[serde(deserialize_with = "nd")]
    pub last_state: ContainerState,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ContainerState {
    pub waiting: Option<StateWaiting>,
    pub running: Option<StateRunning>,
    pub terminated: Option<StateTerminated>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct StateWaiting {
    #[serde(deserialize_with = "nd")]
    pub reason: String,
    #[serde(deserialize_with = "nd")]
    pub message: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StateRunning {
    #[serde(deserialize_with = "de_time")]
    pub started_at: Option<Time>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct StateTerminated {
    pub exit_code: i32,
    pub signal: Option<i32>,
    #[serde(deserialize_with = "nd")]
    pub reason: String,
    #[serde(deserialize_with = "de_time")]
    pub started_at: Option<Time>,
    #[serde(deserialize_with = "de_time")]
    pub finished_at: Option<Time>,
}

impl Pod {
    /// The condition of this type, if the pod has it.
    pub fn condition(&self, type_: &str) -> Option<&PodCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// `PodScheduled=True`.
    pub fn is_scheduled(&self) -> bool {
        self.condition("PodScheduled")
            .is_some_and(|c| c.status == "True")
    }

    /// Scheduled but no container ever started: `Pending`, `PodScheduled=True`, and no container
    /// status at all (the kubelet never synced it) or every container still waiting in
    /// `ContainerCreating`/`PodInitializing`.
    pub fn never_started(&self) -> bool {
        self.status.phase == "Pending"
            && self.is_scheduled()
            && self.all_container_statuses().all(|c| {
                c.state.waiting.as_ref().is_some_and(|w| {
                    w.reason == "ContainerCreating" || w.reason == "PodInitializing"
                })
            })
    }

    /// Init and regular container statuses, init first.
    pub fn all_container_statuses(&self) -> impl Iterator<Item = &ContainerStatus> {
        self.status
            .init_container_statuses
            .iter()
            .chain(self.status.container_statuses.iter())
    }

    /// Claim names of the pod's PVC volumes.
    pub fn claim_names(&self) -> impl Iterator<Item = &str> {
        self.spec.volumes.iter().filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str())
        })
    }
}

// ---------------------------------------------------------------- PersistentVolume

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PersistentVolume {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: PvSpec,
    #[serde(deserialize_with = "nd")]
    pub status: PvStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PvSpec {
    #[serde(deserialize_with = "nd")]
    pub capacity: BTreeMap<String, String>,
    #[serde(deserialize_with = "nd")]
    pub access_modes: Vec<String>,
    pub claim_ref: Option<ObjectReference>,
    #[serde(deserialize_with = "nd")]
    pub storage_class_name: String,
    #[serde(deserialize_with = "nd")]
    pub persistent_volume_reclaim_policy: String,
    #[serde(deserialize_with = "nd")]
    pub volume_mode: String,
    pub csi: Option<CsiSource>,
    pub iscsi: Option<IscsiSource>,
    pub host_path: Option<PathSource>,
    pub local: Option<PathSource>,
    pub nfs: Option<NfsSource>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsiSource {
    #[serde(deserialize_with = "nd")]
    pub driver: String,
    #[serde(deserialize_with = "nd")]
    pub volume_handle: String,
    #[serde(deserialize_with = "nd")]
    pub fs_type: String,
    #[serde(deserialize_with = "nd")]
    pub volume_attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct IscsiSource {
    #[serde(deserialize_with = "nd")]
    pub target_portal: String,
    #[serde(deserialize_with = "nd")]
    pub iqn: String,
    pub lun: i64,
    #[serde(deserialize_with = "nd")]
    pub fs_type: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PathSource {
    #[serde(deserialize_with = "nd")]
    pub path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NfsSource {
    #[serde(deserialize_with = "nd")]
    pub server: String,
    #[serde(deserialize_with = "nd")]
    pub path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PvStatus {
    /// Available, Bound, Released, Failed.
    #[serde(deserialize_with = "nd")]
    pub phase: String,
}

/// A reference to another object (claimRef, involvedObject, regarding).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(deserialize_with = "nd")]
    pub kind: String,
    #[serde(deserialize_with = "nd")]
    pub namespace: String,
    #[serde(deserialize_with = "nd")]
    pub name: String,
    #[serde(deserialize_with = "nd")]
    pub uid: String,
}

// ---------------------------------------------------------------- VolumeAttachment

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct VolumeAttachment {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: VaSpec,
    #[serde(deserialize_with = "nd")]
    pub status: VaStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VaSpec {
    #[serde(deserialize_with = "nd")]
    pub attacher: String,
    #[serde(deserialize_with = "nd")]
    pub node_name: String,
    #[serde(deserialize_with = "nd")]
    pub source: VaSource,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VaSource {
    pub persistent_volume_name: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VaStatus {
    pub attached: bool,
    pub attach_error: Option<VolumeError>,
    pub detach_error: Option<VolumeError>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct VolumeError {
    #[serde(deserialize_with = "de_time")]
    pub time: Option<Time>,
    #[serde(deserialize_with = "nd")]
    pub message: String,
}

// ---------------------------------------------------------------- Node

/// A core/v1 Node: its name and conditions (`Ready` is what the attach/detach plane depends on).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Node {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NodeStatus {
    #[serde(deserialize_with = "nd")]
    pub conditions: Vec<NodeCondition>,
}

/// `status.conditions[]` of a Node (`Ready`, `MemoryPressure`, …).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct NodeCondition {
    #[serde(rename = "type", deserialize_with = "nd")]
    pub type_: String,
    /// True, False or Unknown.
    #[serde(deserialize_with = "nd")]
    pub status: String,
    #[serde(deserialize_with = "nd")]
    pub reason: String,
    #[serde(deserialize_with = "nd")]
    pub message: String,
    #[serde(deserialize_with = "de_time")]
    pub last_transition_time: Option<Time>,
}

impl Node {
    pub fn condition(&self, type_: &str) -> Option<&NodeCondition> {
        self.status.conditions.iter().find(|c| c.type_ == type_)
    }
}

// ---------------------------------------------------------------- CSIDriver

/// A storage.k8s.io/v1 CSIDriver: whether its volumes need a VolumeAttachment.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CsiDriver {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: CsiDriverSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsiDriverSpec {
    /// `attachRequired`; `None` when unset (the API's default is true).
    pub attach_required: Option<bool>,
}

// ---------------------------------------------------------------- Event

/// A core/v1 Event (`/api/v1/namespaces/<ns>/events`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Event {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub involved_object: ObjectReference,
    #[serde(deserialize_with = "nd")]
    pub reason: String,
    #[serde(deserialize_with = "nd")]
    pub message: String,
    /// Normal or Warning.
    #[serde(rename = "type", deserialize_with = "nd")]
    pub type_: String,
    pub count: Option<i64>,
    #[serde(deserialize_with = "de_time")]
    pub first_timestamp: Option<Time>,
    #[serde(deserialize_with = "de_time")]
    pub last_timestamp: Option<Time>,
    #[serde(deserialize_with = "de_time")]
    pub event_time: Option<Time>,
    pub series: Option<EventSeries>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EventSeries {
    pub count: Option<i64>,
    #[serde(deserialize_with = "de_time")]
    pub last_observed_time: Option<Time>,
}

impl Event {
    /// When the event was last seen: the newest of series.lastObservedTime, lastTimestamp,
    /// eventTime and creationTimestamp (which of them is set depends on the reporter).
    pub fn last_seen(&self) -> Option<Time> {
        [
            self.series.as_ref().and_then(|s| s.last_observed_time),
            self.last_timestamp,
            self.event_time,
            self.metadata.creation_timestamp,
        ]
        .into_iter()
        .flatten()
        .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_ignored_and_nulls_tolerated() {
        let p: Pod = serde_json::from_str(
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"n","labels":null,
            "managedFields":[{"x":1}],"creationTimestamp":"2026-07-12T10:20:30Z"},
            "spec":{"nodeName":"k8s03","containers":[{"name":"c","image":"i"}],
            "volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"data"}},{"name":"t","emptyDir":{}}]},
            "status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"True",
            "lastTransitionTime":"2026-07-12T10:20:31Z","lastProbeTime":null}],"qosClass":"BestEffort"}}"#,
        )
        .unwrap();
        assert_eq!(p.metadata.key(), "n/a");
        assert!(p.metadata.labels.is_empty());
        assert_eq!(p.spec.node_name.as_deref(), Some("k8s03"));
        assert!(p.is_scheduled());
        assert_eq!(p.claim_names().collect::<Vec<_>>(), ["data"]);
        assert_eq!(
            p.condition("PodScheduled").unwrap().last_transition_time,
            Some(1783851631)
        );
        assert!(p.status.container_statuses.is_empty());
        let empty: Pod = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Pod::default());
    }

    #[test]
    fn container_states() {
        let c: ContainerStatus = serde_json::from_str(
            r#"{"name":"rep","ready":false,"restartCount":92,"image":"x",
            "state":{"waiting":{"reason":"CrashLoopBackOff","message":"back-off 5m0s"}},
            "lastState":{"terminated":{"exitCode":1,"reason":"Error","finishedAt":"2026-07-12T10:20:30Z"}}}"#,
        )
        .unwrap();
        assert_eq!(c.restart_count, 92);
        assert_eq!(c.state.waiting.unwrap().reason, "CrashLoopBackOff");
        let t = c.last_state.terminated.unwrap();
        assert_eq!(
            (t.exit_code, t.reason.as_str(), t.finished_at),
            (1, "Error", Some(1783851630))
        );
    }

    #[test]
    fn event_last_seen_takes_the_newest_source() {
        let e: Event = serde_json::from_str(
            r#"{"metadata":{"name":"e","creationTimestamp":"2026-07-12T10:00:00Z"},
            "involvedObject":{"kind":"Pod","name":"p","namespace":"n"},"reason":"FailedMount",
            "message":"m","type":"Warning","lastTimestamp":null,"eventTime":"2026-07-12T10:20:30.000001Z"}"#,
        )
        .unwrap();
        assert_eq!(e.last_seen(), Some(1783851630));
        assert_eq!(e.involved_object.name, "p");
    }

    #[test]
    fn pv_and_va() {
        let pv: PersistentVolume = serde_json::from_str(
            r#"{"metadata":{"name":"pvc-1"},"spec":{"csi":{"driver":"jiva.csi.openebs.io","volumeHandle":"pvc-1"},
            "claimRef":{"namespace":"media","name":"config"},"capacity":{"storage":"5Gi"}},"status":{"phase":"Bound"}}"#,
        )
        .unwrap();
        assert_eq!(pv.spec.csi.unwrap().driver, "jiva.csi.openebs.io");
        assert_eq!(pv.spec.claim_ref.unwrap().name, "config");
        let va: VolumeAttachment = serde_json::from_str(
            r#"{"metadata":{"name":"csi-1"},"spec":{"attacher":"a","nodeName":"k8s02","source":{"persistentVolumeName":"pvc-1"}},
            "status":{"attached":true}}"#,
        )
        .unwrap();
        assert!(va.status.attached);
        assert_eq!(
            va.spec.source.persistent_volume_name.as_deref(),
            Some("pvc-1")
        );
    }
}
