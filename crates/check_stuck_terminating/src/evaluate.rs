//! What is wedged and what to do about it: a terminating pod's facts, the teardown failures its
//! events and mounts show, the decision. Pure.

use kube::checks::stuck::{age_text, AgePolicy, LastEvent, PodRef, Scan, StuckPod};
use kube::{Pod, Time};
use plugin::{Finding, Report, Status};
use regex_lite::Regex;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Grace period when a pod says none (the API's default).
pub const DEFAULT_GRACE: i64 = 30;

/// What `evaluate` needs of one terminating pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Terminating {
    pub pod: PodRef,
    pub uid: String,
    /// `metadata.deletionTimestamp`: request time + grace period.
    pub deletion: Time,
    /// `deletionGracePeriodSeconds`, else `spec.terminationGracePeriodSeconds`, else 30.
    pub grace: i64,
    pub finalizers: Vec<String>,
    /// Scheduled but no container ever started (check_stuck_scheduled leaves such a pod to this
    /// check).
    pub never_started: bool,
}

impl Terminating {
    /// Seconds past the moment the pod should have been gone (0 while inside its grace period).
    pub fn overdue(&self, now: Time) -> i64 {
        (now - self.deletion).max(0)
    }
    /// Seconds since the delete request.
    pub fn since_delete(&self, now: Time) -> i64 {
        (now - (self.deletion - self.grace)).max(0)
    }
}

impl StuckPod for Terminating {
    fn pod(&self) -> &PodRef {
        &self.pod
    }
    /// Overdue: past the moment the pod should have been gone.
    fn age(&self, now: Time) -> i64 {
        self.overdue(now)
    }
}

/// The latest teardown failure of a pod, from its events.
pub type Teardown = LastEvent;

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct Data {
    /// Pods in scope, those with a deletionTimestamp, the latest teardown failure of each wedged
    /// one.
    pub scan: Scan<Terminating>,
    /// Pod UID → its volume mounts still on this node (deepest first: subPaths before their
    /// volume), from the mount table: what to unmount, whatever the events say or forgot.
    pub mounts: HashMap<String, Vec<String>>,
    /// The PVs' earlier stuck spells and this run's (with `--state-dir`).
    pub memory: Option<node::history::Remembered>,
}

/// The PV of a CSI pod volume mount path (`…/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`,
/// or a path below it). Pure.
pub fn csi_pv_of(path: &str) -> Option<&str> {
    let (_, rest) = path.split_once("/volumes/kubernetes.io~csi/")?;
    let pv = rest.split('/').next()?;
    (!pv.is_empty()).then_some(pv)
}

/// The PVs of a wedged pod as far as they are known: its CSI volume mounts still on this node,
/// else the one of the mount path its teardown failure names; none otherwise. Pure.
pub fn pod_pvs<'a>(d: &'a Data, t: &Terminating) -> Vec<&'a str> {
    let mut v: Vec<&str> = d
        .mounts
        .get(&t.uid)
        .into_iter()
        .flatten()
        .filter_map(|p| csi_pv_of(p))
        .collect();
    if v.is_empty() {
        if let Some(e) = d.scan.events.get(&t.pod.key()) {
            let uid = t.uid.as_str();
            if let Some(m) = mount_path_re()
                .captures_iter(&e.message)
                .find(|c| uid.is_empty() || c[2].eq_ignore_ascii_case(uid))
                .and_then(|c| c.get(1))
            {
                v.extend(csi_pv_of(m.as_str()));
            }
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// The PVs of the pods wedged this run (past the thresholds), as far as known. Pure.
pub fn stuck_pvs(d: &Data, policy: &Policy, now: Time) -> Vec<String> {
    let mut out: Vec<String> = d
        .scan
        .found
        .iter()
        .filter(|t| policy.judge(*t, now) != Status::Ok)
        .flat_map(|t| pod_pvs(d, t))
        .map(str::to_string)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// `Some` when the pod is terminating (whatever for how long).
pub fn classify(p: &Pod) -> Option<Terminating> {
    let deletion = p.metadata.deletion_timestamp?;
    let grace = p
        .metadata
        .deletion_grace_period_seconds
        .or(p.spec.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE)
        .max(0);
    Some(Terminating {
        pod: PodRef::of(p),
        uid: p.metadata.uid.clone(),
        deletion,
        grace,
        finalizers: p.metadata.finalizers.clone(),
        never_started: p.never_started(),
    })
}

/// What decides, from the options: how long past its grace period a pod may stay.
pub type Policy = AgePolicy;

fn mount_path_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r#"(/[^\s"'\[\]:]*/pods/([0-9A-Fa-f-]{8,})/volumes/kubernetes\.io~csi/[^/\s"'\[\]:]+/mount)"#,
        )
        .expect("static regex")
    })
}

/// The pod volume mount path a teardown failure names (`…/pods/<uid>/volumes/kubernetes.io~csi/
/// <pv>/mount`), if it names one of this pod (`uid`, when known).
pub fn failed_mount_path(message: &str, uid: &str) -> Option<String> {
    mount_path_re()
        .captures_iter(message)
        .find(|c| uid.is_empty() || c[2].eq_ignore_ascii_case(uid))
        .map(|c| c[1].to_string())
}

/// Is this event a teardown failure?
pub fn is_teardown_failure(e: &kube::Event) -> bool {
    e.reason == "FailedKillPod"
        || e.reason == "FailedUnmount"
        || e.message.contains("UnmountVolume.TearDown failed")
}

/// The latest teardown failure among `events`.
pub fn latest_teardown(events: &[kube::Event]) -> Option<Teardown> {
    LastEvent::latest(events, is_teardown_failure)
}

/// Decide. Pure: `now` is Unix seconds.
pub fn evaluate(d: &Data, policy: &Policy, now: Time) -> Report {
    let scan = &d.scan;
    let mut wedged = policy.alerting(&scan.found, now);
    wedged.more = scan.more;
    let n_term = scan.found.len() + scan.young + scan.more.count;
    let summary = if wedged.count() == 0 {
        let mut s = format!(
            "no pod wedged in Terminating ({} {}",
            plugin::count(scan.pods, "pod", "pods"),
            scan.scope
        );
        if n_term > 0 {
            s.push_str(&format!(
                ", {n_term} terminating {} past their grace period",
                plugin::args::duration_range_quiet(&policy.warning)
            ));
        }
        s.push(')');
        s
    } else {
        format!(
            "{} {} wedged: {}",
            plugin::count_of(
                wedged.count(),
                n_term,
                "terminating pod",
                "terminating pods"
            ),
            scan.scope,
            wedged.first_three(|_, t| format!(
                "{} (deleted {} ago)",
                t.pod.key(),
                age_text(t.since_delete(now))
            ))
        )
    };
    let mut r = wedged.report(
        policy,
        summary,
        ("terminating_pods", n_term),
        ["wedged_pods", "oldest_wedged"],
    );
    let finding = |s: Status, t: &Terminating| -> Finding {
        let node = t.pod.node_shown();
        let mut text = format!(
            "{} on {node}: deleted {} ago, {} past its {} grace period",
            t.pod.key(),
            age_text(t.since_delete(now)),
            age_text(t.overdue(now)),
            age_text(t.grace)
        );
        if t.never_started {
            text.push_str(", never started (no container ever ran: its volumes never mounted?)");
        }
        if t.finalizers.is_empty() {
            text.push_str(", no finalizers");
        } else {
            text.push_str(&format!(", finalizers: {}", t.finalizers.join(", ")));
        }
        // A volume whose pods keep wedging is a known-bad one (--state-dir).
        if let Some(m) = d.memory.as_ref().filter(|_| s != Status::Ok) {
            for pv in pod_pvs(d, t) {
                if let Some(h) = m.text(pv, node::history::Kind::Stuck) {
                    text.push_str(&format!("; its volume {pv}: {h}"));
                }
            }
        }
        let mut f = Finding::new(s, text)
            .signal(if s == Status::Ok {
                "terminating"
            } else {
                "stuck_terminating"
            })
            .subject(t.pod.subject());
        let mounted = d
            .mounts
            .get(&t.uid)
            .filter(|m| !m.is_empty() && s != Status::Ok);
        if let Some(mps) = mounted {
            let mut words = vec!["sudo", "umount"];
            words.extend(mps.iter().map(String::as_str));
            f = f.next(format!(
                "on {node}: its volumes are still mounted; run {} (the kubelet then finishes the \
                 teardown; a teardown wedged on a read-only filesystem needs nothing else)",
                plugin::next::cmd(&words)
            ));
        } else if s != Status::Ok {
            let (ns, name) = (t.pod.namespace.as_str(), t.pod.name.as_str());
            f = f.next(format!(
                "see what holds it: {}{}",
                plugin::next::cmd(&["kubectl", "describe", "pod", "-n", ns, name]),
                if t.finalizers.is_empty() {
                    format!(
                        "; on {node}, the kubelet's view of its teardown: {}",
                        plugin::next::kubelet_journal(&t.uid)
                    )
                } else {
                    format!(
                        "; its finalizers are for their controllers to remove: {}",
                        plugin::next::cmd(&[
                            "kubectl",
                            "get",
                            "pod",
                            "-n",
                            ns,
                            name,
                            "-o",
                            "jsonpath={.metadata.finalizers}"
                        ])
                    )
                }
            ));
        }
        if let Some(e) = scan.events.get(&t.pod.key()) {
            f = f.detail(e.describe(now, 700));
            if let Some(path) = failed_mount_path(&e.message, &t.uid).filter(|_| mounted.is_none())
            {
                f.subject = f.subject.mount(path.to_string());
                f = f.next(format!(
                    "on {node}: run {}: unmounting the pod's volume mount is the single recovery \
                     step the runbook needs for a teardown wedged on a read-only filesystem (the \
                     global mount teardown and iSCSI logout then finish on their own)",
                    plugin::next::cmd(&["sudo", "umount", &path])
                ));
            }
        }
        f
    };
    for (s, _, t) in &wedged.pods {
        r = r.finding(finding(*s, t));
    }
    if let Some(f) = wedged.more_line("wedged in Terminating") {
        r = r.finding(f.next(format!(
            "list them all: {}",
            plugin::next::cmd(&["kubectl", "get", "pods", "-A", "-o", "wide"])
        )));
    }
    // Terminating pods inside the thresholds: shown at -v.
    for t in scan
        .found
        .iter()
        .filter(|t| policy.judge(*t, now) == Status::Ok)
    {
        r = r.finding(finding(Status::Ok, t));
    }
    for n in &scan.notes {
        r = r.note(n.clone());
    }
    for n in d.memory.iter().flat_map(|m| &m.notes) {
        r = r.note(n.clone());
    }
    r
}

/// The volume mounts of the pods `uids` (pure): PV and subPath mounts, not the kubelet's own
/// tmpfs (secrets, projected tokens); deepest first, so the list unmounts in order.
pub fn pod_mounts(
    mounts: &[node::Mount],
    roots: &[std::path::PathBuf],
    uids: &std::collections::BTreeSet<&str>,
) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for m in mounts {
        if matches!(m.fstype.as_str(), "tmpfs" | "ramfs") {
            continue;
        }
        let Some(kp) = node::kubelet::classify(&m.mount_point, roots) else {
            continue;
        };
        let Some(uid) = kp.pod_uid().filter(|u| uids.contains(u)) else {
            continue;
        };
        let v = out.entry(uid.to_string()).or_default();
        let p = m.mount_point.to_string_lossy().into_owned();
        if !v.contains(&p) {
            v.push(p);
        }
    }
    for v in out.values_mut() {
        v.sort_by(|a, b| {
            b.matches('/')
                .count()
                .cmp(&a.matches('/').count())
                .then(a.cmp(b))
        });
    }
    out
}
