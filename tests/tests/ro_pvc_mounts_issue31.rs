//! check_ro_pvc_mounts, issue 31, against the real kernel in a private mount namespace:
//! - the node's own kubelet root on a filesystem that goes read-only (ext4's own error path,
//!   and a plain read-only remount) is CRITICAL with its own signal, `node_fs_readonly`;
//! - the access-mode rule for a volume read-only everywhere with no error: CRITICAL when its PV
//!   is ReadWriteOnce and no pod mounts it readOnly, OK for ReadOnlyMany or `readOnly: true`,
//!   WARNING when unknown.

use e2e::{need_root, KubeletTree, Ns};
use serde_json::Value;
use std::path::Path;

const NAME: &str = "RO_PVC_MOUNTS";
const DRIVER: &str = "jiva.csi.openebs.io";

fn check(ns: &Ns, root: &Path, extra: &[&str]) -> e2e::Output {
    ns.check("check_ro_pvc_mounts")
        .args(["--kubelet-root", root.to_str().unwrap(), "-t", "20"])
        .args(extra)
        .run()
}

fn signals(out: &e2e::Output) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["status"].as_str().unwrap().to_string(),
                f["signal"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn kubelet_root_read_only_is_critical() {
    if !need_root("kubelet_root_read_only_is_critical") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("var/lib/kubelet");
    std::fs::create_dir_all(&root).unwrap();
    let ns = Ns::new();
    // The kubelet root on its own ext4, as on nodes with a /var/lib/kubelet disk.
    let dev = ns.loop_fs(
        &work.path().join("kubelet.img"),
        64,
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        &root,
    );
    ns.sh(&format!("mkdir -p '{}/pods'", root.display()));
    let out = check(&ns, &root, &[]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("node_fs_ro"), Some(0.0), "{out:?}");

    // The kernel's own ext4 error path on the kubelet root's filesystem.
    let name = dev.trim_start_matches("/dev/");
    std::fs::write(
        format!("/sys/fs/ext4/{name}/trigger_fs_error"),
        "k8s-storage-checks test",
    )
    .unwrap();
    let out = check(&ns, &root, &[]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().starts_with(&format!(
            "RO_PVC_MOUNTS CRITICAL - node filesystem read-only ({}): no new pod can start on this node; no PV mounts on this node",
            root.display()
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("node_fs_ro"), Some(1.0), "{out:?}");
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("[CRITICAL] node filesystem read-only: the kubelet root "))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(
        line.contains(&format!("on {dev} (ext4, mounted at {})", root.display())),
        "{line}"
    );
    assert!(
        out.stdout.contains("docs/runbooks/node_fs_readonly.md"),
        "{out:?}"
    );
    let json = check(&ns, &root, &["--format", "json"]);
    assert_eq!(
        signals(&json),
        [("CRITICAL".to_string(), "node_fs_readonly".to_string())]
    );
}

#[test]
fn kubelet_root_remounted_read_only_is_critical() {
    if !need_root("kubelet_root_remounted_read_only_is_critical") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("var/lib/kubelet");
    std::fs::create_dir_all(&root).unwrap();
    let ns = Ns::new();
    ns.sh(&format!(
        "mount -t tmpfs kubelet '{r}' && mkdir -p '{r}/pods'",
        r = root.display()
    ));
    check(&ns, &root, &[]).assert_status(NAME, 0);
    ns.sh(&format!("mount -o remount,ro '{}'", root.display()));
    let out = check(&ns, &root, &[]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("(tmpfs, mounted at "), "{out:?}");
    assert!(
        out.stdout
            .contains(": mounted read-only; no new pod can start on this node"),
        "{out:?}"
    );
}

#[test]
fn read_only_everywhere_is_judged_by_the_access_modes() {
    if !need_root("read_only_everywhere_is_judged_by_the_access_modes") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    // A volume staged and published read-only, filesystem and mounts alike, with no error.
    let handle = "pvc-ro-handle";
    let staging = tree.staging_mount(DRIVER, handle, &e2e::sha256_hex(handle));
    ns.loop_fs(
        &work.path().join("ro.img"),
        64,
        "mkfs.ext4 -q -F",
        "ro",
        &staging,
    );
    let publish = tree.pod_csi_mount("uid-ro", "pvc-ro", DRIVER);
    ns.sh(&format!(
        "mount --bind -o ro '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    // Nothing tells intent: WARNING.
    let out = check(&ns, &tree.root, &["--no-names"]);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line().contains(
            "1 of 1 PV filesystem read-only at the filesystem with no error recorded (intent unknown): pvc-ro"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("read-only everywhere with no error recorded"),
        "{out:?}"
    );
    let pvs = |modes: &str| {
        e2e::write_json(
            work.path(),
            &format!("pvs-{modes}.json"),
            &serde_json::json!({"apiVersion":"v1","kind":"PersistentVolumeList","items":[
                {"metadata":{"name":"pvc-ro"},"spec":{"accessModes":[modes],
                 "claimRef":{"namespace":"shop","name":"orders"},
                 "csi":{"driver":DRIVER,"volumeHandle":handle}},"status":{"phase":"Bound"}}]}),
        )
    };
    let pods = |read_only: bool| {
        e2e::write_json(
            work.path(),
            &format!("pods-{read_only}.json"),
            &serde_json::json!({"apiVersion":"v1","kind":"List","items":[
                {"metadata":{"name":"orders-0","namespace":"shop","uid":"uid-ro"},
                 "spec":{"nodeName":"node-1","containers":[{"name":"c","image":"x"}],
                   "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"orders","readOnly":read_only}}]},
                 "status":{"phase":"Running"}}]}),
        )
    };
    // ReadWriteOnce, the pod does not mount it readOnly: its pods cannot write.
    let out = check(
        &ns,
        &tree.root,
        &[
            "--pvs-json",
            &pvs("ReadWriteOnce"),
            "--pods-json",
            &pods(false),
        ],
    );
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1 of 1 PV filesystem read-only: shop/orders-0 (PVC shop/orders, pvc-ro)"),
        "{out:?}"
    );
    assert!(out.stdout.contains("and no pod mounts its claim readOnly: it is meant to be written, and its pods cannot write"), "{out:?}");
    let json = check(
        &ns,
        &tree.root,
        &[
            "--pvs-json",
            &pvs("ReadWriteOnce"),
            "--pods-json",
            &pods(false),
            "--format",
            "json",
        ],
    );
    assert_eq!(
        signals(&json),
        [("CRITICAL".to_string(), "ro_everywhere".to_string())]
    );
    // The same claim mounted readOnly: true: intent.
    let out = check(
        &ns,
        &tree.root,
        &[
            "--pvs-json",
            &pvs("ReadWriteOnce"),
            "--pods-json",
            &pods(true),
        ],
    );
    out.assert_status(NAME, 0);
    // ReadOnlyMany: intent, and not counted writable.
    let out = check(
        &ns,
        &tree.root,
        &[
            "--pvs-json",
            &pvs("ReadOnlyMany"),
            "--pods-json",
            &pods(false),
            "-v",
        ],
    );
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .starts_with("RO_PVC_MOUNTS OK - 1 PV filesystem read-only on purpose |"),
        "{out:?}"
    );
    assert!(out.stdout.contains("is read-only on purpose"), "{out:?}");
}
