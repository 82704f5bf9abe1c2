//! Every decision, on plain data: each volume's findings, the report.

use crate::Cond;
use kube::Time;
use plugin::shell_quote as q;
use plugin::{fmt_duration, Finding, Perfdata, Range, Report, Status, Subject, Thresholds};
use std::collections::BTreeMap;
use std::time::Duration;

/// A `next:` step of commands, each between backticks (pasteable as printed).
fn step(cmds: &[String]) -> String {
    cmds.iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Longhorn's namespace in the `next:` commands (its objects are namespaced; the default
/// install's namespace is used when the object did not say).
const DEFAULT_NS: &str = "longhorn-system";

/// A pod using the volume (`status.kubernetesStatus.workloadsStatus[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// `namespace/pod`.
    pub pod: String,
    /// The pod's phase as Longhorn saw it (`Running`, `Pending`…).
    pub status: String,
    /// `StatefulSet web` (the owner), or empty.
    pub workload: String,
}

/// One `volumes.longhorn.io`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volume {
    pub name: String,
    /// Longhorn's namespace (`longhorn-system`).
    pub namespace: String,
    /// `status.state`: creating, attached, detached, attaching, detaching, deleting.
    pub state: String,
    /// `status.robustness`: healthy, degraded, faulted, unknown.
    pub robustness: String,
    /// `status.currentNodeID`: where it is attached.
    pub node: String,
    /// `spec.nodeID`: where it is to be attached.
    pub wanted_node: String,
    /// `spec.numberOfReplicas`.
    pub replicas_wanted: i64,
    /// `status.kubernetesStatus.pvName`.
    pub pv: String,
    /// `namespace/pvc` from `status.kubernetesStatus`.
    pub pvc: Option<String>,
    pub workloads: Vec<Workload>,
    pub conditions: Vec<Cond>,
    /// `status.lastDegradedAt`.
    pub last_degraded_at: Option<Time>,
    /// When its status was last written (managedFields of the status subresource).
    pub state_since: Option<Time>,
}

/// One `replicas.longhorn.io`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Replica {
    pub name: String,
    /// `spec.volumeName`.
    pub volume: String,
    /// `spec.nodeID`.
    pub node: String,
    /// `spec.healthyAt`: set once rebuilt and healthy.
    pub healthy_at: String,
    /// `spec.failedAt`: set when it failed.
    pub failed_at: String,
    /// `status.currentState`: running, stopped, error, starting, stopping, unknown.
    pub state: String,
    pub conditions: Vec<Cond>,
}

/// One `engines.longhorn.io`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Engine {
    pub name: String,
    pub volume: String,
    pub node: String,
    pub state: String,
    /// `status.replicaModeMap`: replica → RW, WO (rebuilding), ERR.
    pub modes: BTreeMap<String, String>,
    /// A `status.rebuildStatus` entry is rebuilding.
    pub rebuilding: bool,
    pub conditions: Vec<Cond>,
}

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct Data {
    /// The API version read (v1beta2, v1beta1).
    pub version: String,
    pub volumes: Vec<Volume>,
    pub replicas: Vec<Replica>,
    pub engines: Vec<Engine>,
    /// "cluster-wide", "attached to or with a replica on node X".
    pub scope: String,
    /// Volumes in the cluster before `--node` narrowed them.
    pub total_volumes: usize,
}

fn dur(s: i64) -> String {
    fmt_duration(Duration::from_secs(s.max(0) as u64))
}

impl Replica {
    /// Healthy as Longhorn counts it: rebuilt once (`healthyAt`), not failed since, and — when
    /// the engine lists it — in mode RW.
    fn healthy(&self, engine: Option<&Engine>) -> bool {
        !self.healthy_at.is_empty()
            && self.failed_at.is_empty()
            && engine
                .and_then(|e| e.modes.get(&self.name))
                .is_none_or(|m| m == "RW")
    }

    fn describe(&self, engine: Option<&Engine>) -> String {
        let mut s = format!(
            "replica {} on {}",
            self.name,
            if self.node.is_empty() {
                "(unscheduled)"
            } else {
                &self.node
            }
        );
        let mut what = Vec::new();
        if !self.failed_at.is_empty() {
            what.push(format!("failed at {}", self.failed_at));
        }
        if let Some(m) = engine.and_then(|e| e.modes.get(&self.name)) {
            what.push(format!("mode {m}"));
        }
        if !self.state.is_empty() {
            what.push(self.state.clone());
        }
        if self.healthy_at.is_empty() && self.failed_at.is_empty() {
            what.push("never healthy".into());
        }
        for c in self.conditions.iter().filter(|c| c.status == "True") {
            what.push(cond_text(c));
        }
        if !what.is_empty() {
            s.push_str(&format!(" ({})", what.join(", ")));
        }
        s
    }
}

fn cond_text(c: &Cond) -> String {
    let mut s = c.kind.clone();
    if !c.reason.is_empty() {
        s.push_str(&format!(" {}", c.reason));
    }
    if !c.message.is_empty() {
        s.push_str(&format!(": {}", c.message));
    }
    s
}

impl Volume {
    /// As the other checks name a volume: `PVC media/config (pvc-…)`, else the volume.
    pub fn display(&self) -> String {
        match &self.pvc {
            Some(c) => format!("PVC {c} ({})", self.name),
            None => format!("Longhorn volume {}", self.name),
        }
    }

    fn ns(&self) -> &str {
        if self.namespace.is_empty() {
            DEFAULT_NS
        } else {
            &self.namespace
        }
    }

    fn subject(&self, node: &str) -> Subject {
        let (ns, pvc) = match self.pvc.as_deref().and_then(|c| c.split_once('/')) {
            Some((n, p)) => (Some(n), Some(p)),
            None => (None, None),
        };
        Subject::new()
            .pv(if self.pv.is_empty() {
                self.name.as_str()
            } else {
                self.pv.as_str()
            })
            .driver("driver.longhorn.io")
            .node(node)
            .maybe(Subject::namespace, ns)
            .maybe(Subject::pvc, pvc)
    }

    fn running_pods(&self) -> Vec<&str> {
        self.workloads
            .iter()
            .filter(|w| w.status == "Running")
            .map(|w| w.pod.as_str())
            .collect()
    }

    fn pods_text(&self) -> String {
        if self.workloads.is_empty() {
            return "no workload pod".into();
        }
        let pods: Vec<String> = self
            .workloads
            .iter()
            .map(|w| {
                let mut s = format!("pod {} {}", w.pod, w.status);
                if !w.workload.is_empty() {
                    s.push_str(&format!(" ({})", w.workload));
                }
                s
            })
            .collect();
        pods.join(", ")
    }

    /// The node the commands concern: attached there, else to be attached there.
    fn where_(&self) -> &str {
        if self.node.is_empty() {
            &self.wanted_node
        } else {
            &self.node
        }
    }

    fn get_volume(&self) -> String {
        format!(
            "kubectl -n {} get volumes.longhorn.io {} -o yaml",
            q(self.ns()),
            q(&self.name)
        )
    }

    fn get_replicas(&self) -> String {
        format!(
            "kubectl -n {} get replicas.longhorn.io -l {} -o wide",
            q(self.ns()),
            q(&format!("longhornvolume={}", self.name))
        )
    }

    fn get_engine(&self) -> String {
        format!(
            "kubectl -n {} get engines.longhorn.io -l {} -o yaml",
            q(self.ns()),
            q(&format!("longhornvolume={}", self.name))
        )
    }

    fn events(&self) -> String {
        format!(
            "kubectl -n {} get events --field-selector {}",
            q(self.ns()),
            q(&format!("involvedObject.name={}", self.name))
        )
    }
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, th: &Thresholds, stuck_after: Duration, now: Time) -> Report {
    if d.volumes.is_empty() {
        // Nothing seen is no proof of health.
        return Report::unknown(if d.total_volumes == 0 {
            format!(
                "no Longhorn volumes (volumes.longhorn.io {}) in the cluster: nothing to judge",
                d.version
            )
        } else if d.total_volumes == 1 {
            format!(
                "the cluster's only Longhorn volume is not {}: check --node (as Kubernetes \
                 spells the node)",
                d.scope
            )
        } else {
            format!(
                "none of the cluster's {} Longhorn volumes is {}: check --node (as Kubernetes \
                 spells the node)",
                d.total_volumes, d.scope
            )
        });
    }
    let mut reps: BTreeMap<&str, Vec<&Replica>> = BTreeMap::new();
    for r in &d.replicas {
        reps.entry(r.volume.as_str()).or_default().push(r);
    }
    let mut engs: BTreeMap<&str, Vec<&Engine>> = BTreeMap::new();
    for e in &d.engines {
        engs.entry(e.volume.as_str()).or_default().push(e);
    }
    let mut findings = Vec::new();
    let mut summary = Vec::new();
    let mut status = Status::Ok;
    let (mut degraded, mut faulted, mut stuck, mut read_only, mut failed_replicas) =
        (0, 0, 0, 0, 0);
    let mut min_healthy: Option<usize> = None;
    for v in &d.volumes {
        let rs = reps.get(v.name.as_str()).cloned().unwrap_or_default();
        let es = engs.get(v.name.as_str()).cloned().unwrap_or_default();
        // The engine that serves it (running, else any).
        let engine = es
            .iter()
            .find(|e| e.state == "running")
            .or(es.first())
            .copied();
        let healthy = rs.iter().filter(|r| r.healthy(engine)).count();
        let wanted = if v.replicas_wanted > 0 {
            v.replicas_wanted as usize
        } else {
            rs.len()
        };
        let name = v.display();
        let node = v.where_();
        let head = format!(
            "{name}: {}, robustness {}{}, {healthy}/{wanted} replicas healthy; {}",
            if v.state.is_empty() {
                "no state"
            } else {
                &v.state
            },
            if v.robustness.is_empty() {
                "(none)"
            } else {
                &v.robustness
            },
            if v.node.is_empty() {
                String::new()
            } else {
                format!(" on {}", v.node)
            },
            v.pods_text()
        );
        let conds: Vec<String> = v
            .conditions
            .iter()
            .filter(|c| {
                // Scheduled=False, Restore/TooManySnapshots/…=True are what Longhorn complains with.
                (c.kind == "Scheduled" && c.status == "False")
                    || (c.kind != "Scheduled" && c.status == "True" && !c.message.is_empty())
            })
            .map(cond_text)
            .collect();
        let add = |f: Finding| -> Finding {
            let mut f = f;
            for c in &conds {
                f = f.detail(format!("condition {c}"));
            }
            f
        };
        let mut vf: Vec<Finding> = Vec::new();
        let attached = v.state == "attached";
        // CRITICAL: faulted.
        if v.robustness == "faulted" {
            faulted += 1;
            vf.push(add(Finding::new(
                Status::Critical,
                format!("{head}: faulted (no usable replica: the volume's data is unavailable)"),
            )
            .signal("longhorn_volume_faulted")
            .subject(v.subject(node))
            .detail(format!(
                "replicas: {}",
                if rs.is_empty() {
                    "none".to_string()
                } else {
                    rs.iter()
                        .map(|r| r.describe(engine))
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            ))
            .next(step(&[v.get_volume(), v.get_replicas(), v.events()]))));
        }
        // CRITICAL: attached with no healthy replica.
        if attached && healthy == 0 && v.robustness != "faulted" {
            vf.push(add(Finding::new(
                Status::Critical,
                format!("{head}: attached with no healthy replica"),
            )
            .signal("longhorn_no_healthy_replica")
            .subject(v.subject(node))
            .detail(format!(
                "replicas: {}",
                if rs.is_empty() {
                    "none found".to_string()
                } else {
                    rs.iter()
                        .map(|r| r.describe(engine))
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            ))
            .next(step(&[v.get_replicas(), v.get_engine(), v.events()]))));
        }
        // CRITICAL: the engine reports the filesystem read-only.
        if let Some((e, c)) = es.iter().find_map(|e| {
            e.conditions
                .iter()
                .find(|c| c.kind == "FilesystemReadOnly" && c.status == "True")
                .map(|c| (e, c))
        }) {
            read_only += 1;
            let en = if e.node.is_empty() { node } else { &e.node };
            let pods = v.running_pods();
            let mut cmds = vec![v.get_engine(), format!("kubectl cordon {}", q(en))];
            for p in &pods {
                if let Some((ns, pod)) = p.split_once('/') {
                    cmds.push(format!("kubectl -n {} delete pod {}", q(ns), q(pod)));
                }
            }
            let next = format!(
                "{}; once the pods run elsewhere: `kubectl uncordon {}`",
                step(&cmds),
                q(en)
            );
            vf.push(add(Finding::new(
                Status::Critical,
                format!(
                    "{head}: filesystem read-only (engine {} on {en}: {})",
                    e.name,
                    cond_text(c)
                ),
            )
            .signal("longhorn_filesystem_read_only")
            .subject(v.subject(en))
            .next(next)));
        }
        // CRITICAL: workloads running, the volume not attached, for longer than --stuck-after.
        let running = v.running_pods();
        if !running.is_empty() && matches!(v.state.as_str(), "detached" | "attaching" | "detaching")
        {
            let age = v.state_since.map(|t| (now - t).max(0));
            let over = age.is_none_or(|a| a >= stuck_after.as_secs() as i64);
            let how_long = match age {
                Some(a) => format!("unchanged {}", dur(a)),
                None => "for an unknown time".into(),
            };
            let text = format!(
                "{head}: {} while {} runs ({how_long}, --stuck-after {})",
                v.state,
                running.join(", "),
                fmt_duration(stuck_after)
            );
            let f =
                if over {
                    stuck += 1;
                    Finding::new(Status::Critical, text)
                        .signal("longhorn_volume_stuck")
                        .subject(v.subject(node))
                        .next(step(
                            &[
                                format!(
                                    "kubectl -n {} get volumeattachments.longhorn.io {} -o yaml",
                                    q(v.ns()),
                                    q(&v.name)
                                ),
                                v.events(),
                                "kubectl get volumeattachments.storage.k8s.io -o wide".to_string(),
                            ]
                            .into_iter()
                            .chain(running.iter().filter_map(|p| p.split_once('/')).map(
                                |(ns, p)| format!("kubectl -n {} describe pod {}", q(ns), q(p)),
                            ))
                            .collect::<Vec<_>>(),
                        ))
                } else {
                    Finding::new(Status::Ok, format!("{text}: within --stuck-after"))
                        .signal("longhorn_volume_ok")
                        .subject(v.subject(node))
                };
            vf.push(add(f));
        }
        // WARNING: degraded (Longhorn's word), or the healthy count outside -w/-c (CRITICAL for -c).
        let by_range = if !attached || healthy == 0 {
            Status::Ok
        } else if th
            .critical
            .as_ref()
            .is_some_and(|r| r.alerts(healthy as f64))
        {
            Status::Critical
        } else if th
            .warning
            .as_ref()
            .is_some_and(|r| r.alerts(healthy as f64))
        {
            Status::Warning
        } else {
            Status::Ok
        };
        if attached {
            min_healthy = Some(min_healthy.map_or(healthy, |m| m.min(healthy)));
        }
        if v.robustness == "degraded" || by_range != Status::Ok {
            degraded += 1;
            let since = v
                .last_degraded_at
                .map(|t| format!(" for {}", dur(now - t)))
                .unwrap_or_default();
            let bad: Vec<String> = rs
                .iter()
                .filter(|r| !r.healthy(engine))
                .map(|r| r.describe(engine))
                .collect();
            let rebuilding =
                engine.is_some_and(|e| e.rebuilding || e.modes.values().any(|m| m == "WO"));
            let outside = match by_range {
                Status::Critical => format!(
                    " (outside -c {})",
                    th.critical
                        .as_ref()
                        .map(|r| r.to_string())
                        .unwrap_or_default()
                ),
                Status::Warning => format!(
                    " (outside -w {})",
                    th.warning
                        .as_ref()
                        .map(|r| r.to_string())
                        .unwrap_or_default()
                ),
                _ => String::new(),
            };
            let mut f = Finding::new(
                by_range.worst(Status::Warning),
                format!(
                    "{head}: {}{since}, {} healthy{outside}{}",
                    if v.robustness == "degraded" {
                        "degraded"
                    } else {
                        "short of replicas"
                    },
                    plugin::count_of(healthy, wanted, "replica", "replicas"),
                    if rebuilding { ", rebuilding" } else { "" }
                ),
            )
            .signal("longhorn_volume_degraded")
            .subject(v.subject(node));
            if !bad.is_empty() {
                f = f.detail(format!("not healthy: {}", bad.join("; ")));
            }
            f = f.next(step(&[
                v.get_replicas(),
                v.events(),
                format!("kubectl -n {} get nodes.longhorn.io -o wide", q(v.ns())),
            ]));
            vf.push(add(f));
        }
        // WARNING: failed replicas with no rebuild under way.
        let rebuilding = engine
            .is_some_and(|e| e.rebuilding || e.modes.values().any(|m| m == "WO"))
            || rs
                .iter()
                .any(|r| r.failed_at.is_empty() && r.healthy_at.is_empty() && r.state == "running");
        if !rebuilding && v.robustness != "faulted" {
            for r in rs.iter().filter(|r| {
                !r.failed_at.is_empty()
                    || engine
                        .and_then(|e| e.modes.get(&r.name))
                        .is_some_and(|m| m == "ERR")
            }) {
                failed_replicas += 1;
                let rn = if r.node.is_empty() { node } else { &r.node };
                vf.push(add(Finding::new(
                    Status::Warning,
                    format!("{name}: {} failed and not rebuilding", r.describe(engine)),
                )
                .signal("longhorn_replica_failed")
                .subject(v.subject(rn))
                .next(step(&[
                    format!(
                        "kubectl -n {} get replicas.longhorn.io {} -o yaml",
                        q(v.ns()),
                        q(&r.name)
                    ),
                    format!(
                        "kubectl -n {} get nodes.longhorn.io {} -o yaml",
                        q(v.ns()),
                        q(rn)
                    ),
                    v.events(),
                ]))));
            }
        }
        // WARNING: robustness unknown while attached (detached volumes are `unknown` by design).
        if v.robustness == "unknown" && attached {
            vf.push(add(Finding::new(
                Status::Warning,
                format!(
                    "{head}: robustness unknown while attached (the engine's state is unknown{})",
                    engine
                        .map(|e| format!(": engine {} {}", e.name, e.state))
                        .unwrap_or_default()
                ),
            )
            .signal("longhorn_robustness_unknown")
            .subject(v.subject(node))
            .next(step(&[
                v.get_engine(),
                format!(
                    "kubectl -n {} get instancemanagers.longhorn.io -o wide",
                    q(v.ns())
                ),
                v.events(),
            ]))));
        }
        if vf.iter().all(|f| f.status == Status::Ok) {
            if vf.is_empty() {
                vf.push(
                    Finding::new(Status::Ok, head)
                        .signal("longhorn_volume_ok")
                        .subject(v.subject(node)),
                );
            }
        } else {
            let worst = vf.iter().map(|f| f.status).fold(Status::Ok, Status::worst);
            status = status.worst(worst);
            let reasons: Vec<&str> = vf
                .iter()
                .filter(|f| f.status != Status::Ok)
                .map(|f| f.signal)
                .map(|s| s.trim_start_matches("longhorn_"))
                .collect();
            summary.push(format!("{name}: {}", reasons.join(", ")));
        }
        findings.extend(vf);
    }
    let summary = if summary.is_empty() {
        format!(
            "{} healthy {} ({}, {})",
            plugin::count(d.volumes.len(), "Longhorn volume", "Longhorn volumes"),
            d.scope,
            plugin::count(d.replicas.len(), "replica", "replicas"),
            plugin::count(d.engines.len(), "engine", "engines")
        )
    } else {
        summary.join("; ")
    };
    let zero = Range::above(0.0);
    let mut r = Report::new(status, summary)
        .unit("volume", "volumes")
        .perf(Perfdata::new("volumes", d.volumes.len() as f64).min(0.0))
        .perf(
            Perfdata::new("faulted", faulted as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("stuck", stuck as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("read_only", read_only as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("degraded", degraded as f64)
                .warn(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("failed_replicas", failed_replicas as f64)
                .warn(Some(&zero))
                .min(0.0),
        );
    if let Some(m) = min_healthy {
        r = r.perf(
            Perfdata::new("min_healthy_replicas", m as f64)
                .thresholds(th)
                .min(0.0),
        );
    }
    for f in findings {
        r = r.finding(f);
    }
    r.sort_findings();
    r
}
