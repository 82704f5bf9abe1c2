//! The shipped Prometheus rules (deploy/prometheus/): the plain rules file and the PrometheusRule
//! manifest generated from it agree, both pass `promtool check rules`, the unit tests pass
//! `promtool test rules` with a firing and a quiet case for every alert, and the rules use only
//! metrics and labels the checks really write: a real check's real `--format prometheus` answer,
//! fed to the rules, pages keyed on the finding's identity (node, pv, signal) with the names of
//! its claim and pod, from k8s_storage_check_finding_info, in the description; every alert links
//! its runbook (docs/runbooks/<alert>.md).

use e2e::apiserver::fixtures::{jiva_replica, kubectl_list, Rep};
use e2e::{need_tool, workspace_root, Cmd};
use serde_yaml_ng::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    workspace_root().join("deploy/prometheus")
}

fn yaml(p: &Path) -> Value {
    serde_yaml_ng::from_str(&std::fs::read_to_string(p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn promtool(args: &[&str], cwd: &Path) -> e2e::Output {
    Cmd::new("sh")
        .arg("-c")
        .arg(format!("cd '{}' && exec promtool \"$@\"", cwd.display()))
        .arg("promtool")
        .args(args)
        .run()
}

/// (alert name, expression) of every rule.
fn alerts(rules: &Value) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for g in rules["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            v.push((
                r["alert"]
                    .as_str()
                    .expect("only alerting rules")
                    .to_string(),
                r["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    v
}

#[test]
fn the_manifest_is_generated_from_the_rules_file_and_agrees_with_it() {
    let out = Cmd::new(dir().join("generate")).run();
    assert_eq!(out.code, 0, "{out:?}");
    let committed = std::fs::read_to_string(dir().join("prometheusrule.yaml")).unwrap();
    assert!(
        out.stdout == committed,
        "deploy/prometheus/prometheusrule.yaml is not generate's output: run \
         deploy/prometheus/generate > deploy/prometheus/prometheusrule.yaml"
    );
    let rules = yaml(&dir().join("k8s-storage-checks.rules.yml"));
    let manifest = yaml(&dir().join("prometheusrule.yaml"));
    assert_eq!(manifest["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(manifest["kind"], "PrometheusRule");
    assert_eq!(manifest["metadata"]["name"], "k8s-storage-checks");
    assert_eq!(
        manifest["spec"], rules,
        "the manifest's spec is the rules file"
    );
}

#[test]
fn both_forms_pass_promtool_check_rules() {
    if !need_tool("both_forms_pass_promtool_check_rules", "promtool") {
        return;
    }
    let out = promtool(&["check", "rules", "k8s-storage-checks.rules.yml"], &dir());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("SUCCESS: 13 rules found"), "{out:?}");
    // The manifest's spec, as Prometheus would load it.
    let tmp = tempfile::tempdir().unwrap();
    let spec = &yaml(&dir().join("prometheusrule.yaml"))["spec"];
    std::fs::write(
        tmp.path().join("spec.yml"),
        serde_yaml_ng::to_string(spec).unwrap(),
    )
    .unwrap();
    let out = promtool(&["check", "rules", "spec.yml"], tmp.path());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("SUCCESS: 13 rules found"), "{out:?}");
}

#[test]
fn unit_tests_pass_and_cover_every_alert_firing_and_quiet() {
    if !need_tool(
        "unit_tests_pass_and_cover_every_alert_firing_and_quiet",
        "promtool",
    ) {
        return;
    }
    let out = promtool(&["test", "rules", "k8s-storage-checks.test.yml"], &dir());
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("SUCCESS"), "{out:?}");

    let rules = yaml(&dir().join("k8s-storage-checks.rules.yml"));
    let tests = yaml(&dir().join("k8s-storage-checks.test.yml"));
    let (mut fires, mut quiet) = (BTreeSet::new(), BTreeSet::new());
    for t in tests["tests"].as_sequence().unwrap() {
        for c in t["alert_rule_test"].as_sequence().unwrap() {
            let name = c["alertname"].as_str().unwrap().to_string();
            if c["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty()) {
                fires.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    for (a, _) in alerts(&rules) {
        assert!(fires.contains(&a), "no test case where {a} fires");
        assert!(quiet.contains(&a), "no test case where {a} stays quiet");
    }
}

/// A sample line of the exposition format: (metric name, labels, value).
fn parse_sample(line: &str) -> (String, BTreeMap<String, String>, String) {
    let (head, value) = line.rsplit_once(' ').unwrap();
    let (name, rest) = head.split_once('{').unwrap_or((head, "}"));
    let mut labels = BTreeMap::new();
    let mut r = rest;
    while !r.starts_with('}') {
        let (k, after) = r.split_once("=\"").unwrap();
        let b = after.as_bytes();
        let mut end = 0;
        while b[end] != b'"' {
            end += if b[end] == b'\\' { 2 } else { 1 };
        }
        labels.insert(k.to_string(), after[..end].to_string());
        r = after[end + 1..].trim_start_matches(',');
    }
    (name.to_string(), labels, value.to_string())
}

#[test]
fn a_real_checks_answer_pages_through_the_rules_with_its_subject_labels() {
    let t = "a_real_checks_answer_pages_through_the_rules_with_its_subject_labels";
    if !need_tool(t, "promtool") {
        return;
    }
    const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";
    let tmp = tempfile::tempdir().unwrap();
    let pods = tmp.path().join("pods.json");
    std::fs::write(
        &pods,
        kubectl_list(vec![
            jiva_replica(PV, 0, "k8s01", 86400, Rep::Healthy),
            jiva_replica(
                PV,
                1,
                "k8s03",
                86400,
                Rep::CrashLoop {
                    restarts: 92,
                    unready_secs: 3 * 86400,
                },
            ),
            jiva_replica(PV, 2, "k8s02", 86400, Rep::Healthy),
        ])
        .to_string(),
    )
    .unwrap();
    let out = Cmd::check("check_jiva_rep_crashloop")
        .without_host_credentials()
        .arg("--pods-json")
        .arg(&pods)
        .args(["--format", "prometheus"])
        .run();
    assert_eq!(out.code, 2, "{out:?}");

    // Its samples, as Prometheus would scrape them from node_exporter on k8s03, for 15 minutes.
    let mut series = String::new();
    let mut findings = Vec::new();
    let mut infos = Vec::new();
    let mut names = BTreeSet::new();
    for line in out.stdout.lines().filter(|l| !l.starts_with('#')) {
        let (name, mut labels, value) = parse_sample(line);
        names.insert(name.clone());
        // The next steps (issue 26) are for the operator, not the rules: their commands' quotes
        // would need YAML and selector escaping here, and no rule reads them.
        if name == "k8s_storage_check_finding_next" {
            continue;
        }
        labels.insert("instance".into(), "k8s03:9100".into());
        labels.insert("job".into(), "node".into());
        if name == "k8s_storage_check_finding" {
            findings.push(labels.clone());
        }
        if name == "k8s_storage_check_finding_info" {
            infos.push(labels.clone());
        }
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        series.push_str(&format!(
            "      - series: '{name}{{{}}}'\n        values: '{value}x15'\n",
            l.join(",")
        ));
    }
    // node_exporter's own identity of the node, which summaries fall back to for a finding
    // without a node (the volume's degraded redundancy).
    series.push_str("      - series: 'node_uname_info{instance=\"k8s03:9100\",job=\"node\",nodename=\"k8s03\"}'\n        values: '1x15'\n");
    // Every metric the rules read (other than node_exporter's own) is one the check wrote.
    let rules = yaml(&dir().join("k8s-storage-checks.rules.yml"));
    for (alert, expr) in alerts(&rules) {
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            // serve's own series (the runner writes it, not a check; tests/tests/serve.rs
            // scrapes it from serve).
            if word == "k8s_storage_check_last_run_timestamp_seconds" {
                continue;
            }
            if word.starts_with("k8s_storage_check_") {
                assert!(
                    names.contains(word),
                    "{alert} reads {word}, which the check does not write: {names:?}"
                );
            }
        }
    }
    let crit: Vec<_> = findings
        .iter()
        .filter(|l| l["state"] == "critical")
        .collect();
    let warn: Vec<_> = findings
        .iter()
        .filter(|l| l["state"] == "warning")
        .collect();
    assert_eq!((crit.len(), warn.len()), (1, 1), "{findings:?}");
    let exp = |labels: &BTreeMap<String, String>, severity: &str| {
        let mut s = format!("              severity: {severity}\n");
        for (k, v) in labels {
            s.push_str(&format!("              {k}: '{v}'\n"));
        }
        s
    };
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n{series}    alert_rule_test:\n      - eval_time: 12m\n        alertname: K8sStorageFindingCritical\n        exp_alerts:\n          - exp_labels:\n{c}            exp_annotations:\n              summary: 'crashloop on node k8s03 (check_jiva_rep_crashloop)'\n              description: 'check_jiva_rep_crashloop found crashloop (CRITICAL) on node k8s03: PV {PV}. Pod openebs/{PV}-jiva-rep-1. Run `check_jiva_rep_crashloop -v` on the node for the finding and its next step.'\n              runbook_url: '{rb}/K8sStorageFindingCritical.md'\n              chain: 'Layer: replica. While it fires critical, it holds back the alerts of what it can cause: degraded, storage system (pv). The rules: docs/triage.md; the whole chain on the node: `k8s-storage-checks triage`.'\n      - eval_time: 12m\n        alertname: K8sStorageFindingWarning\n        exp_alerts:\n          - exp_labels:\n{w}            exp_annotations:\n              summary: 'degraded_redundancy on node k8s03 (check_jiva_rep_crashloop)'\n              description: 'check_jiva_rep_crashloop found degraded_redundancy (WARNING) on node k8s03: PV {PV}. No claim or pod name known this run (the alert stays). Run `check_jiva_rep_crashloop -v` on the node for the finding and its next step.'\n              runbook_url: '{rb}/K8sStorageFindingWarning.md'\n              chain: 'Layer: degraded. Held back while a critical alert of what can cause it fires on the same subject: replica (pv). While it fires critical, it holds back the alerts of what it can cause: storage system (pv). The rules: docs/triage.md; the whole chain on the node: `k8s-storage-checks triage`.'\n      - eval_time: 12m\n        alertname: K8sStorageCheckCritical\n        exp_alerts: []\n      - eval_time: 12m\n        alertname: K8sStorageFindingsOmitted\n        exp_alerts: []\n      - eval_time: 12m\n        alertname: K8sStorageCheckSlow\n        exp_alerts: []\n",
        rules = dir().join("k8s-storage-checks.rules.yml").display(),
        rb = runbook_base(),
        c = exp(crit[0], "critical"),
        w = exp(warn[0], "warning"),
    );
    // The finding series carries the identity; the replica pod's names are in the info series.
    assert_eq!(crit[0]["pv"], PV);
    assert_eq!(crit[0]["node"], "k8s03");
    assert!(!crit[0].contains_key("namespace") && !crit[0].contains_key("pod"));
    assert_eq!(infos.len(), 1, "{infos:?}");
    assert_eq!(infos[0]["namespace"], "openebs");
    assert_eq!(infos[0]["pod"], format!("{PV}-jiva-rep-1"));
    std::fs::write(tmp.path().join("real.test.yml"), &test).unwrap();
    let out = promtool(&["test", "rules", "real.test.yml"], tmp.path());
    assert_eq!(out.code, 0, "{test}\n{out:?}");
}

/// The runbooks' base: the repository's docs/runbooks, the repository URL written once, in the
/// workspace Cargo.toml.
fn runbook_base() -> String {
    let cargo = std::fs::read_to_string(workspace_root().join("Cargo.toml")).unwrap();
    let repo = cargo
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .and_then(|r| r.strip_suffix('"'))
        .expect("repository = \"…\" in Cargo.toml");
    format!("{repo}/blob/main/docs/runbooks")
}

/// Issue 33: every alert has a runbook_url under the one base, and its page exists in
/// docs/runbooks with the sections an on-call person needs; `generate --runbook-base` moves every
/// link and nothing else.
#[test]
fn every_alert_links_its_runbook_and_the_runbook_exists() {
    let rules = yaml(&dir().join("k8s-storage-checks.rules.yml"));
    let base = runbook_base();
    let mut n = 0;
    for g in rules["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            let alert = r["alert"].as_str().unwrap();
            let url = r["annotations"]["runbook_url"]
                .as_str()
                .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
            assert_eq!(url, format!("{base}/{alert}.md"), "{alert}");
            let page = workspace_root().join(format!("docs/runbooks/{alert}.md"));
            let text = std::fs::read_to_string(&page)
                .unwrap_or_else(|e| panic!("{}: {e}", page.display()));
            assert!(
                text.starts_with(&format!("# {alert}\n")),
                "{}",
                page.display()
            );
            for section in [
                "## What it means",
                "## Confirm",
                "## Recover",
                "## Avoid a recurrence",
            ] {
                assert!(
                    text.contains(section),
                    "{} has no {section:?}",
                    page.display()
                );
            }
            for distro in ["microk8s", "k3s", "kubeadm", "Talos"] {
                assert!(
                    text.contains(distro),
                    "{} does not cover {distro}",
                    page.display()
                );
            }
            // The summary names the node, never only the scrape target.
            let summary = r["annotations"]["summary"].as_str().unwrap();
            assert!(summary.contains("on node "), "{alert}: {summary}");
            n += 1;
        }
    }
    assert_eq!(n, 13);
    // Another base: every link moves, nothing else changes.
    let other = "file:///srv/k8s-storage-checks/runbooks";
    let out = Cmd::new(dir().join("generate"))
        .args(["--rules", "--runbook-base", &format!("{other}/")])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let moved: Value = serde_yaml_ng::from_str(&out.stdout).unwrap();
    let plain = std::fs::read_to_string(dir().join("k8s-storage-checks.rules.yml")).unwrap();
    assert_eq!(out.stdout, plain.replace(&base, other));
    assert_eq!(
        moved["groups"][0]["rules"][0]["annotations"]["runbook_url"],
        format!("{other}/K8sStorageFindingCritical.md").as_str()
    );
    let out = Cmd::new(dir().join("generate"))
        .args(["--runbook-base", other])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout
            .matches(&format!("runbook_url: '{other}/"))
            .count(),
        13
    );
    assert!(!out.stdout.contains(&base));
}

/// The Grafana dashboard (deploy/grafana/k8s-storage-checks.json) as (panel title, expression)
/// of every query, `$instance` as its "All" value.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let p = workspace_root().join("deploy/grafana/k8s-storage-checks.json");
    let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut v = Vec::new();
    for panel in d["panels"].as_array().expect("panels") {
        for t in panel["targets"].as_array().into_iter().flatten() {
            v.push((
                panel["title"].as_str().unwrap_or("").to_string(),
                t["expr"]
                    .as_str()
                    .expect("a PromQL expr")
                    .replace("$instance", ".+"),
            ));
        }
    }
    v
}

/// The metric names a PromQL expression reads (identifiers followed by `{`, `[`, `)` or the end,
/// that are not functions, keywords or label names).
pub fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let mut i = 0;
    let mut in_braces = false;
    let mut in_quotes = false;
    while i < b.len() {
        let c = b[i] as char;
        if in_quotes {
            if c == '\\' {
                i += 1;
            } else if c == '"' {
                in_quotes = false;
            }
            i += 1;
            continue;
        }
        match c {
            '"' => in_quotes = true,
            '{' => in_braces = true,
            '}' => in_braces = false,
            _ => {}
        }
        if !in_braces && (c.is_ascii_alphabetic() || c == '_') {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &expr[start..i];
            let next = expr[i..].trim_start().chars().next();
            // A function call or a grouping clause's label list follows with '('.
            if next != Some('(')
                && (word.starts_with("k8s_storage_check_") || word.starts_with("node_"))
            {
                out.insert(word.to_string());
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Issue 33: a Grafana dashboard with one row per check and per-volume tables, whose every query
/// parses (promtool) and reads only series the suite exports: the metric names of a real check's
/// real `--format prometheus` answer (findings with names, so the info series too) and the
/// textfile collector's own `node_textfile_mtime_seconds`. The engine test evaluates every query
/// against a real Prometheus scraping the real checks.
#[test]
fn grafana_dashboard_has_a_row_per_check_and_reads_only_exported_series() {
    let p = workspace_root().join("deploy/grafana/k8s-storage-checks.json");
    let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    let panels = d["panels"].as_array().unwrap();
    let rows: Vec<&str> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    let mut want = vec!["Overview".to_string()];
    want.extend(e2e::all_checks());
    assert_eq!(rows, want, "one row per check, after the overview");
    // Every check's row has a per-volume table reading the finding series of that check.
    for c in e2e::all_checks() {
        let i = panels
            .iter()
            .position(|p| p["title"] == c.as_str())
            .unwrap();
        let table = panels[i + 1..]
            .iter()
            .take_while(|p| p["type"] != "row")
            .find(|p| p["type"] == "table")
            .unwrap_or_else(|| panic!("no table in {c}'s row"));
        let expr = table["targets"][0]["expr"].as_str().unwrap();
        assert!(
            expr.contains("k8s_storage_check_finding{")
                && expr.contains("k8s_storage_check_finding_info{")
                && expr.contains(&format!("check=\"{c}\"")),
            "{c}: {expr}"
        );
    }

    // The series a real check exports.
    const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";
    let tmp = tempfile::tempdir().unwrap();
    let pods = tmp.path().join("pods.json");
    std::fs::write(
        &pods,
        kubectl_list(vec![
            jiva_replica(PV, 0, "k8s01", 86400, Rep::Healthy),
            jiva_replica(
                PV,
                1,
                "k8s03",
                86400,
                Rep::CrashLoop {
                    restarts: 92,
                    unready_secs: 3 * 86400,
                },
            ),
        ])
        .to_string(),
    )
    .unwrap();
    let out = Cmd::check("check_jiva_rep_crashloop")
        .without_host_credentials()
        .arg("--pods-json")
        .arg(&pods)
        .args(["--format", "prometheus"])
        .run();
    assert_eq!(out.code, 2, "{out:?}");
    let mut exported: BTreeSet<String> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| parse_sample(l).0)
        .collect();
    assert!(
        exported.contains("k8s_storage_check_finding_info"),
        "{exported:?}"
    );
    // node_exporter's textfile collector, for each file it reads.
    exported.insert("node_textfile_mtime_seconds".into());

    let queries = dashboard_queries();
    assert!(
        queries.len() >= 5 * e2e::all_checks().len(),
        "{}",
        queries.len()
    );
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (title, expr)) in queries.iter().enumerate() {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{title}: reads no metric: {expr}");
        for n in &names {
            assert!(
                exported.contains(n),
                "{title}: {n} is not a series the suite exports ({exported:?}): {expr}"
            );
        }
        rules.push_str(&format!(
            "      - record: dashboard_query_{i}\n        expr: {}\n",
            serde_json::to_string(expr).unwrap()
        ));
    }
    if need_tool(
        "grafana_dashboard_has_a_row_per_check_and_reads_only_exported_series",
        "promtool",
    ) {
        std::fs::write(tmp.path().join("dashboard.rules.yml"), rules).unwrap();
        let out = promtool(&["check", "rules", "dashboard.rules.yml"], tmp.path());
        assert_eq!(out.code, 0, "a dashboard query does not parse: {out:?}");
    }
}

#[test]
fn metric_names_of_an_expression() {
    let n = metric_names(
        "sum by (state) (k8s_storage_check_findings{check=\"a{b\", x=~\"node_y\"}) or ignoring (pod) k8s_storage_check_finding",
    );
    assert_eq!(
        n.into_iter().collect::<Vec<_>>(),
        ["k8s_storage_check_finding", "k8s_storage_check_findings"]
    );
    assert_eq!(
        metric_names("time() - node_textfile_mtime_seconds{file=~\"x\"}")
            .into_iter()
            .collect::<Vec<_>>(),
        ["node_textfile_mtime_seconds"]
    );
}
