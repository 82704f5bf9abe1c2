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
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.crit
                .as_ref()
                .map(|r| r.to_string())
                .unwrap_or_default(),
            self.min.map(fmt_num).unwrap_or_default(),
            self.max.map(fmt_num).unwrap_or_default(),
        ];
        while fields.len() > 1 && fields.last().is_some_and(|f| f.is_empty()) {
            fields.pop();
        }
        fields.join(";")
    }
}

/// One thing a check found: a line of long output (plus optional detail lines under it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub status: Status,
    pub text: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<String>,
}

impl Finding {
    pub fn new(status: Status, text: impl Into<String>) -> Self {
        Finding {
            status,
            text: text.into(),
            details: Vec::new(),
        }
    }
    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.details.push(d.into());
        self
    }
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
}

impl Report {
    pub fn new(status: Status, summary: impl Into<String>) -> Self {
        Report {
            status,
            summary: summary.into(),
            findings: Vec::new(),
            perfdata: Vec::new(),
            notes: Vec::new(),
        }
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

    /// Findings worst first, stable within a status.
    pub fn sort_findings(&mut self) {
        self.findings
            .sort_by_key(|f| std::cmp::Reverse(f.status.rank()));
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
        assert_eq!(r.worst_finding(), Status::Critical);
    }
}
