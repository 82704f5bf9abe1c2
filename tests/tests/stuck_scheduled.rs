//! check_stuck_scheduled end to end: the release binary against `kubectl get pods -o json`
//! documents and against the loopback HTTPS API server (token and client-certificate auth,
//! pagination, events, and every class of API failure).

use e2e::apiserver::fixtures::{kubectl_list, pod_event, running, scheduled_no_status};
use e2e::apiserver::{unused_addr, ApiServer, Fault, KubeAuth, KubeCa};
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

#[test]
fn api_with_token_reads_node_pods_and_events() {
    let s = cluster();
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("s3cr3t-t0ken-value".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE, "-vv"]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(4.0));
    assert_eq!(out.perf("stuck_pods"), Some(2.0));
    assert!(
        out.first_line()
            .contains("ws-b70553ae (17d), llmsafespaces/ws-ebafc5da (7d)"),
        "{out:?}"
    );
    assert!(out.stdout.contains("last FailedMount (10m ago): MountVolume.MountDevice failed for volume \"pvc-81b676e6\""), "{out:?}");
    assert!(
        out.stdout
            .contains("last FailedAttachVolume (5m ago): AttachVolume.Attach failed"),
        "{out:?}"
    );
    // -vv names the source and the auth kind, never the token.
    assert!(
        out.stdout
            .contains(&format!("--kubeconfig {}", kc.display())),
        "{out:?}"
    );
    assert!(out.stdout.contains("auth bearer token (inline)"), "{out:?}");
    assert!(!out.stdout.contains("s3cr3t"), "secret leaked: {out:?}");
    // The pod list asked the server for this node only; events by involvedObject.
    let reqs = s.requests();
    let pods = reqs.iter().find(|r| r.path == "/api/v1/pods").unwrap();
    assert_eq!(pods.q("fieldSelector"), Some("spec.nodeName=worker-04"));
    assert_eq!(pods.auth, "token");
    let ev: Vec<_> = reqs
        .iter()
        .filter(|r| r.path == "/api/v1/namespaces/llmsafespaces/events")
        .collect();
    assert_eq!(ev.len(), 2, "only stuck pods get an event lookup");
    assert!(ev
        .iter()
        .any(|r| r.q("fieldSelector")
            == Some("involvedObject.kind=Pod,involvedObject.name=ws-b70553ae")));

    // --no-events: no event requests at all.
    let before = s.requests().len();
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        NODE,
        "--no-events",
        "-vv",
    ]);
    out.assert_status(NAME, 2);
    assert!(!out.stdout.contains("FailedMount"));
    assert!(
        out.stdout.contains(
            "GET /api/v1/pods?limit=500&fieldSelector=spec.nodeName=worker-04 -> 200, page 1: 4 items"
        ),
        "-vv lists the requests: {out:?}"
    );
    assert!(s.requests()[before..]
        .iter()
        .all(|r| !r.path.ends_with("/events")));
}

#[test]
fn api_with_client_cert_files_and_pagination() {
    let s = ApiServer::start();
    // 1201 pods on the node: three pages of the client's 500.
    let mut pods: Vec<_> = (0..1200)
        .map(|i| running("batch", &format!("job-{i}"), NODE, 3600))
        .collect();
    pods.push(scheduled_no_status(
        "llmsafespaces",
        "ws-d048256b",
        NODE,
        3600,
    ));
    s.set("pods", pods);
    let kc = s.kubeconfig(
        KubeCa::File,
        KubeAuth::CertFiles("system:node:worker-04".into()),
    );
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        NODE,
        "--no-events",
    ]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(1201.0));
    assert_eq!(out.perf("stuck_pods"), Some(1.0));
    let pages: Vec<_> = s
        .requests()
        .into_iter()
        .filter(|r| r.path == "/api/v1/pods")
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages
        .iter()
        .all(|r| r.auth == "client-cert" && r.user.as_deref() == Some("system:node:worker-04")));
    assert_eq!(pages[0].q("continue"), None);
    assert!(pages[1].q("continue").is_some() && pages[2].q("continue").is_some());
    assert!(pages.iter().all(|r| r.q("limit") == Some("500")));

    // Inline client certificate too, and --namespace lists per namespace.
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::CertInline("nagios".into()));
    let out = check(&[
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--node",
        NODE,
        "--namespace",
        "llmsafespaces",
        "--no-events",
    ]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("pods"), Some(1.0));
    assert!(s
        .requests()
        .iter()
        .any(|r| r.path == "/api/v1/namespaces/llmsafespaces/pods"
            && r.user.as_deref() == Some("nagios")));
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

/// Every error class answers UNKNOWN with a first line that says what to do, within -t.
#[test]
fn api_errors_are_unknown_with_a_useful_first_line() {
    let s = cluster();
    let good = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("good".into()));
    let good = good.to_str().unwrap().to_string();
    let cases: Vec<(&str, Option<Fault>, String, Vec<&str>)> = vec![
        (
            "401",
            Some(Fault::Http(401)),
            good.clone(),
            vec!["HTTP 401", "credentials rejected"],
        ),
        (
            "403",
            Some(Fault::Http(403)),
            good.clone(),
            vec![
                "HTTP 403",
                "{apiGroups: [\"\"], resources: [\"pods\"], verbs: [\"list\"]} in a ClusterRole",
                "cannot list resource",
            ],
        ),
        (
            "404",
            Some(Fault::Http(404)),
            good.clone(),
            vec!["HTTP 404", "pods not served"],
        ),
        (
            "500",
            Some(Fault::Http(500)),
            good.clone(),
            vec!["HTTP 500", "control plane"],
        ),
        (
            "503",
            Some(Fault::Http(503)),
            good.clone(),
            vec!["HTTP 503"],
        ),
        (
            "garbage",
            Some(Fault::Garbage),
            good.clone(),
            vec!["bad answer from API server", "invalid JSON"],
        ),
        (
            "truncated",
            Some(Fault::Truncated),
            good.clone(),
            vec!["truncated JSON"],
        ),
        (
            "dropped",
            Some(Fault::Drop),
            good.clone(),
            vec!["closed the connection during GET /api/v1/pods"],
        ),
        (
            "slow",
            Some(Fault::Slow(Duration::from_secs(30))),
            good.clone(),
            vec!["GET /api/v1/pods", "timed out after", "-t"],
        ),
    ];
    for (what, fault, kc, wants) in cases {
        s.heal();
        if let Some(f) = fault {
            s.fail(f);
        }
        let out = check(&["--kubeconfig", &kc, "--node", NODE, "-t", "3"]);
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
    s.heal();

    // Credentials and TLS problems, each named.
    let wrong_token = {
        let p = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("good".into()));
        let t = std::fs::read_to_string(&p)
            .unwrap()
            .replace("token: good", "token: expired");
        std::fs::write(&p, t).unwrap();
        p
    };
    let refused = s.kubeconfig_for(
        &format!("https://{}", unused_addr()),
        KubeCa::Inline,
        KubeAuth::Token("good".into()),
    );
    let cases: Vec<(&str, std::path::PathBuf, Vec<&str>, Vec<&str>)> = vec![
        (
            "wrong token",
            wrong_token,
            vec![],
            vec!["HTTP 401", "credentials rejected"],
        ),
        (
            "refused",
            refused,
            vec![],
            vec![
                "connection refused",
                "cannot connect to API server https://127.0.0.1:",
            ],
        ),
        (
            "wrong CA",
            s.kubeconfig(KubeCa::Wrong, KubeAuth::Token("good".into())),
            vec![],
            vec![
                "TLS verification of API server 127.0.0.1:",
                "unknown authority",
            ],
        ),
        (
            "no CA",
            s.kubeconfig(KubeCa::Missing, KubeAuth::Token("good".into())),
            vec![],
            vec!["no certificate-authority"],
        ),
        (
            "untrusted client cert",
            s.kubeconfig(KubeCa::Inline, KubeAuth::CertUntrusted),
            vec![],
            vec!["127.0.0.1"],
        ),
        (
            "unresolvable host",
            s.kubeconfig_for(
                "https://apiserver.invalid:6443",
                KubeCa::Inline,
                KubeAuth::Token("good".into()),
            ),
            vec![],
            vec!["cannot resolve API server host apiserver.invalid:6443"],
        ),
        (
            "exec plugin",
            s.kubeconfig(KubeCa::Inline, KubeAuth::Exec),
            vec![],
            vec!["exec credential plugin", "not support"],
        ),
        (
            "anonymous context",
            s.kubeconfig(KubeCa::Inline, KubeAuth::Token("good".into())),
            vec!["--context", "other"],
            vec!["HTTP 401"],
        ),
        (
            "missing context",
            s.kubeconfig(KubeCa::Inline, KubeAuth::Token("good".into())),
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
            NODE,
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
            !out.stdout.contains("good"),
            "{what}: token leaked: {out:?}"
        );
    }

    // insecure-skip-tls-verify works only because the kubeconfig says so (and -vv says it is off).
    let kc = s.kubeconfig(KubeCa::Insecure, KubeAuth::Token("good".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE, "-vv"]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("TLS verification OFF"), "{out:?}");
}

#[test]
fn events_forbidden_keeps_the_verdict_and_says_why() {
    let s = cluster();
    s.fail_when(|r| r.path.ends_with("/events"), Fault::Http(403), None);
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::TokenFile("from-file".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("events not read:"), "{out:?}");
    assert!(
        out.stdout.contains(
            "resources: [\"events\"], verbs: [\"list\"]} in a Role in namespace llmsafespaces"
        ),
        "{out:?}"
    );
}

#[test]
fn kubeconfig_env_list_first_existing_file() {
    let s = cluster();
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("envtok".into()));
    let out = Cmd::check(BIN)
        .env("KUBECONFIG", format!("/nonexistent/a:{}", kc.display()))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(["--node", NODE, "--no-events", "-vv"])
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
