//! Nagios 4 core end to end, as an operator runs it: the real `nagios4` daemon with Debian's own
//! `/etc/nagios4/nagios.cfg` (flap detection on, `illegal_macro_output_chars` as shipped, the
//! stock object templates) plus only what our shipped files set (`nagios/nagios-main.cfg`,
//! `nagios/k8s-storage-checks.cfg`: commands, templates, hostgroups, the notification command
//! `nagios/k8s-storage-notify`), every path moved under a temp dir and time scaled through the
//! check and retry intervals only. Each service calls the real `check_nrpe` with a client
//! certificate against the real NRPE daemon (`nrpe.d/k8s-storage-checks-tls.cfg`:
//! `ssl_client_certs=2`), which runs the shipped nrpe.d commands in the node's mount namespace.
//!
//! What is asserted is what the on-call person receives (the notification's text): for each
//! incident a PROBLEM naming it with its pasteable next step and the runbook, then a RECOVERY;
//! three fault/recovery cycles in a row, each paged (flap detection as shipped); a second and a
//! third volume failing on the already-CRITICAL service, each paged, an unchanged set not; a name
//! lookup failing for one run, not paged; an acknowledgement and a downtime (silence, then
//! recovery); NRPE refusing a client without a certificate; NRPE v2 packets.

use e2e::apiserver::Fault;
use e2e::engines::{
    free_port, notify_script, pages, report, start_nrpe, wait_for, Daemon, Incident, Intervals,
    Node, NrpeTls, Page, ALL_CHECKS, EXT4_PV, EXT4_PVC, NODE,
};
use e2e::{need_root, need_tool, workspace_root, Cmd};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NAGIOS: &str = "/usr/sbin/nagios4";
const STOCK_CFG: &str = "/etc/nagios4/nagios.cfg";
const CHECK_NRPE: &str = "/usr/lib/nagios/plugins/check_nrpe";
const CHECK_DUMMY: &str = "/usr/lib/nagios/plugins/check_dummy";
/// The node's host object (hostgroup k8s-storage-nodes) and the cluster's (k8s-storage-cluster).
pub(crate) const HOST: &str = NODE;
const CLUSTER: &str = "prod-cluster";
const CLUSTER_CHECKS: [&str; 3] = [
    "check_jiva_rep_crashloop",
    "check_watch_cache",
    "check_volume_attachments",
];
/// The cluster host's check_stuck_terminating over every node (NRPE command of the cluster node).
const CLUSTER_ALL_NODES: &str = "check_stuck_terminating_all_nodes";

pub(crate) struct Nagios {
    pub(crate) dir: PathBuf,
    daemon: Daemon,
}

/// One `servicestatus` block of status.dat.
pub(crate) type Block = BTreeMap<String, String>;

/// Debian's nagios.cfg settings that name a file or directory: moved under the test's dir.
const PATH_KEYS: [&str; 12] = [
    "log_file",
    "object_cache_file",
    "precached_object_file",
    "status_file",
    "command_file",
    "lock_file",
    "temp_file",
    "temp_path",
    "log_archive_path",
    "check_result_path",
    "state_retention_file",
    "debug_file",
];

/// Test-only settings, each argued:
/// - `interval_length=1`: the time scale; every interval of the objects (check, retry, spread)
///   is counted in seconds instead of minutes, nothing else changes.
/// - `status_update_interval=1`: how often status.dat (the CGI's file, which this test reads
///   states from) is written; it changes nothing that is checked, alerted or notified.
/// - `use_syslog=0`: the log goes to the test's log_file only, not the machine's syslog.
/// - `check_for_updates=0`: no request to nagios.org (the test machine has no network).
///
/// The reaper (`check_result_reaper_frequency=10`) stays as shipped: Nagios 4 handles the results
/// of its workers as they arrive; the reaper only reads spooled (passive) results.
const TEST_ONLY: [(&str, &str); 4] = [
    ("interval_length", "1"),
    ("status_update_interval", "1"),
    ("use_syslog", "0"),
    ("check_for_updates", "0"),
];

/// Debian's stock object files that stay (the templates ours build on); the sample hosts and
/// contacts (localhost.cfg, contacts.cfg) are the operator's to replace, as the test does.
const STOCK_OBJECTS: [&str; 3] = [
    "/etc/nagios4/objects/commands.cfg",
    "/etc/nagios4/objects/timeperiods.cfg",
    "/etc/nagios4/objects/templates.cfg",
];

/// The main configuration: Debian's nagios.cfg line by line, paths moved to `dir`, the object
/// files replaced by ours, the test-only settings above, and our nagios-main.cfg appended.
fn main_cfg(dir: &Path) -> String {
    let stock = std::fs::read_to_string(STOCK_CFG).expect("Debian's /etc/nagios4/nagios.cfg");
    let d = dir.display();
    let mut out = String::new();
    let mut seen = Vec::new();
    for l in stock.lines() {
        let t = l.trim();
        let Some((k, v)) = t.split_once('=') else {
            continue;
        };
        if t.starts_with('#') {
            continue;
        }
        seen.push(k.to_string());
        let line = if PATH_KEYS.contains(&k) {
            let name = Path::new(v).file_name().unwrap().to_string_lossy();
            format!("{k}={d}/{name}")
        } else if k == "cfg_file" {
            if !STOCK_OBJECTS.contains(&v) {
                continue;
            }
            t.to_string()
        } else if k == "cfg_dir" && v == "/etc/nagios4/conf.d" {
            format!("cfg_dir={d}/conf.d")
        } else if let Some((_, val)) = TEST_ONLY.iter().find(|(tk, _)| *tk == k) {
            format!("{k}={val}")
        } else {
            t.to_string()
        };
        out.push_str(&line);
        out.push('\n');
    }
    // The stock settings this test relies on being stock.
    for (k, v) in [
        ("enable_flap_detection", "1"),
        ("illegal_macro_output_chars", "`~$&|'\"<>"),
        ("enable_environment_macros", "0"),
        ("process_performance_data", "0"),
    ] {
        assert!(
            stock.lines().any(|l| l.trim() == format!("{k}={v}")),
            "Debian's nagios.cfg no longer has {k}={v}"
        );
    }
    for (k, _) in TEST_ONLY {
        assert!(seen.iter().any(|s| s == k), "{k} is not in {STOCK_CFG}");
    }
    let ours = std::fs::read_to_string(workspace_root().join("nagios/nagios-main.cfg")).unwrap();
    for l in ours
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let k = l.split_once('=').unwrap().0;
        out = out
            .lines()
            .filter(|x| !x.starts_with(&format!("{k}=")))
            .map(|x| format!("{x}\n"))
            .collect();
        out.push_str(l);
        out.push('\n');
    }
    out
}

impl Nagios {
    fn start(node: &Node, nrpe_port: u16, tls: &NrpeTls, iv: Intervals) -> Nagios {
        Nagios::start_with(node, nrpe_port, tls, iv, &[])
    }

    /// [`Nagios::start`] with more shipped object files in conf.d (name, text).
    pub(crate) fn start_with(
        node: &Node,
        nrpe_port: u16,
        tls: &NrpeTls,
        iv: Intervals,
        extra: &[(&str, String)],
    ) -> Nagios {
        let dir = node.work.path().join("nagios");
        // conf.d for the object files; the directories the moved paths name (temp_path,
        // log_archive_path, check_result_path).
        for sub in ["conf.d", "tmp", "archives", "checkresults"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let d = dir.display();
        std::fs::write(dir.join("nagios.cfg"), main_cfg(&dir)).unwrap();

        // The notification script, where the nagios user may run it.
        let notify = dir.join("k8s-storage-notify");
        std::fs::copy(notify_script(), &notify).unwrap();
        std::fs::set_permissions(&notify, std::fs::Permissions::from_mode(0o755)).unwrap();

        // The shipped objects, with this machine's paths (certificates, script, its state
        // directory, NRPE's port) and the scaled intervals.
        let shipped =
            std::fs::read_to_string(workspace_root().join("nagios/k8s-storage-checks.cfg"))
                .unwrap();
        let tls_dir = format!("{}/", tls.dir.display());
        let mut objects = shipped
            .replace("/etc/nagios4/k8s-storage-checks/", &tls_dir)
            .replace(
                "-H $HOSTADDRESS$ ",
                &format!("-H $HOSTADDRESS$ -p {nrpe_port} "),
            )
            .replace(
                "/usr/local/bin/k8s-storage-notify --state-dir /var/lib/nagios4/k8s-storage-notify",
                &format!(
                    "{} --append {d}/notifications.log --state-dir {d}/notify-state",
                    notify.display()
                ),
            );
        // The shipped template has the documented intervals (README, bench/time_to_alert), in
        // minutes; the test's are the same numbers in seconds, or shorter ones.
        let doc = Intervals::DOCUMENTED;
        for (k, v) in [
            (
                format!("check_interval          {}", doc.check),
                format!("check_interval          {}", iv.check),
            ),
            (
                format!("retry_interval          {}", doc.retry),
                format!("retry_interval          {}", iv.retry),
            ),
            (
                format!("max_check_attempts      {}", doc.attempts),
                format!("max_check_attempts      {}", iv.attempts),
            ),
        ] {
            assert!(
                objects.contains(&k),
                "nagios/k8s-storage-checks.cfg lacks {k:?}"
            );
            objects = objects.replace(&k, &v);
        }
        assert!(objects.contains(&format!("-p {nrpe_port}")) && objects.contains(&tls_dir));
        std::fs::write(dir.join("conf.d/k8s-storage-checks.cfg"), objects).unwrap();
        for (name, text) in extra {
            std::fs::write(dir.join("conf.d").join(name), text).unwrap();
        }
        // The operator's part: the node, the cluster, an on-call contact.
        std::fs::write(
            dir.join("conf.d/site.cfg"),
            format!(
                "define command {{
    command_name host-alive
    command_line {CHECK_DUMMY} 0 alive
}}
define host {{
    use             k8s-storage-node
    host_name       {HOST}
    address         127.0.0.1
    check_command   host-alive
}}
define host {{
    use             k8s-storage-cluster
    host_name       {CLUSTER}
    address         127.0.0.1
    check_command   host-alive
}}
define contact {{
    use             k8s-storage-oncall
    contact_name    storage-oncall
    email           oncall@example.org
}}
"
            ),
        )
        .unwrap();
        let chown = Command::new("chown")
            .args(["-R", "nagios:nagios"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(chown.success());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();

        // The configuration is valid as the core reads it, without a single warning.
        let v = Cmd::new(NAGIOS).arg("-v").arg(dir.join("nagios.cfg")).run();
        assert_eq!(v.code, 0, "nagios4 -v:\n{}{}", v.stdout, v.stderr);
        assert!(
            v.stdout.contains("Total Warnings: 0") && v.stdout.contains("Total Errors:   0"),
            "nagios4 -v:\n{}",
            v.stdout
        );
        assert!(
            v.stdout
                .contains(&format!("Checked {} services.", ALL_CHECKS.len() + 1)),
            "one service per check (eight per node, four per cluster: {CLUSTER_ALL_NODES} too):\n{}",
            v.stdout
        );

        let mut cmd = Command::new(NAGIOS);
        cmd.arg(dir.join("nagios.cfg"));
        let daemon = Daemon::start("nagios4", cmd, &dir.join("daemon.out"));
        Nagios { dir, daemon }
    }

    /// status.dat's blocks of one kind (`servicestatus`, `servicecomment`, `servicedowntime`).
    pub(crate) fn blocks(&mut self, kind: &str) -> Vec<Block> {
        self.daemon.assert_running();
        let text = std::fs::read_to_string(self.dir.join("status.dat")).unwrap_or_default();
        let mut out = Vec::new();
        let mut cur: Option<Block> = None;
        let open = format!("{kind} {{");
        for l in text.lines() {
            let l = l.trim();
            if l == open {
                cur = Some(Block::new());
            } else if l == "}" {
                if let Some(b) = cur.take() {
                    out.push(b);
                }
            } else if let Some(b) = cur.as_mut() {
                if let Some((k, v)) = l.split_once('=') {
                    b.insert(k.to_string(), v.to_string());
                }
            }
        }
        out
    }

    pub(crate) fn service(&mut self, host: &str, svc: &str) -> Option<Block> {
        self.blocks("servicestatus").into_iter().find(|b| {
            b.get("host_name").map(String::as_str) == Some(host)
                && b.get("service_description").map(String::as_str) == Some(svc)
        })
    }

    /// (state, HARD?) of a checked service.
    pub(crate) fn state(&mut self, host: &str, svc: &str) -> Option<(u8, bool)> {
        let b = self.service(host, svc)?;
        if b.get("has_been_checked").map(String::as_str) != Some("1") {
            return None;
        }
        Some((
            b.get("current_state")?.parse().ok()?,
            b.get("state_type").map(String::as_str) == Some("1"),
        ))
    }

    pub(crate) fn all_ok(&mut self) -> bool {
        ALL_CHECKS.iter().all(|c| {
            let host = if CLUSTER_CHECKS.contains(c) {
                CLUSTER
            } else {
                HOST
            };
            self.state(host, c) == Some((0, true))
        }) && self.state(CLUSTER, CLUSTER_ALL_NODES) == Some((0, true))
    }

    pub(crate) fn pages(&self) -> Vec<Page> {
        pages(&self.dir.join("notifications.log"))
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("nagios.log")).unwrap_or_default()
    }

    /// How many HARD non-OK results of `svc` the core has logged (a volatile service logs one per
    /// check).
    pub(crate) fn hard_alerts(&self, svc: &str) -> usize {
        let p = format!("SERVICE ALERT: {HOST};{svc};");
        self.log()
            .lines()
            .filter(|l| l.contains(&p) && l.contains(";HARD;") && !l.contains(";OK;"))
            .count()
    }

    /// An external command through the command file, as the CGI writes it.
    pub(crate) fn command(&self, cmd: &str) {
        use std::io::Write;
        let now = e2e::logs::now_secs();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("nagios.cmd"))
            .expect("nagios.cmd");
        writeln!(f, "[{now}] {cmd}").unwrap();
    }

    pub(crate) fn context(&mut self) -> String {
        format!(
            "status: {:#?}\npages: {:#?}\nnagios.log:\n{}",
            self.blocks("servicestatus"),
            self.pages(),
            self.log()
        )
    }
}

fn new_pages(n: &std::cell::RefCell<Nagios>, seen: usize) -> Vec<Page> {
    n.borrow().pages().into_iter().skip(seen).collect()
}

#[test]
fn nagios_pages_for_every_incident_and_recovers() {
    let t = "nagios_pages_for_every_incident_and_recovers";
    if !need_root(t)
        || !need_tool(t, NAGIOS)
        || !need_tool(t, STOCK_CFG)
        || !need_tool(t, "/usr/sbin/nrpe")
        || !need_tool(t, CHECK_NRPE)
        || !need_tool(t, CHECK_DUMMY)
        || !need_tool(t, "bindfs")
        || !need_tool(t, "openssl")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    // Two more volumes of other pods, for the second and third failing volume.
    let vol2 = node.add_volume("billing", "postgres-0", "data-postgres-0");
    let vol3 = node.add_volume("billing", "redis-0", "data-redis-0");
    let port = free_port();
    let tls = NrpeTls::generate(&node.work.path().join("tls"));
    let commands = node.nrpe_commands_all();
    let nrpe = start_nrpe(&node, &commands, port, Some(&tls));
    let nagios = std::cell::RefCell::new(Nagios::start(&node, port, &tls, iv));
    let ctx = || nagios.borrow_mut().context();
    // Time for one HARD transition: the first check, then the retries, plus scheduling slack.
    let hard_limit = Duration::from_secs((iv.check + iv.retry * iv.attempts + 40) as u64);

    // A healthy node and cluster: every service checked and OK, nobody paged.
    wait_for(
        "every service OK",
        hard_limit,
        || nagios.borrow_mut().all_ok(),
        ctx,
    );
    assert!(nagios.borrow().pages().is_empty(), "{}", ctx());

    // --- Every incident pages, with its next step and the runbook, and recovers. ---
    for inc in Incident::ALL {
        let svc = inc.check();
        let seen = nagios.borrow().pages().len();
        let t0 = Instant::now();
        node.inject(inc);
        wait_for(
            &format!("{svc} to leave OK ({})", inc.name()),
            hard_limit,
            || matches!(nagios.borrow_mut().state(HOST, svc), Some((s, _)) if s != 0),
            ctx,
        );
        let first = t0.elapsed();
        // SOFT first (max_check_attempts > 1), then HARD CRITICAL.
        wait_for(
            &format!("{svc} HARD CRITICAL ({})", inc.name()),
            hard_limit,
            || nagios.borrow_mut().state(HOST, svc) == Some((2, true)),
            ctx,
        );
        let to_hard = t0.elapsed();
        let problem = |p: &Page| p.kind == "PROBLEM" && p.service == svc && p.host == HOST;
        wait_for(
            &format!("the PROBLEM notification of {svc}"),
            Duration::from_secs(20),
            || new_pages(&nagios, seen).iter().any(problem),
            ctx,
        );
        let to_notify = t0.elapsed();
        let p = new_pages(&nagios, seen).into_iter().find(problem).unwrap();
        assert_page(&p, "CRITICAL", inc.names());
        let log = nagios.borrow().log();
        let soft = format!("SERVICE ALERT: {HOST};{svc};CRITICAL;SOFT;1;");
        let hard = format!("SERVICE ALERT: {HOST};{svc};CRITICAL;HARD;{};", iv.attempts);
        let (si, hi) = (log.find(&soft), log.find(&hard));
        assert!(
            si.is_some() && hi.is_some() && si < hi,
            "{soft} then {hard} expected:\n{log}"
        );
        report(
            "nagios",
            inc,
            iv,
            "first non-OK result",
            first.as_secs_f64(),
        );
        report("nagios", inc, iv, "HARD CRITICAL", to_hard.as_secs_f64());
        report(
            "nagios",
            inc,
            iv,
            "notification written",
            to_notify.as_secs_f64(),
        );

        let seen = nagios.borrow().pages().len();
        let t1 = Instant::now();
        node.clear(inc);
        let limit = hard_limit + node.log_age_out_left();
        recovered(&nagios, seen, svc, limit);
        report(
            "nagios",
            inc,
            iv,
            "recovery notified (after the fault is gone)",
            t1.elapsed().as_secs_f64(),
        );
        wait_for(
            "every service OK again",
            limit,
            || nagios.borrow_mut().all_ok(),
            ctx,
        );
    }

    // --- Three fault/recovery cycles in a row: each one pages and recovers (stock flap
    // detection would have silenced the third). ---
    let svc = "check_ro_pvc_mounts";
    for cycle in 1..=3 {
        let seen = nagios.borrow().pages().len();
        node.inject(Incident::Ext4ReadOnly);
        wait_for(
            &format!("cycle {cycle}: the PROBLEM of {svc}"),
            hard_limit,
            || {
                new_pages(&nagios, seen)
                    .iter()
                    .any(|p| p.kind == "PROBLEM" && p.service == svc)
            },
            ctx,
        );
        let p = new_pages(&nagios, seen)
            .into_iter()
            .find(|p| p.kind == "PROBLEM")
            .unwrap();
        assert_page(&p, "CRITICAL", EXT4_PVC);
        let seen = nagios.borrow().pages().len();
        node.clear(Incident::Ext4ReadOnly);
        recovered(&nagios, seen, svc, hard_limit);
    }
    let b = nagios.borrow_mut().service(HOST, svc).unwrap();
    assert_eq!(b["is_flapping"], "0", "{b:?}");
    assert!(!nagios.borrow().log().contains("FLAPPING"), "{}", ctx());

    // --- A second and a third volume failing while the service is CRITICAL: each pages,
    // naming the new one; an unchanged set does not page again. ---
    let seen = nagios.borrow().pages().len();
    node.inject(Incident::Ext4ReadOnly);
    wait_for(
        "the PROBLEM of the first volume",
        hard_limit,
        || new_pages(&nagios, seen).iter().any(|p| p.kind == "PROBLEM"),
        ctx,
    );
    for (i, (vol, pod)) in [(vol2, "billing/postgres-0"), (vol3, "billing/redis-0")]
        .into_iter()
        .enumerate()
    {
        let seen = nagios.borrow().pages().len();
        node.fail_volume(vol);
        let pv = node.volume_pv(vol).to_string();
        wait_for(
            &format!("a PROBLEM for the newly failing {pod}"),
            hard_limit,
            || {
                new_pages(&nagios, seen)
                    .iter()
                    .any(|p| p.kind == "PROBLEM" && p.service == svc)
            },
            ctx,
        );
        let p = new_pages(&nagios, seen).into_iter().next().unwrap();
        assert_page(&p, "CRITICAL", pod);
        assert!(
            p.subject.contains(&format!("newly failing: {pv}")),
            "the page should say which volume is new: {p:#?}"
        );
        assert!(
            p.body
                .lines()
                .next()
                .unwrap()
                .contains(&format!("{} of", i + 2)),
            "{p:#?}"
        );
    }
    // Two more CRITICAL results with the same three volumes: nothing new, no page.
    let seen = nagios.borrow().pages().len();
    let alerts = nagios.borrow().hard_alerts(svc);
    wait_for(
        "two more checks of the unchanged set",
        hard_limit,
        || nagios.borrow().hard_alerts(svc) >= alerts + 2,
        ctx,
    );
    assert!(new_pages(&nagios, seen).is_empty(), "{}", ctx());

    // --- The name lookup fails for one run: the alarm stands, names are missing for that run;
    // the set of failing volumes is the same, so nobody is paged. ---
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
        "the name lookup to fail",
        hard_limit,
        || hits.load(Ordering::SeqCst) >= 1,
        ctx,
    );
    // The failed lookup's run (in progress now) and the next one.
    let alerts = nagios.borrow().hard_alerts(svc);
    wait_for(
        "the failed lookup's run and the next one",
        hard_limit,
        || nagios.borrow().hard_alerts(svc) >= alerts + 2,
        ctx,
    );
    node.api.heal();
    assert!(
        new_pages(&nagios, seen).is_empty(),
        "a failed name lookup paged: {}",
        ctx()
    );

    // --- Acknowledged: a volume failing again on the acknowledged service does not page;
    // the recovery does. ---
    nagios.borrow().command(&format!(
        "ACKNOWLEDGE_SVC_PROBLEM;{HOST};{svc};1;1;0;storage-oncall;looking at worker-04"
    ));
    wait_for(
        "the ACKNOWLEDGEMENT notification",
        hard_limit,
        || {
            new_pages(&nagios, seen)
                .iter()
                .any(|p| p.kind == "ACKNOWLEDGEMENT")
        },
        ctx,
    );
    let seen = nagios.borrow().pages().len();
    node.repair_volume(vol3);
    let alerts = nagios.borrow().hard_alerts(svc);
    wait_for(
        "a check with two volumes",
        hard_limit,
        || nagios.borrow().hard_alerts(svc) > alerts,
        ctx,
    );
    node.fail_volume(vol3);
    let alerts = nagios.borrow().hard_alerts(svc);
    wait_for(
        "two checks with the third volume failing again",
        hard_limit,
        || nagios.borrow().hard_alerts(svc) >= alerts + 2,
        ctx,
    );
    assert!(
        new_pages(&nagios, seen).is_empty(),
        "an acknowledged service paged: {}",
        ctx()
    );
    let seen = nagios.borrow().pages().len();
    node.clear(Incident::Ext4ReadOnly);
    node.repair_volume(vol2);
    node.repair_volume(vol3);
    recovered(&nagios, seen, svc, hard_limit);

    // --- In a downtime: the fault pages nobody; when the downtime is cancelled with the fault
    // still there, the next check pages (volatile), and the recovery follows. ---
    let now = e2e::logs::now_secs();
    nagios.borrow().command(&format!(
        "SCHEDULE_SVC_DOWNTIME;{HOST};{svc};{now};{};1;0;3600;storage-oncall;disk swap",
        now + 3600
    ));
    wait_for(
        "the downtime to start",
        hard_limit,
        || {
            nagios
                .borrow_mut()
                .service(HOST, svc)
                .is_some_and(|b| b["scheduled_downtime_depth"] == "1")
        },
        ctx,
    );
    let seen = nagios.borrow().pages().len();
    node.inject(Incident::Ext4ReadOnly);
    wait_for(
        &format!("{svc} HARD CRITICAL in the downtime"),
        hard_limit,
        || nagios.borrow_mut().state(HOST, svc) == Some((2, true)),
        ctx,
    );
    let alerts = nagios.borrow().hard_alerts(svc);
    wait_for(
        "two more checks in the downtime",
        hard_limit,
        || nagios.borrow().hard_alerts(svc) >= alerts + 2,
        ctx,
    );
    assert!(
        new_pages(&nagios, seen).is_empty(),
        "a service in downtime paged: {}",
        ctx()
    );
    let id = nagios
        .borrow_mut()
        .blocks("servicedowntime")
        .into_iter()
        .find(|b| b.get("service_description").map(String::as_str) == Some(svc))
        .expect("the downtime in status.dat")["downtime_id"]
        .clone();
    nagios.borrow().command(&format!("DEL_SVC_DOWNTIME;{id}"));
    wait_for(
        "the PROBLEM after the downtime",
        hard_limit,
        || new_pages(&nagios, seen).iter().any(|p| p.kind == "PROBLEM"),
        ctx,
    );
    let p = new_pages(&nagios, seen)
        .into_iter()
        .find(|p| p.kind == "PROBLEM")
        .unwrap();
    assert_page(&p, "CRITICAL", EXT4_PVC);
    let seen = nagios.borrow().pages().len();
    node.clear(Incident::Ext4ReadOnly);
    recovered(&nagios, seen, svc, hard_limit);

    // --- NRPE refuses a client without a certificate, and one with a certificate of another
    // CA. ---
    let plain = Cmd::new(CHECK_NRPE)
        .args(["-H", "127.0.0.1", "-p", &port.to_string(), "-c", svc])
        .run();
    assert_ne!(
        plain.code, 0,
        "NRPE served a client without a certificate: {plain:?}"
    );
    let other = NrpeTls::generate(&node.work.path().join("tls-other"));
    let mut args = vec![
        "-H".to_string(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
    ];
    args.extend(other.client_args().into_iter().take(4));
    args.extend(["-A".into(), tls.dir.join("ca.crt").display().to_string()]);
    args.extend(["-c".into(), svc.into()]);
    let foreign = Cmd::new(CHECK_NRPE).args(args.iter()).run();
    assert_ne!(
        foreign.code, 0,
        "NRPE served a certificate of another CA: {foreign:?}"
    );

    // --- NRPE v2 packets (check_nrpe -2, an old client or server): 40 pods stuck on the node
    // make a long output; the status line and perfdata survive, and either the findings or a
    // line saying how to see the rest. ---
    node.api.add(
        "pods",
        (0..40).map(|i| {
            e2e::apiserver::fixtures::scheduled_no_status(
                "llmsafespaces",
                &format!("ws-{i:04}-0123456789abcdef"),
                NODE,
                11 * 60,
            )
        }),
    );
    let mut args = vec![
        "-2".to_string(),
        "-H".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
    ];
    args.extend(tls.client_args());
    args.extend(["-c".into(), "check_stuck_scheduled".into()]);
    let v2 = Cmd::new(CHECK_NRPE).args(args.iter()).run();
    println!(
        "check_nrpe -2 answered ({} bytes):\n{}",
        v2.stdout.len(),
        v2.stdout
    );
    assert_eq!(v2.code, 2, "{v2:?}");
    let first = v2.stdout.lines().next().unwrap_or("");
    assert!(
        first.starts_with("STUCK_SCHEDULED CRITICAL - 40 ") && first.contains("| "),
        "the status line and perfdata should survive v2: {v2:?}"
    );
    assert!(
        v2.stdout.lines().nth(1).is_some_and(|l| l.starts_with('[')) || first.contains("more"),
        "neither findings nor a way to see the rest: {v2:?}"
    );
    node.clear(Incident::StuckScheduled);

    // The core complained about nothing all along.
    let log = nagios.borrow().log();
    for bad in ["Warning", "Error", "error:"] {
        assert!(
            !log.lines().any(|l| l.contains(bad)
                && !l.contains("SERVICE ALERT")
                && !l.contains("NOTIFICATION")),
            "nagios.log has {bad:?}:\n{log}"
        );
    }
    // Perfdata reaches the core with every result (status.dat), labels intact.
    let b = nagios.borrow_mut().service(HOST, svc).unwrap();
    assert!(b["performance_data"].contains("ro_volumes="), "{b:?}");
    println!("nagios engine test took {:?}", started.elapsed());
    // Nothing the test started is left running.
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(nagios);
    drop(nrpe);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}

/// What the on-call person reads: the state, the subject named, each finding's pasteable next
/// step exactly as the check printed it (a kubelet path keeps its `~`, quotes stay), the runbook,
/// and no note that the text was filtered.
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
    assert!(
        !p.body.contains("illegal_macro_output_chars"),
        "the text went through the filtered macros: {p:#?}"
    );
    if p.service == "check_ro_pvc_mounts" {
        assert!(
            p.body.contains("/volumes/kubernetes.io~csi/"),
            "the mount path lost its ~: {p:#?}"
        );
        assert!(
            p.body.contains(EXT4_PV) || p.body.contains("pvc-"),
            "{p:#?}"
        );
    }
}

/// Wait for the RECOVERY page of `svc`: state OK, the status line in it.
fn recovered(nagios: &std::cell::RefCell<Nagios>, seen: usize, svc: &str, limit: Duration) {
    let rec = |p: &Page| p.kind == "RECOVERY" && p.service == svc && p.state == "OK";
    wait_for(
        &format!("{svc} to recover"),
        limit,
        || new_pages(nagios, seen).iter().any(rec),
        || nagios.borrow_mut().context(),
    );
    let p = new_pages(nagios, seen).into_iter().find(rec).unwrap();
    assert!(p.body.contains(" OK - "), "{p:#?}");
}
