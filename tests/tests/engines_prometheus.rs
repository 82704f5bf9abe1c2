//! Prometheus path end to end: the container's textfile runner (`k8s-storage-checks-textfile`,
//! in the node's mount namespace) writes the checks' `--format prometheus` files every interval
//! with the shipped command lines; the real node_exporter (textfile collector only) serves them; the
//! real Prometheus scrapes it and evaluates the shipped rules (`deploy/prometheus/*.rules.yml`,
//! every `for:` scaled like the intervals: a minute becomes a second); the real Alertmanager sends
//! to a webhook receiver the test runs. Alertmanager runs with Debian's stock grouping timers
//! (`group_wait` 30s, `group_interval` 5m, `repeat_interval` 3h from
//! /etc/prometheus/alertmanager.yml; Alertmanager's own defaults without it), scaled like every
//! other interval, plus only what the shipped route (`deploy/prometheus/alertmanager-route.yml`)
//! and inhibit rules (`deploy/prometheus/alertmanager-inhibit.yml`, issue 32) set. Each incident's real fault must page keyed on the finding's identity (check, node, pv or
//! pod) with the names in the description, and resolve when it is removed; the resolution arrives
//! at the group's next flush (up to `group_interval`), which the time-to-resolved figures include.
//! Scenarios beyond one fault: the pod/PVC name lookup failing while the read-only volume pages
//! (the alert neither resolves nor fires again), a second volume failing on the same node (its own
//! notification), and the recovery of both. Every daemon listens on loopback only and is stopped
//! after.

use e2e::apiserver::Fault;
use e2e::engines::{
    free_port, report, wait_for, Daemon, Incident, Intervals, Node, EXT4_NS, EXT4_POD, EXT4_PV,
    EXT4_PVC, FUSE_PV,
};
use e2e::webhook::Webhook;
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) const NODE_EXPORTER: &str = "prometheus-node-exporter";
pub(crate) const PROMETHEUS: &str = "prometheus";
pub(crate) const ALERTMANAGER: &str = "prometheus-alertmanager";

/// Scale every `for: <duration>` of a rules file: a minute becomes `minute` seconds.
fn scale_rules(text: &str, minute: u32) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            let Some(v) = t.strip_prefix("for:") else {
                return l.to_string();
            };
            let v = v.trim();
            let secs = parse_prom_duration(v)
                .unwrap_or_else(|| panic!("rules: cannot read the duration of {l:?}"));
            let scaled = ((secs * minute as f64 / 60.0).ceil() as u64).max(1);
            format!("{}for: {scaled}s", &l[..l.len() - t.len()])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `90s`, `2m`, `1h30m` → seconds.
fn parse_prom_duration(s: &str) -> Option<f64> {
    let mut total = 0.0;
    let mut num = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            num.push(c);
            continue;
        }
        let mut unit = c.to_string();
        if c == 'm' && chars.peek() == Some(&'s') {
            unit.push(chars.next().unwrap());
        }
        let n: f64 = num.parse().ok()?;
        num.clear();
        total += n * match unit.as_str() {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "w" => 604800.0,
            _ => return None,
        };
    }
    if !num.is_empty() {
        return None;
    }
    Some(total)
}

/// The shipped rule files.
fn shipped_rules() -> Vec<PathBuf> {
    let dir = workspace_root().join("deploy/prometheus");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (the shipped rules)", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".rules.yml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no *.rules.yml in {}", dir.display());
    v
}

pub(crate) fn http_get(url: &str) -> Option<Value> {
    let out = Cmd::new("curl").args(["-sS", "--max-time", "5", url]).run();
    if out.code != 0 {
        return None;
    }
    serde_json::from_str(&out.stdout).ok()
}

/// Alertmanager's grouping timers as the distribution ships them: (group_wait, group_interval,
/// repeat_interval) in seconds and where they come from. Debian's package installs
/// /etc/prometheus/alertmanager.yml (30s, 5m, 3h); without it, Alertmanager's defaults (30s, 5m,
/// 4h).
pub(crate) fn stock_am_timers() -> ((f64, f64, f64), &'static str) {
    let defaults = (30.0, 300.0, 4.0 * 3600.0);
    let Ok(text) = std::fs::read_to_string("/etc/prometheus/alertmanager.yml") else {
        return (defaults, "Alertmanager's defaults");
    };
    let v: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).expect("Debian's alertmanager.yml");
    let get = |k: &str, d: f64| {
        v["route"][k]
            .as_str()
            .map(|s| parse_prom_duration(s.trim()).expect("a duration"))
            .unwrap_or(d)
    };
    (
        (
            get("group_wait", defaults.0),
            get("group_interval", defaults.1),
            get("repeat_interval", defaults.2),
        ),
        "Debian's /etc/prometheus/alertmanager.yml",
    )
}

/// A duration scaled like the test's intervals (a minute becomes `iv.rule_minute` seconds), in
/// milliseconds as Alertmanager reads them.
pub(crate) fn scaled_ms(secs: f64, iv: Intervals) -> String {
    format!(
        "{}ms",
        ((secs * iv.rule_minute as f64 / 60.0) * 1000.0)
            .round()
            .max(1.0) as u64
    )
}

/// group_interval as the test runs it, seconds.
pub(crate) fn scaled_group_interval(iv: Intervals) -> f64 {
    stock_am_timers().0 .1 * iv.rule_minute as f64 / 60.0
}

/// The Alertmanager configuration of the test: the stock root route's timers (scaled), a root
/// receiver that receives nothing, and the shipped route verbatim under it, its receiver the
/// test's webhook (send_resolved as webhooks default: true); the stock inhibit rules (Debian's
/// file has one) followed by the shipped ones (`deploy/prometheus/alertmanager-inhibit.yml`).
pub(crate) fn alertmanager_config(webhook: &str, iv: Intervals) -> String {
    use serde_yaml_ng::{Mapping, Value as Y};
    let ((gw, gi, ri), _) = stock_am_timers();
    let shipped = workspace_root().join("deploy/prometheus/alertmanager-route.yml");
    let route: Y = serde_yaml_ng::from_str(&std::fs::read_to_string(&shipped).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
    for k in ["group_wait", "group_interval", "repeat_interval"] {
        assert!(
            route.get(k).is_none(),
            "the shipped route sets {k}: the stock timers are the point"
        );
    }
    let receiver = route["receiver"]
        .as_str()
        .expect("the shipped route's receiver")
        .to_string();
    let mut root = Mapping::new();
    root.insert("receiver".into(), "nobody".into());
    root.insert("group_wait".into(), scaled_ms(gw, iv).into());
    root.insert("group_interval".into(), scaled_ms(gi, iv).into());
    root.insert("repeat_interval".into(), scaled_ms(ri, iv).into());
    root.insert("routes".into(), Y::Sequence(vec![route]));
    let cfg = serde_json::json!({
        "receivers": [
            {"name": "nobody"},
            {"name": receiver, "webhook_configs": [{"url": webhook}]},
        ]
    });
    let mut cfg: Y = serde_yaml_ng::to_value(&cfg).unwrap();
    cfg.as_mapping_mut()
        .unwrap()
        .insert("route".into(), Y::Mapping(root));
    let mut inhibit = Vec::new();
    if let Ok(text) = std::fs::read_to_string("/etc/prometheus/alertmanager.yml") {
        let stock: Y = serde_yaml_ng::from_str(&text).expect("Debian's alertmanager.yml");
        inhibit.extend(
            stock["inhibit_rules"]
                .as_sequence()
                .cloned()
                .unwrap_or_default(),
        );
    }
    let shipped = workspace_root().join("deploy/prometheus/alertmanager-inhibit.yml");
    let ours: Y = serde_yaml_ng::from_str(&std::fs::read_to_string(&shipped).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", shipped.display()));
    inhibit.extend(
        ours["inhibit_rules"]
            .as_sequence()
            .cloned()
            .expect("the shipped inhibit_rules"),
    );
    cfg.as_mapping_mut()
        .unwrap()
        .insert("inhibit_rules".into(), Y::Sequence(inhibit));
    serde_yaml_ng::to_string(&cfg).unwrap()
}

/// An instant query's result vector (None: Prometheus did not answer or the query failed).
pub(crate) fn prom_query(port: u16, q: &str) -> Option<Vec<Value>> {
    let out = Cmd::new("curl")
        .args(["-sS", "--max-time", "5", "-G"])
        .arg(format!("http://127.0.0.1:{port}/api/v1/query"))
        .arg("--data-urlencode")
        .arg(format!("query={q}"))
        .run();
    let v: Value = serde_json::from_str(&out.stdout).ok()?;
    (v["status"] == "success").then(|| v["data"]["result"].as_array().cloned().unwrap_or_default())
}

pub(crate) struct Stack {
    _runner: Daemon,
    _node_exporter: Daemon,
    prometheus: Daemon,
    alertmanager: Daemon,
    pub(crate) prom_port: u16,
    pub(crate) am_port: u16,
    textfile_dir: PathBuf,
}

impl Stack {
    fn start(node: &Node, iv: Intervals, hook: &Webhook) -> Stack {
        Stack::start_with(node, iv, hook, node.textfile_checks())
    }

    /// The stack with the runner's `--check` lines `checks`.
    pub(crate) fn start_with(
        node: &Node,
        iv: Intervals,
        hook: &Webhook,
        checks: Vec<String>,
    ) -> Stack {
        let w = node.work.path().join("prom");
        let textfile_dir = w.join("textfile");
        std::fs::create_dir_all(&textfile_dir).unwrap();

        // The container's runner, in the node's mount namespace, with the shipped command lines.
        let mut cmd = Command::new("nsenter");
        cmd.args(["-t", &node.ns.pid().to_string(), "-m", "--"])
            .arg(node.plugin_dir.join("k8s-storage-checks-textfile"))
            .arg("--dir")
            .arg(&textfile_dir)
            .arg("--interval")
            .arg(format!("{}s", iv.textfile))
            .arg("--plugin-dir")
            .arg(&node.plugin_dir)
            .arg("--kill-after")
            .arg("30s");
        for c in checks {
            cmd.arg("--check").arg(c);
        }
        let runner = Daemon::start("textfile runner", cmd, &w.join("runner.log"));

        let ne_port = free_port();
        let mut cmd = Command::new(NODE_EXPORTER);
        cmd.arg(format!("--web.listen-address=127.0.0.1:{ne_port}"))
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            // On by default in a stock node_exporter: the node's name (node_uname_info), which
            // summaries use for a finding without a node label.
            .arg("--collector.uname")
            .arg(format!(
                "--collector.textfile.directory={}",
                textfile_dir.display()
            ));
        let node_exporter = Daemon::start("node_exporter", cmd, &w.join("node_exporter.log"));

        let am_port = free_port();
        let am_cfg = w.join("alertmanager.yml");
        std::fs::write(&am_cfg, alertmanager_config(&hook.url(), iv)).unwrap();
        let chk = Cmd::new("amtool").args(["check-config"]).arg(&am_cfg).run();
        assert_eq!(chk.code, 0, "amtool check-config: {chk:?}");
        std::fs::create_dir_all(w.join("am-data")).unwrap();
        let mut cmd = Command::new(ALERTMANAGER);
        cmd.arg(format!("--config.file={}", am_cfg.display()))
            .arg(format!("--storage.path={}", w.join("am-data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{am_port}"))
            .arg("--cluster.listen-address=");
        let alertmanager = Daemon::start("alertmanager", cmd, &w.join("alertmanager.log"));

        // The shipped rules, `for:` scaled; promtool accepts the scaled copy.
        let mut rule_files = Vec::new();
        for (i, r) in shipped_rules().iter().enumerate() {
            let text = std::fs::read_to_string(r).unwrap();
            let p = w.join(format!("rules-{i}.yml"));
            std::fs::write(&p, scale_rules(&text, iv.rule_minute)).unwrap();
            let chk = Cmd::new("promtool").args(["check", "rules"]).arg(&p).run();
            assert_eq!(
                chk.code,
                0,
                "promtool check rules (scaled {}): {chk:?}",
                r.display()
            );
            rule_files.push(p);
        }
        let prom_port = free_port();
        let prom_cfg = w.join("prometheus.yml");
        std::fs::write(
            &prom_cfg,
            format!(
                "global:\n  scrape_interval: {s}s\n  evaluation_interval: {s}s\nrule_files:\n{rules}alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\nscrape_configs:\n  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{ne_port}']\n",
                s = iv.scrape,
                rules = rule_files
                    .iter()
                    .map(|p| format!("  - {}\n", p.display()))
                    .collect::<String>()
            ),
        )
        .unwrap();
        let chk = Cmd::new("promtool")
            .args(["check", "config"])
            .arg(&prom_cfg)
            .run();
        assert_eq!(chk.code, 0, "promtool check config: {chk:?}");
        let mut cmd = Command::new(PROMETHEUS);
        cmd.arg(format!("--config.file={}", prom_cfg.display()))
            .arg(format!("--storage.tsdb.path={}", w.join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"));
        let prometheus = Daemon::start("prometheus", cmd, &w.join("prometheus.log"));

        let mut st = Stack {
            _runner: runner,
            _node_exporter: node_exporter,
            prometheus,
            alertmanager,
            prom_port,
            am_port,
            textfile_dir,
        };
        let limit = Duration::from_secs(60);
        wait_for(
            "Prometheus and Alertmanager to answer",
            limit,
            || {
                st.prometheus.assert_running();
                st.alertmanager.assert_running();
                http_get(&format!("http://127.0.0.1:{am_port}/api/v2/status")).is_some()
                    && http_get(&format!(
                        "http://127.0.0.1:{}/api/v1/status/buildinfo",
                        st.prom_port
                    ))
                    .is_some()
            },
            String::new,
        );
        st
    }

    /// `k8s_storage_check_status` by check, as Prometheus scraped it.
    pub(crate) fn statuses(&self) -> Vec<(String, f64)> {
        let Some(v) = http_get(&format!(
            "http://127.0.0.1:{}/api/v1/query?query=k8s_storage_check_status",
            self.prom_port
        )) else {
            return Vec::new();
        };
        v["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter_map(|r| {
                Some((
                    r["metric"]["check"].as_str()?.to_string(),
                    r["value"][1].as_str()?.parse().ok()?,
                ))
            })
            .collect()
    }

    /// Prometheus's own view of the active alert `name` about volume `pv` (activeAt, state,
    /// annotations), if any.
    fn prom_alert(&self, name: &str, pv: &str) -> Option<Value> {
        let v = http_get(&format!(
            "http://127.0.0.1:{}/api/v1/alerts",
            self.prom_port
        ))?;
        v["data"]["alerts"]
            .as_array()?
            .iter()
            .find(|a| a["labels"]["alertname"] == name && a["labels"]["pv"] == pv)
            .cloned()
    }

    pub(crate) fn context(&self, hook: &Webhook) -> String {
        let files: Vec<String> = std::fs::read_dir(&self.textfile_dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| {
                        format!(
                            "== {}\n{}",
                            e.path().display(),
                            std::fs::read_to_string(e.path()).unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        format!(
            "statuses: {:?}\nalerts: {}\nwebhook: {:#?}\ntextfiles:\n{}\nprometheus.log:\n{}",
            self.statuses(),
            http_get(&format!(
                "http://127.0.0.1:{}/api/v1/alerts",
                self.prom_port
            ))
            .unwrap_or_default(),
            hook.bodies(),
            files.join("\n"),
            self.prometheus.log_text()
        )
    }
}

pub(crate) fn label<'a>(a: &'a Value, k: &str) -> &'a str {
    a["labels"][k].as_str().unwrap_or("")
}

/// Every alert of the webhook's notifications so far about `pv` with `status`.
fn notified<'a>(alerts: &'a [Value], fp: &str, status: &str) -> Vec<&'a Value> {
    alerts
        .iter()
        .filter(|a| a["fingerprint"] == fp && a["status"] == status)
        .collect()
}

#[test]
fn prometheus_alertmanager_page_for_every_incident_and_resolve() {
    let t = "prometheus_alertmanager_page_for_every_incident_and_resolve";
    if !need_root(t)
        || !need_tool(t, NODE_EXPORTER)
        || !need_tool(t, PROMETHEUS)
        || !need_tool(t, "promtool")
        || !need_tool(t, ALERTMANAGER)
        || !need_tool(t, "amtool")
        || !need_tool(t, "curl")
        || !need_tool(t, "bindfs")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let ((gw, gi, ri), from) = stock_am_timers();
    println!(
        "alertmanager: group_wait {gw}s, group_interval {gi}s, repeat_interval {ri}s ({from}), scaled: {}, {}, {}",
        scaled_ms(gw, iv),
        scaled_ms(gi, iv),
        scaled_ms(ri, iv)
    );
    let mut node = Node::new();
    let hook = Webhook::start();
    let stack = Stack::start(&node, iv, &hook);
    let ctx = || stack.context(&hook);
    // Runner round + scrape + the longest scaled `for:` of a critical alert + evaluation +
    // group_wait; a resolution waits for the group's next flush, up to group_interval more.
    let limit = Duration::from_secs(60);
    let resolve_limit = limit + Duration::from_secs_f64(scaled_group_interval(iv));
    let all_ok = || {
        let s = stack.statuses();
        e2e::engines::CHECKS
            .iter()
            .all(|c| s.iter().any(|(n, v)| n == c && *v == 0.0))
    };

    // A healthy node: every check scraped, status OK, and nothing pages.
    wait_for("every check's status scraped as OK", limit, all_ok, ctx);
    assert!(
        hook.alerts().is_empty(),
        "paged on a healthy node: {}",
        ctx()
    );

    let page = |inc: Incident, seen: usize, what: &str| -> (Value, Duration) {
        let check = inc.check();
        let t0 = Instant::now();
        let firing = |a: &Value| {
            a["status"] == "firing"
                && label(a, "check") == check
                && label(a, "severity") == "critical"
                && (inc != Incident::FuseDead || label(a, "pv") == FUSE_PV)
        };
        wait_for(
            &format!("a critical alert of {check} ({}, {what})", inc.name()),
            limit,
            || hook.alerts()[seen..].iter().any(firing),
            ctx,
        );
        let alert = hook.alerts()[seen..]
            .iter()
            .find(|a| firing(a))
            .cloned()
            .unwrap();
        (alert, t0.elapsed())
    };

    for inc in Incident::ALL {
        if inc == Incident::FuseDead {
            continue; // the second volume of the read-only incident, below
        }
        let check = inc.check();
        let seen = hook.alerts().len();
        let t0 = Instant::now();
        node.inject(inc);
        let (alert, _) = page(inc, seen, "first fault");
        let to_page = t0.elapsed();
        // Keyed on identity; the names an operator knows are in the description.
        let labels = alert["labels"].to_string();
        assert!(
            labels.contains(inc.names()) || inc == Incident::Ext4ReadOnly,
            "the alert's labels should name {}: {labels}",
            inc.names()
        );
        let summary = alert["annotations"]["summary"].as_str().unwrap_or("");
        let node_label = label(&alert, "node");
        assert!(
            !node_label.is_empty() || inc == Incident::KubeletBackoff,
            "no node label: {alert:#}"
        );
        assert!(
            summary.contains(" on node ") && !summary.contains("127.0.0.1"),
            "the summary should name the node, not the scrape target: {alert:#}"
        );
        let runbook = alert["annotations"]["runbook_url"].as_str().unwrap_or("");
        assert!(
            runbook.ends_with("/docs/runbooks/K8sStorageFindingCritical.md"),
            "{alert:#}"
        );
        report(
            "prometheus",
            inc,
            iv,
            "alert at the webhook",
            to_page.as_secs_f64(),
        );
        let fp = alert["fingerprint"].as_str().unwrap_or("").to_string();

        let mut second: Option<String> = None;
        if inc == Incident::Ext4ReadOnly {
            assert_eq!(label(&alert, "pv"), EXT4_PV, "{alert:#}");
            assert_eq!(
                label(&alert, "namespace"),
                "",
                "names are no labels: {alert:#}"
            );
            let desc = alert["annotations"]["description"].as_str().unwrap_or("");
            assert!(
                desc.contains(&format!("Claim {EXT4_NS}/{EXT4_PVC}."))
                    && desc.contains(&format!("Pod {EXT4_NS}/{EXT4_POD}.")),
                "the description should name the claim and the pod: {alert:#}"
            );

            // The pod/PVC name lookup fails (the API answers 503 for the claim's namespace)
            // until Prometheus has evaluated the alert on a scrape without the names: the alert
            // stays active with the same labels and activeAt, only its description changes.
            let active_at = stack
                .prom_alert("K8sStorageFindingCritical", EXT4_PV)
                .map(|a| a["activeAt"].clone())
                .expect("Prometheus's active alert");
            // The names come from the PVs' claims and the claim namespace's pods: both fail.
            let media = format!("/api/v1/namespaces/{EXT4_NS}/pods");
            node.api.fail_when(
                move |r| {
                    r.path.starts_with(&media) || r.path.starts_with("/api/v1/persistentvolumes")
                },
                Fault::Http(503),
                None,
            );
            wait_for(
                "an evaluation of the alert on a run whose name lookup failed",
                limit,
                || {
                    stack
                        .prom_alert("K8sStorageFindingCritical", EXT4_PV)
                        .and_then(|a| a["annotations"]["description"].as_str().map(str::to_string))
                        .is_some_and(|d| d.contains("No claim or pod name known this run"))
                },
                ctx,
            );
            node.api.heal();
            wait_for(
                "the names back in the alert's description",
                limit,
                || {
                    stack
                        .prom_alert("K8sStorageFindingCritical", EXT4_PV)
                        .and_then(|a| a["annotations"]["description"].as_str().map(str::to_string))
                        .is_some_and(|d| d.contains(&format!("Claim {EXT4_NS}/{EXT4_PVC}.")))
                },
                ctx,
            );
            let now = stack
                .prom_alert("K8sStorageFindingCritical", EXT4_PV)
                .expect("still active");
            assert_eq!(
                now["activeAt"], active_at,
                "the alert restarted its for: across the failed lookup: {now:#}"
            );
            assert_eq!(now["state"], "firing", "{now:#}");
            let alerts = hook.alerts();
            assert!(
                notified(&alerts, &fp, "resolved").is_empty(),
                "the failed lookup resolved the alert: {}",
                ctx()
            );
            assert_eq!(
                notified(&alerts, &fp, "firing").len(),
                1,
                "the failed lookup made the alert fire again: {}",
                ctx()
            );

            // A second volume fails on the same node while the first still pages: a
            // notification of its own (its own group: alertname, node, pv).
            let seen = hook.alerts().len();
            let t1 = Instant::now();
            node.inject(Incident::FuseDead);
            let (a2, _) = page(Incident::FuseDead, seen, "second volume on a paging node");
            report(
                "prometheus",
                Incident::FuseDead,
                iv,
                "alert at the webhook",
                t1.elapsed().as_secs_f64(),
            );
            assert_eq!(label(&a2, "pv"), FUSE_PV, "{a2:#}");
            // check_stale_csi_mounts runs with --node (the role's node name); the read-only
            // volume's check names the host it runs on, which on this test machine is not the
            // simulated node's name: both are stable run after run, which is what keys an alert.
            assert_eq!(label(&a2, "node"), e2e::engines::NODE, "{a2:#}");
            assert!(!node_label.is_empty());
            assert_ne!(a2["fingerprint"], fp.as_str());
            second = Some(a2["fingerprint"].as_str().unwrap_or("").to_string());

            // The Grafana dashboard against this Prometheus, both volumes failing: every query
            // evaluates without error and reads only series that are scraped; the per-volume
            // table lists both volumes, the read-only one with its claim's names joined in.
            let scraped: Vec<String> = http_get(&format!(
                "http://127.0.0.1:{}/api/v1/label/__name__/values",
                stack.prom_port
            ))
            .and_then(|v| v["data"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect();
            for (title, expr) in crate::prometheus_rules::dashboard_queries() {
                assert!(
                    prom_query(stack.prom_port, &expr).is_some(),
                    "dashboard panel {title:?}: Prometheus refused {expr}"
                );
                for n in crate::prometheus_rules::metric_names(&expr) {
                    assert!(
                        scraped.contains(&n),
                        "dashboard panel {title:?} reads {n}, not scraped: {scraped:?}"
                    );
                }
            }
            let (_, table) = crate::prometheus_rules::dashboard_queries()
                .into_iter()
                .find(|(t, _)| t == "Failing volumes and pods (every check)")
                .expect("the overview's per-volume table");
            let rows = prom_query(stack.prom_port, &table).unwrap();
            let m = |r: &Value, k: &str| r["metric"][k].as_str().unwrap_or("").to_string();
            assert!(
                rows.iter().any(|r| m(r, "pv") == EXT4_PV
                    && m(r, "namespace") == EXT4_NS
                    && m(r, "pvc") == EXT4_PVC),
                "the read-only volume with its names: {rows:#?}"
            );
            assert!(
                rows.iter().any(|r| m(r, "pv") == FUSE_PV),
                "the second volume: {rows:#?}"
            );
        }

        // Recovery: each fault removed, each alert resolved at the webhook, at its group's next
        // flush (the wait includes group_interval).
        let seen = hook.alerts().len();
        let t1 = Instant::now();
        node.clear(inc);
        wait_for(
            &format!("the alert of {check} to resolve ({})", inc.name()),
            resolve_limit + node.log_age_out_left(),
            || !notified(&hook.alerts()[seen..], &fp, "resolved").is_empty(),
            ctx,
        );
        report(
            "prometheus",
            inc,
            iv,
            "resolved at the webhook (after the fault is gone)",
            t1.elapsed().as_secs_f64(),
        );
        if let Some(fp2) = second {
            let seen = hook.alerts().len();
            let t2 = Instant::now();
            node.clear(Incident::FuseDead);
            wait_for(
                "the second volume's alert to resolve",
                resolve_limit,
                || !notified(&hook.alerts()[seen..], &fp2, "resolved").is_empty(),
                ctx,
            );
            report(
                "prometheus",
                Incident::FuseDead,
                iv,
                "resolved at the webhook (after the fault is gone)",
                t2.elapsed().as_secs_f64(),
            );
        }
        // Every check back to OK before the next incident.
        wait_for("every check OK again", limit, all_ok, ctx);
    }
    println!("prometheus engine test took {:?}", started.elapsed());
    // Nothing the test started is left running.
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(stack);
    drop(hook);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn rule_durations_scale() {
    assert_eq!(parse_prom_duration("2m"), Some(120.0));
    assert_eq!(parse_prom_duration("1h30m"), Some(5400.0));
    assert_eq!(parse_prom_duration("90s"), Some(90.0));
    assert_eq!(parse_prom_duration("5"), None);
    let r = scale_rules("      - alert: X\n        for: 10m\n        expr: up", 1);
    assert_eq!(r, "      - alert: X\n        for: 10s\n        expr: up");
}
