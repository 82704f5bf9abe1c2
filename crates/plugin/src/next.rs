//! The next step of a finding, as the operator pastes it: commands written between backticks,
//! each word quoted for a POSIX shell, never a `|` (the plugin protocol forbids it in text: a
//! command that needs one is written another way — `journalctl -k --grep`, `grep` reading a
//! file), never a look-alike character. A finding's `next:` line ends with its runbook
//! (`docs/runbooks/<signal>.md`), see [`crate::Finding::next`].
//!
//! Per-distribution commands (restarting the kubelet, the CSI node plugin) come from
//! [`Distro`], told from the kubelet root a path lies under: the one place that knows how
//! microk8s, k3s, k0s, kubeadm and Talos spell them.

use crate::shell_quote;
use std::fmt::Write as _;

/// A command from its words, each quoted for a shell, between backticks: `` `kubectl cordon k8s02` ``.
pub fn cmd<S: AsRef<str>>(words: &[S]) -> String {
    let mut out = String::from("`");
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&shell_quote(w.as_ref()));
    }
    out.push('`');
    out
}

/// A command written out by hand (its quoting already done, e.g. a quoted regex), between
/// backticks. It must be pasteable as it is: no `|`, no backtick, no control character.
pub fn sh(line: &str) -> String {
    debug_assert!(is_pasteable(line), "not pasteable as printed: {line:?}");
    format!("`{line}`")
}

/// True when `line` can be printed as it is in every output format: no `|` (the Nagios text
/// protocol turns it into `¦`), no backtick (it delimits commands in a `next:` line), no control
/// character.
pub fn is_pasteable(line: &str) -> bool {
    !line.is_empty() && !line.chars().any(|c| c == '|' || c == '`' || c.is_control())
}

/// The commands of a `next:` line: the text between each pair of backticks.
pub fn commands(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The kubelet's journal of the last hour, filtered: `sudo journalctl -u kubelet --since -1h
/// --grep PATTERN` (the next step of every check that sends the operator to the kubelet's log).
pub fn kubelet_journal(pattern: &str) -> String {
    cmd(&[
        "sudo",
        "journalctl",
        "-u",
        "kubelet",
        "--since",
        "-1h",
        "--grep",
        pattern,
    ])
}

/// `kubectl cordon NODE`, the step before moving pods off a node with broken storage, with the
/// `kubectl uncordon NODE` that ends it once the node is repaired.
pub fn cordon(node: &str) -> String {
    cmd(&["kubectl", "cordon", node])
}

/// `kubectl uncordon NODE`.
pub fn uncordon(node: &str) -> String {
    cmd(&["kubectl", "uncordon", node])
}

/// The Kubernetes distribution a node runs, as far as its kubelet root tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distro {
    /// /var/snap/microk8s/common/var/lib/kubelet
    Microk8s,
    /// /var/lib/rancher/k3s/agent/kubelet
    K3s,
    /// /var/lib/k0s/kubelet
    K0s,
    /// /var/lib/kubelet: kubeadm, Talos, and k3s and RKE2 by default; which one the path does
    /// not say.
    Standard,
}

impl Distro {
    /// The distribution of the kubelet root a path lies under (a mount point, a kubelet root),
    /// wherever the host's root is (`/host/var/snap/microk8s/…` in container mode).
    pub fn of_path(path: &str) -> Distro {
        if path.contains("/var/snap/microk8s/") || path.ends_with("/var/snap/microk8s") {
            Distro::Microk8s
        } else if path.contains("/var/lib/rancher/k3s/") {
            Distro::K3s
        } else if path.contains("/var/lib/k0s/") {
            Distro::K0s
        } else {
            Distro::Standard
        }
    }

    /// How to restart the kubelet on `node`: the distribution's command, or for a
    /// /var/lib/kubelet node the kubeadm command, then k3s's, RKE2's and Talos's (k3s and RKE2
    /// run the kubelet inside their own service and keep /var/lib/kubelet by default).
    pub fn restart_kubelet(self, node: &str) -> String {
        match self {
            Distro::Microk8s => {
                format!(
                    "{} (microk8s runs the kubelet in kubelite)",
                    cmd(&["sudo", "snap", "restart", "microk8s.daemon-kubelite"])
                )
            }
            Distro::K3s => format!(
                "{} (on a k3s server: {})",
                cmd(&["sudo", "systemctl", "restart", "k3s-agent"]),
                cmd(&["sudo", "systemctl", "restart", "k3s"])
            ),
            Distro::K0s => format!(
                "{} (on a controller that runs workloads: {})",
                cmd(&["sudo", "systemctl", "restart", "k0sworker"]),
                cmd(&["sudo", "systemctl", "restart", "k0scontroller"])
            ),
            Distro::Standard => format!(
                "{} (k3s: {}, on a server {}; RKE2: {}, on a server {}; Talos: {})",
                cmd(&["sudo", "systemctl", "restart", "kubelet"]),
                cmd(&["sudo", "systemctl", "restart", "k3s-agent"]),
                cmd(&["sudo", "systemctl", "restart", "k3s"]),
                cmd(&["sudo", "systemctl", "restart", "rke2-agent"]),
                cmd(&["sudo", "systemctl", "restart", "rke2-server"]),
                cmd(&["talosctl", "-n", node, "service", "kubelet", "restart"])
            ),
        }
    }
}

/// How to restart the CSI node plugin of `driver` on `node`: delete its pod there (its
/// DaemonSet makes a new one). Longhorn's pods are known by label; for another driver, the
/// command that lists the node's pods to find it.
pub fn restart_csi_node_plugin(driver: &str, node: &str) -> String {
    let field = format!("spec.nodeName={node}");
    match driver {
        "driver.longhorn.io" => cmd(&[
            "kubectl",
            "-n",
            "longhorn-system",
            "delete",
            "pod",
            "-l",
            "app=longhorn-csi-plugin",
            "--field-selector",
            &field,
        ]),
        _ => {
            let mut s = String::new();
            let _ = write!(
                s,
                "find the {driver} node plugin pod with {} and delete it ({} — its DaemonSet makes a new one)",
                cmd(&["kubectl", "get", "pods", "-A", "-o", "wide", "--field-selector", &field]),
                sh("kubectl delete pod -n NAMESPACE POD")
            );
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_quoted_and_found_again() {
        let c = cmd(&["kubectl", "delete", "pod", "-n", "media", "radarr 0"]);
        assert_eq!(c, "`kubectl delete pod -n media 'radarr 0'`");
        let line = format!("on k8s02: {}, then {c}", cordon("k8s02"));
        assert_eq!(
            commands(&line),
            [
                "kubectl cordon k8s02",
                "kubectl delete pod -n media 'radarr 0'"
            ]
        );
        assert!(!is_pasteable("journalctl -k --grep 'EXT4-fs|JBD2'"));
        assert!(!is_pasteable("echo `id`"));
        assert!(is_pasteable("grep -E 'EXT4-fs' /var/log/kern.log"));
    }

    #[test]
    fn a_word_with_a_pipe_or_backtick_is_still_one_pasteable_word() {
        for w in ["a|b", "a`b", "|", "x'|'y"] {
            let c = cmd(&["printf", "%s", w]);
            let inner = commands(&c);
            assert_eq!(inner.len(), 1, "{c}");
            assert!(is_pasteable(inner[0]), "{c}");
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(inner[0])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), w, "{c}");
        }
    }

    #[test]
    fn distributions_from_the_kubelet_root() {
        assert_eq!(
            Distro::of_path("/var/snap/microk8s/common/var/lib/kubelet/pods/x"),
            Distro::Microk8s
        );
        assert_eq!(
            Distro::of_path("/host/var/lib/rancher/k3s/agent/kubelet/pods"),
            Distro::K3s
        );
        assert_eq!(Distro::of_path("/var/lib/k0s/kubelet/pods"), Distro::K0s);
        assert_eq!(Distro::of_path("/var/lib/kubelet/pods"), Distro::Standard);
        for d in [Distro::Microk8s, Distro::K3s, Distro::K0s, Distro::Standard] {
            let s = d.restart_kubelet("k8s02");
            assert!(!commands(&s).is_empty(), "{s}");
            for c in commands(&s) {
                assert!(is_pasteable(c), "{c}");
            }
        }
        assert!(Distro::Standard
            .restart_kubelet("k8s02")
            .contains("`talosctl -n k8s02 service kubelet restart`"));
        assert!(restart_csi_node_plugin("driver.longhorn.io", "w4")
            .contains("--field-selector spec.nodeName=w4`"));
    }
}
