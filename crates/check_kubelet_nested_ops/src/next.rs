//! The next step of a failing volume operation (issue 26), from what the finding carries: the
//! kubelet's error (its node, the mounts it names), the PV and driver. Commands for the node the
//! kubelet runs on (the node its error names, else this host's name), the kubelet restart as
//! that node's distribution spells it (told from the paths in the error).

use plugin::next::{cmd, restart_csi_node_plugin, Distro};
use plugin::Finding;

/// `on node "worker-04"` in a kubelet error.
fn node_in(error: &str) -> Option<&str> {
    let rest = &error[error.find("on node \"")? + 9..];
    let n = &rest[..rest.find('"')?];
    (!n.is_empty()).then_some(n)
}

/// The mounts a GetDeviceMountRefs error lists: `… by other references [/a /b]`.
fn refs_in(error: &str) -> Vec<&str> {
    let Some(i) = error.find("other references [") else {
        return Vec::new();
    };
    let rest = &error[i + 18..];
    let Some(end) = rest.find(']') else {
        return Vec::new();
    };
    rest[..end].split_whitespace().collect()
}

/// The step for a non-OK finding; `host` is this host's name.
pub(crate) fn step(f: &Finding, host: Option<&str>) -> String {
    let error = f
        .details
        .iter()
        .find_map(|d| d.strip_prefix("error: "))
        .unwrap_or("");
    let node = node_in(error).or(host);
    let n = node.unwrap_or("NODE");
    let on = node.map(|n| format!("on {n}: ")).unwrap_or_default();
    let kubelet = Distro::of_path(error).restart_kubelet(n);
    let pv = f.subject.pv.as_deref();
    let mut s = match pv {
        Some(pv) => format!(
            "{on}see what still mounts the volume: {}",
            cmd(&["grep", "-F", pv, node::host::MOUNTINFO])
        ),
        None => format!(
            "{on}see the kubelet's volume errors: {}",
            plugin::next::kubelet_journal("NestedPendingOperations")
        ),
    };
    let refs = refs_in(error);
    if !refs.is_empty() {
        let umounts: Vec<String> = refs.iter().map(|r| cmd(&["sudo", "umount", r])).collect();
        s.push_str(&format!(
            "; unmount the references of gone pods (check_stale_csi_mounts names them): {}",
            umounts.join(", ")
        ));
    } else if let Some(d) = f.subject.driver.as_deref() {
        s.push_str(&format!(
            "; restart the CSI node plugin of {d}: {}",
            restart_csi_node_plugin(d, n)
        ));
    }
    s.push_str(&format!(
        "; then restart the kubelet so its volume queue moves again: {kubelet}"
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_and_references_from_the_error() {
        let e = r#"GetDeviceMountRefs check failed for volume "pvc-1" (UniqueName: "kubernetes.io/csi/driver.longhorn.io^pvc-1") on node "worker-04" : the device mount path "/var/lib/kubelet/plugins/x/globalmount" is still mounted by other references [/var/lib/kubelet/pods/3f1c/volumes/kubernetes.io~csi/pvc-1/mount]"#;
        assert_eq!(node_in(e), Some("worker-04"));
        assert_eq!(
            refs_in(e),
            ["/var/lib/kubelet/pods/3f1c/volumes/kubernetes.io~csi/pvc-1/mount"]
        );
        let f = Finding::new(plugin::Status::Critical, "x")
            .subject(plugin::Subject::new().pv("pvc-1"))
            .detail(format!("error: {e}"));
        let s = step(&f, Some("vm"));
        assert!(s.starts_with("on worker-04: see what still mounts the volume: `grep -F pvc-1 /proc/self/mountinfo`"), "{s}");
        assert!(
            s.contains(
                "`sudo umount /var/lib/kubelet/pods/3f1c/volumes/kubernetes.io~csi/pvc-1/mount`"
            ),
            "{s}"
        );
        assert!(
            s.contains("`talosctl -n worker-04 service kubelet restart`"),
            "{s}"
        );
        assert!(!s.contains("vm"), "{s}");
    }
}
