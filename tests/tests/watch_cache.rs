//! check_watch_cache end to end.
//!
//! Against the real `kube-apiserver` (`e2e::control_plane`), reading through its real watch cache:
//! healthy; lagging and frozen (the plane's ConfigMaps reach etcd through
//! `e2e::control_plane::watch_stall`, a proxy that holds back or drops only etcd's watch stream,
//! so the cache stops following while writes through etcd still succeed — the incident, where
//! the datastore's feed to the watch cache broke under load); RBAC refusals by the real
//! authorizer for Roles cut from the shipped ones; a missing ConfigMap and `--create`.
//!
//! Against the loopback server (tests/src/apiserver/watchcache.rs), only what the real one does
//! not show: the exact bytes of the write (content type and body; the real server's audit log
//! records neither). Two API servers of one cluster, one frozen, are two real ones on one etcd
//! (`ControlPlane::start_peer_with_watch_stall`).

use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::control_plane::watch_stall::WatchStall;
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{Cmd, Output};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
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

/// The Role (and its RoleBinding) `deploy/rbac.yaml` ships for the canary, moved to namespace
/// `ns` and bound to `user` (a client certificate's CN), with `verbs` instead of its own when
/// given and the commented `create` rule added when `create`. Waits until it is in force.
fn canary_role(cp: &ControlPlane, ns: &str, user: &str, verbs: Option<&[&str]>, create: bool) {
    let rbac = std::fs::read_to_string(e2e::workspace_root().join("deploy/rbac.yaml")).unwrap();
    let docs: Vec<Value> = rbac
        .split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).ok())
        .map(|v| serde_json::to_value(v).unwrap())
        .collect();
    let mut role = docs
        .iter()
        .find(|d| d["kind"] == "Role" && d["metadata"]["name"] == CM)
        .expect("rbac.yaml's canary Role")
        .clone();
    let mut binding = docs
        .iter()
        .find(|d| d["kind"] == "RoleBinding" && d["metadata"]["name"] == CM)
        .expect("rbac.yaml's canary RoleBinding")
        .clone();
    role["metadata"]["namespace"] = json!(ns);
    binding["metadata"]["namespace"] = json!(ns);
    binding["subjects"] =
        json!([{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":user}]);
    if let Some(v) = verbs {
        role["rules"][0]["verbs"] = json!(v);
    }
    if create {
        role["rules"]
            .as_array_mut()
            .unwrap()
            .push(json!({"apiGroups":[""],"resources":["configmaps"],"verbs":["create"]}));
    }
    cp.apply(&role.to_string());
    cp.apply(&binding.to_string());
    let granted = role["rules"][0]["verbs"].as_array().unwrap().clone();
    for v in granted {
        let target = format!("configmap/{CM}");
        cp.wait_can(user, &[v.as_str().unwrap(), &target, "-n", ns]);
    }
    if create {
        cp.wait_can(user, &["create", "configmaps", "-n", ns]);
    }
}

/// A namespace of its own on `cp`, a certificate user granted the shipped canary Role there
/// (with `verbs`, `create` as [`canary_role`]), the canary created by admin when `existing`.
fn canary(
    cp: &ControlPlane,
    verbs: Option<&[&str]>,
    create: bool,
    existing: bool,
) -> (String, String, PathBuf) {
    let ns = cp.namespace("canary");
    let user = ControlPlane::unique("watch-cache-user");
    if existing {
        cp.kubectl(&["-n", &ns, "create", "configmap", CM], None);
    }
    canary_role(cp, &ns, &user, verbs, create);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    (ns, user, kc)
}

/// The canary's nonce as the server holds it (a GET without resourceVersion: from etcd).
fn real_nonce(cp: &ControlPlane, ns: &str) -> Option<String> {
    let out = cp.kubectl_as(
        User::Admin,
        &["-n", ns, "get", "configmap", CM, "-o", "json"],
        None,
    );
    if out.code != 0 {
        return None;
    }
    let cm: Value = serde_json::from_str(&out.stdout).unwrap();
    cm["metadata"]["annotations"][ANNOTATION]
        .as_str()
        .map(String::from)
}

/// The control plane whose ConfigMaps go through the watch-stall proxy, one per test process
/// for the tests that stall it (each in its own namespace), one test at a time: a stall reaches
/// every ConfigMap of the plane. Handed over flowing (a failed test may have left it stalled).
fn stall_plane() -> MutexGuard<'static, (ControlPlane, WatchStall)> {
    static PLANE: OnceLock<Mutex<(ControlPlane, WatchStall)>> = OnceLock::new();
    let g = PLANE
        .get_or_init(|| Mutex::new(ControlPlane::start_with_watch_stall()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    g.1.stall(false);
    g.1.release();
    g
}

fn ns_args(ns: &str) -> Vec<&str> {
    vec!["--namespace", ns, "--name", CM]
}

#[test]
fn healthy_cache_is_ok_with_a_small_lag() {
    let cp = ControlPlane::shared();
    let (ns, user, kc) = canary(cp, None, false, true);
    let mut args = ns_args(&ns);
    args.push("-vv");
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line().contains(&format!(
            "watch cache of {} reflected the canary write after",
            cp.server()
        )),
        "{out:?}"
    );
    let lag = out.perf("watch_cache_lag").expect("perfdata");
    assert!(lag < 5.0, "{out:?}");
    assert!(out.first_line().contains("watch_cache_lag="), "{out:?}");
    // The write reached etcd: the server holds the nonce the check printed.
    let nonce = real_nonce(cp, &ns).expect("the canary carries a nonce");
    assert!(out.stdout.contains(&nonce), "{out:?}");
    // The server's audit log: one patch of the canary, then reads at resourceVersion=0 (served
    // by the watch cache), never a consistent read, never a create.
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let reqs = cp.requests(&user, &path);
    let patches: Vec<_> = reqs.iter().filter(|r| r.verb == "patch").collect();
    assert_eq!(patches.len(), 1, "{reqs:?}");
    let gets: Vec<_> = reqs.iter().filter(|r| r.verb == "get").collect();
    assert!(!gets.is_empty(), "{reqs:?}");
    assert!(
        gets.iter().all(|r| r.q("resourceVersion") == Some("0")),
        "{gets:?}"
    );
    assert!(cp
        .requests(&user, &format!("/api/v1/namespaces/{ns}/configmaps"))
        .is_empty());
    // A second run writes a fresh nonce.
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 0);
    assert_ne!(real_nonce(cp, &ns).unwrap(), nonce);
    assert_eq!(
        cp.requests(&user, &path)
            .iter()
            .filter(|r| r.verb == "patch")
            .count(),
        2
    );
}

/// The bytes of the write, which the real server's audit log does not record: a JSON merge
/// patch of the one annotation, and a create as plain JSON.
#[test]
fn the_write_is_a_merge_patch_of_the_annotation_only() {
    let (srv, store, kc) = cluster(CacheMode::Healthy, true);
    let out = check(&kc, &[]);
    out.assert_status(NAME, 0);
    let nonce = nonce_in(&store).expect("the canary carries a nonce");
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
    let (srv, _store, kc) = cluster(CacheMode::Healthy, false);
    let out = check(&kc, &["--create"]);
    out.assert_status(NAME, 0);
    let post = srv
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(post.path, format!("/api/v1/namespaces/{NS}/configmaps"));
    assert_eq!(post.content_type, "application/json");
}

#[test]
fn delayed_cache_beyond_w_warns_with_the_delay_as_lag() {
    let guard = stall_plane();
    let (cp, stall) = (&guard.0, &guard.1);
    let (ns, user, kc) = canary(cp, None, false, true);
    // The watch feed held back until 1.5 s after the check has its write's answer (the delay is
    // the fault itself, not a wait for something): the cache lags, then shows it.
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let key = format!("/registry/configmaps/{ns}/{CM}");
    let lagging = |w: &'static str| {
        stall.hold(true);
        let before = cp.requests(&user, &path).len();
        let kc = kc.clone();
        let ns = ns.clone();
        let t = std::thread::spawn(move || {
            let mut args = ns_args(&ns);
            args.extend(["-w", w, "--deadline", "6s", "-t", "10"]);
            check(&kc, &args)
        });
        // The check reads only once its write has answered, so when the server has received
        // (its audit log says so before serving) a resourceVersion=0 read after the patch, the
        // check's lag clock is running; from then on the write's watch event, held back by the
        // proxy, is released 1.5 s later: the lag cannot be below 1.5 s, however slow the
        // machine (counted from the server's receipt of the write instead, a slow write's answer
        // ate into the delay and the lag came out below it).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let reqs = cp.requests(&user, &path);
            let new = &reqs[before.min(reqs.len())..];
            let read_after_write = new.iter().position(|r| r.verb == "patch").is_some_and(|i| {
                new[i + 1..]
                    .iter()
                    .any(|r| r.verb == "get" && r.q("resourceVersion") == Some("0"))
            });
            if read_after_write && stall.held_contains(key.as_bytes()) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the check's write, a read after it, and the proxy holding back the watch event \
                 of {key} ({} bytes held, {} watch streams seen); requests: {new:?}",
                stall.held(),
                stall.watches()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(1500));
        stall.release();
        t.join().unwrap()
    };
    let out = lagging("1s");
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
    let out = lagging("5s");
    out.assert_status(NAME, 0);
    assert!(out.perf("watch_cache_lag").unwrap() >= 1.5, "{out:?}");
}

#[test]
fn frozen_cache_is_critical_within_the_deadline() {
    let guard = stall_plane();
    let (cp, stall) = (&guard.0, &guard.1);
    let (ns, _user, kc) = canary(cp, None, false, true);
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 0);
    assert!(
        stall.watches() >= 1,
        "the ConfigMaps' watch cache goes through the proxy"
    );
    // The feed to the watch cache breaks; etcd and the API server keep taking writes.
    stall.stall(true);
    let mut args = ns_args(&ns);
    args.extend(["--deadline", "2s", "-t", "5"]);
    let out = check(&kc, &args);
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
    // The write itself went through: etcd holds the nonce this run wrote, and the proxy dropped
    // the watch event that carried it.
    let nonce = real_nonce(cp, &ns).expect("nonce");
    assert!(
        out.stdout
            .contains(&format!("{ANNOTATION}={nonce}) patched")),
        "{out:?}"
    );
    assert!(stall.dropped() >= 1);
    // Still frozen on the next run (a fresh nonce does not help).
    let out = check(&kc, &args);
    out.assert_status(NAME, 2);
    // The feed restored: the next write reaches the cache, OK.
    stall.stall(false);
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 0);
}

#[test]
fn forbidden_patch_is_unknown_with_the_role() {
    // The shipped Role without its patch verb: the real authorizer refuses.
    let cp = ControlPlane::shared();
    let (ns, user, kc) = canary(cp, Some(&["get"]), false, true);
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 3);
    let l = out.first_line();
    assert!(
        l.contains(&format!(
            "refused to patch the canary ConfigMap {ns}/k8s-storage-checks-canary (HTTP 403"
        )),
        "{out:?}"
    );
    assert!(
        l.contains("cannot patch resource \"configmaps\""),
        "{out:?}"
    );
    // The real server's reason names the user.
    assert!(l.contains(&format!("User \"{user}\"")), "{out:?}");
    assert!(l.contains(&format!("Role in namespace {ns} with rules: [{{apiGroups: [\"\"], resources: [\"configmaps\"], resourceNames: [\"k8s-storage-checks-canary\"], verbs: [\"get\", \"patch\"]}}]")), "{out:?}");
    assert!(!l.contains("watch_cache_lag"), "{out:?}");
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    assert!(!cp.requests(&user, &path).iter().any(|r| r.verb == "get"));
}

#[test]
fn missing_configmap_needs_create() {
    let cp = ControlPlane::shared();
    let (ns, user, kc) = canary(cp, None, true, false);
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains(&format!(
            "canary ConfigMap {ns}/k8s-storage-checks-canary does not exist"
        )),
        "{out:?}"
    );
    assert!(out.first_line().contains("--create"), "{out:?}");
    assert!(
        out.first_line().contains(&format!(
            "kubectl -n {ns} create configmap k8s-storage-checks-canary"
        )),
        "{out:?}"
    );
    assert!(real_nonce(cp, &ns).is_none());
    let list = format!("/api/v1/namespaces/{ns}/configmaps");
    assert!(!cp.requests(&user, &list).iter().any(|r| r.verb == "create"));

    // --create makes it (with the nonce), and the cache shows it.
    let mut args = ns_args(&ns);
    args.extend(["--create", "-v"]);
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    let cm = cp.get("configmap", Some(&ns), CM);
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "k8s-storage-checks"
    );
    let nonce = real_nonce(cp, &ns).unwrap();
    assert!(
        out.stdout
            .contains(&format!("{ANNOTATION}={nonce}) created via")),
        "{out:?}"
    );
    assert_eq!(
        cp.requests(&user, &list)
            .iter()
            .filter(|r| r.verb == "create")
            .count(),
        1
    );

    // Next run with --create just patches.
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains(") patched via"), "{out:?}");
}

#[test]
fn created_canary_missing_from_a_frozen_cache_is_critical() {
    let guard = stall_plane();
    let (cp, stall) = (&guard.0, &guard.1);
    let (ns, _user, kc) = canary(cp, None, true, false);
    stall.stall(true);
    let mut args = ns_args(&ns);
    args.extend(["--create", "--deadline", "2s", "-t", "5"]);
    let out = check(&kc, &args);
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
    // Created for real: etcd has it.
    assert!(real_nonce(cp, &ns).is_some());
}

#[test]
fn forbidden_create_names_the_create_rule() {
    let cp = ControlPlane::shared();
    let (ns, _user, kc) = canary(cp, None, false, false);
    let mut args = ns_args(&ns);
    args.push("--create");
    let out = check(&kc, &args);
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
    assert!(out.first_line().contains("HTTP 403"), "{out:?}");
}

/// The canary Role the docs ship (docs/checks/check_watch_cache.md, "Privileges"), applied as printed
/// with only its subject replaced: it grants what the check needs, each verb is needed, and its
/// commented create rule is what `--create` needs.
#[test]
fn the_documented_canary_role_is_needed_and_enough() {
    let cp = ControlPlane::shared();
    let page = e2e::workspace_root().join("docs/checks/check_watch_cache.md");
    let readme = std::fs::read_to_string(page).unwrap();
    let start = readme
        .find("name: k8s-storage-checks-canary\n  namespace: kube-system\nrules:")
        .expect("the documented canary Role");
    let block_start = readme[..start].rfind("```yaml\n").unwrap() + "```yaml\n".len();
    let block_end = block_start + readme[block_start..].find("```").unwrap();
    let text = &readme[block_start..block_end];
    let docs: Vec<Value> = text
        .split("\n---")
        .map(|d| {
            serde_json::to_value(serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).unwrap())
                .unwrap()
        })
        .collect();
    assert_eq!(docs.len(), 2, "{text}");
    assert_eq!(docs[0]["kind"], "Role");
    assert_eq!(docs[1]["kind"], "RoleBinding");
    // The commented create rule, uncommented as the page says.
    let create_rule: Value = serde_json::to_value(
        serde_yaml_ng::from_str::<serde_yaml_ng::Value>(
            &text[text.find("# - apiGroups").unwrap()..text.find("\n---").unwrap()]
                .lines()
                .map(|l| l.trim_start_matches("# "))
                .collect::<Vec<_>>()
                .join("\n"),
        )
        .unwrap(),
    )
    .unwrap();
    // In a namespace of its own (the page's is kube-system, shared by the other tests here).
    let apply = |ns: &str, user: &str, verbs: &[&str], create: bool| {
        let mut role = docs[0].clone();
        let mut binding = docs[1].clone();
        let name = ControlPlane::unique("readme-canary");
        role["metadata"]["namespace"] = json!(ns);
        role["metadata"]["name"] = json!(name);
        role["rules"][0]["verbs"] = json!(verbs);
        if create {
            role["rules"]
                .as_array_mut()
                .unwrap()
                .extend(create_rule.as_array().unwrap().iter().cloned());
        }
        binding["metadata"]["namespace"] = json!(ns);
        binding["metadata"]["name"] = json!(name);
        binding["roleRef"]["name"] = json!(name);
        binding["subjects"] =
            json!([{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":user}]);
        cp.apply(&role.to_string());
        cp.apply(&binding.to_string());
        for v in verbs {
            cp.wait_can(user, &[v, &format!("configmap/{CM}"), "-n", ns]);
        }
        if create {
            cp.wait_can(user, &["create", "configmaps", "-n", ns]);
        }
    };
    let shipped: Vec<&str> = docs[0]["rules"][0]["verbs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(shipped, ["get", "patch"]);
    // As shipped: OK.
    let ns = cp.namespace("readme-canary");
    cp.kubectl(&["-n", &ns, "create", "configmap", CM], None);
    let user = ControlPlane::unique("readme-user");
    apply(&ns, &user, &shipped, false);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    let out = check(&kc, &ns_args(&ns));
    out.assert_status(NAME, 0);
    // Each verb taken away: UNKNOWN, the real 403 naming that verb.
    for missing in &shipped {
        let ns = cp.namespace("readme-canary");
        cp.kubectl(&["-n", &ns, "create", "configmap", CM], None);
        let user = ControlPlane::unique("readme-user");
        let rest: Vec<&str> = shipped.iter().copied().filter(|v| v != missing).collect();
        apply(&ns, &user, &rest, false);
        let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
        let out = check(&kc, &ns_args(&ns));
        out.assert_status(NAME, 3);
        assert!(
            out.stdout.contains("HTTP 403"),
            "without {missing}: {out:?}"
        );
        assert!(
            out.stdout
                .contains(&format!("cannot {missing} resource \"configmaps\"")),
            "without {missing}: {out:?}"
        );
    }
    // With the commented create rule, --create makes the canary where none is.
    let ns = cp.namespace("readme-canary");
    let user = ControlPlane::unique("readme-user");
    apply(&ns, &user, &shipped, true);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    let mut args = ns_args(&ns);
    args.push("--create");
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    assert!(real_nonce(cp, &ns).is_some());
}

/// Two API servers of one cluster (one etcd), the second one's watch cache frozen: the HA
/// control plane of the incident, where one member's cache stopped following.
#[test]
fn two_api_servers_one_frozen() {
    let a = ControlPlane::shared();
    let (ns, user, kc) = canary(a, None, false, true);
    let (b, stall) = a.start_peer_with_watch_stall();
    let (url_a, url_b) = (a.server(), b.server());
    let mut args = ns_args(&ns);
    args.extend(["--apiserver", &url_a, "--apiserver", &url_b]);
    // Both follow: OK.
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("all 2 API servers reflected the canary write"),
        "{out:?}"
    );
    stall.stall(true);
    let mut frozen = args.clone();
    frozen.extend(["--deadline", "2s", "-t", "5"]);
    let path = format!("/api/v1/namespaces/{ns}/configmaps/{CM}");
    let patches = |cp: &ControlPlane| {
        cp.requests(&user, &path)
            .iter()
            .filter(|r| r.verb == "patch")
            .count()
    };
    let (pa, pb) = (patches(a), patches(&b));
    let gets_b = b.requests(&user, &path).len();
    let out = check(&kc, &frozen);
    out.assert_status(NAME, 2);
    let l = out.first_line();
    assert!(
        l.contains(&format!(
            "1 of 2 API servers: {url_b} did not reflect a write after 2s"
        )),
        "{out:?}"
    );
    assert!(!l.split(" | ").next().unwrap().contains(&url_a), "{out:?}");
    let port = |u: &str| u.rsplit(':').next().unwrap().to_string();
    let la = format!("watch_cache_lag_127_0_0_1_{}", port(&url_a));
    let lb = format!("watch_cache_lag_127_0_0_1_{}", port(&url_b));
    assert!(out.perf(&la).unwrap() < 2.0, "{out:?}");
    assert!(out.perf(&lb).unwrap() >= 2.0, "{out:?}");
    // The write went to the first server only; each got its RV=0 reads (each server's audit log).
    assert_eq!(patches(a) - pa, 1);
    assert_eq!(patches(&b), pb);
    let reads_b: Vec<_> = b.requests(&user, &path)[gets_b..].to_vec();
    assert!(
        reads_b
            .iter()
            .filter(|r| r.verb == "get" && r.q("resourceVersion") == Some("0"))
            .count()
            >= 2,
        "{reads_b:?}"
    );

    // Still frozen on the next run (a fresh nonce does not help).
    let out = check(&kc, &frozen);
    out.assert_status(NAME, 2);
    // Its feed restored: both OK.
    stall.stall(false);
    let out = check(&kc, &args);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .contains("all 2 API servers reflected the canary write"),
        "{out:?}"
    );
}

#[test]
fn t_shorter_than_the_deadline_is_refused() {
    let cp = ControlPlane::shared();
    let (ns, user, kc) = canary(cp, None, false, true);
    let mut args = ns_args(&ns);
    args.extend(["-t", "20", "--deadline", "30s"]);
    let out = check(&kc, &args);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("-t 20s leaves no room for --deadline 30s: give -t 32"),
        "{out:?}"
    );
    // Nothing written, nothing read: the server saw no request from it.
    assert!(
        !cp.audit()
            .iter()
            .any(|e| e["user"]["username"] == user.as_str()),
        "nothing sent"
    );
    let help = Cmd::check(BIN).arg("--help").run();
    // The deadline is set in one place, the binary: 5s, inside the suite's usual -t.
    assert!(help.stdout.contains("[default: 5s]"), "{help:?}");
    assert!(help.stdout.contains("[default: 10]"), "{help:?}");
}
