//! Every decision, on plain data: each replica's state, each volume's redundancy, the report.

use kube::Time;
use plugin::{fmt_duration, Finding, Perfdata, Range, Report, Status, Thresholds};
use std::collections::BTreeMap;
use std::time::Duration;

/// What decides, from the options: when a replica counts as crash-looping, and when critical.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Restart counts outside this (with a recent restart) are crash-looping.
    pub warning: Range,
    /// Restart counts outside this are critical.
    pub critical: Range,
    /// Unhealthy longer than this is critical.
    pub critical_after: Duration,
    /// How recent the last restart must be for `warning` to count it.
    pub restart_window: Duration,
    /// Controllers evicted sooner than this by a node outage are WARNING.
    pub min_toleration: Option<Duration>,
}

/// One replica as `evaluate` sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Replica {
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// The PV it serves, when known.
    pub pv: Option<String>,
    /// The volume's controller (iSCSI target), not a replica.
    pub controller: bool,
    /// The claim (`namespace/pvc`, or the bare name of a legacy label), when known.
    pub claim: Option<String>,
    /// Running, not being deleted, every container ready.
    pub ready: bool,
    pub phase: String,
    /// Highest restart count of its containers.
    pub restarts: i64,
    /// A container waits in CrashLoopBackOff.
    pub backoff: bool,
    /// The container with the most restarts: its current waiting reason (if any).
    pub waiting: String,
    /// Its last termination: exit code, reason, when.
    pub last_exit: Option<(i32, String, Option<Time>)>,
    /// When the pod last became not Ready (Ready=False transition).
    pub not_ready_since: Option<Time>,
    /// For each of [`EVICTION_TAINTS`](crate::status::EVICTION_TAINTS): how long a node outage
    /// leaves the pod on its node (`None`: forever).
    pub evict_after: Vec<(String, Option<i64>)>,
}

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct Data {
    pub replicas: Vec<Replica>,
    /// "in namespace openebs".
    pub scope: String,
    /// PV → `namespace/pvc` (the PVs' claimRef).
    pub claims: BTreeMap<String, String>,
    pub notes: Vec<String>,
    /// The namespaces read.
    pub namespaces: Vec<String>,
    /// The JivaVolumes (Jiva's own status), when read.
    pub volumes: Vec<crate::status::JivaVolume>,
    /// Why Jiva's own status could not be read (UNKNOWN).
    pub status_unreadable: Option<String>,
}

impl Data {
    /// The first namespace of the scope (for pasteable commands).
    pub fn scope_namespace(&self) -> &str {
        self.namespaces
            .first()
            .map(String::as_str)
            .unwrap_or("openebs")
    }

    /// A volume as the other checks name it: `PVC media/config (pvc-…)`, else the PV.
    pub fn volume_name(&self, pv: &str, label_claim: Option<&str>) -> String {
        match self.claims.get(pv).map(String::as_str).or(label_claim) {
            Some(c) => format!("PVC {c} ({pv})"),
            None => pv.to_string(),
        }
    }
}

fn dur(s: i64) -> String {
    fmt_duration(Duration::from_secs(s.max(0) as u64))
}

/// Per-replica verdict: status (OK when not crash-looping) and how long it has been unhealthy.
pub fn judge(r: &Replica, o: &Policy, now: Time) -> (Status, Option<i64>) {
    let last_exit_at = r.last_exit.as_ref().and_then(|e| e.2);
    let recent_restart = last_exit_at.is_some_and(|t| now - t <= o.restart_window.as_secs() as i64);
    let crashlooping = r.backoff || (o.warning.alerts(r.restarts as f64) && recent_restart);
    if !crashlooping {
        return (Status::Ok, None);
    }
    let since = r.not_ready_since.or(last_exit_at);
    let unhealthy = since.map(|t| (now - t).max(0));
    let critical = o.critical.alerts(r.restarts as f64)
        || unhealthy.is_some_and(|u| u > o.critical_after.as_secs() as i64);
    (
        if critical {
            Status::Critical
        } else {
            Status::Warning
        },
        unhealthy,
    )
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, o: &Policy, now: Time) -> Report {
    let mut findings = Vec::new();
    let mut summary_parts = Vec::new();
    let mut crashlooping = 0;
    let mut max_restarts = 0;
    // pv -> (total, healthy, names of unhealthy)
    let mut volumes: BTreeMap<&str, (usize, usize, Vec<String>)> = BTreeMap::new();
    // pv -> the claim a legacy pod's label names
    let mut label_claims: BTreeMap<&str, &str> = BTreeMap::new();
    let mut status = Status::Ok;
    for r in &d.replicas {
        if let (Some(pv), Some(c)) = (&r.pv, &r.claim) {
            label_claims.insert(pv, c);
        }
    }
    for r in &d.replicas {
        max_restarts = max_restarts.max(r.restarts);
        let (s, unhealthy) = judge(r, o, now);
        let healthy = r.ready && s == Status::Ok;
        let vol_name =
            r.pv.as_deref()
                .map(|pv| d.volume_name(pv, label_claims.get(pv).copied()));
        if let Some(pv) = r.pv.as_deref().filter(|_| !r.controller) {
            let v = volumes.entry(pv).or_default();
            v.0 += 1;
            if healthy {
                v.1 += 1;
            } else {
                v.2.push(r.name.clone());
            }
        }
        let mut text = format!(
            "{}/{} on {}: ",
            r.namespace,
            r.name,
            if r.node.is_empty() {
                "(unscheduled)"
            } else {
                &r.node
            }
        );
        let state = if !r.waiting.is_empty() {
            r.waiting.clone()
        } else if r.ready {
            "Ready".to_string()
        } else if r.phase.is_empty() {
            "not ready".to_string()
        } else {
            format!("{}, not ready", r.phase)
        };
        text.push_str(&format!(
            "{state}, {}",
            plugin::count(r.restarts as usize, "restart", "restarts")
        ));
        if let Some(u) = unhealthy {
            text.push_str(&format!(", unhealthy {}", dur(u)));
        }
        if let Some((code, reason, at)) = &r.last_exit {
            text.push_str(&format!(", last exit {code}"));
            if !reason.is_empty() {
                text.push_str(&format!(" ({reason})"));
            }
            if let Some(t) = at {
                text.push_str(&format!(" {} ago", dur(now - t)));
            }
        }
        if s != Status::Ok {
            crashlooping += 1;
            status = status.worst(s);
            summary_parts.push(format!(
                "{}{} crash-looping ({}{})",
                if r.controller { "controller " } else { "" },
                r.name,
                plugin::count(r.restarts as usize, "restart", "restarts"),
                unhealthy
                    .map(|u| format!(", unhealthy {}", dur(u)))
                    .unwrap_or_default()
            ));
        }
        if let Some(v) = &vol_name {
            text.push_str(&format!(
                "; {} of {v}",
                if r.controller {
                    "controller (iSCSI target)"
                } else {
                    "replica"
                }
            ));
        }
        let mut f = Finding::new(s, text)
            .signal(if s == Status::Ok {
                "replica_ok"
            } else if r.controller {
                "controller_crashloop"
            } else {
                "crashloop"
            })
            .subject(
                plugin::Subject::new()
                    .node(r.node.as_str())
                    .namespace(r.namespace.as_str())
                    .pod(r.name.as_str())
                    .maybe(plugin::Subject::pv, r.pv.as_deref()),
            );
        if s != Status::Ok && r.controller {
            f = f.detail(
                "the controller is the volume's iSCSI target: while it restarts the volume's I/O \
                 fails whatever the replicas' state",
            );
        }
        if s != Status::Ok {
            f = f.next(replica_step(r));
        }
        findings.push(f);
    }
    let mut degraded = 0;
    for (pv, (n, h, bad)) in &volumes {
        if h == n {
            continue;
        }
        degraded += 1;
        let s = if h * 2 > *n {
            Status::Warning
        } else {
            Status::Critical
        };
        status = status.worst(s);
        let what = if s == Status::Critical {
            "no healthy majority"
        } else {
            "degraded redundancy"
        };
        let name = d.volume_name(pv, label_claims.get(pv).copied());
        summary_parts.push(format!("{name}: {h}/{n} replicas healthy"));
        findings.push(
            Finding::new(s, format!("{name}: {h}/{n} replicas healthy ({what})"))
                .signal(if s == Status::Critical {
                    "no_healthy_majority"
                } else {
                    "degraded_redundancy"
                })
                .subject(plugin::Subject::new().pv(*pv))
                .detail(format!("unhealthy: {}", bad.join(", ")))
                .next(volume_step(pv)),
        );
    }
    if let Some(min) = o.min_toleration {
        for r in d.replicas.iter().filter(|r| r.controller) {
            let vol =
                r.pv.as_deref()
                    .map(|pv| d.volume_name(pv, label_claims.get(pv).copied()));
            if let Some(f) = crate::status::judge_toleration(
                &r.namespace,
                &r.name,
                &r.node,
                r.pv.as_deref(),
                vol.as_deref(),
                &r.evict_after,
                min,
            ) {
                status = status.worst(f.status);
                summary_parts.push(format!("controller {} evicted early", r.name));
                findings.push(f);
            }
        }
    }
    for v in &d.volumes {
        let pods: Vec<String> = d
            .replicas
            .iter()
            .filter(|r| r.pv.as_deref() == Some(v.pv.as_str()))
            .map(|r| r.name.clone())
            .collect();
        let name = d.volume_name(&v.pv, label_claims.get(v.pv.as_str()).copied());
        let (f, part) = crate::status::judge_volume(v, &name, &pods);
        status = status.worst(f.status);
        summary_parts.extend(part);
        findings.push(f);
    }
    if let Some(why) = &d.status_unreadable {
        status = status.worst(Status::Unknown);
        summary_parts.push("Jiva's own status not read".to_string());
        findings.push(
            Finding::new(Status::Unknown, format!("Jiva's own status (JivaVolumes) not read: {why}"))
                .signal("jiva_status_unreadable")
                .next(format!(
                    "`kubectl auth can-i list jivavolumes.openebs.io -n {} --as system:serviceaccount:k8s-storage-checks:k8s-storage-checks`, `kubectl get crd jivavolumes.openebs.io`",
                    d.scope_namespace()
                )),
        );
    }
    if d.replicas.is_empty() && d.volumes.is_empty() && d.status_unreadable.is_none() {
        // Nothing seen is no proof of health: a wrong namespace or selector looks the same.
        return Report::unknown(format!(
            "no Jiva replicas found {} (labelled openebs.io/component=jiva-replica or openebs.io/replica=jiva-replica, or named <pv>-jiva-rep-<N> / <pv>-rep-…): give --namespace, --selector or --name-regex",
            d.scope
        ));
    }
    let summary = if summary_parts.is_empty() {
        if d.replicas.is_empty() {
            format!("no Jiva replicas found {}", d.scope)
        } else {
            format!(
                "{} of {} healthy {}",
                plugin::count(d.replicas.len(), "replica", "replicas"),
                plugin::count(volumes.len(), "volume", "volumes"),
                d.scope
            )
        }
    } else {
        summary_parts.join("; ")
    };
    let th = Thresholds::new(Some(o.warning.clone()), Some(o.critical.clone()));
    let zero = Range::above(0.0);
    let mut r = Report::new(status, summary)
        .unit("pod", "pods")
        .perf(Perfdata::new("replicas", d.replicas.len() as f64).min(0.0))
        .perf(
            Perfdata::new("crashlooping", crashlooping as f64)
                .warn(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("max_restarts", max_restarts as f64)
                .thresholds(&th)
                .min(0.0),
        )
        .perf(
            Perfdata::new("degraded_volumes", degraded as f64)
                .warn(Some(&zero))
                .min(0.0),
        );
    for f in findings {
        r = r.finding(f);
    }
    for n in &d.notes {
        r = r.note(n.clone());
    }
    r.sort_findings();
    r
}

/// The next step for a crash-looping replica or controller: why it fails, and for a replica the
/// quorum confirmed before anything of it is wiped (the incident's lesson).
fn replica_step(r: &Replica) -> String {
    use plugin::next::cmd;
    let (ns, pod) = (r.namespace.as_str(), r.name.as_str());
    let logs = cmd(&["kubectl", "logs", "-n", ns, pod, "--previous"]);
    let describe = cmd(&["kubectl", "describe", "pod", "-n", ns, pod]);
    if r.controller {
        return format!(
            "see why it exits: {logs}, {describe}; the volume's pods see I/O errors until it runs: once it does, check_ro_pvc_mounts on their nodes"
        );
    }
    let quorum = match r.pv.as_deref() {
        Some(pv) => format!(
            "confirm the volume's other replicas are healthy first (quorum): {}",
            cmd(&[
                "kubectl",
                "get",
                "jivavolume",
                "-A",
                "--field-selector",
                &format!("metadata.name={pv}"),
                "-o",
                "wide"
            ])
        ),
        None => "confirm the volume's other replicas are healthy first (quorum)".to_string(),
    };
    format!(
        "see why it exits: {logs}; {quorum}; only then rebuild it on {}: wipe its data (the runbook says where) and {} so that it resyncs from the healthy ones",
        if r.node.is_empty() { "its node" } else { r.node.as_str() },
        cmd(&["kubectl", "delete", "pod", "-n", ns, pod])
    )
}

/// The next step for a volume short of healthy replicas.
fn volume_step(pv: &str) -> String {
    use plugin::next::cmd;
    format!(
        "see the volume's replicas as Jiva does: {}; then the crash-looping replica's own step above; do not wipe a replica before the others are healthy",
        cmd(&["kubectl", "get", "jivavolume", "-A", "--field-selector", &format!("metadata.name={pv}"), "-o", "yaml"])
    )
}
