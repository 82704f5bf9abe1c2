//! The next step of an iSCSI finding (issue 26), from what the finding names (its signal,
//! session, target, disk, the pods of its volume): `iscsiadm` commands to run on the node, the
//! recovery timeout the incidents' runbook asks for (`replacement_timeout` 300 s), and for a
//! session that failed under a mounted filesystem: move the pods off the node first.

use plugin::next::{cmd, cordon, sh, uncordon};
use plugin::Finding;

/// `session3` → `3`.
fn sid(session: &str) -> Option<&str> {
    session
        .strip_prefix("session")
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The step for `f` on `node` (the pods' node when known, else this host's name).
pub(crate) fn step(f: &Finding, node: Option<&str>, pods_node: Option<&str>) -> String {
    let node = pods_node.or(node);
    let on = node.map(|n| format!("on {n}: ")).unwrap_or_default();
    let s = &f.subject;
    let show = match s.session.as_deref().and_then(sid) {
        Some(n) => cmd(&["sudo", "iscsiadm", "-m", "session", "-r", n, "-P", "3"]),
        None => sh("sudo iscsiadm -m session -P 3"),
    };
    let login = s
        .iqn
        .as_deref()
        .map(|iqn| cmd(&["sudo", "iscsiadm", "-m", "node", "-T", iqn, "--login"]));
    let move_pods = |text: &mut String| {
        if let (Some(n), Some(_)) = (node, s.pv.as_deref()) {
            let pods = match (s.namespace.as_deref(), s.pod.as_deref()) {
                (Some(ns), Some(p)) => cmd(&["kubectl", "delete", "pod", "-n", ns, p]),
                _ => "delete the pods using the volume".to_string(),
            };
            text.push_str(&format!(
                "; its filesystem is read-only once the disk failed: {} first, then {pods} so it remounts elsewhere; once the node's storage works again: {}",
                cordon(n),
                uncordon(n)
            ));
        }
    };
    match f.signal {
        "session_failed"
        | "session_recovery_timed_out"
        | "connection_down"
        | "scsi_device_state"
        | "session_state"
        | "target_state" => {
            let mut t = format!(
                "{on}see the session: {show}; the target (the volume's controller) must answer again"
            );
            if let Some(l) = &login {
                t.push_str(&format!(", then log in again: {l}"));
            }
            move_pods(&mut t);
            t
        }
        "no_disk" => match s.session.as_deref().and_then(sid) {
            Some(n) => format!(
                "{on}rescan the session for its disk: {}",
                cmd(&["sudo", "iscsiadm", "-m", "session", "-r", n, "--rescan"])
            ),
            None => format!("{on}see the sessions: {show}"),
        },
        "recovery_tmo_low" | "recovery_tmo_unknown" => match s.iqn.as_deref() {
            Some(iqn) => format!(
                "{on}set the recovery timeout for the next login: {}",
                cmd(&[
                    "sudo",
                    "iscsiadm",
                    "-m",
                    "node",
                    "-T",
                    iqn,
                    "-o",
                    "update",
                    "-n",
                    "node.session.timeo.replacement_timeout",
                    "-v",
                    "300",
                ])
            ),
            None => format!(
                "{on}set {} in /etc/iscsi/iscsid.conf for new logins, and see the sessions: {show}",
                sh("node.session.timeo.replacement_timeout = 300")
            ),
        },
        "duplicate_session" => format!(
            "{on}list the sessions: {}; log out the extra one by its number: {}",
            sh("sudo iscsiadm -m session -P 1"),
            sh("sudo iscsiadm -m session -r SID -u")
        ),
        "too_few_sessions" | "expected_target_missing" => format!(
            "{on}see the sessions and the initiator: {}, {}; log in to the target: {}",
            sh("sudo iscsiadm -m session -P 1"),
            sh("sudo systemctl status iscsid"),
            sh("sudo iscsiadm -m node --loginall=automatic")
        ),
        _ => format!(
            "{on}see what sysfs holds: {}, and the sessions: {show}",
            sh("ls -l /sys/class/iscsi_session")
        ),
    }
}
