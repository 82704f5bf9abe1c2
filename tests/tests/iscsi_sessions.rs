//! check_iscsi_sessions, release binary, against sysfs trees with the kernel's real iSCSI layout
//! (this kernel has no iSCSI transport) and mount tables that put PV mounts on those disks.
//! The hosts are modelled on the incident's microk8s nodes: Jiva volumes, one session per volume.

use e2e::sysfs::{mountinfo_line, Session, Sysfs};
use e2e::{Cmd, Output};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const NAME: &str = "ISCSI_SESSIONS";
const BIN: &str = "check_iscsi_sessions";
/// The kubelet root the fixtures' mount tables name. A given `--kubelet-root` must exist, so it is
/// a directory every test makes (a path of its own, not the machine's real kubelet roots).
const KUBELET: &str = "/tmp/k8s-storage-checks-e2e/var/snap/microk8s/common/var/lib/kubelet";
const JIVA: &str = "iqn.2016-09.com.openebs.jiva:";
const SEERR: &str = "pvc-746b2837-5f1c-4d7e-9a51-3c2b8e0f4a11";
const RADARR: &str = "pvc-a634b9a3-0c8e-4b2f-8d6a-91e7f2c5b302";
const CODER: &str = "pvc-8ecc1d40-7b3a-4e96-b1f8-5d2a6c9e0f77";

/// A node: a temp dir holding `sys/` and a mount table.
struct Node {
    dir: tempfile::TempDir,
    sys: Sysfs,
    mounts: String,
    next_id: u32,
}

impl Node {
    fn new() -> Node {
        let dir = tempfile::tempdir().unwrap();
        // Traversable by an unprivileged user (the unreadable-file test runs the check as nobody).
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let sys = Sysfs::new(dir.path());
        std::fs::create_dir_all(KUBELET).unwrap();
        Node {
            dir,
            sys,
            mounts: "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw,errors=remount-ro\n29 22 0:26 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n".into(),
            next_id: 100,
        }
    }

    /// A PV on a disk as the kubelet mounts it: the CSI staging globalmount and the pod's
    /// publish bind. `super_opts` `ro` after ext4 aborted.
    fn pv_mounts(&mut self, pv: &str, sd: &str, majmin: &str, pod: &str, super_opts: &str) {
        let staging = PathBuf::from(format!(
            "{KUBELET}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/{}/globalmount",
            e2e::sha256_hex(pv)
        ));
        let publish = PathBuf::from(format!(
            "{KUBELET}/pods/{pod}/volumes/kubernetes.io~csi/{pv}/mount"
        ));
        for p in [staging, publish] {
            self.mounts
                .push_str(&mountinfo_line(self.next_id, majmin, &p, sd, super_opts));
            self.next_id += 1;
        }
    }

    fn mountinfo(&self) -> PathBuf {
        let p = self.dir.path().join("mountinfo");
        std::fs::write(&p, &self.mounts).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--sys".into(),
            self.sys.root.display().to_string(),
            "--mountinfo".into(),
            self.mountinfo().display().to_string(),
            "--kubelet-root".into(),
            KUBELET.into(),
        ]
    }

    fn check(&self, extra: &[&str]) -> Output {
        Cmd::check(BIN).args(self.args()).args(extra).run()
    }
}

/// The three Jiva volumes of a healthy node, each with its disk mounted for a pod.
fn healthy(node: &mut Node) -> Vec<Session> {
    let s = vec![
        Session::new(1, &format!("{JIVA}{SEERR}"))
            .portal("10.152.183.41", 3260)
            .disk(0, "sdb", "8:16", "running"),
        Session::new(2, &format!("{JIVA}{RADARR}"))
            .portal("10.152.183.42", 3260)
            .disk(0, "sdc", "8:32", "running"),
        Session::new(3, &format!("{JIVA}{CODER}"))
            .portal("10.152.183.43", 3260)
            .disk(0, "sdd", "8:48", "running"),
    ];
    node.pv_mounts(
        SEERR,
        "sdb",
        "8:16",
        "0b5c3f7e-seerr",
        "rw,errors=remount-ro",
    );
    node.pv_mounts(
        RADARR,
        "sdc",
        "8:32",
        "4d2a9e11-radarr",
        "rw,errors=remount-ro",
    );
    node.pv_mounts(
        CODER,
        "sdd",
        "8:48",
        "9f0e6b2c-coder",
        "rw,errors=remount-ro",
    );
    s
}

fn add_all(node: &Node, sessions: &[Session]) {
    for s in sessions {
        node.sys.add(s);
    }
}

fn line_with<'a>(out: &'a Output, needle: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{}", out.stdout))
}

#[test]
fn healthy_three_jiva_volumes_are_ok() {
    let mut node = Node::new();
    let s = healthy(&mut node);
    add_all(&node, &s);
    let out = node.check(&[]);
    out.assert_status(NAME, 0);
    assert_eq!(
        out.first_line(),
        "ISCSI_SESSIONS OK - 3 iSCSI sessions logged in, 3 disks running | sessions=3;;;0 sessions_failed=0;;0;0 devices=3;;;0 devices_offline=0;;0;0 min_recovery_tmo=120s;;;0 sessions_unhealthy=0;;;0"
    );
    assert_eq!(out.stdout.lines().count(), 1, "healthy sessions only at -v");
    let out = node.check(&["-v"]);
    out.assert_status(NAME, 0);
    let l = line_with(&out, "[OK] session2 ");
    assert!(
        l.contains(&format!(
            "{JIVA}{RADARR} (PV {RADARR}), portal 10.152.183.42:3260, recovery_tmo 120s"
        )),
        "{l}"
    );
    let d = line_with(&out, "2:0:0:0 sdb (8:16) running");
    assert!(
        d.contains(&format!(
            "PV {SEERR}; mounted at {KUBELET}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/"
        )),
        "{d}"
    );
    assert!(
        d.contains(&format!(
            "{KUBELET}/pods/0b5c3f7e-seerr/volumes/kubernetes.io~csi/{SEERR}/mount"
        )),
        "{d}"
    );
    line_with(&out, "connection1:0 up, portal 10.152.183.41:3260");
    line_with(&out, "iface default, tpgt 1");
}

#[test]
fn failed_session_in_recovery_with_blocked_disk_is_critical() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s[1] = s[1]
        .clone()
        .state("FAILED")
        .conn_state(Some("failed"))
        .luns_state("blocked");
    add_all(&node, &s);
    let out = node.check(&[]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().starts_with(&format!(
            "ISCSI_SESSIONS CRITICAL - 1 of 3 iSCSI sessions unhealthy: session2 ({RADARR}): FAILED (in recovery), connection2:0 failed, sdc blocked |"
        )),
        "{}",
        out.first_line()
    );
    assert_eq!(out.perf("sessions_failed"), Some(1.0));
    assert_eq!(out.perf("devices_offline"), Some(0.0));
    let l = line_with(&out, "[CRITICAL] session2 FAILED");
    assert!(l.contains("recovery is running; I/O is blocked until the target returns, and after recovery_tmo (120s) its disks go offline"), "{l}");
    assert!(
        l.contains("3:0:0:0 sdc is blocked: I/O waits while the session recovers"),
        "{l}"
    );
    line_with(
        &out,
        &format!("3:0:0:0 sdc (8:32) blocked: PV {RADARR}; mounted at"),
    );
}

#[test]
fn free_session_after_recovery_timeout_offlines_disks_the_incident() {
    let mut node = Node::new();
    let mut s = vec![
        Session::new(4, &format!("{JIVA}{SEERR}"))
            .portal("10.152.183.41", 3260)
            .state("FREE")
            .conn_state(Some("down"))
            .disk(0, "sdc", "8:32", "transport-offline"),
        Session::new(5, &format!("{JIVA}{CODER}"))
            .portal("10.152.183.43", 3260)
            .disk(0, "sdd", "8:48", "running"),
    ];
    // ext4 aborted its journal: the superblock went read-only under the rw mounts.
    node.pv_mounts(
        SEERR,
        "sdc",
        "8:32",
        "0b5c3f7e-seerr",
        "ro,errors=remount-ro",
    );
    node.pv_mounts(
        CODER,
        "sdd",
        "8:48",
        "9f0e6b2c-coder",
        "rw,errors=remount-ro",
    );
    s[1] = s[1].clone().recovery_tmo("120");
    add_all(&node, &s);
    let out = node.check(&[]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains(&format!(
            "1 of 2 iSCSI sessions unhealthy: session4 ({SEERR}): FREE (recovery timed out), connection4:0 down, sdc transport-offline"
        )),
        "{}",
        out.first_line()
    );
    assert_eq!(out.perf("devices_offline"), Some(1.0));
    assert_eq!(out.perf("sessions_failed"), Some(1.0));
    assert_eq!(out.perf("sessions"), Some(2.0));
    let l = line_with(&out, "[CRITICAL] session4 FREE");
    assert!(
        l.contains(
            "FREE: iqn.2016-09.com.openebs.jiva:pvc-746b2837-5f1c-4d7e-9a51-3c2b8e0f4a11 (PV pvc-746b2837-5f1c-4d7e-9a51-3c2b8e0f4a11), portal 10.152.183.41:3260, recovery_tmo 120s - recovery timed out; I/O to its disks fails and filesystems on them abort"
        ),
        "{l}"
    );
    assert!(
        l.contains("sdc is transport-offline: session recovery timed out"),
        "{l}"
    );
    let d = line_with(&out, "5:0:0:0 sdc (8:32) transport-offline");
    assert!(
        d.contains(&format!(
            "PV {SEERR}; mounted at {KUBELET}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/"
        )),
        "{d}"
    );
    assert!(
        d.contains(&format!(
            "/pods/0b5c3f7e-seerr/volumes/kubernetes.io~csi/{SEERR}/mount"
        )),
        "{d}"
    );
    assert!(
        !out.stdout.contains("session5"),
        "healthy session only at -v:\n{}",
        out.stdout
    );
}

#[test]
fn recovery_timeout_below_the_minimum_warns() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s[0] = s[0].clone().recovery_tmo("300");
    s[2] = s[2].clone().recovery_tmo("off");
    add_all(&node, &s);
    node.check(&[]).assert_status(NAME, 0);
    for min in ["300", "5m"] {
        let out = node.check(&["--min-recovery-timeout", min]);
        out.assert_status(NAME, 1);
        assert!(
            out.first_line().contains(&format!(
                "1 of 3 iSCSI sessions unhealthy: session2 ({RADARR}): recovery_tmo 120s < 300s |"
            )),
            "{}",
            out.first_line()
        );
        assert!(
            out.first_line().contains("min_recovery_tmo=120s;300:;;0"),
            "{}",
            out.first_line()
        );
        let l = line_with(&out, "[WARNING] session2 LOGGED_IN");
        assert!(
            l.contains("raise node.session.timeo.replacement_timeout"),
            "{l}"
        );
    }
    // 300 everywhere (the incident's action item) passes.
    let mut node = Node::new();
    let s: Vec<Session> = healthy(&mut node)
        .into_iter()
        .map(|s| s.recovery_tmo("300"))
        .collect();
    add_all(&node, &s);
    node.check(&["--min-recovery-timeout", "300"])
        .assert_status(NAME, 0);
}

#[test]
fn duplicate_session_to_the_same_target_and_portal_warns() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s.push(
        Session::new(7, &format!("{JIVA}{RADARR}"))
            .portal("10.152.183.42", 3260)
            .disk(0, "sde", "8:64", "running"),
    );
    add_all(&node, &s);
    let out = node.check(&[]);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line()
            .contains(&format!("2 sessions to {RADARR} at 10.152.183.42:3260")),
        "{}",
        out.first_line()
    );
    let l = line_with(&out, "[WARNING] 2 sessions to the same target and portal");
    assert!(
        l.contains("(session2 LOGGED_IN, session7 LOGGED_IN)"),
        "{l}"
    );
    // The same target through a second iface is multipath, not a duplicate.
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s.push(
        Session::new(7, &format!("{JIVA}{RADARR}"))
            .portal("10.152.183.42", 3260)
            .iface("eth1-iface")
            .disk(0, "sde", "8:64", "running"),
    );
    add_all(&node, &s);
    node.check(&[]).assert_status(NAME, 0);
}

#[test]
fn logged_in_session_without_a_disk_warns() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s.push(Session::new(8, &format!("{JIVA}pvc-0d1e2f3a-empty")).portal("10.152.183.44", 3260));
    add_all(&node, &s);
    let out = node.check(&[]);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line()
            .contains("session8 (pvc-0d1e2f3a-empty): no disk attached"),
        "{}",
        out.first_line()
    );
    assert_eq!(out.perf("devices"), Some(3.0));
    assert_eq!(out.perf("sessions"), Some(4.0));
}

#[test]
fn missing_optional_attributes_are_unknown_not_a_crash() {
    let mut node = Node::new();
    let s = vec![Session::new(1, &format!("{JIVA}{SEERR}"))
        .conn_state(None) // kernel 5.4 (the incident's): no connection state attribute
        .disk(0, "sdb", "8:16", "running")];
    add_all(&node, &s);
    node.pv_mounts(SEERR, "sdb", "8:16", "0b5c3f7e-seerr", "rw");
    let a = node.sys.session_attrs(&s[0]);
    for f in ["tpgt", "ifacename", "targetname"] {
        std::fs::remove_file(a.join(f)).unwrap();
    }
    let c = node.sys.conn_attrs(&s[0]);
    for f in ["persistent_address", "persistent_port", "address", "port"] {
        std::fs::remove_file(c.join(f)).unwrap();
    }
    let out = node.check(&["-v"]);
    out.assert_status(NAME, 0);
    line_with(
        &out,
        "[OK] session1 LOGGED_IN: unknown, portal unknown, recovery_tmo 120s",
    );
    line_with(&out, "connection1:0 unknown, portal portal unknown");
    // The session state is not optional: without it the check cannot decide.
    std::fs::remove_file(a.join("state")).unwrap();
    let out = node.check(&[]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("session1 (target unknown): state unknown"),
        "{}",
        out.first_line()
    );
    line_with(&out, "no state attribute in");
}

#[test]
fn unreadable_state_is_unknown_naming_the_file() {
    // A directory where the attribute should be: EISDIR, for root as for anyone.
    let mut node = Node::new();
    let s = healthy(&mut node);
    add_all(&node, &s);
    let state = node.sys.session_attrs(&s[1]).join("state");
    std::fs::remove_file(&state).unwrap();
    std::fs::create_dir(&state).unwrap();
    let out = node.check(&[]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains(&format!("session2 ({RADARR}): cannot read state (EISDIR)")),
        "{}",
        out.first_line()
    );
    line_with(
        &out,
        &format!("cannot read {}: Is a directory (EISDIR)", state.display()),
    );
}

/// Run the check as nobody, so that mode 000 means EACCES even when the tests run as root
/// (root bypasses file permissions). Not root: the current user already cannot read mode 000.
fn as_unprivileged(node: &Node, extra: &[&str]) -> Output {
    let bin = e2e::bin(BIN);
    if e2e::is_root() {
        Cmd::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin)
            .args(node.args())
            .args(extra)
            .run()
    } else {
        Cmd::new(bin).args(node.args()).args(extra).run()
    }
}

#[test]
fn permission_denied_is_unknown_naming_the_file() {
    if e2e::is_root() && !e2e::need_tool("permission_denied_is_unknown_naming_the_file", "setpriv")
    {
        return;
    }
    let mut node = Node::new();
    let s = healthy(&mut node);
    add_all(&node, &s);
    // Readable by nobody as it stands (credentials are 000 as on a real kernel and never read).
    as_unprivileged(&node, &[]).assert_status(NAME, 0);

    let state = node.sys.lun_dir(&s[2], 0).join("state");
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = as_unprivileged(&node, &[]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains(&format!("session3 ({CODER}): cannot read state (EACCES)")),
        "{}",
        out.first_line()
    );
    line_with(
        &out,
        &format!(
            "cannot read {}: Permission denied (EACCES)",
            state.display()
        ),
    );

    // A real alarm elsewhere outranks the unknown, and the file is still named.
    let a = node.sys.session_attrs(&s[0]).join("state");
    std::fs::write(&a, "FREE\n").unwrap();
    let out = as_unprivileged(&node, &[]);
    out.assert_status(NAME, 2);
    line_with(&out, &format!("cannot read {}", state.display()));

    // The session class itself unreadable: UNKNOWN naming the directory.
    let class = node.sys.root.join("class/iscsi_session");
    std::fs::set_permissions(&class, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = as_unprivileged(&node, &[]);
    std::fs::set_permissions(&class, std::fs::Permissions::from_mode(0o755)).unwrap();
    out.assert_status(NAME, 3);
    assert_eq!(
        out.first_line(),
        format!(
            "ISCSI_SESSIONS UNKNOWN - cannot list {}: Permission denied (EACCES)",
            class.display()
        )
    );
}

#[test]
fn no_sessions_is_ok_unless_sessions_are_expected() {
    let node = Node::new(); // no iscsi_session class: the transport module is not loaded
    let out = node.check(&[]);
    out.assert_status(NAME, 0);
    assert_eq!(
        out.first_line(),
        "ISCSI_SESSIONS OK - no iSCSI sessions (the iSCSI transport class is not in sysfs) | sessions=0;;;0 sessions_failed=0;;0;0 devices=0;;;0 devices_offline=0;;0;0 sessions_unhealthy=0;;;0"
    );
    let out = node.check(&["--min-sessions", "1"]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains("0 sessions, expected at least 1"),
        "{}",
        out.first_line()
    );
    assert!(
        out.first_line().contains("sessions=0;;1:;0"),
        "{}",
        out.first_line()
    );
    let out = node.check(&["--expect-target", "openebs\\.jiva:pvc-"]);
    out.assert_status(NAME, 2);
    line_with(&out, "no logged-in session to a target matching --expect-target 'openebs\\.jiva:pvc-' (no session at all)");

    // Class present but empty (module loaded, every session logged out).
    std::fs::create_dir_all(node.sys.root.join("class/iscsi_session")).unwrap();
    let out = node.check(&[]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .starts_with("ISCSI_SESSIONS OK - no iSCSI sessions |"),
        "{}",
        out.first_line()
    );
}

#[test]
fn expected_targets_and_filters() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s[2] = s[2].clone().state("FREE").luns_state("transport-offline");
    add_all(&node, &s);
    let out = node.check(&[
        "--expect-target",
        RADARR,
        "--expect-target",
        CODER,
        "--min-sessions",
        "3",
    ]);
    out.assert_status(NAME, 2);
    line_with(&out, &format!("--expect-target '{CODER}' (session3 FREE)"));
    assert!(
        !out.stdout.contains(&format!("--expect-target '{RADARR}'")),
        "{}",
        out.stdout
    );
    // Excluding the broken volume: OK, and it says one was skipped.
    let out = node.check(&["--exclude", CODER]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("sessions"), Some(2.0));
    line_with(&out, "1 session skipped by --include/--exclude");
    let out = node.check(&["--include", "jiva:pvc-(746b|a634)"]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("sessions"), Some(2.0));
}

#[test]
fn host_root_reads_sysfs_and_the_host_mount_table_through_it() {
    let mut node = Node::new();
    let s = healthy(&mut node);
    add_all(&node, &s);
    let mi = node.mountinfo();
    let host = node.dir.path();
    std::fs::create_dir_all(host.join("proc/1")).unwrap();
    // The host's mount namespace is reached as <host-root>/proc/1/root.
    std::fs::create_dir_all(
        host.join("proc/1/root")
            .join(KUBELET.trim_start_matches('/')),
    )
    .unwrap();
    std::fs::copy(&mi, host.join("proc/1/mountinfo")).unwrap();
    let out = Cmd::check(BIN)
        .args([
            "--host-root",
            host.to_str().unwrap(),
            "--kubelet-root",
            KUBELET,
            "-v",
        ])
        .run();
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("sessions"), Some(3.0));
    line_with(
        &out,
        &format!("4:0:0:0 sdd (8:48) running: PV {CODER}; mounted at"),
    );
}

#[test]
fn unreadable_mount_table_is_a_note_and_bad_sys_is_unknown() {
    let mut node = Node::new();
    let s = healthy(&mut node);
    add_all(&node, &s);
    let out = Cmd::check(BIN)
        .args([
            "--sys",
            node.sys.root.to_str().unwrap(),
            "--mountinfo",
            "/nonexistent/mountinfo",
        ])
        .run();
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains("mount points not shown: cannot read /nonexistent/mountinfo: No such file or directory (ENOENT)"), "{}", out.stdout);

    let out = Cmd::check(BIN).args(["--sys", "/nonexistent/sys"]).run();
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains(
            "cannot read /nonexistent/sys: No such file or directory (ENOENT) (is --sys right?)"
        ),
        "{}",
        out.first_line()
    );
    let empty = node.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = Cmd::check(BIN)
        .args(["--sys", empty.to_str().unwrap()])
        .run();
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("has no class/ directory: not a sysfs"),
        "{}",
        out.first_line()
    );
}

#[test]
fn json_output_carries_the_findings() {
    let mut node = Node::new();
    let mut s = healthy(&mut node);
    s[0] = s[0].clone().state("FREE").luns_state("transport-offline");
    add_all(&node, &s);
    let out = node.check(&["--format", "json"]);
    assert_eq!(out.code, 2);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["status"], "CRITICAL");
    assert_eq!(v["findings"][0]["status"], "CRITICAL");
    assert!(v["findings"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("session1 FREE"));
}

/// Paths in the fixtures are real (the layout test of the builder itself).
#[test]
fn fixture_has_the_kernel_layout() {
    let node = Node::new();
    let s = Session::new(3, "iqn.x:y")
        .host(5)
        .disk(1, "sdf", "8:80", "running");
    node.sys.add(&s);
    let root = &node.sys.root;
    let canon = |p: &str| std::fs::canonicalize(root.join(p)).unwrap();
    let devs = root.join("devices/platform/host5/session3");
    assert_eq!(
        canon("class/iscsi_session/session3"),
        canon("devices/platform/host5/session3/iscsi_session/session3")
    );
    assert_eq!(
        canon("class/iscsi_session/session3/device"),
        devs.canonicalize().unwrap()
    );
    assert_eq!(
        canon("class/iscsi_connection/connection3:0/device"),
        devs.join("connection3:0").canonicalize().unwrap()
    );
    assert_eq!(
        canon("block/sdf"),
        devs.join("target5:0:0/5:0:0:1/block/sdf")
            .canonicalize()
            .unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("block/sdf/dev")).unwrap(),
        "8:80\n"
    );
    assert_eq!(
        canon("block/sdf/device"),
        devs.join("target5:0:0/5:0:0:1").canonicalize().unwrap()
    );
    assert!(Path::new(&root.join("class/scsi_host/host5/proc_name")).exists());
}
