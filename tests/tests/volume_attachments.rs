//! check_volume_attachments against the real kube-apiserver: VolumeAttachments (storage.k8s.io/v1,
//! built in), Nodes with their Ready condition, PVs with their claimRef, pods and the
//! `FailedAttachVolume` events of the attach/detach controller, all created through the API; what
//! the kubelet, the external-attacher and the node lifecycle controller would write (a pod's
//! phase, an attachment's `status.attached`/`attachError`/`detachError`, a node's Ready condition)
//! goes through the status subresource, as they write it. The check runs as the identity
//! deploy/rbac.yaml grants to. Each test has nodes and names of its own and runs with `--node`,
//! so the tests' attachments on the shared plane do not mix.

use e2e::apiserver::fixtures::ago;
use e2e::control_plane::{ControlPlane, User};
use e2e::{Cmd, Output};
use serde_json::{json, Value};
use std::time::Duration;

const NAME: &str = "VOLUME_ATTACHMENTS";
const BIN: &str = "check_volume_attachments";
const DRIVER: &str = "driver.longhorn.io";

fn cp() -> &'static ControlPlane {
    ControlPlane::with_rbac()
}

fn check_as(cp: &ControlPlane, user: User, args: &[&str]) -> Output {
    Cmd::check(BIN)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(cp.kubeconfig(user))
        .args(args)
        .run()
}

fn check(cp: &ControlPlane, args: &[&str]) -> Output {
    check_as(cp, User::Checks, args)
}

/// A Node whose Ready condition is `ready` since `since_ago` seconds (as the kubelet, or the node
/// lifecycle controller for `Unknown`, writes it).
fn node(cp: &ControlPlane, name: &str, ready: &str, since_ago: i64) {
    let (reason, message) = match ready {
        "True" => ("KubeletReady", "kubelet is posting ready status"),
        _ => ("NodeStatusUnknown", "Kubelet stopped posting node status."),
    };
    cp.create(&json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": ready, "reason": reason,
            "message": message, "lastHeartbeatTime": ago(since_ago),
            "lastTransitionTime": ago(since_ago)}]}
    }));
}

/// A CSI PV bound to claim `ns/claim`.
fn pv(cp: &ControlPlane, name: &str, ns: &str, claim: &str) {
    cp.create(&json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "longhorn",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim},
            "csi": {"driver": DRIVER, "volumeHandle": name, "fsType": "ext4"}},
        "status": {"phase": "Bound"}
    }));
}

/// A pod on `node` mounting claim `claim`, in phase `phase` (the kubelet's write).
fn pod(cp: &ControlPlane, ns: &str, name: &str, node: &str, claim: &str, phase: &str) {
    cp.create(&json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nginx:1.27",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]},
        "status": {"phase": phase}
    }));
}

/// A VolumeAttachment of `pv` to `node` (the attach/detach controller's create), its status as
/// the external-attacher writes it.
fn va(cp: &ControlPlane, name: &str, node: &str, pv: &str, status: Value, finalizer: bool) {
    let mut meta = json!({"name": name});
    if finalizer {
        meta["finalizers"] = json!([format!("external-attacher/{}", DRIVER.replace('.', "-"))]);
    }
    cp.create(&json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": meta,
        "spec": {"attacher": DRIVER, "nodeName": node,
            "source": {"persistentVolumeName": pv}},
        "status": status
    }));
}

/// A Multi-Attach event of the attach/detach controller on pod `ns/name` (its real UID), in the
/// words `reportMultiAttachError` writes.
fn multi_attach_event(cp: &ControlPlane, ns: &str, name: &str, pv: &str, holders: &str) {
    let p = cp.get("pod", Some(ns), name);
    cp.create(&json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.181f2c3a5b6d7e80"), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name,
            "uid": p["metadata"]["uid"]},
        "reason": "FailedAttachVolume", "type": "Warning", "count": 1,
        "message": format!("Multi-Attach error for volume \"{pv}\" Volume is already used by pod(s) {holders}"),
        "firstTimestamp": ago(120), "lastTimestamp": ago(120),
        "source": {"component": "attachdetach-controller"}
    }));
}

/// Wait until the server's clock has passed `secs` since the object's creationTimestamp (a
/// condition on the object, not a sleep of a guessed length).
fn wait_older_than(cp: &ControlPlane, kind: &str, name: &str, secs: i64) {
    let o = cp.get(kind, None, name);
    let created =
        plugin::time::parse_rfc3339_secs(o["metadata"]["creationTimestamp"].as_str().unwrap())
            .unwrap();
    e2e::fuse::wait_until(
        &format!("{kind} {name} to be older than {secs} s"),
        Duration::from_secs(10),
        || plugin::time::now_secs() - created > secs,
    );
}

#[test]
fn healthy_attachments_are_ok_named_by_claim_and_pods_and_none_says_zero() {
    let cp = cp();
    let n = ControlPlane::unique("worker-04");
    let empty = ControlPlane::unique("worker-07");
    let ns = cp.namespace("media");
    let volume = ControlPlane::unique("pvc-81b676e6");
    let a = ControlPlane::unique("csi-ok");
    node(cp, &n, "True", 86400);
    node(cp, &empty, "True", 86400);
    pv(cp, &volume, &ns, "config");
    pod(cp, &ns, "radarr-0", &n, "config", "Running");
    va(cp, &a, &n, &volume, json!({"attached": true}), true);
    let out = check(cp, &["--node", &n, "-v"]);
    out.assert_protocol(NAME).assert_status(NAME, 0);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} OK - 1 VolumeAttachment on node {n} (1 attached), none held by a gone or NotReady node"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "[OK] PVC {ns}/config ({volume}): VolumeAttachment {a} attached to node {n} (Ready); used by pod {ns}/radarr-0 (Running on {n})"
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("attachments"), Some(1.0));
    assert_eq!(out.perf("attached"), Some(1.0));
    // A node with no attachment: OK, saying 0.
    let out = check(cp, &["--node", &empty]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} OK - 0 VolumeAttachments on node {empty} (0 attached)"
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("attachments"), Some(0.0));
    // A name that is no node and no attachment's: UNKNOWN, never an empty OK.
    let out = check(cp, &["--node", "no-such-node-va"]);
    out.assert_status(NAME, 3);
    assert!(out.stdout.contains("no node 'no-such-node-va'"), "{out:?}");
}

#[test]
fn an_attachment_held_by_a_gone_node_is_critical() {
    let cp = cp();
    let gone = ControlPlane::unique("worker-09");
    let ns = cp.namespace("media");
    let volume = ControlPlane::unique("pvc-gone");
    let a = ControlPlane::unique("csi-gone");
    pv(cp, &volume, &ns, "config");
    va(cp, &a, &gone, &volume, json!({"attached": true}), true);
    let out = check(cp, &["--node", &gone]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().starts_with(&format!(
            "{NAME} CRITICAL - 1 of 1 VolumeAttachment on node {gone}: PVC {ns}/config ({volume}) held by gone node {gone}"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "next: `kubectl describe volumeattachment {a}`; `kubectl get pods -A -o wide --field-selector spec.nodeName={gone}`"
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("node_gone"), Some(1.0));
    let out = check(cp, &["--node", &gone, "--format", "json"]);
    assert_eq!(
        out.signals(),
        vec![("attachment_node_gone".into(), "CRITICAL".into())]
    );
    let f = out.finding("attachment_node_gone");
    assert_eq!(f["subject"]["node"], json!(gone));
    assert_eq!(f["subject"]["pv"], json!(volume));
    assert_eq!(f["subject"]["namespace"], json!(ns));
    assert_eq!(f["subject"]["pvc"], "config");
    assert_eq!(f["subject"]["driver"], DRIVER);
    // Per attachment in Prometheus too.
    let out = check(cp, &["--node", &gone, "--format", "prometheus"]);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("k8s_storage_check_finding{")
                && l.contains("signal=\"attachment_node_gone\"")
                && l.contains(&format!("pv=\"{volume}\""))
                && l.contains(&format!("node=\"{gone}\""))),
        "{out:?}"
    );
}

#[test]
fn an_attachment_on_a_node_not_ready_past_stuck_after_is_critical() {
    let cp = cp();
    let down = ControlPlane::unique("worker-04");
    let flaky = ControlPlane::unique("worker-05");
    let ns = cp.namespace("media");
    let (v1, v2) = (
        ControlPlane::unique("pvc-down"),
        ControlPlane::unique("pvc-flaky"),
    );
    let (a1, a2) = (
        ControlPlane::unique("csi-down"),
        ControlPlane::unique("csi-flaky"),
    );
    node(cp, &down, "Unknown", 3600);
    node(cp, &flaky, "False", 60);
    pv(cp, &v1, &ns, "config");
    pv(cp, &v2, &ns, "data");
    pod(cp, &ns, "radarr-0", &down, "config", "Running");
    va(cp, &a1, &down, &v1, json!({"attached": true}), true);
    va(cp, &a2, &flaky, &v2, json!({"attached": true}), true);
    let out = check(cp, &["--node", &down]);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout.contains(&format!(
            "[CRITICAL] PVC {ns}/config ({v1}): VolumeAttachment {a1} attached to node {down}, which is NotReady (Ready=Unknown NodeStatusUnknown: Kubelet stopped posting node status.) for 1h"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(&format!(
            "`kubectl taint nodes {down} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`"
        )),
        "{out:?}"
    );
    assert_eq!(out.perf("node_not_ready"), Some(1.0));
    // NotReady for a minute: within --stuck-after (5m), OK saying so; past a shorter one, CRITICAL.
    let out = check(cp, &["--node", &flaky, "-v"]);
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains("(within --stuck-after 5m)"), "{out:?}");
    let out = check(
        cp,
        &["--node", &flaky, "--stuck-after", "30s", "--format", "json"],
    );
    assert_eq!(
        out.signals(),
        vec![("attachment_node_not_ready".into(), "CRITICAL".into())]
    );
}

#[test]
fn a_pending_attach_warns_with_its_attach_error_and_pages_past_c() {
    let cp = cp();
    let n = ControlPlane::unique("worker-05");
    let ns = cp.namespace("media");
    let volume = ControlPlane::unique("pvc-attach");
    let a = ControlPlane::unique("csi-attach");
    node(cp, &n, "True", 86400);
    pv(cp, &volume, &ns, "config");
    pod(cp, &ns, "radarr-1", &n, "config", "Pending");
    let err = "rpc error: code = DeadlineExceeded desc = context deadline exceeded";
    va(
        cp,
        &a,
        &n,
        &volume,
        json!({"attached": false, "attachError": {"time": ago(0), "message": err}}),
        false,
    );
    // Just created: within --stuck-after.
    let out = check(cp, &["--node", &n, "-v"]);
    out.assert_status(NAME, 0);
    assert!(
        out.stdout
            .contains(&format!("attach to node {n} pending for")),
        "{out:?}"
    );
    // Past a --stuck-after of 0s: WARNING, naming the driver's error and the waiting pod.
    let out = check(cp, &["--node", &n, "--stuck-after", "0s"]);
    out.assert_status(NAME, 1);
    assert!(
        out.stdout.contains(&format!(
            "[WARNING] PVC {ns}/config ({volume}): VolumeAttachment {a}: attach to node {n} pending for"
        )) && out.stdout.contains(&format!(
            "attachError: {err}; used by pod {ns}/radarr-1 (Pending on {n}) (past --stuck-after 0s)"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("`kubectl get csinode {n} -o yaml`"))
            && out
                .stdout
                .contains(&format!("`kubectl -n {ns} describe pod radarr-1`")),
        "{out:?}"
    );
    assert_eq!(out.perf("attach_pending"), Some(1.0));
    // Past -c: CRITICAL.
    wait_older_than(cp, "volumeattachment", &a, 1);
    let out = check(
        cp,
        &[
            "--node",
            &n,
            "--stuck-after",
            "0s",
            "-c",
            "1s",
            "--format",
            "json",
        ],
    );
    assert_eq!(
        out.signals(),
        vec![("attach_pending".into(), "CRITICAL".into())],
        "{out:?}"
    );
    assert!(
        out.finding("attach_pending")["text"]
            .as_str()
            .unwrap()
            .ends_with("(past -c 1s)"),
        "{out:?}"
    );
}

#[test]
fn a_pending_detach_warns_with_its_detach_error() {
    let cp = cp();
    let n = ControlPlane::unique("worker-04");
    let ns = cp.namespace("media");
    let volume = ControlPlane::unique("pvc-detach");
    let a = ControlPlane::unique("csi-detach");
    node(cp, &n, "True", 86400);
    pv(cp, &volume, &ns, "config");
    let err = "rpc error: code = Internal desc = volume is still mounted on the node";
    va(
        cp,
        &a,
        &n,
        &volume,
        json!({"attached": true, "detachError": {"time": ago(0), "message": err}}),
        true,
    );
    // The attach/detach controller asks for the detach by deleting it; the external-attacher's
    // finalizer keeps it while it is attached.
    cp.kubectl(&["delete", "volumeattachment", &a, "--wait=false"], None);
    let o = cp.get("volumeattachment", None, &a);
    assert!(o["metadata"]["deletionTimestamp"].is_string(), "{o}");
    let out = check(cp, &["--node", &n, "--stuck-after", "0s"]);
    out.assert_status(NAME, 1);
    assert!(
        out.stdout.contains(&format!(
            "[WARNING] PVC {ns}/config ({volume}): VolumeAttachment {a}: detach from node {n} pending for"
        )) && out.stdout.contains(&format!("detachError: {err}; no pod uses the claim")),
        "{out:?}"
    );
    assert_eq!(out.perf("detach_pending"), Some(1.0));
    let out = check(
        cp,
        &["--node", &n, "--stuck-after", "0s", "--format", "json"],
    );
    assert_eq!(
        out.signals(),
        vec![("detach_pending".into(), "WARNING".into())]
    );
    // The external-attacher done: finalizer gone, the attachment gone, OK again.
    cp.kubectl(
        &[
            "patch",
            "volumeattachment",
            &a,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
        None,
    );
    let out = check(cp, &["--node", &n, "--stuck-after", "0s"]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("attachments"), Some(0.0));
}

#[test]
fn a_multi_attach_error_names_the_waiting_pod_and_the_node_and_pod_that_hold_the_volume() {
    let cp = cp();
    let holder = ControlPlane::unique("worker-04");
    let waiter = ControlPlane::unique("worker-05");
    let ns = cp.namespace("media");
    let volume = ControlPlane::unique("pvc-multi");
    let a = ControlPlane::unique("csi-multi");
    node(cp, &holder, "True", 86400);
    node(cp, &waiter, "True", 86400);
    pv(cp, &volume, &ns, "config");
    pod(cp, &ns, "web-0", &holder, "config", "Running");
    pod(cp, &ns, "web-1", &waiter, "config", "Pending");
    va(cp, &a, &holder, &volume, json!({"attached": true}), true);
    multi_attach_event(cp, &ns, "web-1", &volume, "web-0");
    for n in [&waiter, &holder] {
        let out = check(cp, &["--node", n]);
        out.assert_status(NAME, 2);
        assert!(
            out.stdout.contains(&format!(
                "[CRITICAL] pod {ns}/web-1 waits on node {waiter}: Multi-Attach error for PVC {ns}/config ({volume}), held on node {holder} by pod {ns}/web-0 (event "
            )),
            "--node {n}: {out:?}"
        );
        assert!(
            out.stdout.contains(&format!(
                "next: `kubectl -n {ns} describe pod web-1`; `kubectl describe volumeattachment {a}`; `kubectl -n {ns} get pod web-0 -o wide`"
            )),
            "{out:?}"
        );
        assert_eq!(out.perf("multi_attach"), Some(1.0));
    }
    let out = check(cp, &["--node", &waiter, "--format", "json"]);
    assert_eq!(
        out.signals(),
        vec![("multi_attach".into(), "CRITICAL".into())]
    );
    let f = out.finding("multi_attach");
    assert_eq!(f["subject"]["pod"], "web-1");
    assert_eq!(f["subject"]["node"], json!(waiter));
    assert_eq!(f["subject"]["pvc"], "config");
    assert_eq!(f["subject"]["pv"], json!(volume));
    // The pod got its volume (the old one gone, the kubelet started it): over, though the event
    // stays until it expires.
    cp.patch_status(
        &json!({"kind": "Pod", "metadata": {"name": "web-1", "namespace": ns}}),
        &json!({"phase": "Running"}),
    );
    let out = check(cp, &["--node", &waiter]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("multi_attach"), Some(0.0));
}

#[test]
fn an_identity_granted_nothing_is_unknown_naming_the_rule() {
    let cp = cp();
    let out = check_as(cp, User::Nobody, &[]);
    out.assert_status(NAME, 3);
    assert!(
        out.stdout.contains("HTTP 403")
            && out.stdout.contains(
                "{apiGroups: [\"storage.k8s.io\"], resources: [\"volumeattachments\"], verbs: [\"list\"]}"
            ),
        "{out:?}"
    );
}
