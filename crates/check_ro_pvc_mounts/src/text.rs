//! The words of a finding: how a volume is named, what it is about, and the next step.

use crate::gather::Volume;
use kube::checks::names::Names;
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

/// The node to act on for a volume: the node its pods run on as the API says (`spec.nodeName`),
/// else this node's name (`--node`, else $NODE_NAME in container mode, else the host's name).
pub(crate) fn target_node(v: &Volume, names: &Names, node: Option<&str>) -> Option<String> {
    let mut nodes: Vec<&str> = v
        .pod_uids
        .iter()
        .filter_map(|u| names.pods.get(u))
        .filter_map(|p| p.node.as_deref())
        .filter(|n| !n.is_empty())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    match nodes.as_slice() {
        [one] => Some(one.to_string()),
        _ => node.map(str::to_string),
    }
}

/// The next step for a non-OK volume, paste-safe: cordon the node so nothing new lands on it,
/// delete the pods so they remount elsewhere, find what broke under the filesystem, and
/// uncordon once the node's storage works again.
pub(crate) fn next_step(
    v: &Volume,
    status: Status,
    still_writable: bool,
    names: &Names,
    node: Option<&str>,
) -> String {
    use plugin::next::{cmd, cordon, sh, uncordon};
    let node = target_node(v, names, node);
    let n = node.as_deref().unwrap_or("NODE");
    let pods: Vec<String> = v
        .pod_uids
        .iter()
        .filter_map(|u| names.pod(u))
        .map(|p| match p.split_once('/') {
            Some((ns, name)) => cmd(&["kubectl", "delete", "pod", "-n", ns, name]),
            None => cmd(&["kubectl", "delete", "pod", &p]),
        })
        .collect();
    let delete = if pods.is_empty() {
        let field = format!("spec.nodeName={n}");
        format!(
            "delete the pods using it so they remount elsewhere (pod UIDs {}; names: {})",
            if v.pod_uids.is_empty() {
                "unknown".to_string()
            } else {
                v.pod_uids.iter().cloned().collect::<Vec<_>>().join(", ")
            },
            cmd(&[
                "kubectl",
                "get",
                "pods",
                "-A",
                "--field-selector",
                &field,
                "-o",
                "custom-columns=NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid",
            ])
        )
    } else {
        format!("{} so it remounts elsewhere", pods.join(", then "))
    };
    let kernel = sh("sudo dmesg -T --level=emerg,alert,crit,err");
    let under = format!(
        "find what broke under the filesystem: {kernel} (check_storage_kernel_errors), and if the volume is iSCSI {} (check_iscsi_sessions)",
        sh("sudo iscsiadm -m session -P 3")
    );
    let on = node
        .as_deref()
        .map(|n| format!("on {n}: "))
        .unwrap_or_default();
    if still_writable {
        // Errors recorded, the filesystem still writes: find the cause before it turns read-only.
        format!(
            "{under}; if errors keep coming, move its pods before the kernel stops writes: {on}{}, then {delete}; once its storage works again: {}",
            cordon(n),
            uncordon(n)
        )
    } else if status == Status::Critical {
        format!(
            "{on}{} first, then {delete}; {under}; once its storage works again: {}",
            cordon(n),
            uncordon(n)
        )
    } else {
        let pv = v.names.iter().next().map(String::as_str).unwrap_or("PV");
        format!(
            "check the volume's access modes ({}): ReadOnlyMany is intent; otherwise {on}{}, then {delete}; {under}; once its storage works again: {}",
            cmd(&["kubectl", "get", "pv", pv, "-o", "jsonpath={.spec.accessModes}"]),
            cordon(n),
            uncordon(n)
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
