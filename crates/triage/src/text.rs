//! What `triage` prints: for people (text: a status line, then each chain root cause first as a
//! tree, its next step, the findings that stand alone, and every check that did not answer) and
//! for tooling (`--format json`: the same, as one object).

use crate::answer::{Answer, Finding};
use crate::chain::Chain;
use plugin::Status;
use serde_json::{json, Value};

/// Everything one triage found.
pub struct Triage {
    pub answers: Vec<Answer>,
    pub findings: Vec<Finding>,
    pub chains: Vec<Chain>,
    pub alone: Vec<usize>,
}

impl Triage {
    /// The worst state of it all: every finding, and every check that answered (a check whose
    /// storage system is not installed here does not count).
    pub fn status(&self) -> Status {
        let f = self
            .findings
            .iter()
            .fold(Status::Ok, |s, f| s.worst(f.status));
        self.answers
            .iter()
            .filter(|a| !a.not_applicable)
            .fold(f, |s, a| s.worst(a.status))
    }

    fn not_answered(&self) -> Vec<&Answer> {
        self.answers
            .iter()
            .filter(|a| a.status == Status::Unknown && !a.not_applicable)
            .collect()
    }

    /// The first line: the state, how many chains and lone findings, which checks could not
    /// tell.
    pub fn status_line(&self) -> String {
        let mut parts = vec![format!(
            "{} {}, {} alone",
            self.chains.len(),
            if self.chains.len() == 1 {
                "chain"
            } else {
                "chains"
            },
            count(self.alone.len(), "finding", "findings"),
        )];
        parts.push(format!(
            "{} ran",
            count(self.answers.len(), "check", "checks")
        ));
        let unknown: Vec<&str> = self
            .not_answered()
            .iter()
            .map(|a| a.check.as_str())
            .collect();
        if !unknown.is_empty() {
            parts.push(format!("UNKNOWN: {}", unknown.join(", ")));
        }
        let na: Vec<&str> = self
            .answers
            .iter()
            .filter(|a| a.not_applicable)
            .map(|a| a.check.as_str())
            .collect();
        if !na.is_empty() {
            parts.push(format!("not installed here: {}", na.join(", ")));
        }
        format!("TRIAGE {} - {}", self.status(), parts.join("; "))
    }

    /// The text for a person.
    pub fn text(&self, verbose: bool) -> String {
        let mut s = format!("{}\n", self.status_line());
        for (n, c) in self.chains.iter().enumerate() {
            s.push_str(&format!(
                "\nchain {} ({}): {}\n",
                n + 1,
                c.status,
                c.headline(&self.findings)
            ));
            let mut shown = Vec::new();
            for &r in &c.roots {
                self.tree(c, r, 1, &mut shown, &mut s);
            }
            if let Some(next) = c.next(&self.findings) {
                s.push_str(&format!("  next: {next}\n"));
            }
        }
        if !self.alone.is_empty() {
            s.push_str("\nalone (no finding of another check explains them):\n");
            for &i in &self.alone {
                let f = &self.findings[i];
                s.push_str(&format!("  [{}] {}: {}\n", f.status, f.check, f.text));
                if let Some(next) = &f.next {
                    s.push_str(&format!("    next: {next}\n"));
                }
            }
        }
        let quiet: Vec<&Answer> = self.not_answered();
        if !quiet.is_empty() {
            s.push_str("\nchecks that could not tell (their part is not in the chains above):\n");
            for a in quiet {
                s.push_str(&format!("  [UNKNOWN] {}: {}\n", a.check, a.summary));
            }
        }
        if verbose {
            s.push_str("\nchecks:\n");
            for a in &self.answers {
                let state = if a.not_applicable {
                    "not installed here".to_string()
                } else {
                    a.status.to_string()
                };
                s.push_str(&format!("  {} {state}: {}\n", a.check, a.summary));
            }
        }
        s
    }

    fn tree(&self, c: &Chain, i: usize, depth: usize, shown: &mut Vec<usize>, s: &mut String) {
        let f = &self.findings[i];
        let pad = "  ".repeat(depth);
        let via = match c.parent(i, &self.findings) {
            Some(l) if depth > 1 => format!(" (same {} {})", l.key, l.value),
            _ => String::new(),
        };
        if shown.contains(&i) {
            return;
        }
        shown.push(i);
        let arrow = if depth > 1 { "→ " } else { "" };
        s.push_str(&format!(
            "{pad}{arrow}[{}] {} {}: {}{via}\n",
            f.status, f.check, f.signal, f.text
        ));
        let mut kids: Vec<usize> = c
            .links
            .iter()
            .filter(|l| l.cause == i)
            .map(|l| l.effect)
            .filter(|&e| c.parent(e, &self.findings).is_some_and(|p| p.cause == i))
            .collect();
        kids.sort_unstable();
        kids.dedup();
        for k in kids {
            self.tree(c, k, depth + 1, shown, s);
        }
    }

    /// The same as one JSON object.
    pub fn json(&self) -> Value {
        let finding = |i: usize| -> Value {
            let mut v = serde_json::to_value(&self.findings[i]).unwrap_or(Value::Null);
            v["id"] = json!(i);
            v
        };
        json!({
            "status": self.status(),
            "summary": self.status_line(),
            "chains": self.chains.iter().map(|c| json!({
                "status": c.status,
                "headline": c.headline(&self.findings),
                "roots": c.roots,
                "findings": c.members.iter().map(|&i| {
                    let mut v = finding(i);
                    v["caused_by"] = json!(c.links.iter().filter(|l| l.effect == i).map(|l| json!({
                        "id": l.cause, "key": l.key, "value": l.value
                    })).collect::<Vec<_>>());
                    v
                }).collect::<Vec<_>>(),
                "next": c.next(&self.findings),
            })).collect::<Vec<_>>(),
            "alone": self.alone.iter().map(|&i| finding(i)).collect::<Vec<_>>(),
            "checks": self.answers,
        })
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
