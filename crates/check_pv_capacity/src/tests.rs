use super::*;
use crate::history::Sample;
use kube::checks::names::Names;
use node::probe::{Outcome, Space};
use node::usage::{DeviceUsage, Scope};
use plugin::Status;
use std::path::PathBuf;
use std::time::Duration;

const K: &str = "/var/lib/kubelet";
const G: u64 = 1 << 30;

fn line(id: u32, dev: &str, mp: &str, mopts: &str, src: &str, sopts: &str) -> String {
    format!("{id} 29 {dev} / {mp} {mopts} shared:1 - ext4 {src} {sopts}\n")
}

/// Three PVs: one staged and published, one published only, one ReadOnlyMany (ro everywhere).
fn table() -> String {
    let mut t = String::new();
    t += &line(1, "8:0", "/", "rw", "/dev/sda1", "rw");
    t += &line(
        10,
        "8:32",
        &format!("{K}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/abc/globalmount"),
        "rw",
        "/dev/sdc",
        "rw",
    );
    t += &line(
        11,
        "8:32",
        &format!("{K}/pods/8e1f/volumes/kubernetes.io~csi/pvc-data/mount"),
        "rw",
        "/dev/sdc",
        "rw",
    );
    t += &line(
        12,
        "8:48",
        &format!("{K}/pods/77aa/volumes/kubernetes.io~csi/pvc-logs/mount"),
        "rw",
        "/dev/sdd",
        "rw",
    );
    t += &line(
        13,
        "8:64",
        &format!("{K}/pods/5b5b/volumes/kubernetes.io~csi/pvc-rox/mount"),
        "ro",
        "/dev/sde",
        "ro",
    );
    t += &line(
        14,
        "0:60",
        &format!("{K}/pods/77aa/volumes/kubernetes.io~projected/kube-api-access"),
        "rw",
        "tmpfs",
        "rw",
    );
    t
}

fn space(total: u64, used: u64, files: u64, ifree: u64) -> Space {
    Space {
        total,
        free: total - used,
        avail: total - used,
        files,
        files_free: ifree,
    }
}

fn data() -> NodeData {
    let u = DeviceUsage::parse(&table(), "t", &[PathBuf::from(K)], Scope::Volumes).unwrap();
    let mut volumes = group(&u, &node::FilterArgs::default());
    for v in &mut volumes {
        v.probe = Some(Outcome::Answered { is_dir: true });
        v.space = Some(space(10 * G, 5 * G, 1000, 900));
    }
    NodeData {
        volumes,
        node_name: Some("k8s03".into()),
        now_ms: 100 * 3_600_000,
        history_kept: true,
        notes: vec![],
    }
}

fn vol<'a>(d: &'a mut NodeData, pv: &str) -> &'a mut Volume {
    d.volumes.iter_mut().find(|v| v.names.contains(pv)).unwrap()
}

fn find<'a>(r: &'a plugin::Report, pv: &str) -> &'a plugin::Finding {
    r.findings
        .iter()
        .find(|f| f.subject.pv.as_deref() == Some(pv))
        .unwrap()
}

#[test]
fn groups_pv_filesystems_and_knows_read_only_by_design() {
    let d = data();
    assert_eq!(d.volumes.len(), 3);
    let v = &d.volumes[0];
    assert_eq!(v.key(), "pvc-data");
    assert!(v.mounts[0].ends_with("globalmount"), "{:?}", v.mounts);
    assert!(!v.read_only);
    assert!(d.volumes[2].read_only);
}

#[test]
fn healthy_is_ok_with_bounded_perfdata() {
    let mut p = Policy::default();
    let r = evaluate(&data(), &p);
    assert_eq!(r.status, Status::Ok, "{r:?}");
    assert_eq!(
        r.summary,
        "3 PV filesystems with room; the fullest: pvc-data at 50% used"
    );
    let perf: Vec<String> = r.perfdata.iter().map(|x| x.render()).collect();
    assert_eq!(perf[0], "pv_filesystems=3;;;0");
    assert!(
        perf.contains(&"pvc_data_used=50%;85;97;0;100".to_string()),
        "{perf:?}"
    );
    // Read-only by design: measured, no thresholds.
    assert!(
        perf.contains(&"pvc_rox_used=50%;;;0;100".to_string()),
        "{perf:?}"
    );
    p.perf_volumes = 1;
    assert_eq!(evaluate(&data(), &p).perfdata.len(), 6);
}

#[test]
fn percent_and_absolute_thresholds_for_bytes_and_inodes() {
    let p = Policy::default();
    let mut d = data();
    vol(&mut d, "pvc-data").space = Some(space(10 * G, 9 * G, 1000, 900)); // 10% free
    vol(&mut d, "pvc-logs").space = Some(space(10 * G, 5 * G, 1000, 20)); // 2% inodes free
    let r = evaluate(&d, &p);
    assert_eq!(r.status, Status::Critical);
    let f = find(&r, "pvc-data");
    assert_eq!((f.status, f.signal), (Status::Warning, "pv_space_low"));
    assert!(
        f.text.contains("90% used (9 GiB of 10 GiB, 1 GiB free)"),
        "{}",
        f.text
    );
    assert!(f.text.contains("free space under -w 15%"), "{}", f.text);
    assert!(
        f.next_line()
            .is_some_and(|l| l.starts_with("on node k8s03, find what grows: `du -xh -d1 ")),
        "{f:?}"
    );
    let f = find(&r, "pvc-logs");
    assert_eq!((f.status, f.signal), (Status::Critical, "pv_inodes_low"));
    assert!(f.text.contains("free inodes under -K 3%"), "{}", f.text);
    assert!(
        f.next_line()
            .is_some_and(|l| l.contains("du -x --inodes -d1")),
        "{f:?}"
    );
    assert_eq!(
        r.summary,
        "2 of 3 PV filesystems filling up or unmeasured: pvc-logs (inodes low), pvc-data (90% used)"
    );
    // Absolute: 2 GiB free wanted, 1 GiB left.
    let p2 = Policy {
        warning: limit::bytes("2G").unwrap(),
        critical: limit::bytes("512M").unwrap(),
        icritical: limit::inodes("10").unwrap(),
        ..Policy::default()
    };
    let r = evaluate(&d, &p2);
    assert_eq!(find(&r, "pvc-data").status, Status::Warning);
    assert!(find(&r, "pvc-data").text.contains("under -w 2 GiB"));
    // 20 inodes free is over a count of 10, under 15%: WARNING.
    assert_eq!(find(&r, "pvc-logs").status, Status::Warning);
    // Read-only by design is never full.
    vol(&mut d, "pvc-rox").space = Some(space(10 * G, 10 * G, 1000, 0));
    let r = evaluate(&d, &p);
    let f = find(&r, "pvc-rox");
    assert_eq!((f.status, f.signal), (Status::Ok, "pv_read_only"));
    assert!(f.text.contains("read-only by design"), "{}", f.text);
}

#[test]
fn a_steady_fill_warns_before_the_thresholds() {
    let p = Policy::default();
    let mut d = data();
    let now = d.now_ms;
    // 1 GiB an hour over 3 hours, 4 GiB left: full in 4 hours.
    let h = 3_600_000;
    let v = vol(&mut d, "pvc-data");
    v.space = Some(space(10 * G, 6 * G, 1000, 900));
    v.history = (0..4)
        .map(|i| Sample {
            t: now - (3 - i) * h,
            total: 10 * G,
            used: (3 + i as u64) * G,
            avail: (7 - i as u64) * G,
            iused: 100,
            ifree: 900,
        })
        .collect();
    let r = evaluate(&d, &p);
    let f = find(&r, "pvc-data");
    assert_eq!(
        (f.status, f.signal),
        (Status::Warning, "pv_filling_up"),
        "{f:?}"
    );
    assert!(f.text.contains("space full in 4h at 24 GiB/day (a line through 4 samples over 3h), within --predict-within 4d"), "{}", f.text);
    assert_eq!(r.perfdata[3].render(), "filling_up=1;;;0");
    // Prediction off, or too short a history: no warning.
    let off = Policy {
        predict_within: Duration::ZERO,
        ..Policy::default()
    };
    assert_eq!(find(&evaluate(&d, &off), "pvc-data").status, Status::Ok);
    let long = Policy {
        predict_window: Duration::from_secs(48 * 3600),
        ..Policy::default()
    };
    assert_eq!(find(&evaluate(&d, &long), "pvc-data").status, Status::Ok);
    // A slower fill: full in more than 4 days.
    let slow = Policy {
        predict_within: Duration::from_secs(3600),
        ..Policy::default()
    };
    let f2 = evaluate(&d, &slow);
    assert_eq!(find(&f2, "pvc-data").status, Status::Ok);
    assert!(find(&f2, "pvc-data").text.contains("space full in 4h"));
}

#[test]
fn unmeasured_volumes_are_unknown_not_ok() {
    let mut d = data();
    vol(&mut d, "pvc-logs").probe = Some(Outcome::Hung {
        after: Duration::from_secs(3),
    });
    vol(&mut d, "pvc-logs").space = None;
    let r = evaluate(&d, &Policy::default());
    assert_eq!(r.status, Status::Unknown);
    let f = find(&r, "pvc-logs");
    assert_eq!(f.signal, "pv_unmeasured");
    assert!(f.text.contains("no answer in 3s"), "{}", f.text);
}

#[test]
fn names_and_the_claim_patch() {
    let mut d = data();
    vol(&mut d, "pvc-data").space = Some(space(10 * G, 10 * G - 1, 1000, 900));
    let w = wanted(&d, &Policy::default());
    assert_eq!(w.pvs.iter().collect::<Vec<_>>(), ["pvc-data"]);
    let mut names = Names::default();
    names
        .claims
        .insert("pvc-data".into(), ("media".into(), "radarr-config".into()));
    let r = evaluate_named(&d, &Policy::default(), &names);
    let f = find(&r, "pvc-data");
    assert_eq!(f.subject.pvc.as_deref(), Some("radarr-config"));
    assert_eq!(f.subject.node.as_deref(), Some("k8s03"));
    assert!(
        f.text.starts_with("PVC media/radarr-config (pvc-data) "),
        "{}",
        f.text
    );
    let next = f.next_line().unwrap();
    assert!(next.contains(r#"`kubectl -n media patch pvc radarr-config -p '{"spec":{"resources":{"requests":{"storage":"20Gi"}}}}'`"#), "{next}");
    assert!(next.contains("docs/runbooks/pv_space_low.md"), "{next}");
    assert!(!next.contains('|'));
}

#[test]
fn no_pv_mounts_is_said() {
    let d = NodeData::default();
    let r = evaluate(&d, &Policy::default());
    assert_eq!(
        (r.status, r.summary.as_str()),
        (Status::Ok, "no PV mounts on this node")
    );
}
