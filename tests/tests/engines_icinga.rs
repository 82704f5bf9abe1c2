//! Icinga 2 end to end: the real `icinga2 daemon` (as root, its own config, state, log and run
//! directories under a temp dir) runs inside the node's mount namespace with the shipped
//! CheckCommands (`icinga2/k8s-storage-checks.conf`, local execution), one service per check.
//! The REST API (ApiListener with a certificate made by `icinga2 pki new-cert`, on a loopback
//! port, an ApiUser with a password and query permissions only) is how the test reads states.
//! Each incident's real fault is injected in turn: the service must go SOFT then HARD CRITICAL and
//! the notification command must write the PROBLEM; after the fault is removed, the service
//! recovers (HARD OK, RECOVERY notification). Perfdata is split by Icinga into its values and the
//! log holds no warning.

use e2e::engines::{free_port, report, wait_for, Daemon, Incident, Intervals, Node, CHECKS, NODE};
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

const API_USER: &str = "storage-monitor";
const API_PASSWORD: &str = "Zm9vYmFyLWVuZ2luZXM";

struct Icinga {
    dir: PathBuf,
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
        let shipped = workspace_root().join("icinga2/k8s-storage-checks.conf");
        let mut cfg = format!(
            r#"const PluginDir = "{plugins}"
const NodeName = "{NODE}"
const ZoneName = "{NODE}"
include <itl>
include <plugins>
include "{shipped}"

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
  permissions = [ "objects/query/Host", "objects/query/Service" ]
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
}}
object User "storage-oncall" {{ }}
object NotificationCommand "notify-by-file" {{
  command = [ "/bin/sh", "-c", "printf '%s\t%s\t%s\t%s\t%s\n' \"$$NT\" \"$$NTYPE\" \"$$SVC\" \"$$STATE\" \"$$(printf '%s' \"$$OUT\" | tr '\n' ' ')\" >> '{d}/notifications.log'" ]
  env = {{
    NT = "$icinga.timet$"
    NTYPE = "$notification.type$"
    SVC = "$service.name$"
    STATE = "$service.state$"
    OUT = "$service.output$"
  }}
}}
apply Notification "storage-oncall" to Service {{
  command = "notify-by-file"
  users = [ "storage-oncall" ]
  interval = 0
  assign where host.name == NodeName
}}
"#,
            plugins = node.plugin_dir.display(),
            shipped = shipped.display(),
        );
        for c in CHECKS {
            let mut vars = String::new();
            for (k, v) in node.icinga_vars(c) {
                vars.push_str(&format!("  vars.{k} = {v}\n"));
            }
            cfg.push_str(&format!(
                "object Service \"{c}\" {{\n  host_name = NodeName\n  check_command = \"k8s_{cmd}\"\n  check_interval = {ci}s\n  retry_interval = {ri}s\n  max_check_attempts = {a}\n{vars}}}\n",
                cmd = c.trim_start_matches("check_"),
                ci = iv.check,
                ri = iv.retry,
                a = iv.attempts
            ));
        }
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

    /// GET /v1/objects/services through the REST API: name → attrs. None while not answering.
    fn query(&mut self) -> Option<std::collections::BTreeMap<String, Value>> {
        self.daemon.assert_running();
        let out = Cmd::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(self.dir.join("data/certs/ca.crt"))
            .arg("--resolve")
            .arg(format!("{NODE}:{}:127.0.0.1", self.port))
            .arg("-u")
            .arg(format!("{API_USER}:{API_PASSWORD}"))
            .arg("-H")
            .arg("Accept: application/json")
            .arg(format!(
                "https://{NODE}:{}/v1/objects/services?attrs=state&attrs=state_type&attrs=last_check_result&attrs=last_hard_state_change",
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
                .filter_map(|r| {
                    let name = r["name"].as_str()?.split_once('!')?.1.to_string();
                    Some((name, r["attrs"].clone()))
                })
                .collect(),
        )
    }

    /// (state, HARD?) of a checked service.
    fn state(&mut self, svc: &str) -> Option<(u8, bool)> {
        let s = self.query()?;
        let a = s.get(svc)?;
        if a["last_check_result"].is_null() {
            return None;
        }
        Some((a["state"].as_f64()? as u8, a["state_type"].as_f64()? == 1.0))
    }

    fn notifications(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("notifications.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log/icinga2.log")).unwrap_or_default()
    }

    fn context(&mut self) -> String {
        format!(
            "services: {:#?}\nnotifications: {:?}\nicinga2.log:\n{}\ndaemon:\n{}",
            self.query(),
            self.notifications(),
            self.log(),
            self.daemon.log_text()
        )
    }
}

#[test]
fn icinga2_pages_for_every_incident_and_recovers() {
    let t = "icinga2_pages_for_every_incident_and_recovers";
    if !need_root(t) || !need_tool(t, "icinga2") || !need_tool(t, "curl") || !need_tool(t, "bindfs")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let icinga = std::cell::RefCell::new(Icinga::start(&node, iv));
    let ctx = || icinga.borrow_mut().context();
    let hard_limit = Duration::from_secs((iv.check + iv.retry * iv.attempts + 40) as u64);

    wait_for(
        "every service OK",
        hard_limit,
        || {
            CHECKS
                .iter()
                .all(|c| icinga.borrow_mut().state(c) == Some((0, true)))
        },
        ctx,
    );

    for inc in Incident::ALL {
        let svc = inc.check();
        let seen = icinga.borrow().notifications().len();
        let t0 = Instant::now();
        node.inject(inc);
        let mut saw_soft = false;
        wait_for(
            &format!("{svc} to leave OK ({})", inc.name()),
            hard_limit,
            || match icinga.borrow_mut().state(svc) {
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
            || icinga.borrow_mut().state(svc) == Some((2, true)),
            ctx,
        );
        let to_hard = t0.elapsed();
        let attrs = icinga.borrow_mut().query().unwrap()[svc].clone();
        let output = attrs["last_check_result"]["output"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            output.contains(inc.names()),
            "{svc} output should name {}: {output}",
            inc.names()
        );
        let problem = |n: &Vec<String>| n.len() == 5 && n[1] == "PROBLEM" && n[2] == svc;
        wait_for(
            &format!("the PROBLEM notification of {svc}"),
            Duration::from_secs(20),
            || icinga.borrow().notifications()[seen..].iter().any(problem),
            ctx,
        );
        let to_notify = t0.elapsed();
        let n = icinga.borrow().notifications()[seen..]
            .iter()
            .find(|n| problem(n))
            .cloned()
            .unwrap();
        assert_eq!(n[3], "CRITICAL", "{n:?}");
        assert!(n[4].contains(inc.names()), "{n:?}");
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

        let seen = icinga.borrow().notifications().len();
        let t1 = Instant::now();
        node.clear(inc);
        let limit = hard_limit + node.log_age_out_left();
        wait_for(
            &format!("{svc} to recover ({})", inc.name()),
            limit,
            || {
                icinga.borrow().notifications()[seen..]
                    .iter()
                    .any(|n| n.len() == 5 && n[1] == "RECOVERY" && n[2] == svc && n[3] == "OK")
            },
            ctx,
        );
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
            || {
                CHECKS
                    .iter()
                    .all(|c| icinga.borrow_mut().state(c) == Some((0, true)))
            },
            ctx,
        );
    }

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
