//! Unit tests: evaluate on in-memory failures, gather on files written here.

use crate::gather::{keep, SourceState, CHECK_ID};
use crate::*;
use node::logs::{scan, state, time};
use plugin::{Ctx, Range, Report, Status, Thresholds};
use std::time::{Duration, Instant};

/// evaluate at `now`: the data as gathered then.
fn eval(d: &Data, p: &Policy, now: i64) -> Report {
    evaluate(&Data { now, ..d.clone() }, p)
}

#[test]
fn a_log_of_another_format_is_unknown() {
    let st = |sampled, recognized, overlong| scan::ScanStats {
        sampled,
        recognized,
        overlong,
        ..Default::default()
    };
    let e = format_verdict("f", &st(16, 0, 0), 0).unwrap_err();
    assert!(
        e.0.contains("f is not a kubelet log") && e.0.contains("klog"),
        "{e}"
    );
    let e = format_verdict("f", &st(0, 0, 1), 0).unwrap_err();
    assert!(
        e.0.contains("longer than 1 MiB (the cap of one log line)"),
        "{e}"
    );
    assert_eq!(
        format_verdict("f", &st(0, 0, 0), 0).unwrap(),
        None,
        "nothing yet"
    );
    assert_eq!(format_verdict("f", &st(3, 1, 0), 0).unwrap(), None);
    assert!(format_verdict("f", &st(3, 1, 2), 0)
        .unwrap()
        .unwrap()
        .contains("2 lines longer than 1 MiB"));
}

const MIN: i64 = 60_000;

fn rules() -> Policy {
    Policy {
        window_ms: 15 * MIN,
        stuck_ms: 10 * MIN,
        thresholds: Thresholds::default(),
    }
}

fn fail(t: i64, vol: &str, backoff_ms: u64) -> Failure {
    Failure {
        t,
        volume: format!("kubernetes.io/csi/driver.longhorn.io^{vol}"),
        pv: Some(vol.to_string()),
        op: "UnmountDevice (GetDeviceMountRefs)".into(),
        pod: None,
        backoff_ms,
        error: "GetDeviceMountRefs check failed".into(),
    }
}

fn data(f: Vec<Failure>) -> Data {
    Data {
        failures: f,
        sources: vec![SourceInfo {
            name: "test".into(),
            complete: true,
            ..Default::default()
        }],
        streaks: Vec::new(),
        now: 0,
        ..Default::default()
    }
}

/// The kubelet's real schedule: 0.5s, 1s, 2s… doubling to 2m2s.
fn schedule(start: i64, until: i64, vol: &str) -> Vec<Failure> {
    let mut v = Vec::new();
    let (mut t, mut b) = (start, 500u64);
    while t <= until {
        v.push(fail(t, vol, b));
        t += b as i64;
        b = (b * 2).min(MAX_BACKOFF_MS);
    }
    v
}

#[test]
fn nothing_is_ok_with_zero_perfdata() {
    let r = eval(&data(vec![]), &rules(), 100 * MIN);
    assert_eq!(r.status, Status::Ok);
    assert!(r
        .summary
        .contains("no failed volume operations in the last 15m"));
    let labels: Vec<_> = r.perfdata.iter().map(|p| p.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "failed_operations",
            "failing_volumes",
            "max_backoff",
            "longest_failing"
        ]
    );
}

#[test]
fn one_fresh_failure_warns() {
    let now = 100 * MIN;
    let r = eval(&data(vec![fail(now - MIN, "pvc-a", 500)]), &rules(), now);
    assert_eq!(r.status, Status::Warning);
    assert!(r.summary.contains("pvc-a"), "{}", r.summary);
}

#[test]
fn failures_dated_in_the_future_are_ignored_with_a_note() {
    let now = 100 * MIN;
    let r = eval(
        &data(vec![
            fail(now + 60 * MIN, "pvc-tomorrow", 500),
            fail(now + 2 * MIN, "pvc-skew", 500),
        ]),
        &rules(),
        now,
    );
    // A little clock skew still counts; an hour ahead does not, but is not silent.
    assert_eq!(r.status, Status::Warning);
    assert!(r.summary.contains("pvc-skew") && !r.summary.contains("pvc-tomorrow"));
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("1 failure line dated more than 5m after now was ignored")),
        "{:?}",
        r.notes
    );
    let r = eval(&data(vec![fail(now - MIN, "pvc-a", 500)]), &rules(), now);
    assert!(r.notes.iter().all(|n| !n.contains("after now")));
}

#[test]
fn failures_outside_window_do_not_count() {
    let now = 100 * MIN;
    let r = eval(
        &data(vec![fail(now - 16 * MIN, "pvc-a", 500)]),
        &rules(),
        now,
    );
    assert_eq!(r.status, Status::Ok);
}

#[test]
fn stuck_longer_than_stuck_is_critical() {
    let now = 100 * MIN;
    // Failing for 12 minutes with short backoffs only (not at the max).
    let f: Vec<_> = (0..=24)
        .map(|i| fail(now - 12 * MIN + i * 30_000, "pvc-b", 16_000))
        .collect();
    let r = eval(&data(f), &rules(), now);
    assert_eq!(r.status, Status::Critical);
    let v = volumes(&data(vec![]).failures, &[], &rules(), now);
    assert!(v.is_empty());
    // The first line read already had a 16s backoff: the run began before it.
    assert!(
        r.summary.contains("failing for at least 12m"),
        "{}",
        r.summary
    );
    // Only 8 minutes: WARNING.
    let f: Vec<_> = (0..=16)
        .map(|i| fail(now - 8 * MIN + i * 30_000, "pvc-b", 16_000))
        .collect();
    assert_eq!(eval(&data(f), &rules(), now).status, Status::Warning);
}

/// The Talos log of #21: GetDeviceMountRefs failing from 05:48 (the kubelet's first 500ms
/// backoff) to 06:27 at 2m2s, read at 06:40 with the default 15m window. The age is the true
/// one from every line read, not from the window's.
#[test]
fn age_is_from_every_line_read_and_at_least_when_unknown() {
    let t0 = 100 * 60 * MIN;
    let all = schedule(t0, t0 + 39 * MIN, "pvc-talos");
    let now = all.last().unwrap().t + 90_000;
    let known = streaks(&[], &all, now - 15 * MIN, now);
    assert_eq!(known.len(), 1);
    assert_eq!((known[0].start, known[0].start_known()), (t0, true));
    // What the window holds, with the run known from every line read.
    let in_lookback: Vec<Failure> = all
        .iter()
        .filter(|f| f.t >= now - 15 * MIN)
        .cloned()
        .collect();
    let mut d = data(in_lookback.clone());
    d.streaks = known.clone();
    let r = eval(&d, &rules(), now);
    assert!(
        r.summary.contains(
            "pvc-talos UnmountDevice (GetDeviceMountRefs) failing for 38m43s at max backoff"
        ),
        "{}",
        r.summary
    );
    // Without the earlier lines: the first line read is at 2m2s, so "at least".
    let r = eval(&data(in_lookback.clone()), &rules(), now);
    assert!(
        r.summary.contains("failing for at least 1"),
        "{}",
        r.summary
    );
    // A kept run that ended long before this one's start does not lengthen it.
    let mut old = known[0].clone();
    old.start -= 600 * MIN;
    old.last = old.start + MIN;
    let mut d = data(in_lookback);
    d.streaks = vec![old];
    let v = volumes(&d.failures, &d.streaks, &rules(), now);
    assert!(!v[0].start_known && v[0].streak_start > t0, "{v:?}");
}

/// Runs kept across runs of the check: extended by new lines, started earlier by earlier
/// lines that reach them, replaced after a gap, dropped once ended before the lookback.
#[test]
fn streaks_extend_across_runs() {
    let a = schedule(0, 10 * MIN, "pvc-a");
    let (first, second) = a.split_at(a.len() / 2);
    let s1 = streaks(&[], first, -MIN, 5 * MIN);
    let s2 = streaks(&s1, second, 0, 11 * MIN);
    assert_eq!(s2, streaks(&[], &a, 0, 11 * MIN));
    assert_eq!((s2[0].start, s2[0].last), (0, a.last().unwrap().t));
    // A gap longer than backoff + grace: a new run.
    let later = vec![fail(s2[0].last + 30 * MIN, "pvc-a", 122_000)];
    let s3 = streaks(&s2, &later, 0, 60 * MIN);
    assert_eq!(s3[0].start, s2[0].last + 30 * MIN);
    assert!(!s3[0].start_known());
    // Ended before `since`: dropped.
    assert!(streaks(&s2, &[], 60 * MIN, 60 * MIN).is_empty());
    // From the future: ignored.
    let ghost = vec![fail(24 * 60 * MIN, "pvc-g", 500)];
    assert!(streaks(&[], &ghost, 0, MIN).is_empty());
}

#[test]
fn max_backoff_is_critical_and_reported() {
    let now = 100 * MIN;
    // The real schedule reaches 2m2s after ~2 minutes; 6 minutes of it.
    let f = schedule(now - 6 * MIN, now, "pvc-c");
    let r = eval(&data(f), &rules(), now);
    assert_eq!(r.status, Status::Critical);
    assert!(r.summary.contains("at max backoff"));
    let p = r
        .perfdata
        .iter()
        .find(|p| p.label == "max_backoff")
        .unwrap();
    assert_eq!(p.value, 122.0);
    // The old 2m0s cap counts as the maximum too.
    let r = eval(
        &data(vec![fail(now - MIN, "pvc-d", 120_000)]),
        &rules(),
        now,
    );
    assert_eq!(r.status, Status::Critical);
}

#[test]
fn a_gap_restarts_the_streak_and_recovered_volume_is_not_critical() {
    let now = 100 * MIN;
    // Failed 14 minutes ago at max backoff once, then nothing: not active any more.
    let r = eval(
        &data(vec![fail(now - 14 * MIN, "pvc-e", 122_000)]),
        &rules(),
        now,
    );
    assert_eq!(r.status, Status::Warning);
    // Two bursts 10 minutes apart: the streak is the second burst only.
    let mut f = vec![fail(now - 14 * MIN, "pvc-f", 500)];
    f.push(fail(now - MIN, "pvc-f", 500));
    let v = volumes(&f, &[], &rules(), now);
    assert_eq!(v[0].streak_start, now - MIN);
    assert_eq!(v[0].status, Status::Warning);
}

#[test]
fn ranges_override_and_perfdata() {
    let now = 100 * MIN;
    let mut f = schedule(now - 6 * MIN, now, "pvc-c");
    f.push(fail(now - MIN, "pvc-a", 500));
    let mut r = rules();
    r.thresholds = Thresholds::new(
        Some(Range::parse("5").unwrap()),
        Some(Range::parse("10").unwrap()),
    );
    let rep = eval(&data(f.clone()), &r, now);
    assert_eq!(rep.status, Status::Ok);
    assert!(rep.findings.iter().all(|x| x.status == Status::Ok));
    let pv = |l: &str| rep.perfdata.iter().find(|p| p.label == l).unwrap().value;
    assert_eq!(pv("failing_volumes"), 2.0);
    assert_eq!(pv("failed_operations"), f.len() as f64);
    r.thresholds = Thresholds::new(Some(Range::parse("1").unwrap()), None);
    assert_eq!(eval(&data(f), &r, now).status, Status::Warning);
}

#[test]
fn incomplete_read_without_failures_is_unknown() {
    let mut d = data(vec![]);
    d.sources[0].complete = false;
    let r = eval(&d, &rules(), 100 * MIN);
    assert_eq!(r.status, Status::Unknown);
    assert!(r.summary.contains("deadline"));
}

#[test]
fn year_boundary_end_to_end_of_parse_and_eval() {
    // now = 2027-01-01 00:05 UTC; klog lines from Dec 31 23:58 (no year in the header, and no
    // parseable Go time) must land in the window.
    let now = time::days_from_civil(2027, 1, 1) * 86_400_000 + 5 * MIN;
    let line = r#"E1231 23:58:00.000000    2166 nestedpendingoperations.go:348] Operation for "{volumeName:kubernetes.io/csi/x^pvc-y podName: nodeName:}" failed. No retries permitted until (unparseable) (durationBeforeRetry 2m2s). Error: UnmountDevice failed for volume "pvc-y""#;
    let f = parse::parse_line(line.as_bytes(), None, now, &time::FixedTz(0)).unwrap();
    assert_eq!(f.t, now - 7 * MIN);
    let line2 = line.replace("E1231 23:58:00", "E0101 00:04:00");
    let f2 = parse::parse_line(line2.as_bytes(), None, now, &time::FixedTz(0)).unwrap();
    assert_eq!(f2.t, now - MIN);
    let mut all = vec![f, f2];
    for hm in ["E0101 00:00:00", "E0101 00:02:00"] {
        let l = line.replace("E1231 23:58:00", hm);
        all.push(parse::parse_line(l.as_bytes(), None, now, &time::FixedTz(0)).unwrap());
    }
    let r = eval(&data(all), &rules(), now);
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.summary
            .contains("pvc-y UnmountDevice failing for at least 6m at max backoff"),
        "{}",
        r.summary
    );
}

#[test]
fn keep_drops_the_old_and_the_future() {
    let now = 100 * MIN;
    let kept = keep(
        vec![
            fail(now - 20 * MIN, "pvc-old", 500),
            fail(now - MIN, "pvc-a", 500),
            fail(now + MIN, "pvc-soon", 500),
            fail(now + 24 * 60 * MIN, "pvc-ghost", 500),
        ],
        now - 15 * MIN,
        now,
    );
    let pvs: Vec<_> = kept.iter().map(|f| f.pv.clone().unwrap()).collect();
    assert_eq!(pvs, ["pvc-a", "pvc-soon"]);
}

/// A kubelet run in a container: its lines reach the file wrapped by the runtime. Docker's
/// json-file driver escapes the klog line into `"log"` (the operation key's quotes become
/// `\"`); the CRI format prefixes time, stream and tag, and a `P` line continues in the
/// next record, which does not hold the needle. Mixed in one file (a node moved from
/// dockershim to containerd keeps both shapes in its collected logs), detected per line.
#[test]
fn gather_reads_docker_json_file_and_cri_wrapped_lines() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("nested-wrap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = time::now_ms();
    // The runtime's times (RFC 3339, UTC), 5 and 3 minutes ago.
    let rfc = |ms: i64| {
        let (y, mo, d) = time::civil_from_days(ms.div_euclid(86_400_000));
        let s = ms.rem_euclid(86_400_000) / 1000;
        format!(
            "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.123456789Z",
            s / 3600,
            s / 60 % 60,
            s % 60
        )
    };
    let klog = |pv: &str, backoff: &str| {
        format!(
            r#"E1203 06:02:55.123456    2166 nestedpendingoperations.go:348] Operation for "{{volumeName:kubernetes.io/csi/driver.longhorn.io^{pv} podName: nodeName:}}" failed. No retries permitted until 2026-12-03 06:04:57.123456789 +0000 UTC m=+8812235.211760637 (durationBeforeRetry {backoff}). Error: GetDeviceMountRefs check failed for volume "{pv}" (UniqueName: "kubernetes.io/csi/driver.longhorn.io^{pv}") on node "node-1" : the device mount path "/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/0716/globalmount" is still mounted by other references [/var/lib/kubelet/pods/0d6a/volumes/kubernetes.io~csi/{pv}/mount]"#
        )
    };
    let docker = serde_json::json!({
        "log": format!("{}\n", klog("pvc-docker", "1m4s")),
        "stream": "stderr",
        "time": rfc(now - 5 * MIN),
    })
    .to_string();
    assert!(
        docker.contains(r#"Operation for \"{volumeName"#),
        "{docker}"
    );
    let cri_full = format!(
        "{} stderr F {}",
        rfc(now - 3 * MIN),
        klog("pvc-cri", "2m2s")
    );
    let long = klog("pvc-partial", "32s");
    let (head, tail) = long.split_at(long.find("still mounted").unwrap());
    let t = rfc(now - 2 * MIN);
    let content = format!(
        "{docker}\n{{\"log\":\"I1203 06:00:00.000000    2166 kubelet.go:1] noise\\n\",\"stream\":\"stderr\",\"time\":\"{t}\"}}\n{cri_full}\n{t} stderr P {head}\n{t} stderr F {tail}\n{t} stderr F I1203 06:00:00.000000 2166 x.go:1] after\n"
    );
    let log = dir.join("0.log");
    std::fs::write(&log, content).unwrap();
    let opts = Opts::try_parse_from([
        "check_kubelet_nested_ops",
        "--log-file",
        log.to_str().unwrap(),
    ])
    .unwrap();
    let ctx = Ctx::for_test(Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(5);
    let d = gather(&opts, &ctx, now, deadline).unwrap();
    let got: Vec<(String, i64, u64)> = d
        .failures
        .iter()
        .map(|f| (f.pv.clone().unwrap(), f.t, f.backoff_ms))
        .collect();
    let at = |ago: i64| (now - ago).div_euclid(1000) * 1000 + 123;
    // The runtime's time is the entry's (the klog header's 06:02:55 is ignored).
    assert_eq!(
        got,
        [
            ("pvc-docker".to_string(), at(5 * MIN), 64_000),
            ("pvc-cri".to_string(), at(3 * MIN), 122_000),
            ("pvc-partial".to_string(), at(2 * MIN), 32_000)
        ]
    );
    // The joined line keeps the references, which were in the second piece.
    assert!(d.failures[2]
        .error
        .ends_with("still mounted by other references [/var/lib/kubelet/pods/0d6a/volumes/kubernetes.io~csi/pvc-partial/mount]"));
    assert_eq!(d.failures[0].op, "UnmountDevice (GetDeviceMountRefs)");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The zone of klog times: --tz first; in container mode the host's /etc/localtime (a copy,
/// or a symlink into the host's zoneinfo, resolved under the host root), UTC without one.
#[test]
fn zone_of_klog_times() {
    use clap::Parser;
    let kolkata = std::path::Path::new("/usr/share/zoneinfo/Asia/Kolkata");
    let host = std::env::temp_dir().join(format!("nested-tz-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&host);
    std::fs::create_dir_all(host.join("etc")).unwrap();
    let opts = |extra: &[&str]| {
        let mut a = vec![
            "check_kubelet_nested_ops",
            "--host-root",
            host.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        Opts::try_parse_from(a).unwrap()
    };
    // No /etc/localtime on the host: UTC.
    assert_eq!(zone(&opts(&[])).unwrap().offset_at(0), 0);
    // --tz wins.
    assert_eq!(
        zone(&opts(&["--tz", "+08:00"])).unwrap().offset_at(0),
        8 * 3600
    );
    assert!(zone(&opts(&["--tz", "../../etc/shadow"])).is_err());
    if !kolkata.exists() {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("needs tzdata");
        }
        eprintln!("skipped: no tzdata");
        return;
    }
    // A copy of the host's zone file.
    std::fs::copy(kolkata, host.join("etc/localtime")).unwrap();
    assert_eq!(zone(&opts(&[])).unwrap().offset_at(1_800_000_000), 19800);
    // A symlink into the host's zoneinfo: followed under the host root, not in ours.
    std::fs::remove_file(host.join("etc/localtime")).unwrap();
    std::fs::create_dir_all(host.join("usr/share/zoneinfo/Asia")).unwrap();
    std::fs::copy(kolkata, host.join("usr/share/zoneinfo/Asia/Kolkata")).unwrap();
    std::os::unix::fs::symlink(
        "/usr/share/zoneinfo/Asia/Kolkata",
        host.join("etc/localtime"),
    )
    .unwrap();
    assert_eq!(zone(&opts(&[])).unwrap().offset_at(1_800_000_000), 19800);
    // An IANA name is read from the host's zoneinfo in container mode.
    assert_eq!(
        zone(&opts(&["--tz", "Asia/Kolkata"])).unwrap().offset_at(0),
        19800
    );
    // Garbage where the zone should be: UNKNOWN naming it.
    std::fs::remove_file(host.join("etc/localtime")).unwrap();
    std::fs::write(host.join("etc/localtime"), "not a zone").unwrap();
    let e = zone(&opts(&[])).err().unwrap();
    assert!(e.0.contains("TZif") && e.0.contains("--tz"), "{}", e.0);
    std::fs::remove_dir_all(&host).unwrap();
}

/// A state file holding a failure from tomorrow beside a real one: the ghost is dropped with a
/// note and never saved again (it would start counting once the clock reaches it).
#[test]
fn gather_drops_kept_failures_from_the_future() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("nested-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("kubelet.log");
    std::fs::write(
        &log,
        "I0713 20:27:25.123456    2166 kubelet.go:1] no failure here\n",
    )
    .unwrap();
    let st = dir.join("state");
    let opts = Opts::try_parse_from([
        "check_kubelet_nested_ops",
        "--log-file",
        log.to_str().unwrap(),
        "--state-dir",
        st.to_str().unwrap(),
    ])
    .unwrap();
    let now = time::now_ms();
    let sp = state::path(&st, CHECK_ID, &format!("file:{}", log.display()));
    state::save(
        &sp,
        &SourceState {
            cursor: None,
            file: None,
            failures: vec![
                fail(now - MIN, "pvc-real", 2000),
                fail(now + 24 * 60 * MIN, "pvc-ghost", 2000),
            ],
            streaks: Vec::new(),
            ..SourceState::default()
        },
    )
    .unwrap();
    let ctx = Ctx::for_test(Duration::from_secs(10));
    let deadline = Instant::now() + Duration::from_secs(5);
    let d = gather(&opts, &ctx, now, deadline).unwrap();
    let pvs: Vec<_> = d.failures.iter().map(|f| f.pv.clone().unwrap()).collect();
    assert_eq!(pvs, ["pvc-real"]);
    assert!(
        d.sources[0]
            .notes
            .iter()
            .any(|n| n.contains("the clock was set back")
                && n.contains("1 kept entry dated after now dropped")),
        "{:?}",
        d.sources
    );
    let saved: SourceState = state::load(&sp).unwrap().unwrap();
    assert_eq!(saved.failures.len(), 1);
    assert_eq!(saved.failures[0].pv.as_deref(), Some("pvc-real"));
    // The next run: the real failure is still known, and nothing is said about the state.
    let d = gather(&opts, &ctx, now, deadline).unwrap();
    assert_eq!(d.failures.len(), 1);
    assert!(d.sources[0].notes.is_empty(), "{:?}", d.sources);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 27, finding 4: a source that gave nothing (an empty file, /dev/null, a pipe that ended
/// at once) is UNKNOWN naming it, not OK; a failing volume read from another source still counts.
#[test]
fn finding4_a_source_that_gave_nothing_is_unknown() {
    let mut d = data(Vec::new());
    d.sources[0].name = "/dev/null".into();
    d.sources[0].empty = true;
    let r = eval(&d, &rules(), 100 * MIN);
    assert_eq!(r.status, Status::Unknown);
    assert!(
        r.summary.contains("/dev/null gave nothing to read"),
        "{}",
        r.summary
    );
    d.sources[0].empty = false;
    assert_eq!(eval(&d, &rules(), 100 * MIN).status, Status::Ok);
}

/// The worker-04 incident's loop (Talos v1.13.6, Longhorn): UnmountDevice's GetDeviceMountRefs
/// failing at the kubelet's maximum backoff for 10 minutes. `(time ms, message)` per failure,
/// the message as nestedpendingoperations.go prints it (new operation key, bare error).
fn worker04_loop(now: i64) -> Vec<(i64, String)> {
    let pv = "pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b";
    (0..6)
        .map(|k| {
            let t = now - 12 * MIN + k * 122_000;
            let msg = format!(
                r#"Operation for "{{volumeName:kubernetes.io/csi/driver.longhorn.io^{pv} podName: nodeName:}}" failed. No retries permitted until {} +0000 UTC m=+8812235.211760637 (durationBeforeRetry 2m2s). Error: GetDeviceMountRefs check failed for volume "{pv}" (UniqueName: "kubernetes.io/csi/driver.longhorn.io^{pv}") on node "worker-04" : the device mount path "/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/5d41402abc4b2a76b9719d911017c592/globalmount" is still mounted by other references [/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/5d41402abc4b2a76b9719d911017c592/globalmount]"#,
                go_time(t + 122_000)
            );
            (t, msg)
        })
        .collect()
}

/// `2026-12-03 06:04:57.123456789` (UTC) of epoch ms.
fn go_time(ms: i64) -> String {
    let (y, mo, d) = time::civil_from_days(ms.div_euclid(86_400_000));
    let s = ms.rem_euclid(86_400_000) / 1000;
    format!(
        "{y:04}-{mo:02}-{d:02} {:02}:{:02}:{:02}.{:03}456789",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms.rem_euclid(1000)
    )
}

/// klog's header (`E1203 06:02:55.123456    2166 nestedpendingoperations.go:348] `), UTC.
fn klog_header(ms: i64) -> String {
    let (_, mo, d) = time::civil_from_days(ms.div_euclid(86_400_000));
    let s = ms.rem_euclid(86_400_000) / 1000;
    format!(
        "E{mo:02}{d:02} {:02}:{:02}:{:02}.{:03}456    2166 nestedpendingoperations.go:348] ",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms.rem_euclid(1000)
    )
}

fn rfc3339(ms: i64) -> String {
    go_time(ms).replace(' ', "T") + "Z"
}

/// Every shape an operator has the kubelet's log in (issue 31) and Talos writes it in (issue
/// 28): (name, the log's lines). Each starts with a line that is no kubelet record.
fn shapes(now: i64) -> Vec<(&'static str, Vec<String>)> {
    let lp = worker04_loop(now);
    let map = |f: &dyn Fn(usize, i64, &str) -> String| -> Vec<String> {
        let mut v =
            vec!["$ kubectl logs is not what we have; here is the kubelet log:".to_string()];
        v.extend(lp.iter().enumerate().map(|(i, (t, m))| f(i, *t, m)));
        v
    };
    let klog = |t: i64, m: &str| format!("{}{m}", klog_header(t));
    let json = |t: i64, m: &str| {
        serde_json::json!({"ts": t as f64 + 0.25, "caller": "nestedpendingoperations/nestedpendingoperations.go:348", "msg": m, "v": 0})
            .to_string()
    };
    let talos = |t: i64, m: &str| {
        serde_json::json!({"msg": m, "caller": "nestedpendingoperations/nestedpendingoperations.go:348", "v": 0, "talos-level": "info", "talos-service": "kubelet", "talos-time": rfc3339(t)})
            .to_string()
    };
    vec![
        (
            "grep -n",
            map(&|i, t, m| format!("{}:{}", 535 + i, klog(t, m))),
        ),
        (
            "grep -H -n",
            map(&|i, t, m| format!("/var/log/kubelet.log:{}:{}", 535 + i, klog(t, m))),
        ),
        (
            "grep -H",
            map(&|_, t, m| format!("kubelet.log:{}", klog(t, m))),
        ),
        ("pasted without its header", map(&|_, _, m| m.to_string())),
        (
            "a leading backtick",
            map(&|_, t, m| format!("`{}`", klog(t, m))),
        ),
        (
            "journalctl -o short-precise",
            map(&|_, t, m| {
                let h = klog_header(t);
                format!(
                    "Dec 03 {} worker-04 kubelet[2166]: {}",
                    &h[6..21],
                    klog(t, m)
                )
            }),
        ),
        (
            "journalctl -o json",
            map(&|i, t, m| {
                serde_json::json!({"__CURSOR": format!("s=0f3b;i={i}"), "__REALTIME_TIMESTAMP": (t * 1000).to_string(), "_SYSTEMD_UNIT": "kubelet.service", "MESSAGE": klog(t, m)})
                    .to_string()
            }),
        ),
        ("kubelet --logging-format=json", map(&|_, t, m| json(t, m))),
        ("Talos json_lines", map(&|_, t, m| talos(t, m))),
        (
            "talosctl logs kubelet (one node)",
            map(&|_, t, m| format!("172.20.0.5: {}", json(t, m))),
        ),
        (
            "talosctl -n a,b logs kubelet",
            map(&|i, t, m| {
                let node = if i % 2 == 0 {
                    "172.20.0.5"
                } else {
                    "172.20.0.6"
                };
                format!("{node}: {}", json(t, m))
            }),
        ),
    ]
}

/// Issue 31: a log whose first line is not the kubelet's, in every shape, gives the nested-op
/// verdict (CRITICAL: the worker-04 loop at the maximum backoff); the -v line says how many
/// lines could not be read; a healthy log of the same shape is OK; nothing kubelet is UNKNOWN.
#[test]
fn every_shape_an_operator_has_gives_the_verdict() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("nested-shapes-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = time::now_ms();
    let run = |name: &str, lines: &[String]| {
        let log = dir.join(name.replace([' ', '/', ','], "_"));
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let opts = Opts::try_parse_from([
            "check_kubelet_nested_ops",
            "--tz",
            "UTC",
            "--log-file",
            log.to_str().unwrap(),
        ])
        .unwrap();
        let ctx = Ctx::for_test(Duration::from_secs(10));
        let deadline = Instant::now() + Duration::from_secs(5);
        gather(&opts, &ctx, now, deadline).map(|d| (evaluate(&d, &opts.policy()), d))
    };
    for (name, lines) in shapes(now) {
        let (r, d) = run(name, &lines).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.status, Status::Critical, "{name}: {r:?}");
        assert_eq!(d.failures.len(), 6, "{name}");
        let f = &d.failures[0];
        assert_eq!(f.op, "UnmountDevice (GetDeviceMountRefs)", "{name}");
        assert_eq!(
            f.pv.as_deref(),
            Some("pvc-81b676e6-3c4d-4e5f-8a9b-0c1d2e3f4a5b"),
            "{name}"
        );
        // Each shape's own time (to the second: the pasted line's is until − backoff).
        assert_eq!(f.t / 1000, (now - 12 * MIN) / 1000, "{name}");
        assert!(
            r.summary.contains("at max backoff"),
            "{name}: {}",
            r.summary
        );
        // -v: the source line counts the one line it could not read.
        let src = text::source(&d.sources[0]);
        assert!(
            src.contains("1 line could not be read as kubelet records (1 of the first 7 lines, 0 naming a retry)"),
            "{name}: {src}"
        );
        // Healthy: the same shape without a failure (the lines are another kubelet message).
        let healthy: Vec<String> = lines
            .iter()
            .map(|l| {
                l.replace("Operation for", "Reconciler: started for")
                    .replace("No retries permitted until", "next sync at")
            })
            .collect();
        if name != "pasted without its header" {
            let (r, _) = run(name, &healthy).unwrap_or_else(|e| panic!("{name} healthy: {e}"));
            assert_eq!(r.status, Status::Ok, "{name} healthy: {r:?}");
        }
    }
    // Nothing in it is a kubelet record: UNKNOWN naming what was expected.
    let e = run(
        "not kubelet",
        &[
            "hello".to_string(),
            "EXT4-fs error (device sdc): x".to_string(),
        ],
    )
    .unwrap_err();
    assert!(e.0.contains("is not a kubelet log"), "{e}");
    // A line naming a retry that is no record counts as unread, the rest is judged.
    let mut lines = shapes(now).remove(0).1;
    lines.push(
        "536:E1203 nestedpendingoperations.go] Operation for x failed. No retries permitted until"
            .into(),
    );
    let (r, d) = run("mangled", &lines).unwrap();
    assert_eq!(r.status, Status::Critical);
    assert_eq!(d.sources[0].unread_candidates, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file whose first 16 lines (the shape sample) are a pasted preamble: a kubelet record later
/// in it still makes it a kubelet log (OK when healthy); a file with none is UNKNOWN.
#[test]
fn a_long_preamble_does_not_reject_a_healthy_file() {
    use clap::Parser;
    let dir = std::env::temp_dir().join(format!("nested-preamble-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let now = time::now_ms();
    let preamble: String = (0..40)
        .map(|i| format!("note {i}: what we saw on worker-04\n"))
        .collect();
    let run = |name: &str, body: String| {
        let log = dir.join(name);
        std::fs::write(&log, body).unwrap();
        let opts = Opts::try_parse_from([
            "check_kubelet_nested_ops",
            "--tz",
            "UTC",
            "--log-file",
            log.to_str().unwrap(),
        ])
        .unwrap();
        let ctx = Ctx::for_test(Duration::from_secs(10));
        gather(&opts, &ctx, now, Instant::now() + Duration::from_secs(5))
            .map(|d| evaluate(&d, &opts.policy()).status)
    };
    let healthy = format!(
        "{preamble}{}\"SyncLoop (PLEG): event for pod\" pod=\"default/web-0\"\n",
        klog_header(now - 60_000).replacen('E', "I", 1)
    );
    assert_eq!(run("healthy", healthy), Ok(Status::Ok));
    let e = run("junk", preamble.clone()).unwrap_err();
    assert!(e.0.contains("is not a kubelet log"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
