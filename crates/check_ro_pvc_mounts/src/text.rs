//! The words of a finding: how a volume is named, what it is about, and the next step.

use crate::gather::Volume;
use kube::names::Names;
use plugin::Status;

pub(crate) fn short_name(v: &Volume, names: &Names) -> String {
    if v.names.is_empty() {
        format!("volume on {}", v.source)
    } else {
        v.names
            .iter()
            .map(|n| names.volume(n, v.pod_uids.iter().map(String::as_str)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The next step for a non-OK volume, paste-safe: cordon the node so nothing new lands on it,
/// delete the pods so they remount elsewhere, and find what broke under the filesystem.
pub(crate) fn next_step(v: &Volume, status: Status, names: &Names, node: Option<&str>) -> String {
    use plugin::shell_quote as q;
    let node = node.map(q).unwrap_or_else(|| "<this node>".into());
    let pods: Vec<String> = v
        .pod_uids
        .iter()
        .filter_map(|u| names.pod(u))
        .map(|p| match p.split_once('/') {
            Some((ns, name)) => format!("kubectl delete pod -n {} {}", q(ns), q(name)),
            None => format!("kubectl delete pod {}", q(&p)),
        })
        .collect();
    let delete = if pods.is_empty() {
        if v.pod_uids.is_empty() {
            "delete the pods using it so they remount elsewhere".to_string()
        } else {
            format!(
                "delete the pods using it so they remount elsewhere (pod UIDs {}: `kubectl get pods -A -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid`)",
                v.pod_uids.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    } else {
        format!("`{}` so it remounts elsewhere", pods.join("; "))
    };
    let under = if v.fstype == "xfs" {
        "the kernel's account: check_storage_kernel_errors, `dmesg | grep -i xfs`"
    } else {
        "the kernel's account: check_storage_kernel_errors, `dmesg | grep -iE 'ext4|jbd2|I/O error'`"
    };
    if status == Status::Critical {
        format!(
            "next: `kubectl cordon {node}`, then {delete}; if the volume is iSCSI, find the session that dropped (check_iscsi_sessions, `iscsiadm -m session -P 3`); {under}"
        )
    } else {
        format!(
            "next: check the volume's access modes (`kubectl get pv {} -o jsonpath='{{.spec.accessModes}}'`): ReadOnlyMany is intent; otherwise `kubectl cordon {node}`, then {delete}; {under}",
            v.names.iter().next().map(|n| q(n)).unwrap_or_else(|| "<pv>".into())
        )
    }
}

/// What a volume's finding is about: PV, claim and pod as far as `names` knows them, the
/// device (block device or mount source) and the first mount point.
pub(crate) fn volume_subject(v: &Volume, names: &Names) -> plugin::Subject {
    let pv = v.names.iter().next().map(String::as_str).unwrap_or("");
    let device = match &v.block_dev {
        Some(d) if v.block_mode => d.as_str(),
        _ => v.source.as_str(),
    };
    names
        .subject(pv, v.pod_uids.iter().map(String::as_str))
        .device(device.strip_prefix("/dev/").unwrap_or(device))
        .maybe(
            plugin::Subject::mount,
            v.mounts.first().map(|(m, _)| m.to_string_lossy()),
        )
}
