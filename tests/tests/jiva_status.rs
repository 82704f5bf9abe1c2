//! check_jiva_rep_crashloop and Jiva's own status (issue 30) against the real kube-apiserver with
//! jiva-operator's real JivaVolume CRD applied (tests/fixtures/jivavolumes.openebs.io.yaml, v3.6.0):
//! a volume read-only at its target while every pod is Running, an ERR replica, a lost quorum, the
//! controllers' NoExecute tolerations (`--min-toleration`, the storage cascade's mitigation; the
//! server's own DefaultTolerationSeconds admission adds the 300 s), a cluster without the CRD, and
//! an identity without permission.

use e2e::apiserver::fixtures::{jiva_replica, running, Rep, JIVA_CRD};
use e2e::apiserver::KubeCa;
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::Output;
use serde_json::json;
use std::sync::OnceLock;

const NAME: &str = "JIVA_REP_CRASHLOOP";
const BIN: &str = "check_jiva_rep_crashloop";

/// The shared plane with deploy/rbac.yaml and the JivaVolume CRD (established) applied once.
fn cp() -> &'static ControlPlane {
    static CRD: OnceLock<()> = OnceLock::new();
    let cp = ControlPlane::with_rbac();
    CRD.get_or_init(|| apply_crd(cp));
    cp
}

fn apply_crd(cp: &ControlPlane) {
    cp.apply_crd(JIVA_CRD, "jivavolumes.openebs.io");
}

fn check_with(kc: &std::path::Path, args: &[&str]) -> Output {
    e2e::Cmd::check(BIN)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .run()
}

fn check(cp: &ControlPlane, ns: &str, args: &[&str]) -> Output {
    let mut a = vec!["--namespace", ns];
    a.extend(args);
    check_with(&cp.kubeconfig(User::Checks), &a)
}

/// A Jiva volume in `ns`: its PV (claim media/radarr-config), its controller pod (tolerations as
/// given; `None`: none, the server adds its default), three Running replica pods, and its
/// JivaVolume with `status` and replica `modes` (replication factor 3).
struct Vol {
    ns: String,
    pv: String,
}

fn volume(
    cp: &ControlPlane,
    prefix: &str,
    status: &str,
    modes: &[&str],
    tolerations: Option<i64>,
) -> Vol {
    let ns = cp.namespace(prefix);
    let pv = ControlPlane::unique("pvc-7f3a");
    cp.create(
        &json!({"apiVersion":"v1","kind":"PersistentVolume","metadata":{"name":pv},
        "spec":{"capacity":{"storage":"5Gi"},"accessModes":["ReadWriteOnce"],
            "csi":{"driver":"jiva.csi.openebs.io","volumeHandle":pv},
            "claimRef":{"namespace":"media","name":"radarr-config"}}}),
    );
    let mut ctrl = running(
        &ns,
        &format!("{pv}-jiva-ctrl-6b7c9d8f5-abcde"),
        "k8s02",
        3600,
    );
    ctrl["metadata"]["labels"] = json!({"openebs.io/cas-type":"jiva",
        "openebs.io/component":"jiva-controller","openebs.io/persistent-volume":pv});
    if let Some(s) = tolerations {
        ctrl["spec"]["tolerations"] = json!([
            {"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":s},
            {"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":s}]);
    }
    let mut pods = vec![ctrl];
    for i in 0..3 {
        let mut p = jiva_replica(&pv, i, &format!("k8s0{}", i + 1), 30 * 86400, Rep::Healthy);
        p["metadata"]["namespace"] = json!(ns);
        pods.push(p);
    }
    cp.create_all(&pods);
    let jv = json!({"apiVersion":"openebs.io/v1","kind":"JivaVolume",
        "metadata":{"name":pv,"namespace":ns,"labels":{"openebs.io/component":"jiva-volume","openebs.io/persistent-volume":pv}},
        "spec":{"pv":pv,"capacity":"5Gi","accessType":"mount",
            "iscsiSpec":{"iqn":format!("iqn.2016-09.com.openebs.jiva:{pv}"),"targetIP":"10.152.183.40","targetPort":3260},
            "policy":{"target":{"replicationFactor":3}},"desiredReplicationFactor":3},
        "status":{"status":status,"replicaCount":modes.len(),"phase":if status == "RW" {"Ready"} else {"Syncing"},
            "replicaStatus":modes.iter().enumerate().map(|(i, m)| json!({"address":format!("tcp://10.1.{i}.7:9502"),"mode":m})).collect::<Vec<_>>()}});
    // No status subresource in this CRD (`subresources: {}`): the operator writes the status with
    // the object, so it is created with it.
    cp.kubectl(&["create", "-f", "-"], Some(&jv.to_string()));
    let got = cp.get("jivavolume", Some(&ns), &pv);
    assert_eq!(got["status"]["status"], status, "{got}");
    Vol { ns, pv }
}

fn next_line(out: &Output, signal: &str) -> String {
    let l = out
        .stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("next: ") && l.ends_with(&format!("docs/runbooks/{signal}.md")))
        .unwrap_or_else(|| panic!("no next: line for {signal}: {out:?}"))
        .to_string();
    assert!(!l.contains('|'), "{l}");
    l
}

#[test]
fn a_healthy_volume_with_long_tolerations_is_ok() {
    let cp = cp();
    let v = volume(cp, "jiva-ok", "RW", &["RW", "RW", "RW"], Some(600));
    let out = check(cp, &v.ns, &["--min-toleration", "600s", "-v"]);
    out.assert_status(NAME, 0);
    assert!(
        out.stdout.contains(&format!(
            // A healthy run lists no PVs (no extra request): the replicas' claim label names it.
            "[OK] PVC coder-workspace-data ({}): Jiva target RW, 3/3 replicas RW",
            v.pv
        )),
        "{out:?}"
    );
    assert!(!out.stdout.contains("evicted after"), "{out:?}");
}

#[test]
fn read_only_at_the_target_with_every_pod_running_is_critical() {
    let cp = cp();
    let v = volume(cp, "jiva-ro", "RO", &["RW", "RW", "RW"], Some(600));
    let out = check(cp, &v.ns, &[]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains(&format!(
            "PVC media/radarr-config ({}): Jiva target RO (3/3 replicas RW)",
            v.pv
        )),
        "{out:?}"
    );
    // Every pod is Running and Ready: only Jiva's own status knows.
    assert!(!out.stdout.contains("crash-looping"), "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("pods: {}-jiva-ctrl-6b7c9d8f5-abcde", v.pv)),
        "{out:?}"
    );
    let next = next_line(&out, "jiva_target_ro");
    assert!(
        next.contains(&format!(
            "kubectl -n {} logs deploy/{}-jiva-ctrl -c jiva-controller",
            v.ns, v.pv
        )),
        "{next}"
    );
}

#[test]
fn an_err_replica_is_a_warning() {
    let cp = cp();
    let v = volume(cp, "jiva-err", "RW", &["RW", "RW", "ERR"], Some(600));
    let out = check(cp, &v.ns, &[]);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line()
            .contains("2/3 replicas RW (ERR: tcp://10.1.2.7:9502)"),
        "{out:?}"
    );
    let next = next_line(&out, "jiva_volume_degraded");
    assert!(
        next.contains(&format!("kubectl -n {} get jivavolume {}", v.ns, v.pv)),
        "{next}"
    );
}

#[test]
fn a_lost_quorum_is_critical() {
    let cp = cp();
    let v = volume(cp, "jiva-quorum", "RW", &["RW", "ERR", "WO"], Some(600));
    let out = check(cp, &v.ns, &[]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("1/3 replicas RW, quorum lost (needs 2; status RW)"),
        "{out:?}"
    );
    next_line(&out, "jiva_quorum_lost");
}

#[test]
fn the_default_300s_toleration_warns_under_min_toleration_600s() {
    let cp = cp();
    // No tolerations given: the real server's DefaultTolerationSeconds admission adds 300 s.
    let v = volume(cp, "jiva-tol", "RW", &["RW", "RW", "RW"], None);
    let ctrl = format!("{}-jiva-ctrl-6b7c9d8f5-abcde", v.pv);
    let pod = cp.get("pod", Some(&v.ns), &ctrl);
    let tols = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tols.iter()
            .any(|t| t["key"] == "node.kubernetes.io/not-ready"
                && t["tolerationSeconds"] == json!(300)),
        "{pod}"
    );
    // Off by default: the same volume is OK without the option.
    check(cp, &v.ns, &[]).assert_status(NAME, 0);
    let out = check(cp, &v.ns, &["--min-toleration", "600s"]);
    out.assert_status(NAME, 1);
    assert!(
        out.stdout.contains(&format!(
            "[WARNING] {}/{ctrl} on k8s02: controller (iSCSI target) of PVC media/radarr-config ({}) evicted after node.kubernetes.io/not-ready 5m, node.kubernetes.io/unreachable 5m of node outage (NoExecute), less than --min-toleration 10m",
            v.ns, v.pv
        )),
        "{out:?}"
    );
    let next = next_line(&out, "toleration_short");
    assert!(
        next.contains(&format!(
            "kubectl -n {} get deploy {}-jiva-ctrl",
            v.ns, v.pv
        )),
        "{next}"
    );
    // 300 s meets --min-toleration 300s.
    check(cp, &v.ns, &["--min-toleration", "300s"]).assert_status(NAME, 0);
}

#[test]
fn an_identity_without_jivavolumes_gets_unknown_naming_the_rule() {
    let cp = cp();
    let v = volume(cp, "jiva-rbac", "RW", &["RW", "RW", "RW"], Some(600));
    let user = cp.user_with_rules(
        &json!([{"apiGroups":[""],"resources":["pods","persistentvolumes"],"verbs":["list"]}]),
        &["list", "pods", "-A"],
    );
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user));
    let out = check_with(&kc, &["--namespace", &v.ns]);
    out.assert_status(NAME, 3);
    assert!(
        out.stdout.contains(
            "{apiGroups: [\"openebs.io\"], resources: [\"jivavolumes\"], verbs: [\"list\"]}"
        ),
        "{out:?}"
    );
    next_line(&out, "jiva_status_unreadable");
}

#[test]
fn without_the_crd_it_says_so() {
    // A plane of its own: the shared one has the CRD.
    let cp = ControlPlane::start();
    cp.apply_rbac();
    let ns = cp.namespace("jiva-nocrd");
    let pv = "pvc-0b1c";
    let mut pods = Vec::new();
    for i in 0..3 {
        let mut p = jiva_replica(pv, i, "k8s01", 86400, Rep::Healthy);
        p["metadata"]["namespace"] = json!(ns);
        pods.push(p);
    }
    cp.create_all(&pods);
    let kc = cp.kubeconfig(User::Checks);
    // auto: the pods are judged, and the output says Jiva's own status was not read.
    let out = check_with(&kc, &["--namespace", &ns]);
    out.assert_status(NAME, 0);
    assert!(
        out.stdout.contains(
            "Jiva's own status not read: the API server does not serve jivavolumes.openebs.io v1"
        ),
        "{out:?}"
    );
    // required: UNKNOWN with the reason.
    let out = check_with(&kc, &["--namespace", &ns, "--jiva-status", "required"]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains("Jiva's own status not read"),
        "{out:?}"
    );
    assert!(out.stdout.contains("--jiva-status required"), "{out:?}");
    next_line(&out, "jiva_status_unreadable");
}
