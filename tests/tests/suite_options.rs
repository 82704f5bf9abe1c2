//! The suite as one product: every check takes -w/-c ranges on its headline value with the
//! monitoring-plugins grammar (negative values as separate arguments), answers a usage error in the
//! requested --format, and never answers OK after seeing nothing. Release binaries, real inputs
//! (record files, sysfs trees, kubectl JSON, the loopback API server).

use e2e::apiserver::fixtures::{
    ago, jiva_replica, kubectl_list, running, scheduled_no_status, Rep,
};
use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::logs::{klog_header, mount_refs_err, nested_op_msg, now_secs};
use e2e::sysfs::{Session, Sysfs};
use e2e::{all_checks, write_json, Cmd};
use serde_json::{json, Value};
use std::path::PathBuf;

fn status_name(check: &str) -> String {
    check.trim_start_matches("check_").to_uppercase()
}

fn api_free(bin: &str) -> Cmd {
    Cmd::check(bin).without_host_credentials()
}

/// monitoring-plugins' range cases (lib/tests/test_utils.c) on a headline value of 1:
/// `(args, expected exit code)`. -w and -c are always both given, so no default decides.
fn count_cases() -> Vec<(Vec<&'static str>, i32)> {
    vec![
        (vec!["-w", "0", "-c", "100"], 1),      // 1 > 0
        (vec!["-w", "1", "-c", "100"], 0),      // 0 ≤ 1 ≤ 1
        (vec!["-w", "2:", "-c", "100"], 1),     // 1 < 2
        (vec!["-w", "~:0", "-c", "100"], 1),    // 1 > 0, no lower end
        (vec!["-w", "@1:1", "-c", "100"], 1),   // inside 1..1
        (vec!["-w", "@2:3", "-c", "100"], 0),   // not inside 2..3
        (vec!["-w", "100", "-c", "0"], 2),      // critical first
        (vec!["-w", "-10:-2", "-c", "100"], 1), // negative range as its own argument
        (vec!["-w", "100", "-c", "-10:-2"], 2),
        (vec!["-w", "@-10:-2", "-c", "100"], 0),
    ]
}

/// The same on a duration of about 11 minutes (duration ranges).
fn duration_cases() -> Vec<(Vec<&'static str>, i32)> {
    vec![
        (vec!["-w", "5m", "-c", "1d"], 1),
        (vec!["-w", "5m", "-c", "10m"], 2),
        (vec!["-w", "15m", "-c", "1d"], 0),
        (vec!["-w", "12m:", "-c", "1d"], 1),
        (vec!["-w", "@10m:12m", "-c", "1d"], 1),
        (vec!["-w", "@1m:2m", "-c", "1d"], 0),
        (vec!["-w", "-10:-2", "-c", "1d"], 1),
        (vec!["-w", "1d", "-c", "-10:-2"], 2),
    ]
}

fn run_cases(bin: &str, base: impl Fn() -> Cmd, cases: &[(Vec<&str>, i32)]) {
    for (args, want) in cases {
        let out = base().args(args).run();
        out.assert_protocol(&status_name(bin));
        assert_eq!(out.code, *want, "{bin} {args:?}: {out:?}");
    }
}

#[test]
fn negative_ranges_as_separate_arguments_parse_in_every_check() {
    for c in all_checks() {
        for args in [
            &["-w", "-10:-2", "-c", "-10:-2"][..],
            &["-w", "@-10:-2"],
            &["-c", "-5:"],
            &["--warning", "-10:-2", "--critical", "~:-1"],
        ] {
            let out = Cmd::check(&c).arg("--print-spec").args(args).run();
            assert_eq!(out.code, 0, "{c}: {out:?}");
            let v: Value = serde_json::from_str(&out.stdout).unwrap();
            assert_eq!(v["parse"]["ok"], true, "{c} {args:?}: {}", v["parse"]);
        }
        // A range that is no range is still refused, by name.
        let out = Cmd::check(&c).args(["-w", "-10:-20"]).run();
        out.assert_status(&status_name(&c), 3);
        assert!(
            out.first_line().contains("start is greater than end"),
            "{c}: {out:?}"
        );
    }
}

#[test]
fn usage_errors_come_in_the_requested_format_for_every_check() {
    for c in all_checks() {
        for args in [
            &["--format", "json", "--no-such-option"][..],
            &["--no-such-option", "--format=json"],
            &["--format", "json", "-w", "x:y"],
        ] {
            let out = Cmd::check(&c).args(args).run();
            assert_eq!(out.code, 3, "{c} {args:?}: {out:?}");
            let v: Value = serde_json::from_str(&out.stdout)
                .unwrap_or_else(|e| panic!("{c} {args:?}: not JSON ({e}): {out:?}"));
            assert_eq!(v["status"], "UNKNOWN", "{c}: {out:?}");
            assert!(
                v["summary"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("usage error: ")),
                "{c}: {out:?}"
            );
        }
        let out = Cmd::check(&c)
            .args(["--format", "prometheus", "--no-such-option"])
            .run();
        assert_eq!(out.code, 3, "{c}: {out:?}");
        let mut samples = 0;
        for line in out.stdout.lines() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples += 1;
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{c}: not exposition: {line}");
        }
        assert!(samples > 0, "{c}: {out:?}");
        assert!(
            out.stdout.contains("UNKNOWN") || out.stdout.contains(" 3"),
            "{c}: {out:?}"
        );
    }
}

// ---- -w/-c change the state, per check -----------------------------------------------------

#[test]
fn storage_kernel_errors_ranges_on_error_records() {
    let dir = tempfile::tempdir().unwrap();
    let kmsg = dir.path().join("kmsg");
    std::fs::write(
        &kmsg,
        "3,1,1000,-;EXT4-fs error (device sdc): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0\n",
    )
    .unwrap();
    let mi = dir.path().join("mountinfo");
    std::fs::write(&mi, "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n").unwrap();
    let base = || {
        api_free("check_storage_kernel_errors")
            .arg("--kmsg")
            .arg(&kmsg)
            .arg("--mountinfo")
            .arg(&mi)
            .args(["--sys", "/nonexistent-sys", "--window", "0", "--no-names"])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
    };
    let out = base().run();
    assert_eq!(out.perf("storage_errors"), Some(1.0), "{out:?}");
    run_cases("check_storage_kernel_errors", base, &count_cases());
}

#[test]
fn iscsi_sessions_ranges_on_unhealthy_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let sys = Sysfs::new(dir.path());
    sys.add(&Session::new(1, "iqn.2016-09.com.openebs.jiva:pvc-a").state("FAILED"));
    let base = || {
        api_free("check_iscsi_sessions")
            .arg("--sys")
            .arg(&sys.root)
            .arg("--no-names")
    };
    let out = base().run();
    assert_eq!(out.perf("sessions_unhealthy"), Some(1.0), "{out:?}");
    run_cases("check_iscsi_sessions", base, &count_cases());
}

#[test]
fn ro_pvc_mounts_ranges_on_read_only_filesystems() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kubelet");
    let mp = root.join("pods/7f3a/volumes/kubernetes.io~csi/pvc-ro/mount");
    std::fs::create_dir_all(&mp).unwrap();
    let mi = dir.path().join("mountinfo");
    // The filesystem itself read-only after an error, its mount rw: ext4's `emergency_ro` (6.15+).
    std::fs::write(
        &mi,
        format!(
            "40 29 8:32 / {} rw,relatime - ext4 /dev/sdc rw,relatime,emergency_ro\n",
            mp.display()
        ),
    )
    .unwrap();
    let base = || {
        api_free("check_ro_pvc_mounts")
            .arg("--mountinfo")
            .arg(&mi)
            .arg("--kubelet-root")
            .arg(&root)
            .args(["--sys", "/nonexistent-sys", "--no-names"])
    };
    let out = base().run();
    assert_eq!(out.perf("ro_volumes"), Some(1.0), "{out:?}");
    run_cases("check_ro_pvc_mounts", base, &count_cases());
}

#[test]
fn stale_csi_mounts_ranges_on_stale_mounts() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("kubelet");
    // A pod mount whose pod is no pod of the node: orphaned, one stale mount.
    let mp = root.join(
        "pods/0dead000-0000-4000-8000-000000000001/volumes/kubernetes.io~csi/pvc-orphan/mount",
    );
    std::fs::create_dir_all(&mp).unwrap();
    let mi = dir.path().join("mountinfo");
    std::fs::write(
        &mi,
        format!(
            "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n40 1 8:32 / {} rw,relatime - ext4 /dev/sdc rw\n",
            mp.display()
        ),
    )
    .unwrap();
    let pods = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![running("ws", "other-0", "n1", 86400)]),
    );
    let pvs = write_json(dir.path(), "pvs.json", &kubectl_list(vec![]));
    let base = || {
        api_free("check_stale_csi_mounts")
            .arg("--mountinfo")
            .arg(&mi)
            .arg("--kubelet-root")
            .arg(&root)
            .args(["--pods-json", &pods, "--pvs-json", &pvs, "--node", "n1"])
    };
    let out = base().run();
    assert_eq!(out.perf("stale_mounts"), Some(1.0), "{out:?}");
    run_cases("check_stale_csi_mounts", base, &count_cases());
}

#[test]
fn kubelet_nested_ops_ranges_on_failing_volumes() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    let err = mount_refs_err("driver.longhorn.io", "pvc-81b676e6", "worker-04");
    let mut log = String::new();
    let mut t = now - 17 * 60;
    let mut backoff = 500u64;
    while t < now - 5 {
        log += &format!(
            "{}{}\n",
            klog_header(t),
            nested_op_msg(t, "driver.longhorn.io", "pvc-81b676e6", "", backoff, &err)
        );
        t += (backoff / 1000).max(1) as i64;
        backoff = (backoff * 2).min(122_000);
    }
    let p = dir.path().join("kubelet.log");
    std::fs::write(&p, log).unwrap();
    let base = || {
        api_free("check_kubelet_nested_ops")
            .arg("--log-file")
            .arg(&p)
    };
    let out = base().run();
    assert_eq!(out.perf("failing_volumes"), Some(1.0), "{out:?}");
    run_cases("check_kubelet_nested_ops", base, &count_cases());
}

#[test]
fn stuck_scheduled_ranges_on_how_long_a_pod_waits() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![
            scheduled_no_status("ws", "stuck-0", "worker-04", 11 * 60),
            running("ws", "fine-0", "worker-04", 86400),
        ]),
    );
    let base = || {
        api_free("check_stuck_scheduled").args([
            "--pods-json",
            &f,
            "--node",
            "worker-04",
            "--no-events",
        ])
    };
    run_cases("check_stuck_scheduled", base, &duration_cases());
    // The OK summary of an @-range reads as durations, not "for less than @300:600".
    let out = base().args(["-w", "@20m:30m", "-c", "1d"]).run();
    out.assert_status("STUCK_SCHEDULED", 0);
    assert!(
        out.first_line()
            .contains("1 pending without containers outside -w @20m:30m (alerts from 20m to 30m)"),
        "{out:?}"
    );
}

fn terminating(name: &str, node: &str, overdue_secs: i64) -> Value {
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":"media","uid":format!("uid-{name}"),"creationTimestamp":ago(86400),
            "deletionTimestamp":ago(overdue_secs),"deletionGracePeriodSeconds":30},
        "spec":{"nodeName":node,"containers":[{"name":"main","image":"x"}]},
        "status":{"phase":"Running"}})
}

#[test]
fn stuck_terminating_ranges_on_how_long_a_pod_is_overdue() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![terminating("seerr-0", "k8s03", 11 * 60)]),
    );
    let base = || {
        api_free("check_stuck_terminating").args([
            "--pods-json",
            &f,
            "--node",
            "k8s03",
            "--no-events",
        ])
    };
    run_cases("check_stuck_terminating", base, &duration_cases());
    // --warning/--critical, the suite's names, beside the old --warning-after/--critical-after.
    for (w, c) in [
        ("--warning", "--critical"),
        ("--warning-after", "--critical-after"),
    ] {
        let out = base().args([w, "5m", c, "10m"]).run();
        out.assert_status("STUCK_TERMINATING", 2);
    }
}

#[test]
fn jiva_rep_crashloop_takes_full_ranges_on_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let pv = "pvc-8ecc2d4f";
    let f = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![
            jiva_replica(pv, 0, "w1", 86400, Rep::Healthy),
            jiva_replica(pv, 1, "w2", 86400, Rep::Healthy),
            jiva_replica(
                pv,
                2,
                "w3",
                86400,
                Rep::CrashLoop {
                    restarts: 5,
                    unready_secs: 60,
                },
            ),
        ]),
    );
    let base = || api_free("check_jiva_rep_crashloop").args(["--pods-json", &f]);
    // The replica is in CrashLoopBackOff (WARNING at least, the volume degraded); -c decides
    // CRITICAL on its 5 restarts.
    run_cases(
        "check_jiva_rep_crashloop",
        base,
        &[
            (vec!["-c", "10"], 1),
            (vec!["-c", "4"], 2),
            (vec!["-c", "6:"], 2),
            (vec!["-c", "@5:5"], 2),
            (vec!["-c", "@6:9"], 1),
            (vec!["-c", "-10:-2"], 2),
            (vec!["-w", "3:", "-c", "10"], 1),
        ],
    );
}

#[test]
fn watch_cache_ranges_on_the_lag() {
    let srv = ApiServer::start();
    let store = ConfigMapStore::new();
    store.put(
        "kube-system",
        "k8s-storage-checks-canary",
        json!({"purpose": "canary"}),
    );
    srv.configmaps(&store, CacheMode::Healthy);
    let kc: PathBuf = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("watch-t0ken".into()));
    let base = || api_free("check_watch_cache").arg("--kubeconfig").arg(&kc);
    // A healthy cache shows the write within a fraction of a second.
    run_cases(
        "check_watch_cache",
        base,
        &[
            (vec!["-w", "2s", "-c", "4s"], 0),
            (vec!["-w", "@0:2s", "-c", "4s"], 1),
            (vec!["-w", "2s:", "-c", "4s"], 1),
            (vec!["-w", "-10:-2", "-c", "4s"], 1),
            (vec!["-w", "2s", "-c", "@0:4s"], 2),
        ],
    );
}

// ---- nothing seen is never OK ----------------------------------------------------------------

#[test]
fn a_node_name_no_pod_carries_is_unknown_with_the_nodes_seen() {
    let dir = tempfile::tempdir().unwrap();
    let f = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![
            scheduled_no_status("ws", "stuck-0", "worker-04", 11 * 60),
            terminating("seerr-0", "worker-03", 11 * 60),
        ]),
    );
    for bin in ["check_stuck_scheduled", "check_stuck_terminating"] {
        let out = api_free(bin)
            .args(["--pods-json", &f, "--node", "worker-9"])
            .run();
        out.assert_status(&status_name(bin), 3);
        assert!(
            out.first_line()
                .contains("no node 'worker-9' in --pods-json (nodes seen: worker-03, worker-04)"),
            "{bin}: {out:?}"
        );
        // A node that has pods, none of them in the namespace asked for: the node is real.
        let out = api_free(bin)
            .args([
                "--pods-json",
                &f,
                "--node",
                "worker-04",
                "--namespace",
                "empty",
            ])
            .run();
        out.assert_status(&status_name(bin), 0);
    }
}

#[test]
fn with_the_api_a_missing_node_differs_from_a_node_without_pods() {
    let srv = ApiServer::start();
    srv.set(
        "pods",
        vec![scheduled_no_status("ws", "stuck-0", "worker-04", 60)],
    );
    srv.set(
        "nodes",
        vec![json!({"kind":"Node","apiVersion":"v1","metadata":{"name":"worker-05"}})],
    );
    let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("t0ken".into()));
    for bin in ["check_stuck_scheduled", "check_stuck_terminating"] {
        let run = |node: &str| {
            api_free(bin)
                .arg("--kubeconfig")
                .arg(&kc)
                .args(["--node", node, "--no-events"])
                .run()
        };
        // worker-05 exists and runs no pod: OK, that is the truth.
        let out = run("worker-05");
        out.assert_status(&status_name(bin), 0);
        assert!(
            out.first_line().contains("0 pods on node worker-05"),
            "{out:?}"
        );
        // worker-9 is no node: UNKNOWN naming the nodes the API has.
        let out = run("worker-9");
        out.assert_status(&status_name(bin), 3);
        assert!(
            out.first_line()
                .contains("no node 'worker-9' in the API (nodes seen: worker-04, worker-05)"),
            "{bin}: {out:?}"
        );
        // An explicit name in another spelling is a hint, never a silent switch.
        let out = run("WORKER-04.example.com");
        out.assert_status(&status_name(bin), 3);
        assert!(
            out.first_line()
                .contains("this host may be --node worker-04"),
            "{bin}: {out:?}"
        );
    }
}
