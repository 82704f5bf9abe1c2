//! evaluate() on in-memory records and holdings; gather() and the device mapping on files.

use super::*;
use crate::classify::{Category, Device};
use crate::gather::CHECK_ID;
use kube::checks::names::Names;
use node::logs::state;
use node::usage::{DeviceUsage, Scope};
use node::Host;
use plugin::Status;
use std::path::Path;
use std::time::Instant;

const MIN: i64 = 60_000;

/// The policy of `--window` alone (no -w/-c).
fn window(window_ms: i64) -> Policy {
    Policy {
        window_ms,
        ..Default::default()
    }
}

fn ev(seq: u64, t: i64, text: &str) -> Event {
    let (c, d) = classify::classify(text).unwrap();
    Event {
        seq,
        t,
        category: c.label().into(),
        device: d,
        text: text.into(),
    }
}

fn data(events: Vec<Event>) -> Data {
    Data {
        events,
        records: 100,
        complete: true,
        ..Default::default()
    }
}

#[test]
fn quiet_log_is_ok_with_every_counter() {
    let r = evaluate(&data(vec![]), &window(15 * MIN), 100 * MIN);
    assert_eq!(r.status, Status::Ok);
    assert!(r
        .summary
        .contains("no storage errors in the last 15m (100 records read)"));
    // Count nouns (issue 26): one record is "1 record".
    let one = Data {
        records: 1,
        ..data(vec![])
    };
    let r1 = evaluate(&one, &window(15 * MIN), 100 * MIN);
    assert!(
        r1.summary
            .contains("no storage errors in the last 15m (1 record read)"),
        "{}",
        r1.summary
    );
    // One counter per category (a recovery record is not one), the records read, and the
    // headline count -w/-c apply to.
    let counters = Category::ALL.iter().filter(|c| !c.is_recovery()).count();
    assert_eq!(counters, Category::ALL.len() - 1);
    assert_eq!(r.perfdata.len(), counters + 2);
    assert_eq!(r.perfdata[counters].label, "records");
    assert!(!r.perfdata.iter().any(|p| p.label == "nfs_recovered"));
    assert_eq!(r.perfdata.last().unwrap().label, "storage_errors");
    assert_eq!(r.perfdata.last().unwrap().value, 0.0);
}

#[test]
fn incident_sequence_is_critical_and_mapped_to_the_pv() {
    let now = 100 * MIN;
    let mut d = data(vec![
        ev(
            1,
            now - 5 * MIN,
            " connection3:0: detected conn error (1020)",
        ),
        ev(
            2,
            now - 3 * MIN,
            " session3: session recovery timed out after 120 secs",
        ),
        ev(
            3,
            now - 3 * MIN,
            "sd 3:0:0:0: rejecting I/O to offline device",
        ),
        ev(4, now - 3 * MIN, "Aborting journal on device sde-8."),
        ev(
            5,
            now - 3 * MIN,
            "EXT4-fs (sde): Remounting filesystem read-only",
        ),
    ]);
    let h = Holding {
        below: vec![],
        disks: vec!["sde".into()],
        mounts: vec![(
            PathBuf::from("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-746b2837/mount"),
            Some("pvc-746b2837".into()),
        )],
    };
    d.holdings.insert(Device::Block("sde".into()), h.clone());
    d.holdings.insert(Device::IscsiSession(3), h);
    let r = evaluate(&d, &window(15 * MIN), now);
    assert_eq!(r.status, Status::Critical);
    assert!(r.summary.contains("sde → pvc-746b2837"), "{}", r.summary);
    let p = |l: &str| r.perfdata.iter().find(|p| p.label == l).unwrap().value;
    assert_eq!(p("iscsi_conn_error"), 1.0);
    assert_eq!(p("remount_ro"), 1.0);
    assert_eq!(p("scsi_offline"), 1.0);
    assert_eq!(p("io_error"), 0.0);
    assert!(r.findings.iter().any(|f| f
        .details
        .iter()
        .any(|d| d.contains("mounted at /var/lib/kubelet/pods/u"))));
}

#[test]
fn volumes_hit_are_named_and_wanted() {
    let now = 100 * MIN;
    let mut d = data(vec![
        ev(
            1,
            now - 3 * MIN,
            "EXT4-fs (sde): Remounting filesystem read-only",
        ),
        // Outside the window: its volume is not looked up.
        ev(
            2,
            now - 30 * MIN,
            "EXT4-fs (sdf): Remounting filesystem read-only",
        ),
    ]);
    let mp = |uid: &str, pv: &str| {
        PathBuf::from(format!(
            "/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/{pv}/mount"
        ))
    };
    d.holdings.insert(
        Device::Block("sde".into()),
        Holding {
            below: vec![],
            disks: vec!["sde".into()],
            mounts: vec![(mp("3c2b", "pvc-746b2837"), Some("pvc-746b2837".into()))],
        },
    );
    d.holdings.insert(
        Device::Block("sdf".into()),
        Holding {
            below: vec![],
            disks: vec!["sdf".into()],
            mounts: vec![(mp("9999", "pvc-old"), Some("pvc-old".into()))],
        },
    );
    let w = wanted(&d, 15 * MIN, now);
    assert_eq!(w.pvs.iter().collect::<Vec<_>>(), ["pvc-746b2837"]);
    assert_eq!(w.pod_uids.iter().collect::<Vec<_>>(), ["3c2b"]);
    let mut names = Names::default();
    names.claims.insert(
        "pvc-746b2837".into(),
        ("media".into(), "config-seerr-0".into()),
    );
    names.pods.insert(
        "3c2b".into(),
        kube::checks::names::PodName {
            namespace: "media".into(),
            name: "seerr-0".into(),
            node: None,
        },
    );
    names.notes.push("resolver note".into());
    let r = evaluate_named(&d, &window(15 * MIN), now, &names);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary
            .contains("sde → media/seerr-0 (PVC media/config-seerr-0, pvc-746b2837)"),
        "{}",
        r.summary
    );
    assert_eq!(r.notes.last().map(String::as_str), Some("resolver note"));
    // Without names: as before.
    let r = evaluate(&d, &window(15 * MIN), now);
    assert!(r.summary.contains("sde → pvc-746b2837"), "{}", r.summary);
    assert_eq!(
        node::kubelet::pod_uid_in(Path::new("/k/pods/u1/volumeDevices/kubernetes.io~csi/pv")),
        Some("u1".into())
    );
    assert_eq!(
        node::kubelet::pod_uid_in(Path::new("/k/plugins/x/globalmount")),
        None
    );
}

#[test]
fn io_and_connection_errors_warn() {
    let now = 100 * MIN;
    let r = evaluate(
        &data(vec![ev(
            1,
            now - MIN,
            "I/O error, dev sdc, sector 8 op 0x1:(WRITE) flags 0x0",
        )]),
        &window(15 * MIN),
        now,
    );
    assert_eq!(r.status, Status::Warning);
    assert!(r.summary.contains("I/O error on sdc"));
}

#[test]
fn window_and_duplicates() {
    let now = 100 * MIN;
    let old = ev(
        1,
        now - 20 * MIN,
        "EXT4-fs (sdc): Remounting filesystem read-only",
    );
    assert_eq!(
        evaluate(&data(vec![old.clone()]), &window(15 * MIN), now).status,
        Status::Ok
    );
    // Window 0 = everything.
    assert_eq!(
        evaluate(&data(vec![old.clone()]), &window(0), now).status,
        Status::Critical
    );
    // The same record twice (state + re-read) counts once.
    let e = ev(2, now - MIN, "I/O error, dev sdc, sector 8");
    let r = evaluate(&data(vec![e.clone(), e]), &window(15 * MIN), now);
    assert_eq!(
        r.perfdata
            .iter()
            .find(|p| p.label == "io_error")
            .unwrap()
            .value,
        1.0
    );
}

#[test]
fn incomplete_quiet_read_is_unknown() {
    let mut d = data(vec![]);
    d.complete = false;
    assert_eq!(
        evaluate(&d, &window(15 * MIN), 100 * MIN).status,
        Status::Unknown
    );
}

#[test]
fn resolve_partitions_and_names() {
    let dir = std::env::temp_dir().join(format!("kerr-sys-{}", std::process::id()));
    let sys = dir.join("sys");
    std::fs::create_dir_all(sys.join("class/block/sdc/sdc1")).unwrap();
    std::fs::write(sys.join("class/block/sdc/dev"), "8:32\n").unwrap();
    std::fs::write(sys.join("class/block/sdc/sdc1/partition"), "1\n").unwrap();
    std::fs::create_dir_all(sys.join("class/block/sdc1")).unwrap();
    std::fs::write(sys.join("class/block/sdc1/dev"), "8:33\n").unwrap();
    let mi = "30 1 8:33 / /var/lib/kubelet/plugins/kubernetes.io/csi/pv/pvc-x/globalmount rw - ext4 /dev/sdc1 rw\n\
              31 1 8:33 / /var/lib/kubelet/pods/u1/volumes/kubernetes.io~csi/pvc-x/mount rw - ext4 /dev/sdc1 rw\n\
              32 1 8:0 / / rw - ext4 /dev/sda1 rw\n";
    let roots = vec![PathBuf::from("/var/lib/kubelet")];
    let mounts = DeviceUsage::parse(mi, "test", &roots, Scope::All).unwrap();
    let h = resolve(&Device::Block("sdc".into()), &sys, &mounts, &Host::local());
    assert_eq!(h.mounts.len(), 2);
    assert!(h
        .mounts
        .iter()
        .all(|(_, pv)| pv.as_deref() == Some("pvc-x")));
    let h = resolve(&Device::Block("sdz".into()), &sys, &mounts, &Host::local());
    assert!(h.mounts.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_saved_position_past_the_newest_record_is_not_this_logs() {
    // Read to the end, newest record older than the position: a foreign or corrupted state.
    assert!(position_beyond_log(4_000_000_000, Some(2), true));
    assert!(position_beyond_log(3, Some(2), true));
    assert!(position_beyond_log(3, None, true));
    // Nothing new since the last run: the newest record is the saved one.
    assert!(!position_beyond_log(2, Some(2), true));
    assert!(!position_beyond_log(2, Some(9), true));
    // Reading stopped at the deadline: the end was not seen, nothing can be said.
    assert!(!position_beyond_log(3, Some(2), false));
}

#[test]
fn kept_events_from_the_future_are_dropped() {
    let now = 100 * MIN;
    let mut evs = vec![
        ev(1, now - MIN, "Aborting journal on device sdc-8."),
        ev(2, now + MIN, "I/O error, dev sdc, sector 8"),
        ev(
            3,
            now + 24 * 60 * MIN,
            "EXT4-fs (sdz): Remounting filesystem read-only",
        ),
    ];
    assert_eq!(drop_future_events(&mut evs, now), 1);
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
}

/// The state of a run before: a position beyond the log's end, a record from tomorrow.
#[test]
fn gather_reads_afresh_past_a_foreign_position_and_rewrites_the_state() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("kerr-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let kmsg = dir.join("kmsg");
    std::fs::write(
        &kmsg,
        "6,1,1000,-;sd 3:0:0:0: [sdc] Attached SCSI disk\n3,2,2000,-;Aborting journal on device sdc-8.\n",
    )
    .unwrap();
    let opts = Opts::try_parse_from([
        "check_storage_kernel_errors",
        "--kmsg",
        kmsg.to_str().unwrap(),
        "--state-dir",
        dir.join("state").to_str().unwrap(),
        "--window",
        "0",
        "--mountinfo",
        "/nonexistent",
        "--sys",
        "/nonexistent",
    ])
    .unwrap();
    let sp = state::path(&dir.join("state"), CHECK_ID, &kmsg.display().to_string());
    let boot_id = Host::local().proc_sys("kernel/random/boot_id");
    let tomorrow = time::now_ms() + 24 * 60 * MIN;
    let mut ghost = ev(
        1,
        tomorrow,
        "EXT4-fs (sdz): Remounting filesystem read-only",
    );
    ghost.seq = 3_999_999_999;
    state::save(
        &sp,
        &KmsgState {
            boot_id: boot_id.clone(),
            last_seq: Some(4_000_000_000),
            events: vec![ghost],
            saved_ms: None,
        },
    )
    .unwrap();
    let gather_now = || {
        gather(
            &opts,
            &Ctx::for_test(Duration::from_secs(10)),
            Instant::now() + Duration::from_secs(5),
        )
        .unwrap()
    };
    let d = gather_now();
    assert_eq!(d.records, 2);
    assert_eq!(
        d.events.iter().map(|e| e.text.as_str()).collect::<Vec<_>>(),
        ["Aborting journal on device sdc-8."],
        "{d:?}"
    );
    if boot_id.is_some() {
        // The record from tomorrow tells a clock set back: the position is dropped with it
        // (the log read from its start), so the position past the log's end is not reached.
        assert!(d.notes.iter().any(|n| n.contains("the clock was set back")));
    }
    let saved: KmsgState = state::load(&sp).unwrap().unwrap();
    assert_eq!(saved.last_seq, Some(2));
    assert_eq!(saved.events.len(), 1);
    // The next run starts from the rewritten state: nothing new, the finding kept, no note.
    let d = gather_now();
    assert_eq!(d.events.len(), 1);
    assert!(
        !d.notes.iter().any(|n| n.contains("state")),
        "{:?}",
        d.notes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 27, finding 4: a kernel log that gave no record at all (an empty file, /dev/null, a pipe
/// that gave nothing) is UNKNOWN naming it, not OK "(0 records read)"; kept findings still count.
#[test]
fn finding4_a_kernel_log_that_gave_nothing_is_unknown() {
    let mut d = data(vec![]);
    d.records = 0;
    d.empty_source = Some("/dev/null".into());
    let r = evaluate(&d, &window(15 * MIN), 100 * MIN);
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.contains("/dev/null gave no kernel log record"),
        "{}",
        r.summary
    );
    d.events = vec![ev(1, 99 * MIN, "Aborting journal on device sdc-8.")];
    assert_eq!(
        evaluate(&d, &window(15 * MIN), 100 * MIN).status,
        Status::Critical
    );
}

/// `nfs: server X OK` clears that server's not-responding records before it (issue 31); a later
/// outage counts again; another server's records stay.
#[test]
fn nfs_recovery_clears_the_matching_server_within_the_window() {
    let now = 100 * MIN;
    let down = |seq, t, s: &str| {
        ev(
            seq,
            t,
            &format!("nfs: server {s} not responding, still trying"),
        )
    };
    let up = |seq, t, s: &str| ev(seq, t, &format!("nfs: server {s} OK"));
    let mut d = data(vec![
        down(1, now - 9 * MIN, "10.0.0.5"),
        ev(
            2,
            now - 9 * MIN,
            "nfs: server 10.0.0.5 not responding, timed out",
        ),
        up(3, now - 8 * MIN, "10.0.0.5"),
        down(4, now - 7 * MIN, "nas.lan"),
    ]);
    let nfs_pv = PathBuf::from("/var/lib/kubelet/pods/u1/volumes/kubernetes.io~nfs/pv-media");
    d.holdings.insert(
        Device::Nfs("nas.lan".into()),
        Holding {
            below: vec![],
            disks: vec![],
            mounts: vec![(nfs_pv.clone(), Some("pv-media".into()))],
        },
    );
    let r = evaluate(&d, &window(15 * MIN), now);
    assert_eq!(r.status, Status::Warning, "{r:?}");
    assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
    let f = &r.findings[0];
    assert_eq!(f.signal, "nfs_not_responding");
    assert!(
        f.text.contains("NFS server nas.lan → pv-media"),
        "{}",
        f.text
    );
    assert_eq!(f.subject.device.as_deref(), Some("nas.lan"));
    assert_eq!(f.subject.mount.as_deref(), nfs_pv.to_str());
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("NFS server 10.0.0.5: NFS server answering again at")),
        "{:?}",
        r.notes
    );
    let perf = |l: &str| r.perfdata.iter().find(|p| p.label == l).unwrap().value;
    assert_eq!(
        (
            perf("nfs_not_responding"),
            perf("nfs_timed_out"),
            perf("storage_errors")
        ),
        (1.0, 0.0, 1.0)
    );
    // The server going away again after its OK counts again (soft mount: CRITICAL).
    d.events.push(ev(
        5,
        now - MIN,
        "nfs: server 10.0.0.5 not responding, timed out",
    ));
    let r = evaluate(&d, &window(15 * MIN), now);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0]
            .text
            .starts_with("NFS server timed out (I/O failed) on NFS server 10.0.0.5"),
        "{}",
        r.findings[0].text
    );
    // An OK outside the window clears nothing: the outage is all the window shows.
    let d = data(vec![
        up(1, now - 30 * MIN, "nas.lan"),
        down(2, now - MIN, "nas.lan"),
    ]);
    assert_eq!(evaluate(&d, &window(15 * MIN), now).status, Status::Warning);
}

/// A disk whose capacity dropped to 0 while it still held a mount is CRITICAL; a disk detached
/// after its unmount is the category's WARNING.
#[test]
fn vanished_disk_is_critical_only_while_mounted() {
    let now = 100 * MIN;
    let mut d = data(vec![
        ev(
            1,
            now - MIN,
            "nvme1n1: detected capacity change from 3907029168 to 0",
        ),
        ev(
            2,
            now - MIN,
            "sdf: detected capacity change from 2097152 to 0",
        ),
    ]);
    d.holdings.insert(
        Device::Block("nvme1n1".into()),
        Holding {
            below: vec![],
            disks: vec!["nvme1n1".into()],
            mounts: vec![(
                PathBuf::from("/var/lib/kubelet/pods/u/volumes/kubernetes.io~csi/pvc-9/mount"),
                Some("pvc-9".into()),
            )],
        },
    );
    let r = evaluate(&d, &window(15 * MIN), now);
    assert_eq!(r.status, Status::Critical);
    assert_eq!(r.findings[0].status, Status::Critical);
    assert!(
        r.findings[0].text.contains("nvme1n1 → pvc-9"),
        "{}",
        r.findings[0].text
    );
    assert_eq!(r.findings[1].status, Status::Warning);
    assert!(
        r.findings[1].text.contains("on sdf"),
        "{}",
        r.findings[1].text
    );
    // A multipath device's finding names its paths.
    let mut d = data(vec![ev(3, now - MIN, "device offline error, dev dm-7, sector 8 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2")]);
    d.holdings.insert(
        Device::Block("dm-7".into()),
        Holding {
            disks: vec!["dm-7".into()],
            mounts: vec![],
            below: vec!["sdc".into(), "sdd".into()],
        },
    );
    let r = evaluate(&d, &window(15 * MIN), now);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0]
            .details
            .iter()
            .any(|l| l
                == "device-mapper device on sdc, sdd (multipath paths or LVM physical volumes)"),
        "{:?}",
        r.findings[0].details
    );
}

/// Device names the new classes give, mapped to the mounts (and PVs) on them: an NVMe
/// controller to its namespaces' mounts, a multipath path device to its head, a btrfs
/// /dev/mapper path to its dm-N, an NFS server to its mounts.
#[test]
fn nvme_dm_and_nfs_names_map_to_their_volumes() {
    let d = std::env::temp_dir().join(format!("kerr-map-{}", std::process::id()));
    let sys = d.join("sys");
    let mk = |p: &str, f: &str, v: &str| {
        std::fs::create_dir_all(sys.join(p)).unwrap();
        std::fs::write(sys.join(p).join(f), v).unwrap();
    };
    mk("class/block/nvme0n1", "dev", "259:0\n");
    mk("class/block/nvme1n1", "dev", "259:5\n");
    mk("class/nvme/nvme0/nvme0n1", "dev", "259:0\n");
    mk("class/nvme/nvme3/nvme1c3n1", "dev", "259:4\n");
    mk("class/block/dm-3", "dev", "253:3\n");
    mk("class/block/dm-3/dm", "name", "vg0-data\n");
    mk("class/block/dm-3/slaves/sdc", "x", "");
    let k = "/var/lib/kubelet/pods/u1/volumes";
    let mi = format!(
        "30 1 259:0 / {k}/kubernetes.io~csi/pvc-a/mount rw,relatime - ext4 /dev/nvme0n1 rw\n\
         31 1 259:5 / {k}/kubernetes.io~csi/pvc-b/mount rw,relatime - xfs /dev/nvme1n1 rw\n\
         32 1 253:3 / {k}/kubernetes.io~csi/pvc-c/mount rw,relatime - btrfs /dev/mapper/vg0-data rw\n\
         33 1 0:60 / {k}/kubernetes.io~nfs/pv-media rw,relatime - nfs4 nas.lan:/export/media rw,vers=4.2\n\
         34 1 0:61 / /mnt/other rw,relatime - nfs 10.0.0.9:/x rw\n"
    );
    let usage = DeviceUsage::parse(
        &mi,
        "mountinfo",
        &[PathBuf::from("/var/lib/kubelet")],
        Scope::All,
    )
    .unwrap();
    let host = Host::local();
    let pvs = |dev: Device| -> Vec<String> {
        resolve(&dev, &sys, &usage, &host)
            .mounts
            .into_iter()
            .filter_map(|(_, pv)| pv)
            .collect()
    };
    assert_eq!(pvs(Device::Block("nvme0".into())), ["pvc-a"]);
    assert_eq!(pvs(Device::Block("nvme3".into())), ["pvc-b"]);
    assert_eq!(pvs(Device::Block("nvme1c3n1".into())), ["pvc-b"]);
    assert_eq!(pvs(Device::Block("mapper/vg0-data".into())), ["pvc-c"]);
    assert_eq!(pvs(Device::Block("dm-3".into())), ["pvc-c"]);
    // A multipath/LVM device says what is below it.
    assert_eq!(
        resolve(&Device::Block("dm-3".into()), &sys, &usage, &host).below,
        ["sdc"]
    );
    assert!(resolve(&Device::Block("nvme0".into()), &sys, &usage, &host)
        .below
        .is_empty());
    assert_eq!(
        pvs(Device::Block("sdc".into())),
        Vec::<String>::new(),
        "no holders/ link written"
    );
    assert_eq!(pvs(Device::Nfs("nas.lan".into())), ["pv-media"]);
    let other = resolve(&Device::Nfs("10.0.0.9".into()), &sys, &usage, &host);
    assert_eq!(other.mounts, [(PathBuf::from("/mnt/other"), None)]);
    assert!(
        resolve(&Device::Nfs("10.0.0.1".into()), &sys, &usage, &host)
            .mounts
            .is_empty()
    );
    std::fs::remove_dir_all(&d).unwrap();
}
