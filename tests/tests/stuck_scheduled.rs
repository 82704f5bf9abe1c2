//! check_stuck_scheduled end to end: the release binary against `kubectl get pods -o json`
//! documents and against the real kube-apiserver (`e2e::control_plane`: pods bound by
//! `spec.nodeName`, events through the API, token, token-file and client-certificate auth, real
//! pagination and field selectors, the real 401/403, TLS and kubeconfig failures; which requests
//! were made is read from the server's audit log). The loopback server remains for the failures a
//! real server does not produce on demand: a failing page in the middle, 404/500/503, garbage,
//! truncated JSON, a dropped connection, a hang.

use e2e::apiserver::fixtures::{kubectl_list, pod_event, running, scheduled_no_status};
use e2e::apiserver::{unused_addr, ApiServer, Fault, KubeAuth, KubeCa};
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{Cmd, Output};
use std::path::Path;
use std::time::Duration;

const NAME: &str = "STUCK_SCHEDULED";
const BIN: &str = "check_stuck_scheduled";
const NODE: &str = "worker-04";

fn write_json(dir: &Path, name: &str, v: &serde_json::Value) -> std::path::PathBuf {
    e2e::write_json(dir, name, v).into()
}

/// Run the check with a clean environment: no $KUBECONFIG or in-cluster hints from the test host.
fn check(args: &[&str]) -> Output {
    Cmd::check(BIN).without_host_credentials().args(args).run()
}

#[test]
fn pods_json_11_minutes_is_critical_4_minutes_is_ok() {
    let dir = tempfile::tempdir().unwrap();
    let crit = write_json(
        dir.path(),
        "crit.json",
        &kubectl_list(vec![
            running("media", "radarr-0", NODE, 86400),
            scheduled_no_status("llmsafespaces", "ws-b70553ae", NODE, 11 * 60),
            // Stuck too, but on another node: out of scope.
            scheduled_no_status("llmsafespaces", "ws-other", "worker-01", 3 * 86400),
        ]),
    );
    let out = check(&["--pods-json", crit.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains(
            "1 of 2 pods on node worker-04 stuck after scheduling: llmsafespaces/ws-b70553ae (11m)"
        ),
        "{out:?}"
    );
    assert!(out.stdout.contains("[CRITICAL] llmsafespaces/ws-b70553ae on worker-04: scheduled 11m ago, no container status"), "{out:?}");
    assert!(out
        .stdout
        .contains("events not looked up (pods read from --pods-json)"));
    assert_eq!(out.perf("pods"), Some(2.0));
    assert_eq!(out.perf("stuck_pods"), Some(1.0));
    assert!(out.perf("oldest_stuck").unwrap() >= 660.0);
    assert!(!out.stdout.contains("ws-other"), "{out:?}");

    let ok = write_json(
        dir.path(),
        "ok.json",
        &kubectl_list(vec![
            running("media", "radarr-0", NODE, 86400),
            scheduled_no_status("llmsafespaces", "ws-new", NODE, 4 * 60),
        ]),
    );
    let out = check(&["--pods-json", ok.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 0);
    assert!(out.first_line().contains("no pod stuck after scheduling (2 pods on node worker-04), 1 pending without containers for less than 5m"), "{out:?}");
    assert_eq!(out.perf("stuck_pods"), Some(0.0));

    // --all-nodes sees the 3-day-old one on worker-01 too; --namespace narrows.
    let out = check(&["--pods-json", crit.to_str().unwrap(), "--all-nodes"]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("stuck_pods"), Some(2.0));
    assert!(out.first_line().contains("ws-other (3d)"), "{out:?}");
    let out = check(&[
        "--pods-json",
        crit.to_str().unwrap(),
        "--all-nodes",
        "--namespace",
        "media",
    ]);
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("pods"), Some(1.0));
}

#[test]
fn pods_json_from_stdin_and_bad_input() {
    let doc = serde_json::to_vec(&kubectl_list(vec![scheduled_no_status(
        "a",
        "p",
        NODE,
        7 * 60,
    )]))
    .unwrap();
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-", "--node", NODE])
        .stdin(doc.clone())
        .run();
    out.assert_status(NAME, 1);
    // Truncated, garbage, missing file, a single object: UNKNOWN naming the problem.
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-", "--node", NODE])
        .stdin(doc[..doc.len() / 2].to_vec())
        .run();
    out.assert_status(NAME, 3);
    assert!(
        out.first_line()
            .contains("cannot parse --pods-json stdin: truncated JSON"),
        "{out:?}"
    );
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-"])
        .stdin(b"<html>".to_vec())
        .run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("invalid JSON"), "{out:?}");
    let out = check(&["--pods-json", "/nonexistent/pods.json", "--node", NODE]);
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains(
            "cannot read --pods-json /nonexistent/pods.json: No such file or directory (ENOENT)"
        ),
        "{out:?}"
    );
    let one = serde_json::to_vec(&scheduled_no_status("a", "p", NODE, 60)).unwrap();
    let out = Cmd::check(BIN)
        .args(["--pods-json", "-", "--node", NODE])
        .stdin(one)
        .run();
    out.assert_status(NAME, 3);
    assert!(
        out.first_line().contains("is not a list (kind 'Pod')"),
        "{out:?}"
    );
}

fn cluster() -> ApiServer {
    let s = ApiServer::start();
    s.set(
        "pods",
        vec![
            running("media", "radarr-0", NODE, 86400),
            running("media", "sonarr-0", "worker-01", 86400),
            scheduled_no_status("llmsafespaces", "ws-b70553ae", NODE, 17 * 86400),
            scheduled_no_status("llmsafespaces", "ws-ebafc5da", NODE, 7 * 86400),
            scheduled_no_status("llmsafespaces", "ws-fresh", NODE, 60),
        ],
    );
    s.set(
        "events",
        vec![
            pod_event("llmsafespaces", "ws-b70553ae", "Scheduled", "Successfully assigned llmsafespaces/ws-b70553ae to worker-04", 17 * 86400),
            pod_event("llmsafespaces", "ws-b70553ae", "FailedMount", "MountVolume.MountDevice failed for volume \"pvc-81b676e6\" : rpc error: code = DeadlineExceeded desc = context deadline exceeded", 600),
            pod_event("llmsafespaces", "ws-b70553ae", "FailedMount", "an older FailedMount", 7200),
            pod_event("llmsafespaces", "ws-ebafc5da", "FailedAttachVolume", "AttachVolume.Attach failed for volume \"pvc-9c1d\" : attachment timeout", 300),
        ],
    );
    s
}

/// The checks' identity as deploy/rbac.yaml makes it.
const SA: &str = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";

/// The incident on the real server: a node of its own with two pods stuck for days, one just
/// scheduled, one running; a healthy pod on another node; the stuck pods' events. (The server
/// sets an event's creationTimestamp to now, and the check counts an event as seen no earlier
/// than its creation: events made here read "just now". An event's age and the latest of several
/// are shown on the loopback server, [`event_ages_and_the_latest_of_several`].)
struct Real {
    cp: &'static ControlPlane,
    node: String,
    /// The workspaces' namespace (the incident's llmsafespaces).
    ws: String,
}

fn real_cluster() -> Real {
    let cp = ControlPlane::with_rbac();
    let node = ControlPlane::unique("worker-04");
    let other = ControlPlane::unique("worker-01");
    cp.node(&node);
    cp.node(&other);
    let ws = cp.namespace("llmsafespaces");
    let media = cp.namespace("media");
    cp.create_all(&[
        running(&media, "radarr-0", &node, 86400),
        running(&media, "sonarr-0", &other, 86400),
        scheduled_no_status(&ws, "ws-b70553ae", &node, 17 * 86400),
        scheduled_no_status(&ws, "ws-ebafc5da", &node, 7 * 86400),
        scheduled_no_status(&ws, "ws-fresh", &node, 60),
        pod_event(&ws, "ws-b70553ae", "Scheduled", &format!("Successfully assigned {ws}/ws-b70553ae to {node}"), 17 * 86400),
        pod_event(&ws, "ws-b70553ae", "FailedMount", "MountVolume.MountDevice failed for volume \"pvc-81b676e6\" : rpc error: code = DeadlineExceeded desc = context deadline exceeded", 600),
        pod_event(&ws, "ws-ebafc5da", "FailedAttachVolume", "AttachVolume.Attach failed for volume \"pvc-9c1d\" : attachment timeout", 300),
    ]);
    Real { cp, node, ws }
}

#[test]
fn api_with_token_reads_node_pods_and_events() {
    let Real { cp, node, ws } = real_cluster();
    let token = cp.token(User::Checks);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Checks));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", &node, "-vv"]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(4.0));
    assert_eq!(out.perf("stuck_pods"), Some(2.0));
    assert!(
        out.first_line()
            .contains(&format!("ws-b70553ae (17d), {ws}/ws-ebafc5da (7d)")),
        "{out:?}"
    );
    assert!(out.stdout.contains("last FailedMount ("), "{out:?}");
    assert!(
        out.stdout
            .contains(" ago): MountVolume.MountDevice failed for volume \"pvc-81b676e6\""),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(" ago): AttachVolume.Attach failed"),
        "{out:?}"
    );
    // -vv names the source and the auth kind, never the token.
    assert!(
        out.stdout
            .contains(&format!("--kubeconfig {}", kc.display())),
        "{out:?}"
    );
    assert!(out.stdout.contains("auth bearer token (inline)"), "{out:?}");
    assert!(!out.stdout.contains(&token), "secret leaked: {out:?}");
    // The server's audit log: the pod list asked for this node only (as the token's user); the
    // events by involvedObject, for the stuck pods only.
    let selector = format!("spec.nodeName={node}");
    let pods: Vec<_> = cp
        .requests(SA, "/api/v1/pods")
        .into_iter()
        .filter(|r| r.q("fieldSelector") == Some(selector.as_str()))
        .collect();
    assert_eq!(pods.len(), 1, "{pods:?}");
    assert_eq!(pods[0].verb, "list");
    let events_path = format!("/api/v1/namespaces/{ws}/events");
    let ev = cp.requests(SA, &events_path);
    assert_eq!(ev.len(), 2, "only stuck pods get an event lookup: {ev:?}");
    assert!(ev
        .iter()
        .any(|r| r.q("fieldSelector")
            == Some("involvedObject.kind=Pod,involvedObject.name=ws-b70553ae")));

    // --no-events: no event requests at all.
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        &node,
        "--no-events",
        "-vv",
    ]);
    out.assert_status(NAME, 2);
    assert!(!out.stdout.contains("FailedMount"));
    assert!(
        out.stdout.contains(&format!(
            "GET /api/v1/pods?limit=500&fieldSelector=spec.nodeName={node} -> 200, page 1: 4 items"
        )),
        "-vv lists the requests: {out:?}"
    );
    assert_eq!(
        cp.requests(SA, &events_path).len(),
        2,
        "no new event request"
    );

    // The token from a tokenFile: the same answer, the token never shown.
    let kc = cp.kubeconfig_with(None, KubeCa::File, Auth::TokenFile(User::Checks));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", &node, "-vv"]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("stuck_pods"), Some(2.0));
    assert!(!out.stdout.contains(&token), "secret leaked: {out:?}");
}

#[test]
fn api_with_client_cert_files_and_pagination() {
    let cp = ControlPlane::with_rbac();
    let node = ControlPlane::unique("worker-04");
    cp.node(&node);
    let batch = cp.namespace("batch");
    let ws = cp.namespace("llmsafespaces");
    // 1201 pods on the node: three pages of the client's 500. The 1200 fillers are created
    // bare (Pending for seconds: not stuck); the one stuck pod was scheduled an hour ago.
    let mut pods: Vec<_> = (0..1200)
        .map(|i| {
            let mut p = running(&batch, &format!("job-{i}"), &node, 3600);
            p.as_object_mut().unwrap().remove("status");
            p
        })
        .collect();
    pods.push(scheduled_no_status(&ws, "ws-d048256b", &node, 3600));
    cp.create_all(&pods);
    let user = format!("system:node:{node}");
    cp.grant_checks_role(&user);
    let kc = cp.kubeconfig_with(None, KubeCa::File, Auth::CertFiles(user.clone()));
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        &node,
        "--no-events",
    ]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(1201.0));
    assert_eq!(out.perf("stuck_pods"), Some(1.0));
    // The user exists only as the certificate's CN: the server authenticated the certificate.
    let pages = cp.requests(&user, "/api/v1/pods");
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert_eq!(pages[0].q("continue"), None);
    assert!(pages[1].q("continue").is_some() && pages[2].q("continue").is_some());
    assert!(pages.iter().all(|r| r.q("limit") == Some("500")));

    // Inline client certificate too, and --namespace lists per namespace.
    let user = ControlPlane::unique("nagios");
    cp.grant_checks_role(&user);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        &node,
        "--namespace",
        &ws,
        "--no-events",
    ]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(1.0));
    assert!(!cp
        .requests(&user, &format!("/api/v1/namespaces/{ws}/pods"))
        .is_empty());
}

#[test]
fn a_failing_page_in_the_middle_is_unknown_not_a_partial_ok() {
    let s = ApiServer::start();
    s.set(
        "pods",
        (0..700)
            .map(|i| running("batch", &format!("job-{i}"), NODE, 60))
            .collect(),
    );
    s.fail_when(|r| r.q("continue").is_some(), Fault::Http(500), None);
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("t".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("HTTP 500"), "{out:?}");
}

/// The failures a real server does not produce on demand, on the loopback server: each answers
/// UNKNOWN with a first line that says what to do, within -t.
/// Events dated in the past (a real server dates an event's creation now): the age shown is the
/// latest sighting's, and of two FailedMount events the latest is shown.
#[test]
fn event_ages_and_the_latest_of_several() {
    let s = cluster();
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("t".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("last FailedMount (10m ago): MountVolume.MountDevice failed for volume \"pvc-81b676e6\""), "{out:?}");
    assert!(!out.stdout.contains("an older FailedMount"), "{out:?}");
    assert!(
        out.stdout
            .contains("last FailedAttachVolume (5m ago): AttachVolume.Attach failed"),
        "{out:?}"
    );
}

#[test]
fn api_faults_are_unknown_with_a_useful_first_line() {
    let s = cluster();
    let good = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("good".into()));
    let good = good.to_str().unwrap().to_string();
    let cases: Vec<(&str, Fault, Vec<&str>)> = vec![
        ("404", Fault::Http(404), vec!["HTTP 404", "pods not served"]),
        ("500", Fault::Http(500), vec!["HTTP 500", "control plane"]),
        ("503", Fault::Http(503), vec!["HTTP 503"]),
        (
            "garbage",
            Fault::Garbage,
            vec!["bad answer from API server", "invalid JSON"],
        ),
        ("truncated", Fault::Truncated, vec!["truncated JSON"]),
        (
            "dropped",
            Fault::Drop,
            vec!["closed the connection during GET /api/v1/pods"],
        ),
        (
            "slow",
            Fault::Slow(Duration::from_secs(30)),
            vec!["GET /api/v1/pods", "timed out after", "-t"],
        ),
    ];
    for (what, fault, wants) in cases {
        s.heal();
        s.fail(fault);
        let out = check(&["--kubeconfig", &good, "--node", NODE, "-t", "3"]);
        out.assert_status(NAME, 3);
        for w in wants {
            assert!(
                out.first_line().contains(w),
                "{what}: want {w:?} in {out:?}"
            );
        }
        assert!(
            out.elapsed < Duration::from_secs(8),
            "{what}: took {:?}",
            out.elapsed
        );
    }
}

/// Credentials, RBAC, TLS and kubeconfig problems against the real server: UNKNOWN, each named,
/// within -t, no secret shown.
#[test]
fn api_errors_are_unknown_with_a_useful_first_line() {
    let Real { cp, node, .. } = real_cluster();
    let token = cp.token(User::Checks);
    let kc = |ca, auth| cp.kubeconfig_with(None, ca, auth);
    let cases: Vec<(&str, std::path::PathBuf, Vec<&str>, Vec<&str>)> = vec![
        (
            "401: a token the server does not know",
            kc(KubeCa::Inline, Auth::WrongToken),
            vec![],
            vec!["HTTP 401", "credentials rejected"],
        ),
        (
            "403: an identity granted nothing",
            kc(KubeCa::Inline, Auth::Token(User::Nobody)),
            vec![],
            vec![
                "HTTP 403",
                "{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"list\"]} in a ClusterRole",
                "cannot list resource",
                "User \"nobody\"",
            ],
        ),
        (
            "refused",
            cp.kubeconfig_with(
                Some(&format!("https://{}", unused_addr())),
                KubeCa::Inline,
                Auth::Token(User::Checks),
            ),
            vec![],
            vec![
                "connection refused",
                "cannot connect to API server https://127.0.0.1:",
            ],
        ),
        (
            "wrong CA",
            kc(KubeCa::Wrong, Auth::Token(User::Checks)),
            vec![],
            vec![
                "TLS verification of API server 127.0.0.1:",
                "unknown authority",
            ],
        ),
        (
            "no CA",
            kc(KubeCa::Missing, Auth::Token(User::Checks)),
            vec![],
            vec!["no certificate-authority"],
        ),
        (
            "untrusted client cert",
            kc(KubeCa::Inline, Auth::CertUntrusted),
            vec![],
            vec!["127.0.0.1", "HTTP 401"],
        ),
        (
            "unresolvable host",
            cp.kubeconfig_with(
                Some("https://apiserver.invalid:6443"),
                KubeCa::Inline,
                Auth::Token(User::Checks),
            ),
            vec![],
            vec!["cannot resolve API server host apiserver.invalid:6443"],
        ),
        (
            "exec plugin",
            kc(KubeCa::Inline, Auth::Exec),
            vec![],
            vec!["exec credential plugin", "not support"],
        ),
        (
            "anonymous context",
            kc(KubeCa::Inline, Auth::Token(User::Checks)),
            vec!["--context", "other"],
            vec!["HTTP 401"],
        ),
        (
            "missing context",
            kc(KubeCa::Inline, Auth::Token(User::Checks)),
            vec!["--context", "nope"],
            vec!["context 'nope' not found", "test, other"],
        ),
        (
            "missing kubeconfig",
            "/nonexistent/kubeconfig".into(),
            vec![],
            vec!["cannot read kubeconfig /nonexistent/kubeconfig"],
        ),
    ];
    for (what, kc, extra, wants) in cases {
        let mut args = vec![
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--node",
            node.as_str(),
            "-t",
            "3",
        ];
        args.extend(extra);
        let out = check(&args);
        out.assert_status(NAME, 3);
        for w in wants {
            assert!(
                out.first_line().contains(w),
                "{what}: want {w:?} in {out:?}"
            );
        }
        assert!(
            !out.stdout.contains(&token),
            "{what}: token leaked: {out:?}"
        );
        assert!(
            out.elapsed < Duration::from_secs(8),
            "{what}: took {:?}",
            out.elapsed
        );
    }

    // insecure-skip-tls-verify is refused unless the command line allows it too (nothing sent)...
    let kc = kc(KubeCa::Insecure, Auth::Token(User::Checks));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", &node]);
    out.assert_status(NAME, 3);
    assert!(out.stdout.contains("--allow-insecure-tls"), "{out:?}");
    // ...and with --allow-insecure-tls it works, and -vv says verification is off.
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        &node,
        "-vv",
        "--allow-insecure-tls",
    ]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("TLS verification OFF"), "{out:?}");
}

#[test]
fn events_forbidden_keeps_the_verdict_and_says_why() {
    // deploy/rbac.yaml's ClusterRole without events, for a user of its own: the real 403.
    let Real { cp, node, ws } = real_cluster();
    let user = cp.user_with_rules(
        &serde_json::json!([{"apiGroups":[""],"resources":["pods"],"verbs":["list"]},
            {"apiGroups":[""],"resources":["nodes"],"verbs":["get","list"]}]),
        &["list", "pods", "-A"],
    );
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", &node]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("events not read:"), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "resources: [\"events\"], verbs: [\"list\"]}} in a Role in namespace {ws}"
        )),
        "{out:?}"
    );
}

#[test]
fn kubeconfig_env_list_first_existing_file() {
    let Real { cp, node, .. } = real_cluster();
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Checks));
    let out = Cmd::check(BIN)
        .env("KUBECONFIG", format!("/nonexistent/a:{}", kc.display()))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["--node", &node, "--no-events", "-vv"])
        .run();
    out.assert_status(NAME, 2);
    assert!(
        out.stdout
            .contains(&format!("$KUBECONFIG {}", kc.display())),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("first existing file is used"),
        "{out:?}"
    );
}
