//! The checks' answers as `--format json` prints them, read back: each check's status and
//! summary, and its findings with their signal, subject and next step.

use plugin::Status;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One check's answer (or why there is none).
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub check: String,
    pub status: Status,
    pub summary: String,
    /// The check's storage system is not installed here: listed, and not counted in the status.
    pub not_applicable: bool,
    #[serde(skip)]
    pub findings: Vec<Finding>,
}

/// One finding of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub check: String,
    pub status: Status,
    pub signal: String,
    pub subject: BTreeMap<String, String>,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runbook: Option<String>,
}

impl Finding {
    /// The value of a subject key; `pod` is namespace/name.
    pub fn key(&self, key: &str) -> Option<String> {
        match key {
            "pod" => {
                let pod = self.subject.get("pod")?;
                Some(match self.subject.get("namespace") {
                    Some(ns) => format!("{ns}/{pod}"),
                    None => pod.clone(),
                })
            }
            k => self.subject.get(k).cloned(),
        }
    }

    /// What the finding is about, in a few words: the iSCSI session, the device, the claim, the
    /// pod or the PV, whichever says most at its layer.
    pub fn label(&self) -> String {
        let order: &[&str] =
            match crate::rules::layer(&self.signal).map(|l| crate::rules::LAYERS[l].name) {
                Some("iSCSI session") => &["session", "device", "pv"],
                Some("block device" | "filesystem" | "remount") => &["device", "pv", "pvc"],
                Some("pod") => &["pod", "pv"],
                Some("kubelet") => &["pv", "pod"],
                _ => &["pvc", "pod", "pv", "device", "node", "server"],
            };
        for k in order {
            let v = match *k {
                "pvc" => self
                    .subject
                    .get("pvc")
                    .map(|c| match self.subject.get("namespace") {
                        Some(ns) => format!("PVC {ns}/{c}"),
                        None => format!("PVC {c}"),
                    }),
                "pod" => self.key("pod").map(|p| format!("pod {p}")),
                k => self.subject.get(k).cloned(),
            };
            if let Some(v) = v {
                return format!("{} {v}", self.signal);
            }
        }
        self.signal.clone()
    }
}

/// A PV named by a mount path of the kubelet (`…/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount`).
pub fn pv_of_mount(mount: &str) -> Option<&str> {
    let rest = mount.split("/volumes/kubernetes.io~csi/").nth(1)?;
    let pv = rest.split('/').next()?;
    (!pv.is_empty()).then_some(pv)
}

/// Read one check's `--format json` document.
pub fn parse(doc: &Value) -> Result<Answer, String> {
    let check = doc["check"]
        .as_str()
        .or_else(|| doc["name"].as_str())
        .ok_or("no \"check\" in the document")?
        .to_string();
    let status = doc["status"]
        .as_str()
        .and_then(Status::parse)
        .ok_or_else(|| format!("{check}: no valid \"status\""))?;
    let summary = doc["summary"].as_str().unwrap_or("").to_string();
    let mut findings = Vec::new();
    for f in doc["findings"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let Some(fs) = f["status"].as_str().and_then(Status::parse) else {
            return Err(format!("{check}: a finding without a valid \"status\""));
        };
        let mut subject = BTreeMap::new();
        if let Some(o) = f["subject"].as_object() {
            for (k, v) in o {
                if let Some(v) = v.as_str() {
                    subject.insert(k.clone(), v.to_string());
                }
            }
        }
        // A pod's mount path names its PV: the join to what failed under it.
        if !subject.contains_key("pv") {
            if let Some(pv) = subject.get("mount").and_then(|m| pv_of_mount(m)) {
                subject.insert("pv".into(), pv.to_string());
            }
        }
        findings.push(Finding {
            check: check.clone(),
            status: fs,
            signal: f["signal"].as_str().unwrap_or("").to_string(),
            subject,
            text: f["text"].as_str().unwrap_or("").to_string(),
            next: f["next"].as_str().map(str::to_string),
            runbook: f["runbook"].as_str().map(str::to_string),
        });
    }
    let not_applicable = status == Status::Unknown && summary.contains(" is not installed");
    Ok(Answer {
        check,
        status,
        summary,
        not_applicable,
        findings,
    })
}

/// Every check answer in a text: the lines that are JSON documents of a check (`--format json`
/// prints one line); other lines (a transcript's headers and commands) are skipped.
pub fn parse_all(text: &str) -> Result<Vec<Answer>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let v: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: not JSON: {e}", n + 1))?;
        if v.get("findings").is_none() && v.get("status").is_none() {
            continue;
        }
        out.push(parse(&v).map_err(|e| format!("line {}: {e}", n + 1))?);
    }
    Ok(out)
}
