//! Every decision, on plain data: the drivers to judge (CSINode ∪ the volumes' drivers ∪ the
//! registrations'), each driver's findings, the report.

use node::csi::proto::{GetPluginInfo, PluginInfo, Probe};
use node::csi::{Failure, MountUse};
use plugin::shell_quote as q;
use plugin::{Finding, Perfdata, Report, Status, Subject};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One socket of `plugins_registry/` and what its `GetInfo` answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    pub root: String,
    pub socket: String,
    pub result: Result<PluginInfo, Failure>,
}

/// A driver's endpoint and what `Probe` and `GetPluginInfo` answered.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverCalls {
    pub driver: String,
    pub endpoint: String,
    pub result: Result<(Probe, GetPluginInfo), Failure>,
}

/// A pod on the node, as much as tells whether it is a driver's node plugin and its health.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodView {
    /// `namespace/name`.
    pub pod: String,
    pub phase: String,
    /// Condition Ready is True.
    pub ready: bool,
    pub deleting: bool,
    /// A container waiting in CrashLoopBackOff, in words.
    pub crashloop: Option<String>,
    pub restarts: i64,
    pub host_paths: Vec<String>,
    /// `--kubelet-registration-path` values of its containers.
    pub registration_paths: Vec<String>,
}

/// What the API said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Api {
    /// The CSINode's drivers; `None`: the node has no CSINode.
    pub csinode: Option<Vec<String>>,
    pub pods: Vec<PodView>,
}

/// Everything gathered.
#[derive(Debug, Clone, PartialEq)]
pub struct Data {
    pub node: String,
    pub roots: Vec<String>,
    pub registrations: Vec<Registration>,
    pub calls: Vec<DriverCalls>,
    pub mounts: Vec<MountUse>,
    pub mount_errors: Vec<String>,
    /// The API's view, or why there is none.
    pub api: Result<Api, String>,
    pub host_root: Option<PathBuf>,
}

/// What decides, from the options.
#[derive(Debug, Clone)]
pub struct Policy {
    pub probe_timeout: Duration,
    /// `-w/-c` on the number of unhealthy drivers (none set: each finding's own state).
    pub thresholds: plugin::Thresholds,
}

/// `<driver>-reg.sock`, node-driver-registrar's name for its socket (`buildSocketPath`): the
/// driver a socket that did not answer is most likely for.
fn guessed_driver(socket: &str) -> Option<String> {
    let name = Path::new(socket).file_name()?.to_str()?;
    name.strip_suffix("-reg.sock")
        .filter(|d| !d.is_empty())
        .map(str::to_string)
}

fn step(cmds: &[String]) -> String {
    cmds.iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn split_pod(pod: &str) -> (&str, &str) {
    pod.split_once('/').unwrap_or(("default", pod))
}

fn describe_pod(pod: &str) -> String {
    let (ns, p) = split_pod(pod);
    format!("kubectl -n {} describe pod {}", q(ns), q(p))
}

fn delete_pod(pod: &str) -> String {
    let (ns, p) = split_pod(pod);
    format!("kubectl -n {} delete pod {}", q(ns), q(p))
}

fn logs_pod(pod: &str) -> String {
    let (ns, p) = split_pod(pod);
    format!(
        "kubectl -n {} logs {} --all-containers --tail=50",
        q(ns),
        q(p)
    )
}

fn get_csinode(node: &str) -> String {
    format!("kubectl get csinode {} -o yaml", q(node))
}

fn pods_on(node: &str) -> String {
    format!(
        "kubectl get pods -A -o wide --field-selector {}",
        q(&format!("spec.nodeName={node}"))
    )
}

/// Normalise a path's text for comparison (no trailing slash, no `//`, no `.`).
fn norm(p: &str) -> PathBuf {
    Path::new(p).components().collect()
}

/// The pods that are this endpoint's node plugin: they mount the endpoint's directory as a
/// hostPath, or register that endpoint (`--kubelet-registration-path`).
fn plugin_pods<'a>(pods: &'a [PodView], endpoint: &str) -> Vec<&'a PodView> {
    let ep = norm(endpoint);
    let dir = ep.parent().map(Path::to_path_buf);
    pods.iter()
        .filter(|p| {
            p.registration_paths.iter().any(|r| norm(r) == ep)
                || dir
                    .as_ref()
                    .is_some_and(|d| p.host_paths.iter().any(|h| &norm(h) == d))
        })
        .collect()
}

/// One driver's story, as evaluate builds it.
struct Judged {
    findings: Vec<Finding>,
}

pub fn evaluate(d: &Data, policy: &Policy) -> Report {
    let node = d.node.as_str();
    let subject = |driver: &str| Subject::new().node(node).driver(driver);
    let api = d.api.as_ref().ok();

    // Registrations by the driver they name (or are guessed to be for).
    let mut by_driver: BTreeMap<String, Vec<&Registration>> = BTreeMap::new();
    let mut other_types = Vec::new();
    let mut unnamed = Vec::new();
    for r in &d.registrations {
        match &r.result {
            Ok(i) if i.type_ != "CSIPlugin" => {
                other_types.push(format!("{} ({}, {})", r.socket, i.type_, i.name))
            }
            Ok(i) if i.name.is_empty() => unnamed.push(r),
            Ok(i) => by_driver.entry(i.name.clone()).or_default().push(r),
            Err(_) => match guessed_driver(&r.socket) {
                Some(g) => by_driver.entry(g).or_default().push(r),
                None => unnamed.push(r),
            },
        }
    }
    let mut used: BTreeMap<&str, Vec<&MountUse>> = BTreeMap::new();
    for m in &d.mounts {
        used.entry(m.driver.as_str()).or_default().push(m);
    }
    let in_csinode: Option<BTreeSet<&str>> = api
        .and_then(|a| a.csinode.as_ref())
        .map(|v| v.iter().map(String::as_str).collect());
    let calls: BTreeMap<&str, &DriverCalls> =
        d.calls.iter().map(|c| (c.driver.as_str(), c)).collect();

    let mut drivers: BTreeSet<String> = by_driver.keys().cloned().collect();
    drivers.extend(used.keys().map(|s| s.to_string()));
    if let Some(c) = &in_csinode {
        drivers.extend(c.iter().map(|s| s.to_string()));
    }

    let mut report = Report::new(Status::Ok, String::new()).unit("driver", "drivers");
    let mut bad = 0usize;
    // Drivers with a WARNING or CRITICAL finding: what -w/-c count.
    let mut unhealthy = 0usize;
    let sick = |s: Status| matches!(s, Status::Warning | Status::Critical);
    for drv in &drivers {
        let j = judge(
            d,
            policy,
            drv,
            &by_driver,
            &used,
            in_csinode.as_ref(),
            &calls,
            &subject,
        );
        if j.findings.iter().any(|f| f.status != Status::Ok) {
            bad += 1;
        }
        if j.findings.iter().any(|f| sick(f.status)) {
            unhealthy += 1;
        }
        for f in j.findings {
            report = report.finding(f);
        }
    }
    for r in unnamed {
        let text = match &r.result {
            Ok(_) => format!(
                "registration socket {} answered GetInfo with no driver name",
                r.socket
            ),
            Err(e) => format!(
                "registration socket {} (driver unknown): {}",
                r.socket,
                e.text()
            ),
        };
        let st = match &r.result {
            Err(Failure::Refused(_)) => Status::Unknown,
            _ => Status::Critical,
        };
        bad += 1;
        if sick(st) {
            unhealthy += 1;
        }
        report = report.finding(
            Finding::new(st, text)
                .signal(if st == Status::Unknown {
                    "csi_socket_refused"
                } else {
                    "csi_driver_unregistered"
                })
                .subject(Subject::new().node(node).mount(r.socket.clone()))
                .next(step(&[
                    format!("ls -l {}", q(&format!("{}/plugins_registry", r.root))),
                    pods_on(node),
                ])),
        );
    }

    // The API's own state.
    if let Err(e) = &d.api {
        report = report.finding(
            Finding::new(
                Status::Unknown,
                format!("API not read (CSINode and plugin pods not checked): {e}"),
            )
            .signal("csi_api_unreadable")
            .subject(Subject::new().node(node))
            .next(step(&[
                format!("kubectl auth can-i get csinodes/{}", q(node)),
                "kubectl apply -f deploy/rbac.yaml".into(),
            ])),
        );
    } else if in_csinode.is_none() {
        report = report.note(format!(
            "node {node} has no CSINode object (the kubelet creates it when it starts; a wrong --node?)"
        ));
    }
    for t in &other_types {
        report = report.note(format!("not a CSI plugin, not judged: {t}"));
    }
    for e in d.mount_errors.iter().take(5) {
        report = report.note(format!("a CSI volume's vol_data.json not read: {e}"));
    }

    let worst = report.worst_finding();
    let thresholds = &policy.thresholds;
    let use_thresholds = thresholds.warning.is_some() || thresholds.critical.is_some();
    let status = if use_thresholds {
        let s = thresholds.evaluate(unhealthy as f64);
        if report.findings.iter().any(|f| f.status == Status::Unknown) {
            s.worst(Status::Unknown)
        } else {
            s
        }
    } else {
        worst
    };
    report.status = status;
    if use_thresholds {
        report = report.note("state from -w/-c on the number of unhealthy drivers");
    }
    let n = drivers.len();
    report.summary = if n == 0 && bad == 0 {
        format!(
            "no CSI drivers registered and no CSI volumes on node {node}{}",
            if d.api.is_ok() {
                " (CSINode lists none)"
            } else {
                ""
            }
        )
    } else if bad == 0 {
        format!(
            "{} on node {node} registered and answering: {}",
            plugin::count(n, "CSI driver", "CSI drivers"),
            drivers.iter().cloned().collect::<Vec<_>>().join(", ")
        )
    } else {
        let worst: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.status == worst && f.status != Status::Ok)
            .map(|f| {
                f.subject
                    .driver
                    .clone()
                    .unwrap_or_else(|| f.subject.mount.clone().unwrap_or_default())
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        format!(
            "{} of {} on node {node} with problems: {}",
            bad,
            plugin::count(n.max(bad), "CSI driver", "CSI drivers"),
            worst.join(", ")
        )
    };
    if let Err(e) = &d.api {
        if status == Status::Unknown {
            report.summary = format!("{}; API not read: {e}", report.summary);
        }
    }
    report.sort_findings();
    report
        .perf(Perfdata::new("drivers", n as f64).min(0.0))
        .perf(
            Perfdata::new("unhealthy_drivers", unhealthy as f64)
                .thresholds(thresholds)
                .min(0.0),
        )
        .perf(Perfdata::new("csi_volumes", d.mounts.len() as f64).min(0.0))
}

#[allow(clippy::too_many_arguments)]
fn judge(
    d: &Data,
    policy: &Policy,
    drv: &str,
    by_driver: &BTreeMap<String, Vec<&Registration>>,
    used: &BTreeMap<&str, Vec<&MountUse>>,
    in_csinode: Option<&BTreeSet<&str>>,
    calls: &BTreeMap<&str, &DriverCalls>,
    subject: &dyn Fn(&str) -> Subject,
) -> Judged {
    let node = d.node.as_str();
    let mut findings = Vec::new();
    let uses = used.get(drv).map(Vec::as_slice).unwrap_or(&[]);
    let use_text = if uses.is_empty() {
        String::new()
    } else {
        let vols: BTreeSet<&str> = uses.iter().map(|m| m.volume.as_str()).collect();
        let shown: Vec<&str> = vols.iter().take(3).copied().collect();
        format!(
            "; used by {} on this node ({}{})",
            plugin::count(vols.len(), "volume", "volumes"),
            shown.join(", "),
            if vols.len() > 3 { ", …" } else { "" }
        )
    };
    let call = calls.get(drv).copied();
    let endpoint = call.map(|c| c.endpoint.clone());
    let pods: Vec<&PodView> = match (&d.api, &endpoint) {
        (Ok(a), Some(e)) => plugin_pods(&a.pods, e),
        _ => Vec::new(),
    };
    let pod_step = |extra: Vec<String>| -> String {
        let mut cmds = Vec::new();
        for p in &pods {
            cmds.push(logs_pod(&p.pod));
            cmds.push(delete_pod(&p.pod));
        }
        if pods.is_empty() {
            cmds.push(pods_on(node));
        }
        cmds.extend(extra);
        step(&cmds)
    };

    // 1. Registration.
    let regs = by_driver.get(drv).map(Vec::as_slice).unwrap_or(&[]);
    let answered = regs.iter().find(|r| r.result.is_ok());
    match answered {
        Some(_) => {}
        None => {
            let (st, sig, text) = match regs.first() {
                None => (
                    Status::Critical,
                    "csi_driver_unregistered",
                    format!(
                        "{drv}: not registered with the kubelet (no registration socket in {}){use_text}",
                        d.roots.iter().map(|r| format!("{r}/plugins_registry")).collect::<Vec<_>>().join(", ")
                    ),
                ),
                Some(r) => {
                    let e = match &r.result {
                        Err(e) => e.clone(),
                        // None answered: every registration of this driver failed.
                        Ok(_) => Failure::Error("no answer".into()),
                    };
                    let e = &e;
                    let st = if matches!(e, Failure::Refused(_)) { Status::Unknown } else { Status::Critical };
                    (
                        st,
                        if st == Status::Unknown { "csi_socket_refused" } else { "csi_driver_unregistered" },
                        format!("{drv}: registration socket {}: {}{use_text}", r.socket, fail_text(e, policy)),
                    )
                }
            };
            findings.push(
                Finding::new(st, text)
                    .signal(sig)
                    .subject(subject(drv))
                    .next(pod_step(vec![get_csinode(node)])),
            );
        }
    }

    // 2. The driver's own socket.
    if let Some(c) = call {
        match &c.result {
            Ok((probe, info)) => {
                if info.name != drv {
                    findings.push(
                        Finding::new(
                            Status::Critical,
                            format!(
                                "{drv}: its endpoint {} is another driver's: GetPluginInfo names {:?}",
                                c.endpoint, info.name
                            ),
                        )
                        .signal("csi_socket_unresponsive")
                        .subject(subject(drv).mount(c.endpoint.clone()))
                        .next(pod_step(vec![get_csinode(node)])),
                    );
                }
                if !probe.is_ready() {
                    findings.push(
                        Finding::new(
                            Status::Warning,
                            format!("{drv}: Probe on {} says not ready", c.endpoint),
                        )
                        .signal("csi_socket_unresponsive")
                        .subject(subject(drv).mount(c.endpoint.clone()))
                        .next(pod_step(vec![])),
                    );
                }
            }
            Err(e) => {
                let st = if matches!(e, Failure::Refused(_)) {
                    Status::Unknown
                } else {
                    Status::Critical
                };
                findings.push(
                    Finding::new(
                        st,
                        format!("{drv}: driver socket {}{use_text}", fail_text(e, policy)),
                    )
                    .signal(if st == Status::Unknown {
                        "csi_socket_refused"
                    } else {
                        "csi_socket_unresponsive"
                    })
                    .subject(subject(drv).mount(c.endpoint.clone()))
                    .next(pod_step(vec![])),
                );
            }
        }
    }

    // 3. CSINode: for a driver that registered (GetInfo named it) or that a volume uses. A
    // registration socket that failed is its own finding above; a CSINode without the driver
    // it may be for says nothing more.
    let known = answered.is_some() || !uses.is_empty();
    if let (true, Some(set)) = (known, in_csinode) {
        if !set.contains(drv) {
            findings.push(
                Finding::new(
                    Status::Critical,
                    format!("{drv}: not in CSINode {node}{use_text}"),
                )
                .signal("csi_driver_unregistered")
                .subject(subject(drv))
                .next(pod_step(vec![get_csinode(node)])),
            );
        }
    } else if known && in_csinode.is_none() && d.api.is_ok() {
        findings.push(
            Finding::new(
                Status::Critical,
                format!(
                    "{drv}: node {node} has no CSINode, so no driver is registered there{use_text}"
                ),
            )
            .signal("csi_driver_unregistered")
            .subject(subject(drv))
            .next(step(&[
                get_csinode(node),
                format!("kubectl get node {}", q(node)),
            ])),
        );
    }

    // 4. Its pod.
    for p in &pods {
        if p.deleting {
            continue;
        }
        let why = match (&p.crashloop, p.ready) {
            (Some(c), _) => Some(c.clone()),
            (None, false) => Some(format!(
                "not Ready (phase {})",
                if p.phase.is_empty() {
                    "unknown"
                } else {
                    &p.phase
                }
            )),
            _ => None,
        };
        if let Some(why) = why {
            findings.push(
                Finding::new(
                    Status::Critical,
                    format!("{drv}: node-plugin pod {} {why}", p.pod),
                )
                .signal("csi_plugin_pod_unhealthy")
                .subject(
                    subject(drv)
                        .namespace(split_pod(&p.pod).0)
                        .pod(split_pod(&p.pod).1),
                )
                .next(step(&[
                    describe_pod(&p.pod),
                    logs_pod(&p.pod),
                    delete_pod(&p.pod),
                ])),
            );
        }
    }

    if findings.is_empty() {
        let mut parts = vec!["registered".to_string()];
        if let Some(c) = call {
            parts.push(format!("{} answers Probe and GetPluginInfo", c.endpoint));
        }
        if in_csinode.is_some() {
            parts.push(format!("in CSINode {node}"));
        }
        match (&d.api, pods.first()) {
            (Ok(_), Some(p)) => parts.push(format!("node-plugin pod {} Ready", p.pod)),
            (Ok(_), None) => parts.push(
                "no node-plugin pod found on this node (mounting the socket's directory)".into(),
            ),
            _ => {}
        }
        findings.push(
            Finding::new(Status::Ok, format!("{drv}: {}{use_text}", parts.join(", ")))
                .signal("csi_driver_ok")
                .subject(subject(drv)),
        );
    }
    Judged { findings }
}

fn fail_text(e: &Failure, policy: &Policy) -> String {
    match e {
        Failure::Missing(s) => format!("gone ({s})"),
        Failure::Timeout(s) => format!(
            "does not answer within --probe-timeout {} ({s})",
            plugin::fmt_duration(policy.probe_timeout)
        ),
        Failure::Unreachable(s) => format!("does not accept connections ({s})"),
        Failure::Refused(s) => format!("not probed: {s}"),
        Failure::Error(s) => format!("answers with an error ({s})"),
    }
}
