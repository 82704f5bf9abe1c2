//! What the two stuck-pod checks share: pods in one state for too long (scheduled but never
//! started; terminating past their grace period), judged by their age in that state against
//! `-w`/`-c`, each alerting pod explained by its latest telling event. The checks differ only in
//! which pods count and how the age is measured ([`StuckPod`]), and in the words of their output.

use crate::args::PodScopeArgs;
use crate::time::Time;
use crate::types::{Event, Pod};
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
        Alerting {
            pods: v,
            more: Dropped::default(),
        }
    }
}

/// The pods past the thresholds (from [`AgePolicy::alerting`]).
#[derive(Debug)]
pub struct Alerting<'a, P> {
    /// (state, age in seconds, pod): worst first, then oldest.
    pub pods: Vec<(Status, i64, &'a P)>,
    /// Alerting pods counted but not kept (past [`KEPT_MAX`]).
    pub more: Dropped,
}

/// The alerting pods a scan counted but did not keep (it keeps the [`KEPT_MAX`] worst): their
/// exact number, worst state and longest time in the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dropped {
    pub count: usize,
    pub worst: Status,
    pub oldest: i64,
}

impl Default for Dropped {
    fn default() -> Self {
        Dropped {
            count: 0,
            worst: Status::Ok,
            oldest: 0,
        }
    }
}

impl Dropped {
    fn add(&mut self, status: Status, age: i64) {
        self.count += 1;
        self.worst = self.worst.worst(status);
        self.oldest = self.oldest.max(age);
    }
}

/// At most this many alerting pods are kept per run (the worst, then the oldest): memory stays
/// bounded whatever the number of pods (10^6 stuck pods in a `--pods-json` file or from a
/// paging API server), and the rest are counted exactly ("and 12 345 more pods").
pub const KEPT_MAX: usize = 1000;

/// `n` with its thousands grouped by a space ("12 345"), as the long output says counts.
pub fn grouped(n: usize) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

impl<P> Alerting<'_, P> {
    /// How many alert: those kept and those only counted.
    pub fn count(&self) -> usize {
        self.pods.len() + self.more.count
    }

    /// The worst state (OK when none alerts).
    pub fn status(&self) -> Status {
        self.pods
            .iter()
            .fold(self.more.worst, |acc, a| acc.worst(a.0))
    }

    /// The longest time in the state among them (0 when none).
    pub fn oldest(&self) -> i64 {
        self.pods
            .iter()
            .map(|a| a.1)
            .max()
            .unwrap_or(0)
            .max(self.more.oldest)
    }

    /// The first three as `show` says them, ", …" when there are more.
    pub fn first_three(&self, show: impl Fn(i64, &P) -> String) -> String {
        let shown: Vec<String> = self.pods.iter().take(3).map(|a| show(a.1, a.2)).collect();
        let more = if self.count() > 3 { ", …" } else { "" };
        format!("{}{more}", shown.join(", "))
    }

    /// The long-output line for the alerting pods not kept, if any: "and 12 345 more pods
    /// {what} (…)".
    pub fn more_line(&self, what: &str) -> Option<plugin::Finding> {
        (self.more.count > 0).then(|| {
            plugin::Finding::new(
                self.more.worst,
                format!(
                    "and {} more pods {what} (not listed: the {KEPT_MAX} worst are kept; the longest of them {})",
                    grouped(self.more.count),
                    age_text(self.more.oldest)
                ),
            )
            .signal("more_pods")
        })
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
            .perf(Perfdata::new(alerting, self.count() as f64).min(0.0))
            .perf(
                Perfdata::new(oldest, self.oldest() as f64)
                    .uom(Uom::Seconds)
                    .thresholds(&policy.thresholds())
                    .min(0.0),
            )
    }
}

/// The `cap` worst items seen (by state, then age), in a heap: pushing one more returns the
/// least bad of them, which the caller counts instead of keeping.
struct Worst<P> {
    cap: usize,
    seq: u64,
    heap: std::collections::BinaryHeap<Ranked<P>>,
}

/// An item ranked for [`Worst`]: the heap's top is the least bad (lowest state, then youngest,
/// then the last seen).
struct Ranked<P>(u8, i64, u64, Status, P);

impl<P> PartialEq for Ranked<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1, self.2) == (o.0, o.1, o.2)
    }
}
impl<P> Eq for Ranked<P> {}
impl<P> PartialOrd for Ranked<P> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for Ranked<P> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        // Reversed: the max-heap's top is the least bad.
        (o.0, o.1, std::cmp::Reverse(o.2)).cmp(&(self.0, self.1, std::cmp::Reverse(self.2)))
    }
}

impl<P> Worst<P> {
    fn new(cap: usize) -> Self {
        Worst {
            cap,
            seq: 0,
            heap: std::collections::BinaryHeap::new(),
        }
    }

    /// Keep `p` if it is among the `cap` worst; returns what is dropped (it, or the least bad).
    fn push(&mut self, st: Status, age: i64, p: P) -> Option<(Status, i64, P)> {
        self.seq += 1;
        self.heap.push(Ranked(st.rank(), age, self.seq, st, p));
        if self.heap.len() > self.cap {
            return self.heap.pop().map(|r| (r.3, r.1, r.4));
        }
        None
    }

    /// The kept items in the order they came.
    fn into_sorted(self) -> Vec<P> {
        let mut v: Vec<Ranked<P>> = self.heap.into_vec();
        v.sort_by_key(|r| r.2);
        v.into_iter().map(|r| r.4).collect()
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
        super::events::latest(events, keep).map(|e| LastEvent {
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
    /// Pods in the watched state: from a scan, at most [`KEPT_MAX`] past the thresholds (the
    /// worst, then the oldest) and [`KEPT_MAX`] not yet past them; the others are counted in
    /// `young` and `more`.
    pub found: Vec<P>,
    /// Pods in the watched state not yet past the thresholds, counted, not kept (past the
    /// [`KEPT_MAX`] kept in `found`).
    pub young: usize,
    /// Pods past the thresholds counted but not kept.
    pub more: Dropped,
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
            young: 0,
            more: Dropped::default(),
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

/// `-w`'s and `-c`'s defaults of the stuck-pod checks.
const WARNING_DEFAULT: &str = "5m";
const CRITICAL_DEFAULT: &str = "10m";

/// The options of a stuck-pod check: `-w`/`-c` on the time in the state, which pods (`--node`,
/// `--all-nodes`, `--namespace`, the API options, `--pods-json`), `--no-events`. A check words
/// the help of `-w`, `-c` and `--no-events` for its own state with `#[command(mut_arg(…))]`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("warning", |a| a.help("Warn when a pod has been in the state longer than this (duration range)").value_name("DURATION").default_value(WARNING_DEFAULT).value_parser(plugin::args::duration_range)),
    mut_arg("critical", |a| a.help("Critical when a pod has been in the state longer than this (duration range)").value_name("DURATION").default_value(CRITICAL_DEFAULT).value_parser(plugin::args::duration_range))
)]
pub struct StuckArgs {
    #[command(flatten)]
    pub thresholds: plugin::args::RangeArgs,

    #[command(flatten)]
    pub scope: PodScopeArgs,

    /// Do not look up the events that explain the pods alerted on
    #[arg(long)]
    pub no_events: bool,
}

impl StuckArgs {
    /// The age policy of `-w/-c` (each has its default: the fallbacks only serve arguments
    /// built by hand, not parsed).
    pub fn policy(&self) -> AgePolicy {
        let or = |r: &Option<Range>, d: &str| {
            r.clone()
                .unwrap_or_else(|| Range::parse_duration(d).expect("a valid default"))
        };
        AgePolicy::new(
            &or(&self.thresholds.warning, WARNING_DEFAULT),
            &or(&self.thresholds.critical, CRITICAL_DEFAULT),
        )
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
        let policy = self.policy();
        let mut kept = Worst::new(KEPT_MAX);
        let mut young = Vec::new();
        let read = self.scope.scan(host_name, ctx, |p: Pod| {
            s.pods += 1;
            let Some(c) = classify(&p) else { return };
            let (st, age) = (policy.judge(&c, now), c.age(now));
            if st == Status::Ok {
                if young.len() < KEPT_MAX {
                    young.push(c);
                } else {
                    s.young += 1;
                }
            } else if let Some((st, age, _)) = kept.push(st, age, c) {
                s.more.add(st, age);
            }
        })?;
        s.found = kept.into_sorted();
        let alerting = s.found.len();
        s.found.extend(young);
        s.scope = read.filter.describe();
        s.notes.extend(read.note);
        if !self.no_events {
            let alerting: Vec<(String, String)> = s.found[..alerting]
                .iter()
                .map(|p| (p.pod().namespace.clone(), p.pod().name.clone()))
                .collect();
            let ev = super::events::latest_per_pod(
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
    fn finding_3_only_the_worst_are_kept_the_rest_counted() {
        let mut w = Worst::new(2);
        let mut more = Dropped::default();
        for (st, age, name) in [
            (Status::Warning, 400, "w400"),
            (Status::Critical, 700, "c700"),
            (Status::Warning, 500, "w500"),
            (Status::Critical, 650, "c650"),
            (Status::Warning, 900, "w900"),
        ] {
            if let Some((st, age, _)) = w.push(st, age, name) {
                more.add(st, age);
            }
        }
        assert_eq!(w.into_sorted(), ["c700", "c650"]);
        assert_eq!(
            more,
            Dropped {
                count: 3,
                worst: Status::Warning,
                oldest: 900
            }
        );
        assert_eq!(grouped(12345), "12 345");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000000), "1 000 000");
        // The counted ones are in the state, the count and the oldest.
        let pods = [p("a", 0)];
        let mut a = policy().alerting(&pods, 1000);
        a.more = more;
        assert_eq!(
            (a.count(), a.status(), a.oldest()),
            (4, Status::Critical, 1000)
        );
        let line = a.more_line("stuck").unwrap();
        assert!(
            line.text.starts_with("and 3 more pods stuck (not listed"),
            "{}",
            line.text
        );
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
