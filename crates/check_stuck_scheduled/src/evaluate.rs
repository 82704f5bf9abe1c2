//! What is stuck and what to do about it: the rules that classify a pod, the decision. Pure.

use kube::checks::stuck::{age_text, AgePolicy, LastEvent, PodRef, Scan, StuckPod};
use kube::{Pod, Time};
use plugin::{Finding, Report};

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
    pub pod: PodRef,
    /// When PodScheduled became True (else the pod's creation).
    pub scheduled_at: Option<Time>,
    pub rule: Rule,
    /// Waiting reasons seen (for the creating rule), e.g. "ContainerCreating".
    pub waiting: Vec<String>,
    /// The names of the pod's volumes that are no claim (an event naming one is not about a
    /// PV), and whether it has a claim at all.
    pub inline_volumes: Vec<String>,
    pub has_claims: bool,
}

impl StuckPod for Candidate {
    fn pod(&self) -> &PodRef {
        &self.pod
    }
    /// Since PodScheduled (0 without a time).
    fn age(&self, now: Time) -> i64 {
        self.scheduled_at.map(|t| (now - t).max(0)).unwrap_or(0)
    }
}

/// Everything gathered: the pods in scope, the stuck candidates (any age), the latest
/// FailedMount/FailedAttachVolume event of each one past the thresholds.
pub type Data = Scan<Candidate>;

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
        pod: PodRef::of(p),
        scheduled_at: p
            .condition("PodScheduled")
            .and_then(|c| c.last_transition_time)
            .or(p.metadata.creation_timestamp),
        rule,
        waiting,
        inline_volumes: p
            .spec
            .volumes
            .iter()
            .filter(|v| v.persistent_volume_claim.is_none())
            .map(|v| v.name.clone())
            .collect(),
        has_claims: p.claim_names().next().is_some(),
    })
}

/// The PVs a stuck pod's latest volume event names: the kubelet writes a PV-backed volume as
/// its PV (`MountVolume.MountDevice failed for volume "pvc-…"`, `AttachVolume.Attach failed for
/// volume "pvc-…"`); a name that is one of the pod's inline volumes is not a PV, and a pod with
/// no claim has none. Unknown otherwise (none). Pure.
pub fn event_pvs<'a>(d: &'a Data, c: &Candidate) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    if !c.has_claims {
        return out;
    }
    let Some(e) = d.events.get(&c.pod.key()) else {
        return out;
    };
    let mut rest = e.message.as_str();
    while let Some(i) = rest.find("for volume \"") {
        rest = &rest[i + "for volume \"".len()..];
        let Some(j) = rest.find('"') else { break };
        let name = &rest[..j];
        rest = &rest[j..];
        if !name.is_empty() && !c.inline_volumes.iter().any(|v| v == name) && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The PVs of the pods stuck this run (past the thresholds), as far as known. Pure.
pub fn stuck_pvs(d: &Data, policy: &Policy, now: Time) -> Vec<String> {
    let mut out: Vec<String> = d
        .found
        .iter()
        .filter(|c| policy.judge(*c, now) != plugin::Status::Ok)
        .flat_map(|c| event_pvs(d, c))
        .map(str::to_string)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// What the memory of the volumes says (`--state-dir`), added to the report: the finding of a
/// stuck pod whose PV had an earlier stuck spell names it; the memory's notes are the report's.
/// Pure.
pub fn recall(r: &mut Report, d: &Data, m: &node::history::Remembered) {
    for f in r
        .findings
        .iter_mut()
        .filter(|f| f.status != plugin::Status::Ok)
    {
        let (Some(ns), Some(pod)) = (f.subject.namespace.as_deref(), f.subject.pod.as_deref())
        else {
            continue;
        };
        let Some(c) = d
            .found
            .iter()
            .find(|c| c.pod.namespace == ns && c.pod.name == pod)
        else {
            continue;
        };
        for pv in event_pvs(d, c) {
            if let Some(h) = m.text(pv, node::history::Kind::Stuck) {
                f.text.push_str(&format!("; its volume {pv}: {h}"));
            }
        }
    }
    r.notes.extend(m.notes.iter().cloned());
}

/// What decides, from the options: how long a pod may stay stuck.
pub type Policy = AgePolicy;

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, policy: &Policy, now: Time) -> Report {
    let mut stuck = policy.alerting(&d.found, now);
    stuck.more = d.more;
    let young = d.found.len() - stuck.pods.len() + d.young;
    let summary = if stuck.count() == 0 {
        let mut s = format!(
            "no pod stuck after scheduling ({} {})",
            plugin::count(d.pods, "pod", "pods"),
            d.scope
        );
        if young > 0 {
            s.push_str(&format!(
                ", {young} pending without containers {}",
                plugin::args::duration_range_quiet(&policy.warning)
            ));
        }
        s
    } else {
        format!(
            "{} {} stuck after scheduling: {}",
            plugin::count_of(stuck.count(), d.pods, "pod", "pods"),
            d.scope,
            stuck.first_three(|a, c| format!("{} ({})", c.pod.key(), age_text(a)))
        )
    };
    let mut r = stuck.report(
        policy,
        summary,
        ("pods", d.pods),
        ["stuck_pods", "oldest_stuck"],
    );
    for (s, a, c) in &stuck.pods {
        let key = c.pod.key();
        let mut text = format!(
            "{key} on {}: scheduled {} ago, {}",
            c.pod.node_shown(),
            age_text(*a),
            c.rule.describe()
        );
        if c.scheduled_at.is_none() {
            text.push_str(" (no scheduling time recorded)");
        }
        let mut f = Finding::new(*s, text)
            .signal(c.rule.signal())
            .subject(c.pod.subject());
        if let Some(e) = d.events.get(&key) {
            f = f.detail(e.describe(now, 400));
        }
        r = r.finding(f.next(next_step(&c.pod)));
    }
    if let Some(f) = stuck.more_line("stuck after scheduling") {
        r = r.finding(f.next(format!(
            "list them all: {}",
            plugin::next::cmd(&[
                "kubectl",
                "get",
                "pods",
                "-A",
                "--field-selector",
                "status.phase=Pending",
                "-o",
                "wide"
            ])
        )));
    }
    for n in &d.notes {
        r = r.note(n.clone());
    }
    r
}

/// The next step for a pod the kubelet never started: what the kubelet says about it, where its
/// volume operations stand on its node, and deleting it so that its controller makes it again.
fn next_step(pod: &PodRef) -> String {
    use plugin::next::cmd;
    let node = pod.node_shown();
    let field = format!("involvedObject.name={}", pod.name);
    format!(
        "see why: {}, {}; on {node}, a volume operation stuck in the kubelet's queue (a stale mount) holds every pod there: check_kubelet_nested_ops and check_stale_csi_mounts name it (their runbooks unwedge it); then {} so that its controller makes it again",
        cmd(&["kubectl", "describe", "pod", "-n", &pod.namespace, &pod.name]),
        cmd(&["kubectl", "get", "events", "-n", &pod.namespace, "--field-selector", &field]),
        cmd(&["kubectl", "delete", "pod", "-n", &pod.namespace, &pod.name])
    )
}

/// Is this event a volume failure (FailedMount/FailedAttachVolume)?
pub fn is_volume_failure(e: &kube::Event) -> bool {
    e.reason == "FailedMount" || e.reason == "FailedAttachVolume"
}

/// The latest FailedMount/FailedAttachVolume event among `events`.
pub fn latest_volume_event(events: &[kube::Event]) -> Option<LastEvent> {
    LastEvent::latest(events, is_volume_failure)
}
