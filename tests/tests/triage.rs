//! `k8s-storage-checks triage` end to end (issue 32). The incident replay
//! (tests/src/bin/replay.rs: as root the real kernel's loop ext4 driven into its error path and a
//! stopped FUSE daemon, the iSCSI sysfs tree the incident's node had, the incidents' pods from the
//! API) ends with the triage of each incident: the storage cascade is one chain rooted at the iSCSI
//! session with the read-only PV and the wedged pod under it, the Jiva degradation a chain of its
//! own, and the stale CSI mount one chain from the deleted PV's staging mount through the kubelet's
//! backoff loop to the three stuck pods. Live on a node whose FUSE volume hangs, the triage answers
//! within its `-t`, names the hung mount, and lists every check of the program.

use e2e::fuse::{bindfs, stop_daemon};
use e2e::{need_root, need_tool, Cmd, KubeletTree, Ns};
use serde_json::Value;
use std::time::Duration;

/// The replay's triage answers (JSON), per incident anchor.
fn replay_triage() -> Vec<(String, Value, i32)> {
    let out = Cmd::check("k8s-storage-checks-replay")
        .arg("--bin-dir")
        .arg(e2e::bin_dir())
        .args(["--format", "json"])
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    let mut v = Vec::new();
    let mut lines = out.stdout.lines();
    while let Some(l) = lines.next() {
        let Some(rest) = l.strip_prefix("━━━ triage of docs/incidents.md") else {
            continue;
        };
        let anchor = rest.split('…').next().unwrap().to_string();
        let json = lines
            .by_ref()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no triage answer for {anchor}:\n{}", out.stdout));
        let code: i32 = lines
            .find_map(|l| l.strip_prefix("(exit ")?.strip_suffix(')')?.parse().ok())
            .unwrap();
        v.push((anchor, serde_json::from_str(json).unwrap(), code));
    }
    assert_eq!(v.len(), 2, "a triage per incident:\n{}", out.stdout);
    v
}

/// The chain whose first root has `signal`.
fn chain<'a>(t: &'a Value, signal: &str) -> &'a Value {
    t["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["findings"][0]["signal"] == signal)
        .unwrap_or_else(|| panic!("no chain rooted at {signal}: {t:#}"))
}

fn member<'a>(c: &'a Value, signal: &str) -> Vec<&'a Value> {
    c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["signal"] == signal)
        .collect()
}

#[test]
fn the_replay_ends_with_one_chain_per_incident_root_cause_first() {
    let t = replay_triage();
    // The storage cascade.
    let (anchor, cascade, code) = &t[0];
    assert_eq!(anchor, "#1-pvek8s-storage-cascade");
    assert_eq!(*code, 2);
    let c = chain(cascade, "session_recovery_timed_out");
    let root = &c["findings"][0];
    assert_eq!(root["subject"]["session"], "session3", "{c:#}");
    assert_eq!(c["roots"].as_array().unwrap().len(), 1, "{c:#}");
    // Read-only under a read-write mount (remounted_ro) from the incident's files, or
    // emergency_ro: the volume's own finding, whichever the node's mount table shows.
    let ro: Vec<&Value> = [member(c, "remounted_ro"), member(c, "emergency_ro")]
        .concat()
        .into_iter()
        .filter(|f| f["subject"]["pvc"] == "config-seerr-0")
        .collect();
    assert_eq!(
        ro.len(),
        1,
        "seerr's read-only volume under the session: {c:#}"
    );
    assert!(
        ro[0]["caused_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["id"] == root["id"]),
        "{c:#}"
    );
    let wedged = member(c, "stuck_terminating");
    assert_eq!(wedged.len(), 1, "{c:#}");
    assert_eq!(wedged[0]["subject"]["pod"], "seerr-seerr-chart-0");
    let head = c["headline"].as_str().unwrap();
    assert!(
        head.starts_with("session_recovery_timed_out session3 → ")
            && head.contains(
                " PVC media/config-seerr-0 → stuck_terminating pod media/seerr-seerr-chart-0"
            ),
        "{head}"
    );
    assert!(
        c["next"].as_str().unwrap().contains("iscsiadm"),
        "the root's step: {}",
        c["next"]
    );
    // The Jiva degradation: a chain of its own, the crash loop its root.
    let j = chain(cascade, "crashloop");
    assert_eq!(member(j, "degraded_redundancy").len(), 1, "{j:#}");
    assert!(member(c, "crashloop").is_empty());
    // radarr on k8s02: the kernel's abort under its read-only volume.
    let k = chain(cascade, "journal_abort");
    assert!(
        member(k, "emergency_ro")
            .iter()
            .any(|f| f["subject"]["pvc"] == "radarr-config")
            || member(k, "remounted_ro")
                .iter()
                .any(|f| f["subject"]["pvc"] == "radarr-config"),
        "{k:#}"
    );

    // The stale CSI mount.
    let (anchor, stale, code) = &t[1];
    assert_eq!(anchor, "#2-stale-csi-mount");
    assert_eq!(*code, 2);
    let s = chain(stale, "staging_pv_gone");
    assert_eq!(
        s["findings"][0]["subject"]["pv"],
        "pvc-81b676e6-2d4f-4c1a-9e3b-7f5a0c2d8e91"
    );
    let queue = member(s, "volume_op_stuck");
    assert_eq!(queue.len(), 1, "{s:#}");
    let pods = member(s, "stuck_no_status");
    let mut names: Vec<&str> = pods
        .iter()
        .map(|p| p["subject"]["pod"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["ws-b70553ae", "ws-d048256b", "ws-ebafc5da"],
        "{s:#}"
    );
    for p in pods {
        assert!(
            p["caused_by"]
                .as_array()
                .unwrap()
                .iter()
                .any(|l| l["id"] == queue[0]["id"]
                    && l["key"] == "node"
                    && l["value"] == "worker-04"),
            "{p:#}"
        );
    }
}

#[test]
fn triage_on_a_node_with_a_hung_fuse_volume_answers_within_its_timeout_naming_it() {
    let t = "triage_on_a_node_with_a_hung_fuse_volume_answers_within_its_timeout_naming_it";
    if !need_root(t) || !need_tool(t, "bindfs") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(tmp.path());
    let mut ns = Ns::new();
    let mp = tree.pod_csi_mount("uid-hung", "pvc-hung", "driver.longhorn.io");
    let pid = bindfs(&mut ns, &tmp.path().join("src"), &mp);
    stop_daemon(pid);
    let out = ns
        .cmd(e2e::bin("k8s-storage-checks"))
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent")
        .arg("triage")
        .arg("--kubelet-root")
        .arg(&tree.root)
        .args(["--node", "node-1", "-t", "8", "--format", "json"])
        .run();
    assert!(out.elapsed < Duration::from_secs(8), "{out:?}");
    assert_eq!(out.code, 2, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let all: Vec<&Value> = v["chains"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap())
        .chain(v["alone"].as_array().unwrap())
        .collect();
    assert!(
        all.iter()
            .any(|f| f["signal"] == "mount_hung" && f["subject"]["mount"] == mp.to_str().unwrap()),
        "the hung mount is named: {v:#}"
    );
    // Every check of the program ran, and each answered or is named with why.
    let list = Cmd::check("k8s-storage-checks").arg("--list").run();
    let names: Vec<&str> = list
        .stdout
        .lines()
        .filter_map(|l| l.split(' ').next())
        .filter(|n| n.starts_with("check_"))
        .collect();
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), names.len(), "{v:#}");
    for n in names {
        let c = checks
            .iter()
            .find(|c| c["check"] == n)
            .unwrap_or_else(|| panic!("{n} did not run: {v:#}"));
        assert!(!c["summary"].as_str().unwrap().is_empty(), "{c}");
    }
    let api = checks
        .iter()
        .find(|c| c["check"] == "check_stuck_scheduled")
        .unwrap();
    assert_eq!(api["status"], "UNKNOWN");
    assert!(
        api["summary"]
            .as_str()
            .unwrap()
            .starts_with("no Kubernetes credentials found"),
        "{api}"
    );
    assert!(
        v["summary"].as_str().unwrap().contains("UNKNOWN: "),
        "{}",
        v["summary"]
    );
}
