//! Alertmanager's own suppression, generated from the causal rules ([`crate::rules`]): one
//! `inhibit_rules` entry per rule and key, so that while the critical alert of a cause fires, the
//! alerts of what it can cause are held back (inhibited) on the same subject, and only the chain's
//! root pages. `deploy/prometheus/alertmanager-inhibit.yml` is [`inhibit_yaml`]'s output (a test
//! below fails when they differ), and the alerts' `chain` annotation of
//! `deploy/prometheus/k8s-storage-checks.rules.yml` is [`chain_annotation`]'s.
//!
//! How a key becomes labels (the finding alerts carry `check`, `state`, `signal` and the finding's
//! identity: `node`, `pv`, `device`, `session`, … as `k8s_storage_check_finding` has them):
//! - `pv`: the PV's name is the cluster's, so `equal: [pv]`, as `triage` joins it.
//! - `device`, `session`: a name of the node's own (`sdc` on two nodes is two disks), so the same
//!   scrape target too: `equal: [instance, job, device]`. The target, not `node`: the iSCSI and
//!   kubelet-log findings carry no `node`, and where others do it is `--node`'s spelling, which
//!   the host name of another check need not match; one node's checks share one target.
//! - `node`: the same scrape target, `equal: [instance, job]`.
//! - `pod`: `equal: [namespace, pod]`. A pod's own finding (stuck Terminating) has them as labels;
//!   a volume's finding has them only as names (its `k8s_storage_check_finding_info` series), so
//!   the rules file turns those into the `K8sStorageFindingPod` alert, a source here that never
//!   pages: the first rule holds it behind its own finding's alert.
//!
//! Alertmanager treats a missing label as equal to an empty one, so every source requires its key
//! labels non-empty (`pv =~ ".+"`): two findings without a PV are not the same PV. Only a critical
//! cause inhibits: a cause its check could not judge (UNKNOWN) or a warning never holds back a
//! critical page. Effects of every state are held (critical, warning, unknown).

use crate::rules::{Group, Key, LAYERS, POD_WAITING, RULES};

/// The alert of a critical finding: the only source of a chain's inhibition.
pub const SOURCE_ALERT: &str = "K8sStorageFindingCritical";
/// The alert that names the pod of a critical volume finding (from its info series): a source
/// for the pod's own alerts, held back itself by its finding's alert.
pub const POD_ALERT: &str = "K8sStorageFindingPod";
/// The finding alerts a chain's root holds back.
pub const TARGET_ALERTS: &str = "K8sStorageFinding(Critical|Warning|Unknown)";

/// The labels that say "the same node": the scrape target of the node's checks.
const SAME_NODE: [&str; 2] = ["instance", "job"];

/// One `inhibit_rules` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inhibit {
    /// What it is for, one line (the YAML comment above it).
    pub comment: String,
    /// `source_matchers`, in Alertmanager's syntax (`alertname = "…"`).
    pub source: Vec<String>,
    /// `target_matchers`.
    pub target: Vec<String>,
    /// `equal`.
    pub equal: Vec<String>,
}

fn any_of(signals: &[&str]) -> String {
    signals.join("|")
}

/// The signals of some groups, each once, in order.
fn signals_of(groups: &[Group]) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for g in groups {
        for s in g.signals {
            if !v.contains(s) {
                v.push(s);
            }
        }
    }
    v
}

/// The identity labels of a finding alert, which its `K8sStorageFindingPod` alert repeats: the
/// scrape target, check, state, signal and the subject's identity fields (not its names).
pub fn identity_labels() -> Vec<&'static str> {
    let mut v = SAME_NODE.to_vec();
    v.extend(["check", "state", "signal"]);
    v.extend(
        plugin::report::SUBJECT_FIELDS
            .iter()
            .filter(|f| !plugin::render::NAME_LABELS.contains(f)),
    );
    v
}

/// What a key means in a rule's comment.
fn key_words(k: Key) -> &'static str {
    match k {
        Key::Pv => "the same PV",
        Key::Pod => "the same pod",
        Key::Device => "the same device of the same node",
        Key::Session => "the same iSCSI session of the same node",
        Key::Node => "the same node",
    }
}

/// Every inhibit rule, in order: the `K8sStorageFindingPod` alert held behind its finding's,
/// then per causal rule (the table's order) one per key.
pub fn inhibit_rules() -> Vec<Inhibit> {
    let q = |s: &str| format!("\"{s}\"");
    let mut out = vec![Inhibit {
        comment: format!(
            "{POD_ALERT} (a critical volume finding's pod, for the rules below) never pages: its own finding's alert holds it"
        ),
        source: vec![format!("alertname = {}", q(SOURCE_ALERT))],
        target: vec![format!("alertname = {}", q(POD_ALERT))],
        equal: identity_labels().iter().map(|s| (*s).to_string()).collect(),
    }];
    for r in RULES {
        let effects: Vec<&str> = r.effect.iter().map(|g| g.name).collect();
        for &k in r.on {
            let mut source = vec![
                if k == Key::Pod {
                    format!("alertname =~ \"{SOURCE_ALERT}|{POD_ALERT}\"")
                } else {
                    format!("alertname = {}", q(SOURCE_ALERT))
                },
                format!("signal =~ {}", q(&any_of(r.cause.signals))),
            ];
            let keys: &[&str] = match k {
                Key::Pv => &["pv"],
                Key::Pod => &["namespace", "pod"],
                Key::Device => &["device"],
                Key::Session => &["session"],
                Key::Node => &[],
            };
            for l in keys {
                source.push(format!("{l} =~ \".+\""));
            }
            let mut equal: Vec<String> = Vec::new();
            if matches!(k, Key::Device | Key::Session | Key::Node) {
                equal.extend(SAME_NODE.iter().map(|s| (*s).to_string()));
            }
            equal.extend(keys.iter().map(|s| (*s).to_string()));
            out.push(Inhibit {
                comment: format!(
                    "{} → {}, on {}: {}",
                    r.cause.name,
                    effects.join(", "),
                    key_words(k),
                    r.why
                ),
                source,
                target: vec![
                    format!("alertname =~ {}", q(TARGET_ALERTS)),
                    format!("signal =~ {}", q(&any_of(&signals_of(r.effect)))),
                ],
                equal,
            });
        }
    }
    out
}

/// `deploy/prometheus/alertmanager-inhibit.yml`: the header, then `inhibit_rules:` with every rule.
pub fn inhibit_yaml() -> String {
    let mut s = String::from(HEADER);
    s.push_str("inhibit_rules:\n");
    for r in inhibit_rules() {
        s.push_str(&format!("  # {}\n", r.comment));
        s.push_str("  - source_matchers:\n");
        for m in &r.source {
            s.push_str(&format!("      - '{m}'\n"));
        }
        s.push_str("    target_matchers:\n");
        for m in &r.target {
            s.push_str(&format!("      - '{m}'\n"));
        }
        s.push_str(&format!("    equal: [{}]\n", r.equal.join(", ")));
    }
    s
}

const HEADER: &str = "\
# k8s-storage-checks: Alertmanager inhibit rules, one page per chain (docs/triage.md, \"Alertmanager:
# one page per chain\"). Add the items below to the top-level `inhibit_rules:` list of your
# Alertmanager configuration (create it if there is none; Debian's stock rule may stay), next to
# the route of alertmanager-route.yml. Needs the alerting rules of k8s-storage-checks.rules.yml
# (or prometheusrule.yaml), whose K8sStorageFindingPod alert the rules below read and hold back.
#
# Generated from the causal rules (crates/triage/src/rules.rs, the table of docs/triage.md) by
# crates/triage/src/alertmanager.rs; `cargo test -p triage` fails when this file differs. To
# rewrite it: K8S_STORAGE_CHECKS_WRITE_INHIBIT=1 cargo test -p triage alertmanager
#
# While the critical finding alert of a cause fires (an iSCSI session FREE), the finding alerts
# of what it can cause on the same subject (the device's kernel errors, the read-only PV, its
# stuck pod; critical, warning or unknown) are inhibited: they fire in Prometheus and show in
# Alertmanager as suppressed, and only the root cause notifies. When the root resolves, what
# still fires is notified at its group's next flush (up to group_interval later); what resolved
# meanwhile was never notified and stays silent.
#
# Subjects: `pv` and the pod (`namespace`, `pod`) are the cluster's names; a `device` or
# `session` is the node's own, so those also need the same scrape target (`instance`, `job`),
# as do the node-wide rules. Every source requires its key labels non-empty: Alertmanager takes
# a missing label as equal to an empty one. Only critical causes inhibit: an UNKNOWN or warning
# cause never holds back a critical page.
#
# Alertmanager decides at a group's flush: an effect that reaches it before its cause's alert
# fires (group_wait, 30s by default) is notified on its own. prometheus-operator users: put
# these in the Alertmanager's own configuration (kube-prometheus-stack: alertmanager.config),
# not an AlertmanagerConfig resource, which adds a matcher on its own namespace to every rule.
";

/// Groups, bottom up, each with every key that joins it.
pub type Joined = Vec<(Group, Vec<Key>)>;

/// The layers a signal can be caused by and can cause, from the rules: (cause group, keys) and
/// (effect group, keys), groups bottom up, each once with every key that joins it.
pub fn neighbours(signal: &str) -> (Joined, Joined) {
    fn add(v: &mut Joined, g: Group, keys: &[Key]) {
        let i = match v.iter().position(|(x, _)| x.name == g.name) {
            Some(i) => i,
            None => {
                v.push((g, Vec::new()));
                v.len() - 1
            }
        };
        for k in keys {
            if !v[i].1.contains(k) {
                v[i].1.push(*k);
            }
        }
    }
    let (mut causes, mut effects) = (Vec::new(), Vec::new());
    for r in RULES {
        if r.effect.iter().any(|g| g.signals.contains(&signal)) {
            add(&mut causes, r.cause, r.on);
        }
        if r.cause.signals.contains(&signal) {
            for g in r.effect {
                // The pods waiting are pods: one layer.
                let g = if g.name == POD_WAITING.name {
                    crate::rules::POD
                } else {
                    *g
                };
                add(&mut effects, g, r.on);
            }
        }
    }
    let order = |g: &Group| LAYERS.iter().position(|l| l.name == g.name);
    causes.sort_by_key(|(g, _)| order(g));
    effects.sort_by_key(|(g, _)| order(g));
    (causes, effects)
}

/// `a, b (pv), c (node)`: groups in order, the keys said once after a run of groups that
/// share them.
fn groups_text(v: &[(Group, Vec<Key>)]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for (i, (g, keys)) in v.iter().enumerate() {
        let last_of_run = v.get(i + 1).is_none_or(|(_, next)| next != keys);
        if last_of_run {
            let k: Vec<&str> = keys.iter().map(|k| k.name()).collect();
            parts.push(format!("{} ({})", g.name, k.join(", ")));
        } else {
            parts.push(g.name.to_string());
        }
    }
    parts.join(", ")
}

/// What the `chain` annotation says for a signal (empty when no rule knows it).
pub fn chain_text(signal: &str) -> String {
    let Some(layer) = crate::rules::layer(signal) else {
        return String::new();
    };
    let (causes, effects) = neighbours(signal);
    let mut s = format!("Layer: {}.", LAYERS[layer].name);
    if !causes.is_empty() {
        s.push_str(&format!(
            " Held back while a critical alert of what can cause it fires on the same subject: {}.",
            groups_text(&causes)
        ));
    }
    if !effects.is_empty() {
        s.push_str(&format!(
            " While it fires critical, it holds back the alerts of what it can cause: {}.",
            groups_text(&effects)
        ));
    }
    s
}

/// The `chain` annotation of the finding alerts: a Go template choosing [`chain_text`] by the
/// alert's `signal` (signals with the same text share a branch), then where the rules are.
pub fn chain_annotation() -> String {
    let mut branches: Vec<(String, Vec<&str>)> = Vec::new();
    let mut all: Vec<&str> = Vec::new();
    for g in LAYERS.iter().chain([&POD_WAITING]) {
        for s in g.signals {
            if !all.contains(s) {
                all.push(s);
            }
        }
    }
    for s in all {
        let t = chain_text(s);
        match branches.iter_mut().find(|(x, _)| *x == t) {
            Some((_, v)) => v.push(s),
            None => branches.push((t, vec![s])),
        }
    }
    let mut out = String::new();
    for (i, (text, signals)) in branches.iter().enumerate() {
        let quoted: Vec<String> = signals.iter().map(|s| format!("\"{s}\"")).collect();
        out.push_str(&format!(
            "{{{{ {}if eq $labels.signal {} }}}}{text}",
            if i == 0 { "" } else { "else " },
            quoted.join(" ")
        ));
    }
    out.push_str(
        "{{ else }}No causal rule knows this signal: it pages on its own.{{ end }} \
         The rules: docs/triage.md; the whole chain on the node: `k8s-storage-checks triage`.",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn shipped(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/prometheus")
            .join(name)
    }

    #[test]
    fn the_shipped_inhibit_rules_are_the_rendering_of_the_rules() {
        let p = shipped("alertmanager-inhibit.yml");
        let want = inhibit_yaml();
        if std::env::var_os("K8S_STORAGE_CHECKS_WRITE_INHIBIT").is_some() {
            std::fs::write(&p, &want).unwrap();
        }
        let have = std::fs::read_to_string(&p).unwrap_or_default();
        assert!(
            have == want,
            "{} is not alertmanager::inhibit_yaml(): rewrite it with \
             K8S_STORAGE_CHECKS_WRITE_INHIBIT=1 cargo test -p triage alertmanager",
            p.display()
        );
    }

    /// The `chain:` line of the finding alerts in the rules file (YAML, single-quoted).
    fn chain_line() -> String {
        format!(
            "          chain: '{}'",
            chain_annotation().replace('\'', "''")
        )
    }

    #[test]
    fn the_finding_alerts_chain_annotation_is_the_rendering_of_the_rules() {
        let p = shipped("k8s-storage-checks.rules.yml");
        let text = std::fs::read_to_string(&p).unwrap();
        let want = chain_line();
        let rewritten: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with("          chain: ") {
                    want.clone()
                } else {
                    l.to_string()
                }
            })
            .collect();
        let rewritten = rewritten.join("\n") + "\n";
        if std::env::var_os("K8S_STORAGE_CHECKS_WRITE_INHIBIT").is_some() {
            std::fs::write(&p, &rewritten).unwrap();
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // K8sStorageFindingCritical, Warning and Unknown.
        assert_eq!(
            text.lines().filter(|l| *l == want).count(),
            3,
            "{}: the finding alerts' chain annotation is not alertmanager::chain_annotation(): \
             rewrite it with K8S_STORAGE_CHECKS_WRITE_INHIBIT=1 cargo test -p triage alertmanager, \
             then deploy/prometheus/generate > deploy/prometheus/prometheusrule.yaml",
            p.display()
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("          chain: "))
                .count(),
            3
        );
    }

    #[test]
    fn every_rule_and_key_has_an_inhibit_rule_whose_sides_never_overlap() {
        let rules = inhibit_rules();
        let n: usize = RULES.iter().map(|r| r.on.len()).sum();
        assert_eq!(rules.len(), n + 1);
        for r in &rules[1..] {
            // Alertmanager never lets an alert that matches both sides inhibit another such:
            // the causes' signals are not the effects'.
            let sig = |m: &[String]| -> Vec<String> {
                let l = m.iter().find(|x| x.starts_with("signal =~ ")).unwrap();
                l["signal =~ \"".len()..l.len() - 1]
                    .split('|')
                    .map(String::from)
                    .collect()
            };
            let (c, e) = (sig(&r.source), sig(&r.target));
            assert!(c.iter().all(|s| !e.contains(s)), "{r:?}");
            // Every label compared is one the source must have (or the scrape target's).
            for l in &r.equal {
                assert!(
                    SAME_NODE.contains(&l.as_str()) || r.source.contains(&format!("{l} =~ \".+\"")),
                    "{l} may be missing on the source of {r:?}"
                );
            }
            // A critical cause only.
            assert!(r.source[0].contains(SOURCE_ALERT), "{r:?}");
            assert!(!r.source[0].contains("Warning") && !r.source[0].contains("Unknown"));
        }
    }

    #[test]
    fn the_cascade_is_held_behind_the_iscsi_session() {
        // An alert as Alertmanager sees it: labels; does any rule inhibit `target` with
        // `source` firing (the matcher syntax this module writes, evaluated here)?
        fn matches(m: &str, labels: &[(&str, &str)]) -> bool {
            let get = |k: &str| labels.iter().find(|(n, _)| *n == k).map_or("", |(_, v)| *v);
            if let Some((k, v)) = m.split_once(" =~ ") {
                let v = v.trim_matches('"').replace(
                    TARGET_ALERTS,
                    "K8sStorageFindingCritical|K8sStorageFindingWarning|K8sStorageFindingUnknown",
                );
                let val = get(k);
                return if v == ".+" {
                    !val.is_empty()
                } else {
                    v.split('|').any(|alt| alt == val)
                };
            }
            let (k, v) = m.split_once(" = ").unwrap();
            get(k) == v.trim_matches('"')
        }
        fn get<'a>(ls: &[(&str, &'a str)], l: &str) -> &'a str {
            ls.iter().find(|(n, _)| *n == l).map_or("", |(_, v)| *v)
        }
        fn inhibits(source: &[(&str, &str)], target: &[(&str, &str)]) -> bool {
            inhibit_rules().iter().any(|r| {
                r.source.iter().all(|m| matches(m, source))
                    && r.target.iter().all(|m| matches(m, target))
                    && r.equal.iter().all(|l| get(source, l) == get(target, l))
            })
        }
        let node = [("instance", "k8s03:9100"), ("job", "node")];
        let with = |more: &[(&'static str, &'static str)]| -> Vec<(&'static str, &'static str)> {
            let mut v = node.to_vec();
            v.extend_from_slice(more);
            v
        };
        let session = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "session_recovery_timed_out"),
            ("session", "session3"),
            ("device", "sdc"),
            ("pv", "pvc-1"),
        ]);
        let journal = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "journal_abort"),
            ("node", "k8s03"),
            ("device", "sdc"),
        ]);
        let ro = with(&[
            ("alertname", "K8sStorageFindingWarning"),
            ("signal", "remounted_ro"),
            ("node", "k8s03"),
            ("pv", "pvc-1"),
            ("device", "sdc"),
        ]);
        let pod_of_ro = with(&[
            ("alertname", POD_ALERT),
            ("signal", "emergency_ro"),
            ("node", "k8s03"),
            ("pv", "pvc-1"),
            ("namespace", "media"),
            ("pod", "seerr-0"),
        ]);
        let stuck = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "stuck_terminating"),
            ("node", "k8s03"),
            ("namespace", "media"),
            ("pod", "seerr-0"),
        ]);
        assert!(inhibits(&session, &journal));
        assert!(inhibits(&session, &ro));
        assert!(inhibits(&journal, &ro));
        // No key in common: no link (the journal's device has no PV here, the mount no device).
        let mut ro_elsewhere = ro.clone();
        ro_elsewhere.pop();
        assert!(!inhibits(&journal, &ro_elsewhere));
        assert!(inhibits(&pod_of_ro, &stuck));
        assert!(!inhibits(&journal, &session), "never downward");
        assert!(!inhibits(&stuck, &ro));
        // The same device name on another node is another disk.
        let mut other = journal.clone();
        other[0] = ("instance", "k8s02:9100");
        assert!(!inhibits(&session, &other));
        // A session finding without a PV does not match an effect without one either.
        let no_pv = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "session_failed"),
            ("session", "session4"),
        ]);
        let no_pv_ro = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "mount_hung"),
            ("node", "k8s03"),
            ("mount", "/mnt/x"),
        ]);
        assert!(!inhibits(&no_pv, &no_pv_ro));
        // An UNKNOWN or warning cause holds nothing back.
        let mut unknown = session.clone();
        unknown[2] = ("alertname", "K8sStorageFindingUnknown");
        assert!(!inhibits(&unknown, &journal));
        // The pod alert is held by its own finding's alert (same identity), not another's.
        let finding_of_pod = with(&[
            ("alertname", SOURCE_ALERT),
            ("signal", "emergency_ro"),
            ("node", "k8s03"),
            ("pv", "pvc-1"),
        ]);
        assert!(inhibits(&finding_of_pod, &pod_of_ro));
        let mut other_pv = finding_of_pod.clone();
        other_pv[5] = ("pv", "pvc-2");
        assert!(!inhibits(&other_pv, &pod_of_ro));
    }

    #[test]
    fn chain_texts_follow_the_rules() {
        let t = chain_text("journal_abort");
        assert!(t.starts_with("Layer: filesystem."), "{t}");
        assert!(t.contains("iSCSI session (session, device, pv)"), "{t}");
        assert!(
            t.contains("remount, mount, kubelet, pod (device, pv)"),
            "{t}"
        );
        let root = chain_text("session_recovery_timed_out");
        assert!(root.contains("storage system (pv, pod)"), "{root}");
        assert!(chain_text("sysfs_unreadable").is_empty());
        // The waiting pods are held by the kubelet's queue on the node.
        assert!(chain_text("stuck_no_status").contains("kubelet (pv, pod, node)"));
        let a = chain_annotation();
        assert!(a.starts_with("{{ if eq $labels.signal "), "{a}");
        assert_eq!(a.matches("{{ end }}").count(), 1);
    }
}
