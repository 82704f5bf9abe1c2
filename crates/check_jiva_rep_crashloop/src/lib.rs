//! check_jiva_rep_crashloop — crash-looping OpenEBS Jiva replicas and volumes running on fewer
//! replicas than they should.
//!
//! The incident (pvek8s storage cascade, Chain 4): a Jiva replica crash-looped 92 times over 14
//! days with no escalation; the volume kept serving from 2/3 replicas, and the existing health
//! check did not match the replica's name (`<pv>-jiva-rep-N` StatefulSet pods, not the legacy
//! `<pv>-rep-…` Deployment pods). This check finds replicas by label *and* by either naming
//! scheme, and judges every volume by how many of its replicas are healthy.

use clap::Parser;
use kube::{ApiArgs, Pod, PodFilter, PodsJsonArg, Selector, Time};
use plugin::{
    fmt_duration, Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds,
    Unknown,
};
use regex::Regex;
use std::collections::BTreeMap;
use std::time::Duration;

/// Labels that mark a Jiva replica: jiva-operator (CSI) and legacy maya.
pub const REPLICA_LABELS: &[(&str, &str)] = &[
    ("openebs.io/component", "jiva-replica"),
    ("openebs.io/replica", "jiva-replica"),
];
/// Labels that mark a Jiva controller (the iSCSI target of the volume): jiva-operator and legacy.
pub const CONTROLLER_LABELS: &[(&str, &str)] = &[
    ("openebs.io/component", "jiva-controller"),
    ("openebs.io/controller", "jiva-controller"),
];
/// The label naming a replica's PV.
pub const PV_LABEL: &str = "openebs.io/persistent-volume";
/// The claim's name (without its namespace) on legacy (maya) pods.
pub const PVC_LABEL: &str = "openebs.io/persistent-volume-claim";
/// `<pv>-jiva-ctrl-<hash>-<id>`: jiva-operator's controller Deployment pods.
pub const CSI_CTRL_NAME: &str = r"^(?P<pv>.+)-jiva-ctrl-[a-z0-9]{5,10}-[a-z0-9]{5}$";
/// `<pv>-ctrl-<hash>-<id>`: legacy controller Deployment pods.
pub const LEGACY_CTRL_NAME: &str = r"^(?P<pv>.+)-ctrl-[a-z0-9]{5,10}-[a-z0-9]{5}$";
/// `<pv>-jiva-rep-<N>`: jiva-operator StatefulSet pods.
pub const CSI_NAME: &str = r"^(?P<pv>.+)-jiva-rep-(?P<n>\d+)$";
/// `<pv>-rep-<N>-<hash>[-<id>]` (one Deployment per replica, maya ≥ 1.10) and
/// `<pv>-rep-<hash>-<id>` (one Deployment for all replicas): legacy pods.
pub const LEGACY_NAME: &str = r"^(?P<pv>.+)-rep-(?:(?P<n>\d+)-)?[a-z0-9]{5,10}(?:-[a-z0-9]{5})?$";

#[derive(Debug, Parser)]
#[command(
    name = "check_jiva_rep_crashloop",
    version,
    about = "Alert on crash-looping OpenEBS Jiva replicas and volumes with degraded redundancy",
    mut_arg("host_root", |a| a.help_heading("Kubernetes API").help("Accepted in container mode like every check's (this cluster-wide check reads nothing of the host, so it changes nothing)")),
    long_about = "Alert on crash-looping OpenEBS Jiva replicas and volumes with degraded redundancy.\n\n\
Replicas are the pods in --namespace labelled openebs.io/component=jiva-replica (jiva-operator) or \
openebs.io/replica=jiva-replica (legacy), or named <pv>-jiva-rep-<N> (StatefulSet) or \
<pv>-rep-[<N>-]<hash>[-<id>] (legacy Deployments). --selector and --name-regex add other workloads. \
Controllers (the volume's iSCSI target: openebs.io/component=jiva-controller, \
openebs.io/controller=jiva-controller, <pv>-jiva-ctrl-… or <pv>-ctrl-…) are judged like replicas: \
a crash-looping target is as bad as a crash-looping replica. Findings name the claim \
(namespace/pvc, from the PersistentVolumes' claimRef: API or --pvs-json).\n\n\
A replica is crash-looping when a container waits in CrashLoopBackOff, or restarted more than -w \
times with the last restart within --restart-window. That is WARNING, and CRITICAL once unhealthy \
longer than --critical-after or restarted more than -c times. Replicas are grouped by PV (label \
openebs.io/persistent-volume or the name): fewer healthy replicas than pods is WARNING, no healthy \
majority is CRITICAL."
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Restart-count range: a replica whose count is outside it (default: above 3) and whose
    /// last restart was within --restart-window counts as crash-looping (full range grammar: `3:`,
    /// `@0:2`, `-w -10:-2`)
    #[arg(
        short = 'w',
        long = "warning",
        value_name = "RANGE",
        default_value = "3",
        allow_hyphen_values = true,
        value_parser = plugin::args::range
    )]
    pub warning: Range,

    /// Restart-count range: CRITICAL when a crash-looping replica's count is outside it (default:
    /// above 10)
    #[arg(
        short = 'c',
        long = "critical",
        value_name = "RANGE",
        default_value = "10",
        allow_hyphen_values = true,
        value_parser = plugin::args::range
    )]
    pub critical: Range,

    /// Critical when a replica has been unhealthy (not Ready) longer than this
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = plugin::args::duration)]
    pub critical_after: Duration,

    /// How recent the last restart must be for -w to count it
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = plugin::args::duration)]
    pub restart_window: Duration,

    /// Namespace of the replicas (repeatable)
    #[arg(long, value_name = "NS", default_value = "openebs")]
    pub namespace: Vec<String>,

    /// Also watch pods matching this label selector (e.g. app=longhorn-replica)
    #[arg(long, value_name = "SELECTOR", value_parser = parse_selector)]
    pub selector: Option<Selector>,

    /// Also watch pods whose name matches this regex; a (?P<pv>…) group names the volume
    #[arg(long, value_name = "REGEX", value_parser = plugin::args::regex)]
    pub name_regex: Option<Regex>,

    #[command(flatten)]
    pub api: ApiArgs,

    /// `--host-root`: accepted in container mode like every check's (this cluster-wide check
    /// reads nothing of the host, so it changes nothing).
    #[command(flatten)]
    pub host: node::HostRootArg,

    #[command(flatten)]
    pub pods: PodsJsonArg,

    #[command(flatten)]
    pub pvs: kube::PvsJsonArg,
}

fn parse_selector(s: &str) -> Result<Selector, String> {
    Selector::parse(s)
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
}

/// A controller: (pv from its label or name).
fn match_controller(p: &Pod) -> Option<Option<String>> {
    let labels = &p.metadata.labels;
    let by_label = CONTROLLER_LABELS
        .iter()
        .any(|(k, v)| labels.get(*k).map(|s| s.as_str()) == Some(*v));
    let by_name = [&*CSI_CTRL_RE, &*LEGACY_CTRL_RE]
        .into_iter()
        .find_map(|re| re.captures(&p.metadata.name))
        .and_then(|c| c.name("pv").map(|m| m.as_str().to_string()));
    // By name only with Jiva's labels (`<x>-ctrl-<hash>-<id>` is a common Deployment pod name).
    let jiva = labels.get("openebs.io/cas-type").map(|s| s.as_str()) == Some("jiva")
        || labels.contains_key(PV_LABEL);
    (by_label || (by_name.is_some() && jiva)).then(|| {
        labels
            .get(PV_LABEL)
            .filter(|v| !v.is_empty())
            .cloned()
            .or(by_name)
    })
}

/// How a replica was recognised.
fn match_replica(p: &Pod, o: &Opts) -> Option<Option<String>> {
    let labels = &p.metadata.labels;
    let name = &p.metadata.name;
    let mut pv_from_name = None;
    let mut hit = REPLICA_LABELS
        .iter()
        .any(|(k, v)| labels.get(*k).map(|s| s.as_str()) == Some(*v));
    for re in [&*CSI_RE, &*LEGACY_RE]
        .into_iter()
        .chain(o.name_regex.as_ref())
    {
        if let Some(c) = re.captures(name) {
            hit = true;
            if pv_from_name.is_none() {
                pv_from_name = c.name("pv").map(|m| m.as_str().to_string());
            }
        }
    }
    if o.selector.as_ref().is_some_and(|s| s.matches(labels)) {
        hit = true;
    }
    hit.then(|| {
        labels
            .get(PV_LABEL)
            .filter(|v| !v.is_empty())
            .cloned()
            .or(pv_from_name)
    })
}

static CSI_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(CSI_NAME).unwrap());
static LEGACY_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(LEGACY_NAME).unwrap());
static CSI_CTRL_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(CSI_CTRL_NAME).unwrap());
static LEGACY_CTRL_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(LEGACY_CTRL_NAME).unwrap());

/// Reduce a pod to a [`Replica`] if it is one.
pub fn replica_of(p: &Pod, o: &Opts) -> Option<Replica> {
    let (pv, controller) = match match_controller(p) {
        Some(pv) => (pv, true),
        None => (match_replica(p, o)?, false),
    };
    let statuses: Vec<_> = p.all_container_statuses().collect();
    let worst = statuses.iter().max_by_key(|c| c.restart_count);
    let backoff = statuses.iter().any(|c| {
        c.state
            .waiting
            .as_ref()
            .is_some_and(|w| w.reason == "CrashLoopBackOff")
    });
    let regular_ready = !p.status.container_statuses.is_empty()
        && p.status.container_statuses.iter().all(|c| c.ready);
    let ready_cond = p.condition("Ready");
    Some(Replica {
        namespace: p.metadata.namespace.clone(),
        name: p.metadata.name.clone(),
        node: p.spec.node_name.clone().unwrap_or_default(),
        pv,
        controller,
        claim: p
            .metadata
            .labels
            .get(PVC_LABEL)
            .filter(|c| !c.is_empty())
            .cloned(),
        ready: p.status.phase == "Running"
            && p.metadata.deletion_timestamp.is_none()
            && regular_ready
            && ready_cond.is_none_or(|c| c.status == "True"),
        phase: p.status.phase.clone(),
        restarts: worst.map(|c| c.restart_count).unwrap_or(0),
        backoff,
        waiting: worst
            .and_then(|c| c.state.waiting.as_ref())
            .map(|w| w.reason.clone())
            .unwrap_or_default(),
        last_exit: worst
            .and_then(|c| c.last_state.terminated.as_ref())
            .map(|t| (t.exit_code, t.reason.clone(), t.finished_at)),
        not_ready_since: ready_cond
            .filter(|c| c.status != "True")
            .and_then(|c| c.last_transition_time),
    })
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
}

impl Data {
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
pub fn judge(r: &Replica, o: &Opts, now: Time) -> (Status, Option<i64>) {
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
pub fn evaluate(d: &Data, o: &Opts, now: Time) -> Report {
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
        text.push_str(&format!("{state}, {} restarts", r.restarts));
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
                "{}{} crash-looping ({} restarts{})",
                if r.controller { "controller " } else { "" },
                r.name,
                r.restarts,
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
                .detail(format!("unhealthy: {}", bad.join(", "))),
        );
    }
    if d.replicas.is_empty() {
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
                "{} replicas of {} volumes healthy {}",
                d.replicas.len(),
                volumes.len(),
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

impl Opts {
    /// All I/O: the pods of the namespaces, from the API or a file.
    pub fn gather(&self, ctx: &Ctx) -> Result<Data, Unknown> {
        let filter = PodFilter {
            namespaces: self.namespace.clone(),
            node: None,
            labels: None,
        };
        let mut d = Data {
            scope: filter.describe().replace("on all nodes ", ""),
            ..Default::default()
        };
        let mut take = |p: Pod| {
            if let Some(r) = replica_of(&p, self) {
                d.replicas.push(r)
            }
        };
        match &self.pods.pods_json {
            Some(path) => {
                ctx.stage(format!("reading {}", path.display()));
                let n = kube::load_pods_json(path, &filter, &mut take)?;
                ctx.debug(format!("{n} pods from {}", path.display()));
            }
            None => {
                let client = kube::connect(&self.api, ctx)?;
                ctx.stage(format!(
                    "listing pods {} from {}",
                    filter.describe(),
                    client.server()
                ));
                client.list_pods(&filter, &mut take)?;
                // The claims of the volumes it will alert on: one paged list of PVs, only when
                // something is unhealthy (a healthy cluster costs no extra request). A failure
                // (RBAC without `list persistentvolumes`) leaves the PV names, with a note.
                let now = kube::time::now();
                if d.replicas
                    .iter()
                    .any(|r| r.pv.is_some() && (!r.ready || judge(r, self, now).0 != Status::Ok))
                {
                    ctx.stage(format!(
                        "listing PersistentVolumes from {}",
                        client.server()
                    ));
                    let mut claims = BTreeMap::new();
                    match client.list_pvs(|pv| add_claim(&mut claims, &pv)) {
                        Ok(_) => d.claims = claims,
                        Err(e) => d.notes.push(format!("PVC names not resolved: {}", e.0)),
                    }
                }
                for line in client.requests() {
                    ctx.debug(line);
                }
            }
        }
        if let Some(path) = &self.pvs.pvs_json {
            ctx.stage(format!("reading {}", path.display()));
            let mut claims = BTreeMap::new();
            kube::load_pvs_json(path, |pv| add_claim(&mut claims, &pv))?;
            d.claims = claims;
        }
        Ok(d)
    }
}

fn add_claim(claims: &mut BTreeMap<String, String>, pv: &kube::PersistentVolume) {
    if let Some(c) = pv.spec.claim_ref.as_ref().filter(|c| !c.name.is_empty()) {
        claims.insert(
            pv.metadata.name.clone(),
            format!("{}/{}", c.namespace, c.name),
        );
    }
}

impl Check for Opts {
    const NAME: &'static str = "JIVA_REP_CRASHLOOP";
    const BINARY: &'static str = "check_jiva_rep_crashloop";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin() || self.pvs.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let d = self.gather(ctx)?;
        Ok(evaluate(&d, self, kube::time::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::time::{format_rfc3339, parse_rfc3339};

    const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";

    fn now() -> Time {
        parse_rfc3339("2026-07-25T20:30:00Z").unwrap()
    }

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["check_jiva_rep_crashloop"];
        v.extend_from_slice(args);
        Opts::try_parse_from(v).unwrap()
    }

    fn ago(secs: i64) -> String {
        format_rfc3339(now() - secs)
    }

    /// A replica pod: healthy, or crash-looping with `restarts`, not ready for `unready` seconds.
    fn pod(name: &str, labels: &str, crash: Option<(i64, i64)>) -> Pod {
        let (phase, cs, ready) = match crash {
            None => (
                "Running",
                format!(
                    r#"{{"name":"jiva-replica","ready":true,"restartCount":0,"state":{{"running":{{"startedAt":"{}"}}}}}}"#,
                    ago(86400 * 20)
                ),
                format!(
                    r#"{{"type":"Ready","status":"True","lastTransitionTime":"{}"}}"#,
                    ago(86400 * 20)
                ),
            ),
            Some((restarts, unready)) => (
                "Running",
                format!(
                    r#"{{"name":"jiva-replica","ready":false,"restartCount":{restarts},"state":{{"waiting":{{"reason":"CrashLoopBackOff","message":"back-off 5m0s restarting failed container"}}}},
                    "lastState":{{"terminated":{{"exitCode":1,"reason":"Error","finishedAt":"{}"}}}}}}"#,
                    ago(120)
                ),
                format!(
                    r#"{{"type":"Ready","status":"False","reason":"ContainersNotReady","lastTransitionTime":"{}"}}"#,
                    ago(unready)
                ),
            ),
        };
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"openebs","labels":{{{labels}}}}},"spec":{{"nodeName":"k8s03"}},
            "status":{{"phase":"{phase}","conditions":[{ready}],"containerStatuses":[{cs}]}}}}"#
        ))
        .unwrap()
    }

    fn csi_labels() -> String {
        format!(
            r#""openebs.io/component":"jiva-replica","openebs.io/persistent-volume":"{PV}","openebs.io/cas-type":"jiva""#
        )
    }

    fn data(pods: &[Pod], o: &Opts) -> Data {
        Data {
            replicas: pods.iter().filter_map(|p| replica_of(p, o)).collect(),
            scope: "in namespace openebs".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_incident_replica_pages() {
        let o = opts(&[]);
        let pods = [
            pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
            pod(
                &format!("{PV}-jiva-rep-1"),
                &csi_labels(),
                Some((92, 14 * 86400)),
            ),
            pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
        ];
        let r = evaluate(&data(&pods, &o), &o, now());
        assert_eq!(r.status, Status::Critical);
        assert_eq!(r.summary, format!("{PV}-jiva-rep-1 crash-looping (92 restarts, unhealthy 14d); {PV}: 2/3 replicas healthy"));
        let perf: Vec<_> = r.perfdata.iter().map(|p| p.render()).collect();
        assert_eq!(
            perf,
            [
                "replicas=3;;;0",
                "crashlooping=1;0;;0",
                "max_restarts=92;3;10;0",
                "degraded_volumes=1;0;;0"
            ]
        );
        assert!(r.findings[0].text.contains(&format!("openebs/{PV}-jiva-rep-1 on k8s03: CrashLoopBackOff, 92 restarts, unhealthy 14d, last exit 1 (Error) 2m ago")), "{:?}", r.findings);
        let vol = r.findings.iter().find(|f| f.text.starts_with(PV)).unwrap();
        assert_eq!(vol.status, Status::Warning, "2/3 is degraded, not lost");
    }

    /// A crash-looping controller (the volume's iSCSI target) pages like a replica, is not
    /// counted among the replicas, and every finding names the claim (#21).
    #[test]
    fn a_crashlooping_controller_is_as_bad_as_a_replica_and_findings_name_the_pvc() {
        let o = opts(&[]);
        let ctrl_labels = format!(
            r#""openebs.io/component":"jiva-controller","openebs.io/persistent-volume":"{PV}","openebs.io/cas-type":"jiva""#
        );
        let pods = [
            pod(
                &format!("{PV}-jiva-ctrl-7d9f8c6b5-x2k4p"),
                &ctrl_labels,
                Some((40, 3 * 3600)),
            ),
            pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
            pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), None),
            pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
        ];
        let mut d = data(&pods, &o);
        assert!(d.replicas[0].controller && !d.replicas[1].controller);
        d.claims.insert(PV.into(), "media/config-seerr-0".into());
        let r = evaluate(&d, &o, now());
        assert_eq!(r.status, Status::Critical);
        assert!(
            r.summary.starts_with(&format!(
                "controller {PV}-jiva-ctrl-7d9f8c6b5-x2k4p crash-looping (40 restarts"
            )),
            "{}",
            r.summary
        );
        let ctrl = &r.findings[0];
        assert!(
            ctrl.text.contains(&format!(
                "controller (iSCSI target) of PVC media/config-seerr-0 ({PV})"
            )),
            "{ctrl:?}"
        );
        assert!(ctrl.details[0].contains("iSCSI target"));
        // The three replicas are healthy: no degraded-volume finding.
        assert_eq!(r.perfdata[3].render(), "degraded_volumes=0;0;;0");
        // By name alone with Jiva labels (legacy controller), and not a random `-ctrl-` pod.
        let legacy = pod(
            &format!("{PV}-ctrl-5d8f9c7b6d-abcde"),
            &format!(
                r#""openebs.io/persistent-volume":"{PV}","openebs.io/persistent-volume-claim":"config-seerr-0""#
            ),
            None,
        );
        let rep = replica_of(&legacy, &o).unwrap();
        assert!(rep.controller);
        assert_eq!(rep.claim.as_deref(), Some("config-seerr-0"));
        assert!(replica_of(&pod("ingress-ctrl-5d8f9c7b6d-abcde", "", None), &o).is_none());
        // A degraded volume is named by its claim too.
        let pods = [
            pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
            pod(
                &format!("{PV}-jiva-rep-1"),
                &csi_labels(),
                Some((92, 14 * 86400)),
            ),
        ];
        let mut d = data(&pods, &o);
        d.claims.insert(PV.into(), "media/config-seerr-0".into());
        let r = evaluate(&d, &o, now());
        assert!(
            r.summary.contains(&format!(
                "PVC media/config-seerr-0 ({PV}): 1/2 replicas healthy"
            )),
            "{}",
            r.summary
        );
    }

    #[test]
    fn found_by_name_alone_in_both_schemes() {
        let o = opts(&[]);
        for name in [
            format!("{PV}-jiva-rep-1"),
            format!("{PV}-rep-1-7d9c8b5f6-x2x4z"),
            format!("{PV}-rep-7d9c8b5f6-x2x4z"),
            format!("{PV}-rep-2-7d9c8b5f6"),
        ] {
            let r = replica_of(&pod(&name, "", None), &o)
                .unwrap_or_else(|| panic!("{name} not recognised"));
            assert_eq!(r.pv.as_deref(), Some(PV), "{name}");
        }
        for name in [
            format!("{PV}-jiva-ctrl-6b7c9d8f5-abcde"),
            format!("{PV}-ctrl-6b7c9d8f5-abcde"),
            "openebs-jiva-operator-5d8f7c9b6-qwert".to_string(),
            "jiva-csi-node-x7z9q".to_string(),
        ] {
            assert!(
                replica_of(&pod(&name, "", None), &o).is_none(),
                "{name} is not a replica"
            );
        }
        // Legacy label, name that fits no pattern: the label is enough; the PV comes from the label.
        let legacy =
            format!(r#""openebs.io/replica":"jiva-replica","openebs.io/persistent-volume":"{PV}""#);
        assert_eq!(
            replica_of(&pod("whatever", &legacy, None), &o)
                .unwrap()
                .pv
                .as_deref(),
            Some(PV)
        );
    }

    #[test]
    fn thresholds_and_critical_after() {
        let o = opts(&[]);
        let single = |restarts, unready| {
            let p = pod(&format!("{PV}-jiva-rep-0"), "", Some((restarts, unready)));
            judge(&replica_of(&p, &o).unwrap(), &o, now()).0
        };
        assert_eq!(
            single(2, 300),
            Status::Warning,
            "crash-looping at all is WARNING"
        );
        assert_eq!(
            single(2, 31 * 60),
            Status::Critical,
            "unhealthy longer than --critical-after"
        );
        assert_eq!(single(11, 300), Status::Critical, "more than -c restarts");
        assert_eq!(single(10, 300), Status::Warning);
        let o2 = opts(&["-c", "50", "--critical-after", "2h"]);
        let p = pod(&format!("{PV}-jiva-rep-0"), "", Some((20, 3600)));
        assert_eq!(
            judge(&replica_of(&p, &o2).unwrap(), &o2, now()).0,
            Status::Warning
        );
    }

    #[test]
    fn restarting_without_backoff_counts_only_when_recent_and_frequent() {
        let o = opts(&[]);
        let mut p = pod(&format!("{PV}-jiva-rep-0"), "", Some((5, 60)));
        // Running again right now (between crashes): no CrashLoopBackOff.
        p.status.container_statuses[0].state = Default::default();
        let r = replica_of(&p, &o).unwrap();
        assert!(!r.backoff);
        assert_eq!(
            judge(&r, &o, now()).0,
            Status::Warning,
            "5 restarts > -w 3, last 2m ago"
        );
        let o_hi = opts(&["-w", "5"]);
        assert_eq!(judge(&r, &o_hi, now()).0, Status::Ok, "not more than -w");
        let o_window = opts(&["--restart-window", "1m"]);
        assert_eq!(
            judge(&r, &o_window, now()).0,
            Status::Ok,
            "last restart outside the window"
        );
    }

    #[test]
    fn majority_rule_whatever_the_restart_counts() {
        let o = opts(&[]);
        let mut pods = vec![
            pod(&format!("{PV}-jiva-rep-0"), &csi_labels(), None),
            pod(&format!("{PV}-jiva-rep-1"), &csi_labels(), None),
            pod(&format!("{PV}-jiva-rep-2"), &csi_labels(), None),
        ];
        // Two replicas Pending (not scheduled, no restarts at all): no healthy majority.
        for p in &mut pods[1..] {
            p.status.phase = "Pending".into();
            p.status.container_statuses.clear();
            p.status.conditions.clear();
        }
        let r = evaluate(&data(&pods, &o), &o, now());
        assert_eq!(r.status, Status::Critical);
        assert_eq!(r.summary, format!("{PV}: 1/3 replicas healthy"));
        assert_eq!(r.perfdata[1].value, 0.0, "nothing crash-looping");
        assert_eq!(r.perfdata[3].value, 1.0);
    }

    #[test]
    fn healthy_volume_is_ok_and_listed_at_v() {
        let o = opts(&[]);
        let pods: Vec<_> = (0..3)
            .map(|i| pod(&format!("{PV}-jiva-rep-{i}"), &csi_labels(), None))
            .collect();
        let r = evaluate(&data(&pods, &o), &o, now());
        assert_eq!(r.status, Status::Ok);
        assert_eq!(
            r.summary,
            "3 replicas of 1 volumes healthy in namespace openebs"
        );
        assert_eq!(r.findings.len(), 3);
        assert!(r.findings.iter().all(|f| f.status == Status::Ok));
        let r = evaluate(&data(&[], &o), &o, now());
        assert_eq!(
            (r.status, r.summary.as_str()),
            (Status::Unknown, "no Jiva replicas found in namespace openebs (labelled openebs.io/component=jiva-replica or openebs.io/replica=jiva-replica, or named <pv>-jiva-rep-<N> / <pv>-rep-…): give --namespace, --selector or --name-regex")
        );
    }

    #[test]
    fn selector_and_name_regex_widen() {
        let o = opts(&[
            "--selector",
            "longhorn.io/component=instance-manager",
            "--name-regex",
            r"^(?P<pv>pvc-[0-9a-f-]+)-r-[0-9a-f]{8}$",
        ]);
        let lh = pod(
            "instance-manager-abc",
            r#""longhorn.io/component":"instance-manager""#,
            Some((15, 600)),
        );
        let r = replica_of(&lh, &o).unwrap();
        assert_eq!(r.pv, None);
        let named = pod("pvc-0a1b-r-1234abcd", "", None);
        assert_eq!(
            replica_of(&named, &o).unwrap().pv.as_deref(),
            Some("pvc-0a1b")
        );
        assert!(replica_of(&named, &opts(&[])).is_none());
        assert!(Opts::try_parse_from(["x", "--name-regex", "("]).is_err());
        assert!(Opts::try_parse_from(["x", "--selector", "a in b"]).is_err());
    }
}
