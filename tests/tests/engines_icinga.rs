//! Icinga 2 end to end, as an operator runs it: the real `icinga2 daemon` (as root, its own
//! config, state, log and run directories under a temp dir) inside the node's mount namespace,
//! with Icinga's defaults plus only our shipped files: `icinga2/k8s-storage-checks.conf` (the
//! CheckCommands), `icinga2/k8s-storage-services.conf` (the service template — volatile, flapping
//! off — and the apply rule, executed through `command_endpoint` on the node's own endpoint) and
//! `icinga2/k8s-storage-notifications.conf` (the notification command `nagios/k8s-storage-notify`
//! and its apply rule), time scaled through the check and retry intervals only.
//! The REST API (ApiListener with a certificate made by `icinga2 pki new-cert`, on a loopback
//! port, an ApiUser with a password) is how the test reads states and acknowledges.
//!
//! What is asserted is what the on-call person receives: for each incident a PROBLEM naming it
//! with its pasteable next step, then a RECOVERY; three fault/recovery cycles in a row; a second
//! and a third volume failing on the already-CRITICAL service (each paged, an unchanged set not);
//! a name lookup failing for one run (not paged); an acknowledgement and a downtime (silence,
//! then recovery). Perfdata is split by Icinga into its values and the log holds no warning.

use e2e::apiserver::Fault;
use e2e::engines::{
    free_port, notify_script, pages, report, wait_for, Daemon, Incident, Intervals, Node, Page,
    ALL_CHECKS, EXT4_PVC, NODE,
};
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The host standing for the cluster (its checks run by the node's endpoint, like an agent with
/// the cluster's kubeconfig).
const CLUSTER: &str = "prod-cluster";
const CLUSTER_CHECKS: [&str; 3] = [
    "check_jiva_rep_crashloop",
    "check_watch_cache",
    "check_volume_attachments",
];

const API_USER: &str = "storage-monitor";
const API_PASSWORD: &str = "Zm9vYmFyLWVuZ2luZXM";

pub(crate) struct Icinga {
    pub(crate) dir: PathBuf,
    port: u16,
    daemon: Daemon,
}

impl Icinga {
    /// `-D` constants that move every path of the daemon under `dir` and keep it root.
    fn defines(dir: &std::path::Path) -> Vec<String> {
        let d = dir.display();
        [
            format!("Configuration.DataDir={d}/data"),
            format!("Configuration.LogDir={d}/log"),
            format!("Configuration.CacheDir={d}/cache"),
            format!("Configuration.SpoolDir={d}/spool"),
            format!("Configuration.InitRunDir={d}/run"),
            format!("Configuration.PidPath={d}/run/icinga2.pid"),
            format!("Configuration.StatePath={d}/data/icinga2.state"),
            format!("Configuration.ObjectsPath={d}/cache/icinga2.debug"),
            format!("Configuration.VarsPath={d}/cache/icinga2.vars"),
            "Configuration.RunAsUser=root".to_string(),
            "Configuration.RunAsGroup=root".to_string(),
        ]
        .into_iter()
        .flat_map(|x| ["-D".to_string(), x])
        .collect()
    }

    fn start(node: &Node, iv: Intervals) -> Icinga {
        Icinga::start_with(node, iv, &[], &[])
    }

    /// [`Icinga::start`] with more shipped files included (name, text) and more host variables.
    pub(crate) fn start_with(
        node: &Node,
        iv: Intervals,
        extra: &[(&str, String)],
        extra_vars: &[(String, Value)],
    ) -> Icinga {
        let dir = node.work.path().join("icinga2");
        for sub in ["data/certs", "log", "cache", "spool", "run"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let d = dir.display();
        // The API's certificate (CN = the endpoint's name), self-signed: it is its own CA.
        let certs = dir.join("data/certs");
        let pki = Cmd::new("icinga2")
            .args(["pki", "new-cert", "--cn", NODE, "--key"])
            .arg(certs.join(format!("{NODE}.key")))
            .arg("--cert")
            .arg(certs.join(format!("{NODE}.crt")))
            .args(Icinga::defines(&dir))
            .run();
        assert_eq!(pki.code, 0, "icinga2 pki new-cert: {pki:?}");
        std::fs::copy(certs.join(format!("{NODE}.crt")), certs.join("ca.crt")).unwrap();
        let port = free_port();
        node.quiet_cluster();
        // The shipped files, with this machine's paths and the scaled intervals: the
        // CheckCommands as they are, the service template and apply rule with the intervals.
        std::fs::copy(
            workspace_root().join("icinga2/k8s-storage-checks.conf"),
            dir.join("k8s-storage-checks.conf"),
        )
        .unwrap();
        let mut checks =
            std::fs::read_to_string(workspace_root().join("icinga2/k8s-storage-services.conf"))
                .unwrap();
        // The shipped template has the documented intervals (README, bench/time_to_alert).
        let doc = Intervals::DOCUMENTED;
        for (k, v) in [
            (
                format!("check_interval = {}m", doc.check),
                format!("check_interval = {}s", iv.check),
            ),
            (
                format!("retry_interval = {}m", doc.retry),
                format!("retry_interval = {}s", iv.retry),
            ),
            (
                format!("max_check_attempts = {}", doc.attempts),
                format!("max_check_attempts = {}", iv.attempts),
            ),
        ] {
            assert!(
                checks.contains(&k),
                "icinga2/k8s-storage-services.conf lacks {k:?}"
            );
            checks = checks.replace(&k, &v);
        }
        std::fs::write(dir.join("k8s-storage-services.conf"), checks).unwrap();
        let notify = dir.join("k8s-storage-notify");
        std::fs::copy(notify_script(), &notify).unwrap();
        let notifications = std::fs::read_to_string(
            workspace_root().join("icinga2/k8s-storage-notifications.conf"),
        )
        .unwrap();
        assert!(notifications.contains("\"/usr/local/bin/k8s-storage-notify\""));
        std::fs::write(
            dir.join("k8s-storage-notifications.conf"),
            notifications.replace(
                "/usr/local/bin/k8s-storage-notify",
                notify.to_str().unwrap(),
            ),
        )
        .unwrap();
        // The operator's part: the node (an agent: the checks run on its endpoint, here the
        // daemon's own), the cluster, an on-call user, and the node's variables.
        let node_checks: Vec<String> = ALL_CHECKS
            .iter()
            .filter(|c| !CLUSTER_CHECKS.contains(c))
            .map(|c| format!("\"k8s_{}\"", c.trim_start_matches("check_")))
            .collect();
        let cluster_checks: Vec<String> = CLUSTER_CHECKS
            .iter()
            .map(|c| format!("\"k8s_{}\"", c.trim_start_matches("check_")))
            .collect();
        let mut vars = BTreeMap::new();
        for c in ALL_CHECKS {
            vars.extend(node.icinga_vars(c));
        }
        vars.extend(extra_vars.iter().cloned());
        let mut includes = String::new();
        for (name, text) in extra {
            std::fs::write(dir.join(name), text).unwrap();
            includes.push_str(&format!("include \"{d}/{name}\"\n"));
        }
        let vars: String = vars
            .iter()
            .map(|(k, v)| format!("  vars.{k} = {v}\n"))
            .collect();
        let cfg = format!(
            r#"const PluginDir = "{plugins}"
const NodeName = "{NODE}"
const ZoneName = "{NODE}"
include <itl>
include <plugins>
include "{d}/k8s-storage-checks.conf"
include "{d}/k8s-storage-services.conf"
include "{d}/k8s-storage-notifications.conf"
{includes}
object Endpoint NodeName {{ }}
object Zone ZoneName {{ endpoints = [ NodeName ] }}
object ApiListener "api" {{
  bind_host = "127.0.0.1"
  bind_port = {port}
  accept_config = false
  accept_commands = false
}}
object ApiUser "{API_USER}" {{
  password = "{API_PASSWORD}"
  permissions = [ "objects/query/Host", "objects/query/Service", "objects/query/Downtime", "actions/acknowledge-problem", "actions/schedule-downtime", "actions/remove-downtime" ]
}}
object FileLogger "main-log" {{
  path = "{d}/log/icinga2.log"
  severity = "information"
}}
object CheckerComponent "checker" {{ }}
object NotificationComponent "notification" {{ }}

object Host NodeName {{
  check_command = "dummy"
  vars.dummy_state = 0
  check_interval = 60s
  max_check_attempts = 1
  zone = ZoneName
  vars.agent_endpoint = NodeName
  vars.k8s_storage_checks = [ {node_checks} ]
{vars}}}
object Host "{CLUSTER}" {{
  check_command = "dummy"
  vars.dummy_state = 0
  check_interval = 60s
  max_check_attempts = 1
  zone = ZoneName
  vars.agent_endpoint = NodeName
  vars.k8s_storage_checks = [ {cluster_checks} ]
{vars}}}
object User "storage-oncall" {{
  groups = [ "k8s-storage-oncall" ]
  email = "oncall@example.org"
  vars.k8s_storage_notify_append = "{d}/notifications.log"
  vars.k8s_storage_notify_state_dir = "{d}/notify-state"
}}
"#,
            plugins = node.plugin_dir.display(),
            node_checks = node_checks.join(", "),
            cluster_checks = cluster_checks.join(", "),
        );
        let conf = dir.join("icinga2.conf");
        std::fs::write(&conf, cfg).unwrap();

        // The daemon inside the node's mount namespace, where the PVs are mounted.
        let mut cmd = Command::new("nsenter");
        cmd.args([
            "-t",
            &node.ns.pid().to_string(),
            "-m",
            "--",
            "icinga2",
            "daemon",
            "-c",
        ])
        .arg(&conf)
        .args(Icinga::defines(&dir));
        let daemon = Daemon::start("icinga2", cmd, &dir.join("daemon.out"));
        let mut ic = Icinga { dir, port, daemon };
        let limit = Duration::from_secs(60);
        wait_for(
            "the Icinga 2 API to answer",
            limit,
            || ic.query().is_some(),
            String::new,
        );
        ic
    }

    fn curl(&self) -> Cmd {
        Cmd::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(self.dir.join("data/certs/ca.crt"))
            .arg("--resolve")
            .arg(format!("{NODE}:{}:127.0.0.1", self.port))
            .arg("-u")
            .arg(format!("{API_USER}:{API_PASSWORD}"))
            .arg("-H")
            .arg("Accept: application/json")
    }

    /// GET /v1/objects/services through the REST API: "host!service" → attrs. None while not
    /// answering.
    pub(crate) fn query(&mut self) -> Option<BTreeMap<String, Value>> {
        self.daemon.assert_running();
        let out = self
            .curl()
            .arg(format!(
                "https://{NODE}:{}/v1/objects/services?attrs=state&attrs=state_type&attrs=last_check_result&attrs=last_hard_state_change&attrs=downtime_depth&attrs=acknowledgement",
                self.port
            ))
            .run();
        if out.code != 0 {
            return None;
        }
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        Some(
            v["results"]
                .as_array()?
                .iter()
                .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["attrs"].clone())))
                .collect(),
        )
    }

    /// POST /v1/actions/<action> with a JSON body; panics unless Icinga says it did it.
    pub(crate) fn action(&self, action: &str, body: Value) {
        let out = self
            .curl()
            .args(["-X", "POST", "-d"])
            .arg(body.to_string())
            .arg(format!("https://{NODE}:{}/v1/actions/{action}", self.port))
            .run();
        let v: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
        assert!(
            v["results"][0]["code"].as_f64() == Some(200.0),
            "{action}: {out:?}"
        );
    }

    pub(crate) fn attrs(&mut self, host: &str, svc: &str) -> Option<Value> {
        self.query()?.remove(&format!("{host}!{svc}"))
    }

    /// (state, HARD?) of a checked service.
    pub(crate) fn state(&mut self, host: &str, svc: &str) -> Option<(u8, bool)> {
        let a = self.attrs(host, svc)?;
        if a["last_check_result"].is_null() {
            return None;
        }
        Some((a["state"].as_f64()? as u8, a["state_type"].as_f64()? == 1.0))
    }

    pub(crate) fn all_ok(&mut self) -> bool {
        let Some(q) = self.query() else {
            return false;
        };
        ALL_CHECKS.iter().all(|c| {
            let host = if CLUSTER_CHECKS.contains(c) {
                CLUSTER
            } else {
                NODE
            };
            q.get(&format!("{host}!{}", svc_of(c))).is_some_and(|a| {
                !a["last_check_result"].is_null()
                    && a["state"].as_f64() == Some(0.0)
                    && a["state_type"].as_f64() == Some(1.0)
            })
        })
    }

    /// When `svc` last got a result (execution end), to count checks.
    pub(crate) fn last_check(&mut self, svc: &str) -> f64 {
        self.attrs(NODE, svc)
            .and_then(|a| a["last_check_result"]["execution_end"].as_f64())
            .unwrap_or(0.0)
    }

    /// Wait until `n` more results of `svc` have come in.
    pub(crate) fn wait_checks(&mut self, svc: &str, n: usize, limit: Duration) {
        let mut last = self.last_check(svc);
        let mut seen = 0;
        let start = Instant::now();
        while seen < n {
            let now = self.last_check(svc);
            if now > last {
                seen += 1;
                last = now;
            }
            assert!(
                start.elapsed() < limit,
                "timed out waiting for {n} checks of {svc}\n{}",
                self.context()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The daemon's own output (its start-up counts of the objects it made).
    pub(crate) fn daemon_log(&self) -> String {
        self.daemon.log_text()
    }

    pub(crate) fn pages(&self) -> Vec<Page> {
        pages(&self.dir.join("notifications.log"))
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/icinga2.log")).unwrap_or_default()
    }

    pub(crate) fn context(&mut self) -> String {
        format!(
            "services: {:#?}\npages: {:#?}\nicinga2.log:\n{}\ndaemon:\n{}",
            self.query(),
            self.pages(),
            self.log(),
            self.daemon.log_text()
        )
    }
}

/// The service the shipped apply rule makes for a check: named like its CheckCommand.
pub(crate) fn svc_of(check: &str) -> String {
    format!("k8s_{}", check.trim_start_matches("check_"))
}

fn new_pages(ic: &std::cell::RefCell<Icinga>, seen: usize) -> Vec<Page> {
    ic.borrow().pages().into_iter().skip(seen).collect()
}

/// What the on-call person reads: the state, the subject named, the next step exactly as the
/// check printed it, the runbook line.
fn assert_page(p: &Page, state: &str, names: &str) {
    assert_eq!(p.state, state, "{p:#?}");
    assert!(
        p.subject
            .contains(&format!("{}/{} is {state}", p.host, p.service)),
        "{p:#?}"
    );
    assert!(
        p.body.contains(names),
        "the page should name {names}: {p:#?}"
    );
    // The pasteable step: every check's non-OK finding ends with `next:` (issue 26).
    assert!(p.body.contains("next: "), "no next step: {p:#?}");
    assert!(p.body.contains("runbook: "), "no runbook: {p:#?}");
    if p.service == "k8s_ro_pvc_mounts" {
        assert!(p.body.contains("/volumes/kubernetes.io~csi/"), "{p:#?}");
    }
}

fn recovered(ic: &std::cell::RefCell<Icinga>, seen: usize, svc: &str, limit: Duration) {
    let rec = |p: &Page| p.kind == "RECOVERY" && p.service == svc && p.state == "OK";
    wait_for(
        &format!("{svc} to recover"),
        limit,
        || new_pages(ic, seen).iter().any(rec),
        || ic.borrow_mut().context(),
    );
}

#[test]
fn icinga2_pages_for_every_incident_and_recovers() {
    let t = "icinga2_pages_for_every_incident_and_recovers";
    if !need_root(t) || !need_tool(t, "icinga2") || !need_tool(t, "curl") || !need_tool(t, "bindfs")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let vol2 = node.add_volume("billing", "postgres-0", "data-postgres-0");
    let vol3 = node.add_volume("billing", "redis-0", "data-redis-0");
    let icinga = std::cell::RefCell::new(Icinga::start(&node, iv));
    let ctx = || icinga.borrow_mut().context();
    let hard_limit = Duration::from_secs((iv.check + iv.retry * iv.attempts + 40) as u64);

    wait_for(
        "every service OK",
        hard_limit,
        || icinga.borrow_mut().all_ok(),
        ctx,
    );
    assert!(icinga.borrow().pages().is_empty(), "{}", ctx());

    for inc in Incident::ALL {
        let svc = &svc_of(inc.check());
        let seen = icinga.borrow().pages().len();
        let t0 = Instant::now();
        node.inject(inc);
        let mut saw_soft = false;
        wait_for(
            &format!("{svc} to leave OK ({})", inc.name()),
            hard_limit,
            || match icinga.borrow_mut().state(NODE, svc) {
                Some((s, hard)) if s != 0 => {
                    saw_soft = !hard;
                    true
                }
                _ => false,
            },
            ctx,
        );
        let first = t0.elapsed();
        assert!(
            saw_soft || iv.attempts == 1,
            "{svc}: the first non-OK result should be SOFT"
        );
        wait_for(
            &format!("{svc} HARD CRITICAL ({})", inc.name()),
            hard_limit,
            || icinga.borrow_mut().state(NODE, svc) == Some((2, true)),
            ctx,
        );
        let to_hard = t0.elapsed();
        let attrs = icinga.borrow_mut().attrs(NODE, svc).unwrap();
        let problem = |p: &Page| p.kind == "PROBLEM" && p.service == *svc;
        wait_for(
            &format!("the PROBLEM notification of {svc}"),
            Duration::from_secs(20),
            || new_pages(&icinga, seen).iter().any(problem),
            ctx,
        );
        let to_notify = t0.elapsed();
        let p = new_pages(&icinga, seen).into_iter().find(problem).unwrap();
        assert_page(&p, "CRITICAL", inc.names());
        // Perfdata split by Icinga into its values, labels intact.
        let perf: Vec<String> = attrs["last_check_result"]["performance_data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let want = match inc {
            Incident::Ext4ReadOnly => "ro_volumes=1;0;0;0",
            Incident::FuseDead => "stale_mounts=1",
            Incident::KubeletBackoff => "failing_volumes=1",
            Incident::StuckScheduled => "stuck_pods=1",
        };
        assert!(
            perf.iter().any(|p| p.starts_with(want)),
            "{svc}: perfdata {perf:?} lacks {want}"
        );
        assert!(
            perf.iter().all(|p| p.contains('=') && !p.contains(' ')),
            "{svc}: perfdata not split into values: {perf:?}"
        );
        report(
            "icinga2",
            inc,
            iv,
            "first non-OK result",
            first.as_secs_f64(),
        );
        report("icinga2", inc, iv, "HARD CRITICAL", to_hard.as_secs_f64());
        report(
            "icinga2",
            inc,
            iv,
            "notification written",
            to_notify.as_secs_f64(),
        );

        let seen = icinga.borrow().pages().len();
        let t1 = Instant::now();
        node.clear(inc);
        let limit = hard_limit + node.log_age_out_left();
        recovered(&icinga, seen, svc, limit);
        report(
            "icinga2",
            inc,
            iv,
            "recovery notified (after the fault is gone)",
            t1.elapsed().as_secs_f64(),
        );
        wait_for(
            "every service OK again",
            limit,
            || icinga.borrow_mut().all_ok(),
            ctx,
        );
    }

    // --- Three fault/recovery cycles in a row: each pages and recovers. ---
    let svc = &svc_of("check_ro_pvc_mounts");
    for cycle in 1..=3 {
        let seen = icinga.borrow().pages().len();
        node.inject(Incident::Ext4ReadOnly);
        wait_for(
            &format!("cycle {cycle}: the PROBLEM of {svc}"),
            hard_limit,
            || new_pages(&icinga, seen).iter().any(|p| p.kind == "PROBLEM"),
            ctx,
        );
        let p = new_pages(&icinga, seen)
            .into_iter()
            .find(|p| p.kind == "PROBLEM")
            .unwrap();
        assert_page(&p, "CRITICAL", EXT4_PVC);
        let seen = icinga.borrow().pages().len();
        node.clear(Incident::Ext4ReadOnly);
        recovered(&icinga, seen, svc, hard_limit);
    }

    // --- A second and a third volume failing while CRITICAL: each pages, naming the new one;
    // an unchanged set does not page again. ---
    let seen = icinga.borrow().pages().len();
    node.inject(Incident::Ext4ReadOnly);
    wait_for(
        "the PROBLEM of the first volume",
        hard_limit,
        || new_pages(&icinga, seen).iter().any(|p| p.kind == "PROBLEM"),
        ctx,
    );
    for (vol, pod) in [(vol2, "billing/postgres-0"), (vol3, "billing/redis-0")] {
        let seen = icinga.borrow().pages().len();
        node.fail_volume(vol);
        let pv = node.volume_pv(vol).to_string();
        wait_for(
            &format!("a PROBLEM for the newly failing {pod}"),
            hard_limit,
            || new_pages(&icinga, seen).iter().any(|p| p.kind == "PROBLEM"),
            ctx,
        );
        let p = new_pages(&icinga, seen).into_iter().next().unwrap();
        assert_page(&p, "CRITICAL", pod);
        assert!(
            p.subject.contains(&format!("newly failing: {pv}")),
            "{p:#?}"
        );
    }
    let seen = icinga.borrow().pages().len();
    icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    assert!(new_pages(&icinga, seen).is_empty(), "{}", ctx());

    // --- The name lookup fails for one run: not paged. ---
    let hits = Arc::new(AtomicUsize::new(0));
    let h = Arc::clone(&hits);
    node.api.fail_when(
        move |r| {
            // The name lookup of check_ro_pvc_mounts: the pods of the claims' namespace.
            let m = r.path == "/api/v1/namespaces/media/pods";
            if m {
                h.fetch_add(1, Ordering::SeqCst);
            }
            m
        },
        Fault::Http(503),
        Some(1),
    );
    wait_for(
        "the failed lookup's run and the next one",
        hard_limit,
        || hits.load(Ordering::SeqCst) >= 1,
        ctx,
    );
    icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    node.api.heal();
    assert!(
        new_pages(&icinga, seen).is_empty(),
        "a failed name lookup paged: {}",
        ctx()
    );

    // --- Acknowledged: a volume failing again does not page; the recovery does. ---
    let svc_name = format!("{NODE}!{svc}");
    icinga.borrow().action(
        "acknowledge-problem",
        json!({"type": "Service", "service": svc_name, "author": "storage-oncall",
               "comment": "looking at worker-04", "notify": true}),
    );
    wait_for(
        "the ACKNOWLEDGEMENT notification",
        hard_limit,
        || {
            new_pages(&icinga, seen)
                .iter()
                .any(|p| p.kind == "ACKNOWLEDGEMENT")
        },
        ctx,
    );
    let seen = icinga.borrow().pages().len();
    node.repair_volume(vol3);
    icinga.borrow_mut().wait_checks(svc, 1, hard_limit);
    node.fail_volume(vol3);
    icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    assert!(
        new_pages(&icinga, seen).is_empty(),
        "an acknowledged service paged: {}",
        ctx()
    );
    let seen = icinga.borrow().pages().len();
    node.clear(Incident::Ext4ReadOnly);
    node.repair_volume(vol2);
    node.repair_volume(vol3);
    recovered(&icinga, seen, svc, hard_limit);

    // --- In a downtime: nobody is paged; when it is removed with the fault still there, the
    // next check pages, and the recovery follows. ---
    let now = e2e::logs::now_secs();
    icinga.borrow().action(
        "schedule-downtime",
        json!({"type": "Service", "service": svc_name, "author": "storage-oncall",
               "comment": "disk swap", "start_time": now, "end_time": now + 3600, "fixed": true}),
    );
    wait_for(
        "the downtime to start",
        hard_limit,
        || {
            icinga
                .borrow_mut()
                .attrs(NODE, svc)
                .is_some_and(|a| a["downtime_depth"].as_f64() == Some(1.0))
        },
        ctx,
    );
    let seen = icinga.borrow().pages().len();
    node.inject(Incident::Ext4ReadOnly);
    wait_for(
        &format!("{svc} HARD CRITICAL in the downtime"),
        hard_limit,
        || icinga.borrow_mut().state(NODE, svc) == Some((2, true)),
        ctx,
    );
    icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    assert!(
        new_pages(&icinga, seen).iter().all(|p| p.kind != "PROBLEM"),
        "a service in downtime paged: {}",
        ctx()
    );
    icinga.borrow().action(
        "remove-downtime",
        json!({"type": "Service", "service": svc_name}),
    );
    wait_for(
        "the PROBLEM after the downtime",
        hard_limit,
        || new_pages(&icinga, seen).iter().any(|p| p.kind == "PROBLEM"),
        ctx,
    );
    let p = new_pages(&icinga, seen)
        .into_iter()
        .find(|p| p.kind == "PROBLEM")
        .unwrap();
    assert_page(&p, "CRITICAL", EXT4_PVC);
    let seen = icinga.borrow().pages().len();
    node.clear(Incident::Ext4ReadOnly);
    recovered(&icinga, seen, svc, hard_limit);

    let log = icinga.borrow().log();
    let bad: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("warning/") || l.contains("critical/"))
        .collect();
    assert!(bad.is_empty(), "icinga2.log has warnings: {bad:#?}");
    println!("icinga2 engine test took {:?}", started.elapsed());
    // Nothing the test started is left running.
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(icinga);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// The fleet layout validates with the real `icinga2 daemon -C`: `icinga2/zones.conf.example`
/// (master, satellite, agents), the CheckCommands, the service template and apply rule, the
/// example hosts as shipped (`k8s-storage-hosts.conf.example`: a node and the cluster, each with
/// the zone its command_endpoint services need) and the notifications, with an on-call user:
/// one service per listed check (eight on the node, four on the cluster), one notification per
/// service.
#[test]
fn icinga2_zones_example_and_notifications_validate() {
    let t = "icinga2_zones_example_and_notifications_validate";
    if !need_tool(t, "icinga2") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let root = workspace_root().join("icinga2");
    let cfg = work.path().join("icinga2.conf");
    let include = |f: &str| format!("include \"{}\"\n", root.join(f).display());
    std::fs::write(
        &cfg,
        format!(
            r#"const PluginDir = "/usr/lib/nagios/plugins"
const NodeName = "icinga-master"
const ZoneName = "master"
include <itl>
include <plugins>
{zones}{checks}{services}{hosts}{notifications}object NotificationComponent "notification" {{ }}
object User "alice" {{ email = "alice@example.org"; groups = [ "k8s-storage-oncall" ] }}
"#,
            zones = include("zones.conf.example"),
            checks = include("k8s-storage-checks.conf"),
            services = include("k8s-storage-services.conf"),
            hosts = include("k8s-storage-hosts.conf.example"),
            notifications = include("k8s-storage-notifications.conf"),
        ),
    )
    .unwrap();
    let out = Cmd::new("icinga2")
        .args(["daemon", "-C", "-c"])
        .arg(&cfg)
        .run();
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "icinga2 daemon -C:\n{all}");
    // The node's checks and the cluster's (CLUSTER_CHECKS), plus the cluster's
    // stuck_terminating with --all-nodes.
    let n = ALL_CHECKS.len() + 1;
    assert!(
        all.contains(&format!("Instantiated {n} Services"))
            && all.contains(&format!("Instantiated {n} Notifications"))
            && all.contains("Instantiated 2 Hosts"),
        "one service and one notification per check:\n{all}"
    );
    assert!(!all.contains("warning/"), "{all}");
}
