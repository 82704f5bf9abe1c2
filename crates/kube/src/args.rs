//! Command-line options shared by the checks that read the API; a check flattens the ones it
//! needs (`#[command(flatten)]`), so every check spells them the same way.

use std::path::PathBuf;

/// `--kubeconfig` and `--context`: which API server and credentials.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ApiArgs {
    /// Kubeconfig file (default: first of $KUBECONFIG [first existing file of the list], in-cluster
    /// service account, microk8s client.config, k3s k3s.yaml, kubeadm kubelet.conf/admin.conf,
    /// ~/.kube/config; a binary with file capabilities uses only this option, read as its
    /// caller, or the in-cluster service account). Its cluster's tls-server-name and proxy-url
    /// (an HTTP CONNECT proxy) are used; insecure-skip-tls-verify only with --allow-insecure-tls
    #[arg(long, value_name = "FILE", help_heading = "Kubernetes API")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use (default: its current-context)
    #[arg(long, value_name = "NAME", help_heading = "Kubernetes API")]
    pub context: Option<String>,

    /// Allow a plain http:// API server (refused otherwise); no token or client certificate is
    /// ever sent over plain http
    #[arg(long, help_heading = "Kubernetes API")]
    pub allow_insecure_http: bool,

    /// Honour `insecure-skip-tls-verify: true` in the kubeconfig, as kubectl does (refused
    /// otherwise: the server's certificate would not be checked, so the token or client
    /// certificate would go to whoever answers)
    #[arg(long, help_heading = "Kubernetes API")]
    pub allow_insecure_tls: bool,
}

/// `--node NAME`: the node a check is about. Without it the name is the host's, which only the
/// node layer can read (`node::Host::hostname`: in container mode $NODE_NAME or the host's
/// /etc/hostname, never the pod's): the check hands it in, so this API layer does no host I/O.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NodeArg {
    /// Node name as Kubernetes knows it (default: $NODE_NAME in container mode, else this host's name)
    #[arg(long, value_name = "NAME", help_heading = "Kubernetes API")]
    pub node: Option<String>,
}

impl NodeArg {
    /// True when no `--node` was given: the name is the host's, a guess that may be spelled
    /// differently from the node's.
    pub fn guessed(&self) -> bool {
        self.node.as_deref().is_none_or(|n| n.trim().is_empty())
    }

    /// `--node`, else the host's name from `host_name` (called only then; lower-case, as the
    /// kubelet registers it by default).
    pub fn name_or(
        &self,
        host_name: impl FnOnce() -> Option<String>,
    ) -> Result<String, plugin::Unknown> {
        self.name_or_host(host_name)
            .ok_or_else(|| plugin::Unknown("cannot tell this host's name: give --node NAME".into()))
    }

    /// `--node` (trimmed), else the host's name from `host_name` (called only then); `None`
    /// when neither is known.
    pub fn name_or_host(&self, host_name: impl FnOnce() -> Option<String>) -> Option<String> {
        match self.node.as_deref().map(str::trim) {
            Some(n) if !n.is_empty() => Some(n.to_string()),
            _ => host_name(),
        }
    }
}

/// `--pods-json FILE|-`: pods from `kubectl get pods -o json` instead of the API.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PodsJsonArg {
    /// Read pods from this file ('-' for stdin), the output of `kubectl get pods -A -o json`,
    /// instead of asking the API
    #[arg(long, value_name = "FILE|-", help_heading = "Kubernetes API")]
    pub pods_json: Option<PathBuf>,
}

impl PodsJsonArg {
    /// `--pods-json -`: the check reads stdin (return it from `Check::reads_stdin`).
    pub fn reads_stdin(&self) -> bool {
        self.pods_json.as_deref() == Some(std::path::Path::new("-"))
    }
}

/// `--pvs-json FILE|-`: PersistentVolumes from `kubectl get pv -o json` instead of the API.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PvsJsonArg {
    /// Read PersistentVolumes from this file ('-' for stdin), the output of `kubectl get pv -o json`,
    /// instead of asking the API
    #[arg(long, value_name = "FILE|-", help_heading = "Kubernetes API")]
    pub pvs_json: Option<PathBuf>,
}

impl PvsJsonArg {
    /// `--pvs-json -`: the check reads stdin (return it from `Check::reads_stdin`).
    pub fn reads_stdin(&self) -> bool {
        self.pvs_json.as_deref() == Some(std::path::Path::new("-"))
    }
}

/// The pods of a node-scoped pod check (the stuck-pod checks): `--node` (default: the host's name),
/// `--all-nodes`, `--namespace`, the API options and `--pods-json` (read by its `scan`, in
/// [`crate::checks::nodes`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PodScopeArgs {
    #[command(flatten)]
    pub node: NodeArg,

    /// Look at pods on every node instead of this one
    #[arg(long, conflicts_with = "node")]
    pub all_nodes: bool,

    /// Only pods in this namespace (repeatable; default: all namespaces)
    #[arg(long, value_name = "NS")]
    pub namespace: Vec<String>,

    #[command(flatten)]
    pub api: ApiArgs,

    #[command(flatten)]
    pub pods: PodsJsonArg,
}

/// `--namespace` values as an operator writes them, sorted and once each (`--namespace a`,
/// `--namespace b`): the part of a check's memory scope they make.
pub fn namespaces_as_written(namespaces: &[String]) -> Vec<String> {
    let mut ns: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    ns.sort_unstable();
    ns.dedup();
    ns.iter().map(|n| format!("--namespace {n}")).collect()
}

impl PodScopeArgs {
    /// The memory of the volumes of `check`'s run with this scope (`node::history::scoped` makes
    /// the file's id of the two): the base, `check` or `<check>_all_nodes` with `--all-nodes`
    /// (a node's run must not end the other nodes' spells), and the options that narrow the pods
    /// further, as an operator writes them (`--namespace a --namespace b`, sorted; empty for
    /// every namespace).
    pub fn memory_scope(&self, check: &str) -> (String, String) {
        let base = if self.all_nodes {
            format!("{check}_all_nodes")
        } else {
            check.to_string()
        };
        (base, namespaces_as_written(&self.namespace).join(" "))
    }

    /// The pods wanted: of the namespaces given, on this node (`--node`, else `host_name()`)
    /// unless `--all-nodes`.
    pub fn filter(
        &self,
        host_name: impl FnOnce() -> Option<String>,
    ) -> Result<crate::filter::PodFilter, plugin::Unknown> {
        Ok(crate::filter::PodFilter {
            namespaces: self.namespace.clone(),
            node: if self.all_nodes {
                None
            } else {
                Some(self.node.name_or(host_name)?)
            },
            labels: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::PodScopeArgs;

    /// The memory of the volumes: the node's run, the cluster-wide run and runs narrowed to
    /// namespaces each have their own scope; the order of `--namespace` does not matter.
    #[test]
    fn memory_scopes() {
        let scope = |all_nodes: bool, ns: &[&str]| PodScopeArgs {
            all_nodes,
            namespace: ns.iter().map(ToString::to_string).collect(),
            ..PodScopeArgs::default()
        };
        let of = |s: PodScopeArgs| s.memory_scope("stuck_x");
        assert_eq!(of(scope(false, &[])), ("stuck_x".into(), String::new()));
        assert_eq!(
            of(scope(true, &[])),
            ("stuck_x_all_nodes".into(), String::new())
        );
        assert_eq!(
            of(scope(false, &["b", "a", "b"])),
            ("stuck_x".into(), "--namespace a --namespace b".into())
        );
        assert_eq!(
            of(scope(true, &["a"])),
            ("stuck_x_all_nodes".into(), "--namespace a".into())
        );
    }
}
