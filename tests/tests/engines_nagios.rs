//! Nagios 4 core end to end: the real `nagios4` daemon (its own nagios.cfg, dirs and command file
//! under a temp dir, `interval_length=1`) schedules one service per check, each calling the shipped
//! nrpe.d command through the real `check_nrpe` against the real NRPE daemon, which runs the checks
//! in the node's mount namespace. Each incident's real fault is injected in turn; the service must
//! go SOFT then HARD CRITICAL, the notification command must write the PROBLEM, and after the fault
//! is removed the service must recover (HARD OK, RECOVERY notification). Perfdata goes to a
//! perfdata file and the core logs no warning or error about anything.

use e2e::engines::{
    free_port, report, start_nrpe, wait_for, Daemon, Incident, Intervals, Node, CHECKS,
};
use e2e::{need_root, need_tool};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NAGIOS: &str = "/usr/sbin/nagios4";
const CHECK_NRPE: &str = "/usr/lib/nagios/plugins/check_nrpe";
const CHECK_DUMMY: &str = "/usr/lib/nagios/plugins/check_dummy";
const HOST: &str = "worker-04";

struct Nagios {
    dir: PathBuf,
    daemon: Daemon,
}

/// One `servicestatus` block of status.dat.
type Block = BTreeMap<String, String>;

impl Nagios {
    fn start(work: &Path, nrpe_port: u16, iv: Intervals) -> Nagios {
        let dir = work.join("nagios");
        std::fs::create_dir_all(dir.join("checkresults")).unwrap();
        let d = dir.display();
        let cfg = format!(
            "log_file={d}/nagios.log
cfg_file={d}/objects.cfg
object_cache_file={d}/objects.cache
precached_object_file={d}/objects.precache
status_file={d}/status.dat
status_update_interval=1
nagios_user=nagios
nagios_group=nagios
check_external_commands=1
command_file={d}/nagios.cmd
lock_file={d}/nagios.lock
temp_file={d}/nagios.tmp
temp_path={d}
check_result_path={d}/checkresults
query_socket={d}/nagios.qh
retain_state_information=0
state_retention_file={d}/retention.dat
use_syslog=0
interval_length=1
check_result_reaper_frequency=1
max_check_result_reaper_time=2
service_inter_check_delay_method=n
host_inter_check_delay_method=n
max_service_check_spread=1
max_host_check_spread=1
service_check_timeout=40
process_performance_data=1
service_perfdata_file={d}/service-perfdata
service_perfdata_file_template=$TIMET$\\t$SERVICEDESC$\\t$SERVICESTATE$\\t$SERVICESTATETYPE$\\t$SERVICEPERFDATA$
service_perfdata_file_mode=a
service_perfdata_file_processing_interval=0
enable_notifications=1
enable_flap_detection=0
log_notifications=1
log_service_retries=1
illegal_macro_output_chars=`~$&|'\"<>
"
        );
        let mut obj = String::from(
            "define timeperiod {
    timeperiod_name always
    alias always
    sunday 00:00-24:00
    monday 00:00-24:00
    tuesday 00:00-24:00
    wednesday 00:00-24:00
    thursday 00:00-24:00
    friday 00:00-24:00
    saturday 00:00-24:00
}
",
        );
        obj.push_str(&format!(
            "define command {{
    command_name host-alive
    command_line {CHECK_DUMMY} 0 alive
}}
define command {{
    command_name check_nrpe
    command_line {CHECK_NRPE} -H 127.0.0.1 -p {nrpe_port} -t 30 -c $ARG1$
}}
define command {{
    command_name notify-service-by-file
    command_line /usr/bin/printf '%s\\t%s\\t%s\\t%s\\t%s\\t%s\\n' \"$TIMET$\" \"$NOTIFICATIONTYPE$\" \"$SERVICEDESC$\" \"$SERVICESTATE$\" \"$SERVICEOUTPUT$\" \"$LONGSERVICEOUTPUT$\" >> {d}/notifications.log
}}
define command {{
    command_name notify-host-by-file
    command_line /usr/bin/printf '%s\\t%s\\t%s\\n' \"$TIMET$\" \"$NOTIFICATIONTYPE$\" \"$HOSTNAME$\" >> {d}/host-notifications.log
}}
define contact {{
    contact_name storage-oncall
    service_notification_period always
    host_notification_period always
    service_notification_options w,u,c,r
    host_notification_options d,r
    service_notification_commands notify-service-by-file
    host_notification_commands notify-host-by-file
}}
define host {{
    host_name {HOST}
    address 127.0.0.1
    check_command host-alive
    max_check_attempts 1
    check_interval 60
    check_period always
    notification_period always
    notification_interval 0
    contacts storage-oncall
}}
"
        ));
        for c in CHECKS {
            obj.push_str(&format!(
                "define service {{
    host_name {HOST}
    service_description {c}
    check_command check_nrpe!{c}
    max_check_attempts {a}
    check_interval {ci}
    retry_interval {ri}
    check_period always
    notification_period always
    notification_interval 0
    notification_options w,u,c,r
    process_perf_data 1
    contacts storage-oncall
}}
",
                a = iv.attempts,
                ci = iv.check,
                ri = iv.retry
            ));
        }
        std::fs::write(dir.join("nagios.cfg"), cfg).unwrap();
        std::fs::write(dir.join("objects.cfg"), obj).unwrap();
        let chown = Command::new("chown")
            .args(["-R", "nagios:nagios"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(chown.success());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();

        // The configuration is valid as the core reads it, without a single warning.
        let v = e2e::Cmd::new(NAGIOS)
            .arg("-v")
            .arg(dir.join("nagios.cfg"))
            .run();
        assert_eq!(v.code, 0, "nagios4 -v:\n{}{}", v.stdout, v.stderr);
        assert!(
            v.stdout.contains("Total Warnings: 0") && v.stdout.contains("Total Errors:   0"),
            "nagios4 -v:\n{}",
            v.stdout
        );

        let mut cmd = Command::new(NAGIOS);
        cmd.arg(dir.join("nagios.cfg"));
        let daemon = Daemon::start("nagios4", cmd, &dir.join("daemon.out"));
        Nagios { dir, daemon }
    }

    fn services(&mut self) -> BTreeMap<String, Block> {
        self.daemon.assert_running();
        let text = std::fs::read_to_string(self.dir.join("status.dat")).unwrap_or_default();
        let mut out = BTreeMap::new();
        let mut cur: Option<Block> = None;
        for l in text.lines() {
            let l = l.trim();
            if l == "servicestatus {" {
                cur = Some(Block::new());
            } else if l == "}" {
                if let Some(b) = cur.take() {
                    if let Some(n) = b.get("service_description") {
                        out.insert(n.clone(), b);
                    }
                }
            } else if let Some(b) = cur.as_mut() {
                if let Some((k, v)) = l.split_once('=') {
                    b.insert(k.to_string(), v.to_string());
                }
            }
        }
        out
    }

    /// (state, HARD?) of a checked service.
    fn state(&mut self, svc: &str) -> Option<(u8, bool)> {
        let s = self.services();
        let b = s.get(svc)?;
        if b.get("has_been_checked").map(String::as_str) != Some("1") {
            return None;
        }
        Some((
            b.get("current_state")?.parse().ok()?,
            b.get("state_type").map(String::as_str) == Some("1"),
        ))
    }

    fn notifications(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("notifications.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("nagios.log")).unwrap_or_default()
    }

    fn context(&mut self) -> String {
        format!(
            "status: {:#?}\nnotifications: {:?}\nnagios.log:\n{}",
            self.services(),
            self.notifications(),
            self.log()
        )
    }
}

#[test]
fn nagios_pages_for_every_incident_and_recovers() {
    let t = "nagios_pages_for_every_incident_and_recovers";
    if !need_root(t)
        || !need_tool(t, NAGIOS)
        || !need_tool(t, "/usr/sbin/nrpe")
        || !need_tool(t, CHECK_NRPE)
        || !need_tool(t, CHECK_DUMMY)
        || !need_tool(t, "bindfs")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let started = Instant::now();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let port = free_port();
    let commands = node.nrpe_commands();
    let nrpe = start_nrpe(&node, &commands, port);
    let nagios = std::cell::RefCell::new(Nagios::start(node.work.path(), port, iv));
    let ctx = || nagios.borrow_mut().context();
    // Time for one HARD transition: the first check, then the retries, plus scheduling slack.
    let hard_limit = Duration::from_secs((iv.check + iv.retry * iv.attempts + 40) as u64);

    // A healthy node: every service checked and OK.
    wait_for(
        "every service OK",
        hard_limit,
        || {
            CHECKS
                .iter()
                .all(|c| nagios.borrow_mut().state(c) == Some((0, true)))
        },
        ctx,
    );

    for inc in Incident::ALL {
        let svc = inc.check();
        let seen = nagios.borrow().notifications().len();
        let t0 = Instant::now();
        node.inject(inc);
        wait_for(
            &format!("{svc} to leave OK ({})", inc.name()),
            hard_limit,
            || matches!(nagios.borrow_mut().state(svc), Some((s, _)) if s != 0),
            ctx,
        );
        let first = t0.elapsed();
        // SOFT first (max_check_attempts > 1), then HARD CRITICAL.
        wait_for(
            &format!("{svc} HARD CRITICAL ({})", inc.name()),
            hard_limit,
            || nagios.borrow_mut().state(svc) == Some((2, true)),
            ctx,
        );
        let to_hard = t0.elapsed();
        let b = nagios.borrow_mut().services()[svc].clone();
        // The status line, then the long output (one line per finding), as the core keeps them.
        let out = format!(
            "{}\n{}",
            b["plugin_output"],
            b.get("long_plugin_output").cloned().unwrap_or_default()
        );
        assert!(
            out.contains(inc.names()),
            "{svc} output should name {}: {out}",
            inc.names()
        );
        let problem = |n: &Vec<String>| n.len() == 6 && n[1] == "PROBLEM" && n[2] == svc;
        wait_for(
            &format!("the PROBLEM notification of {svc}"),
            Duration::from_secs(20),
            || nagios.borrow().notifications()[seen..].iter().any(problem),
            ctx,
        );
        let to_notify = t0.elapsed();
        let n = nagios.borrow().notifications()[seen..]
            .iter()
            .find(|n| problem(n))
            .cloned()
            .unwrap();
        assert_eq!(n[3], "CRITICAL", "{n:?}");
        assert!(
            n[4].contains(inc.names()) || n[5].contains(inc.names()),
            "the notification should name {}: {n:?}",
            inc.names()
        );
        // Exactly one alert line per state type in the log: SOFT before HARD.
        let log = nagios.borrow().log();
        let soft = format!("SERVICE ALERT: {HOST};{svc};CRITICAL;SOFT;1;");
        let hard = format!("SERVICE ALERT: {HOST};{svc};CRITICAL;HARD;{};", iv.attempts);
        let (si, hi) = (log.rfind(&soft), log.rfind(&hard));
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

        // Remove the fault: the service recovers (HARD OK and a RECOVERY notification), and so
        // does every other service before the next incident.
        let seen = nagios.borrow().notifications().len();
        let t1 = Instant::now();
        node.clear(inc);
        let limit = hard_limit + node.log_age_out_left();
        wait_for(
            &format!("{svc} to recover ({})", inc.name()),
            limit,
            || {
                nagios.borrow().notifications()[seen..]
                    .iter()
                    .any(|n| n.len() == 6 && n[1] == "RECOVERY" && n[2] == svc && n[3] == "OK")
            },
            ctx,
        );
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
            || {
                CHECKS
                    .iter()
                    .all(|c| nagios.borrow_mut().state(c) == Some((0, true)))
            },
            ctx,
        );
    }

    // Perfdata: every service's values reached the perfdata file as the check printed them, and
    // the core complained about nothing all along.
    let perf = std::fs::read_to_string(nagios.borrow().dir.join("service-perfdata")).unwrap();
    for (svc, label) in [
        ("check_ro_pvc_mounts", "ro_volumes="),
        ("check_stale_csi_mounts", "stale_mounts="),
        ("check_kubelet_nested_ops", "failing_volumes="),
        ("check_stuck_scheduled", "stuck_pods="),
    ] {
        assert!(
            perf.lines()
                .any(|l| l.split('\t').nth(1) == Some(svc) && l.contains(label)),
            "no {label} perfdata of {svc}:\n{perf}"
        );
    }
    assert!(
        perf.lines()
            .any(|l| l.contains("\tcheck_ro_pvc_mounts\tCRITICAL\tHARD\t")
                && l.contains("ro_volumes=1;0;0;0")),
        "the read-only volume's perfdata:\n{perf}"
    );
    let log = nagios.borrow().log();
    for bad in ["Warning", "Error", "error:"] {
        assert!(
            !log.lines().any(|l| l.contains(bad)
                && !l.contains("SERVICE ALERT")
                && !l.contains("NOTIFICATION")),
            "nagios.log has {bad:?}:\n{log}"
        );
    }
    println!("nagios engine test took {:?}", started.elapsed());
    // Nothing the test started is left running.
    let marker = node.work.path().to_string_lossy().into_owned();
    drop(nagios);
    drop(nrpe);
    drop(node);
    let left = e2e::fuse::processes_with(&marker);
    assert!(left.is_empty(), "processes left running: {left:?}");
}
