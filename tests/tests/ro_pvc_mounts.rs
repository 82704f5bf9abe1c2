//! check_ro_pvc_mounts against the real kernel: loop-device ext4 and xfs filesystems in a private
//! mount namespace under a temporary kubelet root, driven into failure through the kernel's own
//! error paths (ext4's trigger_fs_error, XFS's forced shutdown).

use e2e::{need_root, need_tool, KubeletTree, Ns};
use std::path::Path;

const NAME: &str = "RO_PVC_MOUNTS";

#[allow(clippy::too_many_arguments)]
/// A PV as the kubelet lays it out: a staging globalmount of a loop filesystem, and a pod's
/// publish mount bound from it. Returns the loop device's kernel name (`loop3`).
fn pv(
    ns: &Ns,
    tree: &KubeletTree,
    work: &Path,
    pv: &str,
    pod: &str,
    mkfs: &str,
    opts: &str,
    ro_bind: bool,
) -> String {
    let handle = format!("{pv}-handle");
    let staging = tree.staging_mount("jiva.csi.openebs.io", &handle, &e2e::sha256_hex(&handle));
    let size = if mkfs.contains("xfs") { 320 } else { 64 }; // mkfs.xfs wants ≥ 300 MB (sparse)
    let dev = ns.loop_fs(&work.join(format!("{pv}.img")), size, mkfs, opts, &staging);
    let publish = tree.pod_csi_mount(pod, pv, "jiva.csi.openebs.io");
    ns.sh(&format!(
        "mount --bind '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    if ro_bind {
        ns.sh(&format!("mount -o remount,bind,ro '{}'", publish.display()));
    }
    dev.trim_start_matches("/dev/").to_string()
}

fn check(ns: &Ns, tree: &KubeletTree) -> e2e::Output {
    ns.check("check_ro_pvc_mounts")
        .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
        .run()
}

#[test]
fn healthy_volumes_and_a_readonly_bind_are_ok() {
    if !need_root("healthy_volumes_and_a_readonly_bind_are_ok") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-healthy",
        "pod-a",
        "mkfs.ext4 -q -F",
        "",
        false,
    );
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-config",
        "pod-b",
        "mkfs.ext4 -q -F",
        "",
        true,
    );
    let out = check(&ns, &tree);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().starts_with(
            "RO_PVC_MOUNTS OK - 2 PV filesystems writable | pv_mounts=2;;;0 ro_volumes=0;0;0;0"
        ),
        "{out:?}"
    );
}

#[test]
fn ext4_error_remount_ro_is_critical() {
    if !need_root("ext4_error_remount_ro_is_critical") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let dev = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-a634b9a3",
        "8e1f6a2c",
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        false,
    );
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-healthy",
        "77aa",
        "mkfs.ext4 -q -F",
        "",
        false,
    );
    // The pod mounts its healthy volume read-only on purpose: still no alarm for it.
    let before = check(&ns, &tree);
    before.assert_status(NAME, 0);

    // The kernel's own ext4 error path (ext4_error → errors=remount-ro handling).
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks test",
    )
    .unwrap();

    let out = check(&ns, &tree);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1 of 2 PV filesystems read-only: pvc-a634b9a3"),
        "{out:?}"
    );
    assert_eq!(out.perf("ro_volumes"), Some(1.0));
    let finding = out.stdout.lines().nth(1).unwrap();
    assert!(
        finding.starts_with("[CRITICAL] pvc-a634b9a3 is read-only: "),
        "{finding}"
    );
    // Which signal fired depends on the kernel: emergency_ro (≥6.15), super ro (≤6.11), or the
    // presumed read-only of 6.12–6.14. Every variant names the recorded error and its time.
    assert!(
        finding.contains("ext4 error(s) recorded, first at 20"),
        "{finding}"
    );
    assert!(out.stdout.contains("pods: 8e1f6a2c"), "{out:?}");
    assert!(
        !out.stdout.contains("pvc-healthy is"),
        "healthy volume listed at -v0: {out:?}"
    );
}

#[test]
fn ext4_errors_with_errors_continue_warn() {
    if !need_root("ext4_errors_with_errors_continue_warn") {
        return;
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let dev = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-cont",
        "pod-c",
        "mkfs.ext4 -q -F",
        "errors=continue",
        false,
    );
    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks test",
    )
    .unwrap();
    let out = check(&ns, &tree);
    if release.starts_with("6.12") || release.starts_with("6.13") || release.starts_with("6.14") {
        out.assert_status(NAME, 2); // presumed read-only: these kernels hide it
    } else {
        out.assert_status(NAME, 1);
        assert!(
            out.first_line()
                .contains("1 of 1 PV filesystems have recorded errors: pvc-cont"),
            "{out:?}"
        );
        assert_eq!(out.perf("error_volumes"), Some(1.0));
    }
}

#[test]
fn xfs_shutdown_is_critical() {
    if !need_root("xfs_shutdown_is_critical") || !need_tool("xfs_shutdown_is_critical", "xfs_io") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-xfs",
        "pod-x",
        "mkfs.xfs -q -f",
        "",
        false,
    );
    check(&ns, &tree).assert_status(NAME, 0);
    let staging = tree
        .root
        .join("plugins/kubernetes.io/csi/jiva.csi.openebs.io")
        .join(e2e::sha256_hex("pvc-xfs-handle"))
        .join("globalmount");
    ns.sh(&format!("xfs_io -x -c shutdown '{}'", staging.display()));
    let out = check(&ns, &tree);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains("pvc-xfs is read-only: stat of the mount point fails: EIO"),
        "{out:?}"
    );
    assert!(out.stdout.contains("XFS shut down"), "{out:?}");
}

#[test]
fn garbled_mount_table_is_unknown_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let mi = dir.path().join("mountinfo");
    std::fs::write(
        &mi,
        "36 35 98:0 / / rw - ext4 /dev/sda1 rw\n37 36 8:32 / /var/lib/kubelet/pods/x rw shared:1\n",
    )
    .unwrap();
    let out = e2e::run(
        "check_ro_pvc_mounts",
        [
            "--mountinfo",
            mi.to_str().unwrap(),
            "--kubelet-root",
            dir.path().to_str().unwrap(),
        ],
    );
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("line 2"), "{out:?}");
    let out = e2e::run(
        "check_ro_pvc_mounts",
        [
            "--mountinfo",
            "/nonexistent/mountinfo",
            "--kubelet-root",
            "/tmp",
        ],
    );
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("cannot read /nonexistent/mountinfo: No such file or directory (ENOENT)"),
        "{out:?}"
    );
}

#[test]
fn no_kubelet_root_is_unknown_not_a_silent_ok() {
    let out = e2e::run("check_ro_pvc_mounts", ["--host-root", "/nonexistent-host"]);
    out.assert_status(NAME, 3);
}

/// Check processes whose command line mentions `marker` that are still alive.
fn leftovers(marker: &str) -> String {
    let out = e2e::Cmd::new("pgrep").args(["-af", marker]).run();
    out.stdout
        .lines()
        .filter(|l| l.contains("check_ro_pvc_mounts"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn hung_fuse_volume_is_critical_within_the_timeout_and_leaves_nothing_behind() {
    if !need_root("hung_fuse_volume_is_critical")
        || !need_tool("hung_fuse_volume_is_critical", "bindfs")
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let mut ns = Ns::new();
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-healthy",
        "pod-h",
        "mkfs.ext4 -q -F",
        "",
        false,
    );
    // An NFS-like volume served by a FUSE daemon that stops answering.
    let src = work.path().join("export");
    std::fs::create_dir_all(&src).unwrap();
    let mnt = tree.pod_csi_mount("pod-n", "pvc-nfs", "nfs.csi.k8s.io");
    ns.sh(&format!("bindfs '{}' '{}'", src.display(), mnt.display()));
    let pid = ns
        .sh(&format!("pgrep -n -f '^bindfs {}'", src.display()))
        .stdout
        .trim()
        .parse::<i32>()
        .unwrap();
    ns.own(pid);
    ns.sh(&format!("kill -STOP {pid}"));

    let root = tree.root.to_str().unwrap().to_string();
    let out = ns
        .check("check_ro_pvc_mounts")
        .args(["--kubelet-root", &root, "--probe-timeout", "1s", "-t", "5"])
        .run();
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1 of 2 PV filesystems read-only: pvc-nfs"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("does not answer (no answer in 1s)"),
        "{out:?}"
    );
    assert!(
        out.elapsed < std::time::Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
    assert_eq!(leftovers(&root), "", "processes left behind");
}

#[test]
fn without_privileges_it_says_which_capability_is_missing() {
    if !need_root("without_privileges_it_says_which_capability_is_missing")
        || !need_tool("without_privileges", "setpriv")
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    std::fs::set_permissions(
        tree.root.join("pods"),
        std::os::unix::fs::PermissionsExt::from_mode(0o750),
    )
    .unwrap();
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let out = e2e::Cmd::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(e2e::bin("check_ro_pvc_mounts"))
        .args(["--kubelet-root", tree.root.to_str().unwrap()])
        .run();
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains("Permission denied (EACCES)"),
        "{out:?}"
    );
    assert!(out.first_line().contains("CAP_DAC_READ_SEARCH"), "{out:?}");
}

#[test]
fn a_mistyped_kubelet_root_is_unknown_not_no_pv_mounts() {
    let out = e2e::run(
        "check_ro_pvc_mounts",
        ["--kubelet-root", "/nonexistent/kubelet", "--no-names"],
    );
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("--kubelet-root /nonexistent/kubelet: no such directory"),
        "{out:?}"
    );
}

/// #21: a ReadOnlyMany volume as a CSI driver lays it out — staged read-only at the superblock
/// (`mount -o ro`), bound into the pod with read-write per-mount flags — with no error recorded
/// is not the kernel's remount: WARNING without the API (saying what is known), OK when the PV's
/// access modes say ReadOnlyMany, CRITICAL when they say ReadWriteOnce. Beside it, the real
/// kernel remount (ext4's error path) stays CRITICAL.
#[test]
fn rox_read_only_superblock_without_an_error_is_not_critical() {
    let test = "rox_read_only_superblock_without_an_error_is_not_critical";
    if !need_root(test) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    // The ROX volume: staging mount `ro` (superblock and mount read-only), the pod's bind made
    // read-write per mount, as a driver that binds without `ro` leaves it.
    let handle = "pvc-rox-handle";
    let staging = tree.staging_mount("jiva.csi.openebs.io", handle, &e2e::sha256_hex(handle));
    let dev = ns.loop_fs(
        &work.path().join("rox.img"),
        64,
        "mkfs.ext4 -q -F",
        "ro",
        &staging,
    );
    let dev = dev.trim_start_matches("/dev/").to_string();
    let publish = tree.pod_csi_mount("5b5b0000", "pvc-rox", "jiva.csi.openebs.io");
    ns.sh(&format!(
        "mount --bind '{s}' '{p}' && mount -o remount,bind,rw '{p}'",
        s = staging.display(),
        p = publish.display()
    ));
    // What the kernel shows: the superblock read-only, the pod's mount read-write, no error.
    let mi = ns.sh(&format!(
        "grep ' {} ' /proc/self/mountinfo",
        publish.display()
    ));
    let fields: Vec<&str> = mi.stdout.split_whitespace().collect();
    assert!(fields[5].split(',').any(|o| o == "rw"), "{mi:?}");
    assert!(
        mi.stdout.trim_end().ends_with(" ro") || mi.stdout.contains(" ro,"),
        "{mi:?}"
    );
    assert_eq!(
        std::fs::read_to_string(format!("/sys/fs/ext4/{dev}/errors_count"))
            .unwrap()
            .trim(),
        "0"
    );
    let out = check(&ns, &tree);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line().contains(
            "1 of 1 PV filesystems read-only with no error recorded (intent unknown): pvc-rox"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("no ext4 error recorded (errors_count 0), no emergency_ro"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("remounted it read-only"), "{out:?}");
    assert_eq!(out.perf("ro_volumes"), Some(0.0));

    // The PV's access modes tell intent from failure.
    let pvs = |modes: &str| {
        let p = work.path().join(format!("pvs-{modes}.json"));
        std::fs::write(
            &p,
            format!(
                r#"{{"apiVersion":"v1","kind":"PersistentVolumeList","items":[{{"metadata":{{"name":"pvc-rox"}},"spec":{{"accessModes":["{modes}"],"claimRef":{{"namespace":"media","name":"library"}},"csi":{{"driver":"jiva.csi.openebs.io","volumeHandle":"{handle}"}}}},"status":{{"phase":"Bound"}}}}]}}"#
            ),
        )
        .unwrap();
        p
    };
    let with = |p: &Path| {
        ns.check("check_ro_pvc_mounts")
            .args([
                "--kubelet-root",
                tree.root.to_str().unwrap(),
                "-t",
                "20",
                "-v",
            ])
            .arg("--pvs-json")
            .arg(p)
            .run()
    };
    let out = with(&pvs("ReadOnlyMany"));
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains("is read-only on purpose"), "{out:?}");
    let out = with(&pvs("ReadWriteOnce"));
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("it is meant to be written"), "{out:?}");

    // The real kernel remount beside it: ext4's error path on a read-write volume.
    let dev2 = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-a634b9a3",
        "8e1f6a2c",
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        false,
    );
    std::fs::write(
        format!("/sys/fs/ext4/{dev2}/trigger_fs_error"),
        "k8s-storage-checks test",
    )
    .unwrap();
    let out = check(&ns, &tree);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1 of 2 PV filesystems read-only: pvc-a634b9a3"),
        "{out:?}"
    );
    assert_eq!(out.perf("ro_volumes"), Some(1.0));
    let rox = out
        .stdout
        .lines()
        .find(|l| l.starts_with('[') && l.contains("pvc-rox"))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(rox.starts_with("[WARNING] pvc-rox "), "{rox}");
    // The next step follows the critical finding, paste-safe.
    assert!(out.stdout.contains("next: `kubectl cordon "), "{out:?}");
}
