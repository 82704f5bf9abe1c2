//! Issue 33: the API cost of a check_stale_csi_mounts run is the node's own volumes, not the
//! cluster's. On the real kube-apiserver, with other nodes' PVs and VolumeAttachments beside, the
//! check asks (its own identity, so the audit log holds only its requests) for each PV of its
//! mounts and each attachment by name — the attachment's name as the kubelet computes it — and
//! reads a whole list only where a name cannot decide, saying so in -vv. Real mounts (tmpfs and
//! binds) in a private mount namespace under a temporary kubelet root.

use e2e::apiserver::KubeCa;
use e2e::control_plane::{AuditedRequest, Auth, ControlPlane};
use e2e::{need_root, sha256_hex, KubeletTree, Ns, Output};
use std::path::Path;

const NAME: &str = "STALE_CSI_MOUNTS";
const DRIVER: &str = "api-cost.csi.example.com";
const PVS: &str = "/api/v1/persistentvolumes";
const VAS: &str = "/apis/storage.k8s.io/v1/volumeattachments";

fn pv(name: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":name},
        "spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],
            "csi":{"driver":DRIVER,"volumeHandle":name}}})
}

/// `csi-` + sha256(volumeHandle + driver + node), as Kubernetes' getAttachmentName (computed
/// here with coreutils' sha256sum, not the check's code). The handle is the PV's name here.
fn va_name(pv: &str, node: &str) -> String {
    format!("csi-{}", sha256_hex(&format!("{pv}{DRIVER}{node}")))
}

fn va(pv: &str, node: &str) -> serde_json::Value {
    serde_json::json!({"apiVersion":"storage.k8s.io/v1","kind":"VolumeAttachment",
        "metadata":{"name":va_name(pv, node)},
        "spec":{"attacher":DRIVER,"nodeName":node,"source":{"persistentVolumeName":pv}}})
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn by_name(reqs: &[AuditedRequest]) -> Vec<String> {
    let mut v: Vec<String> = reqs
        .iter()
        .filter_map(|r| r.q("fieldSelector")?.strip_prefix("metadata.name="))
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

fn whole(reqs: &[AuditedRequest]) -> usize {
    reqs.iter()
        .filter(|r| r.q("fieldSelector").is_none() && r.q("limit") != Some("1"))
        .count()
}

#[test]
fn stale_csi_mounts_reads_only_the_nodes_own_pvs_and_attachments() {
    if !need_root("stale_csi_mounts_reads_only_the_nodes_own_pvs_and_attachments") {
        return;
    }
    let cp = ControlPlane::with_rbac();
    let node = ControlPlane::unique("node-apicost");
    let other = ControlPlane::unique("node-other");
    let ns = cp.namespace("apicost");
    let (a, b, c) = (
        ControlPlane::unique("pvc-a"),
        ControlPlane::unique("pvc-b"),
        ControlPlane::unique("pvc-c"),
    );
    // This node: a attached, b with no attachment (a stale staging mount), c attached but
    // staged with nothing to name its PV. Another node: ten volumes the check must not read.
    let mut objs = vec![
        serde_json::json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":"ws","namespace":ns},
            "spec":{"nodeName":node,"containers":[{"name":"c","image":"x"}]}}),
        pv(&a),
        pv(&b),
        pv(&c),
        va(&a, &node),
        va(&c, &node),
    ];
    for i in 0..10 {
        let p = ControlPlane::unique(&format!("pvc-other{i}"));
        objs.push(va(&p, &other));
        objs.push(pv(&p));
    }
    cp.create_all(&objs);
    let uid = cp.get("pod", Some(&ns), "ws")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    // Its own identity with the checks' rules: the audit log's requests of this user are this
    // test's alone.
    let user = cp.user_with_rules(
        &serde_json::json!([{"apiGroups":[""],"resources":["pods","persistentvolumes"],"verbs":["list"]},
            {"apiGroups":["storage.k8s.io"],"resources":["volumeattachments"],"verbs":["list"]}]),
        &["list", "volumeattachments"],
    );
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));

    let tmp = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(tmp.path());
    let mnt = Ns::new();
    // a and b: staged and published to the pod (the pod mount on the same device names the PV).
    for p in [&a, &b] {
        let stage = tree.staging_mount(DRIVER, p, &sha256_hex(p));
        let pod = tree.pod_csi_mount(&uid, p, DRIVER);
        mnt.sh(&format!(
            "mount -t tmpfs tmpfs '{st}' && mount --bind '{st}' '{po}'",
            st = s(&stage),
            po = s(&pod)
        ));
    }
    let run = || -> Output {
        mnt.check("check_stale_csi_mounts")
            .without_host_credentials()
            .args(["--kubeconfig", s(&kc), "--node", node.as_str(), "-vv"])
            // Every -vv line (what was read and why), past the default 4 KiB.
            .args(["--max-output", "65536"])
            .arg("--kubelet-root")
            .arg(&tree.root)
            .run()
    };

    let out = run();
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains(&format!("no VolumeAttachment of PV {b} to node {node}")),
        "{out:?}"
    );
    assert!(!out.stdout.contains(&format!("PV {a} ")), "{out:?}");
    let pvs = cp.requests(&user, PVS);
    let vas = cp.requests(&user, VAS);
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(by_name(&pvs), want, "{pvs:?}");
    assert_eq!(pvs.len(), 2, "{pvs:?}");
    let mut want = vec![va_name(&a, &node), va_name(&b, &node)];
    want.sort();
    assert_eq!(by_name(&vas), want, "{vas:?}");
    assert_eq!(vas.len(), 2, "only by name: {vas:?}");
    assert!(pvs.iter().chain(&vas).all(|r| r.verb == "list"));

    // c staged with nothing that names its PV (no specVolID, no pod mount): only the whole PV
    // list finds it (by sha256 of its handle), and -vv says why it was read.
    let stage = tree.staging_mount(DRIVER, &c, &sha256_hex(&c));
    mnt.sh(&format!("mount -t tmpfs tmpfs '{}'", s(&stage)));
    let out = run();
    out.assert_status(NAME, 2);
    assert!(
        out.stderr.contains("listing every PV") || out.stdout.contains("listing every PV"),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("no pod mount uses PV {c} any more")),
        "found by the whole list, not taken for a deleted PV: {out:?}"
    );
    assert!(!out.stdout.contains("no longer exists"), "{out:?}");
    let pvs = cp.requests(&user, PVS);
    assert_eq!(whole(&pvs), 1, "{pvs:?}");
    let vas = cp.requests(&user, VAS);
    assert_eq!(whole(&vas), 0, "{vas:?}");
    assert!(by_name(&vas).contains(&va_name(&c, &node)), "{vas:?}");
}
