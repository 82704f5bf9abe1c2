//! The next step of a kernel storage finding (issue 26): how to read the kernel's own account
//! of it without a pipe (`journalctl -k --grep` with one pattern, quoted), and what to do on the
//! node it happened on — for a filesystem that carries PVs: cordon, move the pods, uncordon once
//! the storage works again; for iSCSI: the sessions.

use kube::checks::names::Names;
use plugin::next::{cmd, cordon, sh, uncordon};

/// The kernel log lines of a signal, as one `journalctl -k --grep` pattern (no `|`).
fn pattern(signal: &str) -> &'static str {
    match signal {
        "ext4_error" | "ext4_data_loss" | "ext4_writeback_refused" => "EXT4-fs",
        "journal_abort" | "jbd2_data_flush_error" => "journal",
        "remount_ro" => "read-only",
        s if s.starts_with("xfs") => "XFS",
        "io_error" => "I/O error",
        "scsi_offline" => "offline device",
        "iscsi_conn_error" => "detected conn error",
        "iscsi_recovery_timeout" => "session recovery timed out",
        "hung_task" => "blocked for more than",
        "loop_write_error" => "loop",
        _ => "",
    }
}

/// The step for a finding of `signal` on a device holding `pvs`, used by the pods `uids`, on
/// `node` (this node's name; the pods' `spec.nodeName` wins when the API knows it).
pub(crate) fn step(
    signal: &str,
    pvs: &[&str],
    uids: &[String],
    node: Option<&str>,
    names: &Names,
) -> String {
    let mut nodes: Vec<&str> = uids
        .iter()
        .filter_map(|u| names.pods.get(u))
        .filter_map(|p| p.node.as_deref())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let node = match nodes.as_slice() {
        [one] => Some(*one),
        _ => node,
    };
    let n = node.unwrap_or("NODE");
    let on = node.map(|n| format!("on {n}: ")).unwrap_or_default();
    let confirm = match pattern(signal) {
        "" => sh("sudo journalctl -k --since -1h --priority=warning"),
        p => cmd(&["sudo", "journalctl", "-k", "--since", "-1h", "--grep", p]),
    };
    let mut s = format!("{on}read the kernel's account: {confirm}");
    if signal.starts_with("iscsi") || signal == "scsi_offline" {
        s.push_str(&format!(
            "; the iSCSI sessions and their disks: {} (check_iscsi_sessions)",
            sh("sudo iscsiadm -m session -P 3")
        ));
    }
    if !pvs.is_empty() {
        let pods: Vec<String> = uids
            .iter()
            .filter_map(|u| names.pods.get(u))
            .map(|p| cmd(&["kubectl", "delete", "pod", "-n", &p.namespace, &p.name]))
            .collect();
        let delete = if pods.is_empty() {
            format!(
                "delete the pods using {} so they remount elsewhere (check_ro_pvc_mounts names them)",
                pvs.join(", ")
            )
        } else {
            format!("{} so they remount elsewhere", pods.join(", then "))
        };
        s.push_str(&format!(
            "; a PV filesystem is affected: {} first, then {delete}; once the node's storage works again: {}",
            cordon(n),
            uncordon(n)
        ));
    }
    s
}
