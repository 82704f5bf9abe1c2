//! A node-scoped check that saw no pod on its node must not answer OK on that alone: the name may
//! not be a node at all (the default is the host name, which differs from the Kubernetes node name
//! in case or FQDN on many clusters). Here the check proves the node is real, or learns the name
//! the host is known by, or answers UNKNOWN naming what it looked for and the nodes it saw.

use crate::args::{ApiArgs, PodScopeArgs};
use crate::client::{ApiError, Client, ListParams};
use crate::connect::connect;
use crate::filter::PodFilter;
use crate::json::read_json_list;
use crate::types::{ObjectMeta, Pod};
use plugin::Unknown;
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::Path;

/// At most this many node names of a `--pods-json` file are remembered (for [`confirm_node`]).
pub const NODES_SEEN_MAX: usize = 10_000;

/// What a scan of pods saw besides the pods it kept.
#[derive(Default)]
pub struct Scan {
    /// The API client, when the pods came from the API.
    pub client: Option<Client>,
    /// Pods the filter kept.
    pub kept: usize,
    /// From `--pods-json`: the node names of all its pods, whatever the filter.
    pub nodes_seen: BTreeSet<String>,
}

/// The pods a check looks at, from `--pods-json` when given, else from the API (the client kept
/// for event lookups): each one that passes `filter` goes to `f`; a `--pods-json` file's node
/// names are remembered (for [`confirm_node`]).
pub fn scan_pods(
    pods_json: Option<&Path>,
    api: &ApiArgs,
    filter: &PodFilter,
    ctx: &plugin::Ctx,
    mut f: impl FnMut(Pod),
) -> Result<Scan, Unknown> {
    let mut scan = Scan::default();
    match pods_json {
        Some(path) => {
            ctx.stage(format!("reading {}", path.display()));
            read_json_list(path, "--pods-json", |p: Pod| {
                if let Some(n) = p.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
                    // Bounded: only names to compare with and to show (a file of 10^6 pods on
                    // 10^6 nodes must not keep them all).
                    if scan.nodes_seen.len() < NODES_SEEN_MAX && !scan.nodes_seen.contains(n) {
                        scan.nodes_seen.insert(n.to_string());
                    }
                }
                if filter.matches(&p) {
                    scan.kept += 1;
                    f(p)
                }
            })?;
            ctx.debug(format!("pods from {}", path.display()));
        }
        None => {
            let mut count = |p: Pod| {
                scan.kept += 1;
                f(p)
            };
            let client = connect(api, ctx)?;
            ctx.stage(format!(
                "listing pods {} from {}",
                filter.describe(),
                client.server()
            ));
            client.list_pods(filter, &mut count)?;
            scan.client = Some(client);
        }
    }
    Ok(scan)
}

/// How a node name that no kept pod carries turned out.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeCheck {
    /// The node exists (the API has the Node object, or `--pods-json` has pods on it): no pod
    /// there is the truth.
    Exists,
    /// The name came from the host name and is not a node, but exactly one node is this host
    /// under another spelling (case, short name vs FQDN): use that one.
    KnownAs(String),
}

/// The forms a host name and a node name are compared in: lower case, and the first label.
fn same_host(a: &str, b: &str) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or(s).to_ascii_lowercase();
    a.eq_ignore_ascii_case(b) || short(a) == short(b)
}

fn shown(nodes: &BTreeSet<String>) -> String {
    const SHOWN: usize = 8;
    if nodes.is_empty() {
        return "none".into();
    }
    let mut s: Vec<&str> = nodes.iter().take(SHOWN).map(String::as_str).collect();
    let more = nodes.len().saturating_sub(SHOWN);
    let tail = if more > 0 {
        format!(", +{more} more")
    } else {
        String::new()
    };
    s.sort_unstable();
    format!("{}{tail}", s.join(", "))
}

/// Decide about a node name from the nodes known to exist (pure). `guessed`: the name came from
/// the host name, not `--node`.
pub fn judge(
    node: &str,
    guessed: bool,
    exists: bool,
    nodes: &BTreeSet<String>,
    source: &str,
) -> Result<NodeCheck, Unknown> {
    if exists || nodes.contains(node) {
        return Ok(NodeCheck::Exists);
    }
    let like: Vec<&String> = nodes.iter().filter(|n| same_host(n, node)).collect();
    if guessed && like.len() == 1 {
        return Ok(NodeCheck::KnownAs(like[0].clone()));
    }
    let whose = if guessed {
        " (this host's name; the node name differs: give --node NAME)"
    } else {
        ""
    };
    let hint = match like.as_slice() {
        [] => String::new(),
        l => format!(
            "; this host may be {}",
            l.iter()
                .map(|n| format!("--node {n}"))
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    Err(Unknown(format!(
        "no node '{node}' {source}{whose}{hint} (nodes seen: {})",
        shown(nodes)
    )))
}

#[derive(Deserialize)]
struct NodeMeta {
    metadata: ObjectMeta,
}

/// A node-scoped check kept no pod on `node`: prove the node exists. From the API, GET the Node
/// object (404: list the nodes to find this host under another spelling, and name them); from
/// `--pods-json`, the file must show a pod on that node. Needs RBAC get/list on nodes.
pub fn confirm_node(scan: &Scan, node: &str, guessed: bool) -> Result<NodeCheck, Unknown> {
    let Some(client) = &scan.client else {
        return judge(node, guessed, false, &scan.nodes_seen, "in --pods-json");
    };
    // A node name is a DNS subdomain: anything else cannot be one (and is not sent in a path).
    let valid = !node.is_empty()
        && node
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let got = if valid {
        client.send::<serde_json::Value>("GET", &format!("/api/v1/nodes/{node}"), &[], None)
    } else {
        Err(ApiError {
            status: Some(404),
            message: String::new(),
            error: Unknown(String::new()),
        })
    };
    match got {
        Ok(v) => node_object(&v, node).map(|()| NodeCheck::Exists),
        Err(e) if e.status == Some(404) => {
            let mut nodes = BTreeSet::new();
            client.list_of::<NodeMeta, _>(
                "/api/v1/nodes",
                &ListParams::default(),
                Some("NodeList"),
                |n| {
                    nodes.insert(n.metadata.name);
                },
            )?;
            judge(node, guessed, false, &nodes, "in the API")
        }
        Err(e) => Err(Unknown(format!(
            "no pod on node '{node}', and whether that node exists cannot be told: {}",
            e.error
        ))),
    }
}

/// The answer to `GET /api/v1/nodes/NAME` proves the node only when it is that Node: kind
/// `Node` and `metadata.name` NAME. Any other 2xx JSON (a responder that answers every path with
/// the same list, a proxy's page) is UNKNOWN, never taken for the node.
pub fn node_object(v: &serde_json::Value, node: &str) -> Result<(), Unknown> {
    let kind = v.get("kind").and_then(|k| k.as_str()).unwrap_or("");
    let name = v
        .pointer("/metadata/name")
        .and_then(|k| k.as_str())
        .unwrap_or("");
    if kind == "Node" && name == node {
        return Ok(());
    }
    let got = match (kind, name) {
        ("", "") => "an object with neither kind nor name".to_string(),
        ("", n) => format!(
            "an object without kind named '{}'",
            plugin::render::truncate(n, 80)
        ),
        (k, "") => format!("kind {}", plugin::render::truncate(k, 80)),
        (k, n) => format!(
            "{} '{}'",
            plugin::render::truncate(k, 80),
            plugin::render::truncate(n, 80)
        ),
    };
    Err(Unknown(format!(
        "no pod on node '{node}', and the API server answered GET /api/v1/nodes/{node} with {got} \
         instead of the Node '{node}': whether that node exists cannot be told (is this a \
         Kubernetes API server, or a proxy answering in its place? check the server URL in the \
         kubeconfig)"
    )))
}

/// What [`scan_node_pods`] found: the client (pods from the API), the filter finally used (the
/// node name may have been corrected), and a note when it was.
pub struct NodeScan {
    pub client: Option<Client>,
    pub filter: PodFilter,
    pub note: Option<String>,
}

/// Pods of one node (`filter.node`; all nodes when `None`), never an empty success on a name that
/// is no node: with no pod kept, [`confirm_node`] proves the node exists; a host name that is the
/// node under another spelling is used under that one (and said in a note); anything else is
/// UNKNOWN naming the nodes seen. `guessed`: the name came from the host name, not `--node`.
pub fn scan_node_pods(
    pods_json: Option<&Path>,
    api: &ApiArgs,
    filter: PodFilter,
    guessed: bool,
    ctx: &plugin::Ctx,
    mut f: impl FnMut(Pod),
) -> Result<NodeScan, Unknown> {
    let scan = scan_pods(pods_json, api, &filter, ctx, &mut f)?;
    let Some(node) = filter.node.clone().filter(|_| scan.kept == 0) else {
        return Ok(NodeScan {
            client: scan.client,
            filter,
            note: None,
        });
    };
    ctx.stage(format!("no pod on node {node}: looking the node up"));
    match confirm_node(&scan, &node, guessed)? {
        NodeCheck::Exists => Ok(NodeScan {
            client: scan.client,
            filter,
            note: None,
        }),
        NodeCheck::KnownAs(real) => {
            if pods_json == Some(Path::new("-")) {
                return Err(Unknown(format!(
                    "no pod on node '{node}' (this host's name) in --pods-json -; the file has node '{real}': give --node {real}"
                )));
            }
            let filter = PodFilter {
                node: Some(real.clone()),
                ..filter
            };
            let scan = scan_pods(pods_json, api, &filter, ctx, &mut f)?;
            Ok(NodeScan {
                client: scan.client,
                filter,
                note: Some(format!(
                    "this host's name '{node}' is no node; node '{real}' is this host (give --node {real} to say so)"
                )),
            })
        }
    }
}

impl PodScopeArgs {
    /// Read the pods (`--pods-json` or the API), each kept one to `f`, never an empty success on
    /// a node name that is no node ([`scan_node_pods`]).
    pub fn scan(
        &self,
        host_name: impl FnOnce() -> Option<String>,
        ctx: &plugin::Ctx,
        f: impl FnMut(Pod),
    ) -> Result<NodeScan, plugin::Unknown> {
        let filter = self.filter(host_name)?;
        scan_node_pods(
            self.pods.pods_json.as_deref(),
            &self.api,
            filter,
            !self.all_nodes && self.node.guessed(),
            ctx,
            f,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[&str]) -> BTreeSet<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_node_that_exists_is_fine_and_a_host_name_finds_its_node() {
        let nodes = set(&["worker-03", "worker-04"]);
        assert_eq!(
            judge("worker-04", false, false, &nodes, "x"),
            Ok(NodeCheck::Exists)
        );
        assert_eq!(
            judge("nope", false, true, &nodes, "x"),
            Ok(NodeCheck::Exists)
        );
        assert_eq!(
            judge("worker-04.example.com", true, false, &nodes, "x"),
            Ok(NodeCheck::KnownAs("worker-04".into()))
        );
        let nodes = set(&["Worker-04.Example.COM"]);
        assert_eq!(
            judge("worker-04", true, false, &nodes, "x"),
            Ok(NodeCheck::KnownAs("Worker-04.Example.COM".into()))
        );
    }

    #[test]
    fn finding_6_node_confirmation_checks_kind_and_name() {
        let node = |v: &str| serde_json::from_str::<serde_json::Value>(v).unwrap();
        assert!(node_object(
            &node(r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"w1"}}"#),
            "w1"
        )
        .is_ok());
        for (v, want) in [
            (
                r#"{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}"#,
                "with kind PodList instead of the Node 'w1'",
            ),
            (
                r#"{"kind":"Node","metadata":{"name":"w2"}}"#,
                "with Node 'w2' instead",
            ),
            (r#"{}"#, "neither kind nor name"),
            (r#"[]"#, "neither kind nor name"),
        ] {
            let e = node_object(&node(v), "w1").unwrap_err();
            assert!(e.0.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn a_name_no_node_has_is_unknown_naming_the_nodes_seen() {
        let nodes = set(&["worker-03", "worker-04"]);
        let e = judge("worker-9", false, false, &nodes, "in the API").unwrap_err();
        assert_eq!(
            e.0,
            "no node 'worker-9' in the API (nodes seen: worker-03, worker-04)"
        );
        // Given explicitly, a near name is a hint, never a silent switch.
        let e = judge("WORKER-04.lan", false, false, &nodes, "in --pods-json").unwrap_err();
        assert!(e.0.contains("this host may be --node worker-04"), "{e}");
        let e = judge("host", true, false, &BTreeSet::new(), "in --pods-json").unwrap_err();
        assert!(e.0.contains("this host's name"), "{e}");
        assert!(e.0.ends_with("(nodes seen: none)"), "{e}");
    }
}
