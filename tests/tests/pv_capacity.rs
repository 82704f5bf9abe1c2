//! check_pv_capacity against the real kernel (issue 31): loop-device ext4 filesystems in a
//! private mount namespace under a temporary kubelet root, filled by the test: the free-space
//! thresholds (percent and absolute), inodes, a read-only-by-design volume that is never "full",
//! and the days-to-full prediction from the history the check's own runs kept.

use e2e::{need_root, KubeletTree, Ns};
use serde_json::Value;
use std::path::{Path, PathBuf};

const NAME: &str = "PV_CAPACITY";
const DRIVER: &str = "jiva.csi.openebs.io";

/// A PV as the kubelet lays it out: a staging globalmount of a loop ext4 and the pod's publish
/// bind of it. Returns the publish mount point.
fn pv(ns: &Ns, tree: &KubeletTree, work: &Path, pv: &str, pod: &str, mkfs: &str) -> PathBuf {
    let handle = format!("{pv}-handle");
    let staging = tree.staging_mount(DRIVER, &handle, &e2e::sha256_hex(&handle));
    ns.loop_fs(&work.join(format!("{pv}.img")), 64, mkfs, "", &staging);
    let publish = tree.pod_csi_mount(pod, pv, DRIVER);
    ns.sh(&format!(
        "mount --bind '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    publish
}

/// Fill `mp` until `free_pct` percent of what a pod sees (used + available) is left.
fn fill_to(ns: &Ns, mp: &Path, name: &str, free_pct: u64) {
    ns.sh(&format!(
        "set -- $(df -B1 --output=used,avail '{mp}' | tail -1); \
         want=$(( ($1 + $2) * {free_pct} / 100 )); \
         fallocate -l $(( $2 - want )) '{mp}/{name}' && sync -f '{mp}'",
        mp = mp.display()
    ));
}

fn run(ns: &Ns, tree: &KubeletTree, extra: &[&str]) -> e2e::Output {
    ns.check("check_pv_capacity")
        .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
        .args(extra)
        .run()
}

fn json(ns: &Ns, tree: &KubeletTree, extra: &[&str]) -> Value {
    let mut a = vec!["--format", "json"];
    a.extend_from_slice(extra);
    let out = run(ns, tree, &a);
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {out:?}"))
}

fn finding<'a>(v: &'a Value, pv: &str) -> &'a Value {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["subject"]["pv"] == pv)
        .unwrap_or_else(|| panic!("no finding for {pv}: {v}"))
}

#[test]
fn thresholds_on_real_filesystems_bytes_and_inodes() {
    if !need_root("thresholds_on_real_filesystems_bytes_and_inodes") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let data = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-data",
        "pod-a",
        "mkfs.ext4 -q -F",
    );
    // Few inodes: 128 in all.
    let files = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-files",
        "pod-b",
        "mkfs.ext4 -q -F -N 128",
    );
    let rox = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-rox",
        "pod-c",
        "mkfs.ext4 -q -F",
    );

    let out = run(&ns, &tree, &[]);
    out.assert_status(NAME, 0);
    assert!(
        out.first_line()
            .starts_with("PV_CAPACITY OK - 3 PV filesystems with room; the fullest: "),
        "{out:?}"
    );
    assert_eq!(out.perf("pv_filesystems"), Some(3.0));
    // No --state-dir: it says there is no prediction.
    assert!(
        out.stdout.contains("no prediction: give --state-dir"),
        "{out:?}"
    );

    // 10% free: under the default -w 15%, over -c 3%.
    fill_to(&ns, &data, "big", 10);
    let out = run(&ns, &tree, &[]);
    out.assert_status(NAME, 1);
    assert!(
        out.first_line()
            .contains("1 of 3 PV filesystems filling up or unmeasured: pvc-data ("),
        "{out:?}"
    );
    assert!(out.stdout.contains("free space under -w 15%"), "{out:?}");
    assert_eq!(out.perf("space_low"), Some(1.0));
    let used = out.perf("pvc_data_used").unwrap();
    assert!((89.0..=91.0).contains(&used), "{used}: {out:?}");
    // Absolute amounts, check_disk style: 10% of 64 MiB is under 10M free, over 1M.
    let out = run(&ns, &tree, &["-w", "10M", "-c", "1M"]);
    out.assert_status(NAME, 1);
    assert!(out.stdout.contains("free space under -w 10 MiB"), "{out:?}");
    let out = run(&ns, &tree, &["-w", "2M", "-c", "1M"]);
    out.assert_status(NAME, 0);
    // 1% free: CRITICAL, with its next step naming the node and the mount to look into.
    ns.sh(&format!("rm '{}/big'", data.display()));
    fill_to(&ns, &data, "big", 1);
    let v = json(&ns, &tree, &[]);
    assert_eq!(v["status"], "CRITICAL", "{v}");
    let f = finding(&v, "pvc-data");
    assert_eq!(f["signal"], "pv_space_low");
    let next = f["next"].as_str().unwrap_or_else(|| panic!("no next: {f}"));
    assert!(
        next.contains(&format!("du -xh -d1 {}", data.display())),
        "{next}"
    );

    // Inodes: files until 8% of them are left (WARNING under -W 15%, over -K 3%).
    let (total, left) = {
        let out = ns.sh(&format!(
            "df --output=itotal,iavail '{}' | tail -1",
            files.display()
        ));
        let v: Vec<u64> = out
            .stdout
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        (v[0], v[0] * 8 / 100)
    };
    ns.sh(&format!(
        "cd '{}' && n=$(( $(df --output=iavail . | tail -1) - {left} )) && i=0 && while [ $i -lt $n ]; do : > f$i; i=$((i+1)); done",
        files.display()
    ));
    let v = json(&ns, &tree, &[]);
    let f = finding(&v, "pvc-files");
    assert_eq!(f["status"], "WARNING", "{total} inodes, {left} left: {f}");
    assert_eq!(f["signal"], "pv_inodes_low");
    assert!(
        f["text"]
            .as_str()
            .unwrap()
            .contains("free inodes under -W 15%"),
        "{f}"
    );
    // -W/-K as counts.
    let (ok_w, crit_k) = ((left - 2).to_string(), (left + 1).to_string());
    let v = json(&ns, &tree, &["-W", &ok_w, "-K", "1"]);
    assert_eq!(finding(&v, "pvc-files")["status"], "OK", "{v}");
    let v = json(&ns, &tree, &["-W", "100000", "-K", &crit_k]);
    assert_eq!(finding(&v, "pvc-files")["status"], "CRITICAL", "{v}");

    // A volume mounted read-only by design is never "full".
    fill_to(&ns, &rox, "big", 1);
    ns.sh(&format!(
        "mount -o remount,ro '{}' && mount -o remount,bind,ro '{}'",
        rox.display(),
        rox.display()
    ));
    let v = json(&ns, &tree, &[]);
    let f = finding(&v, "pvc-rox");
    assert_eq!(f["status"], "OK", "{f}");
    assert_eq!(f["signal"], "pv_read_only");

    // Prometheus: a series per non-OK finding, labelled with the volume (and its claim, when
    // the names resolve: --pvs-json here).
    let pvs = e2e::write_json(
        work.path(),
        "pvs.json",
        &serde_json::json!({"apiVersion":"v1","kind":"PersistentVolumeList","items":[
            {"metadata":{"name":"pvc-data"},"spec":{"accessModes":["ReadWriteOnce"],
             "claimRef":{"namespace":"media","name":"radarr-config"},
             "csi":{"driver":DRIVER,"volumeHandle":"pvc-data-handle"}},"status":{"phase":"Bound"}}]}),
    );
    let out = run(&ns, &tree, &["--format", "prometheus", "--pvs-json", &pvs]);
    let series = |metric: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{metric}{{")) && l.contains("pv=\"pvc-data\""))
            .unwrap_or_else(|| panic!("no {metric} of pvc-data: {out:?}"))
            .to_string()
    };
    let f = series("k8s_storage_check_finding");
    assert!(
        f.contains("signal=\"pv_space_low\"") && f.contains("state=\"critical\""),
        "{f}"
    );
    // The claim's names are joined in from the info series (identity stays node, pv, signal).
    let info = series("k8s_storage_check_finding_info");
    assert!(
        info.contains("pvc=\"radarr-config\"") && info.contains("namespace=\"media\""),
        "{info}"
    );
    let out = run(&ns, &tree, &["--pvs-json", &pvs]);
    assert!(
        out.stdout
            .contains("kubectl -n media patch pvc radarr-config -p "),
        "{out:?}"
    );
}

/// The prediction: the test fills a volume at a steady rate, 4 MiB per run, and the check's own
/// runs keep the samples; between runs the saved history is moved one hour into the past (the
/// clock the check reads cannot be set back without it noticing, so the state is aged instead).
/// After three hours of history the volume, still 70% free, is predicted full within 4 days.
#[test]
fn a_steady_fill_is_predicted_full_within_4_days() {
    if !need_root("a_steady_fill_is_predicted_full_within_4_days") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let ns = Ns::new();
    let grow = pv(
        &ns,
        &tree,
        work.path(),
        "pvc-grow",
        "pod-a",
        "mkfs.ext4 -q -F",
    );
    pv(
        &ns,
        &tree,
        work.path(),
        "pvc-flat",
        "pod-b",
        "mkfs.ext4 -q -F",
    );
    let state = work.path().join("state");
    let st = state.to_str().unwrap();
    let history = state.join("pv_capacity.history.json");
    let age_one_hour = || {
        let mut h: Value = serde_json::from_slice(&std::fs::read(&history).unwrap()).unwrap();
        h["saved_ms"] = (h["saved_ms"].as_i64().unwrap() - 3_600_000).into();
        for samples in h["volumes"].as_object_mut().unwrap().values_mut() {
            for s in samples.as_array_mut().unwrap() {
                s["t"] = (s["t"].as_i64().unwrap() - 3_600_000).into();
            }
        }
        std::fs::write(&history, serde_json::to_vec(&h).unwrap()).unwrap();
    };
    for hour in 0..4 {
        ns.sh(&format!(
            "dd if=/dev/urandom of='{}/chunk{hour}' bs=1M count=4 status=none conv=fsync",
            grow.display()
        ));
        let v = json(&ns, &tree, &["--state-dir", st]);
        let f = finding(&v, "pvc-grow");
        if hour < 2 {
            // Fewer than 3 samples, or under an hour of them: no prediction yet.
            assert_eq!(f["status"], "OK", "hour {hour}: {f}");
        } else {
            assert_eq!(f["status"], "WARNING", "hour {hour}: {f}");
            assert_eq!(f["signal"], "pv_filling_up");
            let t = f["text"].as_str().unwrap();
            assert!(
                t.contains("space full in ") && t.contains("within --predict-within 4d"),
                "{t}"
            );
            assert!(t.contains("MiB/day"), "{t}");
            assert!(
                v["summary"]
                    .as_str()
                    .unwrap()
                    .contains("pvc-grow (full in "),
                "{v}"
            );
        }
        // The volume nobody writes to is not predicted to fill.
        assert_eq!(finding(&v, "pvc-flat")["status"], "OK", "{v}");
        age_one_hour();
    }
    // The history file is the check's own, kept with the state-file rules (no temp file left).
    let names: Vec<String> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["pv_capacity.history.json"]);
    // A shorter horizon: the same volume is not "full within" 1h.
    let v = json(&ns, &tree, &["--state-dir", st, "--predict-within", "1h"]);
    assert_eq!(finding(&v, "pvc-grow")["status"], "OK", "{v}");
}
