//! `k8s-storage-checks serve` (issue 28): the checks' series on `/metrics`, scraped by the real
//! Prometheus with the shipped rules, on loopback.
//!
//! - The read-only PV fault of the engines' node (a loop-device ext4 PV in a private mount
//!   namespace, driven read-only by the kernel's own ext4 error path) raises the shipped
//!   `K8sStorageFindingCritical` alert keyed on the PV, with the claim and pod in its description,
//!   from what `serve` exposes; a hung check (a program that never answers, `-t 2`) is killed at
//!   its `-t` plus the grace and reported UNKNOWN while the other checks keep running and every
//!   scrape answers at once; `serve` stays within 64 MiB RSS and every check within its `-t`.
//! - TLS and basic auth from an exporter-toolkit `--web.config.file`, with curl: a certificate made
//!   by openssl, a bcrypt hash made by htpasswd.

use e2e::engines::{
    free_port, wait_for, Daemon, Incident, Intervals, Node, EXT4_NS, EXT4_POD, EXT4_PV, EXT4_PVC,
};
use e2e::{bin, need_root, need_tool, workspace_root, Cmd};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PROMETHEUS: &str = "prometheus";

fn curl(args: &[&str]) -> e2e::Output {
    Cmd::new("curl")
        .args(["-sS", "--max-time", "5"])
        .args(args)
        .run()
}

fn http_json(url: &str) -> Option<Value> {
    let out = curl(&[url]);
    (out.code == 0)
        .then(|| serde_json::from_str(&out.stdout).ok())
        .flatten()
}

/// `for: 2m` → `for: 2s` (a minute of the rules becomes a second, as in engines_prometheus).
fn scale_rules(text: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim_start();
            let Some(v) = t.strip_prefix("for:") else {
                return l.to_string();
            };
            let v = v.trim();
            let n: u64 = v[..v.len() - 1].parse().expect("a for: of whole units");
            let secs = match &v[v.len() - 1..] {
                "s" => n.div_ceil(60),
                "m" => n,
                "h" => n * 60,
                u => panic!("for: unit {u}"),
            };
            format!("{}for: {}s", &l[..l.len() - t.len()], secs.max(1))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `serve` program's metrics page (plain HTTP).
fn scrape(port: u16) -> e2e::Output {
    curl(&[&format!("http://127.0.0.1:{port}/metrics")])
}

/// `metric{check="name"} value` of a page.
fn value(page: &str, metric: &str, check: &str) -> Option<f64> {
    let head = format!("{metric}{{check=\"{check}\"}} ");
    page.lines()
        .find_map(|l| l.strip_prefix(&head))
        .and_then(|v| v.parse().ok())
}

fn vm_hwm_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// The `-t` of a check line.
fn t_of(line: &str) -> f64 {
    let w: Vec<&str> = line.split_whitespace().collect();
    w.iter()
        .position(|a| *a == "-t")
        .and_then(|i| w.get(i + 1))
        .and_then(|v| v.split(':').next()?.parse().ok())
        .unwrap_or(10.0)
}

#[test]
fn prometheus_scraping_serve_raises_the_read_only_pv_alert_with_the_claim() {
    let t = "prometheus_scraping_serve_raises_the_read_only_pv_alert_with_the_claim";
    if !need_root(t)
        || !need_tool(t, PROMETHEUS)
        || !need_tool(t, "promtool")
        || !need_tool(t, "curl")
        || !need_tool(t, "bindfs")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let iv = Intervals::TEST;
    let mut node = Node::new();
    let w = node.work.path().join("serve");
    std::fs::create_dir_all(&w).unwrap();
    let program = w.join("k8s-storage-checks");
    e2e::copy_executable(&bin("k8s-storage-checks"), &program);
    // A check that never answers: it ignores its arguments and sleeps.
    let hang = node.plugin_dir.join("check_hang");
    std::fs::write(&hang, "#!/bin/sh\nexec sleep 600\n").unwrap();
    Cmd::new("chmod").arg("755").arg(&hang).run();

    let checks = node.textfile_checks();
    assert!(checks.len() >= 4, "{checks:?}");
    let port = free_port();
    let mut cmd = Command::new("nsenter");
    cmd.args(["-t", &node.ns.pid().to_string(), "-m", "--"])
        .arg(&program)
        .arg("serve")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg(format!("--interval={}s", iv.textfile))
        .arg("--concurrency=2")
        .arg("--plugin-dir")
        .arg(&node.plugin_dir)
        .arg("--check=check_hang -t 2");
    for c in &checks {
        cmd.arg("--check").arg(c);
    }
    let mut serve = Daemon::start("serve", cmd, &w.join("serve.log"));

    let mut rule_files = String::new();
    let dir = workspace_root().join("deploy/prometheus");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p.to_string_lossy().ends_with(".rules.yml") {
            continue;
        }
        let scaled = w.join(p.file_name().unwrap());
        std::fs::write(&scaled, scale_rules(&std::fs::read_to_string(&p).unwrap())).unwrap();
        rule_files.push_str(&format!("  - {}\n", scaled.display()));
    }
    assert!(!rule_files.is_empty());
    let prom_port = free_port();
    let prom_cfg = w.join("prometheus.yml");
    std::fs::write(
        &prom_cfg,
        format!(
            "global:\n  scrape_interval: {s}s\n  evaluation_interval: {s}s\nrule_files:\n{rule_files}\
             scrape_configs:\n  - job_name: k8s-storage-checks\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
            s = iv.scrape
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
    let mut prometheus = Daemon::start("prometheus", cmd, &w.join("prometheus.log"));

    let alerts = || -> Vec<Value> {
        http_json(&format!("http://127.0.0.1:{prom_port}/api/v1/alerts"))
            .and_then(|v| v["data"]["alerts"].as_array().cloned())
            .unwrap_or_default()
    };
    let ctx = || {
        format!(
            "metrics:\n{}\nalerts: {:#?}\nserve.log:\n{}",
            scrape(port).stdout,
            alerts(),
            std::fs::read_to_string(w.join("serve.log")).unwrap_or_default()
        )
    };
    let limit = Duration::from_secs(60);
    let names: Vec<String> = checks
        .iter()
        .map(|c| c.split_whitespace().next().unwrap().to_string())
        .collect();

    // Every check ran and is OK; Prometheus scraped them; nothing alerts on a healthy node.
    wait_for(
        "every check OK in Prometheus, scraped from serve",
        limit,
        || {
            serve.assert_running();
            prometheus.assert_running();
            let Some(v) = http_json(&format!(
                "http://127.0.0.1:{prom_port}/api/v1/query?query=k8s_storage_check_status"
            )) else {
                return false;
            };
            let r = v["data"]["result"].as_array().cloned().unwrap_or_default();
            names.iter().all(|n| {
                r.iter()
                    .any(|s| s["metric"]["check"] == n.as_str() && s["value"][1] == "0")
            })
        },
        ctx,
    );

    // The hung check: UNKNOWN once it is killed at -t 2 plus the grace, while it hangs again
    // the scrape answers at once and the other checks' runs go on.
    wait_for(
        "the hung check reported UNKNOWN (killed)",
        Duration::from_secs(30),
        || {
            value(
                &scrape(port).stdout,
                "k8s_storage_check_status",
                "check_hang",
            ) == Some(3.0)
        },
        ctx,
    );
    let page = scrape(port).stdout;
    assert!(
        page.contains("check_hang gave no metrics: killed after 7s"),
        "{page}"
    );
    let hang_took = value(
        &page,
        "k8s_storage_check_run_duration_seconds",
        "check_hang",
    )
    .unwrap();
    assert!(
        (6.5..9.0).contains(&hang_took),
        "hung check ran {hang_took}s: {page}"
    );
    let before = value(
        &page,
        "k8s_storage_check_last_run_timestamp_seconds",
        "check_ro_pvc_mounts",
    )
    .unwrap();
    let t0 = Instant::now();
    wait_for(
        "check_ro_pvc_mounts to run again while check_hang hangs",
        Duration::from_secs(10),
        || {
            let s = Instant::now();
            let out = scrape(port);
            assert!(
                s.elapsed() < Duration::from_secs(2),
                "a scrape took {:?}",
                s.elapsed()
            );
            value(
                &out.stdout,
                "k8s_storage_check_last_run_timestamp_seconds",
                "check_ro_pvc_mounts",
            )
            .is_some_and(|v| v > before)
        },
        ctx,
    );
    assert!(t0.elapsed() < Duration::from_secs(7));

    // The fault: the kernel drives the ext4 PV read-only.
    node.inject(Incident::Ext4ReadOnly);
    let t0 = Instant::now();
    wait_for(
        "K8sStorageFindingCritical firing for the read-only PV with its claim",
        limit,
        || {
            alerts().iter().any(|a| {
                a["labels"]["alertname"] == "K8sStorageFindingCritical"
                    && a["labels"]["pv"] == EXT4_PV
                    && a["labels"]["check"] == "check_ro_pvc_mounts"
                    && a["state"] == "firing"
                    && a["annotations"]["description"].as_str().is_some_and(|d| {
                        d.contains(&format!("Claim {EXT4_NS}/{EXT4_PVC}."))
                            && d.contains(&format!("Pod {EXT4_NS}/{EXT4_POD}."))
                    })
            })
        },
        ctx,
    );
    println!(
        "serve: read-only PV alert firing {:.1}s after the fault",
        t0.elapsed().as_secs_f64()
    );
    // The info series behind the description carries the claim's labels.
    let info = http_json(&format!(
        "http://127.0.0.1:{prom_port}/api/v1/query?query=k8s_storage_check_finding_info%7Bpv%3D%22{EXT4_PV}%22%7D"
    ))
    .unwrap();
    let m = &info["data"]["result"][0]["metric"];
    assert_eq!(m["pvc"], EXT4_PVC, "{info:#}");
    assert_eq!(m["namespace"], EXT4_NS, "{info:#}");

    // Within its -t, every check; within 64 MiB, serve.
    let page = scrape(port).stdout;
    for c in &checks {
        let name = c.split_whitespace().next().unwrap();
        let took = value(&page, "k8s_storage_check_run_duration_seconds", name)
            .unwrap_or_else(|| panic!("no run duration of {name}: {page}"));
        assert!(took <= t_of(c), "{name} took {took}s, over its -t: {c}");
    }
    let hwm = vm_hwm_kib(serve.pid());
    println!("serve: peak RSS {hwm} KiB");
    assert!(hwm < 64 * 1024, "serve peak RSS {hwm} KiB");
    for l in page.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert_eq!(
            page.matches(&format!("{l}\n")).count(),
            1,
            "{l} twice: {page}"
        );
    }
    drop(prometheus);
    drop(serve);
}

struct Tls {
    dir: tempfile::TempDir,
}

impl Tls {
    fn new() -> Tls {
        let dir = tempfile::tempdir().unwrap();
        let out = Cmd::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-keyout",
            ])
            .arg(dir.path().join("tls.key"))
            .arg("-out")
            .arg(dir.path().join("tls.crt"))
            .run();
        assert_eq!(out.code, 0, "{out:?}");
        Tls { dir }
    }
    fn path(&self, f: &str) -> PathBuf {
        self.dir.path().join(f)
    }
}

fn start_serve(dir: &Path, port: u16, web: Option<&Path>) -> Daemon {
    let mut cmd = Command::new(bin("k8s-storage-checks"));
    cmd.arg("serve")
        .arg(format!("--listen=127.0.0.1:{port}"))
        .arg("--plugin-dir")
        .arg(bin("k8s-storage-checks").parent().unwrap())
        // A check that needs nothing of the node: an UNKNOWN answer is an answer too.
        .arg("--check=check_watch_cache -t 3 --kubeconfig /nonexistent");
    if let Some(w) = web {
        cmd.arg("--web.config.file").arg(w);
    }
    Daemon::start("serve", cmd, &dir.join(format!("serve-{port}.log")))
}

#[test]
fn tls_and_basic_auth_from_an_exporter_toolkit_web_config() {
    let t = "tls_and_basic_auth_from_an_exporter_toolkit_web_config";
    if !need_tool(t, "curl") || !need_tool(t, "openssl") || !need_tool(t, "htpasswd") {
        return;
    }
    let tls = Tls::new();
    let hash = Cmd::new("htpasswd")
        .args(["-nbBC", "10", "prom", "s3cret"])
        .run();
    assert_eq!(hash.code, 0, "{hash:?}");
    let hash = hash.stdout.trim().split_once(':').unwrap().1.to_string();
    let web = tls.path("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\nbasic_auth_users:\n  prom: '{hash}'\n",
            tls.path("tls.crt").display(),
            tls.path("tls.key").display()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut serve = start_serve(tls.dir.path(), port, Some(&web));
    let log = serve.log.clone();
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let url = format!("https://localhost:{port}/metrics");
    let ca = tls.path("tls.crt");
    let ca = ca.to_str().unwrap();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let got = |extra: &[&str]| {
        let mut a = vec![
            "--resolve",
            &resolve,
            "--cacert",
            ca,
            "-o",
            "/dev/stderr",
            "-w",
            "%{http_code}",
        ];
        a.extend_from_slice(extra);
        a.push(&url);
        curl(&a)
    };
    wait_for(
        "serve to answer over TLS",
        Duration::from_secs(20),
        || {
            serve.assert_running();
            got(&["-u", "prom:s3cret"]).stdout == "200"
        },
        log_text,
    );
    // The check's series, over TLS, with the right password only.
    wait_for(
        "the check's first answer",
        Duration::from_secs(20),
        || {
            got(&["-u", "prom:s3cret"])
                .stderr
                .contains("k8s_storage_check_status{check=\"check_watch_cache\"} 3")
        },
        log_text,
    );
    assert_eq!(got(&[]).stdout, "401");
    assert!(curl(&["-i", "--resolve", &resolve, "--cacert", ca, &url])
        .stdout
        .contains("WWW-Authenticate: Basic"));
    assert_eq!(got(&["-u", "prom:wrong"]).stdout, "401");
    assert_eq!(got(&["-u", "other:s3cret"]).stdout, "401");
    assert_eq!(got(&["-u", "prom:s3cret", "-X", "POST"]).stdout, "405");
    // Plain HTTP to the TLS port is no answer; a client that does not trust the certificate
    // does not get through.
    let plain = curl(&[
        &format!("http://127.0.0.1:{port}/metrics"),
        "-u",
        "prom:s3cret",
    ]);
    assert!(
        plain.code != 0 || !plain.stdout.contains("k8s_storage_check_status"),
        "{plain:?}"
    );
    let untrusted = curl(&["--resolve", &resolve, "-u", "prom:s3cret", &url]);
    assert_eq!(untrusted.code, 60, "curl without the CA: {untrusted:?}");
    drop(serve);

    // Without a web config: plain HTTP, no auth, /healthz.
    let port = free_port();
    let mut serve = start_serve(tls.dir.path(), port, None);
    let log2 = serve.log.clone();
    wait_for(
        "serve to answer on plain HTTP",
        Duration::from_secs(20),
        || {
            serve.assert_running();
            curl(&[&format!("http://127.0.0.1:{port}/healthz")]).stdout == "ok\n"
        },
        || std::fs::read_to_string(&log2).unwrap_or_default(),
    );
    drop(serve);

    // A config that is not one: refused at start, naming the problem.
    std::fs::write(&web, "basic_auth_users:\n  prom: s3cret\n").unwrap();
    let out = Cmd::new(bin("k8s-storage-checks"))
        .args([
            "serve",
            "--listen=127.0.0.1:0",
            "--check=check_watch_cache",
            "--web.config.file",
        ])
        .arg(&web)
        .run();
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stderr.contains("not a bcrypt hash"), "{out:?}");
}

#[test]
fn docs_describe_every_serve_option() {
    let help = Cmd::new(bin("k8s-storage-checks"))
        .args(["serve", "--help"])
        .run();
    assert_eq!(help.code, 0, "{help:?}");
    assert!(
        help.stdout.contains("Usage: k8s-storage-checks serve"),
        "{help:?}"
    );
    let doc = std::fs::read_to_string(workspace_root().join("docs/deploy/serve.md")).unwrap();
    let mut n = 0;
    for line in help.stdout.lines().map(str::trim_start) {
        if !line.starts_with('-') {
            continue;
        }
        let Some(opt) = line
            .split_whitespace()
            .map(|w| w.trim_end_matches(','))
            .find(|w| w.starts_with("--"))
        else {
            continue;
        };
        let opt = opt.split(['=', '<', '[']).next().unwrap();
        if ["--help", "--version"].contains(&opt) {
            continue;
        }
        n += 1;
        assert!(
            doc.contains(&format!("`{opt}")),
            "docs/deploy/serve.md does not describe {opt}"
        );
    }
    assert!(n >= 9, "{help:?}");
    // The metrics it adds are named in --help and in the docs.
    for m in [
        "k8s_storage_check_last_run_timestamp_seconds",
        "k8s_storage_check_run_duration_seconds",
    ] {
        assert!(help.stdout.contains(m) && doc.contains(m), "{m}");
    }
}
