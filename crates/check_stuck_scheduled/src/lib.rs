//! check_stuck_scheduled: pods scheduled to a node that never got a single container running,
//! the visible sign of a kubelet whose volume work is wedged (the incidents: README's table).
//!
//! A pod is stuck when it is `Pending`, `PodScheduled=True`, and either
//! - **no-status**: it has no container and no init-container status at all (the kubelet never
//!   synced it), or
//! - **creating**: every container and init container still waits in `ContainerCreating` or
//!   `PodInitializing` (newer kubelets publish those statuses at once);
//!
//! for longer than the thresholds (`-w 5m -c 10m`), measured from the PodScheduled transition.

use clap::Parser;
use kube::{Pod, PodScopeArgs, Time};
use plugin::{
    fmt_duration, Check, CommonArgs, Ctx, Finding, Perfdata, Range, Report, Status, Thresholds,
    Unknown, Uom,
};
use std::collections::HashMap;
use std::time::Duration;

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
    pub scope: PodScopeArgs,

    /// `--host-root`: in a container the default node name is $NODE_NAME or the host's
    /// /etc/hostname, not the pod's.
    #[command(flatten)]
    pub host: node::HostRootArg,

    /// Do not look up FailedMount/FailedAttachVolume events for stuck pods
    #[arg(long)]
    pub no_events: bool,
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

/// What decides, from the options: how long a pod may stay stuck.
#[derive(Debug, Clone)]
pub struct Policy {
    pub warning: Range,
    pub critical: Range,
}

impl Policy {
    fn thresholds(&self) -> Thresholds {
        Thresholds::new(Some(self.warning.clone()), Some(self.critical.clone()))
    }

    /// The state of a candidate at `now` (OK: not stuck for long enough yet).
    pub fn judge(&self, c: &Candidate, now: Time) -> Status {
        let age = c.scheduled_at.map(|t| (now - t).max(0)).unwrap_or(0);
        self.thresholds().evaluate(age as f64)
    }
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, policy: &Policy, now: Time) -> Report {
    let th = policy.thresholds();
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
                plugin::args::duration_range_quiet(&policy.warning)
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
    kube::events::latest(events, |e| {
        e.reason == "FailedMount" || e.reason == "FailedAttachVolume"
    })
    .map(|e| (e.reason.clone(), e.message.clone(), e.last_seen()))
}

impl Opts {
    pub fn policy(&self) -> Policy {
        Policy {
            warning: self.warning.clone(),
            critical: self.critical.clone(),
        }
    }

    /// All I/O: pods (API or file) and, for stuck pods, their events.
    pub fn gather(&self, ctx: &Ctx, now: Time) -> Result<Data, Unknown> {
        let mut d = Data::default();
        let mut take = |p: Pod| {
            d.pods += 1;
            if let Some(c) = classify(&p) {
                d.candidates.push(c);
            }
        };
        // No pod on the node: prove the node exists rather than answer OK on nothing.
        let scan = self
            .scope
            .scan(|| self.host.host().hostname(), ctx, &mut take)?;
        d.scope = scan.filter.describe();
        d.notes.extend(scan.note);
        if !self.no_events {
            let stuck = self.stuck_keys(&d, now);
            let ev = kube::events::latest_per_pod(
                scan.client.as_ref(),
                &stuck,
                "stuck",
                ctx,
                latest_volume_event,
            );
            d.events = ev.found;
            d.notes.extend(ev.notes);
        }
        if let Some(c) = &scan.client {
            for line in c.requests() {
                ctx.debug(line);
            }
        }
        Ok(d)
    }

    /// `(namespace, name)` of the candidates old enough to alert.
    fn stuck_keys(&self, d: &Data, now: Time) -> Vec<(String, String)> {
        let policy = self.policy();
        d.candidates
            .iter()
            .filter(|c| policy.judge(c, now) != Status::Ok)
            .map(|c| (c.namespace.clone(), c.name.clone()))
            .collect()
    }
}

impl Check for Opts {
    const NAME: &'static str = "STUCK_SCHEDULED";
    const BINARY: &'static str = "check_stuck_scheduled";
    fn common(&self) -> &CommonArgs {
        &self.common
    }
    fn reads_stdin(&self) -> bool {
        self.scope.pods.reads_stdin()
    }
    fn run(&self, ctx: &Ctx) -> Result<Report, Unknown> {
        let now = kube::time::now();
        let d = self.gather(ctx, now)?;
        Ok(evaluate(&d, &self.policy(), now))
    }
}

#[cfg(test)]
mod tests;
