//! The API checks against a real `kube-apiserver` (with etcd, RBAC, Pod Security admission), built
//! from the Go module proxy and started by `tests/control-plane/up` (see `e2e::control_plane`).
//! Objects are created through the API; what a kubelet or scheduler would write goes through the
//! status subresource; the checks run as the identity `deploy/rbac.yaml` grants to.

use e2e::apiserver::fixtures::{jiva_incident_replicas, running, scheduled_no_status};
use e2e::control_plane::{ControlPlane, User};
use e2e::{Cmd, Output};
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const RBAC: &str = include_str!("../../deploy/rbac.yaml");

/// The shared control plane with `deploy/rbac.yaml` applied once.
fn cp() -> &'static ControlPlane {
    static RBAC_APPLIED: OnceLock<()> = OnceLock::new();
    let cp = ControlPlane::shared();
    RBAC_APPLIED.get_or_init(|| apply_rbac(cp));
    cp
}

/// Apply deploy/rbac.yaml and wait until the server's authorizer grants all of it (it follows
/// RBAC objects through a watch: a check run right after the apply can still get a 403).
fn apply_rbac(cp: &ControlPlane) {
    // rbac.yaml grants list on jivavolumes (openebs.io): `can-i` says no while that resource
    // is not served, so the CRD comes first.
    cp.apply_crd(e2e::apiserver::fixtures::JIVA_CRD, "jivavolumes.openebs.io");
    // `kubectl auth can-i` resolves a resource through discovery: the Longhorn CRDs the role
    // names must be served for it to answer yes.
    e2e::longhorn::install(cp);
    cp.apply(RBAC);
    let roles = rbac_roles();
    for g in grants(&roles) {
        wait_granted(cp, &roles[g.role], &g, true);
    }
}

/// A check as the checks' identity, with nothing from the test host's environment.
fn check_as(cp: &ControlPlane, user: User, bin: &str, args: &[&str]) -> Output {
    Cmd::check(bin)
        .without_host_credentials()
        .arg("--kubeconfig")
        .arg(cp.kubeconfig(user))
        .args(args)
        .run()
}

fn check(cp: &ControlPlane, bin: &str, args: &[&str]) -> Output {
    check_as(cp, User::Checks, bin, args)
}

/// `obj` moved into namespace `ns` (the fixtures carry the incidents' namespaces).
fn in_ns(mut obj: Value, ns: &str) -> Value {
    obj["metadata"]["namespace"] = json!(ns);
    obj
}

#[test]
fn stuck_scheduled_pending_pod_with_node_name_stays_pending_for_real() {
    let cp = cp();
    let node = ControlPlane::unique("worker-04");
    let other = ControlPlane::unique("worker-01");
    let ns = cp.namespace("llmsafespaces");
    cp.node(&node);
    cp.node(&other);
    // No scheduler: the pods are bound by spec.nodeName, and the PodScheduled condition is the
    // one the scheduler writes, 11 minutes ago (the API sets creationTimestamp to now).
    cp.create(&in_ns(
        scheduled_no_status("x", "ws-b70553ae", &node, 11 * 60),
        &ns,
    ));
    cp.create(&in_ns(
        scheduled_no_status("x", "ws-other", &other, 3 * 86400),
        &ns,
    ));
    cp.create(&in_ns(running("x", "radarr-0", &node, 86400), &ns));
    // The real server kept it Pending with no container status: nothing runs containers here.
    let pod = cp.get("pod", Some(&ns), "ws-b70553ae");
    assert_eq!(pod["status"]["phase"], "Pending", "{pod}");
    assert!(pod["status"].get("containerStatuses").is_none(), "{pod}");

    let out = check(cp, "check_stuck_scheduled", &["--node", &node]);
    out.assert_status("STUCK_SCHEDULED", 2);
    assert!(
        out.first_line().contains(&format!(
            "1 of 2 pods on node {node} stuck after scheduling: {ns}/ws-b70553ae (11m"
        )),
        "{out:?}"
    );
    assert!(!out.stdout.contains("ws-other"), "{out:?}");
    assert!(!out.stdout.contains("HTTP 403"), "{out:?}");

    // The kubelet starts it at last: a container status through the status subresource → OK.
    let pod = in_ns(scheduled_no_status("x", "ws-b70553ae", &node, 11 * 60), &ns);
    cp.patch_status(
        &pod,
        &json!({"phase":"Running","containerStatuses":[{"name":"workspace","ready":true,
            "restartCount":0,"image":"ghcr.io/lenaxia/workspace:1.4","imageID":"",
            "state":{"running":{"startedAt":"2026-01-01T00:00:00Z"}}}]}),
    );
    let out = check(cp, "check_stuck_scheduled", &["--node", &node]);
    out.assert_status("STUCK_SCHEDULED", 0);

    // A node the API does not know: UNKNOWN, not "no pod stuck".
    let out = check(cp, "check_stuck_scheduled", &["--node", "no-such-node"]);
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line().contains("no node 'no-such-node'"),
        "{out:?}"
    );
}

#[test]
fn stuck_terminating_pod_held_by_a_finalizer_stays_terminating_for_real() {
    let cp = cp();
    let node = ControlPlane::unique("worker-02");
    let ns = cp.namespace("media");
    cp.node(&node);
    cp.create(&json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":"seerr-0","namespace":ns,"finalizers":["k8s-storage-checks.test/hold"]},
        "spec":{"nodeName":node,"terminationGracePeriodSeconds":1,
            "containers":[{"name":"seerr","image":"fallenbagel/jellyseerr:2.1"}]}}));
    cp.kubectl(
        &["-n", &ns, "delete", "pod", "seerr-0", "--wait=false"],
        None,
    );
    let pod = cp.get("pod", Some(&ns), "seerr-0");
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");

    // The server set deletionTimestamp to the request time + the 1 s grace period: the pod is
    // wedged once the check's clock passes it by more than --critical-after 1s. Wait for that
    // state, bounded, by asking the check (the condition, not a guessed delay).
    let args = [
        "--node",
        node.as_str(),
        "--warning-after",
        "1s",
        "--critical-after",
        "1s",
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = check(cp, "check_stuck_terminating", &args);
        if out.code != 0 || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    out.assert_status("STUCK_TERMINATING", 2);
    assert!(
        out.first_line().contains(&format!(
            "1 of 1 terminating pod on node {node} wedged: {ns}/seerr-0"
        )),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("finalizers: k8s-storage-checks.test/hold"),
        "{out:?}"
    );

    // The finalizer removed, the real server still keeps the pod: a pod bound to a node is
    // removed only when its kubelet confirms the teardown (or a forced delete), and no kubelet
    // confirms: the seerr pod's state. Still wedged, now with no finalizer to blame.
    cp.kubectl(
        &[
            "-n",
            &ns,
            "patch",
            "pod",
            "seerr-0",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
        None,
    );
    let out = check(cp, "check_stuck_terminating", &args);
    out.assert_status("STUCK_TERMINATING", 2);
    assert!(out.stdout.contains("no finalizers"), "{out:?}");
    // The operator's way out, forced deletion: gone, OK.
    cp.kubectl(
        &[
            "-n",
            &ns,
            "delete",
            "pod",
            "seerr-0",
            "--grace-period=0",
            "--force",
        ],
        None,
    );
    let out = check(cp, "check_stuck_terminating", &args);
    out.assert_status("STUCK_TERMINATING", 0);
}

#[test]
fn jiva_replica_crash_looping_92_times_pages_for_real() {
    let cp = cp();
    let pv = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";
    // The check reads namespace openebs; no other test here writes there.
    cp.apply(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"openebs"}}"#);
    for p in jiva_incident_replicas(pv) {
        cp.create(&p);
    }
    let rep1 = cp.get("pod", Some("openebs"), &format!("{pv}-jiva-rep-1"));
    assert_eq!(
        rep1["status"]["containerStatuses"][0]["restartCount"], 92,
        "{rep1}"
    );
    let out = check(cp, "check_jiva_rep_crashloop", &[]);
    out.assert_status("JIVA_REP_CRASHLOOP", 2);
    assert_eq!(out.perf("replicas"), Some(3.0), "{out:?}");
    assert_eq!(out.perf("degraded_volumes"), Some(1.0), "{out:?}");
    assert!(
        out.first_line().contains(&format!("{pv}-jiva-rep-1")),
        "{out:?}"
    );
    assert!(!out.stdout.contains("HTTP 403"), "{out:?}");
}

#[test]
fn watch_cache_follows_writes_on_a_real_server() {
    let cp = cp();
    // deploy/rbac.yaml created the canary and granted get+patch on it, nothing more.
    let out = check(cp, "check_watch_cache", &[]);
    out.assert_status("WATCH_CACHE", 0);
    assert!(!out.stdout.contains("HTTP 403"), "{out:?}");
    let cm = cp.get(
        "configmap",
        Some("kube-system"),
        "k8s-storage-checks-canary",
    );
    assert!(
        cm["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| !a.is_empty()),
        "the check wrote its canary annotation: {cm}"
    );
}

#[test]
fn an_identity_granted_nothing_gets_unknown_naming_the_rule_to_grant() {
    let cp = cp();
    let node = ControlPlane::unique("worker-05");
    cp.node(&node);
    for (bin, args, want) in [
        (
            "check_stuck_scheduled",
            vec!["--node", node.as_str()],
            r#"resources: ["pods"], verbs: ["list"]"#,
        ),
        (
            "check_stuck_terminating",
            vec!["--node", node.as_str()],
            r#"resources: ["pods"], verbs: ["list"]"#,
        ),
        (
            "check_jiva_rep_crashloop",
            vec![],
            r#"resources: ["pods"], verbs: ["list"]"#,
        ),
        ("check_watch_cache", vec![], r#"resources: ["configmaps"]"#),
    ] {
        let out = check_as(cp, User::Nobody, bin, &args);
        out.assert_status(&bin.trim_start_matches("check_").to_uppercase(), 3);
        assert!(out.first_line().contains("HTTP 403"), "{bin}: {out:?}");
        assert!(
            out.first_line().contains(want),
            "{bin}: want {want}: {out:?}"
        );
        // The real server's own reason is quoted, naming the user.
        assert!(
            out.first_line().contains(r#"User "nobody" cannot"#),
            "{bin}: {out:?}"
        );
    }
}

#[test]
fn manifests_are_admitted_by_the_real_server_with_pod_security_on() {
    // rbac.yaml applied for real first: it creates the namespace the DaemonSets go to.
    let cp = cp();
    let root = e2e::workspace_root();
    for f in ["rbac.yaml", "daemonset.yaml", "daemonset-nrpe.yaml"] {
        let path = root.join("deploy").join(f);
        let out = cp.kubectl_as(
            User::Admin,
            &["apply", "--dry-run=server", "-f", path.to_str().unwrap()],
            None,
        );
        assert_eq!(out.code, 0, "{f} not admitted: {out:?}");
        assert!(!out.stderr.contains("Warning"), "{f}: {out:?}");
    }
    // Pod Security admission is on and decides for real: the DaemonSets' pod, as the
    // DaemonSet controller would create it, is admitted in the namespace rbac.yaml makes
    // (enforce=privileged) and refused in one at Talos' default level, baseline.
    let baseline = cp.namespace("psa-baseline");
    cp.kubectl(
        &[
            "label",
            "namespace",
            &baseline,
            "pod-security.kubernetes.io/enforce=baseline",
        ],
        None,
    );
    for f in ["daemonset.yaml", "daemonset-nrpe.yaml"] {
        let text = std::fs::read_to_string(root.join("deploy").join(f)).unwrap();
        let ds = text
            .split("\n---")
            .filter_map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).ok())
            .find(|v| v["kind"] == "DaemonSet")
            .expect("a DaemonSet");
        let tmpl = &ds["spec"]["template"];
        let pod = |ns: &str| {
            json!({"apiVersion":"v1","kind":"Pod",
                "metadata":{"name":"admission-probe","namespace":ns,"labels":tmpl["metadata"]["labels"]},
                "spec":tmpl["spec"]})
            .to_string()
        };
        let out = cp.kubectl_as(
            User::Admin,
            &["create", "--dry-run=server", "-f", "-"],
            Some(&pod("k8s-storage-checks")),
        );
        assert_eq!(out.code, 0, "{f}'s pod refused in its namespace: {out:?}");
        let out = cp.kubectl_as(
            User::Admin,
            &["create", "--dry-run=server", "-f", "-"],
            Some(&pod(&baseline)),
        );
        assert_ne!(out.code, 0, "{f}'s pod admitted at baseline: {out:?}");
        assert!(
            out.stderr.contains("violates PodSecurity \"baseline:"),
            "{f}: {out:?}"
        );
    }
}

#[test]
fn datastore_stopped_under_the_api_server_is_unknown_within_the_timeout() {
    let cp = ControlPlane::start();
    apply_rbac(&cp);
    let node = "worker-09";
    cp.node(node);
    let out = check(&cp, "check_stuck_scheduled", &["--node", node]);
    out.assert_status("STUCK_SCHEDULED", 0);
    // etcd stopped (SIGSTOP: it neither answers nor closes its connections, the worst case),
    // every thread of it: a check run between kill(2) and the stop taking effect was answered
    // by etcd and said OK (a CI run under load). Stopped, etcd hides behind no cache: a read
    // without resourceVersion is served from the watch cache only once it holds etcd's current
    // revision, which the server asks etcd for on every such read (k8s.io/apiserver
    // storage/cacher: getCurrentRV → etcd3 store GetCurrentResourceVersion, a Range).
    cp.stop_server("etcd");
    for bin in ["check_stuck_scheduled", "check_stuck_terminating"] {
        let out = check(&cp, bin, &["--node", node, "-t", "5"]);
        out.assert_status(&bin.trim_start_matches("check_").to_uppercase(), 3);
        eprintln!("{bin} with etcd stopped: {}", out.first_line());
        assert!(out.elapsed < Duration::from_secs(7), "{bin}: {out:?}");
        assert!(
            out.first_line().contains("timed out") || out.first_line().contains("HTTP 5"),
            "{bin}: names the server's answer (or its silence): {out:?}"
        );
    }
    cp.continue_server("etcd");
    // etcd killed: the API server answers (an error) or times out; either way UNKNOWN in time.
    cp.kill_server("etcd");
    let out = check(&cp, "check_stuck_scheduled", &["--node", node, "-t", "5"]);
    eprintln!("with etcd killed: {}", out.first_line());
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(out.elapsed < Duration::from_secs(7), "{out:?}");
    assert!(
        out.first_line().contains("timed out") || out.first_line().contains("HTTP 5"),
        "{out:?}"
    );
}

/// One permission `deploy/rbac.yaml` grants: a verb on a resource of a group (in a namespace,
/// for the Role; on one object, with resourceNames).
#[derive(Debug, Clone)]
struct Grant {
    role: usize,
    rule: usize,
    group: String,
    resource: String,
    verb: String,
}

/// The roles of rbac.yaml (ClusterRole and Role documents) as JSON, in file order.
fn rbac_roles() -> Vec<Value> {
    RBAC.split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(d).ok())
        .filter(|v| v["kind"] == "ClusterRole" || v["kind"] == "Role")
        .map(|v| serde_json::to_value(v).unwrap())
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Every (group, resource, verb) rbac.yaml grants.
fn grants(roles: &[Value]) -> Vec<Grant> {
    let mut out = Vec::new();
    for (ri, role) in roles.iter().enumerate() {
        for (i, rule) in role["rules"].as_array().unwrap().iter().enumerate() {
            for g in strs(&rule["apiGroups"]) {
                for r in strs(&rule["resources"]) {
                    for v in strs(&rule["verbs"]) {
                        out.push(Grant {
                            role: ri,
                            rule: i,
                            group: g.clone(),
                            resource: r.clone(),
                            verb: v,
                        });
                    }
                }
            }
        }
    }
    out
}

/// `role` with exactly `g` taken away (its rule split so that everything else stays granted).
fn without(role: &Value, g: &Grant) -> Value {
    let mut role = role.clone();
    let rules = role["rules"].as_array_mut().unwrap();
    let rule = rules[g.rule].clone();
    let mut rest = rule.clone();
    rest["resources"] = json!(strs(&rule["resources"])
        .into_iter()
        .filter(|r| *r != g.resource)
        .collect::<Vec<_>>());
    let mut this = rule.clone();
    this["resources"] = json!([g.resource]);
    this["verbs"] = json!(strs(&rule["verbs"])
        .into_iter()
        .filter(|v| *v != g.verb)
        .collect::<Vec<_>>());
    rules.remove(g.rule);
    for r in [rest, this] {
        if !strs(&r["resources"]).is_empty() && !strs(&r["verbs"]).is_empty() {
            rules.push(r);
        }
    }
    role
}

/// Ask the server, as admin impersonating the checks' identity, whether `g` is granted now (the
/// authorizer follows RBAC objects through a watch: wait for it to see the change).
fn wait_granted(cp: &ControlPlane, role: &Value, g: &Grant, want: bool) {
    let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";
    let res = if g.group.is_empty() {
        g.resource.clone()
    } else {
        format!("{}.{}", g.resource, g.group)
    };
    let names = strs(&role["rules"][g.rule]["resourceNames"]);
    let target = match names.first() {
        Some(n) => format!("{res}/{n}"),
        None => res,
    };
    let ns = role["metadata"]["namespace"].as_str();
    let mut args = vec![
        "auth",
        "can-i",
        g.verb.as_str(),
        target.as_str(),
        "--as",
        sa,
    ];
    match ns {
        Some(ns) => args.extend(["-n", ns]),
        None => args.push("-A"),
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = cp.kubectl_as(User::Admin, &args, None);
        if (out.stdout.trim() == "yes") == want {
            return;
        }
        assert!(Instant::now() < deadline, "{g:?}: can-i still {out:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn rbac_yaml_grants_exactly_what_the_checks_need() {
    // Its own control plane: the test changes cluster-wide roles.
    let cp = ControlPlane::start();
    apply_rbac(&cp);
    let stuck = "worker-04";
    let empty = "worker-07";
    cp.node(stuck);
    cp.node(empty);
    let ns = cp.namespace("llmsafespaces");
    cp.create(&in_ns(
        scheduled_no_status("x", "ws-b70553ae", stuck, 11 * 60),
        &ns,
    ));
    cp.apply(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"openebs"}}"#);
    for p in jiva_incident_replicas("pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b") {
        cp.create(&p);
    }
    // One healthy Longhorn volume (check_longhorn_volumes lists all three kinds; apply_rbac
    // installed the CRDs).
    let lh = "pvc-81b676e6-rbac";
    for o in [
        e2e::longhorn::volume(
            lh, "attached", "healthy", stuck, "media", "config", "radarr-0", "Running",
        ),
        e2e::longhorn::replica(lh, 0, stuck, false),
        e2e::longhorn::engine(lh, stuck, &[(0, "RW")], false),
    ] {
        cp.create(&o);
    }
    let kubelet = tempfile::tempdir().unwrap();
    std::fs::create_dir(kubelet.path().join("pods")).unwrap();
    let kr = kubelet.path().to_str().unwrap().to_string();
    // Every path through the API the checks take: a stuck pod (pods, then its events), a node
    // with no pod (the node is looked up), a node that does not exist (the nodes are listed),
    // the Jiva incident (replicas, then PVs to name the claims), the watch-cache canary, and the
    // stale-mount cross-checks (pods, PVs, VolumeAttachments).
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("check_stuck_scheduled", vec!["--node", stuck]),
        ("check_stuck_terminating", vec!["--node", empty]),
        ("check_stuck_scheduled", vec!["--node", "no-such-node"]),
        ("check_jiva_rep_crashloop", vec![]),
        ("check_watch_cache", vec![]),
        ("check_stale_csi_mounts", vec!["--kubelet-root", &kr]),
        ("check_longhorn_volumes", vec![]),
        ("check_volume_attachments", vec![]),
        // The node's CSINode (get; a node without one is a 404, not a 403) and its pods.
        (
            "check_csi_node_plugins",
            vec!["--kubelet-root", &kr, "--node", stuck],
        ),
    ];
    let run_all = || -> Vec<(String, Output)> {
        runs.iter()
            .map(|(bin, args)| (format!("{bin} {args:?}"), check(&cp, bin, args)))
            .collect()
    };
    for (what, out) in run_all() {
        assert!(!out.stdout.contains("403"), "granted all, {what}: {out:?}");
        assert!(
            out.code != 3 || what.contains("no-such-node"),
            "{what}: {out:?}"
        );
    }
    let roles = rbac_roles();
    let all = grants(&roles);
    assert!(all.len() >= 6, "{all:?}");
    let mut unneeded = Vec::new();
    for g in &all {
        let role = &roles[g.role];
        cp.apply(&without(role, g).to_string());
        wait_granted(&cp, role, g, false);
        let outs = run_all();
        let rule = format!(
            "{{apiGroups: [\"{}\"], resources: [\"{}\"], verbs: [\"{}\"]}}",
            g.group, g.resource, g.verb
        );
        let named = outs.iter().any(|(_, o)| {
            o.stdout.contains(&rule)
                || (g.resource == "configmaps"
                    && o.stdout
                        .contains(&format!("refused to {} the canary ConfigMap", g.verb)))
        });
        if !named {
            unneeded.push(format!("{} {} ({})", g.verb, g.resource, g.group));
        } else {
            // Needing it, some check said so; none went silently OK on a forbidden answer.
            for (what, o) in &outs {
                if o.stdout.contains("HTTP 403") || o.stdout.contains("refused to") {
                    assert!(o.code != 0 || o.stdout.contains(&rule), "{what}: {o:?}");
                }
            }
        }
        cp.apply(&role.to_string());
        wait_granted(&cp, role, g, true);
    }
    assert!(
        unneeded.is_empty(),
        "deploy/rbac.yaml grants what no check needs (remove it): {unneeded:?}"
    );
}

/// `up --owner PID --remove` (what the suite's shared control plane uses): when the owner ends,
/// the servers stop and the directory goes, so no test run leaves its etcd data behind (81 runs
/// had left 5 GB in /tmp and filled the CI disk).
#[test]
fn a_control_plane_whose_owner_ends_stops_and_leaves_nothing_behind() {
    let dir = tempfile::Builder::new()
        .prefix("k8s-storage-checks-cp-owned-")
        .tempdir()
        .unwrap()
        .keep();
    // The owner: a process that lives until its stdin closes.
    let mut owner = std::process::Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let up = std::process::Command::new(e2e::workspace_root().join("tests/control-plane/up"))
        .arg(&dir)
        .args(["--owner", &owner.id().to_string(), "--remove"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(up.status.success(), "up: {up:?}");
    let pid = |name: &str| -> i32 {
        std::fs::read_to_string(dir.join(format!("{name}.pid")))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (apiserver, etcd) = (pid("kube-apiserver"), pid("etcd"));
    let alive = |p: i32| nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None).is_ok();
    assert!(alive(apiserver) && alive(etcd));
    drop(owner.stdin.take());
    owner.wait().unwrap();
    e2e::fuse::wait_until(
        "the control plane to stop and its directory to go",
        Duration::from_secs(30),
        || !dir.exists() && !alive(apiserver) && !alive(etcd),
    );
}
