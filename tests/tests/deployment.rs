//! Deployment, end to end: the Ansible role installs the suite on this machine (the real plugin
//! directory and nrpe.d), the real NRPE daemon serves the rendered commands on a loopback port as
//! the nagios user, and the real `check_nrpe` calls every one of them. A second role run must
//! change nothing. Plus: the role on another layout (release tarball, sudo mode, temp paths), the
//! static nrpe.d file against the role's rendering, lint/syntax and argument-spec validation, and
//! the Icinga 2 definitions through the real `icinga2 daemon -C`.

use e2e::apiserver::fixtures::{self, Rep};
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::{
    all_checks, bin_dir, need_root, need_tool, workspace_root, Cmd, KubeletTree, Ns, Output,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PLUGIN_DIR: &str = "/usr/lib/nagios/plugins";
const NRPE_D: &str = "/etc/nagios/nrpe.d";
const NRPE_FILE: &str = "k8s-storage-checks.cfg";
const CHECK_NRPE: &str = "/usr/lib/nagios/plugins/check_nrpe";
const STATE_DIR: &str = "/var/lib/k8s-storage-checks";
const KUBECONFIG_DIR: &str = "/etc/k8s-storage-checks";
/// The role's NRPE TLS settings and the node's certificates (k8s_storage_checks_nrpe_tls).
const NRPE_TLS_FILE: &str = "k8s-storage-checks-tls.cfg";
const NRPE_TLS_DIR: &str = "/etc/nagios/k8s-storage-checks";
const WRAPPER: &str = "/usr/local/sbin/k8s-storage-checks-textfile";
const UNITS: [&str; 2] = [
    "/etc/systemd/system/k8s-storage-checks-textfile.service",
    "/etc/systemd/system/k8s-storage-checks-textfile.timer",
];
const JOURNAL_GROUP: &str = "systemd-journal";
const SUDOERS: &str = "/etc/sudoers.d/k8s-storage-checks";
const TMPFILES: &str = "/etc/tmpfiles.d/k8s-storage-checks.conf";
/// The checks' run directory (stuck-probe markers): the agent's, 0750.
const RUN_DIR: &str = "/run/k8s-storage-checks";
/// The checks that run with more privilege than the agent user (file capabilities in caps mode,
/// a sudo rule in sudo mode), with the role's default capabilities.
const PRIVILEGED: [(&str, &str); 5] = [
    ("check_csi_node_plugins", "cap_dac_read_search"),
    ("check_pv_capacity", "cap_dac_read_search"),
    ("check_ro_pvc_mounts", "cap_dac_read_search"),
    ("check_stale_csi_mounts", "cap_dac_read_search"),
    ("check_storage_kernel_errors", "cap_syslog"),
];

/// The one program every check name runs, and its installed copies: one per capability set.
const PROGRAM: &str = "k8s-storage-checks";
const COPIES: [&str; 3] = [
    PROGRAM,
    "k8s-storage-checks-cap_dac_read_search",
    "k8s-storage-checks-cap_syslog",
];

fn is_privileged(check: &str) -> bool {
    PRIVILEGED.iter().any(|(c, _)| *c == check)
}

/// The numeric id of a group (getent).
fn gid_of(group: &str) -> u32 {
    let out = Cmd::new("getent").args(["group", group]).run();
    assert_eq!(out.code, 0, "no group {group}: {out:?}");
    out.stdout
        .split(':')
        .nth(2)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Only the agent may run a privileged binary: root:<agent group> 0750; every other binary
/// root:root 0755.
fn assert_installed_modes(plugin_dir: &Path, checks: &[String], agent_group: &str) {
    use std::os::unix::fs::MetadataExt;
    let agent_gid = gid_of(agent_group);
    for c in checks {
        let p = plugin_dir.join(c);
        let m = std::fs::metadata(&p).unwrap();
        let (want_mode, want_gid) = if is_privileged(c) {
            (0o750, agent_gid)
        } else {
            (0o755, 0)
        };
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (0, want_gid, want_mode),
            "{}: owner, group, mode (privileged: {})",
            p.display(),
            is_privileged(c)
        );
        // The name is a hard link to the program's copy with exactly its capability set.
        let copy = match PRIVILEGED.iter().find(|(p, _)| p == c) {
            Some((_, cap)) => format!("{PROGRAM}-{cap}"),
            None => PROGRAM.to_string(),
        };
        let cm = std::fs::metadata(plugin_dir.join(&copy)).unwrap();
        assert!(
            std::fs::symlink_metadata(&p).unwrap().is_file()
                && (m.dev(), m.ino()) == (cm.dev(), cm.ino()),
            "{} is not a hard link to {copy}",
            p.display()
        );
    }
}

/// A user outside the agent's group cannot even execute a privileged binary; the others run.
fn assert_outsider_refused(ns: &Ns, plugin_dir: &Path, checks: &[String]) {
    for c in checks {
        let out = ns
            .cmd("setpriv")
            .args([
                "--reuid",
                "nobody",
                "--regid",
                "nogroup",
                "--clear-groups",
                "--",
                // Through a shell: setpriv itself still holds root's capabilities at its own
                // execve (the kernel drops them there), so it would pass the permission check.
                "sh",
                "-c",
                "exec \"$0\" --help",
            ])
            .arg(plugin_dir.join(c))
            .run();
        if is_privileged(c) {
            assert!(
                out.code != 0 && out.stderr.contains("Permission denied") && out.stdout.is_empty(),
                "{c}: a user outside the agent group ran it: {out:?}"
            );
        } else {
            assert!(
                out.code == 0 || out.code == 3,
                "{c}: an unprivileged check must run for anyone: {out:?}"
            );
            assert!(out.stdout.contains("Usage"), "{c}: {out:?}");
        }
    }
}

/// `promtool check metrics` on a textfile-collector file: valid exposition format.
fn assert_promtool_accepts(file: &Path) {
    let text = std::fs::read(file).unwrap();
    let out = Cmd::new("promtool")
        .args(["check", "metrics"])
        .stdin(text.clone())
        .run();
    assert_eq!(
        out.code,
        0,
        "promtool check metrics rejects {}:\n{}\n{out:?}",
        file.display(),
        String::from_utf8_lossy(&text)
    );
}
/// The PV of the kubelet failure in the test's journal.
const JOURNAL_PV: &str = "pvc-deploy-journal";

/// The checks whose answer is the same from every node (the role installs them only on hosts
/// with the cluster scope).
const CLUSTER_WIDE: [&str; 3] = [
    "check_jiva_rep_crashloop",
    "check_watch_cache",
    "check_volume_attachments",
];

/// The status name of a check binary: check_ro_pvc_mounts → RO_PVC_MOUNTS.
fn status_name(check: &str) -> String {
    check.trim_start_matches("check_").to_uppercase()
}

fn role_dir() -> PathBuf {
    workspace_root().join("ansible/roles")
}

/// Run a playbook with `-c local -i localhost,`, the role from the repository and the JSON
/// callback; returns the process output and the callback's JSON document.
fn ansible(playbook: &Path, vars: &Value, work: &Path, extra: &[&str]) -> (Output, Value) {
    let vars_file = work.join(format!(
        "vars-{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let out = Cmd::new("ansible-playbook")
        .args(["-c", "local", "-i", "localhost,"])
        .arg(playbook)
        .arg("-e")
        .arg(format!("@{}", vars_file.display()))
        .args(extra)
        .env("ANSIBLE_ROLES_PATH", role_dir())
        .env("ANSIBLE_STDOUT_CALLBACK", "json")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .env("ANSIBLE_PYTHON_INTERPRETER", "/usr/bin/python3")
        .run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    (out, doc)
}

/// stats.localhost of the JSON callback, after asserting the run succeeded.
fn stats(out: &Output, doc: &Value) -> Value {
    assert_eq!(
        out.code, 0,
        "ansible-playbook failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    let s = doc["stats"]["localhost"].clone();
    assert_eq!(s["failures"], 0, "{s}");
    assert_eq!(s["unreachable"], 0, "{s}");
    s
}

/// Names of the tasks that reported a change (for the message when idempotence breaks).
fn changed_tasks(doc: &Value) -> Vec<String> {
    let mut v = Vec::new();
    for play in doc["plays"].as_array().into_iter().flatten() {
        for t in play["tasks"].as_array().into_iter().flatten() {
            if t["hosts"]["localhost"]["changed"] == true {
                v.push(t["task"]["name"].as_str().unwrap_or("?").to_string());
            }
        }
    }
    v
}

/// Whether a task (by name) appears in the run (a handler: was notified; it may still skip).
fn task_listed(doc: &Value, name: &str) -> bool {
    doc["plays"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["tasks"].as_array().into_iter().flatten())
        .any(|t| {
            let n = t["task"]["name"].as_str().unwrap_or("");
            n == name || n.ends_with(&format!(" : {name}"))
        })
}

fn user_in_group(user: &str, group: &str) -> bool {
    let out = Cmd::new("id").args(["-nG", user]).run();
    out.stdout.split_whitespace().any(|g| g == group)
}

/// A free TCP port on the loopback interface.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Everything the main test put on this machine; removed again when dropped, even on failure.
/// Paths that existed before the test are left alone except our own binaries and nrpe.d file,
/// which the test replaces on purpose (a fresh install is what it tests).
struct Machine {
    remove: Vec<PathBuf>,
    group_was_member: bool,
    nrpe: Option<Child>,
}

impl Machine {
    fn take_over(checks: &[String]) -> Machine {
        let mut remove: Vec<PathBuf> = checks
            .iter()
            .map(|c| Path::new(PLUGIN_DIR).join(c))
            .collect();
        // The program's copies (one per capability set) the checks' names are linked to.
        for copy in COPIES {
            remove.push(Path::new(PLUGIN_DIR).join(copy));
        }
        remove.push(Path::new(NRPE_D).join(NRPE_FILE));
        remove.push(Path::new(NRPE_D).join(NRPE_TLS_FILE));
        for p in [
            STATE_DIR,
            KUBECONFIG_DIR,
            WRAPPER,
            UNITS[0],
            UNITS[1],
            SUDOERS,
            TMPFILES,
            RUN_DIR,
            NRPE_TLS_DIR,
        ] {
            if !Path::new(p).exists() {
                remove.push(PathBuf::from(p));
            }
        }
        let m = Machine {
            remove,
            group_was_member: user_in_group("nagios", JOURNAL_GROUP),
            nrpe: None,
        };
        m.clean_files();
        m
    }

    fn clean_files(&self) {
        for p in &self.remove {
            if p.is_dir() {
                let _ = std::fs::remove_dir_all(p);
            } else {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Some(mut c) = self.nrpe.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.clean_files();
        if !self.group_was_member && user_in_group("nagios", JOURNAL_GROUP) {
            let _ = Command::new("gpasswd")
                .args(["-d", "nagios", JOURNAL_GROUP])
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// The checks that only talk to the Kubernetes API.
const API_CHECKS: [&str; 6] = [
    "check_stuck_scheduled",
    "check_jiva_rep_crashloop",
    "check_longhorn_volumes",
    "check_watch_cache",
    "check_stuck_terminating",
    "check_volume_attachments",
];
/// The node name the role configures (`--node`) and the test API server's pods use.
const NODE: &str = "worker-04";
const STUCK_POD: &str = "llmsafespaces/ws-b70553ae";
const JIVA_PV: &str = "pvc-0f3a9c1e";

/// What each check must answer through NRPE on this machine: no kubelet, no iSCSI; a PV under a
/// root-only kubelet root; a journal with one kubelet volume failure; the API server either the
/// test's loopback server (`api_live`: one pod stuck after scheduling on NODE, one crash-looping
/// Jiva replica) or gone (this machine has no Kubernetes).
fn assert_answer_here(check: &str, out: &Output, api_port: u16, api_live: bool) {
    let name = status_name(check);
    out.assert_protocol(&name);
    let line = out.first_line().to_string();
    let lower = line.to_lowercase();
    assert!(
        !lower.contains("usage error"),
        "{check}: the NRPE command line is not accepted by the check: {line}"
    );
    assert!(
        !lower.contains("could not complete ssl") && !lower.contains("command not defined"),
        "{check}: NRPE did not run it: {line}"
    );
    // The installed state directory is used, not refused (in sudo mode a root run refuses one
    // the agent owns: the role gives those checks root's own).
    let text = out.stdout.to_lowercase();
    assert!(
        !text.contains("state directory") && !text.contains("state file"),
        "{check}: its state is not kept: {}",
        out.stdout
    );
    let api = format!("127.0.0.1:{api_port}");
    match check {
        // One healthy PV under a kubelet root only root can enter: OK thanks to the file
        // capability (without it: EACCES, see the cap-less copy below).
        "check_ro_pvc_mounts" => {
            out.assert_status(&name, 0);
            assert!(line.contains("1 PV filesystem writable"), "{line}");
        }
        // The same PV mount, readable thanks to the capability, cross-checked through the
        // installed kubeconfig: its pod UID is no pod of NODE on the API server, so it is an
        // orphaned pod mount (only the API can tell).
        "check_stale_csi_mounts" => {
            assert!(!line.contains("CAP_DAC_READ_SEARCH"), "{line}");
            out.assert_status(&name, 2);
            assert!(line.contains("1 orphaned pod mount"), "{line}");
        }
        // The same PV's vol_data.json, readable thanks to the capability: its driver has no
        // registration socket and no CSINode lists it (the loopback API server has none; with
        // the API gone too the dead plugin stays CRITICAL: it needs no API to be known).
        "check_csi_node_plugins" => {
            assert!(
                !line.contains("CAP_DAC_READ_SEARCH") && !lower.contains("permission denied"),
                "{line}"
            );
            out.assert_status(&name, 2);
            assert!(line.contains("test.csi.example"), "{line}");
        }
        // CAP_SYSLOG through the file capability: kmsg must be readable although
        // kernel.dmesg_restrict=1 and NRPE runs as nagios.
        "check_storage_kernel_errors" => {
            assert!(
                !line.contains("CAP_SYSLOG") && !lower.contains("permission denied"),
                "the file capability did not reach the check: {line}"
            );
            assert!(out.code <= 2, "{line}");
            // It read the kernel log (other tests may have left storage errors in it).
            assert!(out.perf("records").unwrap_or(0.0) > 0.0, "{line}");
        }
        // The journal (a root:systemd-journal 0640 file, like journald's) through the group:
        // the fresh kubelet volume failure written there is found.
        "check_kubelet_nested_ops" => {
            assert!(out.code == 1 || out.code == 2, "{line}");
            assert!(line.contains(JOURNAL_PV), "{line}");
        }
        // No iSCSI sessions on this machine.
        "check_iscsi_sessions" => {
            out.assert_status(&name, 0);
            assert!(line.contains("no iSCSI sessions"), "{line}");
        }
        // Through the installed kubeconfig (root:nagios 0440), as nagios, to the live server.
        "check_stuck_scheduled" if api_live => {
            out.assert_status(&name, 2);
            assert!(line.contains(STUCK_POD), "{line}");
        }
        "check_jiva_rep_crashloop" if api_live => {
            assert!(out.code == 1 || out.code == 2, "{line}");
            assert!(out.stdout.contains(JIVA_PV), "{line}");
        }
        // Through the installed kubeconfig to a server without Longhorn's API: UNKNOWN saying
        // so (never an OK about volumes it could not see).
        "check_longhorn_volumes" if api_live => {
            out.assert_status(&name, 3);
            assert!(lower.contains("longhorn"), "{line}");
        }
        // No VolumeAttachment on the test's server: OK, saying 0 (never silent).
        "check_volume_attachments" if api_live => {
            out.assert_status(&name, 0);
            assert!(line.contains("0 VolumeAttachments cluster-wide"), "{line}");
        }
        // No pod of NODE is being deleted.
        "check_stuck_terminating" if api_live => {
            out.assert_status(&name, 0);
        }
        // No API server: UNKNOWN naming the address the kubeconfig gave (so it was read).
        c if API_CHECKS.contains(&c) && !api_live => {
            out.assert_status(&name, 3);
            assert!(
                line.contains(&api) && !lower.contains("cannot read kubeconfig"),
                "{check} should name the unreachable API server: {line}"
            );
        }
        _ => {}
    }
}

/// The NRPE daemon on a loopback port, serving the rendered nrpe.d as the nagios user (like
/// Debian's unit: started as nagios with its groups, not as root), inside the test's mount
/// namespace (where a PV is mounted under the private kubelet root).
fn start_nrpe(ns: &Ns, work: &Path, port: u16) -> Child {
    let dir = work.join("nrpe");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(work, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = dir.join("nrpe.cfg");
    std::fs::write(
        &cfg,
        format!(
            "server_address=127.0.0.1\nserver_port={port}\nallowed_hosts=127.0.0.1\n\
             dont_blame_nrpe=0\nallow_bash_command_substitution=0\ndebug=0\n\
             command_timeout=60\nconnection_timeout=300\ndisable_syslog=1\n\
             include_dir={NRPE_D}/\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).unwrap();
    let child = Command::new("nsenter")
        .args(["-t", &ns.pid().to_string(), "-m", "--", "setpriv"])
        .args([
            "--reuid",
            "nagios",
            "--regid",
            "nagios",
            "--init-groups",
            "--",
            "/usr/sbin/nrpe",
            "-c",
        ])
        .arg(&cfg)
        .arg("-f")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nrpe");
    child
}

/// Wait until the daemon answers a version query (or fail with what it printed).
fn wait_nrpe(child: &mut Child, port: u16, client: &[String]) {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            let v = Cmd::new(CHECK_NRPE)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .args(client.iter())
                .run();
            if v.code == 0 && v.stdout.starts_with("NRPE v") {
                return;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(e) = child.stderr.take() {
                for l in BufReader::new(e).lines().map_while(Result::ok) {
                    err.push_str(&l);
                    err.push('\n');
                }
            }
            panic!("nrpe exited ({status}) before answering: {err}");
        }
        assert!(Instant::now() < until, "nrpe did not answer within 30 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `command[name]=line` entries of an nrpe.d file.
fn nrpe_commands(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("command["))
        .filter_map(|l| l.split_once("]="))
        .map(|(n, c)| (n.to_string(), c.to_string()))
        .collect()
}

#[test]
fn role_installs_the_suite_and_nrpe_answers_every_check() {
    role_on_this_machine(
        "role_installs_the_suite_and_nrpe_answers_every_check",
        "caps",
    );
}

/// The same in sudo mode: the privileged checks run through `sudo -n` under the exact sudoers
/// rules, from NRPE and from the textfile wrapper alike (its `--format prometheus` lines too).
#[test]
fn role_in_sudo_mode_installs_the_suite_and_nrpe_answers_every_check() {
    role_on_this_machine(
        "role_in_sudo_mode_installs_the_suite_and_nrpe_answers_every_check",
        "sudo",
    );
}

/// The role on this machine's real paths in `mode` (caps or sudo), the real NRPE daemon as
/// nagios and the real check_nrpe against every command, the textfile timer's command as nagios.
fn role_on_this_machine(t: &str, mode: &str) {
    if !need_root(t)
        || !need_tool(t, "ansible-playbook")
        || !need_tool(t, "/usr/sbin/nrpe")
        || !need_tool(t, CHECK_NRPE)
        || !need_tool(t, "setcap")
        || !need_tool(t, "promtool")
        || !need_tool(t, "systemd-tmpfiles")
        || !need_tool(t, e2e::logs::JOURNAL_REMOTE)
        || (mode == "sudo" && !need_tool(t, "sudo"))
    {
        return;
    }
    let caps_mode = mode == "caps";
    // The role runs against this machine's real paths: no other machine-changing test meanwhile.
    let _machine = e2e::exclusive();
    let checks = all_checks();
    assert!(!checks.is_empty());
    let bins = bin_dir();
    let work = tempfile::tempdir().unwrap();
    let mut machine = Machine::take_over(&checks);

    // A kubelet root only root can enter, with one PV mounted (tmpfs) in a private mount
    // namespace where NRPE will run: stat of the mount point needs CAP_DAC_READ_SEARCH.
    let tree = KubeletTree::new(&work.path().join("private"));
    let kroot = tree.root.clone();
    let pv_mount = tree.pod_csi_mount("5e0c7a1e-pod", "pvc-deploy-test", "test.csi.example");
    let ns = Ns::new();
    ns.sh(&format!("mount -t tmpfs tmpfs '{}'", pv_mount.display()));
    std::fs::set_permissions(
        work.path().join("private"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    // The same tree at the node's own kubelet root, /var/lib/kubelet, in the test's mount
    // namespace only: privilege serves the node's own kubelet roots, never a root an option
    // names (node::privilege), so the role configures none and the checks find this one. Its
    // pods directory is root's 0750, as the kubelet makes it.
    std::fs::set_permissions(kroot.join("pods"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let own_root = Path::new("/var/lib/kubelet");
    if !own_root.exists() {
        std::fs::create_dir_all(own_root).unwrap();
        machine.remove.push(own_root.to_path_buf());
    }
    ns.sh(&format!(
        "mount --rbind '{}' {}",
        kroot.display(),
        own_root.display()
    ));
    let textfile_dir = work.path().join("textfile");
    // A kubelet journal with a fresh volume failure, owned and readable like journald's files.
    let journal_dir = work.path().join("journal");
    let now = e2e::logs::now_secs() - 60;
    e2e::logs::write_journal(
        &journal_dir,
        "system",
        &[e2e::logs::JEntry {
            realtime_s: now,
            unit: "kubelet.service".into(),
            message: e2e::logs::json_line(
                now,
                &e2e::logs::nested_op_msg(
                    now,
                    "driver.longhorn.io",
                    JOURNAL_PV,
                    "",
                    500,
                    &e2e::logs::mount_refs_err("driver.longhorn.io", JOURNAL_PV, "node-1"),
                ),
            ),
        }],
    );
    let chgrp = Cmd::new("sh")
        .arg("-ec")
        .arg(format!(
            "rm -f '{d}'/*.export; chgrp -R {JOURNAL_GROUP} '{d}'; chmod 0750 '{d}'; chmod 0640 '{d}'/*.journal",
            d = journal_dir.display()
        ))
        .run();
    assert_eq!(chgrp.code, 0, "{chgrp:?}");
    // The test's loopback API server: one pod stuck after scheduling on NODE (the incident's
    // workspace pod), a Jiva volume with a crash-looping replica.
    let api = ApiServer::start();
    api.set(
        "pods",
        vec![
            fixtures::scheduled_no_status("llmsafespaces", "ws-b70553ae", NODE, 11 * 60),
            fixtures::running("media", "radarr-0", NODE, 86400),
            fixtures::jiva_replica(JIVA_PV, 0, NODE, 86400, Rep::Healthy),
            fixtures::jiva_replica(JIVA_PV, 1, "worker-05", 86400, Rep::Healthy),
            fixtures::jiva_replica(
                JIVA_PV,
                2,
                "worker-06",
                86400,
                Rep::CrashLoop {
                    restarts: 14,
                    unready_secs: 3600,
                },
            ),
        ],
    );
    let api_port = api.addr().port();
    let kubeconfig = std::fs::read_to_string(
        api.kubeconfig(KubeCa::Inline, KubeAuth::Token("deploy-test-token".into())),
    )
    .unwrap();
    let (cluster_checks, node_checks): (Vec<&String>, Vec<&String>) = checks
        .iter()
        .partition(|c| CLUSTER_WIDE.contains(&c.as_str()));
    let vars = json!({
        "k8s_storage_checks_src_dir": bins,
        "k8s_storage_checks_enabled": node_checks,
        "k8s_storage_checks_cluster_scope": true,
        "k8s_storage_checks_cluster_checks": cluster_checks,
        "k8s_storage_checks_kubelet_roots": [],
        "k8s_storage_checks_kubeconfig_content": kubeconfig,
        "k8s_storage_checks_node_name": NODE,
        "k8s_storage_checks_privilege_mode": mode,
        // The role's own PKI (CA, node and client certificates) in the test's directory.
        "k8s_storage_checks_nrpe_tls_pki_dir": work.path().join("pki"),
        // No init system runs here: the test starts its own NRPE daemon instead.
        "k8s_storage_checks_nrpe_restart": false,
        "k8s_storage_checks_textfile_enabled": true,
        "k8s_storage_checks_textfile_dir": textfile_dir,
        "k8s_storage_checks_extra_args": {
            "check_kubelet_nested_ops": ["--journal-dir", journal_dir],
        },
        // Thresholds for every check (each takes -w/-c on its headline value), chosen so that
        // the states asserted below hold: NRPE must run every command line without a usage
        // error with them.
        "k8s_storage_checks_thresholds": {
            "check_ro_pvc_mounts": {"warning": "0", "critical": "0"},
            "check_pv_capacity": {"warning": "10%", "critical": "5%"},
            "check_stale_csi_mounts": {"warning": "0", "critical": "0"},
            "check_kubelet_nested_ops": {"warning": "0", "critical": "5"},
            "check_storage_kernel_errors": {"warning": "1000", "critical": "100000"},
            "check_iscsi_sessions": {"warning": "0", "critical": "0"},
            "check_stuck_scheduled": {"warning": "5m", "critical": "10m"},
            "check_stuck_terminating": {"warning": "5m", "critical": "10m"},
            "check_jiva_rep_crashloop": {"warning": "3", "critical": "10"},
            "check_longhorn_volumes": {"warning": "3:", "critical": "2:"},
            "check_watch_cache": {"warning": "2s", "critical": "10s"},
            "check_volume_attachments": {"warning": "10m", "critical": "30m"},
            "check_csi_node_plugins": {"warning": "0", "critical": "0"},
        },
    });
    let playbook = workspace_root().join("tests/deploy/site.yml");

    // First run: installs everything and notifies the NRPE restart.
    let (out, doc) = ansible(&playbook, &vars, work.path(), &[]);
    let s = stats(&out, &doc);
    assert!(s["changed"].as_u64().unwrap() > 0, "{s}");
    assert!(
        task_listed(&doc, "Restart NRPE"),
        "the restart handler was not notified by a changing run"
    );

    // What landed on disk.
    let rendered = std::fs::read_to_string(Path::new(NRPE_D).join(NRPE_FILE)).unwrap();
    let commands = nrpe_commands(&rendered);
    assert_installed_modes(Path::new(PLUGIN_DIR), &checks, "nagios");
    for c in &checks {
        let cmd = commands
            .get(c)
            .unwrap_or_else(|| panic!("no NRPE command for {c}:\n{rendered}"));
        // (sudo mode: the privileged ones behind "sudo -n", asserted below.)
        let bare = cmd.strip_prefix("/usr/bin/sudo -n ").unwrap_or(cmd);
        assert!(bare.starts_with(&format!("{PLUGIN_DIR}/{c} ")), "{cmd}");
        assert!(!cmd.contains("$ARG"), "{cmd}");
        assert!(
            cmd.contains(" -w ") && cmd.contains(" -c "),
            "{c}: thresholds not rendered: {cmd}"
        );
    }
    // The kubeconfig goes exactly to the checks whose --help lists --kubeconfig (the role reads
    // the installed binaries' options).
    for c in &checks {
        let help = Cmd::check(c).arg("--help").run().stdout;
        let takes = help.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("--kubeconfig ") || l.starts_with("--kubeconfig\t")
        });
        assert_eq!(
            commands[c].contains(&format!("--kubeconfig {KUBECONFIG_DIR}/kubeconfig")),
            takes,
            "{c}: {}",
            commands[c]
        );
    }
    let caps = |c: &str| {
        Cmd::new("getcap")
            .arg(Path::new(PLUGIN_DIR).join(c))
            .run()
            .stdout
    };
    for c in &checks {
        match PRIVILEGED.iter().find(|(p, _)| p == c) {
            Some((_, cap)) if caps_mode => {
                assert!(caps(c).contains(&format!("{cap}=ep")), "{c}: {}", caps(c));
            }
            _ => assert!(!caps(c).contains("cap_"), "{c} should have no capability"),
        }
        // sudo mode: exactly the privileged checks go through sudo.
        assert_eq!(
            commands[c].starts_with("/usr/bin/sudo -n "),
            !caps_mode && is_privileged(c),
            "{c}: {}",
            commands[c]
        );
    }
    assert_eq!(Path::new(SUDOERS).exists(), !caps_mode, "{SUDOERS}");
    // The run directory (stuck-probe markers): the agent's, 0750, and declared to tmpfiles.d so
    // that it comes back after a reboot; systemd-tmpfiles itself recreates it from the snippet.
    let assert_run_dir = || {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(RUN_DIR).unwrap();
        let nagios_uid: u32 = Cmd::new("id")
            .args(["-u", "nagios"])
            .run()
            .stdout
            .trim()
            .parse()
            .unwrap();
        assert!(m.is_dir());
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (nagios_uid, gid_of("nagios"), 0o750),
            "{RUN_DIR}"
        );
    };
    assert_run_dir();
    std::fs::remove_dir(RUN_DIR).unwrap();
    let tmpfiles = Cmd::new("systemd-tmpfiles")
        .arg("--create")
        .arg(TMPFILES)
        .run();
    assert_eq!(tmpfiles.code, 0, "{tmpfiles:?}");
    assert_run_dir();
    let kc = Path::new(KUBECONFIG_DIR).join("kubeconfig");
    let meta = std::fs::metadata(&kc).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o440);
    assert!(user_in_group("nagios", JOURNAL_GROUP));

    // The real NRPE daemon, as nagios, and the real check_nrpe against every command.
    let port = free_port();
    machine.nrpe = Some(start_nrpe(&ns, work.path(), port));
    // TLS with client certificates (the role's default): the monitoring server's client
    // certificate from the role's PKI is served; a client without one is refused.
    let pki = work.path().join("pki");
    let client: Vec<String> = ["-C", "client.crt", "-K", "client.key", "-A", "ca.crt"]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if i % 2 == 0 {
                a.to_string()
            } else {
                pki.join(a).display().to_string()
            }
        })
        .collect();
    let tls = std::fs::read_to_string(Path::new(NRPE_D).join(NRPE_TLS_FILE)).unwrap();
    assert!(tls.contains("ssl_client_certs=2"), "{tls}");
    let key = std::fs::metadata(Path::new(NRPE_TLS_DIR).join("nrpe.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o440);
    wait_nrpe(machine.nrpe.as_mut().unwrap(), port, &client);
    let plain = Cmd::new(CHECK_NRPE)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .run();
    assert_ne!(
        plain.code, 0,
        "NRPE served a client without a certificate: {plain:?}"
    );
    for c in &checks {
        let out = Cmd::new(CHECK_NRPE)
            .args([
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "30",
                "-c",
                c,
            ])
            .args(client.iter())
            .run();
        println!("{c} (exit {}): {}", out.code, out.first_line());
        assert_answer_here(c, &out, api_port, true);
        // Consistent with running the same command line directly as nagios.
        let direct = ns
            .cmd("setpriv")
            .args([
                "--reuid",
                "nagios",
                "--regid",
                "nagios",
                "--init-groups",
                "--",
                "sh",
                "-c",
                &commands[c],
            ])
            .run();
        // (The kernel log may gain records from other tests in between.)
        if c != "check_storage_kernel_errors" {
            assert_eq!(direct.code, out.code, "{c}: {direct:?} vs {out:?}");
            assert_eq!(direct.status(), out.status());
        }
    }
    // The group is what makes the journal readable: without supplementary groups, UNKNOWN
    // naming the group.
    if checks.iter().any(|c| c == "check_kubelet_nested_ops") {
        let out = Cmd::new("setpriv")
            .args([
                "--reuid",
                "nagios",
                "--regid",
                "nagios",
                "--clear-groups",
                "--",
            ])
            .arg(Path::new(PLUGIN_DIR).join("check_kubelet_nested_ops"))
            .arg("--journal-dir")
            .arg(&journal_dir)
            .run();
        out.assert_status("KUBELET_NESTED_OPS", 3);
        assert!(out.first_line().contains(JOURNAL_GROUP), "{out:?}");
    }
    // Only the agent's group may run the privileged binaries at all.
    assert_outsider_refused(&ns, Path::new(PLUGIN_DIR), &checks);
    // The capability is what makes it work: the same binary without it, as nagios, cannot stat
    // the PV's mount point.
    if caps_mode && checks.iter().any(|c| c == "check_ro_pvc_mounts") {
        // (Named like the check: the one program runs the check it is called by.)
        let nocap = work.path().join("nocap/check_ro_pvc_mounts");
        std::fs::create_dir_all(nocap.parent().unwrap()).unwrap();
        std::fs::set_permissions(
            nocap.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        e2e::copy_executable(&bin_dir().join("check_ro_pvc_mounts"), &nocap);
        std::fs::set_permissions(&nocap, std::fs::Permissions::from_mode(0o755)).unwrap();
        let out = ns
            .cmd("setpriv")
            .args([
                "--reuid",
                "nagios",
                "--regid",
                "nagios",
                "--init-groups",
                "--",
            ])
            .arg(&nocap)
            .arg("--kubelet-root")
            .arg(&kroot)
            .run();
        assert_ne!(out.code, 0, "without CAP_DAC_READ_SEARCH: {out:?}");
        assert!(out.stdout.contains("EACCES"), "{out:?}");
    }
    // The API checks authenticated with the installed kubeconfig's token.
    if checks.iter().any(|c| API_CHECKS.contains(&c.as_str())) {
        let reqs = api.requests();
        assert!(
            !reqs.is_empty() && reqs.iter().all(|r| r.user.is_some()),
            "{reqs:?}"
        );
    }
    // Without the API server (this machine has no Kubernetes): clear UNKNOWNs.
    drop(api);
    let until = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", api_port)).is_ok() {
        assert!(Instant::now() < until, "the test API server still listens");
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in checks.iter().filter(|c| API_CHECKS.contains(&c.as_str())) {
        let out = Cmd::new(CHECK_NRPE)
            .args([
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-t",
                "30",
                "-c",
                c,
            ])
            .args(client.iter())
            .run();
        println!(
            "{c} without API server (exit {}): {}",
            out.code,
            out.first_line()
        );
        assert_answer_here(c, &out, api_port, false);
    }
    // An undefined command is refused by NRPE, not silently OK.
    let none = Cmd::new(CHECK_NRPE)
        .args([
            "-H",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-c",
            "check_nope",
        ])
        .args(client.iter())
        .run();
    assert_eq!(none.code, 3, "{none:?}");

    // The Prometheus textfile timer's command, exactly as its service runs it (User=, Group=,
    // ExecStart= of the rendered unit): one file per check, complete, valid for promtool, no
    // temp files left behind (in sudo mode through the sudoers rules of its own command lines).
    let unit = std::fs::read_to_string(UNITS[0]).unwrap();
    let unit_value = |key: &str| {
        unit.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in {unit}"))
            .to_string()
    };
    assert_eq!(unit_value("User"), "nagios");
    assert_eq!(unit_value("Group"), "nagios");
    let exec_start = unit_value("ExecStart");
    assert!(exec_start.starts_with(WRAPPER), "{exec_start}");
    let wrap = ns
        .cmd("setpriv")
        .args([
            "--reuid",
            "nagios",
            "--regid",
            "nagios",
            "--init-groups",
            "--",
        ])
        .args(exec_start.split_whitespace())
        .run();
    assert_eq!(wrap.code, 0, "{wrap:?}");
    assert!(wrap.stderr.is_empty(), "the wrapper complained: {wrap:?}");
    let mut names: Vec<String> = std::fs::read_dir(&textfile_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let want: Vec<String> = checks
        .iter()
        .map(|c| format!("k8s_storage_checks_{c}.prom"))
        .collect();
    assert_eq!(
        names, want,
        "textfile directory holds exactly one file per check"
    );
    for c in &checks {
        let text =
            std::fs::read_to_string(textfile_dir.join(format!("k8s_storage_checks_{c}.prom")))
                .unwrap();
        assert!(
            text.contains(&format!("k8s_storage_check_status{{check=\"{c}\"}} ")),
            "{c}: {text}"
        );
        assert!(!text.to_lowercase().contains("usage error"), "{c}: {text}");
        assert_promtool_accepts(&textfile_dir.join(format!("k8s_storage_checks_{c}.prom")));
    }

    // The timer's units parse (systemd-analyze verify works without systemd as init).
    if need_tool(t, "systemd-analyze") {
        let v = Cmd::new("systemd-analyze").arg("verify").args(UNITS).run();
        assert!(
            v.code == 0 && !v.stderr.contains("k8s-storage-checks"),
            "systemd-analyze verify: {v:?}"
        );
    }

    // Second run: nothing changes, so NRPE is not restarted.
    let (out, doc) = ansible(&playbook, &vars, work.path(), &[]);
    let s = stats(&out, &doc);
    assert_eq!(
        s["changed"],
        0,
        "second run changed: {:?}",
        changed_tasks(&doc)
    );
    assert!(!task_listed(&doc, "Restart NRPE"));
    drop(machine);
    assert!(!Path::new(NRPE_D).join(NRPE_FILE).exists());
}

/// The suite's known checks (the role's argument spec lists the same names).
const ALL_KNOWN: [&str; 13] = [
    "check_ro_pvc_mounts",
    "check_pv_capacity",
    "check_stale_csi_mounts",
    "check_kubelet_nested_ops",
    "check_storage_kernel_errors",
    "check_iscsi_sessions",
    "check_stuck_scheduled",
    "check_jiva_rep_crashloop",
    "check_longhorn_volumes",
    "check_watch_cache",
    "check_volume_attachments",
    "check_stuck_terminating",
    "check_csi_node_plugins",
];

#[test]
fn static_nrpe_file_is_the_roles_rendering_and_covers_every_check() {
    let t = "static_nrpe_file_is_the_roles_rendering_and_covers_every_check";
    let repo = workspace_root().join("nrpe.d").join(NRPE_FILE);
    let text = std::fs::read_to_string(&repo).unwrap();
    let static_cmds = nrpe_commands(&text);
    // Every check in the workspace has a command (this keeps passing as checks land, and fails
    // when one lands without its NRPE command).
    for c in all_checks() {
        let cmd = static_cmds
            .get(&c)
            .unwrap_or_else(|| panic!("nrpe.d/{NRPE_FILE} has no command for {c}"));
        assert!(cmd.starts_with(&format!("{PLUGIN_DIR}/{c} -t 8")), "{cmd}");
        assert!(!cmd.contains("$ARG"), "{cmd}");
    }
    if !need_tool(t, "ansible-playbook") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // The role's defaults, plus the one opt-in the static file shows (commented "where Longhorn
    // runs"): check_longhorn_volumes among the cluster checks.
    let vars = json!({
        "k8s_storage_checks_nrpe_config_dir": work.path(),
        "k8s_storage_checks_nrpe_restart": false,
        "k8s_storage_checks_cluster_scope": true,
        "k8s_storage_checks_cluster_checks": [
            "check_jiva_rep_crashloop",
            "check_longhorn_volumes",
            "check_watch_cache",
            "check_volume_attachments",
            "check_stuck_terminating_all_nodes",
        ],
    });
    let (out, doc) = ansible(
        &workspace_root().join("tests/deploy/render-nrpe.yml"),
        &vars,
        work.path(),
        &[],
    );
    stats(&out, &doc);
    let rendered = std::fs::read_to_string(work.path().join(NRPE_FILE)).unwrap();
    let rendered_cmds = nrpe_commands(&rendered);
    // Every check, and check_stuck_terminating --all-nodes of the cluster host.
    assert_eq!(
        rendered_cmds.keys().collect::<Vec<_>>().len(),
        ALL_KNOWN.len() + 1,
        "{rendered}"
    );
    assert!(
        rendered_cmds["check_stuck_terminating_all_nodes"].ends_with(" --all-nodes"),
        "{rendered}"
    );
    assert_eq!(
        static_cmds, rendered_cmds,
        "nrpe.d/{NRPE_FILE} differs from the role's rendering with its defaults"
    );
}

/// The program and the names of the checks that exist, packed like a release tarball (one top
/// directory; packaging/mkdist: the program and a symbolic link per name).
fn release_tarball(work: &Path, checks: &[String]) -> PathBuf {
    let top = work.join("k8s-storage-checks-0.1.0");
    std::fs::create_dir_all(&top).unwrap();
    e2e::copy_executable(&bin_dir().join(PROGRAM), &top.join(PROGRAM));
    for c in checks {
        std::os::unix::fs::symlink(PROGRAM, top.join(c)).unwrap();
    }
    let tarball = work.join("k8s-storage-checks-0.1.0-x86_64-linux.tar.gz");
    let out = Cmd::new("tar")
        .arg("-C")
        .arg(work)
        .arg("-czf")
        .arg(&tarball)
        .arg("k8s-storage-checks-0.1.0")
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    tarball
}

/// A sudoers drop-in installed in /etc/sudoers.d for the duration of a test (removed on drop).
struct SudoersDropIn(PathBuf);

impl SudoersDropIn {
    fn install(text: &str) -> SudoersDropIn {
        let p = PathBuf::from(format!(
            "/etc/sudoers.d/k8s-storage-checks-test-{}",
            std::process::id()
        ));
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o440)).unwrap();
        let guard = SudoersDropIn(p);
        let check = Cmd::new("visudo").arg("-c").run();
        assert_eq!(check.code, 0, "{check:?}");
        guard
    }
}

impl Drop for SudoersDropIn {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Another layout, entirely under a temp directory: binaries from a release tarball, sudo mode
/// (the sudoers drop-in validated by visudo), iscsid.conf edited, no package install, no group
/// change. Idempotent as well.
#[test]
fn role_on_another_layout_from_a_release_tarball_in_sudo_mode() {
    let t = "role_on_another_layout_from_a_release_tarball_in_sudo_mode";
    if !need_root(t)
        || !need_tool(t, "ansible-playbook")
        || !need_tool(t, "visudo")
        || !need_tool(t, "setcap")
    {
        return;
    }
    let _machine = e2e::exclusive();
    let checks = all_checks();
    let work = tempfile::tempdir().unwrap();
    let tarball = release_tarball(work.path(), &checks);
    let root = work.path().join("root");
    let iscsid = root.join("etc/iscsi/iscsid.conf");
    std::fs::create_dir_all(iscsid.parent().unwrap()).unwrap();
    std::fs::write(
        &iscsid,
        "node.startup = manual\n# To specify the length of time to wait for session re-establishment\nnode.session.timeo.replacement_timeout = 120\nnode.conn[0].timeo.login_timeout = 15\n",
    )
    .unwrap();
    let p = |s: &str| root.join(s).to_string_lossy().into_owned();
    let vars = json!({
        "k8s_storage_checks_release_tarball": tarball,
        "k8s_storage_checks_tarball_strip": 1,
        "k8s_storage_checks_unpack_dir": p("var/cache/k8s-storage-checks/release"),
        "k8s_storage_checks_enabled": checks,
        "k8s_storage_checks_plugin_dir": p("usr/lib64/nagios/plugins"),
        "k8s_storage_checks_nrpe_config_dir": p("etc/nrpe.d"),
        "k8s_storage_checks_nrpe_user": "nagios",
        "k8s_storage_checks_nrpe_group": "nagios",
        "k8s_storage_checks_install_packages": false,
        "k8s_storage_checks_nrpe_restart": false,
        "k8s_storage_checks_nrpe_extra_groups": [],
        "k8s_storage_checks_privilege_mode": "sudo",
        "k8s_storage_checks_sudoers_file": p("etc/sudoers.d/k8s-storage-checks"),
        "k8s_storage_checks_state_dir": p("var/lib/k8s-storage-checks"),
        "k8s_storage_checks_run_dir": p("run/k8s-storage-checks"),
        "k8s_storage_checks_tmpfiles_dir": p("etc/tmpfiles.d"),
        "k8s_storage_checks_kubeconfig": p("etc/k8s-storage-checks/kubeconfig"),
        "k8s_storage_checks_nrpe_tls_dir": p("etc/nagios/k8s-storage-checks"),
        "k8s_storage_checks_nrpe_tls_pki_dir": work.path().join("pki"),
        // A space and a ':' exercise the shell quoting (nrpe.d) and the sudoers escaping alike.
        "k8s_storage_checks_kubelet_roots": ["/var/lib/kubelet", "/srv/my kubelet"],
        "k8s_storage_checks_iscsi_manage": true,
        "k8s_storage_checks_iscsid_conf": iscsid,
        "k8s_storage_checks_thresholds": {"check_ro_pvc_mounts": {"warning": "0", "critical": "1:"}},
    });
    std::fs::create_dir_all(root.join("etc/sudoers.d")).unwrap();
    let playbook = workspace_root().join("tests/deploy/site.yml");
    let (out, doc) = ansible(&playbook, &vars, work.path(), &[]);
    let s = stats(&out, &doc);
    assert!(s["changed"].as_u64().unwrap() > 0);

    // Binaries in the other plugin dir, without capabilities (sudo mode); the ones with a sudo
    // rule only for root and the NRPE group.
    assert_installed_modes(&root.join("usr/lib64/nagios/plugins"), &checks, "nagios");
    for c in &checks {
        let b = root.join("usr/lib64/nagios/plugins").join(c);
        assert!(b.exists(), "{}", b.display());
        let caps = Cmd::new("getcap").arg(&b).run();
        assert!(!caps.stdout.contains("cap_"), "{caps:?}");
    }
    // The sudoers drop-in allows exactly the privileged command lines, and visudo accepts it.
    let sudoers_path = root.join("etc/sudoers.d/k8s-storage-checks");
    let sudoers = std::fs::read_to_string(&sudoers_path).unwrap();
    let check = Cmd::new("visudo").arg("-cf").arg(&sudoers_path).run();
    assert_eq!(check.code, 0, "{check:?}\n{sudoers}");
    // NRPE TLS: the settings name the staged certificates, which the role made and installed.
    let tls = std::fs::read_to_string(root.join("etc/nrpe.d").join(NRPE_TLS_FILE)).unwrap();
    let tls_dir = root.join("etc/nagios/k8s-storage-checks");
    assert!(
        tls.contains(&format!(
            "ssl_privatekey_file={}/nrpe.key",
            tls_dir.display()
        )) && tls.contains("ssl_client_certs=2"),
        "{tls}"
    );
    let key = std::fs::metadata(tls_dir.join("nrpe.key")).unwrap();
    assert_eq!(key.permissions().mode() & 0o777, 0o440);
    assert!(work.path().join("pki/client.crt").exists());
    let nrpe = std::fs::read_to_string(root.join("etc/nrpe.d").join(NRPE_FILE)).unwrap();
    let cmds = nrpe_commands(&nrpe);
    for c in &checks {
        let privileged = is_privileged(c);
        assert_eq!(
            cmds[c].starts_with("/usr/bin/sudo -n "),
            privileged,
            "{c}: {}",
            cmds[c]
        );
        assert_eq!(
            sudoers.contains(&format!("/usr/lib64/nagios/plugins/{c} ")),
            privileged,
            "{sudoers}"
        );
    }
    if checks.iter().any(|c| c == "check_ro_pvc_mounts") {
        let cmd = &cmds["check_ro_pvc_mounts"];
        // In sudo mode it runs as root: its memory of the volumes is in root's state directory.
        assert!(
            cmd.ends_with(&format!(
                "--kubelet-root /var/lib/kubelet --kubelet-root '/srv/my kubelet' --state-dir {}/var/lib/k8s-storage-checks/root -w 0 -c 1:",
                root.display()
            )),
            "{cmd}"
        );
        // sudoers escapes ':' in arguments.
        assert!(sudoers.contains("-w 0 -c 1\\:"), "{sudoers}");
    }
    // sudo itself agrees: with the drop-in installed, exactly NRPE's command lines are allowed
    // for nagios (parsed by the shell as NRPE does), and a changed one is not.
    {
        let live = SudoersDropIn::install(&sudoers);
        for (c, cmd) in cmds
            .iter()
            .filter(|(_, cmd)| cmd.starts_with("/usr/bin/sudo -n "))
        {
            let rest = cmd.trim_start_matches("/usr/bin/sudo -n ");
            let ok = Cmd::new("sh")
                .arg("-c")
                .arg(format!("sudo -n -l -U nagios {rest}"))
                .run();
            assert_eq!(
                ok.code, 0,
                "{c}: sudo does not allow NRPE's command line: {ok:?}"
            );
            let changed = Cmd::new("sh")
                .arg("-c")
                .arg(format!("sudo -n -l -U nagios {rest} -v"))
                .run();
            assert_ne!(
                changed.code, 0,
                "{c}: sudo allows more than the command line"
            );
        }
        drop(live);
    }
    // iscsid.conf: the incident's action item, the rest of the file untouched.
    let conf = std::fs::read_to_string(&iscsid).unwrap();
    assert!(
        conf.contains("\nnode.session.timeo.replacement_timeout = 300\n"),
        "{conf}"
    );
    assert!(!conf.contains("= 120"), "{conf}");
    assert!(
        conf.contains("node.conn[0].timeo.login_timeout = 15"),
        "{conf}"
    );
    let state = std::fs::metadata(root.join("var/lib/k8s-storage-checks")).unwrap();
    assert_eq!(state.permissions().mode() & 0o777, 0o750);

    let (out, doc) = ansible(&playbook, &vars, work.path(), &[]);
    let s = stats(&out, &doc);
    assert_eq!(
        s["changed"],
        0,
        "second run changed: {:?}",
        changed_tasks(&doc)
    );
}

/// A bad variable must stop the role before it touches anything (meta/argument_specs.yml).
#[test]
fn argument_spec_rejects_bad_variables() {
    let t = "argument_spec_rejects_bad_variables";
    if !need_tool(t, "ansible-playbook") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let playbook = workspace_root().join("tests/deploy/site.yml");
    for (bad, what) in [
        (
            json!({"k8s_storage_checks_enabled": ["check_ro_pvc_mounts", "check_nonexistent"]}),
            "k8s_storage_checks_enabled",
        ),
        (
            json!({"k8s_storage_checks_privilege_mode": "root"}),
            "k8s_storage_checks_privilege_mode",
        ),
        (
            json!({"k8s_storage_checks_timeout": "soon"}),
            "k8s_storage_checks_timeout",
        ),
    ] {
        let mut vars = bad.clone();
        vars["k8s_storage_checks_src_dir"] = json!(work.path().join("nonexistent-build"));
        vars["k8s_storage_checks_plugin_dir"] = json!(work.path().join("plugins"));
        let (out, doc) = ansible(&playbook, &vars, work.path(), &[]);
        assert_ne!(out.code, 0, "{bad} was accepted");
        let text = doc.to_string();
        assert!(
            text.contains("Validating arguments against arg spec") && text.contains(what),
            "{bad}: the failure is not the argument spec naming {what}:\n{}",
            out.stdout
        );
        assert!(
            !work.path().join("plugins").exists(),
            "the role ran tasks despite {bad}"
        );
    }
    // The same playbook with good variables passes the syntax check.
    let out = Cmd::new("ansible-playbook")
        .args(["--syntax-check", "-i", "localhost,"])
        .arg(&playbook)
        .arg(workspace_root().join("ansible/playbook.yml"))
        .env("ANSIBLE_ROLES_PATH", role_dir())
        .run();
    assert_eq!(out.code, 0, "{out:?}");
}

/// ansible-lint (production profile) over the role and the example playbook, when installed
/// (`pip install ansible-lint`; runs offline, no Galaxy access needed).
#[test]
fn ansible_lint_passes() {
    let t = "ansible_lint_passes";
    let lint = std::env::var("ANSIBLE_LINT").unwrap_or_else(|_| "ansible-lint".into());
    if !need_tool(t, &lint) {
        return;
    }
    let out = Command::new(&lint)
        .args(["--offline", "--nocolor", "--profile", "production"])
        .arg("roles/k8s_storage_checks")
        .arg("playbook.yml")
        .current_dir(workspace_root().join("ansible"))
        .env("ANSIBLE_ROLES_PATH", role_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("run ansible-lint");
    let out = Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: Duration::ZERO,
    };
    assert_eq!(out.code, 0, "ansible-lint:\n{}\n{}", out.stdout, out.stderr);
}

/// The argument keys of each `object CheckCommand` in the Icinga 2 file, with those of the
/// templates it imports; keyed by command name, with the binary it runs.
fn icinga_commands(text: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut blocks: Vec<(String, String)> = Vec::new(); // (header line, body)
    for line in text.lines() {
        if line.starts_with("object ")
            || line.starts_with("template ")
            || line.starts_with("apply ")
        {
            blocks.push((line.to_string(), String::new()));
        } else if let Some(b) = blocks.last_mut() {
            b.1.push_str(line);
            b.1.push('\n');
        }
    }
    let quoted = |s: &str| s.split('"').nth(1).unwrap_or("").to_string();
    let keys = |body: &str| -> Vec<String> {
        body.lines()
            .map(str::trim)
            .filter(|l| l.starts_with("\"-"))
            .map(quoted)
            .collect()
    };
    let templates: BTreeMap<String, Vec<String>> = blocks
        .iter()
        .filter(|(h, _)| h.starts_with("template CheckCommand"))
        .map(|(h, b)| (quoted(h), keys(b)))
        .collect();
    let mut out = BTreeMap::new();
    for (h, b) in blocks
        .iter()
        .filter(|(h, _)| h.starts_with("object CheckCommand"))
    {
        let mut k = keys(b);
        for l in b
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("import "))
        {
            k.extend(templates.get(&quoted(l)).cloned().unwrap_or_default());
        }
        let binary = b
            .lines()
            .find_map(|l| l.split("PluginDir + \"/").nth(1))
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .to_string();
        out.insert(quoted(h), (binary, k));
    }
    out
}

/// Every check in the workspace has a CheckCommand running it, and every option the CheckCommand
/// passes is one the check accepts (from its --help).
#[test]
fn icinga2_commands_match_the_checks_options() {
    let text =
        std::fs::read_to_string(workspace_root().join("icinga2/k8s-storage-checks.conf")).unwrap();
    let cmds = icinga_commands(&text);
    assert_eq!(cmds.len(), ALL_KNOWN.len(), "{:?}", cmds.keys());
    for c in all_checks() {
        let name = format!("k8s_{}", c.trim_start_matches("check_"));
        let (binary, keys) = cmds
            .get(&name)
            .unwrap_or_else(|| panic!("no CheckCommand {name} for {c}"));
        assert_eq!(binary, &c);
        let help = Cmd::check(&c).arg("--help").run().stdout;
        for k in keys {
            // A short option is listed as "-w, --…" (its long name varies between checks).
            let long = if k.starts_with("--") {
                k.clone()
            } else {
                format!("{k},")
            };
            let long = long.as_str();
            assert!(
                help.match_indices(long).any(|(i, _)| {
                    let next = help[i + long.len()..].chars().next().unwrap_or(' ');
                    !next.is_alphanumeric() && next != '-' && next != '_'
                }),
                "CheckCommand {name} passes {k}, which {c} does not accept:\n{help}"
            );
        }
    }
}

/// The Icinga 2 definitions (the CheckCommands and the services file's apply rule) validate with
/// the real `icinga2 daemon -C`, in a throwaway config with a master zone, an agent zone and a
/// host using the apply rule (command_endpoint).
#[test]
fn icinga2_definitions_validate() {
    let t = "icinga2_definitions_validate";
    if !need_tool(t, "icinga2") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let ours = workspace_root().join("icinga2/k8s-storage-checks.conf");
    let checks: Vec<String> = ALL_KNOWN
        .iter()
        .map(|c| format!("\"k8s_{}\"", c.trim_start_matches("check_")))
        .collect();
    let main = |include: &Path| {
        format!(
            r#"const PluginDir = "/usr/lib/nagios/plugins"
const NodeName = "master"
const ZoneName = "master"
include <itl>
include <plugins>
object Endpoint "master" {{ }}
object Zone "master" {{ endpoints = [ "master" ] }}
object Endpoint "node-1" {{ }}
object Zone "node-1" {{ endpoints = [ "node-1" ]; parent = "master" }}
object Host "node-1" {{
  check_command = "dummy"
  zone = "master"
  vars.agent_endpoint = name
  vars.k8s_storage_checks = [ {} ]
  vars.k8s_ro_pvc_mounts_kubelet_root = [ "/var/lib/kubelet", "/var/snap/microk8s/common/var/lib/kubelet" ]
  vars.k8s_stuck_scheduled_warning = "0"
}}
object Host "not-an-agent" {{ check_command = "dummy" }}
include "{}"
include "{}"
"#,
            checks.join(", "),
            include.display(),
            workspace_root()
                .join("icinga2/k8s-storage-services.conf")
                .display()
        )
    };
    let validate = |include: &Path| {
        let cfg = work.path().join("icinga2.conf");
        std::fs::write(&cfg, main(include)).unwrap();
        Cmd::new("icinga2")
            .args(["daemon", "-C", "-c"])
            .arg(&cfg)
            .run()
    };
    let out = validate(&ours);
    assert_eq!(
        out.code, 0,
        "icinga2 daemon -C:\n{}{}",
        out.stdout, out.stderr
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(
        all.contains(&format!("Instantiated {} Services", ALL_KNOWN.len())),
        "the apply rule should create one service per listed check:\n{all}"
    );
    // The validator really reads our file: a broken copy fails.
    let broken = work.path().join("broken.conf");
    let text = std::fs::read_to_string(&ours).unwrap();
    std::fs::write(
        &broken,
        text.replacen(
            "repeat_key = true",
            "repeat_key = true; no_such_attribute = 1",
            1,
        ),
    )
    .unwrap();
    let out = validate(&broken);
    assert_ne!(
        out.code, 0,
        "a broken definition validated:\n{}",
        out.stdout
    );
}

/// deploy/rbac.yaml as JSON documents (parsed by the system's PyYAML, which Ansible brings).
fn rbac_docs() -> Vec<Value> {
    let out = Cmd::new("/usr/bin/python3")
        .args([
            "-c",
            "import json,sys,yaml; print(json.dumps([d for d in yaml.safe_load_all(open(sys.argv[1])) if d]))",
        ])
        .arg(workspace_root().join("deploy/rbac.yaml"))
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    serde_json::from_str(&out.stdout).unwrap()
}

/// The checks' identity can read exactly pods, PVs, VolumeAttachments and events, and write
/// only the one canary ConfigMap; every binding points at the ServiceAccount.
#[test]
fn rbac_grants_only_what_the_checks_read() {
    let t = "rbac_grants_only_what_the_checks_read";
    if !need_tool(t, "/usr/bin/python3") {
        return;
    }
    let docs = rbac_docs();
    let by_kind = |k: &str| -> Vec<&Value> { docs.iter().filter(|d| d["kind"] == k).collect() };
    for d in &docs {
        assert!(
            d["apiVersion"].is_string() && d["metadata"]["name"].is_string(),
            "{d}"
        );
    }
    let sa = by_kind("ServiceAccount");
    assert_eq!(sa.len(), 1);
    let (sa_name, sa_ns) = (&sa[0]["metadata"]["name"], &sa[0]["metadata"]["namespace"]);

    let cr = by_kind("ClusterRole");
    assert_eq!(cr.len(), 1);
    // What each check reads, verb by verb (real_apiserver::rbac_yaml_grants_exactly_what_the_
    // checks_need proves each is needed and enough on a real API server; this reads the file).
    let mut granted: Vec<(String, String, String)> = Vec::new();
    for rule in cr[0]["rules"].as_array().unwrap() {
        for g in rule["apiGroups"].as_array().unwrap() {
            for r in rule["resources"].as_array().unwrap() {
                for v in rule["verbs"].as_array().unwrap() {
                    granted.push((
                        g.as_str().unwrap().into(),
                        r.as_str().unwrap().into(),
                        v.as_str().unwrap().into(),
                    ));
                }
            }
        }
    }
    granted.sort();
    let want: Vec<(String, String, String)> = [
        ("", "events", "list"),
        // The stuck-pod checks prove a node without pods exists (kube::checks::nodes).
        ("", "nodes", "get"),
        ("", "nodes", "list"),
        ("", "persistentvolumes", "list"),
        ("", "pods", "list"),
        // check_longhorn_volumes: Longhorn's volumes, replicas and engines (issue 30).
        ("longhorn.io", "engines", "list"),
        ("longhorn.io", "replicas", "list"),
        ("longhorn.io", "volumes", "list"),
        // check_jiva_rep_crashloop: Jiva's own status (issue 30).
        ("openebs.io", "jivavolumes", "list"),
        // check_csi_node_plugins: the node's CSINode (issue 30).
        ("storage.k8s.io", "csinodes", "get"),
        ("storage.k8s.io", "volumeattachments", "list"),
    ]
    .iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()))
    .collect();
    assert_eq!(granted, want);

    let role = by_kind("Role");
    assert_eq!(role.len(), 1);
    assert_eq!(role[0]["metadata"]["namespace"], "kube-system");
    for rule in role[0]["rules"].as_array().unwrap() {
        assert_eq!(rule["resources"], json!(["configmaps"]));
        assert_eq!(rule["resourceNames"], json!(["k8s-storage-checks-canary"]));
        for v in rule["verbs"].as_array().unwrap() {
            assert!(["get", "patch"].contains(&v.as_str().unwrap()), "{rule}");
        }
    }
    let cm = by_kind("ConfigMap");
    assert_eq!(cm[0]["metadata"]["name"], "k8s-storage-checks-canary");
    assert_eq!(cm[0]["metadata"]["namespace"], "kube-system");

    for b in by_kind("ClusterRoleBinding")
        .into_iter()
        .chain(by_kind("RoleBinding"))
    {
        let s = &b["subjects"].as_array().unwrap();
        assert_eq!(s.len(), 1, "{b}");
        assert_eq!(&s[0]["kind"], "ServiceAccount");
        assert_eq!(&s[0]["name"], sa_name);
        assert_eq!(&s[0]["namespace"], sa_ns);
        let target = if b["kind"] == "RoleBinding" {
            &role[0]
        } else {
            &cr[0]
        };
        assert_eq!(b["roleRef"]["name"], target["metadata"]["name"], "{b}");
        assert_eq!(b["roleRef"]["kind"], target["kind"], "{b}");
    }
    assert_eq!(by_kind("ClusterRoleBinding").len(), 1);
    assert_eq!(by_kind("RoleBinding").len(), 1);
}

/// A fresh, minimal Debian host (debootstrap minbase with only what Ansible needs to manage it:
/// python3, sudo for `become`, and libcap2-bin, the role's one requirement; no python3-apt, so
/// check mode's package task must do without it), made once and cached under target/ like
/// container_mode.rs's image base.
pub(crate) fn fresh_host_rootfs() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    let dir = target.join("container-emu/debian-bookworm-fresh");
    let stamp = "bookworm minbase python3,sudo,libcap2-bin";
    let stamp_file = dir.join(".k8s-storage-checks-base");
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s.trim() == stamp) {
        return dir;
    }
    let tmp = dir.with_extension("tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    let mirror = std::env::var("E2E_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    let st = Command::new("debootstrap")
        .args([
            "--variant=minbase",
            "--include=python3,sudo,libcap2-bin",
            "bookworm",
        ])
        .arg(&tmp)
        .arg(&mirror)
        .stdin(Stdio::null())
        .status()
        .expect("run debootstrap");
    assert!(st.success(), "debootstrap failed (mirror {mirror})");
    std::fs::rename(&tmp, &dir).unwrap();
    std::fs::write(&stamp_file, stamp).unwrap();
    dir
}

/// Every path of a root file system with its type, mode, owner and size (what a run that
/// changes nothing must leave as it was), leaving out Ansible's own temp files.
pub(crate) fn tree_listing(root: &Path) -> Vec<String> {
    let out = Cmd::new("find")
        .arg(root)
        .args([
            "-xdev",
            "-path",
            "*/root/.ansible",
            "-prune",
            "-o",
            "-path",
            "*/tmp/*",
            "-prune",
            "-o",
            // apt's own caches and planner log: any `apt-get -s` (the apt module's check mode)
            // writes them on a fresh root; they are not something the role installs.
            "-path",
            "*/var/cache/apt/*.bin",
            "-prune",
            "-o",
            "-path",
            "*/var/log/apt/eipp.log.xz",
            "-prune",
            "-o",
            "-printf",
            "%P %y %m %U:%G %s\n",
        ])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let mut v: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// `ansible-playbook --check` of the example playbook, as its README says to run it, against a
/// fresh, minimal host where nothing of the suite (not even NRPE, not even python3-apt) is
/// installed yet: it must pass, report what it would install, and change nothing.
#[test]
fn example_playbook_in_check_mode_on_a_fresh_host() {
    let t = "example_playbook_in_check_mode_on_a_fresh_host";
    if !need_root(t)
        || !need_tool(t, "ansible-playbook")
        || !need_tool(t, "debootstrap")
        || !need_tool(t, "chroot")
    {
        return;
    }
    let checks = all_checks();
    let bins = bin_dir();
    let root = fresh_host_rootfs();
    // An iSCSI node (the example manages iscsid.conf): open-iscsi's file, nothing else.
    let iscsid = root.join("etc/iscsi/iscsid.conf");
    if !iscsid.exists() {
        std::fs::create_dir_all(iscsid.parent().unwrap()).unwrap();
        std::fs::write(
            &iscsid,
            "node.startup = manual\nnode.session.timeo.replacement_timeout = 120\n",
        )
        .unwrap();
    }
    for p in [
        "usr/lib/nagios",
        "etc/nagios",
        "etc/sudoers.d/k8s-storage-checks",
        // Minimal: without python3-apt the apt module cannot run in check mode.
        "usr/lib/python3/dist-packages/apt_pkg.cpython-311-x86_64-linux-gnu.so",
        "usr/lib/python3/dist-packages/apt",
    ] {
        assert!(!root.join(p).exists(), "the fresh host has {p}: not fresh");
    }
    let work = tempfile::tempdir().unwrap();
    let inventory = work.path().join("inventory");
    std::fs::write(
        &inventory,
        format!(
            "[k8s_nodes]\nfresh-node ansible_connection=community.general.chroot ansible_host={} ansible_python_interpreter=/usr/bin/python3\n",
            root.display()
        ),
    )
    .unwrap();
    // The kubeconfig the README's command line passes (docs/deploy/kubernetes.md makes a real one).
    let kubeconfig = work.path().join("k8s-storage-checks.kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let before = tree_listing(&root);
    let playbook = workspace_root().join("ansible/playbook.yml");
    let mut cmd = Cmd::new("ansible-playbook")
        .arg("-i")
        .arg(&inventory)
        .arg(&playbook)
        .args(["--check", "--diff", "-e"])
        .arg(format!(
            "k8s_storage_checks_kubeconfig_src={}",
            kubeconfig.display()
        ));
    // The playbook takes the binaries from the repository's build directory; only when this
    // test's binaries are elsewhere (E2E_BIN_DIR) is that overridden.
    let default_bins = workspace_root().join("target/x86_64-unknown-linux-musl/release");
    if bins != default_bins {
        cmd = cmd
            .arg("-e")
            .arg(format!("k8s_storage_checks_src_dir={}", bins.display()));
    }
    let out = cmd
        .env(
            "ANSIBLE_CONFIG",
            workspace_root().join("ansible/ansible.cfg"),
        )
        .env("ANSIBLE_STDOUT_CALLBACK", "json")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out.code, 0,
        "ansible-playbook --check failed on a fresh host:\n{}\n{}",
        out.stdout, out.stderr
    );
    let s = &doc["stats"]["fresh-node"];
    assert_eq!(s["failures"], 0, "{s}");
    assert_eq!(s["unreachable"], 0, "{s}");
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    // It reports the installs it would make: the package, each binary, the NRPE commands.
    let changed = changed_tasks_of(&doc, "fresh-node");
    for task in [
        // Without python3-apt: the missing packages as dpkg tells them.
        "Install the NRPE server package (check mode without python3-apt, from dpkg)",
        "Copy the binaries from the build directory",
        "Render the NRPE commands file",
        "Create the run directory of the checks",
    ] {
        assert!(
            changed.iter().any(|n| n.ends_with(task)),
            "--check does not report {task:?}: {changed:?}"
        );
    }
    assert!(
        out.stdout
            .contains("Would install nagios-nrpe-server (python3-apt is missing"),
        "{}",
        out.stdout
    );
    assert!(!checks.is_empty());
    // And it changed nothing.
    let after = tree_listing(&root);
    let gone: Vec<&String> = before.iter().filter(|l| !after.contains(l)).collect();
    let new: Vec<&String> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(
        gone.is_empty() && new.is_empty(),
        "--check changed the host: removed/changed {gone:?}, added {new:?}"
    );
}

/// Names of the tasks that reported a change for `host`.
pub(crate) fn changed_tasks_of(doc: &Value, host: &str) -> Vec<String> {
    let mut v = Vec::new();
    for play in doc["plays"].as_array().into_iter().flatten() {
        for t in play["tasks"].as_array().into_iter().flatten() {
            if t["hosts"][host]["changed"] == true {
                v.push(t["task"]["name"].as_str().unwrap_or("?").to_string());
            }
        }
    }
    v
}

/// `make install` (staged under DESTDIR) puts the privileged binaries root:<agent group> 0750
/// and the others root:root 0755, and declares the run directory to tmpfiles.d;
/// `make install-caps` gives the privileged ones exactly their capabilities.
#[test]
fn make_install_gives_only_the_agent_the_privileged_binaries() {
    let t = "make_install_gives_only_the_agent_the_privileged_binaries";
    if !need_root(t) || !need_tool(t, "make") || !need_tool(t, "setcap") {
        return;
    }
    let checks = all_checks();
    let bins = bin_dir();
    let work = tempfile::tempdir().unwrap();
    let dest = work.path().join("stage");
    let make = |target: &str| {
        // -o all: the binaries are built already (by this test process).
        Cmd::new("make")
            .arg("-C")
            .arg(workspace_root())
            .args(["-o", "all", target])
            .arg(format!("DESTDIR={}", dest.display()))
            .arg(format!("BIN={}", bins.display()))
            .args(["AGENT_USER=nagios", "AGENT_GROUP=nagios"])
            .run()
    };
    let out = make("install");
    assert_eq!(out.code, 0, "{out:?}");
    let plugins = dest.join("usr/lib/nagios/plugins");
    assert_installed_modes(&plugins, &checks, "nagios");
    let tmpfiles =
        std::fs::read_to_string(dest.join("etc/tmpfiles.d/k8s-storage-checks.conf")).unwrap();
    assert!(
        tmpfiles
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["d", RUN_DIR, "0750", "nagios", "nagios", "-"]),
        "{tmpfiles}"
    );
    let out = make("install-caps");
    assert_eq!(out.code, 0, "{out:?}");
    for c in &checks {
        let got = Cmd::new("getcap").arg(plugins.join(c)).run().stdout;
        match PRIVILEGED.iter().find(|(p, _)| p == c) {
            Some((_, cap)) => assert!(got.contains(&format!("{cap}=ep")), "{c}: {got}"),
            None => assert!(!got.contains("cap_"), "{c}: {got}"),
        }
    }
    // Installing again replaces the files (and so drops their capabilities), keeping the modes.
    let out = make("install");
    assert_eq!(out.code, 0, "{out:?}");
    assert_installed_modes(&plugins, &checks, "nagios");
}
