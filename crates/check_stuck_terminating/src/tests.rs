//! evaluate on in-memory pods and mount tables: every rule has a test that fails when it breaks.

use super::*;
use kube::time::{format_rfc3339, parse_rfc3339};
use kube::{Pod, Time};
use plugin::Status;

const NOW: &str = "2026-07-13T11:13:00Z";
const UID: &str = "3c2b9f1e-5a7d-4e2f-9b1a-746b28370001";

fn now() -> Time {
    parse_rfc3339(NOW).unwrap()
}

fn opts(args: &[&str]) -> Opts {
    let mut v = vec!["check_stuck_terminating"];
    v.extend_from_slice(args);
    Opts::try_parse_from(v).unwrap()
}

fn policy(args: &[&str]) -> Policy {
    opts(args).policy()
}

/// A pod whose delete was requested `secs` seconds before NOW with `grace` seconds of grace.
fn deleted(name: &str, secs: i64, grace: i64, finalizers: &[&str]) -> Pod {
    let del = format_rfc3339(now() - secs + grace);
    let fin: Vec<String> = finalizers.iter().map(|f| format!("\"{f}\"")).collect();
    serde_json::from_str(&format!(
        r#"{{"metadata":{{"name":"{name}","namespace":"media","uid":"{UID}",
        "deletionTimestamp":"{del}","deletionGracePeriodSeconds":{grace},"finalizers":[{}]}},
        "spec":{{"nodeName":"k8s03","terminationGracePeriodSeconds":99}},"status":{{"phase":"Running"}}}}"#,
        fin.join(",")
    ))
    .unwrap()
}

fn data(pods: &[Pod]) -> Data {
    Data {
        scan: kube::checks::stuck::Scan {
            pods: pods.len() + 10,
            found: pods.iter().filter_map(classify).collect(),
            scope: "on node k8s03".into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

const TEARDOWN: &str = "UnmountVolume.TearDown failed for volume \"pvc-746b2837\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837\") pod \"3c2b9f1e-5a7d-4e2f-9b1a-746b28370001\" (UID: \"3c2b9f1e-5a7d-4e2f-9b1a-746b28370001\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = chmod /var/snap/microk8s/common/var/lib/kubelet/pods/3c2b9f1e-5a7d-4e2f-9b1a-746b28370001/volumes/kubernetes.io~csi/pvc-746b2837/mount: read-only file system";

#[test]
fn classify_reads_deletion_grace_and_finalizers() {
    assert!(classify(&serde_json::from_str(r#"{"metadata":{"name":"a"}}"#).unwrap()).is_none());
    let t = classify(&deleted("seerr-0", 41 * 60, 30, &["x/y"])).unwrap();
    assert_eq!(
        t.grace, 30,
        "deletionGracePeriodSeconds wins over the spec's"
    );
    assert_eq!(t.finalizers, ["x/y"]);
    assert_eq!(t.since_delete(now()), 41 * 60);
    assert_eq!(t.overdue(now()), 41 * 60 - 30);
    // Without deletionGracePeriodSeconds: the spec's, else 30.
    let mut p = deleted("a", 60, 30, &[]);
    p.metadata.deletion_grace_period_seconds = None;
    assert_eq!(classify(&p).unwrap().grace, 99);
    p.spec.termination_grace_period_seconds = None;
    assert_eq!(classify(&p).unwrap().grace, DEFAULT_GRACE);
}

#[test]
fn deleted_41_minutes_ago_with_failed_unmount_is_critical_with_hint() {
    let mut d = data(&[deleted("seerr-seerr-chart-0", 41 * 60, 30, &[])]);
    d.scan.events.insert(
        "media/seerr-seerr-chart-0".into(),
        Teardown {
            reason: "FailedUnmount".into(),
            message: TEARDOWN.into(),
            when: Some(now() - 40 * 60),
        },
    );
    let r = evaluate(&d, &policy(&[]), now());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        r.summary,
        "1 of 1 terminating pod on node k8s03 wedged: media/seerr-seerr-chart-0 (deleted 41m ago)"
    );
    let f = &r.findings[0];
    assert!(
        f.text.starts_with("media/seerr-seerr-chart-0 on k8s03: deleted 41m ago, 40m30s past its 30s grace period, no finalizers"),
        "{}",
        f.text
    );
    assert!(f.details[0].starts_with("last FailedUnmount (40m ago): UnmountVolume.TearDown failed for volume \"pvc-746b2837\""), "{:?}", f.details);
    assert!(f.next.as_deref().unwrap_or("").starts_with("on k8s03: run `sudo umount /var/snap/microk8s/common/var/lib/kubelet/pods/3c2b9f1e-5a7d-4e2f-9b1a-746b28370001/volumes/kubernetes.io~csi/pvc-746b2837/mount`"), "{:?}", f);
    assert_eq!(
        r.perfdata.iter().map(|p| p.render()).collect::<Vec<_>>(),
        [
            "terminating_pods=1;;;0",
            "wedged_pods=1;;;0",
            "oldest_wedged=2430s;300;600;0"
        ]
    );
}

#[test]
fn inside_grace_or_thresholds_is_ok() {
    // Delete requested 10 s ago with 30 s grace: not even due yet.
    let r = evaluate(&data(&[deleted("a", 10, 30, &[])]), &policy(&[]), now());
    assert_eq!(r.status, Status::Ok);
    assert_eq!(
        r.summary,
        "no pod wedged in Terminating (11 pods on node k8s03, 1 terminating for less than 5m past their grace period)"
    );
    assert_eq!(r.findings.len(), 1, "shown at -v");
    assert_eq!(r.findings[0].status, Status::Ok);
    // A long grace period counts: 20 min after the request with 1 h of grace is fine.
    let r = evaluate(
        &data(&[deleted("b", 20 * 60, 3600, &[])]),
        &policy(&[]),
        now(),
    );
    assert_eq!(r.status, Status::Ok);
    // Thresholds: 6 min overdue warns, 11 critical; custom values apply.
    let st = |secs, o: &Policy| evaluate(&data(&[deleted("c", secs, 0, &[])]), o, now()).status;
    assert_eq!(st(6 * 60, &policy(&[])), Status::Warning);
    assert_eq!(st(11 * 60, &policy(&[])), Status::Critical);
    assert_eq!(st(11 * 60, &policy(&["-w", "30m", "-c", "1h"])), Status::Ok);
    // Clock skew: a deletion time in the future is not overdue.
    assert_eq!(st(-300, &policy(&[])), Status::Ok);
    // No terminating pod at all.
    let r = evaluate(&data(&[]), &policy(&[]), now());
    assert_eq!(
        r.summary,
        "no pod wedged in Terminating (10 pods on node k8s03)"
    );
}

#[test]
fn finalizer_without_teardown_error_is_reported_with_its_finalizers() {
    let d = data(&[deleted(
        "backup-0",
        20 * 60,
        30,
        &["example.com/snapshot-cleanup", "foregroundDeletion"],
    )]);
    let r = evaluate(&d, &policy(&[]), now());
    assert_eq!(r.status, Status::Critical);
    let f = &r.findings[0];
    assert!(
        f.text
            .ends_with("finalizers: example.com/snapshot-cleanup, foregroundDeletion"),
        "{}",
        f.text
    );
    assert!(f.details.is_empty(), "no event, no hint: {:?}", f.details);
}

#[test]
fn mount_path_extraction() {
    assert_eq!(
        failed_mount_path(TEARDOWN, UID).as_deref(),
        Some("/var/snap/microk8s/common/var/lib/kubelet/pods/3c2b9f1e-5a7d-4e2f-9b1a-746b28370001/volumes/kubernetes.io~csi/pvc-746b2837/mount")
    );
    // Another pod's path is not this pod's recovery step; unknown UID accepts any.
    assert_eq!(failed_mount_path(TEARDOWN, "aaaaaaaa-0000"), None);
    assert!(failed_mount_path(TEARDOWN, "").is_some());
    // In brackets (kubelet's "failed to clean mount dir [...]") and without a path at all.
    let m = "Unmounter.TearDownAt failed to clean mount dir [/var/lib/kubelet/pods/0123abcd-ef/volumes/kubernetes.io~csi/pvc-1/mount]: x";
    assert_eq!(
        failed_mount_path(m, "0123abcd-ef").as_deref(),
        Some("/var/lib/kubelet/pods/0123abcd-ef/volumes/kubernetes.io~csi/pvc-1/mount")
    );
    assert_eq!(
        failed_mount_path("error killing pod: context deadline exceeded", UID),
        None
    );
}

#[test]
fn latest_teardown_picks_newest_relevant() {
    let ev = |reason: &str, msg: &str, t: &str| -> kube::Event {
        serde_json::from_str(&format!(
            r#"{{"reason":"{reason}","message":"{msg}","lastTimestamp":"{t}"}}"#
        ))
        .unwrap()
    };
    let evs = [
        ev("FailedUnmount", "old", "2026-07-13T10:32:07Z"),
        ev("FailedKillPod", "error killing pod", "2026-07-13T10:40:00Z"),
        ev("Killing", "Stopping container", "2026-07-13T10:50:00Z"),
        ev(
            "Warning",
            "UnmountVolume.TearDown failed for volume x",
            "2026-07-13T10:35:00Z",
        ),
    ];
    let t = latest_teardown(&evs).unwrap();
    assert_eq!(t.reason, "FailedKillPod");
    assert!(latest_teardown(&evs[2..3]).is_none());
    assert!(is_teardown_failure(&evs[3]));
}

#[test]
fn options() {
    assert!(Opts::try_parse_from(["x", "--all-nodes", "--node", "a"]).is_err());
    assert!(Opts::try_parse_from(["x", "--critical-after", "abc"]).is_err());
    let o = opts(&["--namespace", "media", "--node", "k8s03"]);
    assert_eq!(
        o.stuck.scope.filter(|| None).unwrap().describe(),
        "on node k8s03 in namespace media"
    );
    let o = opts(&["--warning-after", "1m", "--critical-after", "2m"]);
    assert_eq!(
        plugin::args::duration_range_text(&o.stuck.policy().critical),
        "2m"
    );
    // The shared options speak of this check's state.
    let help = <Opts as clap::CommandFactory>::command()
        .render_help()
        .to_string()
        // Wrapped at the terminal's width: compare the words.
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for h in [
        "Critical when a pod is still there this long after its grace period ended",
        "Do not look up FailedKillPod/FailedUnmount events for wedged pods",
        "warning-after",
    ] {
        assert!(help.contains(h), "{h}: {help}");
    }
}

/// A pod both Terminating and never started is this check's (check_stuck_scheduled skips it), and
/// its finding says it never started.
#[test]
fn a_terminating_pod_that_never_started_says_so() {
    let mut p = deleted("ws-b70553ae", 20 * 60, 30, &[]);
    p.status = serde_json::from_str(
        r#"{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"True"}]}"#,
    )
    .unwrap();
    let t = classify(&p).unwrap();
    assert!(t.never_started);
    let r = evaluate(&data(&[p.clone()]), &policy(&[]), now());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0].text.contains("never started"),
        "{:?}",
        r.findings
    );
    // Containers still creating: never started too; one running: started.
    p.status = serde_json::from_str(
        r#"{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"True"}],
        "containerStatuses":[{"name":"a","state":{"waiting":{"reason":"ContainerCreating"}}}]}"#,
    )
    .unwrap();
    assert!(classify(&p).unwrap().never_started);
    let running = deleted("web-0", 20 * 60, 30, &[]);
    assert!(!classify(&running).unwrap().never_started);
    let r = evaluate(&data(&[running]), &policy(&[]), now());
    assert!(!r.findings[0].text.contains("never started"));
}

/// The umount hint comes from the node's mount table by the pod's UID (events expire): the PV
/// and subPath mounts of the wedged pod, deepest first, shell-quoted; not its tmpfs, not other
/// pods'.
#[test]
fn umount_hint_from_the_pods_mounts_on_the_node() {
    let k = "/var/snap/microk8s/common/var/lib/kubelet";
    let line = |id: u32, mp: &str, fstype: &str| {
        format!("{id} 29 8:32 / {mp} rw,relatime shared:1 - {fstype} /dev/sdc rw\n")
    };
    let mut t = String::new();
    t += &line(
        1,
        &format!("{k}/pods/{UID}/volumes/kubernetes.io~csi/pvc-746b2837/mount"),
        "ext4",
    );
    t += &line(
        2,
        &format!("{k}/pods/{UID}/volume-subpaths/pvc-746b2837/seerr/0"),
        "ext4",
    );
    t += &line(
        3,
        &format!("{k}/pods/{UID}/volumes/kubernetes.io~projected/kube-api-access-x"),
        "tmpfs",
    );
    t += &line(
        4,
        &format!("{k}/pods/other-uid-0000-0000/volumes/kubernetes.io~csi/pvc-x/mount"),
        "ext4",
    );
    let mounts = node::mountinfo::parse(&t, "t").unwrap();
    let uids: std::collections::BTreeSet<&str> = [UID].into_iter().collect();
    let m = pod_mounts(&mounts, &[std::path::PathBuf::from(k)], &uids);
    assert_eq!(
        m[UID],
        [
            format!("{k}/pods/{UID}/volume-subpaths/pvc-746b2837/seerr/0"),
            format!("{k}/pods/{UID}/volumes/kubernetes.io~csi/pvc-746b2837/mount"),
        ]
    );
    assert_eq!(m.len(), 1);
    // A mount point that needs quoting is pasted quoted.
    let mut d = data(&[deleted("seerr-0", 41 * 60, 30, &[])]);
    d.mounts
        .insert(UID.into(), vec![format!("{k}/pods/{UID}/volumes/x/my vol")]);
    let r = evaluate(&d, &policy(&[]), now());
    assert!(
        r.findings[0].next.as_deref().is_some_and(
            |x| x.contains(&format!("`sudo umount '{k}/pods/{UID}/volumes/x/my vol'`"))
        ),
        "{:?}",
        r.findings[0]
    );
    d.mounts = m;
    let r = evaluate(&d, &policy(&[]), now());
    let hint = r.findings[0]
        .next
        .as_deref()
        .unwrap_or_else(|| panic!("{:?}", r.findings[0]));
    assert_eq!(
        hint,
        format!("on k8s03: its volumes are still mounted; run `sudo umount {k}/pods/{UID}/volume-subpaths/pvc-746b2837/seerr/0 {k}/pods/{UID}/volumes/kubernetes.io~csi/pvc-746b2837/mount` (the kubelet then finishes the teardown; a teardown wedged on a read-only filesystem needs nothing else)")
    );
    // With a teardown event too: one hint, from the mount table.
    d.scan.events.insert(
        "media/seerr-0".into(),
        Teardown {
            reason: "FailedUnmount".into(),
            message: TEARDOWN.into(),
            when: Some(now() - 60),
        },
    );
    let r = evaluate(&d, &policy(&[]), now());
    assert!(
        r.findings[0]
            .next
            .as_deref()
            .is_some_and(|x| x.contains("its volumes are still mounted")),
        "{:?}",
        r.findings[0]
    );
    assert!(!r.findings[0].details.iter().any(|x| x.contains("umount")));
}

/// With a memory (--state-dir), a wedged pod's finding names its volume's earlier stuck spells;
/// the PVs recorded are those of wedged pods only, from their mounts or their teardown event.
#[test]
fn a_volume_whose_pods_keep_wedging_says_so() {
    use node::history::{Kind, Memory, Remembered};
    let mut d = data(&[
        deleted("seerr-seerr-chart-0", 41 * 60, 30, &[]),
        // Inside its grace period: not stuck, not recorded.
        deleted("fresh-0", 10, 30, &[]),
    ]);
    d.scan.events.insert(
        "media/seerr-seerr-chart-0".into(),
        Teardown {
            reason: "FailedUnmount".into(),
            message: TEARDOWN.into(),
            when: Some(now() - 40 * 60),
        },
    );
    let p = policy(&[]);
    assert_eq!(stuck_pvs(&d, &p, now()), ["pvc-746b2837"]);
    // Its mounts on the node, when known, tell the PVs (a subPath below one counts once).
    let base = format!("/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~csi");
    d.mounts.insert(
        UID.into(),
        vec![
            format!("/var/lib/kubelet/pods/{UID}/volume-subpaths/pvc-x/app/0"),
            format!("{base}/pvc-aaa/mount"),
            format!("{base}/pvc-bbb/mount"),
        ],
    );
    assert_eq!(stuck_pvs(&d, &p, now()), ["pvc-aaa", "pvc-bbb"]);
    assert_eq!(csi_pv_of("/x/volumes/kubernetes.io~nfs/a/mount"), None);
    let day = 86_400_000;
    let t0 = 20_773 * day; // 2026-11-16
    let mut m = Memory::default();
    let seen = [("pvc-bbb".to_string(), Kind::Stuck)];
    m.record(t0, &seen);
    m.record(t0 + 1, &[]);
    m.record(t0 + day, &seen);
    d.memory = Some(Remembered {
        memory: m,
        now: t0 + day,
        notes: vec!["a memory note".into()],
        kept: true,
    });
    let r = evaluate(&d, &p, now());
    let f = &r.findings[0];
    assert!(
        f.text
            .ends_with("; its volume pvc-bbb: stuck 2 times in 30 days (last 2026-11-16)"),
        "{}",
        f.text
    );
    assert!(!f.text.contains("pvc-aaa"), "{}", f.text);
    assert!(
        r.notes.iter().any(|n| n == "a memory note"),
        "{:?}",
        r.notes
    );
}

/// The memory of the volumes (`--state-dir`): the node's run and the cluster-wide run keep their
/// own files (the scopes themselves: kube's `PodScopeArgs::memory_scope`).
#[test]
fn each_scope_keeps_its_own_memory() {
    let id = |a: &[&str]| crate::gather::memory_id(&opts(a));
    assert_eq!(id(&[]), "stuck_terminating");
    assert_eq!(id(&["--all-nodes"]), "stuck_terminating_all_nodes");
    assert!(id(&["--namespace", "a"]).starts_with("stuck_terminating."));
}
