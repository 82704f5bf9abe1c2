//! The memory of a volume (issue 32): with `--state-dir`, a check remembers each PV's spells of
//! trouble across runs, and a finding of a PV in trouble again says how often.
//!
//! - check_ro_pvc_mounts on the real kernel: a loop-device ext4 PV in a private mount namespace
//!   driven read-only through ext4's own error path three separate times (unmounted between,
//!   runs that do not see it end a spell; consecutive runs that do see it extend one) gives
//!   "read-only 3 times in 30 days (last <today>)"; a garbled memory file is a note, the verdict
//!   stays, and the file is written anew.
//! - check_stuck_terminating against the real kube-apiserver: two pods wedged in Terminating one
//!   after the other, each with a teardown failure event naming the same PV's mount path, give
//!   "its volume pvc-…: stuck 2 times in 30 days".

use e2e::control_plane::{ControlPlane, User};
use e2e::{need_root, Cmd, KubeletTree, Ns, Output};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Today's date (UTC) as the findings write it.
fn today() -> String {
    let out = Cmd::new("date").args(["-u", "+%F"]).run();
    out.stdout.trim().to_string()
}

/// One read-only spell's volume: a fresh ext4 image mounted as the PV `pv`'s staging mount and
/// its pod's publish mount, then driven read-only by the kernel's own ext4 error path
/// (`trigger_fs_error`, errors=remount-ro). Returns (staging, publish) mount points.
fn read_only_pv(
    ns: &Ns,
    tree: &KubeletTree,
    work: &Path,
    pv: &str,
    spell: usize,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let handle = format!("{pv}-handle");
    let staging = tree.staging_mount("jiva.csi.openebs.io", &handle, &e2e::sha256_hex(&handle));
    let dev = ns.loop_fs(
        &work.join(format!("{pv}-{spell}.img")),
        64,
        "mkfs.ext4 -q -F",
        "errors=remount-ro",
        &staging,
    );
    let publish = tree.pod_csi_mount("8e1f6a2c", pv, "jiva.csi.openebs.io");
    ns.sh(&format!(
        "mount --bind '{}' '{}'",
        staging.display(),
        publish.display()
    ));
    let name = dev.trim_start_matches("/dev/");
    std::fs::write(
        format!("/sys/fs/ext4/{name}/trigger_fs_error"),
        "k8s-storage-checks memory test",
    )
    .unwrap();
    (staging, publish)
}

fn ro_check(ns: &Ns, tree: &KubeletTree, state: &Path) -> Output {
    let out = ns
        .check("check_ro_pvc_mounts")
        .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
        .arg("--state-dir")
        .arg(state)
        .run();
    out.assert_protocol("RO_PVC_MOUNTS");
    out
}

/// The finding line of `pv` in a Nagios answer.
fn finding_of<'a>(out: &'a Output, pv: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.starts_with("[CRITICAL] ") && l.contains(pv))
        .unwrap_or_else(|| panic!("no CRITICAL finding of {pv}: {out:?}"))
}

#[test]
fn a_pv_read_only_three_separate_times_says_so() {
    if !need_root("a_pv_read_only_three_separate_times_says_so") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tree = KubeletTree::new(work.path());
    let state = work.path().join("state");
    let ns = Ns::new();
    let pv = "pvc-a634b9a3";
    let file = state.join("ro_pvc_mounts.volumes.json");

    for spell in 1..=3 {
        let (staging, publish) = read_only_pv(&ns, &tree, work.path(), pv, spell);
        let out = ro_check(&ns, &tree, &state);
        out.assert_status("RO_PVC_MOUNTS", 2);
        let line = finding_of(&out, pv);
        match spell {
            1 => {
                assert!(
                    !line.contains("times in"),
                    "a first spell says nothing: {line}"
                );
                // A second run that still sees it extends the same spell: still one.
                let again = ro_check(&ns, &tree, &state);
                again.assert_status("RO_PVC_MOUNTS", 2);
                let line = finding_of(&again, pv);
                assert!(!line.contains("times in"), "one spell, two runs: {line}");
                // A by-hand run narrowed to another (healthy) volume, with the same --state-dir,
                // keeps its own memory: it does not end this PV's spell in the usual run's.
                let other = tree.pod_csi_mount("9a0b1c2d", "pvc-0e7e2000", "jiva.csi.openebs.io");
                ns.sh(&format!("mount -t tmpfs memtest '{}'", other.display()));
                let narrowed = ns
                    .check("check_ro_pvc_mounts")
                    .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
                    .args(["--include", "pvc-0e7e2000"])
                    .arg("--state-dir")
                    .arg(&state)
                    .run();
                narrowed.assert_status("RO_PVC_MOUNTS", 0);
                let names: Vec<String> = std::fs::read_dir(&state)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("ro_pvc_mounts.") && n.ends_with(".volumes.json"))
                    .collect();
                assert_eq!(
                    names.len(),
                    2,
                    "the narrowed run keeps a file of its own: {names:?}"
                );
                let again = ro_check(&ns, &tree, &state);
                let line = finding_of(&again, pv);
                assert!(
                    !line.contains("times in"),
                    "a narrowed run between two runs ended the spell: {line}"
                );
                // The memory file: this user's, 0600, never world-readable.
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
                assert_eq!(mode, 0o600, "{}", file.display());
            }
            2 => assert!(
                line.ends_with(&format!(
                    "; read-only 2 times in 30 days (last {})",
                    today()
                )),
                "{line}"
            ),
            _ => {
                assert!(
                    line.ends_with(&format!(
                        "; read-only 3 times in 30 days (last {})",
                        today()
                    )),
                    "{line}"
                );
                // The JSON answer carries it in the finding's text.
                let json = ns
                    .check("check_ro_pvc_mounts")
                    .args(["--kubelet-root", tree.root.to_str().unwrap(), "-t", "20"])
                    .args(["--format", "json", "--state-dir"])
                    .arg(&state)
                    .run();
                let f = json.finding("emergency_ro");
                let f = if f.is_null() {
                    // Older kernels show the error remount or the presumed read-only.
                    let v = json.json();
                    v["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|f| f["status"] == "CRITICAL")
                        .cloned()
                        .unwrap_or_default()
                } else {
                    f
                };
                assert!(
                    f["text"]
                        .as_str()
                        .unwrap_or("")
                        .contains("read-only 3 times in 30 days (last "),
                    "{json:?}"
                );
            }
        }
        // The volume goes away: a run that does not see it ends the spell.
        ns.sh(&format!(
            "umount '{}' && umount '{}'",
            publish.display(),
            staging.display()
        ));
        let gap = ro_check(&ns, &tree, &state);
        gap.assert_status("RO_PVC_MOUNTS", 0);
    }

    // A garbled memory: a note naming the file, the verdict unchanged, the file written anew.
    std::fs::write(&file, b"{\"version\":1,\"pvs\":{\"x\":[{\"kind\":").unwrap();
    let (staging, publish) = read_only_pv(&ns, &tree, work.path(), pv, 4);
    let out = ro_check(&ns, &tree, &state);
    out.assert_status("RO_PVC_MOUNTS", 2);
    assert!(
        out.stdout
            .contains("ro_pvc_mounts.volumes.json is unreadable"),
        "{out:?}"
    );
    assert!(!finding_of(&out, pv).contains("times in"), "{out:?}");
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert!(kept["pvs"][pv].is_array(), "{kept}");
    ns.sh(&format!(
        "umount '{}' && umount '{}'",
        publish.display(),
        staging.display()
    ));
}

#[test]
fn a_pv_whose_pods_keep_wedging_says_so_for_real() {
    let _ = e2e::bin_dir();
    let cp = ControlPlane::with_rbac();
    let node = ControlPlane::unique("worker-07");
    let ns = cp.namespace("media");
    cp.node(&node);
    let state = tempfile::tempdir().unwrap();
    let st = state.path().to_str().unwrap().to_string();
    let pv = "pvc-746b2837-bd1c-4c8e-9a51-3f2e1d0c0001";
    let args = [
        "--node",
        node.as_str(),
        "--warning-after",
        "1s",
        "--critical-after",
        "1s",
        "--state-dir",
        st.as_str(),
    ];
    let check = || {
        Cmd::check("check_stuck_terminating")
            .without_host_credentials()
            .arg("--kubeconfig")
            .arg(cp.kubeconfig(User::Checks))
            .args(args)
            .run()
    };
    // A pod on `node`, deleted (held by no kubelet: it stays Terminating), with the kubelet's
    // teardown failure event naming its mount of the PV; the check's answer once it is wedged.
    let wedge = |pod: &str| -> Output {
        cp.create(&json!({"apiVersion":"v1","kind":"Pod",
            "metadata":{"name":pod,"namespace":ns},
            "spec":{"nodeName":node,"terminationGracePeriodSeconds":1,
                "containers":[{"name":"seerr","image":"fallenbagel/jellyseerr:2.1"}]}}));
        let uid = cp.get("pod", Some(&ns), pod)["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        let mount = format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/{pv}/mount");
        let msg = format!(
            "UnmountVolume.TearDown failed for volume \"{pv}\" (UniqueName: \"kubernetes.io/csi/jiva.csi.openebs.io^{pv}\") pod \"{uid}\" (UID: \"{uid}\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal desc = chmod {mount}: read-only file system"
        );
        let mut ev = e2e::apiserver::fixtures::pod_event(&ns, pod, "FailedUnmount", &msg, 1);
        ev["involvedObject"]["uid"] = json!(uid);
        for k in ["resourceVersion", "uid", "creationTimestamp"] {
            ev["metadata"].as_object_mut().unwrap().remove(k);
        }
        ev["involvedObject"]
            .as_object_mut()
            .unwrap()
            .remove("resourceVersion");
        cp.create(&ev);
        cp.kubectl(&["-n", &ns, "delete", "pod", pod, "--wait=false"], None);
        // Wedged once the check's clock passes deletionTimestamp by --critical-after: wait for
        // that state by asking the check (a condition, bounded).
        let mut last = None;
        e2e::fuse::wait_until(
            "the pod wedged past --critical-after",
            Duration::from_secs(30),
            || {
                let out = check();
                let wedged = out.code != 0;
                last = Some(out);
                wedged
            },
        );
        last.expect("the check ran")
    };
    let gone = |pod: &str| {
        cp.kubectl(
            &[
                "-n",
                &ns,
                "delete",
                "pod",
                pod,
                "--grace-period=0",
                "--force",
            ],
            None,
        );
        let out = check();
        out.assert_status("STUCK_TERMINATING", 0);
    };

    let first = wedge("seerr-0");
    first.assert_status("STUCK_TERMINATING", 2);
    assert!(
        first.stdout.contains(&format!("{ns}/seerr-0 on {node}")),
        "{first:?}"
    );
    assert!(
        !first.stdout.contains("times in"),
        "a first spell: {first:?}"
    );
    gone("seerr-0");

    let second = wedge("seerr-1");
    second.assert_status("STUCK_TERMINATING", 2);
    let line = second
        .stdout
        .lines()
        .find(|l| l.contains(&format!("{ns}/seerr-1 on {node}")))
        .unwrap_or_else(|| panic!("{second:?}"));
    assert!(
        line.ends_with(&format!(
            "; its volume {pv}: stuck 2 times in 30 days (last {})",
            today()
        )),
        "{line}"
    );
    assert!(
        state
            .path()
            .join("stuck_terminating.volumes.json")
            .is_file(),
        "the memory is the node run's own file"
    );
    gone("seerr-1");
}
