//! check_jiva_rep_crashloop end to end: the incident's crash-looping `*-jiva-rep-1` through
//! `kubectl get pods -o json` and through the real kube-apiserver (`e2e::control_plane`: the
//! replicas created through the API, their statuses through the status subresource, real
//! pagination, the real 401/403; requests read from the server's audit log). The loopback server
//! remains for a 500, truncated or garbage answers and a hang.

use e2e::apiserver::fixtures::{jiva_incident_replicas, jiva_replica, kubectl_list, running, Rep};
use e2e::apiserver::{ApiServer, Fault, KubeAuth, KubeCa};
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{Cmd, Output};
use std::time::Duration;

const NAME: &str = "JIVA_REP_CRASHLOOP";
const BIN: &str = "check_jiva_rep_crashloop";
const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";
const DAY: i64 = 86400;

fn check(args: &[&str]) -> Output {
    Cmd::check(BIN).without_host_credentials().args(args).run()
}

fn incident() -> Vec<serde_json::Value> {
    let mut pods = jiva_incident_replicas(PV);
    pods.extend([
        // Not replicas: the operator, a controller, and a workload elsewhere.
        running(
            "openebs",
            "openebs-jiva-operator-5d8f7c9b6-qwert",
            "k8s01",
            60 * DAY,
        ),
        running(
            "openebs",
            &format!("{PV}-jiva-ctrl-6b7c9d8f5-abcde"),
            "k8s02",
            3600,
        ),
        running("media", "radarr-0", "k8s02", 3600),
    ]);
    pods
}

#[test]
fn the_incident_replica_pages_via_pods_json() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pods.json");
    std::fs::write(
        &p,
        serde_json::to_vec_pretty(&kubectl_list(incident())).unwrap(),
    )
    .unwrap();
    let out = check(&["--pods-json", p.to_str().unwrap()]);
    out.assert_status(NAME, 2);
    assert!(
        // The volume is named by its claim (#21): the legacy label gives its name.
        out.first_line().starts_with(&format!("{NAME} CRITICAL - {PV}-jiva-rep-1 crash-looping (92 restarts, unhealthy 14d); PVC coder-workspace-data ({PV}): 2/3 replicas healthy")),
        "{out:?}"
    );
    assert_eq!(out.perf("replicas"), Some(3.0));
    assert_eq!(out.perf("crashlooping"), Some(1.0));
    assert_eq!(out.perf("max_restarts"), Some(92.0));
    assert_eq!(out.perf("degraded_volumes"), Some(1.0));
    assert!(out.stdout.contains(&format!("[CRITICAL] openebs/{PV}-jiva-rep-1 on k8s03: CrashLoopBackOff, 92 restarts, unhealthy 14d, last exit 1 (Error)")), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "[WARNING] PVC coder-workspace-data ({PV}): 2/3 replicas healthy (degraded redundancy)"
        )),
        "{out:?}"
    );
}

#[test]
fn a_healthy_volume_is_ok() {
    let pods: Vec<_> = (0..3)
        .map(|i| jiva_replica(PV, i, &format!("k8s0{}", i + 1), 30 * DAY, Rep::Healthy))
        .collect();
    let doc = serde_json::to_vec(&kubectl_list(pods)).unwrap();
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-", "-v"])
        .stdin(doc)
        .run();
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("3 replicas of 1 volume healthy in namespace openebs"),
        "{out:?}"
    );
    assert_eq!(out.perf("crashlooping"), Some(0.0));
    assert_eq!(out.perf("degraded_volumes"), Some(0.0));
    assert!(
        out.stdout.contains(&format!(
            "[OK] openebs/{PV}-jiva-rep-0 on k8s01: Ready, 0 restarts"
        )),
        "{out:?}"
    );
}

#[test]
fn a_recent_short_crash_loop_warns_and_the_majority_rule_pages() {
    let pods = vec![
        jiva_replica(PV, 0, "k8s01", DAY, Rep::Healthy),
        jiva_replica(
            PV,
            1,
            "k8s02",
            DAY,
            Rep::CrashLoop {
                restarts: 2,
                unready_secs: 300,
            },
        ),
        jiva_replica(PV, 2, "k8s03", DAY, Rep::Healthy),
    ];
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-"])
        .stdin(serde_json::to_vec(&kubectl_list(pods.clone())).unwrap())
        .run();
    out.assert_status(NAME, 1);
    let mut lost = pods;
    lost[2] = jiva_replica(
        PV,
        2,
        "k8s03",
        DAY,
        Rep::CrashLoop {
            restarts: 1,
            unready_secs: 60,
        },
    );
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-"])
        .stdin(serde_json::to_vec(&kubectl_list(lost)).unwrap())
        .run();
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains(&format!(
            "PVC coder-workspace-data ({PV}): 1/3 replicas healthy"
        )),
        "{out:?}"
    );
    assert!(out.stdout.contains("no healthy majority"), "{out:?}");
}

/// `pods` moved to namespace `ns` (the fixtures carry the incident's `openebs`).
fn in_ns(pods: Vec<serde_json::Value>, ns: &str) -> Vec<serde_json::Value> {
    pods.into_iter()
        .map(|mut p| {
            p["metadata"]["namespace"] = serde_json::json!(ns);
            p
        })
        .collect()
}

#[test]
fn api_token_client_cert_and_pagination() {
    let cp = ControlPlane::with_rbac();
    // Jiva's own status (issue 30) is read where the JivaVolume CRD is served.
    cp.apply_crd(e2e::apiserver::fixtures::JIVA_CRD, "jivavolumes.openebs.io");
    let ns = cp.namespace("openebs");
    let mut pods = incident();
    // 200 more healthy volumes: 600 replicas, two pages.
    for v in 0..200 {
        for i in 0..3 {
            pods.push(jiva_replica(
                &format!("pvc-{v:08x}-0000-4000-8000-000000000000"),
                i,
                "k8s01",
                DAY,
                Rep::Healthy,
            ));
        }
    }
    // The incident's media pod stays in its own namespace; the rest go to this test's.
    let (media, rest): (Vec<_>, Vec<_>) = pods
        .into_iter()
        .partition(|p| p["metadata"]["namespace"] == "media");
    let _ = media;
    let mut rest = in_ns(rest, &ns);
    for p in &mut rest {
        // The fixture labels a pod app=<its name>; the real server refuses a label value over
        // 63 bytes (the controller pod's name is longer): what a jiva-operator controller carries.
        if p["metadata"]["labels"]["app"]
            .as_str()
            .is_some_and(|a| a.len() > 63)
        {
            p["metadata"]["labels"]["app"] = serde_json::json!("jiva-controller");
        }
    }
    cp.create_all(&rest);
    let token = ("token", User::Checks);
    let cert_user = ControlPlane::unique("nagios");
    cp.grant_checks_role(&cert_user);
    let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";
    let pods_path = format!("/api/v1/namespaces/{ns}/pods");
    for (what, kc, user) in [
        (
            token.0,
            cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(token.1)),
            sa.to_string(),
        ),
        (
            "client certificate files",
            cp.kubeconfig_with(None, KubeCa::File, Auth::CertFiles(cert_user.clone())),
            cert_user.clone(),
        ),
    ] {
        let before = cp.requests(&user, &pods_path).len();
        let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--namespace", &ns]);
        out.assert_status(NAME, 2);
        assert_eq!(out.perf("replicas"), Some(603.0), "{what}: {out:?}");
        assert_eq!(out.perf("degraded_volumes"), Some(1.0), "{what}: {out:?}");
        assert!(
            out.first_line()
                .contains(&format!("{PV}-jiva-rep-1 crash-looping (92 restarts")),
            "{what}: {out:?}"
        );
        // Two pages of pods (the second with the server's continue token).
        let pages = &cp.requests(&user, &pods_path)[before..];
        assert_eq!(pages.len(), 2, "{what}: two pages: {pages:?}");
        assert!(pages.iter().all(|r| r.verb == "list"), "{pages:?}");
        assert!(pages[1].q("continue").is_some(), "{pages:?}");
    }
    // The certificate's user exists for this test only: everything it asked, in order: two pages
    // of pods, the JivaVolume API's discovery and one list of JivaVolumes, then (something is
    // unhealthy) one list of PVs to name the claims.
    let jvs = format!("/apis/openebs.io/v1/namespaces/{ns}/jivavolumes");
    let all: Vec<String> = cp
        .audit()
        .iter()
        .filter(|e| e["user"]["username"] == cert_user.as_str())
        .map(|e| {
            let uri = e["requestURI"].as_str().unwrap_or("");
            uri.split('?').next().unwrap().to_string()
        })
        .collect();
    assert_eq!(
        all,
        [
            pods_path.as_str(),
            pods_path.as_str(),
            "/apis/openebs.io/v1",
            jvs.as_str(),
            "/api/v1/persistentvolumes"
        ],
        "two pages, the JivaVolumes and the PVs"
    );
}

#[test]
fn api_refusals_are_unknown() {
    let cp = ControlPlane::with_rbac();
    let ns = cp.namespace("openebs");
    cp.create_all(&in_ns(jiva_incident_replicas(PV), &ns));
    for (what, kc, wants) in [
        (
            "403",
            cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Nobody)),
            vec![
                "HTTP 403".to_string(),
                format!("resources: [\"pods\"], verbs: [\"list\"]}} in a Role in namespace {ns}"),
                format!("in the namespace \"{ns}\""),
                "User \"nobody\" cannot list resource \"pods\"".to_string(),
            ],
        ),
        (
            "401",
            cp.kubeconfig_with(None, KubeCa::Inline, Auth::WrongToken),
            vec!["HTTP 401".to_string(), "credentials rejected".to_string()],
        ),
    ] {
        let out = check(&[
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--namespace",
            &ns,
            "-t",
            "2",
        ]);
        out.assert_status(NAME, 3);
        for w in wants {
            assert!(
                out.first_line().contains(&w),
                "{what}: want {w:?} in {out:?}"
            );
        }
        assert!(
            out.elapsed < Duration::from_secs(7),
            "{what}: took {:?}",
            out.elapsed
        );
    }
}

/// The failures a real server does not produce on demand, on the loopback server.
#[test]
fn api_errors_are_unknown() {
    let s = ApiServer::start();
    s.set("pods", incident());
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("t".into()));
    let kc = kc.to_str().unwrap();
    for (fault, wants) in [
        (Fault::Http(500), vec!["HTTP 500"]),
        (Fault::Truncated, vec!["truncated JSON"]),
        (Fault::Garbage, vec!["invalid JSON"]),
        (Fault::Slow(Duration::from_secs(30)), vec!["timed out"]),
    ] {
        s.heal();
        s.fail(fault.clone());
        let out = check(&["--kubeconfig", kc, "-t", "2"]);
        out.assert_status(NAME, 3);
        for w in wants {
            assert!(
                out.first_line().contains(w),
                "{fault:?}: want {w:?} in {out:?}"
            );
        }
        assert!(
            out.elapsed < Duration::from_secs(7),
            "{fault:?}: took {:?}",
            out.elapsed
        );
    }
}
