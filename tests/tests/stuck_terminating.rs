//! check_stuck_terminating end to end: the release binary against `kubectl get pods -o json`
//! documents (the incident's times exactly: deleted 41 minutes ago) and against the real
//! kube-apiserver (`e2e::control_plane`), where pods deleted for real stay Terminating because no
//! kubelet confirms their end — the incident's state; the server sets deletionTimestamp to now +
//! grace, so there the thresholds are seconds. The incident's seerr pod: jiva-csi's teardown
//! failed once on a read-only mount, never retried.

use e2e::apiserver::fixtures::{ago, kubectl_list, pod_event, running};
use e2e::apiserver::{unused_addr, ApiServer, KubeAuth, KubeCa};
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{write_json, Cmd, Output};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const NAME: &str = "STUCK_TERMINATING";
const BIN: &str = "check_stuck_terminating";
const NODE: &str = "k8s03";
const SEERR_UID: &str = "3c2b9f1e-5a7d-4e2f-9b1a-746b28370001";
const MOUNT: &str = "/var/snap/microk8s/common/var/lib/kubelet/pods/3c2b9f1e-5a7d-4e2f-9b1a-746b28370001/volumes/kubernetes.io~csi/pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001/mount";

/// A pod whose delete was requested `secs` ago with `grace` seconds: as the API shows it, with
/// deletionTimestamp = request + grace.
fn terminating(
    ns: &str,
    name: &str,
    uid: &str,
    secs: i64,
    grace: i64,
    finalizers: &[&str],
) -> Value {
    let created = ago(86400);
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns,"uid":uid,"creationTimestamp":created,
            "deletionTimestamp":ago(secs - grace),"deletionGracePeriodSeconds":grace,
            "finalizers":finalizers,"labels":{"app":name},
            "ownerReferences":[{"apiVersion":"apps/v1","kind":"StatefulSet","name":"seerr-seerr-chart","uid":"z","controller":true}]},
        "spec":{"nodeName":NODE,"terminationGracePeriodSeconds":grace,
            "containers":[{"name":"main","image":"fallenbagel/jellyseerr:2.1"}],
            "volumes":[{"name":"config","persistentVolumeClaim":{"claimName":"config-seerr-0"}}]},
        "status":{"phase":"Running","conditions":[{"type":"Ready","status":"False","lastTransitionTime":ago(secs)}],
            "containerStatuses":[{"name":"main","ready":false,"restartCount":0,
                "state":{"terminated":{"exitCode":0,"reason":"Completed","finishedAt":ago(secs - 5)}}}]}})
}

fn teardown_message() -> String {
    format!(
        "UnmountVolume.TearDown failed for volume \"pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001\") pod \"{SEERR_UID}\" (UID: \"{SEERR_UID}\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = chmod {MOUNT}: read-only file system"
    )
}

fn pods() -> Vec<Value> {
    vec![
        running("media", "radarr-0", NODE, 86400),
        terminating("media", "seerr-seerr-chart-0", SEERR_UID, 41 * 60, 30, &[]),
        // Deleted 10 s ago with 30 s of grace: still inside it.
        terminating(
            "media",
            "sonarr-0",
            "1111aaaa-0000-4000-8000-000000000001",
            10,
            30,
            &[],
        ),
        // Held by a finalizer for 20 minutes, no teardown error.
        terminating(
            "backup",
            "velero-restore-helper",
            "2222bbbb-0000-4000-8000-000000000002",
            20 * 60,
            30,
            &["example.com/snapshot-cleanup"],
        ),
        // Wedged too, but on another node.
        {
            let mut p = terminating(
                "x",
                "elsewhere",
                "3333cccc-0000-4000-8000-000000000003",
                3600,
                30,
                &[],
            );
            p["spec"]["nodeName"] = json!("k8s01");
            p
        },
    ]
}

fn check(args: &[&str]) -> Output {
    Cmd::check(BIN).without_host_credentials().args(args).run()
}

#[test]
fn pods_json_wedged_grace_and_finalizers() {
    // The fixtures are dated against the clock: build the binaries first, so a slow build
    // does not move "41m ago" to "41m1s ago".
    let _ = e2e::bin_dir();
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(dir.path(), "pods.json", &kubectl_list(pods()));
    let out = check(&["--pods-json", &f, "--node", NODE]);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().starts_with(
            "STUCK_TERMINATING CRITICAL - 2 of 3 terminating pods on node k8s03 wedged: media/seerr-seerr-chart-0 (deleted 41m ago), backup/velero-restore-helper (deleted 20m ago)"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("[CRITICAL] media/seerr-seerr-chart-0 on k8s03: deleted 41m ago, 40m30s past its 30s grace period, no finalizers"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("[CRITICAL] backup/velero-restore-helper on k8s03: deleted 20m ago, 19m30s past its 30s grace period, finalizers: example.com/snapshot-cleanup"),
        "{out:?}"
    );
    assert!(out
        .stdout
        .contains("events not looked up (pods read from --pods-json)"));
    assert!(
        !out.stdout.contains("sonarr-0"),
        "inside its grace period: {out:?}"
    );
    assert!(!out.stdout.contains("elsewhere"), "{out:?}");
    assert_eq!(out.perf("terminating_pods"), Some(3.0));
    assert_eq!(out.perf("wedged_pods"), Some(2.0));
    assert!(out.perf("oldest_wedged").unwrap() >= 2430.0);

    // -v lists the pod still inside its grace period as OK.
    let out = check(&["--pods-json", &f, "--node", NODE, "-v"]);
    assert!(
        out.stdout.contains(
            "[OK] media/sonarr-0 on k8s03: deleted 10s ago, 0s past its 30s grace period"
        ),
        "{out:?}"
    );

    // Only the pod inside its grace period: OK.
    let ok = write_json(
        dir.path(),
        "ok.json",
        &kubectl_list(vec![
            running("media", "radarr-0", NODE, 86400),
            terminating(
                "media",
                "sonarr-0",
                "1111aaaa-0000-4000-8000-000000000001",
                10,
                30,
                &[],
            ),
        ]),
    );
    let out = check(&["--pods-json", &ok, "--node", NODE]);
    out.assert_status(NAME, 0);
    assert!(out.first_line().contains("no pod wedged in Terminating (2 pods on node k8s03, 1 terminating for less than 5m past their grace period)"), "{out:?}");
    assert_eq!(out.perf("wedged_pods"), Some(0.0));

    // --all-nodes and --namespace.
    let out = check(&["--pods-json", &f, "--all-nodes"]);
    assert_eq!(out.perf("wedged_pods"), Some(3.0));
    let out = check(&["--pods-json", &f, "--all-nodes", "--namespace", "backup"]);
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("terminating_pods"), Some(1.0));
}

/// Events dated in the past (a real server dates an event's creation now, and the check counts
/// an event as seen no earlier than that): the age shown is the latest sighting's, and the
/// latest teardown failure is the one shown, not an older mount failure.
#[test]
fn event_ages_and_the_latest_failure() {
    let _ = e2e::bin_dir();
    let s = ApiServer::start();
    s.set("pods", pods());
    s.set(
        "events",
        vec![
            pod_event(
                "media",
                "seerr-seerr-chart-0",
                "FailedUnmount",
                &teardown_message(),
                40 * 60,
            ),
            pod_event(
                "media",
                "seerr-seerr-chart-0",
                "FailedMount",
                "MountVolume.SetUp failed: an older one",
                50 * 60,
            ),
        ],
    );
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("t".into()));
    let out = check(&["--kubeconfig", kc.to_str().unwrap(), "--node", NODE]);
    out.assert_status(NAME, 2);
    assert!(
        out.stdout.contains(&format!(
            "last FailedUnmount (40m ago): {}",
            &teardown_message()[..120]
        )),
        "{out:?}"
    );
    assert!(!out.stdout.contains("an older one"), "{out:?}");
}

#[test]
fn api_shows_the_failed_unmount_and_the_umount_hint() {
    let cp = ControlPlane::with_rbac();
    let node = ControlPlane::unique("k8s03");
    let other = ControlPlane::unique("k8s01");
    cp.node(&node);
    cp.node(&other);
    let media = cp.namespace("media");
    let backup = cp.namespace("backup");
    let x = cp.namespace("x");
    // The pods as they were before their delete (phase Running, containers terminated).
    let mut seerr = terminating(&media, "seerr-seerr-chart-0", SEERR_UID, 0, 1, &[]);
    let mut sonarr = terminating(
        &media,
        "sonarr-0",
        "1111aaaa-0000-4000-8000-000000000001",
        0,
        3600,
        &[],
    );
    let mut velero = terminating(
        &backup,
        "velero-restore-helper",
        "2222bbbb-0000-4000-8000-000000000002",
        0,
        1,
        &["example.com/snapshot-cleanup"],
    );
    let mut elsewhere = terminating(
        &x,
        "elsewhere",
        "3333cccc-0000-4000-8000-000000000003",
        0,
        1,
        &[],
    );
    for p in [&mut seerr, &mut sonarr, &mut velero, &mut elsewhere] {
        p["spec"]["nodeName"] = json!(node);
        p["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
    }
    elsewhere["spec"]["nodeName"] = json!(other);
    cp.create_all(&[
        running(&media, "radarr-0", &node, 86400),
        seerr,
        sonarr,
        velero,
        elsewhere,
    ]);
    // The teardown message names the pod's real UID (the server's) in the kubelet path.
    let uid = cp.get("pod", Some(&media), "seerr-seerr-chart-0")["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    let message = teardown_message().replace(SEERR_UID, &uid);
    let mount = MOUNT.replace(SEERR_UID, &uid);
    cp.create_all(&[
        pod_event(
            &media,
            "seerr-seerr-chart-0",
            "Killing",
            "Stopping container main",
            41 * 60,
        ),
        pod_event(
            &media,
            "seerr-seerr-chart-0",
            "FailedUnmount",
            &message,
            40 * 60,
        ),
    ]);
    // Deleted for real: each with its own grace period (sonarr's an hour: still inside it).
    for (ns, pod, grace) in [
        (&media, "seerr-seerr-chart-0", "1"),
        (&media, "sonarr-0", "3600"),
        (&backup, "velero-restore-helper", "1"),
        (&x, "elsewhere", "1"),
    ] {
        cp.kubectl(
            &[
                "-n",
                ns,
                "delete",
                "pod",
                pod,
                "--wait=false",
                &format!("--grace-period={grace}"),
            ],
            None,
        );
    }
    let token = cp.token(User::Checks);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::Token(User::Checks));
    let kc = kc.to_str().unwrap();
    let args = [
        "--kubeconfig",
        kc,
        "--node",
        node.as_str(),
        "--warning-after",
        "1s",
        "--critical-after",
        "1s",
    ];
    // The grace periods of 1 s pass, and 1 s more: wait for that state by asking the check
    // (bounded), not by a guessed delay.
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = check(&args);
        if out.perf("wedged_pods") == Some(2.0) || Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    out.assert_status(NAME, 2);
    assert_eq!(out.perf("terminating_pods"), Some(3.0), "{out:?}");
    assert_eq!(out.perf("wedged_pods"), Some(2.0), "{out:?}");
    assert!(
        !out.stdout.contains("sonarr-0"),
        "inside its grace period: {out:?}"
    );
    assert!(!out.stdout.contains("elsewhere"), "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "[CRITICAL] {media}/seerr-seerr-chart-0 on {node}: deleted "
        )) && out
            .stdout
            .contains("past its 1s grace period, no finalizers"),
        "{out:?}"
    );
    assert!(
        out.stdout.contains("last FailedUnmount (")
            && out.stdout.contains(&format!(" ago): {}", &message[..120])),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains(&format!("next: on {node}: run `sudo umount {mount}`")),
        "{out:?}"
    );
    // The finalizer-held pod: its finalizers, and no umount (no teardown error): its step is to
    // see the finalizers.
    let lines: Vec<&str> = out.stdout.lines().collect();
    let i = lines
        .iter()
        .position(|l| l.contains(&format!("{backup}/velero-restore-helper on {node}")))
        .unwrap();
    assert!(
        lines[i].ends_with("finalizers: example.com/snapshot-cleanup"),
        "{out:?}"
    );
    assert!(
        lines
            .get(i + 1)
            .is_some_and(|l| l.starts_with("    next: see what holds it: ")
                && l.contains("jsonpath={.metadata.finalizers}")
                && !l.contains("umount")),
        "{out:?}"
    );
    assert!(
        lines.get(i + 2).is_none_or(|l| !l.starts_with("    ")),
        "{out:?}"
    );
    // The server's audit log: pods listed for this node; events only for the two wedged pods.
    let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks";
    let selector = format!("spec.nodeName={node}");
    assert!(cp
        .requests(sa, "/api/v1/pods")
        .iter()
        .any(|r| r.q("fieldSelector") == Some(selector.as_str())));
    let events = |ns: &str| cp.requests(sa, &format!("/api/v1/namespaces/{ns}/events"));
    let last_run = |ns: &str| {
        // The events of the last run only: the bounded wait above ran the check more than once.
        events(ns).len()
    };
    let (m0, b0) = (last_run(&media), last_run(&backup));
    assert!(m0 >= 1 && b0 >= 1, "events of both wedged pods read");
    assert!(events(&x).is_empty() && !out.stdout.contains(&token));
    let out = check(&args);
    out.assert_status(NAME, 2);
    assert_eq!(
        (last_run(&media) - m0) + (last_run(&backup) - b0),
        2,
        "one event lookup per wedged pod"
    );

    // --no-events: no event requests, the verdict unchanged.
    let (m1, b1) = (last_run(&media), last_run(&backup));
    let mut no_events = args.to_vec();
    no_events.push("--no-events");
    let out = check(&no_events);
    out.assert_status(NAME, 2);
    assert!(!out.stdout.contains("umount"), "{out:?}");
    assert_eq!((last_run(&media), last_run(&backup)), (m1, b1));

    // Events forbidden (a user granted pods and nodes only): the verdict stands with a note.
    let user = cp.user_with_rules(
        &json!([{"apiGroups":[""],"resources":["pods"],"verbs":["list"]},
            {"apiGroups":[""],"resources":["nodes"],"verbs":["get","list"]}]),
        &["list", "pods", "-A"],
    );
    let kc2 = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user));
    let mut forbidden = args.to_vec();
    forbidden[1] = kc2.to_str().unwrap();
    let out = check(&forbidden);
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("events not read: "), "{out:?}");
    assert!(out.stdout.contains("HTTP 403"), "{out:?}");

    // The API unreachable for the pod list itself: UNKNOWN naming it.
    let down = cp.kubeconfig_with(
        Some(&format!("https://{}", unused_addr())),
        KubeCa::Inline,
        Auth::Token(User::Checks),
    );
    let out = check(&[
        "--kubeconfig",
        down.to_str().unwrap(),
        "--node",
        &node,
        "-t",
        "5",
    ]);
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("connection refused"), "{out:?}");
}
