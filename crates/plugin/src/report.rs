//! What a check decides: findings, perfdata and a summary. Pure data; rendering is in `render`.

use crate::range::{fmt_num, Range};
use crate::Status;
use serde::Serialize;

/// Units of measure allowed by the guidelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Uom {
    #[serde(rename = "")]
    None,
    #[serde(rename = "s")]
    Seconds,
    #[serde(rename = "ms")]
    Millis,
    #[serde(rename = "us")]
    Micros,
    #[serde(rename = "%")]
    Percent,
    #[serde(rename = "B")]
    Bytes,
    #[serde(rename = "c")]
    Counter,
}

impl Uom {
    pub fn as_str(self) -> &'static str {
        match self {
            Uom::None => "",
            Uom::Seconds => "s",
            Uom::Millis => "ms",
            Uom::Micros => "us",
            Uom::Percent => "%",
            Uom::Bytes => "B",
            Uom::Counter => "c",
        }
    }
}

/// One perfdata value: `'label'=value[UOM];warn;crit;min;max`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Perfdata {
    pub label: String,
    pub value: f64,
    pub uom: Uom,
    #[serde(serialize_with = "ser_range")]
    pub warn: Option<Range>,
    #[serde(serialize_with = "ser_range")]
    pub crit: Option<Range>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

fn ser_range<S: serde::Serializer>(r: &Option<Range>, s: S) -> Result<S::Ok, S::Error> {
    match r {
        Some(r) => s.serialize_str(&r.to_string()),
        None => s.serialize_none(),
    }
}

impl Perfdata {
    pub fn new(label: impl Into<String>, value: f64) -> Self {
        Perfdata {
            label: label.into(),
            value,
            uom: Uom::None,
            warn: None,
            crit: None,
            min: None,
            max: None,
        }
    }
    /// A value that could not be measured this run: rendered `U`, as the guidelines say, so the
    /// label stays in the perfdata (NaN in JSON as null, in Prometheus as NaN).
    pub fn unknown(label: impl Into<String>) -> Self {
        Perfdata::new(label, f64::NAN)
    }
    pub fn uom(mut self, uom: Uom) -> Self {
        self.uom = uom;
        self
    }
    pub fn warn(mut self, r: Option<&Range>) -> Self {
        self.warn = r.cloned();
        self
    }
    pub fn crit(mut self, r: Option<&Range>) -> Self {
        self.crit = r.cloned();
        self
    }
    pub fn thresholds(self, t: &crate::Thresholds) -> Self {
        self.warn(t.warning.as_ref()).crit(t.critical.as_ref())
    }
    pub fn min(mut self, v: f64) -> Self {
        self.min = Some(v);
        self
    }
    pub fn max(mut self, v: f64) -> Self {
        self.max = Some(v);
        self
    }

    /// The label made safe: lowercase snake_case, no `=`, `'` or spaces.
    pub fn safe_label(&self) -> String {
        let mut out = String::with_capacity(self.label.len());
        for c in self.label.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('_') {
                out.push('_');
            }
        }
        let out = out.trim_matches('_').to_string();
        if out.is_empty() {
            "value".into()
        } else {
            out
        }
    }

    /// Render as the guidelines say; trailing empty fields are dropped.
    pub fn render(&self) -> String {
        let label = self.safe_label();
        let mut fields = vec![
            if self.value.is_nan() {
                format!("{label}=U")
            } else {
                format!("{}={}{}", label, fmt_num(self.value), self.uom.as_str())
            },
            self.warn
                .as_ref()
                .map(std::string::ToString::to_string)
                .unwrap_or_default(),
            self.crit
                .as_ref()
                .map(std::string::ToString::to_string)
                .unwrap_or_default(),
            self.min.map(fmt_num).unwrap_or_default(),
            self.max.map(fmt_num).unwrap_or_default(),
        ];
        while fields.len() > 1 && fields.last().is_some_and(std::string::String::is_empty) {
            fields.pop();
        }
        fields.join(";")
    }
}

/// What a finding is about: the node, workload and storage objects it names. Every field is
/// optional; a check fills in whichever apply. The field names are stable and the same across
/// checks: they are the JSON `subject` keys and the Prometheus label names of
/// `k8s_storage_check_finding` (see [`Subject::fields`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Subject {
    /// Kubernetes node name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// PersistentVolumeClaim name (in `namespace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc: Option<String>,
    /// PersistentVolume name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pv: Option<String>,
    /// CSI driver (or in-tree plugin) name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// Block device or filesystem source, e.g. `sdc`, `dm-3`, `loop7`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Mount point path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mount: Option<String>,
    /// iSCSI target name (IQN).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iqn: Option<String>,
    /// iSCSI session, e.g. `session3`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Kubernetes API server (as given: URL or host:port), for checks about the API itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

macro_rules! subject_setters {
    ($($field:ident),*) => {
        $(
            #[doc = concat!("Set `", stringify!($field), "` (an empty value leaves it unset).")]
            pub fn $field(mut self, v: impl Into<String>) -> Self {
                let v = v.into();
                self.$field = if v.is_empty() { None } else { Some(v) };
                self
            }
        )*
    };
}

impl Subject {
    pub fn new() -> Self {
        Subject::default()
    }

    subject_setters!(node, namespace, pod, pvc, pv, driver, device, mount, iqn, session, server);

    /// Set a field from an `Option` (None leaves it unset): `.maybe(Subject::pv, vol.pv.as_deref())`.
    pub fn maybe<V: Into<String>>(self, set: fn(Self, String) -> Self, v: Option<V>) -> Self {
        match v {
            Some(v) => set(self, v.into()),
            None => self,
        }
    }

    /// The set fields as (name, value), in the documented order.
    pub fn fields(&self) -> Vec<(&'static str, &str)> {
        [
            ("node", &self.node),
            ("namespace", &self.namespace),
            ("pod", &self.pod),
            ("pvc", &self.pvc),
            ("pv", &self.pv),
            ("driver", &self.driver),
            ("device", &self.device),
            ("mount", &self.mount),
            ("iqn", &self.iqn),
            ("session", &self.session),
            ("server", &self.server),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
        .collect()
    }

    /// True when no field is set.
    pub fn is_empty(&self) -> bool {
        self.fields().is_empty()
    }
}

/// The names of every [`Subject`] field, in order: the documented, stable set.
pub const SUBJECT_FIELDS: [&str; 11] = [
    "node",
    "namespace",
    "pod",
    "pvc",
    "pv",
    "driver",
    "device",
    "mount",
    "iqn",
    "session",
    "server",
];

/// One thing a check found: a line of long output (plus optional detail lines under it), the
/// machine-readable kind of what fired (`signal`), what it is about (`subject`), the evidence
/// behind it (shown from `-v`), the next step (`next:`, for a non-OK finding) and its runbook.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub status: Status,
    /// Stable snake_case kind, e.g. `emergency_ro`, `stale_mount`, `crashloop`.
    pub signal: &'static str,
    pub subject: Subject,
    pub text: String,
    pub details: Vec<String>,
    /// What the finding rests on (records read, values compared): shown from `-v`, always in JSON.
    pub evidence: Vec<String>,
    /// The step to take, commands between backticks (see [`crate::next`]); rendered as the
    /// finding's last line, `next: <this> — runbook: <runbook>`.
    pub next: Option<String>,
    /// The runbook's page: `docs/runbooks/<signal>.md` unless set otherwise.
    pub runbook: String,
}

/// What the `next:` line of a non-OK finding says when its check gave it no step of its own:
/// only the runbook. Every check gives each non-OK finding an explicit step (issue 26), so
/// printing this is a bug: [`Finding::lacks_step`] and [`Report::findings_without_step`] find
/// it in a report, [`shows_missing_step`] in any printed answer (text, JSON, Prometheus), and
/// the tests fail on it (crates/plugin's own and the end-to-end harness, on every check's
/// answer).
pub const NO_STEP: &str = "see the runbook";

/// True when a printed answer (any format) holds a `next:` line without a step of its own:
/// [`NO_STEP`] followed by the runbook.
pub fn shows_missing_step(output: &str) -> bool {
    output.contains(&format!("{NO_STEP} — runbook: "))
}

/// Where a signal's runbook is: `docs/runbooks/<signal>.md`.
pub fn runbook_of(signal: &str) -> String {
    format!("docs/runbooks/{signal}.md")
}

impl Finding {
    pub fn new(status: Status, text: impl Into<String>) -> Self {
        Finding {
            status,
            signal: "",
            subject: Subject::default(),
            text: text.into(),
            details: Vec::new(),
            evidence: Vec::new(),
            next: None,
            runbook: String::new(),
        }
    }
    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.details.push(d.into());
        self
    }
    /// A line of evidence (what was read, what it was compared with), shown from `-v`.
    pub fn evidence(mut self, e: impl Into<String>) -> Self {
        self.evidence.push(e.into());
        self
    }
    /// The machine-readable kind of this finding: lowercase snake_case, stable across releases.
    /// Sets the runbook to `docs/runbooks/<signal>.md` unless one was set with [`Self::runbook`].
    pub fn signal(mut self, s: &'static str) -> Self {
        debug_assert!(is_snake_case(s), "signal {s:?} is not snake_case");
        // The signal's own page, unless a runbook was set on purpose.
        if self.runbook.is_empty() || self.runbook == runbook_of(self.signal) {
            self.runbook = runbook_of(s);
        }
        self.signal = s;
        self
    }
    pub fn subject(mut self, s: Subject) -> Self {
        self.subject = s;
        self
    }
    /// The next step: prose with commands between backticks ([`crate::next::cmd`]); the
    /// `next:` line adds the runbook.
    pub fn next(mut self, step: impl Into<String>) -> Self {
        let step = step.into();
        debug_assert!(
            crate::next::commands(&step)
                .iter()
                .all(|c| crate::next::is_pasteable(c)),
            "a command of this step is not pasteable as printed: {step:?}"
        );
        debug_assert!(
            step.matches('`').count() % 2 == 0,
            "unpaired backtick: {step:?}"
        );
        self.next = Some(step);
        self
    }
    /// A runbook other than the signal's own page.
    pub fn runbook(mut self, r: impl Into<String>) -> Self {
        self.runbook = r.into();
        self
    }
    /// True for a non-OK finding without a step of its own: a bug of its check (its `next:`
    /// line would only say [`NO_STEP`], or be missing without a runbook).
    pub fn lacks_step(&self) -> bool {
        self.status != Status::Ok && self.next.is_none()
    }
    /// The `next:` line's content as every format prints it: the step, then the runbook. A
    /// non-OK finding with a signal but no step (a bug: see [`NO_STEP`]) still names its
    /// runbook; a finding with neither signal nor runbook has no line.
    pub fn next_line(&self) -> Option<String> {
        if self.runbook.is_empty() {
            return self.next.clone();
        }
        match (&self.next, self.status) {
            (Some(n), _) => Some(format!("{n} — runbook: {}", self.runbook)),
            (None, Status::Ok) => None,
            (None, _) => Some(format!("{NO_STEP} — runbook: {}", self.runbook)),
        }
    }
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("status", &self.status)?;
        m.serialize_entry("signal", self.signal)?;
        m.serialize_entry("subject", &self.subject)?;
        m.serialize_entry("text", &self.text)?;
        if !self.details.is_empty() {
            m.serialize_entry("details", &self.details)?;
        }
        if !self.evidence.is_empty() {
            m.serialize_entry("evidence", &self.evidence)?;
        }
        if let Some(n) = self.next_line() {
            m.serialize_entry("next", &n)?;
        }
        if !self.runbook.is_empty() {
            m.serialize_entry("runbook", &self.runbook)?;
        }
        m.end()
    }
}

impl Finding {
    /// What a finding is sorted by within its status: its subject (namespace/pvc, pv, device …
    /// in the documented order), else its text.
    pub fn sort_name(&self) -> String {
        let f = self.subject.fields();
        if f.is_empty() {
            self.text.clone()
        } else {
            let mut s = f.iter().map(|(_, v)| *v).collect::<Vec<_>>().join("/");
            s.push(' ');
            s.push_str(&self.text);
            s
        }
    }
}

/// Worst first, then by name in natural order.
pub fn cmp_findings(a: &Finding, b: &Finding) -> std::cmp::Ordering {
    b.status
        .rank()
        .cmp(&a.status.rank())
        .then_with(|| natural_cmp(&a.sort_name(), &b.sort_name()))
}

/// Compare strings with runs of ASCII digits compared as numbers (`pvc-9` < `pvc-10`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let si = i;
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            let na = std::str::from_utf8(&a[si..i])
                .unwrap_or("")
                .trim_start_matches('0');
            let nb = std::str::from_utf8(&b[sj..j])
                .unwrap_or("")
                .trim_start_matches('0');
            let o = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if o != Ordering::Equal {
                return o;
            }
        } else {
            let o = a[i].cmp(&b[j]);
            if o != Ordering::Equal {
                return o;
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

/// A count with its noun in the right number: `count(1, "PV filesystem", "PV filesystems")` is
/// "1 PV filesystem", `count(2, …)` "2 PV filesystems". The one place output counts nouns.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// "k of n nouns", the noun agreeing with `n`: "1 of 1 PV filesystem", "2 of 14 PV filesystems".
pub fn count_of(k: usize, n: usize, one: &str, many: &str) -> String {
    format!("{k} of {}", count(n, one, many))
}

/// `[a-z][a-z0-9_]*` without a trailing `_`: what a signal may be.
pub fn is_snake_case(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_lowercase())
        && !s.ends_with('_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The complete result of one check run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub status: Status,
    pub summary: String,
    pub findings: Vec<Finding>,
    pub perfdata: Vec<Perfdata>,
    /// Notes for the operator (shown in long output after the findings; e.g. "API cross-checks skipped").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What one finding is, singular and plural (`volume`/`volumes`): a long output cut by
    /// `--max-output` says how many of them it hides ("... and 70 more volumes").
    #[serde(skip)]
    pub unit: Option<(&'static str, &'static str)>,
}

impl Report {
    pub fn new(status: Status, summary: impl Into<String>) -> Self {
        Report {
            status,
            summary: summary.into(),
            findings: Vec::new(),
            perfdata: Vec::new(),
            notes: Vec::new(),
            unit: None,
        }
    }

    /// Name what one finding is (singular, plural), e.g. `.unit("volume", "volumes")`.
    pub fn unit(mut self, one: &'static str, many: &'static str) -> Self {
        self.unit = Some((one, many));
        self
    }

    /// An UNKNOWN report with a message and no perfdata.
    pub fn unknown(summary: impl Into<String>) -> Self {
        Report::new(Status::Unknown, summary)
    }

    pub fn finding(mut self, f: Finding) -> Self {
        self.findings.push(f);
        self
    }
    pub fn perf(mut self, p: Perfdata) -> Self {
        self.perfdata.push(p);
        self
    }
    pub fn note(mut self, n: impl Into<String>) -> Self {
        self.notes.push(n.into());
        self
    }

    /// The non-OK findings without a step of their own ([`Finding::lacks_step`]): none in the
    /// answer of any check (the tests fail on one).
    pub fn findings_without_step(&self) -> Vec<&Finding> {
        self.findings.iter().filter(|f| f.lacks_step()).collect()
    }

    /// Raise the status to at least `s`.
    pub fn raise(&mut self, s: Status) {
        self.status = self.status.worst(s);
    }

    /// The worst status among the findings (OK when there are none).
    pub fn worst_finding(&self) -> Status {
        self.findings
            .iter()
            .fold(Status::Ok, |acc, f| acc.worst(f.status))
    }

    /// Findings worst first, then by name ([`Finding::sort_name`], numbers in names compared as
    /// numbers: `pvc-9` before `pvc-10`).
    pub fn sort_findings(&mut self) {
        // The same order as `sort_by(cmp_findings)`, with each finding's name made once instead
        // of twice per comparison (thousands of findings on a large node).
        let mut keyed: Vec<(String, Finding)> = std::mem::take(&mut self.findings)
            .into_iter()
            .map(|f| (f.sort_name(), f))
            .collect();
        keyed.sort_by(|(ka, a), (kb, b)| {
            b.status
                .rank()
                .cmp(&a.status.rank())
                .then_with(|| natural_cmp(ka, kb))
        });
        self.findings = keyed.into_iter().map(|(_, f)| f).collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfdata_full_form() {
        let p = Perfdata::new("ro_volumes", 2.0)
            .warn(Some(&Range::parse("0").unwrap()))
            .crit(Some(&Range::parse("0").unwrap()))
            .min(0.0);
        assert_eq!(p.render(), "ro_volumes=2;0;0;0");
    }

    #[test]
    fn perfdata_drops_trailing_empty_fields_only() {
        assert_eq!(Perfdata::new("pv_mounts", 14.0).render(), "pv_mounts=14");
        let p = Perfdata::new("pv_mounts", 14.0).min(0.0);
        assert_eq!(p.render(), "pv_mounts=14;;;0");
    }

    #[test]
    fn perfdata_uom_and_decimals() {
        let p = Perfdata::new("watch_cache_lag", 0.25).uom(Uom::Seconds);
        assert_eq!(p.render(), "watch_cache_lag=0.25s");
        assert_eq!(Perfdata::new("x", 5.0).uom(Uom::Percent).render(), "x=5%");
    }

    #[test]
    fn perfdata_label_is_sanitised() {
        let p = Perfdata::new("Bad 'label'=x|y", 1.0);
        assert_eq!(p.render(), "bad_label_x_y=1");
        assert_eq!(Perfdata::new("'=|", 1.0).render(), "value=1");
    }

    #[test]
    fn findings_sort_worst_first() {
        let mut r = Report::new(Status::Critical, "s")
            .finding(Finding::new(Status::Ok, "a"))
            .finding(Finding::new(Status::Warning, "b"))
            .finding(Finding::new(Status::Critical, "c"))
            .finding(Finding::new(Status::Unknown, "d"));
        r.sort_findings();
        let order: Vec<_> = r.findings.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(order, ["c", "b", "d", "a"]);
        // Then by name: the subject, numbers as numbers; else the text.
        let mut r = Report::new(Status::Critical, "s")
            .finding(Finding::new(Status::Warning, "zz"))
            .finding(
                Finding::new(Status::Critical, "x")
                    .subject(Subject::new().namespace("media").pvc("data-10")),
            )
            .finding(
                Finding::new(Status::Critical, "y")
                    .subject(Subject::new().namespace("media").pvc("data-9")),
            )
            .finding(Finding::new(Status::Warning, "aa"))
            .finding(
                Finding::new(Status::Critical, "z")
                    .subject(Subject::new().namespace("apps").pvc("x")),
            );
        r.sort_findings();
        let order: Vec<_> = r.findings.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(order, ["z", "y", "x", "aa", "zz"]);
        assert_eq!(natural_cmp("pvc-9", "pvc-10"), std::cmp::Ordering::Less);
        assert_eq!(natural_cmp("sdb", "sdab"), std::cmp::Ordering::Greater);
        assert_eq!(natural_cmp("a007", "a7"), std::cmp::Ordering::Equal);
        assert_eq!(r.worst_finding(), Status::Critical);
    }

    #[test]
    fn subject_builder_sets_named_fields_only() {
        let s = Subject::new()
            .namespace("media")
            .pvc("radarr-config")
            .pv("")
            .maybe(Subject::node, Some("n1"))
            .maybe(Subject::device, None::<&str>);
        assert_eq!(
            s.fields(),
            [
                ("node", "n1"),
                ("namespace", "media"),
                ("pvc", "radarr-config")
            ]
        );
        assert!(Subject::new().is_empty());
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"node": "n1", "namespace": "media", "pvc": "radarr-config"})
        );
    }

    #[test]
    fn every_subject_field_is_documented_in_order() {
        let s = Subject::new()
            .node("a")
            .namespace("a")
            .pod("a")
            .pvc("a")
            .pv("a")
            .driver("a")
            .device("a")
            .mount("a")
            .iqn("a")
            .session("a")
            .server("a");
        let names: Vec<_> = s.fields().into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, SUBJECT_FIELDS);
        let v = serde_json::to_value(&s).unwrap();
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        let mut want: Vec<_> = SUBJECT_FIELDS
            .iter()
            .map(std::string::ToString::to_string)
            .collect();
        want.sort();
        let mut keys = keys;
        keys.sort();
        assert_eq!(keys, want);
    }

    #[test]
    fn finding_json_carries_signal_and_subject() {
        let f = Finding::new(Status::Critical, "pvc-a read-only")
            .signal("emergency_ro")
            .subject(Subject::new().pv("pvc-a"));
        let v = serde_json::to_value(&f).unwrap();
        assert_eq!(v["signal"], "emergency_ro");
        assert_eq!(v["subject"], serde_json::json!({"pv": "pvc-a"}));
        assert_eq!(v["status"], "CRITICAL");
    }

    #[test]
    fn snake_case_rule() {
        for ok in ["emergency_ro", "stale_mount", "a1", "crashloop"] {
            assert!(is_snake_case(ok), "{ok}");
        }
        for bad in ["", "Emergency", "a-b", "_a", "a_", "1a", "a b"] {
            assert!(!is_snake_case(bad), "{bad}");
        }
    }
}
