//! evaluate() on in-memory sysfs data: every rule has a test that fails when the rule breaks.

use super::*;
use kube::checks::names::Names;
use node::iscsi::{Attr, AttrError, BlockDev, Connection, ScsiDevice, Session, Sessions};
use node::usage::{DeviceUsage, Scope};
use plugin::Status;
use std::path::PathBuf;

/// The device-usage map of a mount table, volumes classified under `root`.
fn usage(mi: &str, root: &str) -> Result<DeviceUsage, String> {
    Ok(DeviceUsage::parse(mi, "test", &[PathBuf::from(root)], Scope::All).unwrap())
}

const JIVA: &str = "iqn.2016-09.com.openebs.jiva:";

fn v(s: &str) -> Attr {
    Attr::Value(s.to_string())
}

fn eacces(path: &str) -> Attr {
    Attr::Error(AttrError {
        path: PathBuf::from(path),
        error: "Permission denied (EACCES)".into(),
        errno: Some(13),
    })
}

fn conn(sid: u32, state: &str, addr: &str) -> Connection {
    Connection {
        name: format!("connection{sid}:0"),
        state: v(state),
        persistent_address: v(addr),
        persistent_port: v("3260"),
        address: v(addr),
        port: v("3260"),
    }
}

fn disk(host: u32, sd: &str, dev: &str, state: &str) -> ScsiDevice {
    ScsiDevice {
        hctl: format!("{host}:0:0:0"),
        state: v(state),
        blocks: vec![BlockDev {
            name: sd.into(),
            dev: v(dev),
            children: vec![],
        }],
    }
}

/// A healthy Jiva session: LOGGED_IN, connection up, one running disk.
fn sess(sid: u32, pv: &str, sd: &str, dev: &str) -> Session {
    Session {
        name: format!("session{sid}"),
        sid,
        attr_dir: PathBuf::from(format!(
            "/sys/devices/platform/host{sid}/session{sid}/iscsi_session/session{sid}"
        )),
        state: v("LOGGED_IN"),
        recovery_tmo: v("120"),
        targetname: v(&format!("{JIVA}{pv}")),
        tpgt: v("1"),
        ifacename: v("default"),
        target_state: Attr::Missing,
        connections: vec![conn(sid, "up", &format!("10.152.183.{sid}"))],
        devices: vec![disk(sid, sd, dev, "running")],
        problems: vec![],
    }
}

fn data(sessions: Vec<Session>) -> Gathered {
    Gathered {
        sessions: Sessions {
            class_present: true,
            sessions,
        },
        mounts: None,
        node_name: Some("k8s03".into()),
    }
}

fn healthy3() -> Vec<Session> {
    vec![
        sess(1, "pvc-aaa", "sdb", "8:16"),
        sess(2, "pvc-bbb", "sdc", "8:32"),
        sess(3, "pvc-ccc", "sdd", "8:48"),
    ]
}

fn perf(r: &Report, label: &str) -> Option<f64> {
    r.perfdata
        .iter()
        .find(|p| p.label == label)
        .map(|p| p.value)
}

fn texts(r: &Report) -> String {
    r.findings
        .iter()
        .map(|f| {
            let mut s = format!("[{}] {}", f.status, f.text);
            for d in &f.details {
                s.push_str("\n    ");
                s.push_str(d);
            }
            s
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn healthy_host_is_ok_with_perfdata() {
    let r = evaluate(&data(healthy3()), &Policy::default());
    assert_eq!(r.status, Status::Ok, "{}", texts(&r));
    assert_eq!(r.summary, "3 iSCSI sessions logged in, 3 disks running");
    assert_eq!(perf(&r, "sessions"), Some(3.0));
    assert_eq!(perf(&r, "sessions_failed"), Some(0.0));
    assert_eq!(perf(&r, "devices"), Some(3.0));
    assert_eq!(perf(&r, "devices_offline"), Some(0.0));
    assert_eq!(perf(&r, "min_recovery_tmo"), Some(120.0));
    // Healthy sessions are still findings (shown at -v) naming IQN, PV, portal and tmo.
    assert_eq!(r.findings.len(), 3);
    assert!(r.findings[0]
        .text
        .contains("iqn.2016-09.com.openebs.jiva:pvc-aaa (PV pvc-aaa)"));
    assert!(r.findings[0].text.contains("portal 10.152.183.1:3260"));
    assert!(r.findings[0].text.contains("recovery_tmo 120s"));
}

#[test]
fn no_sessions_is_ok_unless_expected() {
    let r = evaluate(&data(vec![]), &Policy::default());
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.summary, "no iSCSI sessions");
    assert_eq!(perf(&r, "sessions"), Some(0.0));
    assert_eq!(perf(&r, "min_recovery_tmo"), None);

    let mut g = data(vec![]);
    g.sessions.class_present = false;
    let r = evaluate(&g, &Policy::default());
    assert_eq!(r.status, Status::Ok);
    assert!(r
        .summary
        .starts_with("no iSCSI sessions (the iSCSI transport class"));

    let p = Policy {
        min_sessions: Some(1),
        ..Default::default()
    };
    let r = evaluate(&g, &p);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.contains("0 sessions, expected at least 1"),
        "{}",
        r.summary
    );
    assert!(texts(&r).contains("not in sysfs"));
}

#[test]
fn failed_session_in_recovery_is_critical_and_blocked_disk_listed() {
    let mut s = healthy3();
    s[1].state = v("FAILED");
    s[1].connections[0].state = v("failed");
    s[1].devices[0].state = v("blocked");
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.starts_with(
            "1 of 3 iSCSI sessions unhealthy: session2 (pvc-bbb): FAILED (in recovery)"
        ),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("sdc blocked"), "{}", r.summary);
    assert!(r.summary.contains("connection2:0 failed"), "{}", r.summary);
    assert_eq!(perf(&r, "sessions_failed"), Some(1.0));
    assert_eq!(perf(&r, "devices_offline"), Some(0.0));
    assert_eq!(r.findings[0].status, Status::Critical);
}

#[test]
fn free_session_with_transport_offline_disk_is_the_incident() {
    let mut s = healthy3();
    s[2].state = v("FREE");
    s[2].connections[0].state = v("down");
    s[2].devices[0].state = v("transport-offline");
    let mut g = data(s);
    let mi = "\
30 1 8:48 / /var/snap/microk8s/common/var/lib/kubelet/plugins/kubernetes.io/csi/jiva.csi.openebs.io/0123abcd/globalmount rw,relatime - ext4 /dev/sdd ro,relatime
31 1 8:48 / /var/snap/microk8s/common/var/lib/kubelet/pods/7f1e/volumes/kubernetes.io~csi/pvc-ccc/mount rw,relatime - ext4 /dev/sdd ro,relatime
32 1 8:16 / /var/snap/microk8s/common/var/lib/kubelet/pods/1111/volumes/kubernetes.io~csi/pvc-aaa/mount rw,relatime - ext4 /dev/sdb rw,relatime
";
    g.mounts = Some(usage(mi, "/var/snap/microk8s/common/var/lib/kubelet"));
    let r = evaluate(&g, &Policy::default());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary
            .contains("session3 (pvc-ccc): FREE (recovery timed out)"),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("sdd transport-offline"), "{}", r.summary);
    assert_eq!(perf(&r, "devices_offline"), Some(1.0));
    assert_eq!(perf(&r, "sessions_failed"), Some(1.0));
    let t = texts(&r);
    assert!(t.contains("3:0:0:0 sdd (8:48) transport-offline: PV pvc-ccc; mounted at /var/snap/microk8s/common/var/lib/kubelet/plugins/kubernetes.io/csi/jiva.csi.openebs.io/0123abcd/globalmount, /var/snap/microk8s/common/var/lib/kubelet/pods/7f1e/volumes/kubernetes.io~csi/pvc-ccc/mount"), "{t}");
    assert!(
        t.contains("1:0:0:0 sdb (8:16) running: PV pvc-aaa; mounted at"),
        "{t}"
    );
    assert!(t.contains("2:0:0:0 sdc (8:32) running: not mounted"), "{t}");
}

#[test]
fn device_states_map_to_statuses() {
    for (state, want, offline) in [
        ("running", Status::Ok, 0.0),
        ("created", Status::Ok, 0.0),
        ("blocked", Status::Warning, 0.0),
        ("created-blocked", Status::Warning, 0.0),
        ("quiesce", Status::Warning, 0.0),
        ("transport-offline", Status::Critical, 1.0),
        ("offline", Status::Critical, 1.0),
        ("deleted", Status::Critical, 1.0),
        ("cancel", Status::Critical, 1.0),
        ("weird", Status::Warning, 0.0),
    ] {
        let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
        s[0].devices[0].state = v(state);
        let r = evaluate(&data(s), &Policy::default());
        assert_eq!(r.status, want, "{state}");
        assert_eq!(perf(&r, "devices_offline"), Some(offline), "{state}");
    }
}

#[test]
fn connection_not_up_is_critical_and_missing_state_passes() {
    for (state, want) in [
        ("down", Status::Critical),
        ("failed", Status::Critical),
        ("bound", Status::Critical),
        ("up", Status::Ok),
    ] {
        let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
        s[0].connections[0].state = v(state);
        assert_eq!(
            evaluate(&data(s), &Policy::default()).status,
            want,
            "{state}"
        );
    }
    // Kernels before 5.7 have no connection state: shown as unknown, no alert.
    let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
    s[0].connections[0].state = Attr::Missing;
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Ok);
    assert!(texts(&r).contains("connection1:0 unknown, portal 10.152.183.1:3260"));
}

#[test]
fn low_recovery_tmo_warns_only_when_asked_and_off_passes() {
    let mut s = healthy3();
    s[2].recovery_tmo = v("off");
    let r = evaluate(&data(s.clone()), &Policy::default());
    assert_eq!(r.status, Status::Ok);
    let p = Policy {
        min_recovery_timeout: Some(300),
        ..Default::default()
    };
    let r = evaluate(&data(s.clone()), &p);
    assert_eq!(r.status, Status::Warning);
    assert!(
        r.summary.contains("2 of 3 iSCSI sessions unhealthy"),
        "{}",
        r.summary
    );
    assert!(
        r.summary
            .contains("session1 (pvc-aaa): recovery_tmo 120s < 300s"),
        "{}",
        r.summary
    );
    assert!(!r.summary.contains("session3"), "{}", r.summary);
    let mt = r
        .perfdata
        .iter()
        .find(|p| p.label == "min_recovery_tmo")
        .unwrap();
    assert_eq!(mt.render(), "min_recovery_tmo=120s;300:;;0");
    // At the threshold passes.
    for x in &mut s {
        x.recovery_tmo = v("300");
    }
    assert_eq!(evaluate(&data(s), &p).status, Status::Ok);
}

#[test]
fn recovery_tmo_unreadable_or_missing_is_unknown_only_when_needed() {
    let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
    s[0].recovery_tmo = Attr::Missing;
    assert_eq!(
        evaluate(&data(s.clone()), &Policy::default()).status,
        Status::Ok
    );
    let p = Policy {
        min_recovery_timeout: Some(300),
        ..Default::default()
    };
    let r = evaluate(&data(s.clone()), &p);
    assert_eq!(r.status, Status::Unknown);
    s[0].recovery_tmo = v("soon");
    assert_eq!(evaluate(&data(s), &p).status, Status::Unknown);
}

#[test]
fn logged_in_session_without_disk_warns() {
    let mut s = healthy3();
    s[0].devices.clear();
    let r = evaluate(&data(s.clone()), &Policy::default());
    assert_eq!(r.status, Status::Warning);
    assert!(
        r.summary.contains("session1 (pvc-aaa): no disk attached"),
        "{}",
        r.summary
    );
    assert_eq!(perf(&r, "devices"), Some(2.0));
    // A SCSI device without a block device (e.g. a controller LUN) is not a disk either.
    s[0].devices.push(ScsiDevice {
        hctl: "1:0:0:0".into(),
        state: v("running"),
        blocks: vec![],
    });
    assert_eq!(
        evaluate(&data(s.clone()), &Policy::default()).status,
        Status::Warning
    );
    // A FAILED session without disk is critical for its state, not warned for the disk.
    s[0].state = v("FAILED");
    let r = evaluate(&data(s), &Policy::default());
    assert!(!r.summary.contains("no disk attached"), "{}", r.summary);
}

#[test]
fn duplicate_session_same_target_and_portal_warns() {
    let mut s = healthy3();
    let mut dup = sess(4, "pvc-bbb", "sde", "8:64");
    dup.connections = s[1].connections.clone();
    s.push(dup.clone());
    let r = evaluate(&data(s.clone()), &Policy::default());
    assert_eq!(r.status, Status::Warning);
    assert!(
        r.summary
            .contains("2 sessions to pvc-bbb at 10.152.183.2:3260"),
        "{}",
        r.summary
    );
    assert!(texts(&r).contains("session2 LOGGED_IN, session4 LOGGED_IN"));
    // Same target through another iface: deliberate multipath, no warning.
    s[3].ifacename = v("iface1");
    assert_eq!(
        evaluate(&data(s.clone()), &Policy::default()).status,
        Status::Ok
    );
    // Same target, another portal: no warning.
    s[3].ifacename = v("default");
    s[3].connections[0].persistent_address = v("10.0.0.99");
    assert_eq!(evaluate(&data(s), &Policy::default()).status, Status::Ok);
}

#[test]
fn missing_optional_attributes_show_unknown_without_alert() {
    let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
    s[0].tpgt = Attr::Missing;
    s[0].ifacename = Attr::Missing;
    s[0].targetname = Attr::Missing;
    s[0].connections[0] = Connection {
        name: "connection1:0".into(),
        state: Attr::Missing,
        persistent_address: Attr::Missing,
        persistent_port: Attr::Missing,
        address: Attr::Missing,
        port: Attr::Missing,
    };
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Ok, "{}", texts(&r));
    let t = texts(&r);
    assert!(
        t.contains("session1 LOGGED_IN: unknown, portal unknown, recovery_tmo 120s"),
        "{t}"
    );
    assert!(
        t.contains("connection1:0 unknown, portal portal unknown"),
        "{t}"
    );
}

#[test]
fn missing_session_state_is_unknown() {
    let mut s = healthy3();
    s[0].state = Attr::Missing;
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.contains("session1 (pvc-aaa): state unknown"),
        "{}",
        r.summary
    );
}

#[test]
fn unreadable_needed_file_is_unknown_naming_it_but_alarms_outrank() {
    let mut s = healthy3();
    let path = "/sys/devices/platform/host2/session2/iscsi_session/session2/state";
    s[1].state = eacces(path);
    let r = evaluate(&data(s.clone()), &Policy::default());
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary
            .contains("session2 (pvc-bbb): cannot read state (EACCES)"),
        "{}",
        r.summary
    );
    assert!(texts(&r).contains(&format!("cannot read {path}: Permission denied (EACCES)")));
    // Device state unreadable is UNKNOWN too.
    let mut s2 = healthy3();
    s2[0].devices[0].state = eacces("/sys/x/1:0:0:0/state");
    assert_eq!(
        evaluate(&data(s2), &Policy::default()).status,
        Status::Unknown
    );
    // A real alarm elsewhere outranks the unknown; the unreadable file is still named.
    s[2].state = v("FREE");
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Critical);
    assert!(texts(&r).contains(path));
}

#[test]
fn walk_problems_are_unknown() {
    let mut s = healthy3();
    s[0].devices.clear();
    s[0].problems
        .push("cannot list /sys/x/target1:0:0: Permission denied (EACCES)".into());
    let r = evaluate(&data(s), &Policy::default());
    assert_eq!(r.status, Status::Unknown, "{}", texts(&r));
    assert!(texts(&r).contains("cannot list /sys/x/target1:0:0"));
}

#[test]
fn min_sessions_counts_included_sessions() {
    let p = Policy {
        min_sessions: Some(3),
        ..Default::default()
    };
    assert_eq!(evaluate(&data(healthy3()), &p).status, Status::Ok);
    let mut s = healthy3();
    s.pop();
    let r = evaluate(&data(s), &p);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        r.perfdata[0].render(),
        "sessions=2;;3:;0",
        "sessions perfdata carries the critical range"
    );
}

#[test]
fn expect_target_needs_a_logged_in_match() {
    let p = Policy {
        expect_target: vec![
            Regex::new("pvc-bbb$").unwrap(),
            Regex::new("pvc-zzz").unwrap(),
        ],
        ..Default::default()
    };
    let r = evaluate(&data(healthy3()), &p);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.contains("no logged-in session to 'pvc-zzz'"),
        "{}",
        r.summary
    );
    assert!(!r.summary.contains("pvc-bbb$"), "{}", r.summary);
    let mut s = healthy3();
    s[1].state = v("FAILED");
    let r = evaluate(&data(s), &p);
    assert!(
        texts(&r).contains("'pvc-bbb$' (session2 FAILED)"),
        "{}",
        texts(&r)
    );
}

#[test]
fn include_and_exclude_filter_by_iqn() {
    let mut s = healthy3();
    s[0].state = v("FREE");
    let p = Policy {
        exclude: vec![Regex::new("pvc-aaa").unwrap()],
        ..Default::default()
    };
    let r = evaluate(&data(s.clone()), &p);
    assert_eq!(r.status, Status::Ok);
    assert_eq!(perf(&r, "sessions"), Some(2.0));
    assert!(r.notes[0].contains("1 session skipped"));
    let p = Policy {
        include: vec![Regex::new("pvc-(aaa|bbb)").unwrap()],
        exclude: vec![Regex::new("bbb").unwrap()],
        ..Default::default()
    };
    let r = evaluate(&data(s), &p);
    assert_eq!(perf(&r, "sessions"), Some(1.0));
    assert_eq!(r.status, Status::Critical);
}

#[test]
fn partition_mount_maps_to_pv() {
    let mut s = vec![sess(1, "pvc-aaa", "sdb", "8:16")];
    s[0].devices[0].blocks[0].children = vec![("sdb1".into(), v("8:17"))];
    let mut g = data(s);
    g.mounts = Some(usage(
        "40 1 8:17 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-aaa/mount rw - ext4 /dev/sdb1 rw\n",
        "/var/lib/kubelet",
    ));
    let r = evaluate(&g, &Policy::default());
    assert!(
        texts(&r).contains("PV pvc-aaa; mounted at /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-aaa/mount (sdb1)"),
        "{}",
        texts(&r)
    );
}

#[test]
fn unreadable_mount_table_is_a_note_not_an_alert() {
    let mut g = data(healthy3());
    g.mounts = Some(Err(
        "cannot read /host/proc/1/mountinfo: Permission denied (EACCES)".into(),
    ));
    let r = evaluate(&g, &Policy::default());
    assert_eq!(r.status, Status::Ok);
    assert!(r.notes.iter().any(|n| n.contains("mount points not shown")));
}

#[test]
fn summary_caps_the_list() {
    let mut s: Vec<Session> = (1..=6)
        .map(|i| {
            sess(
                i,
                &format!("pvc-{i}"),
                &format!("sd{i}"),
                &format!("8:{}", i * 16),
            )
        })
        .collect();
    for x in &mut s {
        x.state = v("FREE");
    }
    let r = evaluate(&data(s), &Policy::default());
    assert!(
        r.summary.starts_with("6 of 6 iSCSI sessions unhealthy: "),
        "{}",
        r.summary
    );
    assert!(r.summary.ends_with("; +3 more"), "{}", r.summary);
}

#[test]
fn regex_errors_are_one_line_with_the_reason() {
    let e = plugin::args::regex("(").unwrap_err();
    assert!(e.starts_with("invalid regex '(': "), "{e}");
    assert!(
        !e.contains('\n') && e.len() > "invalid regex '(': ".len(),
        "{e}"
    );
    assert!(plugin::args::regex("jiva:pvc-").is_ok());
}

#[test]
fn unhealthy_sessions_are_named_and_only_they_are_wanted() {
    let mut s = healthy3();
    s[2].state = v("FREE");
    s[2].devices[0].state = v("transport-offline");
    let mut g = data(s);
    let mi = "\
31 1 8:48 / /var/lib/kubelet/pods/7f1e/volumes/kubernetes.io~csi/pvc-ccc/mount rw,relatime - ext4 /dev/sdd ro,relatime
32 1 8:16 / /var/lib/kubelet/pods/1111/volumes/kubernetes.io~csi/pvc-aaa/mount rw,relatime - ext4 /dev/sdb rw,relatime
";
    g.mounts = Some(usage(mi, "/var/lib/kubelet"));
    let w = wanted(&g, &Policy::default());
    assert_eq!(w.pvs.iter().collect::<Vec<_>>(), ["pvc-ccc"]);
    assert_eq!(w.pod_uids.iter().collect::<Vec<_>>(), ["7f1e"]);
    assert!(wanted(&data(healthy3()), &Policy::default()).is_empty());

    let mut names = Names::default();
    names
        .claims
        .insert("pvc-ccc".into(), ("media".into(), "radarr-config".into()));
    names.pods.insert(
        "7f1e".into(),
        kube::checks::names::PodName {
            namespace: "media".into(),
            name: "radarr-0".into(),
            node: None,
        },
    );
    names.notes.push("resolver note".into());
    let r = evaluate_named(&g, &Policy::default(), &names);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.contains(
            "session3 media/radarr-0 (PVC media/radarr-config, pvc-ccc): FREE (recovery timed out)"
        ),
        "{}",
        r.summary
    );
    let t = texts(&r);
    assert!(
        t.contains(":pvc-ccc (PV pvc-ccc, PVC media/radarr-config, pod media/radarr-0), portal"),
        "{t}"
    );
    assert_eq!(r.notes, ["resolver note"]);
    // No names: unchanged output.
    let r = evaluate(&g, &Policy::default());
    assert!(
        r.summary.contains("session3 (pvc-ccc): FREE"),
        "{}",
        r.summary
    );
}
