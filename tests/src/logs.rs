//! Log fixtures: kubelet lines in every shape the kubelet writes them, and real journal files
//! built with `systemd-journal-remote` from journal export format (fields and timestamps of the
//! test's choosing), readable with `journalctl --directory`.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";

/// Now, epoch seconds.
pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// (year, month, day, hour, min, sec) in UTC of an epoch second.
pub fn utc_parts(t: i64) -> (i64, u32, u32, u32, u32, u32) {
    let z = t.div_euclid(86400) + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    let s = t.rem_euclid(86400);
    (
        y,
        m,
        d,
        (s / 3600) as u32,
        (s / 60 % 60) as u32,
        (s % 60) as u32,
    )
}

/// Go's `time.Time` `%v` in UTC: `2026-07-13 20:27:25.5 +0000 UTC m=+1234.5`.
pub fn go_time(t: i64) -> String {
    let (y, mo, d, h, mi, s) = utc_parts(t);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}.123456789 +0000 UTC m=+8812235.211760637")
}

/// Go's duration string of milliseconds (`500ms`, `1s`, `2m2s`).
pub fn go_dur(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    if s < 60 {
        format!("{s}s")
    } else {
        format!("{}m{}s", s / 60, s % 60)
    }
}

/// The klog header (UTC; run the check with TZ=UTC): `E0713 20:27:25.123456    2166 file:line] `.
pub fn klog_header(t: i64) -> String {
    let (_, mo, d, h, mi, s) = utc_parts(t);
    format!("E{mo:02}{d:02} {h:02}:{mi:02}:{s:02}.123456    2166 nestedpendingoperations.go:348] ")
}

/// The message of a failed operation, new key format, bare error (kubelet ≥ 1.20).
pub fn nested_op_msg(
    t: i64,
    driver: &str,
    pv: &str,
    pod_uid: &str,
    backoff_ms: u64,
    err: &str,
) -> String {
    format!(
        "Operation for \"{{volumeName:kubernetes.io/csi/{driver}^{pv} podName:{pod_uid} nodeName:}}\" failed. No retries permitted until {} (durationBeforeRetry {}). Error: {err}",
        go_time(t + (backoff_ms / 1000) as i64),
        go_dur(backoff_ms)
    )
}

/// The same in the old format (≈ ≤ 1.19): quoted key with escaped quotes, quoted error.
pub fn nested_op_msg_old(
    t: i64,
    plugin: &str,
    pv: &str,
    pod_uid: &str,
    backoff_ms: u64,
    err: &str,
) -> String {
    let q = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    format!(
        "Operation for \"\\\"kubernetes.io/{plugin}/{pv}\\\" (\\\"{pod_uid}\\\")\" failed. No retries permitted until {} (durationBeforeRetry {}). Error: \"{}\"",
        go_time(t + (backoff_ms / 1000) as i64),
        go_dur(backoff_ms),
        q(err)
    )
}

/// `GetDeviceMountRefs check failed …` as the kubelet's operation generator words it.
pub fn mount_refs_err(driver: &str, pv: &str, node: &str) -> String {
    format!(
        "GetDeviceMountRefs check failed for volume \"{pv}\" (UniqueName: \"kubernetes.io/csi/{driver}^{pv}\") on node \"{node}\" : the device mount path \"/var/lib/kubelet/plugins/kubernetes.io/csi/{driver}/0716a7ba/globalmount\" is still mounted by other references [/var/lib/kubelet/pods/3f1c/volumes/kubernetes.io~csi/{pv}/mount]"
    )
}

/// A kubelet JSON-logging line (`ts` in epoch milliseconds, k8s.io/component-base/logs/json).
pub fn json_line(t: i64, msg: &str) -> String {
    serde_json::json!({
        "ts": t as f64 * 1000.0 + 0.123,
        "caller": "nestedpendingoperations/nestedpendingoperations.go:348",
        "msg": msg,
    })
    .to_string()
}

/// One journal entry for [`write_journal`].
pub struct JEntry {
    pub realtime_s: i64,
    pub unit: String,
    pub message: String,
}

/// Write `entries` as a real journal file `<dir>/<name>.journal` with systemd-journal-remote.
pub fn write_journal(dir: &Path, name: &str, entries: &[JEntry]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut export = String::new();
    for (i, e) in entries.iter().enumerate() {
        assert!(
            !e.message.contains('\n'),
            "export text fields hold no newline"
        );
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a\n_HOSTNAME=node-1\n_SYSTEMD_UNIT={}\nSYSLOG_IDENTIFIER=kubelet\n_PID=2166\nMESSAGE={}\n\n",
            e.realtime_s * 1_000_000 + i as i64,
            // One boot for every file: monotonic time must follow realtime, as journalctl orders
            // entries of one boot by it.
            (e.realtime_s - 1_600_000_000) * 1_000_000 + i as i64,
            e.unit,
            e.message
        ));
    }
    let src = dir.join(format!("{name}.export"));
    std::fs::write(&src, export).unwrap();
    let out = crate::Cmd::new(JOURNAL_REMOTE)
        .arg(format!(
            "--output={}",
            dir.join(format!("{name}.journal")).display()
        ))
        .arg(&src)
        .run();
    assert_eq!(out.code, 0, "systemd-journal-remote failed: {out:?}");
    std::fs::remove_file(&src).unwrap();
}
