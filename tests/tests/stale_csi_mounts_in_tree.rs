//! check_stale_csi_mounts on in-tree network volumes (issue 31): an NFS PV mounted by the
//! kubelet's in-tree plugin (`pods/<uid>/volumes/kubernetes.io~nfs/<pv>`) and an in-tree iSCSI
//! device mount (`plugins/kubernetes.io/iscsi/iface-default/<portal>-<iqn>-lun-0`), laid out as
//! the kubelet lays them out, in a private mount namespace. The dead server is a bindfs FUSE
//! daemon (stopped: every stat hangs, as on an NFS server that stopped answering with a hard
//! mount; killed: ENOTCONN): a real NFS server cannot be made to hang on demand in a test.

use e2e::fuse::{bindfs, kill_daemon, stop_daemon};
use e2e::{need_root, need_tool, KubeletTree, Ns};
use std::path::PathBuf;

const NAME: &str = "STALE_CSI_MOUNTS";

fn nfs_mount(tree: &KubeletTree, uid: &str, pv: &str) -> PathBuf {
    tree.root
        .join("pods")
        .join(uid)
        .join("volumes/kubernetes.io~nfs")
        .join(pv)
}

#[test]
fn hung_in_tree_nfs_and_dead_iscsi_device_mounts_are_found() {
    let test = "hung_in_tree_nfs_and_dead_iscsi_device_mounts_are_found";
    if !need_root(test) || !need_tool(test, "bindfs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(tmp.path());
    let mut ns = Ns::new();
    let nfs = nfs_mount(&tree, "u-nfs", "pv-nfs-media");
    let nfs_pid = bindfs(&mut ns, &tmp.path().join("export"), &nfs);
    let iscsi = tree.root.join(
        "plugins/kubernetes.io/iscsi/iface-default/10.0.0.7:3260-iqn.2016-09.com.openebs.jiva:pv-db-lun-0",
    );
    let iscsi_pid = bindfs(&mut ns, &tmp.path().join("lun"), &iscsi);
    let run = |args: &[&str]| {
        ns.check("check_stale_csi_mounts")
            .without_host_credentials()
            .arg("--kubelet-root")
            .arg(&tree.root)
            .args(["--node", "node-1"])
            .args(args)
            .run()
    };
    // Both answer: healthy, and counted (they are probed, not skipped as "not CSI").
    let out = run(&["-v"]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("csi_mounts"), Some(2.0), "{out:?}");

    // The NFS server stops answering: the in-tree mount hangs, found within the timeout.
    stop_daemon(nfs_pid);
    // The iSCSI target is gone: its device mount answers ENOTCONN.
    kill_daemon(iscsi_pid);
    let out = run(&["-t", "6", "--probe-timeout", "1s"]);
    out.assert_status(NAME, 2);
    assert!(out.elapsed < std::time::Duration::from_secs(6), "{out:?}");
    let hung = out
        .stdout
        .lines()
        .find(|l| l.starts_with("[CRITICAL] hung pod mount ") && l.contains(nfs.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(hung.ends_with("no answer in 1s"), "{hung}");
    let dead = out
        .stdout
        .lines()
        .find(|l| l.starts_with("[CRITICAL] corrupted mount ") && l.contains("kubernetes.io/iscsi"))
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!(dead.contains("ENOTCONN"), "{dead}");
    // Named as the in-tree plugin's, with a next step about the server, not a CSI plugin pod.
    assert!(out.stdout.contains("driver kubernetes.io/nfs"), "{out:?}");
    assert!(
        out.stdout.contains(
            "check the server or target this in-tree kubernetes.io/nfs volume mounts from"
        ),
        "{out:?}"
    );
    assert!(
        !out.stdout.contains("CSI node plugin pod of kubernetes.io"),
        "{out:?}"
    );
    assert_eq!(out.perf("hung_mounts"), Some(1.0), "{out:?}");
    // The stopped daemon is SIGKILLed when ns drops (it owns the pid).
}
