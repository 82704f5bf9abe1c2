//! Per-finding structured output, through the release binaries against the same real inputs the
//! checks' own e2e tests build (a loop ext4 driven read-only by the kernel, a dead FUSE daemon,
//! kubelet logs, the real kernel log, iSCSI sysfs trees, kubectl JSON, the loopback API server):
//! every check's `--format json` findings carry `signal` and `subject`, and its
//! `--format prometheus` answer has one `k8s_storage_check_finding` series per non-OK finding with
//! the same labels and passes `promtool check metrics` — in every state, including usage errors,
//! UNKNOWN and timeouts. A node with 10 000 read-only volumes stays under the series cap and says
//! how many it left out.

use e2e::apiserver::fixtures::{
    jiva_incident_replicas, kubectl_list, pod_event, running, scheduled_no_status,
};
use e2e::apiserver::watchcache::{CacheMode, ConfigMapStore};
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa};
use e2e::logs::{klog_header, mount_refs_err, nested_op_msg, now_secs};
use e2e::sysfs::{mountinfo_line, Session, Sysfs};
use e2e::{need_root, need_tool, write_json, Cmd, KubeletTree, Ns, Output};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const FINDING: &str = "k8s_storage_check_finding";

/// The subject fields, in the documented order (docs/output.md).
const FIELDS: [&str; 11] = [
    "node",
    "namespace",
    "pod",
    "pvc",
    "pv",
    "driver",
    "device",
    "mount",
    "iqn",
    "session",
    "server",
];

/// A command with no credentials from the test host's environment.
fn clean(c: Cmd) -> Cmd {
    c.without_host_credentials().env("TZ", "UTC")
}

/// Run with `--format json`; the parsed answer (which must be one JSON object whose exit_code is
/// the process's).
fn json_run(c: Cmd) -> (Output, Value) {
    let out = c.args(["--format", "json"]).run();
    let v: Value =
        serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"));
    assert_eq!(v["exit_code"], out.code, "{out:?}");
    // Every finding of every check: a snake_case signal and a subject of documented fields only.
    for f in v["findings"].as_array().expect("findings") {
        let sig = f["signal"]
            .as_str()
            .unwrap_or_else(|| panic!("no signal: {f}"));
        assert!(plugin::report::is_snake_case(sig), "signal {sig:?}: {f}");
        let subject = f["subject"]
            .as_object()
            .unwrap_or_else(|| panic!("no subject: {f}"));
        for (k, val) in subject {
            assert!(FIELDS.contains(&k.as_str()), "undocumented field {k}: {f}");
            assert!(
                val.as_str().is_some_and(|s| !s.is_empty()),
                "empty {k}: {f}"
            );
        }
    }
    (out, v)
}

/// The findings with this signal.
fn with_signal<'a>(v: &'a Value, signal: &str) -> Vec<&'a Value> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["signal"] == signal)
        .collect()
}

/// The one finding with this signal.
fn one<'a>(v: &'a Value, signal: &str) -> &'a Value {
    let f = with_signal(v, signal);
    assert_eq!(f.len(), 1, "one {signal} finding wanted: {v:#}");
    f[0]
}

/// `promtool check metrics` on a text: it must pass without a complaint.
fn promtool(text: &str) {
    let out = Cmd::new("promtool")
        .args(["check", "metrics"])
        .stdin(text.as_bytes().to_vec())
        .run();
    assert!(
        out.code == 0 && out.stdout.trim().is_empty() && out.stderr.trim().is_empty(),
        "promtool check metrics rejected:\n{text}\n{out:?}"
    );
}

fn have_promtool(test: &str) -> bool {
    need_tool(test, "promtool")
}

/// Run with `--format prometheus`, check it with promtool, return it with the exit code.
fn prom_run(c: Cmd) -> Output {
    let out = c.args(["--format", "prometheus"]).run();
    assert!((0..=3).contains(&out.code), "{out:?}");
    promtool(&out.stdout);
    let status = sample(&out.stdout, "k8s_storage_check_status");
    assert_eq!(status.len(), 1, "{out:?}");
    assert_eq!(status[0].1, out.code as f64, "{out:?}");
    out
}

/// Unescape a label value of the exposition format.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The samples of a metric: (labels, value).
fn sample(text: &str, metric: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let mut v = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let Some(rest) = rest.strip_prefix('{') else {
            continue;
        };
        let mut labels = BTreeMap::new();
        let mut r = rest;
        loop {
            if let Some(after) = r.strip_prefix('}') {
                r = after;
                break;
            }
            let (k, after) = r.split_once("=\"").expect("label=");
            let mut end = 0;
            let b = after.as_bytes();
            while b[end] != b'"' {
                end += if b[end] == b'\\' { 2 } else { 1 };
            }
            labels.insert(k.to_string(), unescape(&after[..end]));
            r = after[end + 1..].trim_start_matches(',');
        }
        v.push((labels, r.trim().parse::<f64>().expect("value")));
    }
    v
}

/// The finding series' labels must be the JSON findings' (non-OK ones): state, signal, subject.
fn assert_series_match_json(prom: &str, json: &Value, check: &str) {
    let mut want: Vec<BTreeMap<String, String>> = Vec::new();
    for f in json["findings"].as_array().unwrap() {
        let st = f["status"].as_str().unwrap();
        if st == "OK" {
            continue;
        }
        let mut m = BTreeMap::new();
        m.insert("check".to_string(), check.to_string());
        m.insert("state".into(), st.to_ascii_lowercase());
        m.insert("signal".into(), f["signal"].as_str().unwrap().to_string());
        for (k, val) in f["subject"].as_object().unwrap() {
            m.insert(k.clone(), val.as_str().unwrap().to_string());
        }
        if !want.contains(&m) {
            want.push(m);
        }
    }
    let got = sample(prom, FINDING);
    // A volume's names (namespace, pvc, pod) are in the info series, with the finding's labels.
    let info = sample(prom, "k8s_storage_check_finding_info");
    let mut got_labels: Vec<_> = got
        .iter()
        .map(|(l, _)| {
            let mut all = l.clone();
            for (i, _) in &info {
                if i.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "namespace" | "pvc" | "pod"))
                    .eq(l.iter())
                {
                    all.extend(i.clone());
                }
            }
            all
        })
        .collect();
    got_labels.sort();
    want.sort();
    assert_eq!(got_labels, want, "{prom}");
    // Issue 26: each finding series' runbook and next step, the JSON finding's, in
    // k8s_storage_check_finding_next with the series' labels.
    let steps = sample(prom, "k8s_storage_check_finding_next");
    assert_eq!(steps.len(), got.len(), "{prom}");
    for (l, _) in &got {
        let step = steps
            .iter()
            .map(|(s, _)| s)
            .find(|s| l.iter().all(|(k, v)| s.get(k) == Some(v)) && s.len() == l.len() + 2)
            .unwrap_or_else(|| panic!("no step series for {l:?}: {prom}"));
        let f = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["signal"].as_str() == Some(l["signal"].as_str())
                    && f["subject"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| l.get(k).is_none_or(|x| Some(x.as_str()) == v.as_str()))
            })
            .unwrap_or_else(|| panic!("no JSON finding for {l:?}"));
        assert_eq!(Some(step["runbook"].as_str()), f["runbook"].as_str(), "{f}");
        assert_eq!(Some(step["next"].as_str()), f["next"].as_str(), "{f}");
    }
    for (l, val) in &got {
        let code = match l["state"].as_str() {
            "warning" => 1.0,
            "critical" => 2.0,
            "unknown" => 3.0,
            s => panic!("state {s}"),
        };
        assert_eq!(*val, code, "{l:?}");
    }
    let omitted = sample(prom, "k8s_storage_check_findings_omitted");
    assert_eq!(omitted.len(), 1);
    assert_eq!(omitted[0].1, 0.0, "{prom}");
}

/// This host's name as the node checks read it (lower-case /proc/sys/kernel/hostname).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_lowercase()
}

fn subject(f: &Value) -> Value {
    f["subject"].clone()
}

// ---------------------------------------------------------------------------------------------
// check_ro_pvc_mounts: a real ext4 driven read-only by the kernel, named from kubectl JSON.

const RO_PV: &str = "pvc-a634b9a3-5d1e-4c1b-8a2f-0c0ffee00001";
const RO_UID: &str = "8e1f6a2c-4b1d-4c3e-9f0a-a634b9a30001";

fn named_pod(ns: &str, name: &str, uid: &str, claim: &str) -> Value {
    json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":name,"namespace":ns,"uid":uid},
        "spec":{"nodeName":"k8s02","containers":[{"name":"main","image":"x"}],
            "volumes":[{"name":"config","persistentVolumeClaim":{"claimName":claim}}]},
        "status":{"phase":"Running"}})
}

fn bound_pv(name: &str, ns: &str, claim: &str, driver: &str) -> Value {
    json!({"apiVersion":"v1","kind":"PersistentVolume",
        "metadata":{"name":name},
        "spec":{"capacity":{"storage":"5Gi"},"accessModes":["ReadWriteOnce"],
            "claimRef":{"kind":"PersistentVolumeClaim","namespace":ns,"name":claim},
            "csi":{"driver":driver,"volumeHandle":name,"fsType":"ext4"}},
        "status":{"phase":"Bound"}})
}

#[test]
fn ro_pvc_mounts_findings_name_claim_pod_pv_device_and_mount() {
    let t = "ro_pvc_mounts_findings_name_claim_pod_pv_device_and_mount";
    if !need_root(t) || !need_tool(t, "mkfs.ext4") || !have_promtool(t) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let driver = "jiva.csi.openebs.io";
    let staging = tree.staging_mount(driver, RO_PV, &e2e::sha256_hex(RO_PV));
    let dev = ns.loop_fs(
        &work.path().join("ro.img"),
        64,
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        &staging,
    );
    let publish = tree.pod_csi_mount(RO_UID, RO_PV, driver);
    ns.sh(&format!(
        "mount --bind '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    let pods = write_json(
        work.path(),
        "pods.json",
        &kubectl_list(vec![named_pod(
            "media",
            "radarr-0",
            RO_UID,
            "radarr-config",
        )]),
    );
    let pvs = write_json(
        work.path(),
        "pvs.json",
        &kubectl_list(vec![bound_pv(RO_PV, "media", "radarr-config", driver)]),
    );
    let run = || {
        clean(ns.check("check_ro_pvc_mounts")).args([
            "--kubelet-root",
            tree.root.to_str().unwrap(),
            "--pods-json",
            &pods,
            "--pvs-json",
            &pvs,
            "-t",
            "20",
        ])
    };
    let name = dev.trim_start_matches("/dev/").to_string();

    // Healthy: one OK finding with its subject, no finding series.
    let (out, v) = json_run(run());
    assert_eq!(out.code, 0, "{out:?}");
    let f = one(&v, "writable");
    assert_eq!(f["subject"]["pv"], RO_PV);
    assert_eq!(f["subject"]["device"], name.as_str());
    let prom = prom_run(run());
    assert!(sample(&prom.stdout, FINDING).is_empty(), "{prom:?}");
    assert_series_match_json(&prom.stdout, &v, "check_ro_pvc_mounts");

    // The kernel's own error path remounts it read-only.
    std::fs::write(
        format!("/sys/fs/ext4/{name}/trigger_fs_error"),
        "k8s-storage-checks structured output test",
    )
    .unwrap();
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    // The kernel says emergency_ro (6.12+) or only ro in the superblock options.
    let super_opts = std::fs::read_to_string(format!("/proc/{}/mountinfo", ns.pid()))
        .unwrap()
        .lines()
        .find(|l| l.contains(&staging.display().to_string()))
        .and_then(|l| l.rsplit(' ').next().map(str::to_string))
        .expect("the staging mount");
    let signal = if super_opts.split(',').any(|o| o == "emergency_ro") {
        "emergency_ro"
    } else {
        assert!(super_opts.split(',').any(|o| o == "ro"), "{super_opts}");
        "remounted_ro"
    };
    let f = one(&v, signal);
    assert_eq!(f["status"], "CRITICAL");
    assert_eq!(
        subject(f),
        // The node is the one the check runs on (its host name), never the pod lookup's: a
        // label from a lookup that can fail would reset the finding's alert (issue 33).
        json!({"node": host_name(), "namespace": "media", "pod": "radarr-0",
               "pvc": "radarr-config", "pv": RO_PV, "device": name,
               "mount": staging.to_str().unwrap()})
    );
    let prom = prom_run(run());
    assert_eq!(prom.code, 2);
    assert_series_match_json(&prom.stdout, &v, "check_ro_pvc_mounts");
    let s = sample(&prom.stdout, FINDING);
    assert_eq!(s.len(), 1, "{prom:?}");
    // Keyed on identity; the claim's names are in the info series (issue 33).
    assert_eq!(s[0].0["pv"], RO_PV);
    assert!(!s[0].0.contains_key("namespace"), "{prom:?}");
    assert_eq!(s[0].0["signal"], signal);
    assert_eq!(s[0].1, 2.0);
    let info = sample(&prom.stdout, "k8s_storage_check_finding_info");
    assert_eq!(info.len(), 1, "{prom:?}");
    assert_eq!(info[0].0["namespace"], "media");
    assert_eq!(info[0].0["pvc"], "radarr-config");
}

// ---------------------------------------------------------------------------------------------
// check_stale_csi_mounts: a bindfs FUSE pod mount whose daemon is killed (ENOTCONN).

#[test]
fn stale_csi_mounts_findings_name_node_pod_pv_driver_and_mount() {
    let t = "stale_csi_mounts_findings_name_node_pod_pv_driver_and_mount";
    if !need_root(t) || !need_tool(t, "bindfs") || !have_promtool(t) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let mut ns = Ns::new();
    let driver = "driver.longhorn.io";
    let mp = tree.pod_csi_mount("u-dead", "pvc-dead", driver);
    let src = work.path().join("src-dead");
    let pid = e2e::fuse::bindfs(&mut ns, &src, &mp);
    let pods = write_json(
        work.path(),
        "pods.json",
        &kubectl_list(vec![json!({"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":"ws-0","namespace":"ws","uid":"u-dead"},
            "spec":{"nodeName":"node-1","containers":[{"name":"c","image":"x"}]},
            "status":{"phase":"Running"}})]),
    );
    let run = || {
        clean(ns.check("check_stale_csi_mounts"))
            .arg("--kubelet-root")
            .arg(&tree.root)
            .args(["--node", "node-1", "--pods-json", &pods, "-t", "20"])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(one(&v, "healthy")["subject"]["mount"], mp.to_str().unwrap());
    prom_run(run());

    e2e::fuse::kill_daemon(pid);
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    let f = one(&v, "stale_mount");
    assert_eq!(f["status"], "CRITICAL");
    assert_eq!(
        subject(f),
        json!({"node": "node-1", "namespace": "ws", "pod": "ws-0", "pv": "pvc-dead",
               "driver": driver, "device": src.to_str().unwrap(),
               "mount": mp.to_str().unwrap()})
    );
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_stale_csi_mounts");
    assert_eq!(sample(&prom.stdout, FINDING).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// check_kubelet_nested_ops: a kubelet log with 17 minutes of a failing UnmountDevice.

#[test]
fn kubelet_nested_ops_findings_name_pv_and_driver() {
    let t = "kubelet_nested_ops_findings_name_pv_and_driver";
    if !have_promtool(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    let driver = "driver.longhorn.io";
    let err = mount_refs_err(driver, "pvc-81b676e6", "worker-04");
    let mut log = String::new();
    let (mut ts, mut b) = ((now - 17 * 60) * 1000, 500u64);
    while ts <= (now - 5) * 1000 {
        let t = ts / 1000;
        log.push_str(&klog_header(t));
        log.push_str(&nested_op_msg(t, driver, "pvc-81b676e6", "", b, &err));
        log.push('\n');
        ts += b as i64 + 50;
        b = (b * 2).min(122_000);
    }
    let p = dir.path().join("kubelet.log");
    std::fs::write(&p, log).unwrap();
    let run = || {
        clean(Cmd::check("check_kubelet_nested_ops"))
            .arg("--log-file")
            .arg(&p)
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    let f = one(&v, "volume_op_stuck");
    assert_eq!(f["status"], "CRITICAL");
    assert_eq!(subject(f), json!({"pv": "pvc-81b676e6", "driver": driver}));
    assert_eq!(one(&v, "log_source_read")["status"], "OK");
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_kubelet_nested_ops");

    // A fresh single failure with a pod: WARNING, the pod named.
    let q = dir.path().join("fresh.log");
    let err = "MountVolume.MountDevice failed for volume \"pvc-746b2837\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^pvc-746b2837\") pod \"seerr-0\" (UID: \"0d6a\") : rpc error: code = DeadlineExceeded desc = context deadline exceeded";
    std::fs::write(
        &q,
        format!(
            "{}{}\n",
            klog_header(now - 60),
            nested_op_msg(now - 60, driver, "pvc-746b2837", "", 500, err)
        ),
    )
    .unwrap();
    let run = || {
        clean(Cmd::check("check_kubelet_nested_ops"))
            .arg("--log-file")
            .arg(&q)
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 1, "{out:?}");
    let f = one(&v, "volume_op_failing");
    assert_eq!(f["subject"]["driver"], driver);
    assert_eq!(f["subject"]["pod"], "seerr-0");
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_kubelet_nested_ops");
}

// ---------------------------------------------------------------------------------------------
// check_storage_kernel_errors: the real kernel log after ext4's error path on a PV's loop device.

#[test]
fn storage_kernel_errors_findings_name_device_pv_and_mount() {
    let t = "storage_kernel_errors_findings_name_device_pv_and_mount";
    if !need_root(t) || !need_tool(t, "mkfs.ext4") || !have_promtool(t) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ns = Ns::new();
    let kt = KubeletTree::new(tmp.path());
    let pv = format!("pvc-sout{}", std::process::id());
    let mp = kt.legacy_staging_mount(&pv);
    let dev = ns.loop_fs(
        &tmp.path().join("pv.img"),
        16,
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        &mp,
    );
    let name = dev.trim_start_matches("/dev/").to_string();
    ns.sh(&format!(
        "printf 'k8s-storage-checks structured {}' > /sys/fs/ext4/{name}/trigger_fs_error",
        std::process::id()
    ));
    let run = || {
        clean(ns.check("check_storage_kernel_errors"))
            .args(["--window", "10m", "--kubelet-root"])
            .arg(&kt.root)
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    // Other tests' loop devices may have errors in the same kernel log: this device's findings.
    let mine: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["subject"]["device"] == name.as_str())
        .collect();
    let signals: Vec<&str> = mine.iter().map(|f| f["signal"].as_str().unwrap()).collect();
    for s in ["ext4_error", "remount_ro"] {
        assert!(signals.contains(&s), "{s} not in {signals:?}: {v:#}");
    }
    for f in &mine {
        assert_eq!(
            subject(f),
            json!({"node": host_name(), "pv": pv, "device": name, "mount": mp.to_str().unwrap()}),
            "{f}"
        );
    }
    let prom = prom_run(run());
    let s = sample(&prom.stdout, FINDING);
    assert!(
        s.iter().any(|(l, v)| l["signal"] == "remount_ro"
            && l["device"] == name
            && l["pv"] == pv
            && *v == 2.0),
        "{prom:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// check_iscsi_sessions: a sysfs tree with a FAILED session whose disk holds a PV's mounts.

#[test]
fn iscsi_sessions_findings_name_session_iqn_device_and_claim() {
    let t = "iscsi_sessions_findings_name_session_iqn_device_and_claim";
    if !have_promtool(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sys = Sysfs::new(dir.path());
    // A kubelet root that exists (the check validates it), laid out like microk8s's.
    let kroot = dir.path().join("var/snap/microk8s/common/var/lib/kubelet");
    std::fs::create_dir_all(&kroot).unwrap();
    let k = kroot.to_str().unwrap().to_string();
    let pv = "pvc-a634b9a3-0c8e-4b2f-8d6a-91e7f2c5b302";
    let iqn = format!("iqn.2016-09.com.openebs.jiva:{pv}");
    let ok_pv = "pvc-746b2837-5f1c-4d7e-9a51-3c2b8e0f4a11";
    let ok_iqn = format!("iqn.2016-09.com.openebs.jiva:{ok_pv}");
    sys.add(&Session::new(1, &ok_iqn).disk(0, "sdb", "8:16", "running"));
    let mut mounts = String::from("22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n");
    let mut id = 100;
    for (p, sd, mm, uid) in [
        (pv, "sdc", "8:32", "8e1f6a2c"),
        (ok_pv, "sdb", "8:16", "77aa"),
    ] {
        for mp in [
            PathBuf::from(format!(
                "{k}/plugins/kubernetes.io/csi/jiva.csi.openebs.io/{}/globalmount",
                e2e::sha256_hex(p)
            )),
            PathBuf::from(format!(
                "{k}/pods/{uid}/volumes/kubernetes.io~csi/{p}/mount"
            )),
        ] {
            mounts.push_str(&mountinfo_line(id, mm, &mp, sd, "rw"));
            id += 1;
        }
    }
    let mi = dir.path().join("mountinfo");
    std::fs::write(&mi, mounts).unwrap();
    let pods = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![named_pod(
            "media",
            "radarr-0",
            "8e1f6a2c",
            "radarr-config",
        )]),
    );
    let pvs = write_json(
        dir.path(),
        "pvs.json",
        &kubectl_list(vec![bound_pv(
            pv,
            "media",
            "radarr-config",
            "jiva.csi.openebs.io",
        )]),
    );
    let run = || {
        clean(Cmd::check("check_iscsi_sessions"))
            .arg("--sys")
            .arg(&sys.root)
            .arg("--mountinfo")
            .arg(&mi)
            .args([
                "--kubelet-root",
                &k,
                "--pods-json",
                &pods,
                "--pvs-json",
                &pvs,
            ])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 0, "{out:?}");
    let f = one(&v, "session_ok");
    assert_eq!(
        subject(f),
        json!({"pv": ok_pv, "device": "sdb", "iqn": ok_iqn, "session": "session1"})
    );
    prom_run(run());

    // The incident: the session to radarr's volume fails, its disk blocked.
    sys.add(
        &Session::new(2, &iqn)
            .state("FAILED")
            .conn_state(Some("failed"))
            .disk(0, "sdc", "8:32", "blocked"),
    );
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    let f = one(&v, "session_failed");
    assert_eq!(f["status"], "CRITICAL");
    assert_eq!(
        subject(f),
        json!({"namespace": "media", "pod": "radarr-0",
               "pvc": "radarr-config", "pv": pv, "device": "sdc",
               "iqn": iqn, "session": "session2"})
    );
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_iscsi_sessions");

    // Expectations without a session: findings with a signal and no subject to name.
    let (out, v) = json_run(run().args(["--min-sessions", "3"]));
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(subject(one(&v, "too_few_sessions")), json!({}));
}

// ---------------------------------------------------------------------------------------------
// check_jiva_rep_crashloop: the incident's crash-looping replica, from kubectl JSON.

#[test]
fn jiva_rep_crashloop_findings_name_replica_pod_node_and_pv() {
    let t = "jiva_rep_crashloop_findings_name_replica_pod_node_and_pv";
    if !have_promtool(t) {
        return;
    }
    const PV: &str = "pvc-8ecc2d4f-3b1e-4a52-9a77-0c1d2e3f4a5b";
    let dir = tempfile::tempdir().unwrap();
    let pods = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(jiva_incident_replicas(PV)),
    );
    let run = || clean(Cmd::check("check_jiva_rep_crashloop")).args(["--pods-json", &pods]);
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        subject(one(&v, "crashloop")),
        json!({"node": "k8s03", "namespace": "openebs",
               "pod": format!("{PV}-jiva-rep-1"), "pv": PV})
    );
    assert_eq!(with_signal(&v, "replica_ok").len(), 2);
    let f = one(&v, "degraded_redundancy");
    assert_eq!(f["status"], "WARNING");
    assert_eq!(subject(f), json!({"pv": PV}));
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_jiva_rep_crashloop");
    assert_eq!(sample(&prom.stdout, FINDING).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// check_stuck_scheduled: a pod the kubelet never synced, from kubectl JSON.

#[test]
fn stuck_scheduled_findings_name_node_namespace_and_pod() {
    let t = "stuck_scheduled_findings_name_node_namespace_and_pod";
    if !have_promtool(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pods = write_json(
        dir.path(),
        "pods.json",
        &kubectl_list(vec![
            running("media", "radarr-0", "worker-04", 86400),
            scheduled_no_status("llmsafespaces", "ws-b70553ae", "worker-04", 11 * 60),
        ]),
    );
    let run = || {
        clean(Cmd::check("check_stuck_scheduled")).args([
            "--pods-json",
            &pods,
            "--node",
            "worker-04",
        ])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        subject(one(&v, "stuck_no_status")),
        json!({"node": "worker-04", "namespace": "llmsafespaces", "pod": "ws-b70553ae"})
    );
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_stuck_scheduled");
    assert_eq!(sample(&prom.stdout, FINDING).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// check_stuck_terminating: the incident's seerr pod through the API, with its FailedUnmount event.

#[test]
fn stuck_terminating_findings_name_pod_and_the_wedged_mount() {
    let t = "stuck_terminating_findings_name_pod_and_the_wedged_mount";
    if !have_promtool(t) {
        return;
    }
    const UID: &str = "3c2b9f1e-5a7d-4e2f-9b1a-746b28370001";
    let mount = format!("/var/snap/microk8s/common/var/lib/kubelet/pods/{UID}/volumes/kubernetes.io~csi/pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001/mount");
    let ago = e2e::apiserver::fixtures::ago;
    let pod = json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":"seerr-0","namespace":"media","uid":UID,"creationTimestamp":ago(86400),
            "deletionTimestamp":ago(41 * 60 - 30),"deletionGracePeriodSeconds":30},
        "spec":{"nodeName":"k8s03","terminationGracePeriodSeconds":30,
            "containers":[{"name":"main","image":"x"}]},
        "status":{"phase":"Running"}});
    let s = ApiServer::start();
    s.set(
        "pods",
        vec![pod, running("media", "radarr-0", "k8s03", 86400)],
    );
    s.set(
        "events",
        vec![pod_event(
            "media",
            "seerr-0",
            "FailedUnmount",
            &format!("UnmountVolume.TearDown failed for volume \"pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001\") pod \"{UID}\" (UID: \"{UID}\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = chmod {mount}: read-only file system"),
            40 * 60,
        )],
    );
    let kc = s.kubeconfig(KubeCa::Inline, KubeAuth::Token("s0-t0ken".into()));
    let run = || {
        clean(Cmd::check("check_stuck_terminating"))
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["--node", "k8s03"])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        subject(one(&v, "stuck_terminating")),
        json!({"node": "k8s03", "namespace": "media", "pod": "seerr-0", "mount": mount})
    );
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_stuck_terminating");
    assert_eq!(sample(&prom.stdout, FINDING).len(), 1);
}

// ---------------------------------------------------------------------------------------------
// check_watch_cache: a frozen watch cache on the loopback API server.

#[test]
fn watch_cache_findings_name_the_api_server() {
    let t = "watch_cache_findings_name_the_api_server";
    if !have_promtool(t) {
        return;
    }
    let srv = ApiServer::start();
    let store = ConfigMapStore::new();
    store.put(
        "kube-system",
        "k8s-storage-checks-canary",
        json!({"purpose": "canary"}),
    );
    srv.configmaps(&store, CacheMode::Frozen);
    let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("watch-t0ken".into()));
    let run = || {
        clean(Cmd::check("check_watch_cache"))
            .arg("--kubeconfig")
            .arg(&kc)
            .args(["--deadline", "2s", "-t", "10"])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        subject(one(&v, "watch_cache_stale")),
        json!({"namespace": "kube-system", "server": srv.url()})
    );
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_watch_cache");
    let s = sample(&prom.stdout, FINDING);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0["server"], srv.url());
}

// ---------------------------------------------------------------------------------------------
// check_csi_node_plugins: a pod's CSI volume whose driver is not registered, its default
// endpoint gone, no API (per-driver subjects; the API's UNKNOWN beside them).

#[test]
fn csi_node_plugins_findings_name_node_driver_and_socket() {
    let t = "csi_node_plugins_findings_name_node_driver_and_socket";
    if !have_promtool(t) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let driver = "ghost.csi.example.com";
    tree.pod_csi_mount("u-ghost", "pvc-ghost", driver);
    let missing = work.path().join("no-kubeconfig");
    let run = || {
        clean(Cmd::check("check_csi_node_plugins"))
            .arg("--kubelet-root")
            .arg(&tree.root)
            .arg("--kubeconfig")
            .arg(&missing)
            .args(["--node", "node-1", "--probe-timeout", "1s"])
    };
    let (out, v) = json_run(run());
    assert_eq!(out.code, 2, "{out:?}");
    let endpoint = tree.root.join(format!("plugins/{driver}/csi.sock"));
    let unregistered = one(&v, "csi_driver_unregistered");
    assert_eq!(unregistered["status"], "CRITICAL");
    assert_eq!(
        subject(unregistered),
        json!({"node": "node-1", "driver": driver})
    );
    assert_eq!(
        subject(one(&v, "csi_socket_unresponsive")),
        json!({"node": "node-1", "driver": driver, "mount": endpoint.to_str().unwrap()})
    );
    let api = one(&v, "csi_api_unreadable");
    assert_eq!(api["status"], "UNKNOWN");
    assert_eq!(subject(api), json!({"node": "node-1"}));
    let prom = prom_run(run());
    assert_series_match_json(&prom.stdout, &v, "check_csi_node_plugins");
    assert_eq!(sample(&prom.stdout, FINDING).len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Every check, every way an answer can end: valid exposition text.

/// Arguments that make each check answer UNKNOWN (an input that is not there).
fn unknown_args(check: &str, dir: &Path) -> Vec<String> {
    let missing = dir.join("missing").display().to_string();
    let v: Vec<&str> = match check {
        "check_ro_pvc_mounts" | "check_stale_csi_mounts" | "check_pv_capacity" => {
            vec!["--mountinfo", &missing, "--kubelet-root", "/"]
        }
        // Without sessions it never reads the mount table: a missing --sys.
        "check_iscsi_sessions" => vec!["--sys", &missing, "--kubelet-root", "/"],
        "check_kubelet_nested_ops" => vec!["--log-file", &missing],
        "check_storage_kernel_errors" => vec!["--kmsg", &missing],
        "check_watch_cache" | "check_longhorn_volumes" | "check_volume_attachments" => {
            vec!["--kubeconfig", &missing]
        }
        "check_csi_node_plugins" => vec!["--kubelet-root", &missing],
        _ => vec!["--pods-json", &missing],
    };
    v.into_iter().map(str::to_string).collect()
}

#[test]
fn every_check_answers_valid_exposition_for_usage_errors_unknown_and_timeouts() {
    let t = "every_check_answers_valid_exposition_for_usage_errors_unknown_and_timeouts";
    if !have_promtool(t) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hang_dir = tempfile::tempdir().unwrap();
    let sys_hang = Sysfs::new(hang_dir.path());
    let sys_root = sys_hang.root.display().to_string();
    let checks = e2e::all_checks();
    assert_eq!(checks.len(), 13, "{checks:?}");
    for c in &checks {
        // Usage errors, in both spellings of --format.
        for args in [
            vec!["--format", "prometheus", "--no-such-option"],
            vec!["--format=prometheus", "-t", "abc"],
        ] {
            let out = clean(Cmd::check(c)).args(&args).run();
            assert_eq!(out.code, 3, "{c} {args:?}: {out:?}");
            promtool(&out.stdout);
            assert!(
                out.stdout
                    .contains(&format!("k8s_storage_check_status{{check=\"{c}\"}} 3\n")),
                "{c}: {out:?}"
            );
        }
        // A usage error in JSON is JSON.
        let out = clean(Cmd::check(c))
            .args(["--bogus", "--format", "json"])
            .run();
        let v: Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{c}: {e} {out:?}"));
        assert_eq!(v["status"], "UNKNOWN", "{c}");
        // UNKNOWN: an input that is not there.
        let out = prom_run(clean(Cmd::check(c)).args(unknown_args(c, dir.path())));
        assert_eq!(out.code, 3, "{c}: {out:?}");
        // Timeouts: -t answered by the watchdog, in the format, with the state asked for.
        let fifo = dir.path().join(format!("{c}.fifo"));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let f = fifo.display().to_string();
        let hang: Vec<&str> = match c.as_str() {
            "check_ro_pvc_mounts" | "check_stale_csi_mounts" | "check_pv_capacity" => {
                vec!["--mountinfo", &f, "--kubelet-root", "/"]
            }
            // A session whose state attribute never answers.
            "check_iscsi_sessions" => {
                let sess = Session::new(1, "iqn.2016-09.com.openebs.jiva:pvc-hang");
                sys_hang.add(&sess);
                let state = sys_hang.session_attrs(&sess).join("state");
                std::fs::remove_file(&state).unwrap();
                nix::unistd::mkfifo(&state, nix::sys::stat::Mode::from_bits_truncate(0o600))
                    .unwrap();
                vec!["--sys", sys_root.as_str(), "--kubelet-root", "/"]
            }
            "check_kubelet_nested_ops" => vec!["--log-file", &f],
            // It reads --kmsg without blocking (as /dev/kmsg is read): a FIFO is no hang for
            // it. Its timeouts are the shared runtime's, proven by the other eight.
            "check_storage_kernel_errors" => continue,
            // The API checks bound each request by the run's deadline and answer a server that
            // does not answer in time themselves, UNKNOWN "timed out", before -t (fault_matrix's
            // ApiFault::Slow row): the watchdog's state is for reads that hang.
            "check_watch_cache" | "check_longhorn_volumes" | "check_volume_attachments" => continue,
            // Its socket calls are bounded by the run's deadline and answered by the check
            // itself (csi_node_plugins::hostile_*): nothing of it blocks on a file.
            "check_csi_node_plugins" => continue,
            _ => vec!["--pods-json", &f],
        };
        let cmd = clean(Cmd::check(c)).args(&hang).args(["-t", "1:CRITICAL"]);
        let out = prom_run(cmd);
        assert_eq!(out.code, 2, "{c}: the watchdog's state: {out:?}");
        assert!(out.elapsed < Duration::from_secs(5), "{c}: {out:?}");
    }
    // Panics and a worker killed by a signal: the shared runtime, through the self-test binary.
    for mode in ["panic", "sigbus"] {
        let out = prom_run(Cmd::check("plugin_selftest").args(["--mode", mode]));
        assert_eq!(out.code, 3, "{mode}: {out:?}");
        let out = Cmd::check("plugin_selftest")
            .args(["--mode", mode, "--format", "json"])
            .run();
        let v: Value =
            serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{mode}: {e} {out:?}"));
        assert!(
            v["summary"].as_str().unwrap().starts_with("internal error"),
            "{v}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Cardinality: 10 000 read-only volumes.

#[test]
fn ten_thousand_readonly_volumes_stay_under_the_series_cap_and_count_the_rest() {
    let t = "ten_thousand_readonly_volumes_stay_under_the_series_cap_and_count_the_rest";
    if !have_promtool(t) {
        return;
    }
    const N: u32 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let kubelet = dir.path().join("kubelet");
    std::fs::create_dir_all(kubelet.join("pods")).unwrap();
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("fs/ext4")).unwrap();
    // Every volume a filesystem of its own that the kernel made read-only after an error under the
    // pod's read-write mount (ext4's `emergency_ro`, 6.15+).
    let mut mi = String::from("1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n");
    for v in 0..N {
        let mp = kubelet.join(format!(
            "pods/{v:08x}-0000-4000-8000-000000000000/volumes/kubernetes.io~csi/pvc-{v:08}/mount"
        ));
        mi.push_str(&format!(
            "{} 1 {}:{} / {} rw,relatime shared:{} - ext4 /dev/sd{v} rw,relatime,emergency_ro\n",
            v + 2,
            8 + v / 256,
            v % 256,
            mp.display(),
            v + 2
        ));
    }
    let mip = dir.path().join("mountinfo");
    std::fs::write(&mip, mi).unwrap();
    let run = |extra: &[&str]| {
        clean(Cmd::check("check_ro_pvc_mounts"))
            .arg("--mountinfo")
            .arg(&mip)
            .arg("--sys")
            .arg(&sys)
            .arg("--kubelet-root")
            .arg(&kubelet)
            .args(["--no-names", "-t", "60"])
            .args(extra)
    };
    let out = prom_run(run(&[]));
    assert_eq!(out.code, 2, "{}", out.first_line());
    let series = sample(&out.stdout, FINDING);
    assert_eq!(series.len(), 100, "the default cap");
    assert!(series
        .iter()
        .all(|(l, v)| l["signal"] == "emergency_ro" && l["state"] == "critical" && *v == 2.0));
    let mut pvs: Vec<&str> = series.iter().map(|(l, _)| l["pv"].as_str()).collect();
    pvs.sort();
    pvs.dedup();
    assert_eq!(pvs.len(), 100, "100 distinct volumes");
    let omitted = sample(&out.stdout, "k8s_storage_check_findings_omitted");
    assert_eq!(
        omitted[0].1,
        (N - 100) as f64,
        "says how many were left out"
    );
    let counts = sample(&out.stdout, "k8s_storage_check_findings");
    let crit = counts
        .iter()
        .find(|(l, _)| l["state"] == "critical")
        .unwrap();
    assert_eq!(crit.1, N as f64);
    assert!(out.stdout.len() < 64 * 1024, "{} bytes", out.stdout.len());

    // The cap is an option.
    let out = prom_run(run(&["--max-findings-series", "7"]));
    assert_eq!(sample(&out.stdout, FINDING).len(), 7);
    assert_eq!(
        sample(&out.stdout, "k8s_storage_check_findings_omitted")[0].1,
        (N - 7) as f64
    );
    // And the JSON answer keeps every finding (it is not a time series).
    let (_, v) = json_run(run(&[]));
    assert_eq!(with_signal(&v, "emergency_ro").len(), N as usize);
}
