//! Prometheus path end to end: the container's textfile runner (`k8s-storage-checks-textfile`,
//! in the node's mount namespace) writes the checks' `--format prometheus` files every interval
//! with the shipped command lines; the real node_exporter (textfile collector only) serves them; the
//! real Prometheus scrapes it and evaluates the shipped rules (`deploy/prometheus/*.rules.yml`,
//! every `for:` scaled like the intervals: a minute becomes a second); the real Alertmanager sends
//! to a webhook receiver the test runs. Each incident's real fault must page with the finding's
//! labels (check, and for the read-only volume namespace/pvc/pv), and resolve when it is removed.
//! Every daemon listens on loopback only and is stopped after.

use e2e::engines::{
    free_port, report, wait_for, Daemon, Incident, Intervals, Node, EXT4_NS, EXT4_PV, EXT4_PVC,
};
use e2e::webhook::Webhook;
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const NODE_EXPORTER: &str = "prometheus-node-exporter";
const PROMETHEUS: &str = "prometheus";
const ALERTMANAGER: &str = "prometheus-alertmanager";

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

fn http_get(url: &str) -> Option<Value> {
    let out = Cmd::new("curl").args(["-sS", "--max-time", "5", url]).run();
    if out.code != 0 {
        return None;
    }
    serde_json::from_str(&out.stdout).ok()
}

struct Stack {
    _runner: Daemon,
    _node_exporter: Daemon,
    prometheus: Daemon,
    alertmanager: Daemon,
    prom_port: u16,
    textfile_dir: PathBuf,
}

impl Stack {
    fn start(node: &Node, iv: Intervals, hook: &Webhook) -> Stack {
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
        for c in node.textfile_checks() {
            cmd.arg("--check").arg(c);
        }
        let runner = Daemon::start("textfile runner", cmd, &w.join("runner.log"));

        let ne_port = free_port();
        let mut cmd = Command::new(NODE_EXPORTER);
        cmd.arg(format!("--web.listen-address=127.0.0.1:{ne_port}"))
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            .arg(format!(
                "--collector.textfile.directory={}",
                textfile_dir.display()
            ));
        let node_exporter = Daemon::start("node_exporter", cmd, &w.join("node_exporter.log"));

        let am_port = free_port();
        let am_cfg = w.join("alertmanager.yml");
        std::fs::write(
            &am_cfg,
            format!(
                "route:\n  receiver: storage-oncall\n  group_by: [alertname, check, namespace, pvc, pv, pod]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: storage-oncall\n    webhook_configs:\n      - url: {}\n        send_resolved: true\n",
                hook.url()
            ),
        )
        .unwrap();
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
    fn statuses(&self) -> Vec<(String, f64)> {
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

    fn context(&self, hook: &Webhook) -> String {
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

fn label<'a>(a: &'a Value, k: &str) -> &'a str {
    a["labels"][k].as_str().unwrap_or("")
}

#[test]
fn prometheus_alertmanager_page_for_every_incident_and_resolve() {
    let t = "prometheus_alertmanager_page_for_every_incident_and_resolve";
    if !need_root(t)
        || !need_tool(t, NODE_EXPORTER)
        || !need_tool(t, PROMETHEUS)
        || !need_tool(t, "promtool")
        || !need_tool(t, ALERTMANAGER)
        || !need_tool(t, "curl")
        || !need_tool(t, "bindfs")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let hook = Webhook::start();
    let stack = Stack::start(&node, iv, &hook);
    let ctx = || stack.context(&hook);
    // Runner round + scrape + the longest scaled `for:` of a critical alert + evaluation + group.
    let limit = Duration::from_secs(60);

    // A healthy node: every check scraped, status OK, and nothing pages.
    wait_for(
        "every check's status scraped as OK",
        limit,
        || {
            let s = stack.statuses();
            e2e::engines::CHECKS
                .iter()
                .all(|c| s.iter().any(|(n, v)| n == c && *v == 0.0))
        },
        ctx,
    );
    assert!(
        hook.alerts().is_empty(),
        "paged on a healthy node: {}",
        ctx()
    );

    for inc in Incident::ALL {
        let check = inc.check();
        let seen = hook.alerts().len();
        let t0 = Instant::now();
        node.inject(inc);
        let firing = |a: &Value| {
            a["status"] == "firing"
                && label(a, "check") == check
                && label(a, "severity") == "critical"
        };
        wait_for(
            &format!("a critical alert of {check} ({})", inc.name()),
            limit,
            || hook.alerts()[seen..].iter().any(firing),
            ctx,
        );
        let to_page = t0.elapsed();
        let alert = hook.alerts()[seen..]
            .iter()
            .find(|a| firing(a))
            .cloned()
            .unwrap();
        // Routed per workload: the finding's subject travels as labels.
        if inc == Incident::Ext4ReadOnly {
            assert_eq!(label(&alert, "namespace"), EXT4_NS, "{alert:#}");
            assert_eq!(label(&alert, "pvc"), EXT4_PVC, "{alert:#}");
            assert_eq!(label(&alert, "pv"), EXT4_PV, "{alert:#}");
        }
        let labels = alert["labels"].to_string();
        assert!(
            labels.contains(inc.names()) || inc == Incident::Ext4ReadOnly,
            "the alert's labels should name {}: {labels}",
            inc.names()
        );
        report(
            "prometheus",
            inc,
            iv,
            "alert at the webhook",
            to_page.as_secs_f64(),
        );

        let fp = alert["fingerprint"].as_str().unwrap_or("").to_string();
        let seen = hook.alerts().len();
        let t1 = Instant::now();
        node.clear(inc);
        wait_for(
            &format!("the alert of {check} to resolve ({})", inc.name()),
            limit + node.log_age_out_left(),
            || {
                hook.alerts()[seen..]
                    .iter()
                    .any(|a| a["status"] == "resolved" && a["fingerprint"] == fp.as_str())
            },
            ctx,
        );
        report(
            "prometheus",
            inc,
            iv,
            "resolved at the webhook (after the fault is gone)",
            t1.elapsed().as_secs_f64(),
        );
        // Every check back to OK before the next incident.
        wait_for(
            "every check OK again",
            limit,
            || {
                let s = stack.statuses();
                e2e::engines::CHECKS
                    .iter()
                    .all(|c| s.iter().any(|(n, v)| n == c && *v == 0.0))
            },
            ctx,
        );
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
