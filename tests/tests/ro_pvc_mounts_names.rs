//! check_ro_pvc_mounts names the pods and claims of a read-only volume, from `--pods-json` /
//! `--pvs-json` or from the API; without API access, or with the API down, the alarm stands and a
//! note says why names are missing. A real ext4 on a loop device, driven read-only through the
//! kernel's own error path, in a private mount namespace under a temporary kubelet root. The API
//! is the real kube-apiserver (`e2e::control_plane`): pods and PVs created through it, their UIDs
//! the server's, the real 403; which requests were made is read from its audit log.

use e2e::apiserver::{unused_addr, KubeCa};
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{need_root, write_json as write, KubeletTree, Ns, Output};
use serde_json::{json, Value};
use std::path::Path;

const NAME: &str = "RO_PVC_MOUNTS";
fn pod(ns: &str, name: &str, claim: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns,"labels":{"app":name}},
        "spec":{"nodeName":"k8s02","containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"config","persistentVolumeClaim":{"claimName":claim}},
                       {"name":"kube-api-access","projected":{"sources":[]}}]},
        "status":{"phase":"Running"}})
}

fn pv(name: &str, ns: &str, claim: &str) -> Value {
    json!({"apiVersion":"v1","kind":"PersistentVolume",
        "metadata":{"name":name},
        "spec":{"capacity":{"storage":"5Gi"},"accessModes":["ReadWriteOnce"],
            "claimRef":{"apiVersion":"v1","kind":"PersistentVolumeClaim","namespace":ns,"name":claim,"uid":"y"},
            "csi":{"driver":"jiva.csi.openebs.io","volumeHandle":name,"fsType":"ext4"},
            "persistentVolumeReclaimPolicy":"Delete","storageClassName":"openebs-jiva-csi-default"},
        "status":{"phase":"Bound"}})
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
    // The cluster on the real server: names of this test's own (PVs are cluster-wide).
    let cp = ControlPlane::with_rbac();
    let media = cp.namespace("media");
    let sec = cp.namespace("sec");
    let pv_ro = ControlPlane::unique("pvc-a634b9a3");
    let pv_ok = ControlPlane::unique("pvc-5e7f0b11");
    let pv_vault = ControlPlane::unique("pvc-vault");
    cp.create_all(&[
        pod(&media, "radarr-0", "radarr-config"),
        pod(&media, "sonarr-0", "sonarr-config"),
        pod(&sec, "vault-0", "vault"),
        pv(&pv_ro, &media, "radarr-config"),
        pv(&pv_ok, &media, "sonarr-config"),
        pv(&pv_vault, &sec, "vault"),
    ]);
    // kubectl's own output, for --pods-json / --pvs-json: what the server holds.
    let get = |args: &[&str]| -> Value { serde_json::from_str(&cp.kubectl(args, None)).unwrap() };
    let pods = get(&["get", "pods", "-A", "-o", "json"]);
    let uid_of = |ns: &str, name: &str| -> String {
        pods["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["metadata"]["namespace"] == ns && p["metadata"]["name"] == name)
            .expect("created pod")["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let uid = uid_of(&media, "radarr-0");
    let healthy_uid = uid_of(&media, "sonarr-0");
    let pvs = get(&["get", "pv", "-o", "json"]);

    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let dev = volume(&ns, &tree, work.path(), &pv_ro, &uid, "errors=remount-ro");
    volume(&ns, &tree, work.path(), &pv_ok, &healthy_uid, "");
    let pods_json = write(work.path(), "pods.json", &pods);
    let pvs_json = write(work.path(), "pvs.json", &pvs);

    // A user of this test's own (a client certificate) with deploy/rbac.yaml's ClusterRole:
    // every request it makes is this test's.
    let user = ControlPlane::unique("names-user");
    cp.grant_checks_role(&user);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    let key = std::fs::read_to_string(&kc).unwrap();
    let key = key
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-key-data: "))
        .unwrap()
        .to_string();
    let kc = kc.to_str().unwrap();
    let requests = || -> Vec<String> {
        cp.audit()
            .iter()
            .filter(|e| e["user"]["username"] == user.as_str())
            .map(|e| {
                // The path, with a field selector if the request had one (decoded).
                let uri = e["requestURI"].as_str().unwrap_or("");
                let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
                match query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldSelector="))
                {
                    Some(sel) => format!("{path}?fieldSelector={}", sel.replace("%3D", "=")),
                    None => path.to_string(),
                }
            })
            .collect()
    };

    // Healthy node: OK, and not a single API request (names are looked up for alarms only).
    let out = run(&ns, &tree, &["--kubeconfig", kc]);
    out.assert_status(NAME, 0);
    assert!(requests().is_empty(), "{:?}", requests());

    std::fs::write(
        format!("/sys/fs/ext4/{dev}/trigger_fs_error"),
        "k8s-storage-checks names test",
    )
    .unwrap();
    let named = format!("{media}/radarr-0 (PVC {media}/radarr-config, {pv_ro})");

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
            .contains(&format!("pods: {media}/radarr-0 (UID {uid})")),
        "{out:?}"
    );
    assert!(!out.stdout.contains("names not resolved"), "{out:?}");
    assert!(
        !out.stdout.contains("sonarr"),
        "healthy volume named: {out:?}"
    );

    // From the API: the node's read-only PV by name (a list with a field selector: the `list`
    // verb, one object), then the pods of the claim's namespace only — never every PV.
    let out = run(&ns, &tree, &["--kubeconfig", kc]);
    println!("{}", out.stdout);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains(&format!("[CRITICAL] {named} is read-only: ")),
        "{out:?}"
    );
    assert_eq!(
        requests(),
        [
            format!("/api/v1/persistentvolumes?fieldSelector=metadata.name={pv_ro}"),
            format!("/api/v1/namespaces/{media}/pods")
        ],
        "{out:?}"
    );
    assert!(!out.stdout.contains(&key));

    // --no-names: as before, no request, no note.
    let before = requests().len();
    let out = run(&ns, &tree, &["--kubeconfig", kc, "--no-names"]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains(&format!("1 of 2 PV filesystems read-only: {pv_ro} |")),
        "{out:?}"
    );
    assert_eq!(requests().len(), before);

    // The API unreachable: the alarm stands, a note says why names are missing.
    let down = cp.kubeconfig_with(
        Some(&format!("https://{}", unused_addr())),
        KubeCa::Inline,
        Auth::Token(User::Checks),
    );
    let out = run(&ns, &tree, &["--kubeconfig", down.to_str().unwrap()]);
    println!("{}", out.stdout);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains(&format!("1 of 2 PV filesystems read-only: {pv_ro} |")),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("names not resolved: cannot connect to API server"),
        "{out:?}"
    );

    // The API answering 403 (an identity granted nothing): same.
    let nobody = cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Nobody));
    let out = run(&ns, &tree, &["--kubeconfig", nobody.to_str().unwrap()]);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout.contains("names not resolved: ") && out.stdout.contains("HTTP 403"),
        "{out:?}"
    );

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
