//! check_stuck_scheduled — pods scheduled to a node that never got a single container running.
//!
//! The incident (stale-csi-mount-workspace-pending): a stale CSI device mount wedged the kubelet's
//! volume queue on worker-04; every pod scheduled there sat `Pending` with `PodScheduled=True` and
//! no container status for 7–17 days, unnoticed. This is that incident's proposed "FN3b" detector.
//!
//! A pod is stuck when it is `Pending`, `PodScheduled=True`, and either
//! - **no-status**: it has no container and no init-container status at all (the kubelet never
//!   synced it), or
//! - **creating**: every container and init container still waits in `ContainerCreating` or
//!   `PodInitializing` (newer kubelets publish those statuses at once);
//!
//! for longer than the thresholds (`-w 5m -c 10m`), measured from the PodScheduled transition.

use clap::Parser;
use kube::{ApiArgs, NodeArg, Pod, PodFilter, PodsJsonArg, Time};
use plugin::{
    fmt_duration, Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds,
    Unknown, Uom,
};
use std::collections::HashMap;
use std::time::Duration;

/// At most this many event lookups per run (one request each); the rest are skipped with a note.
pub const MAX_EVENT_LOOKUPS: usize = 20;

#[derive(Debug, Parser)]
#[command(
    name = "check_stuck_scheduled",
    version,
    about = "Alert on pods scheduled to a node that never started a container",
    long_about = "Alert on pods scheduled to a node that never started a container.\n\n\
A pod is stuck when it is Pending with PodScheduled=True and has no container or init-container \
status at all, or all of its containers still wait in ContainerCreating/PodInitializing, for longer \
than the thresholds (measured from the PodScheduled transition). Typical cause: a CSI mount or \
attach that never completes, or a kubelet volume queue wedged by a stale mount. A pod that is \
also Terminating (deletionTimestamp set) is left to check_stuck_terminating, which says it never \
started.\n\n\
Reads pods on this node from the API (--all-nodes, --namespace to widen or narrow), or from \
`kubectl get pods -A -o json` output with --pods-json. For each stuck pod the latest \
FailedMount/FailedAttachVolume event is shown (--no-events to skip)."
)]
pub struct Opts {
    #[command(flatten)]
    pub common: CommonArgs,

    /// Warn when a pod has been stuck longer than this (duration range)
    #[arg(short = 'w', long = "warning", value_name = "DURATION", default_value = "5m", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub warning: Range,

    /// Critical when a pod has been stuck longer than this (duration range)
    #[arg(short = 'c', long = "critical", value_name = "DURATION", default_value = "10m", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub critical: Range,

    #[command(flatten)]
    pub node: NodeArg,

    /// Look at pods on every node instead of this one
    #[arg(long, conflicts_with = "node")]
    pub all_nodes: bool,

    /// Only pods in this namespace (repeatable; default: all namespaces)
    #[arg(long, value_name = "NS")]
    pub namespace: Vec<String>,

    /// Do not look up FailedMount/FailedAttachVolume events for stuck pods
    #[arg(long)]
    pub no_events: bool,

    #[command(flatten)]
    pub api: ApiArgs,

    #[command(flatten)]
    pub pods: PodsJsonArg,
}

/// Which rule found a pod stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// No container or init-container status at all.
    NoStatus,
    /// Every container waits in ContainerCreating/PodInitializing.
    Creating,
}

impl Rule {
    pub fn describe(self) -> &'static str {
        match self {
            Rule::NoStatus => "no container status (the kubelet never started it)",
            Rule::Creating => "all containers still ContainerCreating/PodInitializing",
        }
    }

    /// The finding's machine-readable kind.
    pub fn signal(self) -> &'static str {
        match self {
            Rule::NoStatus => "stuck_no_status",
            Rule::Creating => "stuck_creating",
        }
    }
}

/// What `evaluate` needs of one pending, scheduled pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// When PodScheduled became True (else the pod's creation).
    pub scheduled_at: Option<Time>,
    pub rule: Rule,
    /// Waiting reasons seen (for the creating rule), e.g. "ContainerCreating".
    pub waiting: Vec<String>,
}

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct Data {
    /// Pods in scope.
    pub pods: usize,
    /// Pods that match a stuck rule (any age).
    pub candidates: Vec<Candidate>,
    /// Latest FailedMount/FailedAttachVolume event per `ns/name`: (reason, message, when).
    pub events: HashMap<String, (String, String, Option<Time>)>,
    /// What was read, e.g. "on node k8s03" (for the summary).
    pub scope: String,
    /// Notes for the long output (event lookups skipped or failed).
    pub notes: Vec<String>,
}

/// Classify one pod: `Some` when it matches a stuck rule (whatever its age).
pub fn classify(p: &Pod) -> Option<Candidate> {
    if p.status.phase != "Pending" || !p.is_scheduled() {
        return None;
    }
    // Terminating too: check_stuck_terminating owns it (and says it never started).
    if p.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let statuses: Vec<_> = p.all_container_statuses().collect();
    let (rule, waiting) = if statuses.is_empty() {
        (Rule::NoStatus, Vec::new())
    } else {
        let mut reasons = Vec::new();
        for c in &statuses {
            match &c.state.waiting {
                Some(w) if w.reason == "ContainerCreating" || w.reason == "PodInitializing" => {
                    if !reasons.contains(&w.reason) {
                        reasons.push(w.reason.clone())
                    }
                }
                _ => return None,
            }
        }
        (Rule::Creating, reasons)
    };
    Some(Candidate {
        namespace: p.metadata.namespace.clone(),
        name: p.metadata.name.clone(),
        node: p.spec.node_name.clone().unwrap_or_default(),
        scheduled_at: p
            .condition("PodScheduled")
            .and_then(|c| c.last_transition_time)
            .or(p.metadata.creation_timestamp),
        rule,
        waiting,
    })
}

fn thresholds(o: &Opts) -> Thresholds {
    Thresholds::new(Some(o.warning.clone()), Some(o.critical.clone()))
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, o: &Opts, now: Time) -> Report {
    let th = thresholds(o);
    let mut stuck: Vec<(Status, i64, &Candidate)> = Vec::new();
    let mut young = 0;
    for c in &d.candidates {
        let age = c.scheduled_at.map(|t| (now - t).max(0)).unwrap_or(0);
        match th.evaluate(age as f64) {
            Status::Ok => young += 1,
            s => stuck.push((s, age, c)),
        }
    }
    stuck.sort_by(|a, b| b.0.rank().cmp(&a.0.rank()).then(b.1.cmp(&a.1)));
    let oldest = stuck.iter().map(|s| s.1).max().unwrap_or(0);
    let status = stuck.iter().fold(Status::Ok, |acc, s| acc.worst(s.0));
    let age = |s: i64| fmt_duration(Duration::from_secs(s as u64));
    let summary = if stuck.is_empty() {
        let mut s = format!(
            "no pod stuck after scheduling ({} pods {})",
            d.pods, d.scope
        );
        if young > 0 {
            s.push_str(&format!(
                ", {young} pending without containers {}",
                plugin::args::duration_range_quiet(&o.warning)
            ));
        }
        s
    } else {
        let shown: Vec<String> = stuck
            .iter()
            .take(3)
            .map(|(_, a, c)| format!("{}/{} ({})", c.namespace, c.name, age(*a)))
            .collect();
        format!(
            "{} of {} pods {} stuck after scheduling: {}{}",
            stuck.len(),
            d.pods,
            d.scope,
            shown.join(", "),
            if stuck.len() > 3 { ", …" } else { "" }
        )
    };
    let mut r = Report::new(status, summary)
        .unit("pod", "pods")
        .perf(Perfdata::new("pods", d.pods as f64).min(0.0))
        .perf(Perfdata::new("stuck_pods", stuck.len() as f64).min(0.0))
        .perf(
            Perfdata::new("oldest_stuck", oldest as f64)
                .uom(Uom::Seconds)
                .thresholds(&th)
                .min(0.0),
        );
    for (s, a, c) in &stuck {
        let key = format!("{}/{}", c.namespace, c.name);
        let mut text = format!(
            "{key} on {}: scheduled {} ago, {}",
            if c.node.is_empty() { "?" } else { &c.node },
            age(*a),
            c.rule.describe()
        );
        if c.scheduled_at.is_none() {
            text.push_str(" (no scheduling time recorded)");
        }
        let mut f = Finding::new(*s, text).signal(c.rule.signal()).subject(
            plugin::Subject::new()
                .node(c.node.as_str())
                .namespace(c.namespace.as_str())
                .pod(c.name.as_str()),
        );
        if let Some((reason, msg, when)) = d.events.get(&key) {
            let ago = when
                .map(|t| format!(" ({} ago)", age((now - t).max(0))))
                .unwrap_or_default();
            f = f.detail(format!(
                "last {reason}{ago}: {}",
                plugin::render::truncate(msg, 400)
            ));
        }
        r = r.finding(f);
    }
    for n in &d.notes {
        r = r.note(n.clone());
    }
    r
}

/// The latest FailedMount/FailedAttachVolume event among `events`.
pub fn latest_volume_event(events: &[kube::Event]) -> Option<(String, String, Option<Time>)> {
    events
        .iter()
        .filter(|e| e.reason == "FailedMount" || e.reason == "FailedAttachVolume")
        .max_by_key(|e| e.last_seen())
        .map(|e| (e.reason.clone(), e.message.clone(), e.last_seen()))
}

impl Opts {
    fn filter(&self) -> Result<PodFilter, Unknown> {
        Ok(PodFilter {
            namespaces: self.namespace.clone(),
            node: if self.all_nodes {
                None
            } else {
                Some(self.node.name()?)
            },
            labels: None,
        })
    }

    /// All I/O: pods (API or file) and, for stuck pods, their events.
    pub fn gather(&self, ctx: &Ctx, now: Time) -> Result<Data, Unknown> {
        let filter = self.filter()?;
        let mut d = Data::default();
        let mut take = |p: Pod| {
            d.pods += 1;
            if let Some(c) = classify(&p) {
                d.candidates.push(c);
            }
        };
        // No pod on the node: prove the node exists rather than answer OK on nothing.
        let scan = kube::nodes::scan_node_pods(
            self.pods.pods_json.as_deref(),
            &self.api,
            filter,
            !self.all_nodes && self.node.guessed(),
            ctx,
            &mut take,
        )?;
        d.scope = scan.filter.describe();
        d.notes.extend(scan.note);
        let client = scan.client;
        if !self.no_events {
            let stuck = self.stuck_keys(&d, now);
            match &client {
                Some(c) => lookup_events(c, &stuck, &mut d, ctx),
                None if !stuck.is_empty() => d
                    .notes
                    .push("events not looked up (pods read from --pods-json)".into()),
                None => {}
            }
        }
        if let Some(c) = &client {
            for line in c.requests() {
                ctx.debug(line);
            }
        }
        Ok(d)
    }

    /// `(namespace, name)` of the candidates old enough to alert.
    fn stuck_keys(&self, d: &Data, now: Time) -> Vec<(String, String)> {
        let th = thresholds(self);
        d.candidates
            .iter()
            .filter(|c| {
                let age = c.scheduled_at.map(|t| (now - t).max(0)).unwrap_or(0);
                th.evaluate(age as f64) != Status::Ok
            })
            .map(|c| (c.namespace.clone(), c.name.clone()))
            .collect()
    }
}

/// The latest volume event of each stuck pod (at most [`MAX_EVENT_LOOKUPS`] requests). A failure
/// leaves the verdict alone and says why in a note.
fn lookup_events(client: &kube::Client, stuck: &[(String, String)], d: &mut Data, ctx: &Ctx) {
    for (i, (ns, name)) in stuck.iter().enumerate() {
        if i >= MAX_EVENT_LOOKUPS {
            d.notes.push(format!(
                "events looked up for the first {MAX_EVENT_LOOKUPS} stuck pods only"
            ));
            break;
        }
        ctx.stage(format!("reading events of {ns}/{name}"));
        match client.events_for(ns, "Pod", name) {
            Ok(ev) => {
                if let Some(e) = latest_volume_event(&ev) {
                    d.events.insert(format!("{ns}/{name}"), e);
                }
            }
            Err(e) => {
                d.notes.push(format!("events not read: {e}"));
                break;
            }
        }
    }
}

impl Check for Opts {
    const NAME: &'static str = "STUCK_SCHEDULED";
    const BINARY: &'static str = "check_stuck_scheduled";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let now = kube::time::now();
        let d = self.gather(ctx, now)?;
        Ok(evaluate(&d, self, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::time::parse_rfc3339;

    const NOW: &str = "2026-07-12T12:00:00Z";

    fn now() -> Time {
        parse_rfc3339(NOW).unwrap()
    }

    fn opts(args: &[&str]) -> Opts {
        let mut v = vec!["check_stuck_scheduled"];
        v.extend_from_slice(args);
        Opts::try_parse_from(v).unwrap()
    }

    fn pod(json: &str) -> Pod {
        serde_json::from_str(json).unwrap()
    }

    /// A pending pod scheduled `mins` minutes before NOW, with the given status extras.
    fn pending(name: &str, mins: i64, extra_status: &str) -> Pod {
        let t = kube::time::format_rfc3339(now() - mins * 60);
        pod(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"llmsafespaces","creationTimestamp":"{t}"}},
            "spec":{{"nodeName":"worker-04"}},
            "status":{{"phase":"Pending","conditions":[{{"type":"PodScheduled","status":"True","lastTransitionTime":"{t}"}}]{extra_status}}}}}"#
        ))
    }

    fn data(pods: &[Pod]) -> Data {
        Data {
            pods: pods.len(),
            candidates: pods.iter().filter_map(classify).collect(),
            scope: "on node worker-04".into(),
            ..Default::default()
        }
    }

    #[test]
    fn no_status_rule_by_age() {
        let o = opts(&[]);
        for (mins, want) in [
            (4, Status::Ok),
            (6, Status::Warning),
            (11, Status::Critical),
        ] {
            let r = evaluate(&data(&[pending("ws-b70553ae", mins, "")]), &o, now());
            assert_eq!(r.status, want, "{mins} min: {r:?}");
        }
        let r = evaluate(&data(&[pending("ws-b70553ae", 11, "")]), &o, now());
        assert!(
            r.findings[0].text.contains(
                "llmsafespaces/ws-b70553ae on worker-04: scheduled 11m ago, no container status"
            ),
            "{:?}",
            r.findings
        );
        assert_eq!(r.perfdata[1].value, 1.0);
        assert_eq!(r.perfdata[2].value, 660.0);
        assert!(r.summary.starts_with("1 of 1 pods on node worker-04 stuck after scheduling: llmsafespaces/ws-b70553ae (11m)"), "{}", r.summary);
    }

    #[test]
    fn creating_rule_needs_every_container_waiting() {
        let creating = r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}}],
            "initContainerStatuses":[{"name":"i","state":{"waiting":{"reason":"PodInitializing"}}}]"#;
        let p = pending("a", 30, creating);
        assert_eq!(classify(&p).unwrap().rule, Rule::Creating);
        assert_eq!(
            evaluate(&data(&[p]), &opts(&[]), now()).status,
            Status::Critical
        );
        // One container running, another still creating: not this check's business.
        let mixed = r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}},
            {"name":"b","state":{"running":{"startedAt":"2026-07-12T11:00:00Z"}}}]"#;
        assert!(classify(&pending("b", 30, mixed)).is_none());
        // Other waiting reasons (image pulls, crash loops) are other problems.
        let pull = r#","containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ImagePullBackOff"}}}]"#;
        assert!(classify(&pending("c", 30, pull)).is_none());
    }

    /// A pod both Terminating and never started belongs to check_stuck_terminating (#21): one
    /// pod, one alert.
    #[test]
    fn a_terminating_pod_is_left_to_check_stuck_terminating() {
        let mut p = pending("ws-b70553ae", 60, "");
        assert!(classify(&p).is_some());
        p.metadata.deletion_timestamp = Some(now() - 30);
        assert!(classify(&p).is_none());
        assert_eq!(evaluate(&data(&[p]), &opts(&[]), now()).status, Status::Ok);
    }

    #[test]
    fn only_pending_and_scheduled_pods() {
        let mut p = pending("a", 60, "");
        p.status.phase = "Running".into();
        assert!(classify(&p).is_none());
        let mut p = pending("a", 60, "");
        p.status.conditions[0].status = "False".into();
        assert!(
            classify(&p).is_none(),
            "unschedulable pods are the scheduler's problem"
        );
        let mut p = pending("a", 60, "");
        p.status.conditions.clear();
        assert!(classify(&p).is_none());
    }

    #[test]
    fn age_falls_back_to_creation_and_thresholds_apply() {
        let mut p = pending("a", 20, "");
        p.status.conditions[0].last_transition_time = None;
        let c = classify(&p).unwrap();
        assert_eq!(c.scheduled_at, Some(now() - 1200));
        // Custom thresholds.
        let o = opts(&["-w", "30m", "-c", "1h"]);
        assert_eq!(
            evaluate(&data(&[pending("a", 20, "")]), &o, now()).status,
            Status::Ok
        );
        assert_eq!(
            evaluate(&data(&[pending("a", 45, "")]), &o, now()).status,
            Status::Warning
        );
        // Clock skew: a future transition is age 0, not a huge number.
        assert_eq!(
            evaluate(&data(&[pending("a", -5, "")]), &opts(&[]), now()).status,
            Status::Ok
        );
    }

    #[test]
    fn ok_summary_and_events_shown() {
        let o = opts(&[]);
        let r = evaluate(&data(&[pending("a", 2, "")]), &o, now());
        assert_eq!(r.status, Status::Ok);
        assert!(r.summary.contains("no pod stuck after scheduling (1 pods on node worker-04), 1 pending without containers for less than 5m"), "{}", r.summary);
        assert_eq!(
            r.perfdata.iter().map(|p| p.render()).collect::<Vec<_>>(),
            [
                "pods=1;;;0",
                "stuck_pods=0;;;0",
                "oldest_stuck=0s;300;600;0"
            ]
        );
        let mut d = data(&[pending("a", 20, ""), pending("b", 8, "")]);
        d.events.insert(
            "llmsafespaces/a".into(),
            (
                "FailedMount".into(),
                "MountVolume.MountDevice failed for volume \"pvc-81b676e6\"".into(),
                Some(now() - 60),
            ),
        );
        let r = evaluate(&d, &o, now());
        assert_eq!(r.status, Status::Critical);
        assert_eq!(r.findings.len(), 2);
        assert_eq!(r.findings[0].status, Status::Critical, "worst first");
        assert_eq!(r.findings[0].details, ["last FailedMount (1m ago): MountVolume.MountDevice failed for volume \"pvc-81b676e6\""]);
        assert_eq!(r.findings[1].status, Status::Warning);
    }

    #[test]
    fn latest_volume_event_picks_newest_relevant() {
        let ev = |reason: &str, t: &str| -> kube::Event {
            serde_json::from_str(&format!(
                r#"{{"reason":"{reason}","message":"{reason} at {t}","lastTimestamp":"{t}"}}"#
            ))
            .unwrap()
        };
        let evs = [
            ev("FailedMount", "2026-07-12T10:00:00Z"),
            ev("FailedAttachVolume", "2026-07-12T11:00:00Z"),
            ev("Scheduled", "2026-07-12T11:30:00Z"),
        ];
        let (r, m, _) = latest_volume_event(&evs).unwrap();
        assert_eq!(
            (r.as_str(), m.as_str()),
            (
                "FailedAttachVolume",
                "FailedAttachVolume at 2026-07-12T11:00:00Z"
            )
        );
        assert!(latest_volume_event(&evs[2..]).is_none());
    }

    #[test]
    fn options() {
        assert!(Opts::try_parse_from(["x", "--all-nodes", "--node", "a"]).is_err());
        assert!(Opts::try_parse_from(["x", "-w", "abc"]).is_err());
        let o = opts(&["--namespace", "a", "--namespace", "b", "--node", "k8s03"]);
        let f = o.filter().unwrap();
        assert_eq!(f.describe(), "on node k8s03 in namespaces a, b");
    }
}
