//! check_watch_cache end to end: the release binary writes its canary to the loopback HTTPS API
//! server and reads it back with resourceVersion=0 from a watch cache that is healthy, delayed or
//! frozen (tests/src/apiserver/watchcache.rs); RBAC and missing-ConfigMap failures; two API
//! servers of one "cluster", one of them frozen.

use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{ApiServer, Fault, KubeAuth, KubeCa};
use e2e::{Cmd, Output};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const NAME: &str = "WATCH_CACHE";
const BIN: &str = "check_watch_cache";
const NS: &str = "kube-system";
const CM: &str = "k8s-storage-checks-canary";
const ANNOTATION: &str = "k8s-storage-checks/canary-nonce";

/// Run the check with a clean environment: no $KUBECONFIG or in-cluster hints from the test host.
fn check(kubeconfig: &Path, args: &[&str]) -> Output {
    Cmd::check(BIN)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .run()
}

/// A server with the canary ConfigMap (when `existing`) served through a cache in `mode`.
fn cluster(
    mode: CacheMode,
    existing: bool,
) -> (ApiServer, Arc<ConfigMapStore>, std::path::PathBuf) {
    let srv = ApiServer::start();
    let store = ConfigMapStore::new();
    if existing {
        store.put(NS, CM, json!({"purpose": "canary"}));
    }
    srv.configmaps(&store, mode);
    let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("watch-t0ken".into()));
    (srv, store, kc)
}

fn nonce_in(store: &ConfigMapStore) -> Option<String> {
    store.get(NS, CM)?["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(|s| s.to_string())
}

#[test]
fn healthy_cache_is_ok_with_a_small_lag() {
    let (srv, store, kc) = cluster(CacheMode::Healthy, true);
    let out = check(&kc, &["-vv"]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().contains(&format!(
            "watch cache of {} reflected the canary write after",
            srv.url()
        )),
        "{out:?}"
    );
    let lag = out.perf("watch_cache_lag").expect("perfdata");
    assert!(lag < 5.0, "{out:?}");
    assert!(out.first_line().contains("watch_cache_lag="), "{out:?}");
    // The write: a merge-patch of the annotation; then RV=0 reads, consistent reads never.
    let nonce = nonce_in(&store).expect("the canary carries a nonce");
    assert!(out.stdout.contains(&nonce), "{out:?}");
    let reqs = srv.requests();
    let patch = reqs.iter().find(|r| r.method == "PATCH").expect("a PATCH");
    assert_eq!(
        patch.path,
        format!("/api/v1/namespaces/{NS}/configmaps/{CM}")
    );
    assert_eq!(patch.content_type, "application/merge-patch+json");
    let body: serde_json::Value = serde_json::from_slice(&patch.body).unwrap();
    assert_eq!(
        body,
        json!({"metadata": {"annotations": {ANNOTATION: nonce}}})
    );
    let gets: Vec<_> = reqs.iter().filter(|r| r.method == "GET").collect();
    assert!(!gets.is_empty());
    assert!(
        gets.iter().all(|r| r.q("resourceVersion") == Some("0")),
        "{gets:?}"
    );
    assert!(!reqs.iter().any(|r| r.method == "POST"));
    // A second run writes a fresh nonce.
    let out = check(&kc, &[]);
    out.assert_status(NAME, 0);
    assert_ne!(nonce_in(&store).unwrap(), nonce);
    assert_eq!(store.writes(), 3);
}

#[test]
fn delayed_cache_beyond_w_warns_with_the_delay_as_lag() {
    let (_srv, _store, kc) = cluster(CacheMode::Delayed(Duration::from_millis(1500)), true);
    let out = check(&kc, &["-w", "1s", "--deadline", "6s", "-t", "10"]);
    out.assert_status(NAME, 1);
    let lag = out.perf("watch_cache_lag").expect("perfdata");
    // The cache cannot show the write before its delay; it does show it well before the deadline.
    assert!((1.5..6.0).contains(&lag), "lag {lag}: {out:?}");
    assert!(out.first_line().contains("lagged"), "{out:?}");
    assert!(out.first_line().contains("(> 1s)"), "{out:?}");
    assert!(
        out.first_line().contains("watch_cache_lag=") && out.first_line().contains(";1;6;0"),
        "{out:?}"
    );

    // The same delay under -w is OK.
    let out = check(&kc, &["-w", "5s", "--deadline", "6s", "-t", "10"]);
    out.assert_status(NAME, 0);
    assert!(out.perf("watch_cache_lag").unwrap() >= 1.5, "{out:?}");
}

#[test]
fn frozen_cache_is_critical_within_the_deadline() {
    let (_srv, store, kc) = cluster(CacheMode::Frozen, true);
    let out = check(&kc, &["--deadline", "2s", "-t", "5"]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("did not reflect a write after 2s"),
        "{out:?}"
    );
    assert!(out.stdout.contains("frozen watch cache?"), "{out:?}");
    // It waited the deadline, not the whole -t.
    let waited = out.perf("watch_cache_lag").expect("perfdata");
    assert!((2.0..4.5).contains(&waited), "{out:?}");
    // The write itself went through.
    assert!(nonce_in(&store).is_some());
}

#[test]
fn forbidden_patch_is_unknown_with_the_role() {
    let (srv, _store, kc) = cluster(CacheMode::Healthy, true);
    srv.fail_when(|r| r.method == "PATCH", Fault::Http(403), None);
    let out = check(&kc, &[]);
    out.assert_status(NAME, 3);
    let l = out.first_line();
    assert!(
        l.contains(
            "refused to patch the canary ConfigMap kube-system/k8s-storage-checks-canary (HTTP 403"
        ),
        "{out:?}"
    );
    assert!(
        l.contains("cannot patch resource \"configmaps\""),
        "{out:?}"
    );
    assert!(l.contains("Role in namespace kube-system with rules: [{apiGroups: [\"\"], resources: [\"configmaps\"], resourceNames: [\"k8s-storage-checks-canary\"], verbs: [\"get\", \"patch\"]}]"), "{out:?}");
    assert!(!l.contains("watch_cache_lag"), "{out:?}");
    assert!(!srv.requests().iter().any(|r| r.method == "GET"));
}

#[test]
fn missing_configmap_needs_create() {
    let (srv, store, kc) = cluster(CacheMode::Healthy, false);
    let out = check(&kc, &[]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("canary ConfigMap kube-system/k8s-storage-checks-canary does not exist"),
        "{out:?}"
    );
    assert!(out.first_line().contains("--create"), "{out:?}");
    assert!(
        out.first_line()
            .contains("kubectl -n kube-system create configmap k8s-storage-checks-canary"),
        "{out:?}"
    );
    assert!(store.get(NS, CM).is_none());
    assert!(!srv.requests().iter().any(|r| r.method == "POST"));

    // --create makes it (with the nonce), and the cache shows it.
    let out = check(&kc, &["--create", "-v"]);
    out.assert_status(NAME, 0);
    let cm = store.get(NS, CM).expect("created");
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "k8s-storage-checks"
    );
    let nonce = nonce_in(&store).unwrap();
    assert!(
        out.stdout
            .contains(&format!("{ANNOTATION}={nonce}) created via")),
        "{out:?}"
    );
    let post = srv
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(post.path, format!("/api/v1/namespaces/{NS}/configmaps"));
    assert_eq!(post.content_type, "application/json");

    // Next run with --create just patches.
    let out = check(&kc, &["--create", "-v"]);
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains(") patched via"), "{out:?}");
}

#[test]
fn created_canary_missing_from_a_frozen_cache_is_critical() {
    let (_srv, store, kc) = cluster(CacheMode::Frozen, false);
    let out = check(&kc, &["--create", "--deadline", "2s", "-t", "5"]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line()
            .contains("did not reflect a write after 2s"),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("404: the cache does not have the ConfigMap yet"),
        "{out:?}"
    );
    assert!(store.get(NS, CM).is_some());
}

#[test]
fn forbidden_create_names_the_create_rule() {
    let (srv, _store, kc) = cluster(CacheMode::Healthy, false);
    srv.fail_when(|r| r.method == "POST", Fault::Http(403), None);
    let out = check(&kc, &["--create"]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("refused to create the canary ConfigMap"),
        "{out:?}"
    );
    assert!(
        out.first_line()
            .contains("{apiGroups: [\"\"], resources: [\"configmaps\"], verbs: [\"create\"]}"),
        "{out:?}"
    );
}

#[test]
fn two_api_servers_one_frozen() {
    let (a, store, kc) = cluster(CacheMode::Healthy, true);
    let b = a.start_peer();
    b.configmaps(&store, CacheMode::Frozen);
    let out = check(
        &kc,
        &[
            "--apiserver",
            &a.url(),
            "--apiserver",
            &b.url(),
            "--deadline",
            "2s",
            "-t",
            "5",
        ],
    );
    out.assert_status(NAME, 2);
    let l = out.first_line();
    assert!(
        l.contains(&format!(
            "1 of 2 API servers: {} did not reflect a write after 2s",
            b.url()
        )),
        "{out:?}"
    );
    assert!(
        !l.split(" | ").next().unwrap().contains(&a.url()),
        "{out:?}"
    );
    let la = format!("watch_cache_lag_127_0_0_1_{}", a.addr().port());
    let lb = format!("watch_cache_lag_127_0_0_1_{}", b.addr().port());
    assert!(out.perf(&la).unwrap() < 2.0, "{out:?}");
    assert!(out.perf(&lb).unwrap() >= 2.0, "{out:?}");
    // The write went to the first server only; each got its RV=0 reads.
    assert_eq!(
        a.requests().iter().filter(|r| r.method == "PATCH").count(),
        1
    );
    assert!(!b.requests().iter().any(|r| r.method == "PATCH"));
    assert!(
        b.requests()
            .iter()
            .filter(|r| r.method == "GET" && r.q("resourceVersion") == Some("0"))
            .count()
            >= 2
    );

    // Still frozen on the next run (a fresh nonce does not help).
    let out = check(
        &kc,
        &[
            "--apiserver",
            &a.url(),
            "--apiserver",
            &b.url(),
            "--deadline",
            "2s",
            "-t",
            "5",
        ],
    );
    out.assert_status(NAME, 2); // b is still frozen
                                // A healthy peer in its place: both OK.
    let b2 = a.start_peer();
    b2.configmaps(&store, CacheMode::Healthy);
    let out = check(&kc, &["--apiserver", &a.url(), "--apiserver", &b2.url()]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("all 2 API servers reflected the canary write"),
        "{out:?}"
    );
}

#[test]
fn t_shorter_than_the_deadline_is_refused() {
    let (srv, _store, kc) = cluster(CacheMode::Healthy, true);
    let out = check(&kc, &["-t", "20", "--deadline", "30s"]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("-t 20s leaves no room for --deadline 30s: give -t 32"),
        "{out:?}"
    );
    assert!(srv.requests().is_empty(), "nothing written");
    let help = Cmd::check(BIN).arg("--help").run();
    // The deadline is set in one place, the binary: 5s, inside the suite's usual -t.
    assert!(help.stdout.contains("[default: 5s]"), "{help:?}");
    assert!(help.stdout.contains("[default: 10]"), "{help:?}");
}
