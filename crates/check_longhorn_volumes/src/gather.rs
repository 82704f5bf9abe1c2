//! Reading Longhorn's objects through the API (discovery of the served version, then three paged
//! lists) into plain [`Data`] for `evaluate`. The serde types carry only the fields judged, named
//! as in longhorn-manager's `k8s/pkg/apis/longhorn/v1beta2` (the same names in v1beta1).

use crate::{Data, Engine, Opts, Replica, Volume, Workload, GROUP, VERSIONS};
use kube::{ListParams, Time};
use plugin::{Ctx, Unknown};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Meta {
    pub name: String,
    pub namespace: String,
    #[serde(deserialize_with = "kube::time::de_time")]
    pub creation_timestamp: Option<Time>,
    pub managed_fields: Vec<ManagedField>,
}

/// `metadata.managedFields[]`: when a manager last wrote (the status subresource, for the
/// volume's state).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ManagedField {
    pub subresource: String,
    #[serde(deserialize_with = "kube::time::de_time")]
    pub time: Option<Time>,
}

/// A Longhorn condition (`misc.go` `Condition`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Cond {
    #[serde(rename = "type")]
    pub kind: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    pub last_transition_time: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LhVolume {
    pub metadata: Meta,
    pub spec: VolumeSpec,
    pub status: VolumeStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeSpec {
    pub number_of_replicas: i64,
    #[serde(rename = "nodeID")]
    pub node_id: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct VolumeStatus {
    pub state: String,
    pub robustness: String,
    #[serde(rename = "currentNodeID")]
    pub current_node_id: String,
    pub kubernetes_status: KubernetesStatus,
    pub conditions: Vec<Cond>,
    pub last_degraded_at: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct KubernetesStatus {
    pub pv_name: String,
    pub namespace: String,
    pub pvc_name: String,
    pub workloads_status: Option<Vec<WorkloadStatus>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct WorkloadStatus {
    pub pod_name: String,
    pub pod_status: String,
    pub workload_name: String,
    pub workload_type: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LhReplica {
    pub metadata: Meta,
    pub spec: ReplicaSpec,
    pub status: InstanceStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ReplicaSpec {
    pub volume_name: String,
    #[serde(rename = "nodeID")]
    pub node_id: String,
    pub healthy_at: String,
    pub failed_at: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct InstanceStatus {
    pub current_state: String,
    pub conditions: Vec<Cond>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct LhEngine {
    pub metadata: Meta,
    pub spec: EngineSpec,
    pub status: EngineStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineSpec {
    pub volume_name: String,
    #[serde(rename = "nodeID")]
    pub node_id: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct EngineStatus {
    pub current_state: String,
    pub conditions: Vec<Cond>,
    pub replica_mode_map: Option<BTreeMap<String, String>>,
    pub rebuild_status: Option<BTreeMap<String, Option<RebuildStatus>>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct RebuildStatus {
    pub is_rebuilding: bool,
}

/// At most this many objects of each kind are kept; past it the answer is UNKNOWN naming the
/// cap (memory stays bounded whatever the server sends).
pub const OBJECTS_MAX: usize = 50_000;

/// The time of the last status write (the status subresource's managedFields entry), else the
/// last write of any kind, else creation.
fn status_written(m: &Meta) -> Option<Time> {
    m.managed_fields
        .iter()
        .filter(|f| f.subresource == "status")
        .filter_map(|f| f.time)
        .max()
        .or_else(|| m.managed_fields.iter().filter_map(|f| f.time).max())
        .or(m.creation_timestamp)
}

impl From<LhVolume> for Volume {
    fn from(v: LhVolume) -> Volume {
        let k = v.status.kubernetes_status;
        Volume {
            state_since: status_written(&v.metadata),
            name: v.metadata.name,
            namespace: v.metadata.namespace,
            state: v.status.state,
            robustness: v.status.robustness,
            node: v.status.current_node_id,
            wanted_node: v.spec.node_id,
            replicas_wanted: v.spec.number_of_replicas,
            pv: k.pv_name,
            pvc: (!k.pvc_name.is_empty()).then(|| format!("{}/{}", k.namespace, k.pvc_name)),
            workloads: k
                .workloads_status
                .unwrap_or_default()
                .into_iter()
                .map(|w| Workload {
                    pod: format!("{}/{}", k.namespace, w.pod_name),
                    status: w.pod_status,
                    workload: if w.workload_name.is_empty() {
                        String::new()
                    } else {
                        format!("{} {}", w.workload_type, w.workload_name)
                    },
                })
                .collect(),
            conditions: v.status.conditions,
            last_degraded_at: kube::time::parse_rfc3339(&v.status.last_degraded_at),
        }
    }
}

impl From<LhReplica> for Replica {
    fn from(r: LhReplica) -> Replica {
        Replica {
            name: r.metadata.name,
            volume: r.spec.volume_name,
            node: r.spec.node_id,
            healthy_at: r.spec.healthy_at,
            failed_at: r.spec.failed_at,
            state: r.status.current_state,
            conditions: r.status.conditions,
        }
    }
}

impl From<LhEngine> for Engine {
    fn from(e: LhEngine) -> Engine {
        Engine {
            name: e.metadata.name,
            volume: e.spec.volume_name,
            node: e.spec.node_id,
            state: e.status.current_state,
            modes: e.status.replica_mode_map.unwrap_or_default(),
            rebuilding: e
                .status
                .rebuild_status
                .unwrap_or_default()
                .values()
                .any(|s| s.as_ref().is_some_and(|s| s.is_rebuilding)),
            conditions: e.status.conditions,
        }
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Group {
    versions: Vec<GroupVersion>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(default)]
struct GroupVersion {
    version: String,
}

fn list_capped<T, U>(
    client: &kube::Client,
    ctx: &Ctx,
    path: &str,
    what: &str,
) -> Result<Vec<U>, Unknown>
where
    T: serde::de::DeserializeOwned,
    U: From<T>,
{
    ctx.stage(format!("listing {path} from {}", client.server()));
    let mut out = Vec::new();
    let mut over = 0usize;
    client.list::<T, _>(path, &ListParams::default(), |o| {
        if out.len() < OBJECTS_MAX {
            out.push(U::from(o))
        } else {
            over += 1
        }
    })?;
    if over > 0 {
        return Err(Unknown(format!(
            "more than {OBJECTS_MAX} Longhorn {what} ({over} more not kept: OBJECTS_MAX, the cap \
             of this check): not judged; narrow it with --node"
        )));
    }
    Ok(out)
}

/// All I/O: which longhorn.io version is served, then volumes, replicas, engines.
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let client = kube::connect(&opts.api, ctx)?;
    ctx.stage(format!("discovering /apis/{GROUP} on {}", client.server()));
    let group: Group = match client.send("GET", &format!("/apis/{GROUP}"), &[], None) {
        Ok(g) => g,
        Err(e) if e.status == Some(404) => {
            return Err(Unknown(format!(
                "Longhorn is not installed on API server {}: the API group {GROUP} is not \
                 served (no CustomResourceDefinition volumes.{GROUP}); if Longhorn should be \
                 there, see kubectl get crd volumes.{GROUP}",
                client.server()
            )))
        }
        Err(e) => return Err(e.error),
    };
    let served: Vec<&str> = group.versions.iter().map(|v| v.version.as_str()).collect();
    let Some(version) = VERSIONS.iter().find(|v| served.contains(v)) else {
        return Err(Unknown(format!(
            "API group {GROUP} serves {}, none of the versions this check reads ({})",
            if served.is_empty() {
                "no version".to_string()
            } else {
                served.join(", ")
            },
            VERSIONS.join(", ")
        )));
    };
    ctx.debug(format!("{GROUP} served versions: {}", served.join(", ")));
    let base = format!("/apis/{GROUP}/{version}");
    let volumes: Vec<Volume> =
        list_capped::<LhVolume, _>(&client, ctx, &format!("{base}/volumes"), "volumes")?;
    let replicas: Vec<Replica> =
        list_capped::<LhReplica, _>(&client, ctx, &format!("{base}/replicas"), "replicas")?;
    let engines: Vec<Engine> =
        list_capped::<LhEngine, _>(&client, ctx, &format!("{base}/engines"), "engines")?;
    for line in client.requests() {
        ctx.debug(line);
    }
    let mut d = Data {
        version: version.to_string(),
        volumes,
        replicas,
        engines,
        scope: "cluster-wide".into(),
        total_volumes: 0,
    };
    d.total_volumes = d.volumes.len();
    if let Some(n) = opts
        .node
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        d.only_node(n);
    }
    Ok(d)
}

impl Data {
    /// Keep the volumes attached to `node`, or with a replica or engine there (and their
    /// replicas and engines).
    pub fn only_node(&mut self, node: &str) {
        let mut keep: BTreeSet<String> = self
            .volumes
            .iter()
            .filter(|v| v.node == node)
            .map(|v| v.name.clone())
            .collect();
        keep.extend(
            self.replicas
                .iter()
                .filter(|r| r.node == node)
                .map(|r| r.volume.clone()),
        );
        keep.extend(
            self.engines
                .iter()
                .filter(|e| e.node == node)
                .map(|e| e.volume.clone()),
        );
        self.volumes.retain(|v| keep.contains(&v.name));
        self.replicas.retain(|r| keep.contains(&r.volume));
        self.engines.retain(|e| keep.contains(&e.volume));
        self.scope = format!("attached to or with a replica on node {node}");
    }
}
