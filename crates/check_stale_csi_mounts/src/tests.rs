//! evaluate on in-memory data: every rule has a test that fails when the rule breaks.

use super::*;
use cluster::{Attachment, DriverInfo, PodInfo, PvInfo};
use nix::errno::Errno;
use node::kubelet::VolData;
use node::probe::Outcome;
use plugin::{Report, Status};
use regex_lite::Regex;
use std::path::PathBuf;
use std::time::Duration;

const ROOT: &str = "/var/lib/kubelet";
const NODE: &str = "worker-04";
const DRIVER: &str = "driver.longhorn.io";

fn ok() -> Option<Outcome> {
    Some(Outcome::Answered { is_dir: true })
}

fn mount(path: &str, dev: (u32, u32), probe: Option<Outcome>) -> CsiMount {
    let mp = PathBuf::from(format!("{ROOT}/{path}"));
    let kind = node::kubelet::classify(&mp, &[PathBuf::from(ROOT)])
        .expect("a kubelet path")
        .kind;
    CsiMount {
        mount_point: mp,
        kind,
        major: dev.0,
        minor: dev.1,
        source: "/dev/longhorn/x".into(),
        fstype: "ext4".into(),
        vol_data: None,
        vol_data_error: None,
        selected: true,
        probe,
    }
}

fn pod_mount(uid: &str, pv: &str, dev: (u32, u32), probe: Option<Outcome>) -> CsiMount {
    let mut m = mount(
        &format!("pods/{uid}/volumes/kubernetes.io~csi/{pv}/mount"),
        dev,
        probe,
    );
    m.vol_data = Some(VolData {
        spec_vol_id: Some(pv.into()),
        volume_handle: Some(pv.into()),
        driver_name: Some(DRIVER.into()),
        node_name: Some(NODE.into()),
        ..Default::default()
    });
    m
}

/// 1.24+ staging: `plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount`.
fn staging(
    handle: &str,
    spec_vol_id: Option<&str>,
    dev: (u32, u32),
    probe: Option<Outcome>,
) -> CsiMount {
    let hash = node::kubelet::staging_hash(handle);
    let mut m = mount(
        &format!("plugins/kubernetes.io/csi/{DRIVER}/{hash}/globalmount"),
        dev,
        probe,
    );
    m.vol_data = Some(VolData {
        spec_vol_id: spec_vol_id.map(String::from),
        volume_handle: Some(handle.into()),
        driver_name: Some(DRIVER.into()),
        ..Default::default()
    });
    m
}

fn pod(uid: &str, node: &str) -> PodInfo {
    PodInfo {
        uid: uid.into(),
        namespace: "shop".into(),
        name: format!("pod-{uid}"),
        node: Some(node.into()),
    }
}

fn pv(name: &str) -> PvInfo {
    PvInfo {
        name: name.into(),
        driver: Some(DRIVER.into()),
        volume_handle: Some(name.into()),
        claim: None,
    }
}

fn va(pv: &str, node: &str) -> Attachment {
    Attachment {
        pv: pv.into(),
        node: node.into(),
        attacher: DRIVER.into(),
    }
}

fn full_view(pods: Vec<PodInfo>, pvs: Vec<PvInfo>, vas: Vec<Attachment>) -> ClusterView {
    ClusterView {
        api: cluster::ApiUse::NotUsed,
        node: NODE.into(),
        pods: Some(pods),
        pvs: Some(pvs),
        attachments: Some(vas),
        drivers: vec![],
    }
}

fn data(mounts: Vec<CsiMount>, cluster: ClusterView) -> Data {
    Data {
        roots: vec![PathBuf::from(ROOT)],
        mounts,
        cluster,
        probe_timeout: Duration::from_secs(3),
        notes: vec![],
    }
}

fn opts(args: &[&str]) -> Opts {
    let mut argv = vec!["check_stale_csi_mounts"];
    argv.extend_from_slice(args);
    Opts::parse_from(argv)
}

fn policy(args: &[&str]) -> Policy {
    opts(args).policy()
}

fn perf(r: &Report, label: &str) -> f64 {
    r.perfdata
        .iter()
        .find(|p| p.label == label)
        .unwrap_or_else(|| panic!("no {label}"))
        .value
}

fn problem_texts(r: &Report) -> Vec<String> {
    r.findings
        .iter()
        .filter(|f| f.status != Status::Ok)
        .map(|f| f.text.clone())
        .collect()
}

/// A healthy pair: a staging mount and the pod mount publishing it (same device).
fn healthy_pair() -> Vec<CsiMount> {
    vec![
        staging("pvc-a", Some("pvc-a"), (8, 16), ok()),
        pod_mount("u-1", "pvc-a", (8, 16), ok()),
    ]
}

#[test]
fn healthy_with_full_view_is_ok_with_stable_perfdata() {
    let d = data(
        healthy_pair(),
        full_view(
            vec![pod("u-1", NODE)],
            vec![pv("pvc-a")],
            vec![va("pvc-a", NODE)],
        ),
    );
    let r = evaluate(&d, &policy(&[]));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.summary, "2 CSI mounts healthy");
    let labels: Vec<_> = r.perfdata.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "csi_mounts",
            "stale_mounts",
            "hung_mounts",
            "orphaned_mounts"
        ]
    );
    assert_eq!(perf(&r, "csi_mounts"), 2.0);
    assert_eq!(perf(&r, "stale_mounts"), 0.0);
    assert!(r.findings.iter().all(|f| f.status == Status::Ok));
}

#[test]
fn without_cluster_view_the_summary_says_cross_checks_were_skipped() {
    let d = data(healthy_pair(), ClusterView::local_only(NODE));
    let r = evaluate(&d, &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary.contains("API cross-checks skipped"),
        "{}",
        r.summary
    );
    let d = data(
        healthy_pair(),
        ClusterView {
            pvs: Some(vec![pv("pvc-a")]),
            ..ClusterView::local_only(NODE)
        },
    );
    assert!(evaluate(&d, &policy(&[]))
        .summary
        .contains("pod cross-check skipped"));
    let d = data(
        healthy_pair(),
        ClusterView {
            pods: Some(vec![pod("u-1", NODE)]),
            ..ClusterView::local_only(NODE)
        },
    );
    assert!(evaluate(&d, &policy(&[]))
        .summary
        .contains("PV cross-check skipped"));
}

#[test]
fn every_corrupted_errno_is_critical_and_enoent_is_not() {
    for e in [
        Errno::ENOTCONN,
        Errno::ESTALE,
        Errno::EIO,
        Errno::EACCES,
        Errno::EHOSTDOWN,
    ] {
        let mut ms = healthy_pair();
        ms[1].probe = Some(Outcome::Failed {
            stage: node::probe::Stage::Statfs,
            errno: e,
        });
        let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
        assert_eq!(r.status, Status::Critical, "{e:?}");
        let f = &r
            .findings
            .iter()
            .find(|f| f.status == Status::Critical)
            .unwrap();
        assert!(
            f.text
                .starts_with("corrupted pod mount /var/lib/kubelet/pods/u-1/"),
            "{}",
            f.text
        );
        assert!(f.text.contains(&format!("{e:?}")), "{}", f.text);
        assert!(
            f.details.iter().any(|d| d.contains("pv pvc-a")
                && d.contains(DRIVER)
                && d.contains("pod uid u-1")
                && d.contains("8:16")),
            "{f:?}"
        );
        assert!(
            f.next.as_deref().is_some_and(|n| n.starts_with(
                "restart the CSI node plugin of driver.longhorn.io: `kubectl -n longhorn-system delete pod -l app=longhorn-csi-plugin --field-selector spec.nodeName=worker-04`"
            )),
            "{f:?}"
        );
        assert_eq!(perf(&r, "stale_mounts"), 1.0);
    }
    // Unmounted between reading the table and probing: nothing stale.
    let mut ms = healthy_pair();
    ms[1].probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Stat,
        errno: Errno::ENOENT,
    });
    assert_eq!(
        evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[])).status,
        Status::Ok
    );
}

#[test]
fn other_errnos_and_probe_errors_are_unknown_not_stale() {
    let mut ms = healthy_pair();
    ms[0].probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Stat,
        errno: Errno::ELOOP,
    });
    ms[1].probe = Some(Outcome::ProbeError("fork: EAGAIN".into()));
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(r.status, Status::Unknown);
    assert_eq!(perf(&r, "stale_mounts"), 0.0);
    assert!(r.summary.contains("2 not probed"), "{}", r.summary);
}

#[test]
fn hung_is_critical_with_the_time_it_waited() {
    let mut ms = healthy_pair();
    ms[0].probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert_eq!(perf(&r, "hung_mounts"), 1.0);
    let t = problem_texts(&r);
    assert_eq!(t.len(), 1);
    assert!(
        t[0].starts_with("hung staging mount ") && t[0].ends_with("no answer in 3s"),
        "{}",
        t[0]
    );
    assert!(
        r.summary.starts_with("1 of 2 CSI mounts stale: 1 hung"),
        "{}",
        r.summary
    );
}

#[test]
fn orphaned_pod_mount_needs_the_pod_list_and_filters_by_node() {
    let ms = healthy_pair();
    // The pod exists, but on another node: orphaned here.
    let view = full_view(
        vec![pod("u-1", "worker-01"), pod("u-9", NODE)],
        vec![pv("pvc-a")],
        vec![va("pvc-a", NODE)],
    );
    let r = evaluate(&data(ms.clone(), view), &policy(&[]));
    assert_eq!(r.status, Status::Critical, "{r:?}");
    assert_eq!(perf(&r, "orphaned_mounts"), 1.0);
    let f = r
        .findings
        .iter()
        .find(|f| f.status == Status::Critical)
        .unwrap();
    assert!(
        f.text.contains("orphaned pod mount") && f.text.contains("runs on node worker-01"),
        "{}",
        f.text
    );
    assert!(
        f.next
            .as_deref()
            .is_some_and(|n| n.starts_with("on worker-04: `sudo umount /var/lib/kubelet/pods/u-1/")),
        "{f:?}"
    );
    // Absent from the list altogether.
    let view = full_view(
        vec![pod("u-9", NODE)],
        vec![pv("pvc-a")],
        vec![va("pvc-a", NODE)],
    );
    let r = evaluate(&data(ms.clone(), view), &policy(&[]));
    assert_eq!(perf(&r, "orphaned_mounts"), 1.0);
    assert!(problem_texts(&r)[0].contains("pod u-1 is not a pod of node worker-04"));
    // Without a pod list nothing is orphaned.
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(perf(&r, "orphaned_mounts"), 0.0);
}

#[test]
fn a_pod_list_without_pods_on_this_node_is_unknown_not_all_orphaned() {
    let view = full_view(vec![pod("u-1", "worker-01")], vec![pv("pvc-a")], vec![]);
    let r = evaluate(&data(healthy_pair(), view), &policy(&[]));
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.contains("no pod on node 'worker-04'") && r.summary.contains("worker-01"),
        "{}",
        r.summary
    );
    assert!(r.summary.starts_with("--pods-json"), "{}", r.summary);
    // From the API (this node's pods only): the message names the API, not --pods-json.
    let mut view = full_view(vec![], vec![pv("pvc-a")], vec![]);
    view.api = crate::cluster::ApiUse::Used("https://api:6443".into());
    let r = evaluate(&data(healthy_pair(), view), &policy(&[]));
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.contains("the API has no pod on node 'worker-04'")
            && !r.summary.contains("--pods-json"),
        "{}",
        r.summary
    );
}

#[test]
fn staging_of_a_deleted_pv_is_critical() {
    let ms = vec![staging("pvc-81b676e6", Some("pvc-81b676e6"), (8, 32), ok())];
    let r = evaluate(
        &data(
            ms,
            full_view(vec![pod("u-9", NODE)], vec![pv("pvc-a")], vec![]),
        ),
        &policy(&[]),
    );
    assert_eq!(r.status, Status::Critical);
    let f = r
        .findings
        .iter()
        .find(|f| f.status == Status::Critical)
        .unwrap();
    assert!(
        f.text.contains("PV pvc-81b676e6 no longer exists"),
        "{}",
        f.text
    );
    assert!(
        f.details.iter().any(|d| d == "also: unpublished staging"),
        "{f:?}"
    );
    assert!(
        f.next.as_deref().is_some_and(|n| n.starts_with(
            "restart the kubelet on worker-04: `sudo systemctl restart kubelet` (k3s: `sudo systemctl restart k3s-agent`, on a server `sudo systemctl restart k3s`; RKE2: `sudo systemctl restart rke2-agent`, on a server `sudo systemctl restart rke2-server`; Talos: `talosctl -n worker-04 service kubelet restart`)"
        )),
        "{f:?}"
    );
    assert_eq!(perf(&r, "stale_mounts"), 1.0);
}

#[test]
fn staging_without_attachment_here_is_critical_only_for_attaching_drivers() {
    let ms = healthy_pair();
    // A VolumeAttachment of the PV to another node only.
    let view = full_view(
        vec![pod("u-1", NODE)],
        vec![pv("pvc-a")],
        vec![va("pvc-a", "worker-01")],
    );
    let r = evaluate(&data(ms.clone(), view.clone()), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert!(problem_texts(&r)[0].contains("no VolumeAttachment of PV pvc-a to node worker-04"));
    // The CSIDriver says it never attaches: no rule.
    let mut v2 = view.clone();
    v2.drivers = vec![DriverInfo {
        name: DRIVER.into(),
        attach_required: false,
    }];
    assert_eq!(
        evaluate(&data(ms.clone(), v2), &policy(&[])).status,
        Status::Ok
    );
    // No VolumeAttachment of that driver anywhere and no CSIDriver: cannot tell, no rule.
    let mut v3 = view;
    v3.attachments = Some(vec![]);
    assert_eq!(evaluate(&data(ms, v3), &policy(&[])).status, Status::Ok);
}

#[test]
fn unpublished_staging_is_a_warning() {
    let ms = vec![staging("pvc-a", Some("pvc-a"), (8, 16), ok())];
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(r.status, Status::Warning);
    assert!(problem_texts(&r)[0].starts_with("unpublished staging mount "));
    assert_eq!(perf(&r, "stale_mounts"), 1.0);
}

#[test]
fn staging_is_published_by_device_or_by_pv_name() {
    // Same device, different names (PV name only known through the pod mount).
    let ms = vec![
        staging("handle-1", None, (0, 52), ok()),
        pod_mount("u-1", "pvc-b", (0, 52), ok()),
    ];
    let d = data(ms, ClusterView::local_only(NODE));
    let ids = identify(&d.mounts, d.cluster.pvs.as_deref());
    assert_eq!(ids[0].pv.as_deref(), Some("pvc-b"));
    assert_eq!(ids[0].pv_from, "pod mount");
    assert_eq!(evaluate(&d, &policy(&[])).status, Status::Ok);
    // Different device (e.g. NFS mounted twice), same PV.
    let ms = vec![
        staging("pvc-c", Some("pvc-c"), (0, 60), ok()),
        pod_mount("u-1", "pvc-c", (0, 61), ok()),
    ];
    assert_eq!(
        evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[])).status,
        Status::Ok
    );
}

#[test]
fn staging_pv_from_the_pv_list_by_hash_then_the_handle() {
    // No specVolID, no pod mount: the PV whose sha256(volumeHandle) names the directory.
    let mut m = staging("vol-123", None, (8, 48), ok());
    m.vol_data = None;
    let view = full_view(
        vec![pod("u-9", NODE)],
        vec![PvInfo {
            name: "pvc-z".into(),
            driver: Some(DRIVER.into()),
            volume_handle: Some("vol-123".into()),
            claim: None,
        }],
        vec![],
    );
    let ids = identify(std::slice::from_ref(&m), view.pvs.as_deref());
    assert_eq!(
        (ids[0].pv.as_deref(), ids[0].pv_from),
        (Some("pvc-z"), "PV list")
    );
    // Neither: the volume handle from vol_data.json stands in.
    let m = staging("vol-123", None, (8, 48), ok());
    let ids = identify(&[m], ClusterView::local_only(NODE).pvs.as_deref());
    assert_eq!(
        (ids[0].pv.as_deref(), ids[0].pv_from),
        (Some("vol-123"), "volumeHandle")
    );
}

#[test]
fn old_staging_scheme_and_block_mode() {
    let ms = vec![
        mount(
            "plugins/kubernetes.io/csi/pv/pvc-old/globalmount",
            (8, 1),
            ok(),
        ),
        mount(
            "plugins/kubernetes.io/csi/volumeDevices/staging/pvc-blk",
            (0, 5),
            ok(),
        ),
        mount(
            "plugins/kubernetes.io/csi/volumeDevices/publish/pvc-blk/u-1",
            (0, 5),
            ok(),
        ),
    ];
    let r = evaluate(
        &data(
            ms,
            full_view(
                vec![pod("u-1", NODE)],
                vec![pv("pvc-old"), pv("pvc-blk")],
                vec![],
            ),
        ),
        &policy(&[]),
    );
    // The old-scheme staging has no pod mount: unpublished; the block staging is published.
    assert_eq!(r.status, Status::Warning, "{r:?}");
    let t = problem_texts(&r);
    assert_eq!(t.len(), 1);
    assert!(t[0].contains("pv/pvc-old/globalmount"), "{t:?}");
}

#[test]
fn include_and_exclude_match_mount_point_pv_or_driver() {
    let ms = healthy_pair();
    let ids = identify(&ms, ClusterView::local_only(NODE).pvs.as_deref());
    let re = |s: &str| vec![Regex::new(s).unwrap()];
    assert!(selected(&ms[1], &ids[1], &[], &[]));
    assert!(!selected(&ms[1], &ids[1], &[], &re("^pvc-a$")));
    assert!(!selected(&ms[1], &ids[1], &[], &re("longhorn")));
    assert!(selected(&ms[1], &ids[1], &re("/pods/"), &[]));
    assert!(!selected(&ms[0], &ids[0], &re("/pods/"), &[]));
    // Unselected mounts are not reported but still publish their staging mount.
    let mut ms = ms;
    ms[1].selected = false;
    ms[1].probe = None;
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert_eq!(perf(&r, "csi_mounts"), 1.0);
    assert!(r.notes.iter().any(|n| n.contains("1 CSI mount excluded")));
}

#[test]
fn thresholds_on_the_stale_count_replace_class_states() {
    let mut ms = healthy_pair();
    ms[0].probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    let d = data(ms, ClusterView::local_only(NODE));
    assert_eq!(
        evaluate(&d, &policy(&["-w", "1", "-c", "2"])).status,
        Status::Ok
    );
    assert_eq!(
        evaluate(&d, &policy(&["-w", "0", "-c", "2"])).status,
        Status::Warning
    );
    let r = evaluate(&d, &policy(&["-c", "0"]));
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.perfdata[1].render(), "stale_mounts=1;;0;0");
}

#[test]
fn no_csi_mounts_is_ok_and_says_where_it_looked() {
    let r = evaluate(&data(vec![], ClusterView::local_only(NODE)), &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary
            .starts_with("no CSI mounts under /var/lib/kubelet"),
        "{}",
        r.summary
    );
    assert_eq!(perf(&r, "csi_mounts"), 0.0);
}

#[test]
fn probe_budget_is_capped_by_the_time_left() {
    let s = Duration::from_secs;
    assert_eq!(probe_budget(s(3), s(10), 20), s(3));
    assert!(probe_budget(s(3), s(2), 20) < s(2));
    // More mounts than run at once: each round gets its share.
    assert!(probe_budget(s(3), s(10), MAX_PARALLEL * 4) <= Duration::from_millis(2250));
    assert!(probe_budget(s(3), Duration::ZERO, 1) > Duration::ZERO);
}

#[test]
fn va_skip_is_noted_when_pvs_have_no_attachments() {
    let view = ClusterView {
        pvs: Some(vec![pv("pvc-a")]),
        pods: Some(vec![pod("u-1", NODE)]),
        ..ClusterView::local_only(NODE)
    };
    let r = evaluate(&data(healthy_pair(), view), &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("VolumeAttachment cross-check skipped")),
        "{r:?}"
    );
}

#[test]
fn the_summary_counts_orphaned_mounts_as_the_perfdata_does() {
    // A hung pod mount of a pod not on this node is hung *and* orphaned: the summary names it
    // by the more urgent class, and must still say how many are orphaned (perfdata: 2).
    let hung_orphan = pod_mount(
        "u-x",
        "pvc-b",
        (0, 71),
        Some(Outcome::Hung {
            after: Duration::from_secs(3),
        }),
    );
    let orphan = pod_mount("u-y", "pvc-c", (0, 72), ok());
    let view = full_view(
        vec![pod("u-1", NODE)],
        vec![pv("pvc-b"), pv("pvc-c")],
        vec![va("pvc-b", NODE), va("pvc-c", NODE)],
    );
    let r = evaluate(&data(vec![hung_orphan, orphan], view), &policy(&[]));
    assert_eq!(perf(&r, "orphaned_mounts"), 2.0);
    assert!(
        r.summary.contains("1 orphaned pod mount")
            && r.summary
                .contains("(2 orphaned in all, 1 of them counted above by a more urgent problem)"),
        "{}",
        r.summary
    );
}

#[test]
fn the_incident_deleted_pv_pinned_by_a_gone_pod() {
    // worker-04: the PV is deleted, the pod is gone, its mount still pins the staging mount.
    let mut gone = pod_mount("u-gone", "pvc-81b676e6", (8, 64), ok());
    gone.vol_data = None;
    let hung = pod_mount(
        "u-1",
        "pvc-a",
        (0, 70),
        Some(Outcome::Hung {
            after: Duration::from_secs(3),
        }),
    );
    let ms = vec![staging("pvc-81b676e6", None, (8, 64), ok()), gone, hung];
    let view = full_view(
        vec![pod("u-1", NODE)],
        vec![pv("pvc-a")],
        vec![va("pvc-a", NODE)],
    );
    let r = evaluate(&data(ms, view), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    // Classes in a fixed order, whatever the mount table order.
    assert_eq!(
        r.summary,
        "3 of 3 CSI mounts stale: 1 hung, 1 orphaned pod mount, 1 staging of deleted PV"
    );
    assert_eq!(perf(&r, "orphaned_mounts"), 1.0);
    // The pod mount without vol_data.json borrows the driver of the staging mount on its device.
    let f = r
        .findings
        .iter()
        .find(|f| f.text.starts_with("orphaned"))
        .unwrap();
    assert!(f.details[0].contains("driver driver.longhorn.io"), "{f:?}");
    // The staging mount's PV came from the pod mount sharing its device.
    let f = r
        .findings
        .iter()
        .find(|f| f.text.starts_with("stale staging"))
        .unwrap();
    assert!(
        f.details[0].starts_with("pv pvc-81b676e6 (from pod mount)"),
        "{f:?}"
    );
}

#[test]
fn staging_without_any_clue_to_its_pv_is_stale_when_no_pv_hashes_to_it() {
    // No vol_data.json, no pod mount: only the PV list can name it, and none does.
    let mut m = staging("vol-lost", None, (8, 80), ok());
    m.vol_data = None;
    let view = full_view(vec![pod("u-9", NODE)], vec![pv("pvc-a")], vec![]);
    let r = evaluate(&data(vec![m.clone()], view), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert!(
        problem_texts(&r)[0].contains("no PV of driver driver.longhorn.io has the volume handle"),
        "{r:?}"
    );
    // The PV whose handle hashes to the directory exists: only unpublished.
    let view = full_view(vec![pod("u-9", NODE)], vec![pv("vol-lost")], vec![]);
    assert_eq!(
        evaluate(&data(vec![m], view), &policy(&[])).status,
        Status::Warning
    );
}

#[test]
fn api_failure_is_unknown_unless_a_mount_is_worse_and_no_credentials_is_a_skip() {
    let failed = ClusterView {
        api: cluster::ApiUse::Failed("HTTP 403 Forbidden: grant list on persistentvolumes".into()),
        ..ClusterView::local_only(NODE)
    };
    let r = evaluate(&data(healthy_pair(), failed.clone()), &policy(&[]));
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.ends_with(
            "; API cross-checks failed: HTTP 403 Forbidden: grant list on persistentvolumes"
        ),
        "{}",
        r.summary
    );
    let mut ms = healthy_pair();
    ms[0].probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    let r = evaluate(&data(ms, failed), &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary.contains("API cross-checks failed"),
        "{}",
        r.summary
    );

    let skipped = ClusterView {
        api: cluster::ApiUse::Skipped("no Kubernetes credentials found: ...".into()),
        ..ClusterView::local_only(NODE)
    };
    let r = evaluate(&data(healthy_pair(), skipped), &policy(&[]));
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary
            .contains("API cross-checks skipped (no Kubernetes credentials"),
        "{}",
        r.summary
    );
    assert!(r
        .notes
        .iter()
        .any(|n| n.starts_with("no Kubernetes credentials found")));
}

#[test]
fn the_api_leaves_the_probes_their_time() {
    let s = Duration::from_secs;
    // -t 10 (9.5 s of work), probes 3 s: the API gets 6 s.
    assert_eq!(api_budget(Duration::from_millis(9500), s(3)), s(6));
    // Probes longer than the run: the API still gets half, the probes are capped later.
    assert_eq!(api_budget(s(4), s(30)), s(2));
}

#[test]
fn findings_name_the_pod_and_claim_the_cross_checks_read() {
    let mut ms = healthy_pair();
    ms[1].probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    let mut p = pv("pvc-a");
    p.claim = Some(("shop".into(), "data-pod-u-1".into()));
    let d = data(
        ms,
        full_view(vec![pod("u-1", NODE)], vec![p], vec![va("pvc-a", NODE)]),
    );
    let r = evaluate(&d, &policy(&[]));
    assert_eq!(r.status, Status::Critical);
    let f = r.findings.iter().find(|f| f.status != Status::Ok).unwrap();
    assert!(
        f.text
            .ends_with("no answer in 3s — shop/pod-u-1 (PVC shop/data-pod-u-1, pvc-a)"),
        "{}",
        f.text
    );
    assert!(
        f.details[0].starts_with("pv pvc-a (from path), PVC shop/data-pod-u-1, driver "),
        "{:?}",
        f.details
    );
    // Without a cluster view: the headline as before.
    let mut ms = healthy_pair();
    ms[1].probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    let r = evaluate(&data(ms, ClusterView::local_only(NODE)), &policy(&[]));
    let t = problem_texts(&r);
    assert!(t[0].ends_with("no answer in 3s"), "{}", t[0]);
}

/// Issue 16: a `'` in a mount path cannot break out of the hint's `umount` command.
#[test]
fn umount_hint_quotes_a_hostile_path() {
    let mut ms = healthy_pair();
    ms[1].mount_point = std::path::PathBuf::from("/var/lib/kubelet/pods/u-1/x'; rm -rf / #");
    let view = full_view(
        vec![pod("u-1", "worker-01"), pod("u-9", NODE)],
        vec![pv("pvc-a")],
        vec![va("pvc-a", NODE)],
    );
    let r = evaluate(&data(ms, view), &policy(&[]));
    let hint = r
        .findings
        .iter()
        .filter_map(|f| f.next.as_deref())
        .find(|d| d.starts_with("on worker-04: `sudo umount "))
        .unwrap_or_else(|| panic!("an umount hint: {r:?}"));
    assert!(
        hint.starts_with(
            "on worker-04: `sudo umount '/var/lib/kubelet/pods/u-1/x'\\''; rm -rf / #'` "
        ),
        "{hint}"
    );
}

/// The cluster view from `kubectl … -o json` documents.
mod cluster_view {
    use crate::cluster::*;
    use crate::ClusterView;

    const PODS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop","uid":"u-1"},"spec":{"nodeName":"worker-04","containers":[]},"status":{"phase":"Running"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"db-0","namespace":"shop","uid":"u-2"},"spec":{"nodeName":"worker-01"}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"pending","namespace":"shop","uid":"u-3"},"spec":{}}
    ],"metadata":{"resourceVersion":""}}"#;

    const PVS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pvc-81b676e6"},"spec":{"csi":{"driver":"driver.longhorn.io","volumeHandle":"pvc-81b676e6"},"claimRef":{"kind":"PersistentVolumeClaim","namespace":"shop","name":"data-web-0"}}},
      {"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":"pv-nfs"},"spec":{"nfs":{"server":"x","path":"/"}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"csi-1"},"spec":{"attacher":"driver.longhorn.io","nodeName":"worker-04","source":{"persistentVolumeName":"pvc-81b676e6"}},"status":{"attached":true}},
      {"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment","metadata":{"name":"csi-2"},"spec":{"attacher":"x","nodeName":"worker-04","source":{"inlineVolumeSpec":{}}}},
      {"apiVersion":"storage.k8s.io/v1","kind":"CSIDriver","metadata":{"name":"nfs.csi.k8s.io"},"spec":{"attachRequired":false}}
    ]}"#;

    /// `text` as the file `what` names, read into `o`.
    fn parse_objects(
        text: &str,
        what: &str,
        default_kind: &str,
        o: &mut Objects,
    ) -> Result<(), String> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("stale-csi-cluster-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.json");
        std::fs::write(&p, text).unwrap();
        let r = o.read(&p, what, default_kind).map_err(|e| e.0);
        std::fs::remove_dir_all(&dir).unwrap();
        r
    }

    fn view(pods: Option<&str>, pvs: Option<&str>) -> ClusterView {
        let mut o = Objects::default();
        if let Some(p) = pods {
            parse_objects(p, "--pods-json", "Pod", &mut o).unwrap();
        }
        if let Some(p) = pvs {
            parse_objects(p, "--pvs-json", "PersistentVolume", &mut o).unwrap();
        }
        o.into_view("worker-04".into(), pods.is_some(), pvs.is_some())
    }

    #[test]
    fn pods_of_all_nodes_are_kept_and_filtered_by_node() {
        let v = view(Some(PODS), None);
        assert_eq!(v.pods.as_ref().unwrap().len(), 3);
        let here: Vec<_> = v.pods_on_node().unwrap().map(|p| p.uid.as_str()).collect();
        assert_eq!(here, ["u-1"]);
        assert!(v.pvs.is_none() && v.attachments.is_none());
    }

    #[test]
    fn pvs_attachments_and_drivers_from_one_list() {
        let v = view(None, Some(PVS));
        assert!(v.pods.is_none());
        assert_eq!(v.pv_exists(Some("pvc-81b676e6"), None, None), Some(true));
        assert_eq!(v.pv_exists(Some("pvc-gone"), None, None), Some(false));
        assert_eq!(
            v.pv_exists(
                Some("other"),
                Some("driver.longhorn.io"),
                Some("pvc-81b676e6")
            ),
            Some(true)
        );
        assert_eq!(v.attachments.as_ref().unwrap().len(), 1);
        assert_eq!(v.attached_here("pvc-81b676e6"), Some(true));
        assert_eq!(v.attached_here("pvc-gone"), Some(false));
        assert!(v.needs_attachment("driver.longhorn.io"));
        assert!(!v.needs_attachment("nfs.csi.k8s.io"));
        assert!(!v.needs_attachment("never.seen"));
    }

    #[test]
    fn names_from_the_view_without_another_request() {
        let v = view(Some(PODS), Some(PVS));
        let n = names(&v);
        assert_eq!(n.pod("u-1").as_deref(), Some("shop/web-0"));
        assert_eq!(n.claim("pvc-81b676e6").as_deref(), Some("shop/data-web-0"));
        assert_eq!(n.claim("pv-nfs"), None);
        assert_eq!(
            n.volume("pvc-81b676e6", ["u-1"]),
            "shop/web-0 (PVC shop/data-web-0, pvc-81b676e6)"
        );
    }

    #[test]
    fn typed_lists_and_single_objects() {
        let mut o = Objects::default();
        parse_objects(
            r#"{"kind":"PodList","items":[{"metadata":{"name":"a","namespace":"n","uid":"x"},"spec":{"nodeName":"worker-04"}}]}"#,
            "p",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        parse_objects(
            r#"{"kind":"VolumeAttachmentList","items":[]}"#,
            "v",
            "PersistentVolume",
            &mut o,
        )
        .unwrap();
        parse_objects(
            r#"{"kind":"PersistentVolume","metadata":{"name":"pv1"},"spec":{}}"#,
            "v",
            "Pod",
            &mut o,
        )
        .unwrap();
        assert_eq!(o.pods[0].uid, "x");
        assert_eq!(o.pvs[0].name, "pv1");
        let v = o.into_view("worker-04".into(), true, true);
        assert_eq!(v.attachments, Some(vec![]));
    }

    #[test]
    fn garbage_is_an_error_naming_the_option() {
        let mut o = Objects::default();
        for bad in [
            "",
            "{",
            "[1,2]",
            r#"{"items":5}"#,
            r#"{"items":[{"metadata":"str"}]}"#,
        ] {
            let e = parse_objects(bad, "--pods-json", "Pod", &mut o).unwrap_err();
            assert!(e.starts_with("cannot parse --pods-json "), "{bad}: {e}");
        }
        // A pod without a UID cannot be matched to its mounts: refused, naming it.
        let e = parse_objects(
            r#"{"items":[{"kind":"Pod","metadata":{"name":"x"}}]}"#,
            "--pods-json",
            "Pod",
            &mut o,
        )
        .unwrap_err();
        assert!(
            e.starts_with("--pods-json ") && e.ends_with(": pod 'x' has no metadata.uid"),
            "{e}"
        );
    }
}
