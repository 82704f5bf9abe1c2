//! The words of the findings: headlines, hints, who a mount is for, the summary's class names.

use crate::cluster::ClusterView;
use crate::identity::{is_pod_mount, Identity};
use crate::problem::Problem;
use crate::CsiMount;
use node::kubelet::Kind;

pub(crate) fn kind_word(k: &Kind) -> &'static str {
    match k {
        Kind::PodVolume { .. } => "pod mount",
        Kind::PodBlock { .. } => "pod block device",
        Kind::CsiStaging { .. } => "staging mount",
        Kind::BlockStaging { .. } => "block staging",
        _ => "mount",
    }
}

pub(crate) fn headline(p: &Problem, m: &CsiMount, id: &Identity, c: &ClusterView) -> String {
    let kw = kind_word(&m.kind);
    let mp = m.mount_point.display();
    let pv = id.pv.as_deref().unwrap_or("?");
    match p {
        Problem::Corrupted(why) => format!("corrupted {kw} {mp}: {why}"),
        Problem::Hung(why) => format!("hung {kw} {mp}: {why}"),
        Problem::NotProbed(why) => format!("{kw} {mp} not probed: {why}"),
        Problem::Orphaned => {
            let uid = id.pod_uid.as_deref().unwrap_or("?");
            match id.pod_uid.as_deref().and_then(|u| c.pod(u)) {
                Some(p) => format!(
                    "orphaned pod mount {mp}: pod {uid} ({}/{}) runs on node {}, not {}",
                    p.namespace,
                    p.name,
                    p.node.as_deref().unwrap_or("(none)"),
                    c.node
                ),
                None => format!(
                    "orphaned pod mount {mp}: pod {uid} is not a pod of node {}",
                    c.node
                ),
            }
        }
        Problem::PvGone if id.pv.is_none() => format!(
            "stale {kw} {mp}: no PV of driver {} has the volume handle of this directory any more",
            id.driver.as_deref().unwrap_or("?")
        ),
        Problem::PvGone => format!("stale {kw} {mp}: PV {pv} no longer exists"),
        Problem::NotAttached => format!(
            "stale {kw} {mp}: no VolumeAttachment of PV {pv} to node {}",
            c.node
        ),
        Problem::Unpublished => {
            format!("unpublished {kw} {mp}: no pod mount uses PV {pv} any more")
        }
    }
}

/// Short class names, in the order the summary lists them.
pub(crate) const CLASS_ORDER: &[&str] = &[
    "corrupted",
    "hung",
    "orphaned pod mount",
    "staging of deleted PV",
    "staging not attached here",
    "unpublished staging",
    "not probed",
];

pub(crate) fn short(p: &Problem) -> &'static str {
    let i = match p {
        Problem::Corrupted(_) => 0,
        Problem::Hung(_) => 1,
        Problem::Orphaned => 2,
        Problem::PvGone => 3,
        Problem::NotAttached => 4,
        Problem::Unpublished => 5,
        Problem::NotProbed(_) => 6,
    };
    CLASS_ORDER[i]
}

/// The next step for a mount (the `next:` line; the plugin adds the runbook): commands for the
/// node the mount is on, the kubelet restart as this node's distribution spells it.
pub(crate) fn hint(p: &Problem, m: &CsiMount, id: &Identity, c: &ClusterView) -> String {
    use plugin::next::{cmd, restart_csi_node_plugin, Distro};
    let driver = id.driver.as_deref().unwrap_or("its driver");
    let node = c.node.as_str();
    let path = m.mount_point.to_string_lossy();
    // The path as one shell word: a hostile path cannot break out of the command.
    let umount = cmd(&["sudo", "umount", &path]);
    let kubelet = format!(
        "restart the kubelet on {node}: {}",
        Distro::of_path(&path).restart_kubelet(node)
    );
    let plugin = match m.kind.in_tree_plugin() {
        // An in-tree network volume has no node plugin pod: its server or target is what died.
        Some(p) => format!(
            "check the server or target this in-tree {p} volume mounts from ({}) and the node's network path to it: {}",
            m.source,
            cmd(&["journalctl", "-k", "--grep", "not responding"])
        ),
        None => format!(
            "restart the CSI node plugin of {driver}: {}",
            restart_csi_node_plugin(driver, node)
        ),
    };
    let on = format!("on {node}: ");
    match p {
        Problem::Corrupted(_) | Problem::Hung(_) if is_pod_mount(&m.kind) => {
            let pod_alive = id.pod_uid.as_deref().and_then(|u| c.pod(u)).filter(|p| p.node.as_deref() == Some(c.node.as_str()));
            match pod_alive {
                Some(pod) => format!(
                    "{plugin}, then {} so the kubelet mounts the volume again; if the mount stays wedged, {on}{umount}",
                    cmd(&["kubectl", "delete", "pod", "-n", &pod.namespace, &pod.name])
                ),
                None => format!("{plugin}; if the mount stays wedged, {on}{umount}, then {kubelet}"),
            }
        }
        Problem::Corrupted(_) | Problem::Hung(_) => {
            format!("{plugin}; if pods still wait in ContainerCreating, {kubelet}")
        }
        Problem::NotProbed(_) => format!(
            "{on}run the check again with -vv to see every probe's answer: {}",
            cmd(&["check_stale_csi_mounts", "--node", node, "-vv"])
        ),
        Problem::Orphaned => format!("{on}{umount} (its pod is gone); then, so that its volume queue moves again, {kubelet}"),
        Problem::PvGone | Problem::NotAttached => format!(
            "{kubelet} (it retries the unmount); if the mount stays, {plugin}; last resort, {on}{umount}"
        ),
        Problem::Unpublished => format!(
            "the kubelet unstages unused volumes within minutes; if this stays, {kubelet}; then {plugin}"
        ),
    }
}

/// What a mount's finding is about: node, PV, claim, pod, driver, mount source and point.
pub(crate) fn mount_subject(
    m: &CsiMount,
    id: &Identity,
    c: &ClusterView,
    names: &kube::checks::names::Names,
) -> plugin::Subject {
    let mut s = names
        .subject(id.pv.as_deref().unwrap_or(""), id.pod_uid.as_deref())
        .node(c.node.as_str())
        .maybe(plugin::Subject::driver, id.driver.as_deref())
        .device(m.source.strip_prefix("/dev/").unwrap_or(&m.source))
        .mount(m.mount_point.to_string_lossy());
    if s.pod.is_none() {
        if let Some(p) = id.pod_uid.as_deref().and_then(|u| c.pod(u)) {
            if s.namespace.as_deref().is_none_or(|ns| ns == p.namespace) {
                s = s.namespace(p.namespace.as_str()).pod(p.name.as_str());
            }
        }
    }
    s
}

/// Who a mount is for, as an operator knows it (`media/radarr-0 (PVC media/radarr-config,
/// pvc-…)`), when the cross-checks named a pod or a claim.
pub(crate) fn named(id: &Identity, names: &kube::checks::names::Names) -> Option<String> {
    let pv = id.pv.as_deref()?;
    let label = names.volume(pv, id.pod_uid.as_deref());
    (label != pv).then_some(label)
}

pub(crate) fn identity_line(
    m: &CsiMount,
    id: &Identity,
    c: &ClusterView,
    names: &kube::checks::names::Names,
) -> String {
    let mut parts = Vec::new();
    match &id.pv {
        Some(pv) => {
            parts.push(format!("pv {pv} (from {})", id.pv_from));
            if let Some(claim) = names.claim(pv) {
                parts.push(format!("PVC {claim}"));
            }
        }
        None => parts.push("pv unknown".into()),
    }
    parts.push(format!(
        "driver {}",
        id.driver.as_deref().unwrap_or("unknown")
    ));
    if let Some(uid) = &id.pod_uid {
        match c.pod(uid) {
            Some(p) => parts.push(format!("pod {}/{} (uid {uid})", p.namespace, p.name)),
            None => parts.push(format!("pod uid {uid}")),
        }
    }
    parts.push(format!(
        "device {} ({}, {}:{})",
        m.source, m.fstype, m.major, m.minor
    ));
    parts.join(", ")
}

pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
