//! Longhorn's objects for the real API server: its published CRDs (vendored in
//! tests/fixtures/longhorn/crds.yaml, Longhorn v1.12.1) applied once, and volumes, replicas and
//! engines built with the field names and values of longhorn-manager's v1beta2 types. The status
//! goes through the status subresource, as longhorn-manager writes it.

use crate::control_plane::ControlPlane;
use serde_json::{json, Value};

/// Longhorn's namespace.
pub const NS: &str = "longhorn-system";

/// The CRDs of volumes, replicas and engines, as Longhorn publishes them.
pub const CRDS: &str = include_str!("../fixtures/longhorn/crds.yaml");

/// Apply the CRDs and the namespace, and wait until the CRDs are served.
pub fn install(cp: &ControlPlane) {
    cp.apply(CRDS);
    cp.apply(&json!({"apiVersion":"v1","kind":"Namespace","metadata":{"name":NS}}).to_string());
    for crd in ["volumes", "replicas", "engines"] {
        cp.wait_crd_served(&format!("{crd}.longhorn.io"));
    }
}

/// A volume of claim `pvc_ns/pvc` used by pod `pod` (its phase as Longhorn records it).
#[allow(clippy::too_many_arguments)] // one argument per field a scene varies
pub fn volume(
    name: &str,
    state: &str,
    robustness: &str,
    node: &str,
    pvc_ns: &str,
    pvc: &str,
    pod: &str,
    pod_status: &str,
) -> Value {
    json!({
        "apiVersion": "longhorn.io/v1beta2", "kind": "Volume",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"numberOfReplicas": 3, "nodeID": node, "size": "1073741824", "frontend": "blockdev"},
        "status": {"state": state, "robustness": robustness,
            "currentNodeID": if state == "attached" { node } else { "" },
            "kubernetesStatus": {"pvName": name, "pvStatus": "Bound", "namespace": pvc_ns, "pvcName": pvc,
                "workloadsStatus": [{"podName": pod, "podStatus": pod_status,
                    "workloadName": pod.rsplit_once('-').map(|p| p.0).unwrap_or(pod), "workloadType": "StatefulSet"}]},
            "conditions": [{"type": "Scheduled", "status": "True", "reason": "", "message": "",
                "lastProbeTime": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    })
}

/// Replica `i` of `vol` on `node`: healthy since long ago, or failed (`failedAt` set, stopped).
pub fn replica(vol: &str, i: usize, node: &str, failed: bool) -> Value {
    json!({
        "apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
        "metadata": {"name": format!("{vol}-r-{i}"), "namespace": NS,
            "labels": {"longhornvolume": vol, "longhornnode": node}},
        "spec": {"volumeName": vol, "nodeID": node, "healthyAt": "2026-01-01T00:00:00Z",
            "failedAt": if failed { "2026-01-02T00:00:00Z" } else { "" },
            "desireState": if failed { "stopped" } else { "running" }},
        "status": {"currentState": if failed { "stopped" } else { "running" }}
    })
}

/// The engine of `vol` on `node`, with its replicas' modes and the FilesystemReadOnly condition.
pub fn engine(vol: &str, node: &str, modes: &[(usize, &str)], read_only: bool) -> Value {
    let m: serde_json::Map<String, Value> = modes
        .iter()
        .map(|(i, m)| (format!("{vol}-r-{i}"), json!(m)))
        .collect();
    json!({
        "apiVersion": "longhorn.io/v1beta2", "kind": "Engine",
        "metadata": {"name": format!("{vol}-e-0"), "namespace": NS, "labels": {"longhornvolume": vol}},
        "spec": {"volumeName": vol, "nodeID": node, "desireState": "running"},
        "status": {"currentState": "running", "replicaModeMap": m,
            "conditions": [{"type": "FilesystemReadOnly", "status": if read_only { "True" } else { "False" },
                "reason": if read_only { "DetectedReadOnly" } else { "" },
                "message": if read_only { "The volume is in read-only mode" } else { "" },
                "lastProbeTime": "", "lastTransitionTime": "2026-01-02T00:00:00Z"}]}
    })
}
