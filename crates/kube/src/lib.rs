//! A small blocking Kubernetes API client for the checks.
//!
//! - [`config`]: where the credentials come from (`--kubeconfig`, `$KUBECONFIG`, in-cluster, the
//!   node's microk8s/k3s/kubeadm files, `~/.kube/config`) and what they say;
//! - [`Client`]: GET, paginated streamed lists and [`Client::send`] (PATCH/POST with a body), each request bounded by the check's deadline,
//!   failures as [`plugin::Unknown`] with the HTTP status and a hint (401, 403 with the RBAC rule, …);
//! - [`types`]: compact typed subsets of Pod, PersistentVolume, VolumeAttachment, Event;
//! - [`args`]: the shared options (`--kubeconfig`, `--context`, `--node`, `--pods-json`, `--pvs-json`);
//! - [`load_pods_json`]/[`load_pvs_json`]: the same objects from `kubectl get … -o json` files;
//!   [`read_objects`] for documents that mix kinds (`kubectl get pv,volumeattachments -o json`);
//! - [`names`]: pod UIDs and PV names → `namespace/pod` and `namespace/pvc` for the node checks;
//! - [`events`]: the latest telling event of each pod a check alerts on;
//! - [`stuck`]: what the stuck-pod checks share (the pod scan, the age policy, the ranking);
//! - [`time`]: API timestamps (on `plugin::time`, the suite's one calendar).
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
pub mod client;
pub mod config;
pub mod csinode;
pub mod events;
pub mod list;
pub mod names;
pub mod nodes;
pub mod objects;
pub mod selector;
pub mod stuck;
pub mod time;
pub mod types;

pub use args::{ApiArgs, NodeArg, PodScopeArgs, PodsJsonArg, PvsJsonArg};
pub use client::{ApiError, Client, ListParams, Resource};
pub use config::{Auth, Config, Lookup, Source};
pub use names::{Names, NamesArgs, Wanted};
pub use objects::{read_objects, Object, Objects};
pub use selector::Selector;
pub use time::Time;
pub use types::{CsiDriver, Event, Node, PersistentVolume, Pod, VolumeAttachment};

use plugin::{Ctx, Unknown};
use serde::de::DeserializeOwned;
use std::io::BufReader;
use std::path::Path;

/// The name of the VolumeAttachment of a CSI volume on a node, as the kubelet and the
/// attach/detach controller compute it (kubernetes pkg/volume/csi/csi_attacher.go,
/// `getAttachmentName`): `csi-` + hex(sha256(volumeHandle + driverName + nodeName)).
pub fn attachment_name(volume_handle: &str, driver: &str, node: &str) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(volume_handle.as_bytes());
    h.update(driver.as_bytes());
    h.update(node.as_bytes());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// Find the configuration as the options and environment say, build a client bound to the
/// check's deadline, and tell `-vv` which source was used (never a secret).
pub fn connect(api: &ApiArgs, ctx: &Ctx) -> Result<Client, Unknown> {
    connect_until(api, ctx, ctx.deadline())
}

/// [`connect`] with a deadline of the caller's own, earlier than the check's (a check that must
/// keep time for its node work after the API calls).
pub fn connect_until(
    api: &ApiArgs,
    ctx: &Ctx,
    deadline: std::time::Instant,
) -> Result<Client, Unknown> {
    let cfg = config(api, ctx)?;
    let client = Client::new(&cfg, deadline.min(ctx.deadline()))?;
    ctx.debug(format!("kube config: {}", client.description));
    Ok(client)
}

/// Find the configuration as the options and environment say (telling `-vv` how), without
/// connecting: for checks that build several clients from it (one per API server of an HA
/// control plane, `Config::server` replaced).
pub fn config(api: &ApiArgs, ctx: &Ctx) -> Result<Config, Unknown> {
    ctx.stage("reading the kubeconfig");
    let lookup = Lookup::from_env(api.kubeconfig.clone(), api.context.clone());
    let mut notes = Vec::new();
    let cfg = lookup.resolve(&mut notes);
    for n in &notes {
        ctx.debug(format!("kube config lookup: {n}"));
    }
    let mut cfg = cfg?;
    cfg.allow_http = api.allow_insecure_http;
    cfg.allow_insecure_tls = api.allow_insecure_tls;
    if matches!(cfg.source, Source::Env(_)) {
        ctx.debug("kube config: $KUBECONFIG is a list: the first existing file is used, files are not merged");
    }
    Ok(cfg)
}

/// Which pods a check wants: applied as API selectors and again locally (so `--pods-json` input
/// is filtered exactly the same way).
#[derive(Debug, Clone, Default)]
pub struct PodFilter {
    /// Namespaces to read (empty: all).
    pub namespaces: Vec<String>,
    /// Only pods bound to this node (`spec.nodeName`).
    pub node: Option<String>,
    /// Only pods whose labels match.
    pub labels: Option<Selector>,
}

impl PodFilter {
    pub fn matches(&self, p: &Pod) -> bool {
        (self.namespaces.is_empty() || self.namespaces.contains(&p.metadata.namespace))
            && self
                .node
                .as_ref()
                .is_none_or(|n| p.spec.node_name.as_deref() == Some(n.as_str()))
            && self
                .labels
                .as_ref()
                .is_none_or(|s| s.matches(&p.metadata.labels))
    }

    /// Human description: "on node k8s03 in namespaces a, b".
    pub fn describe(&self) -> String {
        let mut s = match &self.node {
            Some(n) => format!("on node {n}"),
            None => "on all nodes".to_string(),
        };
        if !self.namespaces.is_empty() {
            s.push_str(&format!(
                " in namespace{} {}",
                if self.namespaces.len() > 1 { "s" } else { "" },
                self.namespaces.join(", ")
            ));
        }
        if let Some(l) = self.labels.as_ref().filter(|l| !l.is_empty()) {
            s.push_str(&format!(" matching {}", l.as_str()));
        }
        s
    }
}

impl Client {
    /// List the pods `filter` selects, page by page, calling `f` for each. Returns the count.
    pub fn list_pods(&self, filter: &PodFilter, mut f: impl FnMut(Pod)) -> Result<usize, Unknown> {
        let params = ListParams {
            label_selector: filter.labels.as_ref().map(|s| s.as_str().to_string()),
            field_selector: filter.node.as_ref().map(|n| format!("spec.nodeName={n}")),
            limit: 0,
        };
        let mut n = 0;
        let mut take = |p: Pod| {
            if filter.matches(&p) {
                n += 1;
                f(p)
            }
        };
        if filter.namespaces.is_empty() {
            self.list("/api/v1/pods", &params, &mut take)?;
        } else {
            for ns in &filter.namespaces {
                self.list(&format!("/api/v1/namespaces/{ns}/pods"), &params, &mut take)?;
            }
        }
        Ok(n)
    }

    /// All PersistentVolumes.
    pub fn list_pvs(&self, f: impl FnMut(PersistentVolume)) -> Result<usize, Unknown> {
        self.list("/api/v1/persistentvolumes", &ListParams::default(), f)
    }

    /// The PersistentVolume named `name`, if it exists: a list with
    /// `fieldSelector=metadata.name=…` (the `list` verb the RBAC grants, not `get`), so one
    /// node's run costs its own volumes, not the cluster's.
    pub fn list_pv_named(
        &self,
        name: &str,
        f: impl FnMut(PersistentVolume),
    ) -> Result<usize, Unknown> {
        self.list(
            "/api/v1/persistentvolumes",
            &ListParams {
                field_selector: Some(format!("metadata.name={name}")),
                ..Default::default()
            },
            f,
        )
    }

    /// The VolumeAttachment named `name` (see [`attachment_name`]), if it exists: a list with
    /// `fieldSelector=metadata.name=…`.
    pub fn list_volume_attachment_named(
        &self,
        name: &str,
        f: impl FnMut(VolumeAttachment),
    ) -> Result<usize, Unknown> {
        self.list(
            "/apis/storage.k8s.io/v1/volumeattachments",
            &ListParams {
                field_selector: Some(format!("metadata.name={name}")),
                ..Default::default()
            },
            f,
        )
    }

    /// One page of one item of a collection (`GET path?limit=1`, the `list` verb): proves this
    /// identity may list it, at the cost of one object — a missing grant then shows on every
    /// run, not only once the objects are needed.
    pub fn may_list(&self, path: &str) -> Result<(), Unknown> {
        self.get::<serde::de::IgnoredAny>(path, &[("limit", "1")])
            .map(|_| ())
    }

    /// All VolumeAttachments (storage.k8s.io/v1).
    pub fn list_volume_attachments(
        &self,
        f: impl FnMut(VolumeAttachment),
    ) -> Result<usize, Unknown> {
        self.list(
            "/apis/storage.k8s.io/v1/volumeattachments",
            &ListParams::default(),
            f,
        )
    }

    /// All Nodes (name and conditions).
    pub fn list_nodes(&self, f: impl FnMut(Node)) -> Result<usize, Unknown> {
        self.list("/api/v1/nodes", &ListParams::default(), f)
    }

    /// Core events of every namespace with this `reason` (`fieldSelector=reason=…`, served by
    /// the API server for core/v1 Events), e.g. `FailedAttachVolume`.
    pub fn list_events_with_reason(
        &self,
        reason: &str,
        mut f: impl FnMut(Event),
    ) -> Result<usize, Unknown> {
        self.list(
            "/api/v1/events",
            &ListParams {
                field_selector: Some(format!("reason={reason}")),
                ..Default::default()
            },
            |e: Event| {
                // Again here: a server that ignored the selector must not widen the answer.
                if e.reason == reason {
                    f(e)
                }
            },
        )
    }

    /// Core events about one object (`involvedObject.kind/name`) in `namespace`.
    pub fn events_for(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
    ) -> Result<Vec<Event>, Unknown> {
        let mut out = Vec::new();
        self.list(
            &format!("/api/v1/namespaces/{namespace}/events"),
            &ListParams {
                field_selector: Some(format!(
                    "involvedObject.kind={kind},involvedObject.name={name}"
                )),
                ..Default::default()
            },
            |e: Event| {
                if e.involved_object.name == name {
                    out.push(e)
                }
            },
        )?;
        Ok(out)
    }
}

/// The cap of a `--pods-json`/`--pvs-json` document (`kubectl get pods -A -o json` of a 20 000-pod
/// cluster is about 200 MiB). A regular file up to [`JSON_MAP_MAX`] is mapped and parsed in
/// memory (several times faster); a larger one, stdin and other non-regular files are streamed
/// through a buffer, read up to this cap.
pub const JSON_FILE_MAX: u64 = 256 << 20;

/// The largest file mapped whole: its touched pages count in the worker's RSS (as file pages),
/// so a mapped file of 200 MiB alone broke the 64 MiB budget (issue 27, finding 3: 666 MB for
/// 10^6 stuck pods). Up to this (half the budget) the faster slice parser is used; past it the
/// file is streamed.
pub const JSON_MAP_MAX: u64 = 32 << 20;

/// A JSON document as [`read_document`] hands it to its parser.
pub enum Document<'a> {
    /// A regular file, mapped: parsed in memory.
    Slice(&'a [u8]),
    /// Stdin or another stream, read through a buffer up to the cap.
    Reader(&'a mut dyn std::io::BufRead),
}

/// Open the JSON input `path` names (`-`: stdin; a file with the caller's privilege), hold it to
/// [`JSON_FILE_MAX`], and run `parse` over it; failures become one UNKNOWN naming `what` and the
/// path. A stream is parsed as it is read: input that cannot start a JSON document (`/dev/zero`,
/// a binary file) fails at its first byte, never read to the cap.
pub fn read_document<T>(
    path: &Path,
    what: &str,
    parse: impl FnOnce(Document) -> Result<T, serde_json::Error>,
) -> Result<T, Unknown> {
    let shown = if path == Path::new("-") {
        "stdin".to_string()
    } else {
        path.display().to_string()
    };
    let over = || {
        Unknown(format!(
            "{what} {shown} is larger than {} (the cap of a JSON input): not read",
            plugin::fmt_bytes(JSON_FILE_MAX)
        ))
    };
    let (res, exceeded) = if path == Path::new("-") {
        stream_document(&mut std::io::stdin().lock(), parse)
    } else {
        // A path the caller named: opened with the caller's privilege.
        let file = plugin::privilege::open(path).map_err(|e| {
            Unknown(format!(
                "cannot read {what} {shown}: {}",
                plugin::errtext(&e)
            ))
        })?;
        let size = file.metadata().map(|m| m.is_file().then_some(m.len()));
        match size {
            Ok(Some(len)) if len > JSON_FILE_MAX => return Err(over()),
            Ok(Some(len)) if len <= JSON_MAP_MAX => {
                let doc = plugin::mapped::map(&file, len).map_err(|e| {
                    Unknown(format!(
                        "cannot read {what} {shown}: {}",
                        plugin::errtext(&e)
                    ))
                })?;
                (parse(Document::Slice(&doc)), false)
            }
            _ => stream_document(&mut &file, parse),
        }
    };
    if exceeded {
        return Err(over());
    }
    res.map_err(|e| {
        use serde_json::error::Category;
        let text = match e.classify() {
            Category::Eof => format!("truncated JSON: {e}: not a JSON document as a whole"),
            Category::Syntax => format!("invalid JSON: {e}: not a JSON document"),
            Category::Io => format!("read failed: {e}"),
            Category::Data => format!("unexpected JSON: {e}"),
        };
        Unknown(format!("cannot parse {what} {shown}: {text}"))
    })
}

/// Parse a stream read through a buffer, at most one byte past [`JSON_FILE_MAX`]; the flag says
/// the cap was reached.
fn stream_document<T>(
    r: &mut dyn std::io::Read,
    parse: impl FnOnce(Document) -> Result<T, serde_json::Error>,
) -> (Result<T, serde_json::Error>, bool) {
    let mut capped = std::io::Read::take(r, JSON_FILE_MAX + 1);
    let res = {
        let mut buf = BufReader::with_capacity(64 * 1024, &mut capped);
        parse(Document::Reader(&mut buf))
    };
    (res, capped.limit() == 0)
}

/// Read a list document (`kubectl get … -o json`) from `path` (`-`: stdin), streaming each item
/// to `f` through the same typed path the API uses. Returns the number of items.
pub fn read_json_list<T: DeserializeOwned>(
    path: &Path,
    what: &str,
    f: impl FnMut(T),
) -> Result<usize, Unknown> {
    let meta = read_document(path, what, |doc| match doc {
        Document::Slice(s) => list::read_list_slice(s, f),
        Document::Reader(r) => list::read_list(r, f),
    })?;
    if !meta.had_items {
        let shown = if path == Path::new("-") {
            "stdin".to_string()
        } else {
            path.display().to_string()
        };
        return Err(Unknown(format!(
            "{what} {shown} is not a list (kind '{}'): give the output of `kubectl get … -o json` for several objects",
            meta.kind
        )));
    }
    Ok(meta.items)
}

/// The pods a check looks at, from `--pods-json` when given, else from the API: each one that
/// passes `filter` goes to `f`. Returns the API client when one was used (for event lookups).
pub fn scan_pods(
    pods_json: Option<&Path>,
    api: &ApiArgs,
    filter: &PodFilter,
    ctx: &Ctx,
    f: impl FnMut(Pod),
) -> Result<Option<Client>, Unknown> {
    match pods_json {
        Some(path) => {
            ctx.stage(format!("reading {}", path.display()));
            load_pods_json(path, filter, f)?;
            ctx.debug(format!("pods from {}", path.display()));
            Ok(None)
        }
        None => {
            let client = connect(api, ctx)?;
            ctx.stage(format!(
                "listing pods {} from {}",
                filter.describe(),
                client.server()
            ));
            client.list_pods(filter, f)?;
            Ok(Some(client))
        }
    }
}

/// Pods from `--pods-json FILE|-` (`kubectl get pods -A -o json`), filtered like the API would.
/// Returns the number of pods passed to `f`.
pub fn load_pods_json(
    path: &Path,
    filter: &PodFilter,
    mut f: impl FnMut(Pod),
) -> Result<usize, Unknown> {
    let mut n = 0;
    read_json_list(path, "--pods-json", |p: Pod| {
        if filter.matches(&p) {
            n += 1;
            f(p)
        }
    })?;
    Ok(n)
}

/// PersistentVolumes from `--pvs-json FILE|-` (`kubectl get pv -o json`).
pub fn load_pvs_json(path: &Path, f: impl FnMut(PersistentVolume)) -> Result<usize, Unknown> {
    read_json_list(path, "--pvs-json", f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_name_is_the_kubelets() {
        // sha256("vol-1" + "ebs.csi.aws.com" + "node-a"), computed independently (Python's
        // hashlib), in getAttachmentName's format.
        assert_eq!(
            attachment_name("vol-1", "ebs.csi.aws.com", "node-a"),
            "csi-7ba6b8ed285c3c863d675c3b4567d68ede4307ae1a37202e02bf2c4b9f42f28b"
        );
    }

    fn tmpfile(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("kube-lib-test-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn pods_json_is_filtered_like_the_api() {
        let p = tmpfile(
            "pods.json",
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[
              {"metadata":{"name":"a","namespace":"openebs","labels":{"openebs.io/component":"jiva-replica"}},"spec":{"nodeName":"k8s01"}},
              {"metadata":{"name":"b","namespace":"openebs"},"spec":{"nodeName":"k8s02"}},
              {"metadata":{"name":"c","namespace":"media"},"spec":{"nodeName":"k8s01"}},
              {"metadata":{"name":"d","namespace":"media"},"spec":{}}]}"#,
        );
        let names = |f: PodFilter| {
            let mut v = vec![];
            let n = load_pods_json(&p, &f, |p| v.push(p.metadata.name)).unwrap();
            assert_eq!(n, v.len());
            v
        };
        assert_eq!(names(PodFilter::default()), ["a", "b", "c", "d"]);
        assert_eq!(
            names(PodFilter {
                node: Some("k8s01".into()),
                ..Default::default()
            }),
            ["a", "c"]
        );
        assert_eq!(
            names(PodFilter {
                namespaces: vec!["media".into()],
                ..Default::default()
            }),
            ["c", "d"]
        );
        let sel = Selector::parse("openebs.io/component=jiva-replica").unwrap();
        assert_eq!(
            names(PodFilter {
                labels: Some(sel),
                ..Default::default()
            }),
            ["a"]
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn pvs_json_and_bad_files() {
        let p = tmpfile(
            "pvs.json",
            r#"{"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"pvc-1"},"spec":{"csi":{"driver":"jiva.csi.openebs.io","volumeHandle":"pvc-1"}}}]}"#,
        );
        let mut v = vec![];
        assert_eq!(load_pvs_json(&p, |pv| v.push(pv)).unwrap(), 1);
        assert_eq!(v[0].spec.csi.as_ref().unwrap().volume_handle, "pvc-1");
        std::fs::write(&p, r#"{"items":[{"metadata":{"name":"pvc-1"}"#).unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("--pvs-json") && e.0.contains("truncated JSON"),
            "{e}"
        );
        std::fs::write(
            &p,
            r#"{"kind":"PersistentVolume","metadata":{"name":"pvc-1"}}"#,
        )
        .unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("is not a list (kind 'PersistentVolume')"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
        let e = load_pvs_json(&p, |_| {}).unwrap_err();
        assert!(
            e.0.contains("cannot read --pvs-json") && e.0.contains("ENOENT"),
            "{e}"
        );
    }
}
