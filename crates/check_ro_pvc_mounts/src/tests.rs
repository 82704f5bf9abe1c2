use super::*;
use kube::checks::names::Names;
use node::fsstate;
use node::probe::Outcome;
use node::usage::{DeviceUsage, Scope};
use plugin::Status;
use plugin::{Range, Thresholds};
use std::path::PathBuf;
use std::time::Duration;

const K: &str = "/var/lib/kubelet";

fn roots() -> Vec<PathBuf> {
    vec![PathBuf::from(K)]
}

fn line(id: u32, dev: &str, mp: &str, mopts: &str, fstype: &str, src: &str, sopts: &str) -> String {
    format!("{id} 29 {dev} / {mp} {mopts} shared:1 - {fstype} {src} {sopts}\n")
}

/// A node with the incident's volumes: radarr's config volume (staging + pod mount), a healthy
/// volume, and a readOnly pod volume over a writable filesystem.
fn table(radarr_super: &str) -> String {
    let mut t = String::new();
    t += &line(1, "8:0", "/", "rw", "ext4", "/dev/sda1", "rw");
    t += &line(
        10,
        "8:32",
        &format!("{K}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/abc/globalmount"),
        "rw,relatime",
        "ext4",
        "/dev/sdc",
        radarr_super,
    );
    t += &line(
        11,
        "8:32",
        &format!("{K}/pods/8e1f/volumes/kubernetes.io~csi/pvc-a634b9a3/mount"),
        "rw,relatime",
        "ext4",
        "/dev/sdc",
        radarr_super,
    );
    t += &line(
        12,
        "8:48",
        &format!("{K}/pods/77aa/volumes/kubernetes.io~csi/pvc-healthy/mount"),
        "rw,relatime",
        "ext4",
        "/dev/sdd",
        "rw",
    );
    t += &line(
        13,
        "8:64",
        &format!("{K}/pods/5b5b/volumes/kubernetes.io~csi/pvc-readonly/mount"),
        "ro,relatime",
        "xfs",
        "/dev/sde",
        "rw,attr2",
    );
    t += &line(
        14,
        "0:60",
        &format!("{K}/pods/77aa/volumes/kubernetes.io~projected/kube-api-access"),
        "rw",
        "tmpfs",
        "tmpfs",
        "rw",
    );
    t
}

fn usage(text: &str) -> DeviceUsage {
    DeviceUsage::parse(text, "t", &roots(), Scope::Volumes).unwrap()
}

fn data(text: &str, kernel: (u32, u32, u32)) -> NodeData {
    let m = usage(text);
    let mut volumes = group(&m, &node::FilterArgs::default());
    for v in &mut volumes {
        v.probe = Some(Outcome::Answered { is_dir: true });
    }
    NodeData {
        volumes,
        kernel: Some(kernel),
        roots: roots(),
        can_read_all: true,
        node_name: Some("k8s03".into()),
        notes: vec![],
        node_fs: vec![],
        memory: None,
    }
}

fn default_t() -> Thresholds {
    Thresholds::new(
        Some(Range::parse("0").unwrap()),
        Some(Range::parse("0").unwrap()),
    )
}

fn vol<'a>(d: &'a mut NodeData, name: &str) -> &'a mut Volume {
    d.volumes
        .iter_mut()
        .find(|v| v.names.contains(name))
        .unwrap()
}

#[test]
fn groups_bind_mounts_of_one_filesystem_into_one_volume() {
    let d = data(&table("rw"), (6, 18, 0));
    assert_eq!(d.volumes.len(), 3, "{:?}", d.volumes);
    let v = d
        .volumes
        .iter()
        .find(|v| v.names.contains("pvc-a634b9a3"))
        .unwrap();
    assert_eq!(v.mounts.len(), 2);
    assert_eq!(v.pod_uids.iter().collect::<Vec<_>>(), ["8e1f"]);
}

#[test]
fn healthy_node_is_ok_and_readonly_bind_is_not_an_alarm() {
    let r = evaluate(&data(&table("rw"), (6, 18, 0)), &default_t());
    assert_eq!(r.status, Status::Ok);
    // The read-only bind is read-only on purpose, not counted writable (issue 31).
    assert_eq!(
        r.summary,
        "3 PV filesystems: 2 writable, 1 read-only on purpose"
    );
    let perf: Vec<_> = r.perfdata.iter().map(|p| p.render()).collect();
    assert_eq!(
        perf,
        [
            "pv_mounts=3;;;0",
            "ro_volumes=0;0;0;0",
            "error_volumes=0;;;0",
            "node_fs_ro=0;;0;0"
        ]
    );
}

/// Issue 31: the node's own kubelet root and `/` read-only is CRITICAL with its own signal; a
/// root mounted read-only on purpose (Talos, Bottlerocket) is not.
#[test]
fn the_nodes_own_filesystems_read_only_are_critical() {
    let roots = vec![PathBuf::from(K)];
    let two = |root_line: &str, kubelet_line: &str| {
        format!("1 0 8:1 / / {root_line}\n2 1 8:2 / {K} {kubelet_line}\n")
    };
    let fs = |t: &str| {
        let mut paths = roots.clone();
        paths.push(PathBuf::from("/"));
        let held = node::mountinfo::holding(t, "t", &paths).unwrap();
        node_filesystems(&roots, &held)
    };
    let mut d = data(&table("rw"), (6, 18, 0));
    // All writable.
    d.node_fs = fs(&two("rw - ext4 /dev/sda1 rw", "rw - ext4 /dev/sda2 rw"));
    assert_eq!(d.node_fs.len(), 2);
    assert_eq!(evaluate(&d, &default_t()).status, Status::Ok);
    // The kubelet root's filesystem read-only, any way.
    for k in [
        "ro - ext4 /dev/sda2 ro",
        "ro - ext4 /dev/sda2 rw",
        "rw - ext4 /dev/sda2 ro",
        "rw - ext4 /dev/sda2 rw,emergency_ro",
    ] {
        d.node_fs = fs(&two("rw - ext4 /dev/sda1 rw", k));
        let r = evaluate(&d, &default_t());
        assert_eq!(r.status, Status::Critical, "{k}: {r:?}");
        assert!(
            r.summary.starts_with(
                "node filesystem read-only (/var/lib/kubelet): no new pod can start on this node; "
            ),
            "{}",
            r.summary
        );
        let f = r
            .findings
            .iter()
            .find(|f| f.signal == "node_fs_readonly")
            .unwrap();
        assert!(f.text.starts_with("node filesystem read-only: the kubelet root /var/lib/kubelet on /dev/sda2 (ext4, mounted at /var/lib/kubelet): "), "{}", f.text);
        assert_eq!(f.subject.node.as_deref(), Some("k8s03"));
        assert!(
            f.next_line()
                .is_some_and(|l| l.starts_with("`kubectl cordon k8s03`")
                    && l.contains("docs/runbooks/node_fs_readonly.md")),
            "{f:?}"
        );
        assert_eq!(r.perfdata.last().unwrap().render(), "node_fs_ro=1;;0;0");
    }
    // `/` remounted read-only by the kernel, the kubelet root on it.
    d.node_fs = fs("1 0 8:1 / / rw - ext4 /dev/sda1 ro,errors=remount-ro\n");
    assert_eq!(d.node_fs.len(), 1);
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings.iter().any(|f| f.text.starts_with(
            "node filesystem read-only: / and the kubelet root /var/lib/kubelet on /dev/sda1"
        )),
        "{r:?}"
    );
    // `/` read-only on purpose (mount and filesystem), the kubelet root elsewhere and writable.
    d.node_fs = fs(&two("ro - squashfs /dev/loop0 ro", "rw - xfs /dev/sda2 rw"));
    assert_eq!(evaluate(&d, &default_t()).status, Status::Ok);
    // ... but its filesystem flipped under a read-write mount is the kernel's doing.
    d.node_fs = fs(&two("rw - ext4 /dev/sda1 ro", "rw - xfs /dev/sda2 rw"));
    assert_eq!(evaluate(&d, &default_t()).status, Status::Critical);
}

#[test]
fn emergency_ro_is_critical_on_new_kernels() {
    let r = evaluate(&data(&table("rw,emergency_ro"), (6, 15, 0)), &default_t());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.summary, "1 of 3 PV filesystems read-only: pvc-a634b9a3");
    assert!(
        r.findings[0].text.contains("emergency_ro"),
        "{:?}",
        r.findings[0]
    );
    assert!(r.findings[0].text.contains("ext4 on /dev/sdc (8:32)"));
    assert!(r.findings[0].details.iter().any(|d| d == "pods: 8e1f"));
}

/// The kernel's error remount (up to 6.11) records the error: read-only under a read-write
/// mount *with* an error recorded stays CRITICAL, and says the kernel did it.
#[test]
fn super_ro_under_rw_mount_is_critical_up_to_6_11() {
    let mut d = data(&table("ro"), (5, 4, 0));
    vol(&mut d, "pvc-a634b9a3").ext4_errors = Some(fsstate::Ext4Errors {
        count: 1,
        first_error_time: Some(1783938484),
        last_error_time: None,
    });
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    assert!(r.findings[0].text.contains("remounted it read-only"));
    // The next step, paste-safe.
    let next = r.findings[0].next_line().unwrap();
    assert!(
        next.starts_with("on k8s03: `kubectl cordon k8s03` first, then delete the pods using it"),
        "{next}"
    );
    assert!(next.contains("iscsiadm -m session -P 3"), "{next}");
    assert!(next.contains("`kubectl uncordon k8s03`"), "{next}");
    assert!(
        next.ends_with(" — runbook: docs/runbooks/remounted_ro.md"),
        "{next}"
    );
}

/// #21: a CSI driver's ReadOnlyMany volume — staged `ro` at the superblock, bound into the pod
/// without `ro` — with no error recorded is not the kernel's remount. Without the API: WARNING,
/// saying what is known; with the PV's access modes: ReadOnlyMany is OK, ReadWriteOnce CRITICAL.
#[test]
fn super_ro_under_rw_mount_without_an_error_is_told_by_the_access_modes() {
    let mut d = data(&table("ro"), (6, 18, 0));
    vol(&mut d, "pvc-a634b9a3").ext4_errors = Some(fsstate::Ext4Errors::default());
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Warning, "{r:?}");
    assert!(
        r.summary.starts_with(
            "1 of 3 PV filesystems read-only at the filesystem with no error recorded (intent unknown): pvc-a634b9a3"
        ),
        "{}",
        r.summary
    );
    let f = &r.findings[0];
    assert!(
        f.text
            .contains("no ext4 error recorded (errors_count 0), no emergency_ro"),
        "{f:?}"
    );
    assert!(!f.text.contains("remounted"), "{f:?}");
    assert!(
        f.next_line()
            .unwrap()
            .contains("`kubectl get pv pvc-a634b9a3 -o 'jsonpath={.spec.accessModes}'`"),
        "{f:?}"
    );
    // Counters not readable: the same, saying so.
    vol(&mut d, "pvc-a634b9a3").ext4_errors = None;
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Warning);
    assert!(
        r.findings[0].text.contains("could not be read"),
        "{:?}",
        r.findings[0]
    );
    // The API says ReadOnlyMany: intent, OK.
    let mut names = Names::default();
    names
        .claims
        .insert("pvc-a634b9a3".into(), ("media".into(), "library".into()));
    names
        .access_modes
        .insert("pvc-a634b9a3".into(), vec!["ReadOnlyMany".into()]);
    let r = evaluate_named(&d, &default_t(), &names);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert!(r
        .findings
        .iter()
        .any(|f| f.text.contains("is read-only on purpose") && f.text.contains("ReadOnlyMany")));
    // A pod mounting the claim readOnly: intent too.
    let mut n2 = names.clone();
    n2.access_modes
        .insert("pvc-a634b9a3".into(), vec!["ReadWriteOnce".into()]);
    n2.read_only_claims
        .insert(("media".into(), "library".into()));
    assert_eq!(evaluate_named(&d, &default_t(), &n2).status, Status::Ok);
    // ReadWriteOnce and nobody asked for read-only: a failure.
    n2.read_only_claims.clear();
    let r = evaluate_named(&d, &default_t(), &n2);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0].text.contains("it is meant to be written"),
        "{:?}",
        r.findings[0]
    );
    // XFS never remounts read-only on an error: same rule, its own words.
    let mut t = String::new();
    t += &line(
        30,
        "8:96",
        &format!("{K}/pods/u2/volumes/kubernetes.io~csi/pvc-x/mount"),
        "rw",
        "xfs",
        "/dev/sdg",
        "ro,attr2",
    );
    let r = evaluate(&data(&t, (6, 18, 0)), &default_t());
    assert_eq!(r.status, Status::Warning);
    assert!(r.findings[0]
        .text
        .contains("xfs does not remount read-only on errors"));
}

/// Issue 31: a filesystem read-only everywhere with no error is read-only on purpose only when
/// the API says so (ReadOnlyMany, or a pod mounts the claim `readOnly: true`); a ReadWrite*
/// claim no pod mounts `readOnly` is CRITICAL (its pods cannot write); unknown is WARNING.
#[test]
fn super_ro_everywhere_is_judged_by_the_access_modes() {
    let mut t = String::new();
    t += &line(
        20,
        "8:80",
        &format!("{K}/pods/u1/volumes/kubernetes.io~csi/pvc-rox/mount"),
        "ro",
        "ext4",
        "/dev/sdf",
        "ro",
    );
    let mut d = data(&t, (6, 18, 0));
    // Unknown intent (no names): WARNING, and its names are wanted.
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Warning, "{r:?}");
    assert_eq!(
        r.summary,
        "1 of 1 PV filesystem read-only at the filesystem with no error recorded (intent unknown): pvc-rox"
    );
    assert_eq!(r.findings[0].signal, "ro_everywhere");
    assert!(r.findings[0].text.contains("read-only everywhere"), "{r:?}");
    assert!(wanted(&d).pvs.contains("pvc-rox"));
    let names = |modes: &[&str], ro_claim: bool| {
        let mut n = Names::default();
        n.claims
            .insert("pvc-rox".into(), ("media".into(), "library".into()));
        n.access_modes.insert(
            "pvc-rox".into(),
            modes.iter().map(|m| m.to_string()).collect(),
        );
        if ro_claim {
            n.read_only_claims
                .insert(("media".into(), "library".into()));
        }
        n
    };
    for modes in [
        &["ReadWriteOnce"][..],
        &["ReadWriteMany"],
        &["ReadWriteOncePod"],
    ] {
        let r = evaluate_named(&d, &default_t(), &names(modes, false));
        assert_eq!(r.status, Status::Critical, "{modes:?}: {r:?}");
        assert_eq!(r.findings[0].signal, "ro_everywhere");
        assert!(
            r.findings[0].text.contains("its pods cannot write"),
            "{r:?}"
        );
        assert!(
            r.summary.starts_with("1 of 1 PV filesystem read-only: "),
            "{}",
            r.summary
        );
        assert!(r.findings[0].next_line().is_some());
        // The same claim mounted readOnly: true is intent.
        let r = evaluate_named(&d, &default_t(), &names(modes, true));
        assert_eq!(r.status, Status::Ok, "{modes:?}: {r:?}");
    }
    let r = evaluate_named(&d, &default_t(), &names(&["ReadOnlyMany"], false));
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(r.findings[0].signal, "ro_by_design");
    // Not counted writable.
    assert_eq!(r.summary, "1 PV filesystem read-only on purpose");
    // Recorded errors make it the kernel's doing, whatever the API says.
    vol(&mut d, "pvc-rox").ext4_errors = Some(fsstate::Ext4Errors {
        count: 2,
        first_error_time: Some(1783938484),
        last_error_time: Some(1783938484),
    });
    let r = evaluate_named(&d, &default_t(), &names(&["ReadOnlyMany"], false));
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0].text.contains("first at 2026-07-13T10:28:04Z"),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn one_volume_is_one_pv_filesystem() {
    let mut t = String::new();
    t += &line(
        12,
        "8:48",
        &format!("{K}/pods/77aa/volumes/kubernetes.io~csi/pvc-healthy/mount"),
        "rw,relatime",
        "ext4",
        "/dev/sdd",
        "rw",
    );
    assert_eq!(
        evaluate(&data(&t, (6, 18, 0)), &default_t()).summary,
        "1 PV filesystem writable"
    );
}

#[test]
fn recorded_errors_on_a_writable_fs_warn() {
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-healthy").ext4_errors = Some(fsstate::Ext4Errors {
        count: 1,
        first_error_time: Some(1783938484),
        last_error_time: None,
    });
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Warning);
    assert_eq!(
        r.summary,
        "1 of 3 PV filesystems has recorded errors: pvc-healthy"
    );
    assert!(r
        .perfdata
        .iter()
        .any(|p| p.render() == "error_volumes=1;;;0"));
}

#[test]
fn recorded_errors_on_6_12_to_6_14_are_presumed_read_only() {
    for k in [(6, 12, 0), (6, 13, 5), (6, 14, 2)] {
        let mut d = data(&table("rw"), k);
        vol(&mut d, "pvc-healthy").ext4_errors = Some(fsstate::Ext4Errors {
            count: 1,
            first_error_time: None,
            last_error_time: None,
        });
        let r = evaluate(&d, &default_t());
        assert_eq!(r.status, Status::Critical, "{k:?}");
        assert!(r.findings[0].text.contains("presumed read-only"));
    }
}

#[test]
fn zero_error_count_is_no_error() {
    let mut d = data(&table("rw"), (6, 13, 0));
    vol(&mut d, "pvc-healthy").ext4_errors = Some(fsstate::Ext4Errors::default());
    assert_eq!(evaluate(&d, &default_t()).status, Status::Ok);
}

#[test]
fn xfs_shutdown_shows_as_eio_on_stat() {
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-readonly").probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Stat,
        errno: node::probe::Errno::EIO,
    });
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0].text.contains("XFS shut down"),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn hung_mount_is_critical_and_vanished_mount_is_ignored() {
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-healthy").probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    vol(&mut d, "pvc-readonly").probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Stat,
        errno: node::probe::Errno::ENOENT,
    });
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.summary, "1 of 3 PV filesystems read-only: pvc-healthy");
    assert!(r.findings[0].text.contains("no answer in 3s"));
}

#[test]
fn thresholds_override_the_default() {
    let d = data(&table("rw,emergency_ro"), (6, 18, 0));
    let t = Thresholds::new(
        Some(Range::parse("0").unwrap()),
        Some(Range::parse("2").unwrap()),
    );
    assert_eq!(evaluate(&d, &t).status, Status::Warning);
    let t = Thresholds::new(None, Some(Range::parse("5").unwrap()));
    assert_eq!(evaluate(&d, &t).status, Status::Ok);
}

#[test]
fn no_pv_mounts() {
    let d = data(
        &line(1, "8:0", "/", "rw", "ext4", "/dev/sda1", "rw"),
        (6, 18, 0),
    );
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Ok);
    assert_eq!(r.summary, "no PV mounts on this node");
}

#[test]
fn include_and_exclude_filter_mount_points() {
    let m = usage(&table("rw,emergency_ro"));
    let ex = regex_lite::Regex::new("pvc-a634").unwrap();
    let v = group(
        &m,
        &node::FilterArgs {
            exclude: vec![ex],
            ..Default::default()
        },
    );
    // the staging mount of pvc-a634 has no PV name in its path: it stays as its own volume
    assert!(v.iter().all(|v| !v.names.contains("pvc-a634b9a3")));
    let inc = regex_lite::Regex::new("pvc-healthy").unwrap();
    let v = group(
        &m,
        &node::FilterArgs {
            include: vec![inc],
            ..Default::default()
        },
    );
    assert_eq!(v.len(), 1);
}

#[test]
fn block_mode_volume_with_ro_device_is_critical() {
    let t = line(
        30,
        "0:5",
        &format!("{K}/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-blk/u9"),
        "rw",
        "devtmpfs",
        "udev",
        "rw,size=1k",
    )
    .replace(" / ", " /sdg ");
    let mut d = data(&t, (6, 18, 0));
    assert_eq!(d.volumes[0].block_dev.as_deref(), Some("sdg"));
    assert_eq!(evaluate(&d, &default_t()).status, Status::Ok);
    d.volumes[0].block_ro = Some(true);
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    assert!(r.findings[0].text.contains("block device sdg"));
}

#[test]
fn names_are_wanted_only_for_non_ok_volumes() {
    // Healthy node: nothing to name, so no lookup at all.
    assert!(wanted(&data(&table("rw"), (6, 18, 0))).is_empty());
    let w = wanted(&data(&table("rw,emergency_ro"), (6, 15, 0)));
    assert_eq!(w.pvs.iter().collect::<Vec<_>>(), ["pvc-a634b9a3"]);
    assert_eq!(w.pod_uids.iter().collect::<Vec<_>>(), ["8e1f"]);
}

#[test]
fn findings_name_pod_and_claim_and_keep_notes() {
    let d = data(&table("rw,emergency_ro"), (6, 15, 0));
    let mut names = Names::default();
    names.claims.insert(
        "pvc-a634b9a3".into(),
        ("media".into(), "radarr-config".into()),
    );
    names.pods.insert(
        "8e1f".into(),
        kube::checks::names::PodName {
            namespace: "media".into(),
            name: "radarr-0".into(),
            node: None,
        },
    );
    names.notes.push("a note from the resolver".into());
    let r = evaluate_named(&d, &default_t(), &names);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        r.summary,
        "1 of 3 PV filesystems read-only: media/radarr-0 (PVC media/radarr-config, pvc-a634b9a3)"
    );
    assert!(
        r.findings[0]
            .text
            .starts_with("media/radarr-0 (PVC media/radarr-config, pvc-a634b9a3) is read-only: "),
        "{:?}",
        r.findings[0]
    );
    assert!(r.findings[0]
        .details
        .iter()
        .any(|d| d == "pods: media/radarr-0 (UID 8e1f)"));
    assert_eq!(r.notes, ["a note from the resolver"]);
    // A failed lookup leaves the alarm as it was, with its note.
    let mut failed = Names::default();
    failed
        .notes
        .push("names not resolved: cannot connect".into());
    let r = evaluate_named(&d, &default_t(), &failed);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.summary, "1 of 3 PV filesystems read-only: pvc-a634b9a3");
    assert_eq!(r.notes, ["names not resolved: cannot connect"]);
}

#[test]
fn eacces_is_a_broken_mount_only_when_we_could_read_anything() {
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-healthy").probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Open,
        errno: node::probe::Errno::EACCES,
    });
    assert_eq!(evaluate(&d, &default_t()).status, Status::Critical);
    d.can_read_all = false;
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary
            .starts_with("1 of 3 PV mount points could not be probed: permission denied"),
        "{}",
        r.summary
    );
    assert!(
        r.notes[0].contains("permission denied (grant CAP_DAC_READ_SEARCH"),
        "{:?}",
        r.notes
    );
}

#[test]
fn every_verdict_has_its_signal_and_the_volume_its_subject() {
    let sig = |d: &NodeData, pv: &str| {
        let r = evaluate(d, &default_t());
        let f = r
            .findings
            .iter()
            .find(|f| f.subject.pv.as_deref() == Some(pv))
            .unwrap_or_else(|| panic!("no finding with pv {pv}: {:?}", r.findings));
        (f.signal, f.subject.clone())
    };
    let d = data(&table("rw,emergency_ro"), (6, 15, 0));
    let (s, subj) = sig(&d, "pvc-a634b9a3");
    assert_eq!(s, "emergency_ro");
    // No pod lookup here: the node is this host's name (a label that must not come and go).
    assert_eq!(
        subj,
        plugin::Subject::new()
            .node("k8s03")
            .pv("pvc-a634b9a3")
            .device("sdc")
            .mount(format!(
                "{K}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/abc/globalmount"
            ))
    );
    assert_eq!(sig(&d, "pvc-healthy").0, "writable");
    assert_eq!(sig(&d, "pvc-readonly").0, "ro_by_design");
    // The kernel's remount records an ext4 error; without one it is not the kernel's doing (#21).
    let mut d = data(&table("ro"), (5, 4, 0));
    assert_eq!(sig(&d, "pvc-a634b9a3").0, "ro_no_error");
    vol(&mut d, "pvc-a634b9a3").ext4_errors = Some(fsstate::Ext4Errors {
        count: 1,
        first_error_time: None,
        last_error_time: None,
    });
    assert_eq!(sig(&d, "pvc-a634b9a3").0, "remounted_ro");
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-healthy").probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    vol(&mut d, "pvc-readonly").probe = Some(Outcome::Failed {
        stage: node::probe::Stage::Stat,
        errno: node::probe::Errno::EIO,
    });
    assert_eq!(sig(&d, "pvc-healthy").0, "mount_hung");
    assert_eq!(sig(&d, "pvc-readonly").0, "mount_io_error");
    let mut d = data(&table("rw"), (6, 13, 0));
    vol(&mut d, "pvc-healthy").ext4_errors = Some(fsstate::Ext4Errors {
        count: 1,
        first_error_time: None,
        last_error_time: None,
    });
    assert_eq!(sig(&d, "pvc-healthy").0, "presumed_ro");
    let mut d = data(&table("rw"), (6, 18, 0));
    vol(&mut d, "pvc-healthy").ext4_errors = Some(fsstate::Ext4Errors {
        count: 1,
        first_error_time: None,
        last_error_time: None,
    });
    assert_eq!(sig(&d, "pvc-healthy").0, "fs_errors");
}

/// Issue 26: the node to cordon is the pods' node as the API knows it (`spec.nodeName`), not
/// this host's name (`vm`, or an FQDN `k8s02.home.lan` the node is not registered as); the step
/// names the pod to delete and the uncordon that ends the cordon.
#[test]
fn next_step_cordons_the_pods_node_not_the_host_name() {
    let mut d = data(&table("rw,emergency_ro"), (6, 15, 0));
    d.node_name = Some("k8s02.home.lan".into());
    let mut names = Names::default();
    names.pods.insert(
        "8e1f".into(),
        kube::checks::names::PodName {
            namespace: "media".into(),
            name: "radarr-0".into(),
            node: Some("k8s02".into()),
        },
    );
    let r = evaluate_named(&d, &default_t(), &names);
    let next = r.findings[0].next_line().unwrap();
    assert!(
        next.starts_with(
            "on k8s02: `kubectl cordon k8s02` first, then `kubectl delete pod -n media radarr-0` so it remounts elsewhere;"
        ),
        "{next}"
    );
    assert!(next.contains("once its storage works again: `kubectl uncordon k8s02`"));
    assert!(!next.contains("home.lan"), "{next}");
    // Without the pods' node: this node's name (--node, $NODE_NAME, the host's), as given.
    let r = evaluate_named(&d, &default_t(), &Names::default());
    let next = r.findings[0].next_line().unwrap();
    assert!(
        next.starts_with("on k8s02.home.lan: `kubectl cordon k8s02.home.lan` first"),
        "{next}"
    );
    for c in plugin::next::commands(&next) {
        assert!(plugin::next::is_pasteable(c), "{c}");
    }
}

/// With a memory (--state-dir), a read-only PV's finding says how often it was read-only in 30
/// days; the memory's notes are the report's; the PVs recorded are the read-only ones only.
#[test]
fn a_flapping_volume_says_how_often_it_was_read_only() {
    use node::history::{Kind, Memory, Remembered};
    let mut d = data(&table("rw,emergency_ro"), (6, 15, 0));
    let ro = read_only_pvs(&d, &Names::default());
    assert_eq!(ro, ["pvc-a634b9a3"]);
    let day = 86_400_000;
    let t0 = 20_773 * day; // 2026-11-16
    let mut m = Memory::default();
    let seen = [("pvc-a634b9a3".to_string(), Kind::ReadOnly)];
    m.record(t0, &seen);
    m.record(t0 + 1, &[]);
    m.record(t0 + 4 * day, &seen);
    m.record(t0 + 4 * day + 1, &[]);
    let now = t0 + 10 * day;
    m.record(now, &seen);
    d.memory = Some(Remembered {
        memory: m.clone(),
        now,
        notes: vec!["state file x: 1 invalid entry dropped".into()],
        kept: true,
    });
    let r = evaluate(&d, &default_t());
    assert_eq!(r.status, Status::Critical);
    let f = &r.findings[0];
    assert!(
        f.text
            .ends_with("; read-only 3 times in 30 days (last 2026-11-20)"),
        "{}",
        f.text
    );
    assert!(
        r.notes.iter().any(|n| n.contains("1 invalid entry")),
        "{:?}",
        r.notes
    );
    // A first spell says nothing more.
    let mut first = Memory::default();
    first.record(now, &seen);
    d.memory = Some(Remembered {
        memory: first,
        now,
        ..Default::default()
    });
    let r = evaluate(&d, &default_t());
    assert!(
        !r.findings[0].text.contains("times in"),
        "{}",
        r.findings[0].text
    );
    // A healthy node records nothing.
    let healthy = data(&table("rw"), (6, 18, 0));
    assert!(read_only_pvs(&healthy, &Names::default()).is_empty());
}

/// Issue 34: without `-v` (or JSON) the OK volumes get no finding, and nothing else changes: the
/// status, summary, perfdata, notes and every non-OK finding are those of the full report.
#[test]
fn ok_findings_are_built_only_when_shown() {
    let mut t = table("rw");
    t += &line(
        20,
        "8:80",
        &format!("{K}/pods/u1/volumes/kubernetes.io~csi/pvc-rox/mount"),
        "ro",
        "ext4",
        "/dev/sdf",
        "ro",
    );
    let mut names = Names::default();
    names
        .claims
        .insert("pvc-rox".into(), ("media".into(), "library".into()));
    names
        .access_modes
        .insert("pvc-rox".into(), vec!["ReadOnlyMany".to_string()]);
    let rox = data(&t, (6, 18, 0))
        .volumes
        .into_iter()
        .find(|v| v.names.contains("pvc-rox"))
        .unwrap();
    for (radarr, names, want) in [
        ("rw", Names::default(), Status::Warning),
        ("rw", names.clone(), Status::Ok),
        ("rw,emergency_ro", names, Status::Critical),
    ] {
        let mut d = data(&table(radarr), (6, 18, 0));
        d.volumes.push(rox.clone());
        let full = evaluate_named(&d, &default_t(), &names);
        let shown = evaluate_shown(&d, &default_t(), &names, false);
        let bad: Vec<_> = full
            .findings
            .iter()
            .filter(|f| f.status != Status::Ok)
            .collect();
        assert_eq!(shown.findings.iter().collect::<Vec<_>>(), bad);
        assert_eq!(
            (shown.status, &shown.summary, &shown.perfdata, &shown.notes),
            (full.status, &full.summary, &full.perfdata, &full.notes)
        );
        assert_eq!(full.status, want, "{full:?}");
        assert!(full.findings.len() > shown.findings.len());
        assert_eq!(evaluate_shown(&d, &default_t(), &names, true), full);
    }
}
