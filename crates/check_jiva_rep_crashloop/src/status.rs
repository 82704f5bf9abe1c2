//! Jiva's own status (issue 30): the JivaVolume custom resources of jiva-operator, and the
//! cascade's mitigation watched — how long a node outage leaves a Jiva controller (the volume's
//! iSCSI target) on its node before the NoExecute taint evicts it.
//!
//! Field names and values from jiva-operator v3.6.0 (`pkg/apis/openebs/v1/jivavolume_types.go`,
//! `pkg/controllers/jivavolume_controller.go`): the operator copies the controller's `/stats`
//! into `status.status` (`RW`, `RO`; empty when it cannot reach the controller),
//! `status.replicaCount` and `status.replicaStatus[]` (`address`, `mode`: `RW`, `WO` = rebuilding,
//! `ERR`); the configured replica count is `spec.policy.target.replicationFactor`, and its own
//! quorum is `replicationFactor / 2 + 1` replicas in `RW` (`isHAVolume`).

use plugin::{fmt_duration, Finding, Status, Subject};
use serde::Deserialize;
use std::time::Duration;

/// The API group/version of the JivaVolume CRD (jivavolumes.openebs.io, storage version v1).
pub const JIVA_GROUP_VERSION: &str = "openebs.io/v1";
/// The resource's plural.
pub const JIVA_RESOURCE: &str = "jivavolumes";
/// The NoExecute taints a node controller puts on a node that stops reporting.
pub const EVICTION_TAINTS: [&str; 2] = [
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// A JivaVolume as the API serves it (only the fields read).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct JivaVolumeObj {
    pub metadata: kube::types::ObjectMeta,
    pub spec: JvSpec,
    pub status: JvStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JvSpec {
    pub pv: Option<String>,
    pub policy: Option<JvPolicy>,
    pub desired_replication_factor: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct JvPolicy {
    pub target: Option<JvTarget>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JvTarget {
    pub replication_factor: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JvStatus {
    pub status: Option<String>,
    pub replica_count: Option<i64>,
    pub replica_status: Option<Vec<JvReplica>>,
    pub phase: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct JvReplica {
    pub address: Option<String>,
    pub mode: Option<String>,
}

/// One Jiva volume as `evaluate` sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JivaVolume {
    pub namespace: String,
    /// The JivaVolume's name (= the PV's).
    pub name: String,
    /// `spec.pv` (else the name).
    pub pv: String,
    /// `status.status`: `RW`, `RO`, … (empty: not reported).
    pub status: String,
    pub phase: String,
    /// `spec.policy.target.replicationFactor` (else `spec.desiredReplicationFactor`), 0 unknown.
    pub replication_factor: i64,
    /// (address, mode) of each replica the controller knows.
    pub replicas: Vec<(String, String)>,
}

impl From<JivaVolumeObj> for JivaVolume {
    fn from(o: JivaVolumeObj) -> JivaVolume {
        let rf = o
            .spec
            .policy
            .and_then(|p| p.target)
            .and_then(|t| t.replication_factor)
            .filter(|n| *n > 0)
            .or(o.spec.desired_replication_factor.filter(|n| *n > 0))
            .unwrap_or(0);
        JivaVolume {
            pv: o
                .spec
                .pv
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| o.metadata.name.clone()),
            namespace: o.metadata.namespace,
            name: o.metadata.name,
            status: o.status.status.unwrap_or_default(),
            phase: o.status.phase.unwrap_or_default(),
            replication_factor: rf,
            replicas: o
                .status
                .replica_status
                .unwrap_or_default()
                .into_iter()
                .map(|r| (r.address.unwrap_or_default(), r.mode.unwrap_or_default()))
                .collect(),
        }
    }
}

/// How long a pod stays on a node carrying `taint` (NoExecute): `None` forever, `Some(0)` when no
/// toleration matches (evicted at once; the DefaultTolerationSeconds admission plugin normally
/// adds 300 s to pods that have none).
pub fn evict_after(tolerations: &[kube::types::Toleration], taint: &str) -> Option<i64> {
    let mut best: Option<Option<i64>> = None;
    for t in tolerations {
        let key_ok = t.key == taint || (t.key.is_empty() && t.operator == "Exists");
        let effect_ok = t.effect.is_empty() || t.effect == "NoExecute";
        if !(key_ok && effect_ok) {
            continue;
        }
        let this = t.toleration_seconds.map(|s| s.max(0));
        best = Some(match (best, this) {
            (None, x) => x,
            (Some(None), _) | (_, None) => None,
            (Some(Some(a)), Some(b)) => Some(a.max(b)),
        });
    }
    best.unwrap_or(Some(0))
}

/// What a JivaVolume's state amounts to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    TargetRo,
    QuorumLost,
    Degraded,
    Ok,
}

fn signal_of(v: Verdict) -> &'static str {
    match v {
        Verdict::TargetRo => "jiva_target_ro",
        Verdict::QuorumLost => "jiva_quorum_lost",
        Verdict::Degraded => "jiva_volume_degraded",
        Verdict::Ok => "jiva_volume_ok",
    }
}

/// The verdict on one JivaVolume: its finding, and a summary part when not OK.
pub fn judge_volume(v: &JivaVolume, name: &str, pods: &[String]) -> (Finding, Option<String>) {
    let rw = v.replicas.iter().filter(|(_, m)| m == "RW").count() as i64;
    let err: Vec<&str> = v
        .replicas
        .iter()
        .filter(|(_, m)| m == "ERR")
        .map(|(a, _)| a.as_str())
        .collect();
    let wo = v.replicas.iter().filter(|(_, m)| m == "WO").count();
    let rf = if v.replication_factor > 0 {
        v.replication_factor
    } else {
        v.replicas.len() as i64
    };
    let modes = v
        .replicas
        .iter()
        .map(|(a, m)| format!("{a} {m}"))
        .collect::<Vec<_>>()
        .join(", ");
    let status_shown = if v.status.is_empty() {
        "not reported".to_string()
    } else {
        v.status.clone()
    };
    let counts = format!("{rw}/{rf} replicas RW");
    let subject = Subject::new()
        .namespace(v.namespace.as_str())
        .pv(v.pv.as_str());
    let jv = format!("kubectl -n {} get jivavolume {}", v.namespace, v.name);
    let pods_cmd = format!(
        "kubectl -n {} get pods -l openebs.io/persistent-volume={} -o wide",
        v.namespace, v.pv
    );
    let pods_line = if pods.is_empty() {
        "pods: none found".to_string()
    } else {
        format!("pods: {}", pods.join(", "))
    };
    let target_down = matches!(v.status.to_ascii_uppercase().as_str(), "RO" | "OFFLINE");
    let (status, verdict, text, next) = if target_down {
        (
            Status::Critical,
            Verdict::TargetRo,
            format!(
                "{name}: Jiva target {status_shown} ({counts}): writes fail whatever the pods report"
            ),
            format!(
                "`{jv} -o yaml`, `kubectl -n {} logs deploy/{}-jiva-ctrl -c jiva-controller --tail=200`, \
                 then check_ro_pvc_mounts on the nodes of the pods that mount it",
v.namespace,
                v.name,
                            ),
        )
    } else if rf > 0 && rw * 2 <= rf {
        (
            Status::Critical,
            Verdict::QuorumLost,
            format!(
                "{name}: {counts}, quorum lost (needs {}; status {status_shown})",
                rf / 2 + 1
            ),
            format!(
                "`{jv} -o yaml`, `{pods_cmd}`; do not wipe any replica before a majority is RW",
            ),
        )
    } else if !err.is_empty() || rw < rf || v.status != "RW" {
        let mut why = Vec::new();
        if !err.is_empty() {
            why.push(format!("ERR: {}", err.join(", ")));
        }
        if wo > 0 {
            why.push(format!("{wo} rebuilding (WO)"));
        }
        if v.status != "RW" {
            why.push(format!(
                "status {status_shown}{}",
                if v.phase.is_empty() {
                    String::new()
                } else {
                    format!(", phase {}", v.phase)
                }
            ));
        }
        (
            Status::Warning,
            Verdict::Degraded,
            format!("{name}: {counts} ({})", why.join("; ")),
            format!(
                "`{jv} -o yaml`, `{pods_cmd}`, `kubectl -n {} logs POD --previous` for the replica not RW",
                v.namespace
            ),
        )
    } else {
        (
            Status::Ok,
            Verdict::Ok,
            format!("{name}: Jiva target RW, {counts}"),
            String::new(),
        )
    };
    let mut f = Finding::new(status, text.clone())
        .signal(signal_of(verdict))
        .subject(subject);
    if !modes.is_empty() {
        f = f.detail(format!("replicas: {modes}"));
    }
    f = f.detail(pods_line);
    if status != Status::Ok {
        f = f.next(next);
    }
    (f, (status != Status::Ok).then_some(text))
}

/// A Jiva controller that a node outage evicts sooner than `min`: its finding.
pub fn judge_toleration(
    namespace: &str,
    pod: &str,
    node: &str,
    pv: Option<&str>,
    volume: Option<&str>,
    evict: &[(String, Option<i64>)],
    min: Duration,
) -> Option<Finding> {
    let short: Vec<String> = evict
        .iter()
        .filter_map(|(k, s)| {
            s.filter(|s| (*s as u64) < min.as_secs())
                .map(|s| format!("{k} {}", fmt_duration(Duration::from_secs(s as u64))))
        })
        .collect();
    if short.is_empty() {
        return None;
    }
    let deploy = pv
        .map(|p| format!("{p}-jiva-ctrl"))
        .unwrap_or_else(|| "PV-jiva-ctrl".into());
    Some(
        Finding::new(
            Status::Warning,
            format!(
                "{namespace}/{pod} on {}: controller (iSCSI target){} evicted after {} of node outage (NoExecute), less than --min-toleration {}",
                if node.is_empty() { "(unscheduled)" } else { node },
                volume.map(|v| format!(" of {v}")).unwrap_or_default(),
                short.join(", "),
                fmt_duration(min)
            ),
        )
        .signal("toleration_short")
        .subject(
            Subject::new()
                .node(node)
                .namespace(namespace)
                .pod(pod)
                .maybe(Subject::pv, pv),
        )
        .detail(
            "a node restart longer than that moves the target while initiators hold sessions: \
             after their recovery timeout (check_iscsi_sessions --min-recovery-timeout) the \
             filesystems go read-only (the storage cascade)",
        )
        .next(format!(
            "`kubectl -n {namespace} get deploy {deploy} -o jsonpath='{{.spec.template.spec.tolerations}}'`; \
             set tolerationSeconds 600 for both taints in the JivaVolumePolicy's spec.target.tolerations \
             and on this deployment in a maintenance window (the rollout restarts the target)"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::types::Toleration;

    fn vol(status: &str, rf: i64, modes: &[&str]) -> JivaVolume {
        JivaVolume {
            namespace: "openebs".into(),
            name: "pvc-1".into(),
            pv: "pvc-1".into(),
            status: status.into(),
            phase: String::new(),
            replication_factor: rf,
            replicas: modes
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("tcp://10.0.0.{i}:9502"), m.to_string()))
                .collect(),
        }
    }

    fn judged(v: &JivaVolume) -> (Status, &'static str, Finding) {
        let (f, _) = judge_volume(
            v,
            "PVC media/radarr-config (pvc-1)",
            &["pvc-1-jiva-rep-0".into()],
        );
        let sig = match f.signal {
            "jiva_volume_ok" => "jiva_volume_ok",
            "jiva_target_ro" => "jiva_target_ro",
            "jiva_quorum_lost" => "jiva_quorum_lost",
            "jiva_volume_degraded" => "jiva_volume_degraded",
            s => panic!("{s}"),
        };
        (f.status, sig, f)
    }

    #[test]
    fn states_of_a_volume() {
        assert_eq!(judged(&vol("RW", 3, &["RW", "RW", "RW"])).0, Status::Ok);
        // RO at the target is CRITICAL even with every replica RW.
        let (s, sig, f) = judged(&vol("RO", 3, &["RW", "RW", "RW"]));
        assert_eq!((s, sig), (Status::Critical, "jiva_target_ro"));
        assert!(
            f.text
                .contains("PVC media/radarr-config (pvc-1): Jiva target RO"),
            "{f:?}"
        );
        assert_eq!(judged(&vol("Offline", 3, &[])).1, "jiva_target_ro");
        assert_eq!(
            judged(&vol("RW", 3, &["RW", "RW", "ERR"])).1,
            "jiva_volume_degraded"
        );
        assert_eq!(
            judged(&vol("RW", 3, &["RW", "RW", "WO"])).0,
            Status::Warning
        );
        assert_eq!(judged(&vol("RW", 3, &["RW", "RW"])).0, Status::Warning);
        assert_eq!(
            judged(&vol("RW", 3, &["RW", "ERR", "ERR"])).1,
            "jiva_quorum_lost"
        );
        assert_eq!(judged(&vol("RW", 1, &["RW"])).0, Status::Ok);
        assert_eq!(judged(&vol("RW", 2, &["RW", "WO"])).1, "jiva_quorum_lost");
        assert_eq!(
            judged(&vol("RW", 5, &["RW", "RW", "RW", "ERR", "ERR"])).0,
            Status::Warning
        );
        // Not reported (the operator cannot reach the controller): WARNING, not OK.
        assert_eq!(judged(&vol("", 3, &["RW", "RW", "RW"])).0, Status::Warning);
        for v in [
            vol("RO", 3, &[]),
            vol("RW", 3, &["RW", "ERR", "ERR"]),
            vol("RW", 3, &["ERR", "RW", "RW"]),
        ] {
            let f = judged(&v).2;
            let next = f.next_line().unwrap();
            assert!(
                !next.contains('|') && next.ends_with(&format!("docs/runbooks/{}.md", f.signal)),
                "{next}"
            );
        }
    }

    fn tol(key: &str, op: &str, effect: &str, secs: Option<i64>) -> Toleration {
        Toleration {
            key: key.into(),
            operator: op.into(),
            effect: effect.into(),
            toleration_seconds: secs,
        }
    }

    #[test]
    fn eviction_times() {
        let nr = EVICTION_TAINTS[0];
        assert_eq!(evict_after(&[], nr), Some(0));
        assert_eq!(
            evict_after(&[tol(nr, "Exists", "NoExecute", Some(300))], nr),
            Some(300)
        );
        assert_eq!(
            evict_after(&[tol(nr, "Exists", "NoExecute", None)], nr),
            None
        );
        assert_eq!(
            evict_after(&[tol(nr, "Exists", "NoSchedule", None)], nr),
            Some(0)
        );
        assert_eq!(evict_after(&[tol("", "Exists", "", None)], nr), None);
        assert_eq!(
            evict_after(
                &[
                    tol(nr, "Exists", "NoExecute", Some(0)),
                    tol(nr, "Exists", "NoExecute", Some(600))
                ],
                nr
            ),
            Some(600)
        );
        let ev = vec![
            (nr.to_string(), Some(300)),
            (EVICTION_TAINTS[1].to_string(), None),
        ];
        let f = judge_toleration(
            "openebs",
            "p",
            "k8s03",
            Some("pvc-1"),
            None,
            &ev,
            Duration::from_secs(600),
        )
        .unwrap();
        assert_eq!(f.status, Status::Warning);
        assert!(f.text.contains("node.kubernetes.io/not-ready 5m"), "{f:?}");
        assert!(judge_toleration(
            "openebs",
            "p",
            "k8s03",
            None,
            None,
            &ev,
            Duration::from_secs(300)
        )
        .is_none());
    }
}
