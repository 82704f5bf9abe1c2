//! check_kubelet_nested_ops end to end: the release binary on realistic kubelet logs in every
//! format, from files, stdin and real journal files built by the test.

use e2e::logs::*;
use e2e::{Cmd, Output};
use std::path::Path;

/// The clock the log lines are dated against, read after the one-time release build (a build of
/// minutes on a loaded machine must not age the lines out of the window before the check runs).
fn now_secs() -> i64 {
    let _ = e2e::bin_dir();
    e2e::logs::now_secs()
}

const NAME: &str = "KUBELET_NESTED_OPS";
const LONGHORN: &str = "driver.longhorn.io";

fn check() -> Cmd {
    // klog headers are local time: the fixtures are written in UTC.
    Cmd::check("check_kubelet_nested_ops").env("TZ", "UTC")
}

/// The kubelet's retry schedule of one failing operation from `start` to `end`: 500ms doubling
/// to 2m2s (the retry happens once the backoff has passed).
fn schedule(start: i64, end: i64) -> Vec<(i64, u64)> {
    let mut v = Vec::new();
    let (mut t, mut b) = (start * 1000, 500u64);
    while t <= end * 1000 {
        v.push((t / 1000, b));
        t += b as i64 + 50;
        b = (b * 2).min(122_000);
    }
    v
}

#[derive(Clone, Copy, Debug)]
enum Style {
    Bare,
    Syslog,
    Json,
    Old,
}

fn syslog_prefix(t: i64) -> String {
    const M: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (_, mo, d, h, mi, s) = utc_parts(t);
    format!(
        "{} {d:>2} {h:02}:{mi:02}:{s:02} node-1 kubelet[2166]: ",
        M[mo as usize - 1]
    )
}

/// One failure line of `pv` in a style.
fn line(style: Style, t: i64, pv: &str, backoff: u64, err: &str) -> String {
    match style {
        Style::Bare => format!(
            "{}{}",
            klog_header(t),
            nested_op_msg(t, LONGHORN, pv, "", backoff, err)
        ),
        Style::Syslog => format!(
            "{}{}{}",
            syslog_prefix(t),
            klog_header(t),
            nested_op_msg(t, LONGHORN, pv, "", backoff, err)
        ),
        Style::Json => json_line(t, &nested_op_msg(t, LONGHORN, pv, "", backoff, err)),
        Style::Old => format!(
            "{}{}",
            klog_header(t),
            nested_op_msg_old(
                t,
                "csi",
                pv,
                "7d1c2a9e-0f3b-4d55-9c1e-1b2f0a3c4d5e",
                backoff,
                err
            )
        ),
    }
}

/// Noise the kubelet writes around the failures (must be ignored), in the style's shape.
fn noise(style: Style, t: i64) -> Vec<String> {
    let msgs = [
        "\"SyncLoop (PLEG): event for pod\" pod=\"media/radarr-0\" event={\"ID\":\"3f1c\",\"Type\":\"ContainerStarted\"}".to_string(),
        "Unable to attach or mount volumes for pod \"ws-b70553ae\": unmounted volumes=[data], unattached volumes=[]: timed out waiting for the condition".to_string(),
        "operationExecutor.UnmountDevice started for volume \"pvc-81b676e6\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^pvc-81b676e6\") on node \"worker-04\"".to_string(),
    ];
    msgs.iter()
        .map(|m| match style {
            Style::Json => json_line(t, m),
            Style::Syslog => format!(
                "{}{}{m}",
                syslog_prefix(t),
                klog_header(t).replacen('E', "I", 1)
            ),
            _ => format!("{}{m}", klog_header(t).replacen('E', "I", 1)),
        })
        .collect()
}

/// The stale-CSI-mount incident: pvc-81b676e6's UnmountDevice failing for 17 minutes (at the
/// maximum backoff by now), amid noise.
fn incident(style: Style, now: i64) -> String {
    let mut out: Vec<String> = vec!["Flag --container-runtime has been deprecated".into()];
    let err = mount_refs_err(LONGHORN, "pvc-81b676e6", "worker-04");
    for (t, b) in schedule(now - 17 * 60, now - 5) {
        out.extend(noise(style, t));
        out.push(line(style, t, "pvc-81b676e6", b, &err));
    }
    out.join("\n") + "\n"
}

fn candidates(out: &Output) -> u64 {
    // "read <source>: N bytes, M candidate lines"
    let l = out
        .stdout
        .lines()
        .find(|l| l.contains("candidate line"))
        .unwrap_or_else(|| panic!("no source line in {out:?}"));
    let before = l.split(" candidate line").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn incident_log_in_every_format_from_a_file_is_critical() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    for style in [Style::Bare, Style::Syslog, Style::Json, Style::Old] {
        let p = dir.path().join(format!("kubelet-{style:?}.log"));
        std::fs::write(&p, incident(style, now)).unwrap();
        let out = check().arg("--log-file").arg(&p).arg("-v").run();
        out.assert_status(NAME, 2);
        assert!(
            out.first_line().contains("pvc-81b676e6")
                && out.first_line().contains("at max backoff"),
            "{style:?}: {out:?}"
        );
        assert_eq!(out.perf("failing_volumes"), Some(1.0), "{style:?}");
        assert_eq!(out.perf("max_backoff"), Some(122.0), "{style:?}");
        // Only the window's failures count (17 minutes of them were logged).
        let in_window = schedule(now - 17 * 60, now - 5)
            .iter()
            .filter(|(t, _)| *t >= now - 15 * 60 + 2)
            .count() as f64;
        let got = out.perf("failed_operations").unwrap();
        assert!(
            (got - in_window).abs() <= 1.0,
            "{style:?}: {got} vs {in_window}"
        );
        assert!(out.perf("longest_failing").unwrap() > 600.0, "{style:?}");
        assert!(
            out.stdout.contains("UnmountDevice (GetDeviceMountRefs)"),
            "{style:?}"
        );
        if !matches!(style, Style::Old) {
            assert!(
                out.stdout.contains("still mounted by other references"),
                "{style:?}"
            );
        }
    }
}

#[test]
fn a_fresh_failure_warns_and_old_ones_do_not_count() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    let err = "MountVolume.MountDevice failed for volume \"pvc-746b2837\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^pvc-746b2837\") pod \"seerr-0\" (UID: \"0d6a\") : rpc error: code = DeadlineExceeded desc = context deadline exceeded";
    let p = dir.path().join("kubelet.log");
    std::fs::write(
        &p,
        line(Style::Bare, now - 60, "pvc-746b2837", 500, err) + "\n",
    )
    .unwrap();
    let out = check().arg("--log-file").arg(&p).run();
    out.assert_status(NAME, 1);
    assert!(
        out.first_line().contains("pvc-746b2837 MountDevice"),
        "{out:?}"
    );
    // Twenty minutes ago: outside the 15m window.
    std::fs::write(
        &p,
        line(Style::Bare, now - 1200, "pvc-746b2837", 500, err) + "\n",
    )
    .unwrap();
    let out = check().arg("--log-file").arg(&p).run();
    out.assert_status(NAME, 0);
    assert_eq!(out.perf("failing_volumes"), Some(0.0));
    // A wider window sees it.
    let out = check()
        .arg("--log-file")
        .arg(&p)
        .args(["--window", "30m"])
        .run();
    out.assert_status(NAME, 1);
}

#[test]
fn stdin_is_a_source() {
    let now = now_secs();
    let out = check()
        .args(["--log-file", "-", "-v"])
        .stdin(incident(Style::Json, now))
        .run();
    out.assert_status(NAME, 2);
    assert!(out.stdout.contains("read stdin"), "{out:?}");
}

#[test]
fn a_volume_failing_longer_than_stuck_is_critical() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    // Failing every 30 s for 12 minutes with a short backoff (never at the maximum).
    let err = "MountVolume.SetUp failed for volume \"pvc-0badc0de\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^pvc-0badc0de\") pod \"ws-d048256b\" (UID: \"9a8b\") : rpc error: code = Internal desc = mount failed";
    let text: String = (0..=24)
        .map(|i| {
            line(
                Style::Bare,
                now - 12 * 60 + i * 30,
                "pvc-0badc0de",
                16_000,
                err,
            ) + "\n"
        })
        .collect();
    let p = dir.path().join("kubelet.log");
    std::fs::write(&p, text).unwrap();
    let out = check().arg("--log-file").arg(&p).run();
    out.assert_status(NAME, 2);
    // The first line read already had a 16s backoff: the run began before it (#21: "at least").
    assert!(
        out.first_line()
            .contains("pvc-0badc0de SetUp failing for at least 12m"),
        "{out:?}"
    );
    assert!(!out.first_line().contains("max backoff"));
    // With --stuck 20m the same log only warns.
    let out = check()
        .arg("--log-file")
        .arg(&p)
        .args(["--stuck", "20m"])
        .run();
    out.assert_status(NAME, 1);
    // -w/-c on the number of failing volumes override the per-volume rules.
    let out = check()
        .arg("--log-file")
        .arg(&p)
        .args(["-w", "1", "-c", "2"])
        .run();
    out.assert_status(NAME, 0);
    let out = check()
        .arg("--log-file")
        .arg(&p)
        .args(["-w", "0", "-c", "5"])
        .run();
    out.assert_status(NAME, 1);
}

fn append(p: &Path, s: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
    f.write_all(s.as_bytes()).unwrap();
}

#[test]
fn state_dir_resumes_files_through_truncation_and_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let p = dir.path().join("kubelet.log");
    let now = now_secs();
    let err = |pv: &str| {
        format!("UnmountVolume.TearDown failed for volume \"{pv}\" (UniqueName: \"kubernetes.io/csi/driver.longhorn.io^{pv}\") pod \"3f1c\" (UID: \"3f1c\") : kubernetes.io/csi: Unmounter.TearDownAt failed: rpc error: code = Internal")
    };
    let l = |t: i64, pv: &str| line(Style::Bare, t, pv, 500, &err(pv)) + "\n";
    std::fs::write(&p, l(now - 120, "pvc-a") + &l(now - 60, "pvc-a")).unwrap();
    let run = || {
        check()
            .arg("--log-file")
            .arg(&p)
            .arg("--state-dir")
            .arg(&st)
            // Five failing volumes' next steps and the source line after them (issue 26).
            .args(["-v", "--max-output", "65536"])
            .run()
    };
    let out = run();
    out.assert_status(NAME, 1);
    assert_eq!(candidates(&out), 2);
    let files: Vec<_> = std::fs::read_dir(&st).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one state file per check and source");
    // Nothing new: nothing read, but the window's failures are remembered.
    let out = run();
    out.assert_status(NAME, 1);
    assert_eq!(candidates(&out), 0);
    assert_eq!(out.perf("failed_operations"), Some(2.0));
    // Appended: only the new line is read.
    append(&p, &l(now - 30, "pvc-b"));
    let out = run();
    assert_eq!(candidates(&out), 1);
    assert_eq!(out.perf("failing_volumes"), Some(2.0));
    // Truncated (copytruncate) and a shorter file written: read from its start.
    std::fs::write(&p, l(now - 20, "pvc-c")).unwrap();
    let out = run();
    assert_eq!(candidates(&out), 1, "{out:?}");
    assert!(out.stdout.contains("truncated"), "{out:?}");
    assert_eq!(out.perf("failing_volumes"), Some(3.0));
    // Rotated: a last line lands in the old file before the rename; the new file starts fresh.
    append(&p, &l(now - 10, "pvc-d"));
    std::fs::rename(&p, dir.path().join("kubelet.log.1")).unwrap();
    std::fs::write(&p, l(now - 5, "pvc-e")).unwrap();
    let out = run();
    assert_eq!(candidates(&out), 2, "{out:?}");
    assert!(out.stdout.contains("rotated"), "{out:?}");
    assert_eq!(out.perf("failing_volumes"), Some(5.0));
    // A garbled state file is reported and replaced, not fatal.
    let sf = std::fs::read_dir(&st)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    std::fs::write(&sf, "{garbled").unwrap();
    let out = run();
    out.assert_protocol(NAME);
    assert!(out.stdout.contains("unreadable"), "{out:?}");
}

/// "Failing for" is the true age (#21): a volume failing since 40 minutes before the first run,
/// checked with the default 15m window while its log is rotated (the old file deleted, then kept
/// beside the new one): each run's age is longer than the last and than the window, and the
/// start stays exact. Without --state-dir, the rotated-away start is unknown: "at least".
#[test]
fn age_keeps_growing_across_runs_and_log_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let p = dir.path().join("kubelet.log");
    let err = mount_refs_err(LONGHORN, "pvc-81b676e6", "worker-04");
    let t1 = now_secs();
    let start = t1 - 40 * 60;
    let text: String = schedule(start, t1 - 1)
        .iter()
        .map(|&(t, b)| line(Style::Bare, t, "pvc-81b676e6", b, &err) + "\n")
        .collect();
    std::fs::write(&p, text).unwrap();
    let run = |state: bool| {
        let mut c = check().arg("--log-file").arg(&p).arg("-v");
        if state {
            c = c.arg("--state-dir").arg(&st);
        }
        c.run()
    };
    let age = |out: &Output| out.perf("longest_failing").unwrap();
    let out = run(true);
    out.assert_status(NAME, 2);
    let a1 = age(&out);
    // The last failure is within one 2m2s backoff of now: 38 to 40 minutes, far past the window.
    assert!((37.0 * 60.0..40.0 * 60.0).contains(&a1), "{out:?}");
    assert!(
        out.first_line().contains("failing for 3") && !out.first_line().contains("at least"),
        "{out:?}"
    );
    let wait_past = |t: i64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while now_secs() <= t {
            assert!(
                std::time::Instant::now() < deadline,
                "the clock did not move"
            );
            std::thread::yield_now();
        }
        now_secs()
    };
    // Rotated and the old file deleted (logrotate's create, the old one compressed away): the
    // new file holds only the latest failures, at the maximum backoff. (The new file is made
    // before the old one goes, as logrotate does, so it cannot reuse the old inode.)
    let t2 = wait_past(t1 + 1);
    std::fs::rename(&p, dir.path().join("kubelet.log.1")).unwrap();
    std::fs::write(
        &p,
        line(Style::Bare, t2 - 122, "pvc-81b676e6", 122_000, &err)
            + "\n"
            + &line(Style::Bare, t2, "pvc-81b676e6", 122_000, &err)
            + "\n",
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("kubelet.log.1")).unwrap();
    let out = run(true);
    out.assert_status(NAME, 2);
    let a2 = age(&out);
    assert!(a2 > a1, "{a2} after {a1}: {out:?}");
    assert!(out.stdout.contains("rotated"), "{out:?}");
    assert!(!out.first_line().contains("at least"), "{out:?}");
    // The same log without the state: the start was in the deleted file.
    let out = run(false);
    out.assert_status(NAME, 2);
    assert!(
        out.first_line().contains("failing for at least 2m2s"),
        "{out:?}"
    );
    // Rotated again, the old file kept beside the new one, which gets one more failure.
    let t3 = wait_past(t2);
    append(
        &p,
        &(line(Style::Bare, t3 - 1, "pvc-81b676e6", 122_000, &err) + "\n"),
    );
    std::fs::rename(&p, dir.path().join("kubelet.log.1")).unwrap();
    std::fs::write(
        &p,
        line(Style::Bare, t3, "pvc-81b676e6", 122_000, &err) + "\n",
    )
    .unwrap();
    let out = run(true);
    out.assert_status(NAME, 2);
    let a3 = age(&out);
    assert!(a3 > a2, "{a3} after {a2}: {out:?}");
    assert_eq!(a3, (t3 - start) as f64, "{out:?}");
    assert_eq!(candidates(&out), 2, "{out:?}");
}

/// The paths to unmount survive (#21): a ≥ 1.24 kubelet's GetDeviceMountRefs error (staging path
/// under the sha256 of the volume handle, two pods' references) is longer than any cut, and the
/// output keeps the device mount path and every reference.
#[test]
fn get_device_mount_refs_references_survive_in_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let now = now_secs();
    let pv = "pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
    let staging = format!(
        "/var/lib/kubelet/plugins/kubernetes.io/csi/{LONGHORN}/{}/globalmount",
        e2e::sha256_hex(pv)
    );
    let refs = [
        format!("/var/lib/kubelet/pods/0d6a3b1e-6f2c-4e8a-9d1b-2b7c4f5e6a7b/volumes/kubernetes.io~csi/{pv}/mount"),
        format!("/var/lib/kubelet/pods/7e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b/volumes/kubernetes.io~csi/{pv}/mount"),
    ];
    let err = format!(
        "GetDeviceMountRefs check failed for volume \"{pv}\" (UniqueName: \"kubernetes.io/csi/{LONGHORN}^{pv}\") on node \"worker-04\" : the device mount path \"{staging}\" is still mounted by other references [{}]",
        refs.join(" ")
    );
    assert!(err.len() > 500);
    let text: String = schedule(now - 5 * 60, now - 1)
        .iter()
        .map(|&(t, b)| line(Style::Bare, t, pv, b, &err) + "\n")
        .collect();
    let p = dir.path().join("kubelet.log");
    std::fs::write(&p, text).unwrap();
    for args in [&[][..], &["--format", "json"][..]] {
        let out = check().arg("--log-file").arg(&p).args(args).run();
        assert_eq!(out.code, 2, "{out:?}");
        for r in &refs {
            assert!(out.stdout.contains(r.as_str()), "{r} missing: {out:?}");
        }
        assert!(out.stdout.contains(&staging), "{out:?}");
    }
}

fn need_journal_remote(test: &str) -> bool {
    if Path::new(JOURNAL_REMOTE).exists() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: needs {JOURNAL_REMOTE} (package systemd-journal-remote)");
    }
    println!("{test}: skipped: needs {JOURNAL_REMOTE}");
    false
}

fn entries(unit: &str, lines: &[(i64, String)]) -> Vec<JEntry> {
    lines
        .iter()
        .map(|(t, m)| JEntry {
            realtime_s: *t,
            unit: unit.into(),
            message: m.clone(),
        })
        .collect()
}

#[test]
fn real_journal_default_units_cursor_state() {
    if !need_journal_remote("real_journal_default_units_cursor_state") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("journal");
    let st = dir.path().join("state");
    let now = now_secs();
    let err = mount_refs_err(LONGHORN, "pvc-81b676e6", "k8s03");
    let mut kubelite: Vec<(i64, String)> = Vec::new();
    for (t, b) in schedule(now - 17 * 60, now - 30) {
        // microk8s logs klog text through journald; half of them with a header, as the kubelet does.
        kubelite.push((
            t,
            klog_header(t) + &nested_op_msg(t, LONGHORN, "pvc-81b676e6", "", b, &err),
        ));
        kubelite.push((
            t,
            "I0713 20:27:25.1 2166 reconciler.go:1] \"operationExecutor.UnmountDevice started\""
                .into(),
        ));
    }
    let mut e = entries("snap.microk8s.daemon-kubelite.service", &kubelite);
    // The same text from another unit must not count.
    e.extend(entries(
        "some-app.service",
        &[(
            now - 60,
            nested_op_msg(now - 60, LONGHORN, "pvc-not-kubelet", "", 500, "x"),
        )],
    ));
    write_journal(&jdir, "one", &e);

    let run = |extra: &[&str]| {
        check()
            .arg("--journal-dir")
            .arg(&jdir)
            .args(extra)
            .arg("-v")
            .run()
    };
    let out = run(&[]);
    out.assert_status(NAME, 2);
    assert!(out.first_line().contains("pvc-81b676e6"), "{out:?}");
    assert!(!out.stdout.contains("pvc-not-kubelet"), "{out:?}");
    assert!(out.stdout.contains("snap.microk8s.daemon-kubelite.service"));
    // An explicit unit that logged nothing relevant: OK.
    let out = run(&["--journal-unit", "some-other.service"]);
    out.assert_status(NAME, 0);
    // With state: the second run reads nothing new, and still knows the failures.
    let st_s = st.to_str().unwrap();
    let first = run(&["--state-dir", st_s]);
    first.assert_status(NAME, 2);
    let c1 = candidates(&first);
    assert!(c1 > 5, "{first:?}");
    let second = run(&["--state-dir", st_s]);
    second.assert_status(NAME, 2);
    assert_eq!(candidates(&second), 0, "{second:?}");
    assert_eq!(
        second.perf("failed_operations"),
        first.perf("failed_operations")
    );
    // New entries (another journal file in the directory): only they are read.
    let t = now - 5;
    write_journal(
        &jdir,
        "two",
        &entries(
            "snap.microk8s.daemon-kubelite.service",
            &[(
                t,
                json_line(
                    t,
                    &nested_op_msg(
                        t,
                        LONGHORN,
                        "pvc-new",
                        "",
                        1000,
                        "MountVolume.MountDevice failed for volume \"pvc-new\"",
                    ),
                ),
            )],
        ),
    );
    let third = run(&["--state-dir", st_s]);
    third.assert_status(NAME, 2);
    assert_eq!(candidates(&third), 1, "{third:?}");
    assert_eq!(third.perf("failing_volumes"), Some(2.0));
}

#[test]
fn journal_without_a_kubelet_unit_is_unknown() {
    if !need_journal_remote("journal_without_a_kubelet_unit_is_unknown") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("journal");
    write_journal(
        &jdir,
        "x",
        &entries("nginx.service", &[(now_secs(), "started".into())]),
    );
    let out = check().arg("--journal-dir").arg(&jdir).run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("--journal-unit"), "{out:?}");
    let out = check()
        .arg("--journal-dir")
        .arg(dir.path().join("missing"))
        .run();
    out.assert_status(NAME, 3);
}

#[test]
fn unreadable_sources_are_unknown() {
    let out = check()
        .args(["--log-file", "/nonexistent/kubelet.log"])
        .run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("ENOENT"), "{out:?}");
    let out = check().args(["--log-file", "/tmp"]).run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("directory"), "{out:?}");
    let out = check().args(["--log-file", "-", "--window", "0"]).run();
    out.assert_status(NAME, 3);
    let out = check()
        .args([
            "--journal-unit",
            "kubelet.service",
            "--journalctl",
            "/nonexistent/journalctl",
        ])
        .run();
    out.assert_status(NAME, 3);
}

#[test]
fn a_journal_this_user_cannot_read_is_unknown_naming_the_groups() {
    let test = "a_journal_this_user_cannot_read_is_unknown_naming_the_groups";
    if !need_journal_remote(test) || !e2e::need_root(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jdir = dir.path().join("journal");
    let t = now_secs();
    write_journal(
        &jdir,
        "x",
        &entries(
            "kubelet.service",
            &[(
                t,
                klog_header(t) + &nested_op_msg(t, LONGHORN, "pvc-a", "", 500, "x"),
            )],
        ),
    );
    use std::os::unix::fs::PermissionsExt;
    for d in [dir.path(), jdir.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // systemd-journal-remote writes 0640 root:root files, as journald does (group systemd-journal).
    let bin = e2e::bin("check_kubelet_nested_ops");
    for extra in [&[][..], &["--journal-unit", "kubelet.service"][..]] {
        let out = Cmd::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(&bin)
            .arg("--journal-dir")
            .arg(&jdir)
            .args(extra)
            .run();
        out.assert_status(NAME, 3);
        assert!(out.first_line().contains("systemd-journal"), "{out:?}");
    }
    // Root reads it.
    let out = check().arg("--journal-dir").arg(&jdir).run();
    out.assert_status(NAME, 1);
}

#[test]
fn a_hanging_journalctl_is_killed_at_the_deadline() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("journalctl");
    // Prints one failure entry, then hangs the way a journalctl stuck on a huge journal would.
    let t = now_secs();
    let entry = serde_json::json!({
        "__CURSOR": "s=1;i=1",
        "__REALTIME_TIMESTAMP": format!("{}", t * 1_000_000),
        "_SYSTEMD_UNIT": "kubelet.service",
        "MESSAGE": klog_header(t) + &nested_op_msg(t, LONGHORN, "pvc-hang", "", 500, "MountVolume.MountDevice failed for volume \"pvc-hang\""),
    });
    let pidfile = dir.path().join("pid");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho $$ > '{}'\ncat <<'EOF_J'\n{entry}\nEOF_J\nexec sleep 600\n",
            pidfile.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = check()
        .args(["--journal-unit", "kubelet.service", "-t", "2", "-v"])
        .arg("--journalctl")
        .arg(&fake)
        .run();
    out.assert_status(NAME, 1);
    assert!(out.first_line().contains("pvc-hang"), "{out:?}");
    assert!(out.stdout.contains("stopped at the deadline"), "{out:?}");
    assert!(out.elapsed < std::time::Duration::from_secs(5), "{out:?}");
    // The child was killed, not left behind.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "journalctl child {pid} still runs"
    );
    // Nothing at all before the deadline: UNKNOWN, never a silent OK.
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 600\n").unwrap();
    let out = check()
        .args(["--journal-unit", "kubelet.service", "-t", "2"])
        .arg("--journalctl")
        .arg(&fake)
        .run();
    out.assert_status(NAME, 3);
    assert!(out.first_line().contains("deadline"), "{out:?}");
}

/// Issue 31: the kubelet's log as operators have it — grep output, a pasted line without its
/// header, backticks, journalctl's short-precise and JSON output, kubelet JSON logging, Talos's
/// json_lines — each behind a first line that is no kubelet line, through the release binary on
/// stdin: the incident's loop is CRITICAL in every shape, `-v` counts the line it could not read.
#[test]
fn logs_as_operators_have_them_give_the_verdict() {
    let now = now_secs();
    let loop_lines: Vec<(i64, String)> = schedule(now - 12 * 60, now - 20)
        .into_iter()
        .map(|(t, b)| {
            (
                t,
                nested_op_msg(
                    t,
                    LONGHORN,
                    "pvc-81b676e6",
                    "",
                    b,
                    &mount_refs_err(LONGHORN, "pvc-81b676e6", "worker-04"),
                ),
            )
        })
        .collect();
    let klog = |t: i64, m: &str| format!("{}{m}", klog_header(t));
    type Shape = Box<dyn Fn(usize, i64, &str) -> String>;
    let shapes: Vec<(&str, Shape)> = vec![
        (
            "grep -n",
            Box::new(move |i, t, m| format!("{}:{}", 535 + i, klog(t, m))),
        ),
        (
            "grep -Hn",
            Box::new(move |i, t, m| format!("kubelet.log:{}:{}", 535 + i, klog(t, m))),
        ),
        ("pasted without header", Box::new(|_, _, m| m.to_string())),
        (
            "backticks",
            Box::new(move |_, t, m| format!("`{}`", klog(t, m))),
        ),
        (
            "journalctl -o short-precise",
            Box::new(move |_, t, m| {
                let p = syslog_prefix(t);
                format!("{}.123456 {}{}", &p[..15], &p[16..], klog(t, m))
            }),
        ),
        (
            "journalctl -o json",
            Box::new(move |i, t, m| {
                serde_json::json!({"__CURSOR": format!("s=1;i={i}"), "__REALTIME_TIMESTAMP": (t * 1_000_000).to_string(), "_SYSTEMD_UNIT": "kubelet.service", "MESSAGE": klog(t, m)}).to_string()
            }),
        ),
        (
            "kubelet --logging-format=json",
            Box::new(|_, t, m| json_line(t, m)),
        ),
        (
            "Talos json_lines",
            Box::new(|_, t, m| {
                let (y, mo, d, h, mi, s) = utc_parts(t);
                serde_json::json!({"msg": m, "talos-level": "info", "talos-service": "kubelet", "talos-time": format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.5Z"), "v": 0}).to_string()
            }),
        ),
    ];
    for (name, shape) in &shapes {
        let mut input = String::from("$ ssh worker-04 sudo cat kubelet.log\n");
        for (i, (t, m)) in loop_lines.iter().enumerate() {
            input.push_str(&shape(i, *t, m));
            input.push('\n');
        }
        let out = check()
            .args(["--log-file", "-", "-v"])
            .stdin(input.clone())
            .run();
        out.assert_status(NAME, 2);
        assert!(
            out.stdout
                .contains("pvc-81b676e6 UnmountDevice (GetDeviceMountRefs)"),
            "{name}: {out:?}"
        );
        assert!(
            out.stdout
                .contains("1 line could not be read as kubelet records (1 of the first"),
            "{name}: {out:?}"
        );
        // The same lines with no failure in them: OK, not "not a kubelet log".
        if *name != "pasted without header" {
            let healthy = input.replace("No retries permitted until", "next sync at");
            let out = check().args(["--log-file", "-"]).stdin(healthy).run();
            out.assert_status(NAME, 0);
        }
    }
    // Nothing in it is the kubelet's: UNKNOWN.
    let out = check()
        .args(["--log-file", "-"])
        .stdin("$ cat notes.txt\nremember the milk\n")
        .run();
    out.assert_status(NAME, 3);
    assert!(out.stdout.contains("not a kubelet log"), "{out:?}");
    // A healthy log piped in behind a preamble longer than the sampled lines: stdin is read once,
    // and a kubelet record anywhere in it is enough to judge it (OK), as for a file.
    let preamble: String = (0..40).map(|i| format!("# notes, line {i}\n")).collect();
    let (_, shape) = &shapes[0];
    let mut healthy = preamble.clone();
    for (i, (t, m)) in loop_lines.iter().enumerate() {
        healthy.push_str(&shape(
            i,
            *t,
            &m.replace("No retries permitted until", "next sync at"),
        ));
        healthy.push('\n');
    }
    let out = check().args(["--log-file", "-", "-v"]).stdin(healthy).run();
    out.assert_status(NAME, 0);
    assert!(out.stdout.contains("0 candidate lines"), "{out:?}");
    // The same preamble before nothing of the kubelet's: UNKNOWN still.
    let out = check()
        .args(["--log-file", "-"])
        .stdin(format!("{preamble}remember the milk\n"))
        .run();
    out.assert_status(NAME, 3);
    assert!(out.stdout.contains("not a kubelet log"), "{out:?}");
}
