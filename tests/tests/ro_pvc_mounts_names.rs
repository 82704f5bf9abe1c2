//! check_ro_pvc_mounts names the pods and claims of a read-only volume, from `--pods-json` /
//! `--pvs-json` or from the API; without API access, or with the API down, the alarm stands and a
//! note says why names are missing. A real ext4 on a loop device, driven read-only through the
//! kernel's own error path, in a private mount namespace under a temporary kubelet root.

use e2e::apiserver::fixtures::kubectl_list;
use e2e::apiserver::{unused_addr, ApiServer, KubeAuth, KubeCa};
use e2e::{need_root, write_json as write, KubeletTree, Ns, Output};
use serde_json::{json, Value};
use std::path::Path;

const NAME: &str = "RO_PVC_MOUNTS";
const PV: &str = "pvc-a634b9a3-5d1e-4c1b-8a2f-0c0ffee00001";
const UID: &str = "8e1f6a2c-4b1d-4c3e-9f0a-a634b9a30001";
const HEALTHY_PV: &str = "pvc-5e7f0b11-2c3d-4e5f-8a9b-0c1d2e3f4a5b";
const HEALTHY_UID: &str = "77aa0b1c-2d3e-4f50-8a9b-0c1d2e3f4a5b";

fn pod(ns: &str, name: &str, uid: &str, claim: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns,"uid":uid,"labels":{"app":name}},
        "spec":{"nodeName":"k8s02","containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"config","persistentVolumeClaim":{"claimName":claim}},
                       {"name":"kube-api-access","projected":{"sources":[]}}]},
        "status":{"phase":"Running"}})
}

fn pv(name: &str, ns: &str, claim: &str) -> Value {
    json!({"apiVersion":"v1","kind":"PersistentVolume",
        "metadata":{"name":name,"uid":"x"},
        "spec":{"capacity":{"storage":"5Gi"},"accessModes":["ReadWriteOnce"],
            "claimRef":{"apiVersion":"v1","kind":"PersistentVolumeClaim","namespace":ns,"name":claim,"uid":"y"},
            "csi":{"driver":"jiva.csi.openebs.io","volumeHandle":name,"fsType":"ext4"},
            "persistentVolumeReclaimPolicy":"Delete","storageClassName":"openebs-jiva-csi-default"},
        "status":{"phase":"Bound"}})
}

fn pods() -> Vec<Value> {
    vec![
        pod("media", "radarr-0", UID, "radarr-config"),
        pod("media", "sonarr-0", HEALTHY_UID, "sonarr-config"),
        pod(
            "sec",
            "vault-0",
            "55cc0000-0000-4000-8000-000000000000",
            "vault",
        ),
    ]
}

fn pvs() -> Vec<Value> {
    vec![
        pv(PV, "media", "radarr-config"),
        pv(HEALTHY_PV, "media", "sonarr-config"),
        pv("pvc-vault", "sec", "vault"),
    ]
}

/// Staging globalmount of a loop ext4 and the pod's publish bind mount of it; returns the loop
/// device's kernel name.
fn volume(ns: &Ns, tree: &KubeletTree, work: &Path, pv: &str, uid: &str, opts: &str) -> String {
    let staging = tree.staging_mount("jiva.csi.openebs.io", pv, &e2e::sha256_hex(pv));
    let dev = ns.loop_fs(
        &work.join(format!("{pv}.img")),
        64,
        "mkfs.ext4 -q -F",
        opts,
        &staging,
    );
    let publish = tree.pod_csi_mount(uid, pv, "jiva.csi.openebs.io");
    ns.sh(&format!(
        "mount --bind '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    dev.trim_start_matches("/dev/").to_string()
}

fn run(ns: &Ns, tree: &KubeletTree, args: &[&str]) -> Output {
    ns.check("check_ro_pvc_mounts")
        .without_host_credentials()
        .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
        .args(args)
        .run()
}

#[test]
fn readonly_volume_is_named_from_json_and_api_and_keeps_its_alarm_without() {
    if !need_root("readonly_volume_is_named_from_json_and_api_and_keeps_its_alarm_without") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let dev = volume(&ns, &tree, work.path(), PV, UID, "errors=remount-ro");
    volume(&ns, &tree, work.path(), HEALTHY_PV, HEALTHY_UID, "");
    let pods_json = write(work.path(), "pods.json", &kubectl_list(pods()));
    let pvs_json = write(work.path(), "pvs.json", &kubectl_list(pvs()));

    let s = ApiServer::start();
    s.set("pods", pods());
    s.set("persistentvolumes", pvs());
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("n4mes-t0ken".into()));
    let kc = kc.to_str().unwrap();

    // Healthy node: OK, and not a single API request (names are looked up for alarms only).
    let out = run(&ns, &tree, &["--kubeconfig", kc]);
    out.assert_status(NAME, 0);
    assert!(s.requests().is_empty(), "{:?}", s.requests());

    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks names test",
    )
    .unwrap();
    let named = format!("media/radarr-0 (PVC media/radarr-config, {PV})");

    // From kubectl output.
    let out = run(
        &ns,
        &tree,
        &["--pods-json", &pods_json, "--pvs-json", &pvs_json],
    );
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains(&format!("1 of 2 PV filesystems read-only: {named}")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("[CRITICAL] {named} is read-only: ")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("pods: media/radarr-0 (UID {UID})")),
        "{out:?}"
    );
    assert!(!out.stdout.contains("names not resolved"), "{out:?}");
    assert!(
        !out.stdout.contains("sonarr"),
        "healthy volume named: {out:?}"
    );

    // From the API: one PV list, then the pods of the claim's namespace only.
    let out = run(&ns, &tree, &["--kubeconfig", kc]);
    println!("{}", out.stdout);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains(&format!("[CRITICAL] {named} is read-only: ")),
        "{out:?}"
    );
    let paths: Vec<String> = s.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        ["/api/v1/persistentvolumes", "/api/v1/namespaces/media/pods"],
        "{out:?}"
    );
    assert!(!out.stdout.contains("n4mes-t0ken"));

    // --no-names: as before, no request, no note.
    let before = s.requests().len();
    let out = run(&ns, &tree, &["--kubeconfig", kc, "--no-names"]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains(&format!("1 of 2 PV filesystems read-only: {PV} |")),
        "{out:?}"
    );
    assert_eq!(s.requests().len(), before);

    // The API unreachable: the alarm stands, a note says why names are missing.
    let down = s.kubeconfig_for(
        &format!("https://{}", unused_addr()),
        KubeCa::Inline,
        KubeAuth::Token("t".into()),
    );
    let out = run(&ns, &tree, &["--kubeconfig", down.to_str().unwrap()]);
    println!("{}", out.stdout);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains(&format!("1 of 2 PV filesystems read-only: {PV} |")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("names not resolved: cannot connect to API server"),
        "{out:?}"
    );

    // The API answering 403: same.
    s.fail(e2e::apiserver::Fault::Http(403));
    let out = run(&ns, &tree, &["--kubeconfig", kc]);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout.contains("names not resolved: ") && out.stdout.contains("HTTP 403"),
        "{out:?}"
    );
    s.heal();

    // No API access at all (no kubeconfig anywhere): the alarm and a note.
    if kube_node_files_absent() {
        let out = run(&ns, &tree, &[]);
        out.assert_status(NAME, 2);
        assert!(
            out.stdout.contains("names not resolved (no API access)"),
            "{out:?}"
        );
    }
}

/// The node kubeconfig files the default lookup reads would give this host API access.
fn kube_node_files_absent() -> bool {
    [
        "/var/snap/microk8s/current/credentials/client.config",
        "/etc/rancher/k3s/k3s.yaml",
        "/etc/kubernetes/kubelet.conf",
        "/etc/kubernetes/admin.conf",
    ]
    .iter()
    .all(|p| !Path::new(p).exists())
}
