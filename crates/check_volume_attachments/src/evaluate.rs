//! Every decision, on plain data: each VolumeAttachment's findings, each Multi-Attach error's,
//! the report.

use kube::Time;
use plugin::shell_quote as q;
use plugin::{fmt_duration, Finding, Perfdata, Range, Report, Status, Subject};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One storage.k8s.io/v1 VolumeAttachment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attachment {
    pub name: String,
    /// `spec.attacher`: the CSI driver.
    pub attacher: String,
    /// `spec.nodeName`.
    pub node: String,
    /// `spec.source.persistentVolumeName` (empty for an inline volume).
    pub pv: String,
    /// `status.attached`.
    pub attached: bool,
    /// `status.attachError.message`.
    pub attach_error: Option<String>,
    /// `status.detachError.message`.
    pub detach_error: Option<String>,
    /// `metadata.creationTimestamp`: when the attach was requested.
    pub created: Option<Time>,
    /// `metadata.deletionTimestamp`: when the detach was requested.
    pub deleting_since: Option<Time>,
}

/// A Node's `Ready` condition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeState {
    /// `True`, `False`, `Unknown`; empty when the node reports no Ready condition.
    pub ready: String,
    /// Its `lastTransitionTime`, else the node's creation.
    pub since: Option<Time>,
    pub reason: String,
    pub message: String,
}

/// A pod that uses a claim (only pods with a PVC volume are kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodUse {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    /// `spec.nodeName` (empty: not scheduled).
    pub node: String,
    /// `status.phase`.
    pub phase: String,
    /// Has a deletionTimestamp.
    pub deleting: bool,
    /// `namespace/pvc` of each claim it mounts.
    pub claims: Vec<String>,
}

/// A `FailedAttachVolume` event of the attach/detach controller whose message is a Multi-Attach
/// error (kubernetes pkg/controller/volume/attachdetach/reconciler `reportMultiAttachError`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MultiAttach {
    /// The pod that waits (`involvedObject`), `namespace/name`.
    pub pod: String,
    pub pod_uid: String,
    /// The volume the message names (the PV name for a PV-backed volume).
    pub volume: String,
    /// The pods the message names as using the volume, `namespace/name` (in the waiting pod's
    /// namespace: the controller names no pod of another namespace).
    pub holders: Vec<String>,
    /// "and N pod(s) in different namespaces".
    pub other_namespaces: usize,
    pub message: String,
    pub last_seen: Option<Time>,
}

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct Data {
    /// Every VolumeAttachment of the cluster (`--node` narrows in [`evaluate`]).
    pub attachments: Vec<Attachment>,
    /// Every node by name.
    pub nodes: BTreeMap<String, NodeState>,
    /// PV name → `namespace/pvc` (the PV's claimRef).
    pub claims: BTreeMap<String, String>,
    /// The pods of the claims' namespaces that mount a claim.
    pub pods: Vec<PodUse>,
    pub multi_attach: Vec<MultiAttach>,
    /// `--node`.
    pub node: Option<String>,
}

/// What decides, from the options.
#[derive(Debug, Clone)]
pub struct Policy {
    /// How long a node may be NotReady while holding an attachment, and (without `-w`) how long
    /// an attach or detach may be pending before it is WARNING.
    pub stuck_after: Duration,
    /// `-w`: a pending attach/detach older than this is WARNING (default: `stuck_after`).
    pub warning: Option<Range>,
    /// `-c`: a pending attach/detach older than this is CRITICAL (default: never by age).
    pub critical: Option<Range>,
}

impl Policy {
    fn pending(&self, age: i64) -> Status {
        let age = age.max(0);
        if self.critical.as_ref().is_some_and(|r| r.alerts(age as f64)) {
            Status::Critical
        } else if match &self.warning {
            Some(r) => r.alerts(age as f64),
            None => age >= self.stuck_after.as_secs() as i64,
        } {
            Status::Warning
        } else {
            Status::Ok
        }
    }

    /// The limit a pending age was judged against, in words.
    fn pending_limit(&self, st: Status) -> String {
        let range =
            |flag: &str, r: &Range| format!("{flag} {}", plugin::args::duration_range_text(r));
        match (st, &self.critical, &self.warning) {
            (Status::Critical, Some(c), _) => range("past -c", c),
            (_, _, Some(w)) if st == Status::Warning => range("past -w", w),
            (Status::Warning, _, None) => {
                format!("past --stuck-after {}", fmt_duration(self.stuck_after))
            }
            (_, _, Some(w)) => format!("within -w {}", plugin::args::duration_range_text(w)),
            _ => format!("within --stuck-after {}", fmt_duration(self.stuck_after)),
        }
    }
}

/// Parse a Multi-Attach event message as the controller writes it
/// (`generateVolumeMsg`: `Multi-Attach error for volume %q <suffix>`), the suffix one of:
/// `Volume is already used by pod(s) a, b[ and N pod(s) in different namespaces]`,
/// `Volume is already used by N pod(s) in different namespaces`,
/// `Volume is already exclusively attached to one node and can't be attached to another`.
/// Returns the volume, the pod names, the count in other namespaces.
pub fn parse_multi_attach(msg: &str) -> Option<(String, Vec<String>, usize)> {
    let rest = msg
        .trim()
        .strip_prefix("Multi-Attach error for volume \"")?;
    let end = rest.find('"')?;
    let volume = rest[..end].to_string();
    let suffix = rest[end + 1..].trim();
    let mut pods = Vec::new();
    let mut others = 0;
    let count_of = |s: &str| {
        s.strip_suffix(" pod(s) in different namespaces")
            .and_then(|n| n.trim().parse::<usize>().ok())
    };
    if let Some(list) = suffix.strip_prefix("Volume is already used by pod(s) ") {
        let (names, more) = match list.rsplit_once(" and ") {
            Some((n, m)) if count_of(m).is_some() => (n, count_of(m)),
            _ => (list, None),
        };
        pods = names
            .split(", ")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        others = more.unwrap_or(0);
    } else if let Some(n) = suffix
        .strip_prefix("Volume is already used by ")
        .and_then(count_of)
    {
        others = n;
    }
    Some((volume, pods, others))
}

fn dur(s: i64) -> String {
    fmt_duration(Duration::from_secs(s.max(0) as u64))
}

/// A `next:` step of commands, each between backticks (pasteable as printed).
fn step(cmds: &[String]) -> String {
    cmds.iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe_va(name: &str) -> String {
    format!("kubectl describe volumeattachment {}", q(name))
}

fn pods_on(node: &str) -> String {
    format!(
        "kubectl get pods -A -o wide --field-selector {}",
        q(&format!("spec.nodeName={node}"))
    )
}

fn describe_pod(pod: &str) -> Option<String> {
    pod.split_once('/')
        .map(|(ns, p)| format!("kubectl -n {} describe pod {}", q(ns), q(p)))
}

fn get_pod(pod: &str) -> Option<String> {
    pod.split_once('/')
        .map(|(ns, p)| format!("kubectl -n {} get pod {} -o wide", q(ns), q(p)))
}

/// What `evaluate` knows of one volume: its PV, its claim, the pods that use it.
struct Names<'a> {
    d: &'a Data,
    /// `namespace/pvc` → pods.
    users: BTreeMap<&'a str, Vec<&'a PodUse>>,
}

impl<'a> Names<'a> {
    fn new(d: &'a Data) -> Self {
        let mut users: BTreeMap<&str, Vec<&PodUse>> = BTreeMap::new();
        for p in &d.pods {
            for c in &p.claims {
                users.entry(c.as_str()).or_default().push(p);
            }
        }
        Names { d, users }
    }

    fn claim(&self, pv: &str) -> Option<&'a str> {
        self.d.claims.get(pv).map(String::as_str)
    }

    fn users(&self, pv: &str) -> Vec<&'a PodUse> {
        self.claim(pv)
            .and_then(|c| self.users.get(c))
            .cloned()
            .unwrap_or_default()
    }

    /// `PVC media/config (pvc-…)`, `PV pvc-…` (no claim), `an inline volume`.
    fn volume(&self, pv: &str) -> String {
        match (pv, self.claim(pv)) {
            ("", _) => "an inline volume".into(),
            (pv, Some(c)) => format!("PVC {c} ({pv})"),
            (pv, None) => format!("PV {pv}"),
        }
    }

    fn users_text(&self, pv: &str) -> String {
        let u = self.users(pv);
        if pv.is_empty() || self.claim(pv).is_none() {
            return String::new();
        }
        if u.is_empty() {
            return "; no pod uses the claim".into();
        }
        let list: Vec<String> = u
            .iter()
            .map(|p| {
                format!(
                    "{} ({}{}{})",
                    p.pod,
                    if p.deleting {
                        "Terminating"
                    } else if p.phase.is_empty() {
                        "no phase"
                    } else {
                        &p.phase
                    },
                    if p.node.is_empty() { "" } else { " on " },
                    p.node
                )
            })
            .collect();
        format!("; used by pod {}", list.join(", "))
    }

    fn subject(&self, pv: &str, node: &str, driver: &str) -> Subject {
        let (ns, pvc) = match self.claim(pv).and_then(|c| c.split_once('/')) {
            Some((n, p)) => (Some(n), Some(p)),
            None => (None, None),
        };
        Subject::new()
            .node(node)
            .pv(pv)
            .driver(driver)
            .maybe(Subject::namespace, ns)
            .maybe(Subject::pvc, pvc)
    }
}

/// How an attachment's node stands.
enum NodeIs<'a> {
    Gone,
    Ready,
    NotReady(&'a NodeState),
}

fn node_is<'a>(d: &'a Data, node: &str) -> NodeIs<'a> {
    match d.nodes.get(node) {
        None => NodeIs::Gone,
        Some(n) if n.ready == "True" => NodeIs::Ready,
        Some(n) => NodeIs::NotReady(n),
    }
}

fn not_ready_text(n: &NodeState) -> String {
    let mut s = if n.ready.is_empty() {
        "reports no Ready condition".to_string()
    } else {
        format!("is NotReady (Ready={}", n.ready)
    };
    if !n.ready.is_empty() {
        if !n.reason.is_empty() {
            s.push_str(&format!(" {}", n.reason));
        }
        if !n.message.is_empty() {
            s.push_str(&format!(": {}", n.message));
        }
        s.push(')');
    }
    s
}

/// The steps for an attachment held by a node that is gone or down: look, then the
/// non-graceful node shutdown taint (Kubernetes ≥ 1.28) or the node's removal.
fn held_steps(va: &Attachment, gone: bool) -> String {
    if gone {
        format!(
            "{}; once the node is gone for good and the volume is detached on the storage side: \
             `kubectl delete volumeattachment {}`",
            step(&[describe_va(&va.name), pods_on(&va.node)]),
            q(&va.name)
        )
    } else {
        format!(
            "{}; if the node is down for good (powered off, not coming back): `kubectl taint \
             nodes {} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`",
            step(&[
                format!("kubectl describe node {}", q(&va.node)),
                pods_on(&va.node),
                describe_va(&va.name),
            ]),
            q(&va.node)
        )
    }
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, p: &Policy, now: Time) -> Report {
    let filter = d.node.as_deref();
    let in_scope: Vec<&Attachment> = d
        .attachments
        .iter()
        .filter(|a| filter.is_none_or(|n| a.node == n))
        .collect();
    if let Some(n) = filter {
        if in_scope.is_empty() && !d.nodes.contains_key(n) {
            // A filter that matched nothing, on a name that is no node: never OK.
            let mut seen: Vec<&str> = d.nodes.keys().map(String::as_str).take(10).collect();
            if d.nodes.len() > 10 {
                seen.push("…");
            }
            return Report::unknown(format!(
                "no node '{n}' in the API and no VolumeAttachment names it (nodes: {}): check \
                 --node (as Kubernetes spells the node)",
                if seen.is_empty() {
                    "none".to_string()
                } else {
                    seen.join(", ")
                }
            ));
        }
    }
    let scope = match filter {
        Some(n) => format!("on node {n}"),
        None => "cluster-wide".to_string(),
    };
    let names = Names::new(d);
    let mut findings = Vec::new();
    let (mut gone, mut not_ready, mut attach_pending, mut detach_pending, mut multi) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    let mut oldest_pending: i64 = 0;
    let mut summary: Vec<String> = Vec::new();
    for va in &in_scope {
        let vol = names.volume(&va.pv);
        let users = names.users_text(&va.pv);
        let subject = names.subject(&va.pv, &va.node, &va.attacher);
        let head = format!("{vol}: VolumeAttachment {}", va.name);
        let errors = |f: Finding| -> Finding {
            let mut f = f;
            if let Some(e) = &va.attach_error {
                f = f.detail(format!("attachError: {e}"));
            }
            if let Some(e) = &va.detach_error {
                f = f.detail(format!("detachError: {e}"));
            }
            f.evidence(format!(
                "VolumeAttachment {}: attacher {}, node {}, attached {}, created {}, deletion requested {}",
                va.name,
                va.attacher,
                va.node,
                va.attached,
                va.created.map(kube::time::format_rfc3339).unwrap_or_else(|| "(unknown)".into()),
                va.deleting_since.map(kube::time::format_rfc3339).unwrap_or_else(|| "no".into()),
            ))
        };
        let held = va.attached || va.deleting_since.is_some();
        match node_is(d, &va.node) {
            NodeIs::Gone if held => {
                gone += 1;
                summary.push(format!("{vol} held by gone node {}", va.node));
                findings.push(errors(
                    Finding::new(
                        Status::Critical,
                        format!(
                            "{head} {} node {}, which no longer exists{users}",
                            if va.attached {
                                "still attached to"
                            } else {
                                "still detaching from"
                            },
                            va.node
                        ),
                    )
                    .signal("attachment_node_gone")
                    .subject(subject)
                    .next(held_steps(va, true)),
                ));
                continue;
            }
            NodeIs::NotReady(n) if va.attached => {
                let age = n.since.map(|t| (now - t).max(0));
                let over = age.is_none_or(|a| a >= p.stuck_after.as_secs() as i64);
                let for_ = match age {
                    Some(a) => format!("for {}", dur(a)),
                    None => "for an unknown time".into(),
                };
                let text = format!(
                    "{head} attached to node {}, which {} {for_}{users}",
                    va.node,
                    not_ready_text(n)
                );
                if over {
                    not_ready += 1;
                    summary.push(format!("{vol} held by NotReady node {}", va.node));
                    findings.push(errors(
                        Finding::new(
                            Status::Critical,
                            format!(
                                "{text} (past --stuck-after {})",
                                fmt_duration(p.stuck_after)
                            ),
                        )
                        .signal("attachment_node_not_ready")
                        .subject(subject)
                        .next(held_steps(va, false)),
                    ));
                    continue;
                }
                findings.push(
                    Finding::new(
                        Status::Ok,
                        format!(
                            "{text} (within --stuck-after {})",
                            fmt_duration(p.stuck_after)
                        ),
                    )
                    .signal("attachment_ok")
                    .subject(subject.clone()),
                );
                if va.deleting_since.is_none() {
                    continue;
                }
            }
            _ => {}
        }
        // Pending: detach requested and still attached, or attach requested and not done.
        let pending = if let Some(t) = va.deleting_since.filter(|_| va.attached) {
            Some(("detach", now - t))
        } else if !va.attached && va.deleting_since.is_none() {
            va.created.map(|t| ("attach", now - t))
        } else {
            None
        };
        match pending {
            Some((what, age)) => {
                let st = p.pending(age);
                let error = if what == "attach" {
                    &va.attach_error
                } else {
                    &va.detach_error
                };
                let gone_note = if matches!(node_is(d, &va.node), NodeIs::Gone) {
                    " (the node no longer exists)"
                } else {
                    ""
                };
                let text = format!(
                    "{head}: {what} to node {}{gone_note} pending for {}{}{users}",
                    va.node,
                    dur(age),
                    error
                        .as_ref()
                        .map(|e| format!(", {what}Error: {e}"))
                        .unwrap_or_else(|| format!(", no {what}Error yet")),
                );
                let text = text.replace("detach to node", "detach from node");
                let limit = p.pending_limit(st);
                if st == Status::Ok {
                    findings.push(
                        Finding::new(Status::Ok, format!("{text} ({limit})"))
                            .signal("attachment_ok")
                            .subject(subject),
                    );
                    continue;
                }
                oldest_pending = oldest_pending.max(age);
                let f = Finding::new(st, format!("{text} ({limit})"));
                let (f, cmds): (Finding, Vec<String>) = if what == "attach" {
                    attach_pending += 1;
                    let mut c = vec![
                        describe_va(&va.name),
                        format!("kubectl get csinode {} -o yaml", q(&va.node)),
                    ];
                    c.extend(
                        names
                            .users(&va.pv)
                            .iter()
                            .filter(|u| u.node == va.node)
                            .filter_map(|u| describe_pod(&u.pod)),
                    );
                    (f.signal("attach_pending"), c)
                } else {
                    detach_pending += 1;
                    (
                        f.signal("detach_pending"),
                        vec![
                            describe_va(&va.name),
                            format!(
                                "kubectl get volumeattachment {} -o jsonpath={}",
                                q(&va.name),
                                q("{.metadata.finalizers}")
                            ),
                            pods_on(&va.node),
                        ],
                    )
                };
                summary.push(format!("{vol} {what} pending {} on {}", dur(age), va.node));
                findings.push(errors(f.subject(subject).next(step(&cmds))));
            }
            None => {
                if va.attached && matches!(node_is(d, &va.node), NodeIs::Ready) {
                    findings.push(
                        Finding::new(
                            Status::Ok,
                            format!("{head} attached to node {} (Ready){users}", va.node),
                        )
                        .signal("attachment_ok")
                        .subject(subject),
                    );
                } else if !va.attached {
                    // Deleted and detached: the finalizer is about to go.
                    findings.push(
                        Finding::new(
                            Status::Ok,
                            format!("{head} detached from node {}, being removed", va.node),
                        )
                        .signal("attachment_ok")
                        .subject(subject),
                    );
                }
            }
        }
    }
    // Multi-Attach errors: one per waiting pod and volume (the latest event), while the pod
    // still waits (exists, same UID, Pending, not being deleted).
    let mut latest: BTreeMap<(&str, &str), &MultiAttach> = BTreeMap::new();
    for m in &d.multi_attach {
        let k = (m.pod.as_str(), m.volume.as_str());
        if latest.get(&k).is_none_or(|o| m.last_seen >= o.last_seen) {
            latest.insert(k, m);
        }
    }
    let pods: BTreeMap<&str, &PodUse> = d.pods.iter().map(|p| (p.pod.as_str(), p)).collect();
    for m in latest.values() {
        let Some(w) = pods.get(m.pod.as_str()) else {
            continue;
        };
        if (!m.pod_uid.is_empty() && !w.uid.is_empty() && m.pod_uid != w.uid)
            || w.deleting
            || w.phase != "Pending"
        {
            continue;
        }
        // Where the volume is held: its attachments to other nodes.
        let holding: Vec<&Attachment> = d
            .attachments
            .iter()
            .filter(|a| a.pv == m.volume && !a.pv.is_empty() && a.node != w.node)
            .collect();
        let holding_nodes: BTreeSet<&str> = holding.iter().map(|a| a.node.as_str()).collect();
        if let Some(n) = filter {
            if w.node != n && !holding_nodes.contains(n) {
                continue;
            }
        }
        multi += 1;
        let vol = names.volume(&m.volume);
        let mut holders: BTreeSet<String> = m.holders.iter().cloned().collect();
        for u in names.users(&m.volume) {
            if u.pod != w.pod && holding_nodes.contains(u.node.as_str()) {
                holders.insert(u.pod.clone());
            }
        }
        let held_by = {
            let mut parts = Vec::new();
            if !holding_nodes.is_empty() {
                let ns: Vec<String> = holding_nodes
                    .iter()
                    .map(|n| match node_is(d, n) {
                        NodeIs::Gone => format!("{n} (gone)"),
                        NodeIs::NotReady(_) => format!("{n} (NotReady)"),
                        NodeIs::Ready => n.to_string(),
                    })
                    .collect();
                parts.push(format!("on node {}", ns.join(", ")));
            }
            if !holders.is_empty() {
                parts.push(format!(
                    "by pod {}",
                    holders.iter().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            if m.other_namespaces > 0 {
                parts.push(format!(
                    "and {} pod(s) in other namespaces",
                    m.other_namespaces
                ));
            }
            if parts.is_empty() {
                "by an attachment the API no longer shows".to_string()
            } else {
                parts.join(" ")
            }
        };
        let text = format!(
            "pod {} waits on node {}: Multi-Attach error for {vol}, held {held_by}{}",
            w.pod,
            if w.node.is_empty() { "(none)" } else { &w.node },
            m.last_seen
                .map(|t| format!(" (event {} ago)", dur(now - t)))
                .unwrap_or_default()
        );
        let mut cmds: Vec<String> = describe_pod(&w.pod).into_iter().collect();
        cmds.extend(holding.iter().map(|a| describe_va(&a.name)));
        cmds.extend(holders.iter().filter_map(|h| get_pod(h)));
        let (ns, pod) = w.pod.split_once('/').unwrap_or(("", &w.pod));
        summary.push(format!("pod {} Multi-Attach on {vol}", w.pod));
        findings.push(
            Finding::new(Status::Critical, text)
                .signal("multi_attach")
                .subject(names.subject(&m.volume, &w.node, "").namespace(ns).pod(pod))
                .detail(format!("event: {}", m.message))
                .next(step(&cmds)),
        );
    }
    let status = findings
        .iter()
        .map(|f| f.status)
        .fold(Status::Ok, Status::worst);
    let attached = in_scope.iter().filter(|a| a.attached).count();
    let summary = if summary.is_empty() {
        format!(
            "{} VolumeAttachment{} {scope} ({attached} attached), none held by a gone or NotReady \
             node, no attach or detach pending past {}, no Multi-Attach error",
            in_scope.len(),
            if in_scope.len() == 1 { "" } else { "s" },
            match &p.warning {
                Some(w) => format!("-w {}", plugin::args::duration_range_text(w)),
                None => format!("--stuck-after {}", fmt_duration(p.stuck_after)),
            }
        )
    } else {
        let n = summary.len();
        let mut s: Vec<String> = summary.into_iter().take(3).collect();
        if n > 3 {
            s.push(format!("{} more", n - 3));
        }
        let bad = gone + not_ready + attach_pending + detach_pending;
        format!(
            "{}{} VolumeAttachment{} {scope}: {}",
            if bad > 0 {
                format!("{bad} of ")
            } else {
                String::new()
            },
            in_scope.len(),
            if in_scope.len() == 1 { "" } else { "s" },
            s.join("; ")
        )
    };
    let zero = Range::above(0.0);
    let mut r = Report::new(status, summary)
        .unit("VolumeAttachment", "VolumeAttachments")
        .perf(Perfdata::new("attachments", in_scope.len() as f64).min(0.0))
        .perf(Perfdata::new("attached", attached as f64).min(0.0))
        .perf(
            Perfdata::new("node_gone", gone as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("node_not_ready", not_ready as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("attach_pending", attach_pending as f64)
                .warn(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("detach_pending", detach_pending as f64)
                .warn(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("multi_attach", multi as f64)
                .crit(Some(&zero))
                .min(0.0),
        )
        .perf(
            Perfdata::new("oldest_pending", oldest_pending as f64)
                .uom(plugin::Uom::Seconds)
                .warn(p.warning.as_ref())
                .crit(p.critical.as_ref())
                .min(0.0),
        );
    for f in findings {
        r = r.finding(f);
    }
    r.sort_findings();
    r
}
