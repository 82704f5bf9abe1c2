//! A node's CSINode (storage.k8s.io/v1 `csinodes/<node>`: the CSI drivers the kubelet has
//! registered there) and the pods on a node seen as CSI node-plugin pods (their containers'
//! names, images and args, their hostPath volumes, their status), for check_csi_node_plugins.

use crate::types::{ObjectMeta, PodStatus};
use crate::{Client, ListParams};
use plugin::Unknown;
use serde::{Deserialize, Deserializer};

/// null as the default (the API server writes `null` for some empty lists).
fn nd<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(d: D) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CsiNode {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: CsiNodeSpec,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct CsiNodeSpec {
    #[serde(deserialize_with = "nd")]
    pub drivers: Vec<CsiNodeDriver>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct CsiNodeDriver {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    #[serde(rename = "nodeID", deserialize_with = "nd")]
    pub node_id: String,
}

/// A pod as a node-plugin pod: what tells which driver it serves, and its health.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PluginPod {
    #[serde(deserialize_with = "nd")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "nd")]
    pub spec: PluginPodSpec,
    #[serde(deserialize_with = "nd")]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PluginPodSpec {
    pub node_name: Option<String>,
    #[serde(deserialize_with = "nd")]
    pub containers: Vec<PluginContainer>,
    #[serde(deserialize_with = "nd")]
    pub volumes: Vec<HostPathVolume>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PluginContainer {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    #[serde(deserialize_with = "nd")]
    pub image: String,
    #[serde(deserialize_with = "nd")]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct HostPathVolume {
    #[serde(deserialize_with = "nd")]
    pub name: String,
    pub host_path: Option<HostPath>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct HostPath {
    #[serde(deserialize_with = "nd")]
    pub path: String,
}

impl PluginPod {
    /// The hostPath directories the pod mounts.
    pub fn host_paths(&self) -> impl Iterator<Item = &str> {
        self.spec
            .volumes
            .iter()
            .filter_map(|v| v.host_path.as_ref().map(|h| h.path.as_str()))
    }

    /// The values of `--kubelet-registration-path` of its containers (node-driver-registrar's
    /// option: the driver's socket as the kubelet sees it).
    pub fn registration_paths(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for c in &self.spec.containers {
            let mut it = c.args.iter();
            while let Some(a) = it.next() {
                if let Some(v) = a.strip_prefix("--kubelet-registration-path=") {
                    out.push(v);
                } else if a == "--kubelet-registration-path" {
                    if let Some(v) = it.next() {
                        out.push(v.as_str());
                    }
                }
            }
        }
        out
    }
}

impl Client {
    /// The node's CSINode; `None` when it does not exist (404).
    pub fn get_csinode(&self, node: &str) -> Result<Option<CsiNode>, Unknown> {
        // A node name is a DNS subdomain: nothing of it may change the request's path.
        if node.is_empty()
            || !node
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            return Err(Unknown(format!("{node:?} is not a node name")));
        }
        let path = format!("/apis/storage.k8s.io/v1/csinodes/{node}");
        match self.send::<CsiNode>("GET", &path, &[], None) {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.status == Some(404) => Ok(None),
            Err(e) => Err(e.error),
        }
    }

    /// The pods bound to `node`, as [`PluginPod`]s.
    pub fn list_pods_on_node_as_plugins(
        &self,
        node: &str,
        f: impl FnMut(PluginPod),
    ) -> Result<usize, Unknown> {
        let params = ListParams {
            field_selector: Some(format!("spec.nodeName={node}")),
            ..Default::default()
        };
        self.list("/api/v1/pods", &params, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csinode_and_plugin_pod_parse() {
        let c: CsiNode = serde_json::from_str(
            r#"{"metadata":{"name":"n1"},"spec":{"drivers":[{"name":"hostpath.csi.k8s.io","nodeID":"n1","topologyKeys":null}]}}"#,
        )
        .unwrap();
        assert_eq!(c.spec.drivers[0].name, "hostpath.csi.k8s.io");
        let c: CsiNode =
            serde_json::from_str(r#"{"metadata":{"name":"n1"},"spec":{"drivers":null}}"#).unwrap();
        assert!(c.spec.drivers.is_empty());
        let p: PluginPod = serde_json::from_str(
            r#"{"metadata":{"name":"p","namespace":"kube-system"},
                "spec":{"nodeName":"n1","containers":[{"name":"node-driver-registrar","image":"x",
                  "args":["--v=5","--csi-address=/csi/csi.sock","--kubelet-registration-path=/var/lib/kubelet/plugins/h/csi.sock"]},
                  {"name":"b","args":["--kubelet-registration-path","/k/plugins/x/csi.sock"]}],
                  "volumes":[{"name":"socket-dir","hostPath":{"path":"/var/lib/kubelet/plugins/h","type":"DirectoryOrCreate"}},{"name":"c","configMap":{}}]},
                "status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            p.host_paths().collect::<Vec<_>>(),
            vec!["/var/lib/kubelet/plugins/h"]
        );
        assert_eq!(
            p.registration_paths(),
            vec![
                "/var/lib/kubelet/plugins/h/csi.sock",
                "/k/plugins/x/csi.sock"
            ]
        );
    }
}
