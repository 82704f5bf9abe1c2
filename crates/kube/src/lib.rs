//! A small blocking Kubernetes API client for the checks.
//!
//! The root is the client: what a check needs to read the API or the same objects from files.
//! - [`config`](mod@config): where the credentials come from (`--kubeconfig`, `$KUBECONFIG`, in-cluster, the
//!   node's microk8s/k3s/kubeadm files, `~/.kube/config`) and what they say; [`connect()`] builds
//!   a [`Client`] from them, bound to the check's deadline;
//! - [`Client`]: GET, paginated streamed lists and [`Client::send`] (PATCH/POST with a body), each request bounded by the check's deadline,
//!   failures as [`plugin::Unknown`] with the HTTP status and a hint (401, 403 with the RBAC rule, …);
//!   [`resources`]: the lists by resource (`list_pods` through a [`PodFilter`], `list_pvs`, …);
//! - [`types`]: compact typed subsets of Pod, PersistentVolume, VolumeAttachment, Event;
//! - [`args`]: the shared options (`--kubeconfig`, `--context`, `--node`, `--pods-json`, `--pvs-json`);
//! - [`json`]: [`load_pods_json`]/[`load_pvs_json`], the same objects from `kubectl get … -o json`
//!   files; [`read_objects`] for documents that mix kinds (`kubectl get pv,volumeattachments -o json`);
//! - [`time`]: API timestamps (on `plugin::time`, the suite's one calendar).
//!
//! [`checks`] holds what the checks share on top of the client (it builds their findings):
//! [`checks::names`] (pod UIDs and PV names → `namespace/pod`, `namespace/pvc`),
//! [`checks::nodes`] (a node-scoped scan that proves its node exists), [`checks::events`] (the
//! latest telling event of a pod) and [`checks::stuck`] (the stuck-pod checks' scan, age policy
//! and ranking).
//!
//! Typical use in a check's `gather`:
//! ```ignore
//! let filter = kube::PodFilter { node: Some(self.node.name()?), ..Default::default() };
//! let mut pods = Vec::new();
//! match &self.pods.pods_json {
//!     Some(p) => kube::load_pods_json(p, &filter, |pod| pods.push(pod))?,
//!     None => kube::connect(&self.api, ctx)?.list_pods(&filter, |pod| pods.push(pod))?,
//! };
//! ```
#![forbid(unsafe_code)]

pub mod args;
pub mod checks;
pub mod client;
pub mod config;
pub mod connect;
pub mod csinode;
pub mod filter;
pub mod json;
pub mod list;
pub mod objects;
pub mod resources;
pub mod selector;
pub mod time;
pub mod types;

pub use args::{ApiArgs, NodeArg, PodScopeArgs, PodsJsonArg, PvsJsonArg};
pub use client::{ApiError, Client, ListParams, Resource};
pub use config::{Auth, Config, Lookup, Source};
pub use connect::{config, connect, connect_until};
pub use filter::PodFilter;
pub use json::{load_pods_json, load_pvs_json, read_json_list};
pub use objects::{read_objects, Object, Objects};
pub use resources::attachment_name;
pub use selector::Selector;
pub use time::Time;
pub use types::{CsiDriver, Event, Node, PersistentVolume, Pod, VolumeAttachment};
