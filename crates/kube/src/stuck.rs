//! What the two stuck-pod checks share: pods in one state for too long (scheduled but never
//! started; terminating past their grace period), judged by their age in that state against
//! `-w`/`-c`, each alerting pod explained by its latest telling event. The checks differ only in
//! which pods count and how the age is measured ([`StuckPod`]), and in the words of their output.

use crate::{Event, Pod, PodScopeArgs, Time};
use plugin::{fmt_duration, Ctx, Perfdata, Range, Report, Status, Thresholds, Unknown, Uom};
use std::collections::HashMap;
use std::time::Duration;

/// Which pod, where: what every finding of a stuck-pod check names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName` ("" when unknown).
    pub node: String,
}

impl PodRef {
    pub fn of(p: &Pod) -> PodRef {
        PodRef {
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone(),
            node: p.spec.node_name.clone().unwrap_or_default(),
        }
    }

    /// `namespace/name`, the key of [`Scan::events`].
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The node for texts: "?" when unknown.
    pub fn node_shown(&self) -> &str {
        match self.node.as_str() {
            "" => "?",
            n => n,
        }
    }

    /// The finding's subject: node, namespace, pod.
    pub fn subject(&self) -> plugin::Subject {
        plugin::Subject::new()
            .node(self.node.as_str())
            .namespace(self.namespace.as_str())
            .pod(self.name.as_str())
    }
}

/// A pod in the state a check watches.
pub trait StuckPod {
    fn pod(&self) -> &PodRef;
    /// Seconds in the watched state at `now` (never negative: clock skew is age 0).
    fn age(&self, now: Time) -> i64;
}

/// A duration in seconds as the findings say it ("11m"); negative is 0.
pub fn age_text(secs: i64) -> String {
    fmt_duration(Duration::from_secs(secs.max(0) as u64))
}

/// What decides, from the options: how long a pod may stay in the watched state.
#[derive(Debug, Clone)]
pub struct AgePolicy {
    pub warning: Range,
    pub critical: Range,
}

impl AgePolicy {
    pub fn new(warning: &Range, critical: &Range) -> Self {
        AgePolicy {
            warning: warning.clone(),
            critical: critical.clone(),
        }
    }

    pub fn thresholds(&self) -> Thresholds {
        Thresholds::new(Some(self.warning.clone()), Some(self.critical.clone()))
    }

    /// The state of a pod at `now` (OK: not in the state for long enough yet).
    pub fn judge(&self, p: &impl StuckPod, now: Time) -> Status {
        self.thresholds().evaluate(p.age(now) as f64)
    }

    /// The pods past the thresholds at `now`: worst first, then the longest in the state.
    pub fn alerting<'a, P: StuckPod>(&self, pods: &'a [P], now: Time) -> Alerting<'a, P> {
        let th = self.thresholds();
        let mut v: Vec<(Status, i64, &P)> = pods
            .iter()
            .map(|p| (th.evaluate(p.age(now) as f64), p.age(now), p))
            .filter(|a| a.0 != Status::Ok)
            .collect();
        v.sort_by(|a, b| b.0.rank().cmp(&a.0.rank()).then(b.1.cmp(&a.1)));
        Alerting { pods: v }
    }
}

/// The pods past the thresholds (from [`AgePolicy::alerting`]).
#[derive(Debug)]
pub struct Alerting<'a, P> {
    /// (state, age in seconds, pod): worst first, then oldest.
    pub pods: Vec<(Status, i64, &'a P)>,
}

impl<P> Alerting<'_, P> {
    /// The worst state (OK when none alerts).
    pub fn status(&self) -> Status {
        self.pods.iter().fold(Status::Ok, |acc, a| acc.worst(a.0))
    }

    /// The longest time in the state among them (0 when none).
    pub fn oldest(&self) -> i64 {
        self.pods.iter().map(|a| a.1).max().unwrap_or(0)
    }

    /// The first three as `show` says them, ", …" when there are more.
    pub fn first_three(&self, show: impl Fn(i64, &P) -> String) -> String {
        let shown: Vec<String> = self.pods.iter().take(3).map(|a| show(a.1, a.2)).collect();
        let more = if self.pods.len() > 3 { ", …" } else { "" };
        format!("{}{more}", shown.join(", "))
    }

    /// The report: its state, `summary`, and the perfdata `in_scope` (label, count), the number
    /// alerting (`alerting` label) and the oldest of them in seconds (`oldest` label, with the
    /// thresholds of `policy`).
    pub fn report(
        &self,
        policy: &AgePolicy,
        summary: String,
        in_scope: (&str, usize),
        [alerting, oldest]: [&str; 2],
    ) -> Report {
        Report::new(self.status(), summary)
            .unit("pod", "pods")
            .perf(Perfdata::new(in_scope.0, in_scope.1 as f64).min(0.0))
            .perf(Perfdata::new(alerting, self.pods.len() as f64).min(0.0))
            .perf(
                Perfdata::new(oldest, self.oldest() as f64)
                    .uom(Uom::Seconds)
                    .thresholds(&policy.thresholds())
                    .min(0.0),
            )
    }
}

/// The latest event of the kind that explains a pod (a FailedMount, a failed teardown).
#[derive(Debug, Clone, PartialEq)]
pub struct LastEvent {
    pub reason: String,
    pub message: String,
    pub when: Option<Time>,
}

impl LastEvent {
    /// The newest event among `events` that `keep` accepts.
    pub fn latest(events: &[Event], keep: impl Fn(&Event) -> bool) -> Option<LastEvent> {
        crate::events::latest(events, keep).map(|e| LastEvent {
            reason: e.reason.clone(),
            message: e.message.clone(),
            when: e.last_seen(),
        })
    }

    /// "last FailedMount (1m ago): <message, at most `max` characters>".
    pub fn describe(&self, now: Time, max: usize) -> String {
        let ago = self
            .when
            .map(|t| format!(" ({} ago)", age_text(now - t)))
            .unwrap_or_default();
        format!(
            "last {}{ago}: {}",
            self.reason,
            plugin::render::truncate(&self.message, max)
        )
    }
}

/// Everything a stuck-pod check gathers from the API (or `--pods-json`).
#[derive(Debug, Clone)]
pub struct Scan<P> {
    /// Pods in scope.
    pub pods: usize,
    /// Pods in the watched state (any age).
    pub found: Vec<P>,
    /// The explaining event per `namespace/name` of the pods past the thresholds.
    pub events: HashMap<String, LastEvent>,
    /// What was read, e.g. "on node k8s03" (for the summary).
    pub scope: String,
    /// Notes for the long output (event lookups skipped or failed).
    pub notes: Vec<String>,
}

impl<P> Default for Scan<P> {
    fn default() -> Self {
        Scan {
            pods: 0,
            found: Vec::new(),
            events: HashMap::new(),
            scope: String::new(),
            notes: Vec::new(),
        }
    }
}

/// Which events explain an alerting pod: `which` names the pods in notes ("stuck", "wedged"),
/// `keep` accepts the telling events.
#[derive(Clone, Copy)]
pub struct Explain {
    pub which: &'static str,
    pub keep: fn(&Event) -> bool,
}

/// The options of a stuck-pod check: `-w`/`-c` on the time in the state, which pods (`--node`,
/// `--all-nodes`, `--namespace`, the API options, `--pods-json`), `--no-events`. A check words
/// the help of `-w`, `-c` and `--no-events` for its own state with `#[command(mut_arg(…))]`.
#[derive(Debug, Clone, clap::Args)]
pub struct StuckArgs {
    /// Warn when a pod has been in the state longer than this (duration range)
    #[arg(short = 'w', long = "warning", value_name = "DURATION", default_value = "5m", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub warning: Range,

    /// Critical when a pod has been in the state longer than this (duration range)
    #[arg(short = 'c', long = "critical", value_name = "DURATION", default_value = "10m", value_parser = plugin::args::duration_range, allow_hyphen_values = true)]
    pub critical: Range,

    #[command(flatten)]
    pub scope: PodScopeArgs,

    /// Do not look up the events that explain the pods alerted on
    #[arg(long)]
    pub no_events: bool,
}

impl StuckArgs {
    pub fn policy(&self) -> AgePolicy {
        AgePolicy::new(&self.warning, &self.critical)
    }

    /// `--pods-json -`: the check reads stdin.
    pub fn reads_stdin(&self) -> bool {
        self.scope.pods.reads_stdin()
    }

    /// All API I/O of a stuck-pod check: the pods in scope (never an empty success on a node
    /// name that is no node; `host_name` is the default node name), those `classify` keeps, and
    /// for the ones past the thresholds at `now` their latest event that `explain` keeps (none
    /// with `--no-events`). The client's request log goes to `-vv`.
    pub fn scan<P: StuckPod>(
        &self,
        host_name: impl FnOnce() -> Option<String>,
        ctx: &Ctx,
        classify: impl Fn(&Pod) -> Option<P>,
        now: Time,
        explain: Explain,
    ) -> Result<Scan<P>, Unknown> {
        let mut s = Scan::default();
        let read = self.scope.scan(host_name, ctx, |p: Pod| {
            s.pods += 1;
            s.found.extend(classify(&p));
        })?;
        s.scope = read.filter.describe();
        s.notes.extend(read.note);
        if !self.no_events {
            let policy = self.policy();
            let alerting: Vec<(String, String)> = s
                .found
                .iter()
                .filter(|p| policy.judge(*p, now) != Status::Ok)
                .map(|p| (p.pod().namespace.clone(), p.pod().name.clone()))
                .collect();
            let ev = crate::events::latest_per_pod(
                read.client.as_ref(),
                &alerting,
                explain.which,
                ctx,
                |evs| LastEvent::latest(evs, explain.keep),
            );
            s.events = ev.found;
            s.notes.extend(ev.notes);
        }
        if let Some(c) = &read.client {
            for line in c.requests() {
                ctx.debug(line);
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct P(PodRef, i64);
    impl StuckPod for P {
        fn pod(&self) -> &PodRef {
            &self.0
        }
        fn age(&self, now: Time) -> i64 {
            (now - self.1).max(0)
        }
    }
    fn p(name: &str, since: i64) -> P {
        let pod = PodRef {
            namespace: "ns".into(),
            name: name.into(),
            node: String::new(),
        };
        P(pod, since)
    }

    fn policy() -> AgePolicy {
        let r = |s| plugin::args::duration_range(s).unwrap();
        AgePolicy::new(&r("5m"), &r("10m"))
    }

    #[test]
    fn alerting_pods_come_worst_first_then_oldest() {
        let pods = [
            p("young", 1000 - 60),
            p("warn", 1000 - 400),
            p("crit", 1000 - 700),
            p("older-warn", 1000 - 500),
            p("future", 2000),
        ];
        let a = policy().alerting(&pods, 1000);
        let order: Vec<(&str, Status, i64)> = a
            .pods
            .iter()
            .map(|x| (x.2 .0.name.as_str(), x.0, x.1))
            .collect();
        assert_eq!(
            order,
            [
                ("crit", Status::Critical, 700),
                ("older-warn", Status::Warning, 500),
                ("warn", Status::Warning, 400)
            ]
        );
        assert_eq!((a.status(), a.oldest()), (Status::Critical, 700));
        assert_eq!(
            a.first_three(|age, p| format!("{}={age}", p.0.name)),
            "crit=700, older-warn=500, warn=400"
        );
        let none = policy().alerting(&pods[..1], 1000);
        assert_eq!((none.status(), none.oldest()), (Status::Ok, 0));
        assert_eq!(pods[0].0.node_shown(), "?");
        assert_eq!(pods[0].0.key(), "ns/young");
    }

    #[test]
    fn more_than_three_are_cut_with_an_ellipsis() {
        let pods = [p("a", 0), p("b", 0), p("c", 0), p("d", 0)];
        let a = policy().alerting(&pods, 1000);
        assert_eq!(a.first_three(|_, p| p.0.name.clone()), "a, b, c, …");
    }

    #[test]
    fn last_event_says_its_age_and_a_bounded_message() {
        let e = LastEvent {
            reason: "FailedMount".into(),
            message: "MountVolume.MountDevice failed".into(),
            when: Some(1000),
        };
        assert_eq!(
            e.describe(1120, 400),
            "last FailedMount (2m ago): MountVolume.MountDevice failed"
        );
        // An event stamped after now (clock skew) is 0s old, not a huge age.
        assert!(e
            .describe(900, 400)
            .starts_with("last FailedMount (0s ago): "));
        let undated = LastEvent { when: None, ..e };
        assert_eq!(
            undated.describe(1120, 400),
            "last FailedMount: MountVolume.MountDevice failed"
        );
        let long = LastEvent {
            message: "x".repeat(1000),
            ..undated
        };
        assert!(long.describe(1120, 400).chars().count() < 450);
    }
}
