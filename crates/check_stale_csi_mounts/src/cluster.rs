//! The cluster view: what the API (or `kubectl … -o json` files) says of this node's pods, the
//! PVs and their attachments, kept as the compact plain data `evaluate` decides on. Each part is
//! `None` when it was not supplied, so the check can say which cross-check it skipped.

use crate::{api_budget, Opts};
use kube::Object;
use plugin::{Ctx, Unknown};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// `spec.nodeName`; `None` for a pod not scheduled yet.
    pub node: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PvInfo {
    pub name: String,
    /// `spec.csi.driver` / `spec.csi.volumeHandle` (absent for non-CSI PVs).
    pub driver: Option<String>,
    pub volume_handle: Option<String>,
    /// `spec.claimRef` as `namespace/name` (a bound PV).
    pub claim: Option<(String, String)>,
}

/// The shared resolver's [`kube::Names`] from what the cross-checks already read (no further
/// request): pods by UID, PVs (by name and volume handle) to their claims, claims to their pods.
pub fn names(view: &ClusterView) -> kube::Names {
    let mut n = kube::Names::default();
    for p in view.pods.iter().flatten() {
        n.pods.insert(
            p.uid.clone(),
            kube::names::PodName {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                node: p.node.clone(),
            },
        );
    }
    for pv in view.pvs.iter().flatten() {
        if let Some(c) = &pv.claim {
            n.claims.insert(pv.name.clone(), c.clone());
            if let Some(h) = pv.volume_handle.as_ref().filter(|h| !h.is_empty()) {
                n.claims.entry(h.clone()).or_insert_with(|| c.clone());
            }
        }
    }
    n
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub pv: String,
    pub node: String,
    /// `spec.attacher`: the CSI driver name.
    pub attacher: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverInfo {
    pub name: String,
    /// `spec.attachRequired` (the API default is true).
    pub attach_required: bool,
}

/// Where the view came from, as far as the API is concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ApiUse {
    /// Not asked (`--pods-json`/`--pvs-json` given, or a test).
    #[default]
    NotUsed,
    /// Read from the API server (the description names server and credential source).
    Used(String),
    /// No credentials were found and none were asked for: cross-checks skipped, with the reason.
    Skipped(String),
    /// Credentials were given or found but the API failed: the reason (HTTP status, hint).
    Failed(String),
}

/// What the cluster says. `None` parts were not supplied: their cross-checks are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterView {
    pub api: ApiUse,
    /// The node this check runs for (`--node`, default the host name).
    pub node: String,
    /// Every pod supplied (all nodes); evaluate keeps those on `node`.
    pub pods: Option<Vec<PodInfo>>,
    pub pvs: Option<Vec<PvInfo>>,
    /// VolumeAttachments; `None` when the documents held none (cannot tell "none exist").
    pub attachments: Option<Vec<Attachment>>,
    /// CSIDriver objects, when supplied: they tell which drivers need a VolumeAttachment.
    pub drivers: Vec<DriverInfo>,
}

impl ClusterView {
    pub fn local_only(node: impl Into<String>) -> ClusterView {
        ClusterView {
            node: node.into(),
            ..Default::default()
        }
    }

    pub fn pods_on_node(&self) -> Option<impl Iterator<Item = &PodInfo>> {
        self.pods.as_ref().map(|p| {
            p.iter()
                .filter(|p| p.node.as_deref() == Some(self.node.as_str()))
        })
    }

    pub fn pod(&self, uid: &str) -> Option<&PodInfo> {
        self.pods.as_ref()?.iter().find(|p| p.uid == uid)
    }

    /// Does a PV by this name, or a CSI PV with this driver and volume handle, exist?
    pub fn pv_exists(
        &self,
        name: Option<&str>,
        driver: Option<&str>,
        handle: Option<&str>,
    ) -> Option<bool> {
        let pvs = self.pvs.as_ref()?;
        Some(pvs.iter().any(|pv| {
            name.is_some_and(|n| pv.name == n)
                || (handle.is_some()
                    && pv.volume_handle.as_deref() == handle
                    && (driver.is_none() || pv.driver.as_deref() == driver))
        }))
    }

    /// Whether the VolumeAttachment rule applies to a driver: the CSIDriver object says it needs
    /// attaching (API default: yes); without CSIDriver objects, when any VolumeAttachment of the
    /// driver exists in the cluster (drivers with attachRequired=false have none at all).
    pub fn needs_attachment(&self, driver: &str) -> bool {
        if let Some(d) = self.drivers.iter().find(|d| d.name == driver) {
            return d.attach_required;
        }
        self.attachments
            .as_ref()
            .is_some_and(|a| a.iter().any(|a| a.attacher == driver))
    }

    pub fn attached_here(&self, pv: &str) -> Option<bool> {
        let a = self.attachments.as_ref()?;
        Some(a.iter().any(|a| a.pv == pv && a.node == self.node))
    }
}

// ---- gathering: files or the API, through kube ------------------------------------------

/// The cluster view: from --pods-json/--pvs-json when given, else from the API. Without any
/// credentials (and none asked for) the API part is skipped, not failed; a failing API is kept
/// as the reason, so the local findings still count.
pub fn view(opts: &Opts, host: &node::Host, ctx: &Ctx) -> Result<ClusterView, Unknown> {
    if opts.pods.reads_stdin() && opts.pvs.reads_stdin() {
        return Err("--pods-json and --pvs-json cannot both read stdin".into());
    }
    let node = opts.node.name_or(|| host.hostname())?;
    if opts.pods.pods_json.is_none() && opts.pvs.pvs_json.is_none() {
        return Ok(api_view(opts, node, ctx));
    }
    let mut objects = Objects::default();
    for (path, what, default_kind) in [
        (&opts.pods.pods_json, "--pods-json", "Pod"),
        (&opts.pvs.pvs_json, "--pvs-json", "PersistentVolume"),
    ] {
        let Some(p) = path else { continue };
        ctx.stage(format!("reading {what} {}", p.display()));
        objects.read(p, what, default_kind)?;
    }
    ctx.debug(format!(
        "cluster view for node {node}: {} pods, {} PVs, {} VolumeAttachments, {} CSIDrivers, {} other objects ignored",
        objects.pods.len(),
        objects.pvs.len(),
        objects.attachments.len(),
        objects.drivers.len(),
        objects.ignored
    ));
    Ok(objects.into_view(
        node,
        opts.pods.pods_json.is_some(),
        opts.pvs.pvs_json.is_some(),
    ))
}

fn api_view(opts: &Opts, node: String, ctx: &Ctx) -> ClusterView {
    let asked = opts.api.kubeconfig.is_some() || opts.api.context.is_some();
    // The API must not squeeze the probes into false "hung" answers: it gets a budget of its own.
    let budget = api_budget(ctx.remaining(), opts.probe.probe_timeout);
    ctx.debug(format!("API budget {}", plugin::fmt_duration(budget)));
    let client = match kube::connect_until(&opts.api, ctx, std::time::Instant::now() + budget) {
        Ok(c) => c,
        Err(e) => {
            let api = if !asked && e.0.starts_with(kube::config::NO_CREDENTIALS) {
                ApiUse::Skipped(e.0)
            } else {
                ApiUse::Failed(e.0)
            };
            return ClusterView {
                api,
                ..ClusterView::local_only(node)
            };
        }
    };
    ctx.stage(format!(
        "listing pods on node {node}, PVs and VolumeAttachments from {}",
        client.description
    ));
    match from_api(&client, &node) {
        Ok(v) => {
            ctx.debug(format!(
                "cluster view from the API for node {node}: {} pods, {} PVs, {} VolumeAttachments",
                v.pods.as_ref().map_or(0, Vec::len),
                v.pvs.as_ref().map_or(0, Vec::len),
                v.attachments.as_ref().map_or(0, Vec::len)
            ));
            v
        }
        Err(e) => ClusterView {
            api: ApiUse::Failed(e.0),
            ..ClusterView::local_only(node)
        },
    }
}

/// The view from the API server: the pods bound to `node` (field selector), every PV and every
/// VolumeAttachment. CSIDriver objects are not read (the VolumeAttachment rule then applies to
/// drivers that have VolumeAttachments somewhere).
pub fn from_api(client: &kube::Client, node: &str) -> Result<ClusterView, Unknown> {
    let filter = kube::PodFilter {
        node: Some(node.to_string()),
        ..Default::default()
    };
    let mut objects = Objects {
        // The API lists them: none listed is "none exist".
        saw_attachments: true,
        ..Default::default()
    };
    client.list_pods(&filter, |p| objects.add(Object::Pod(p)))?;
    client.list_pvs(|pv| objects.add(Object::PersistentVolume(pv)))?;
    client.list_volume_attachments(|va| objects.add(Object::VolumeAttachment(va)))?;
    if let Some(e) = objects.error.take() {
        return Err(Unknown(format!("the API server's answer: {e}")));
    }
    Ok(ClusterView {
        api: ApiUse::Used(client.description.clone()),
        ..objects.into_view(node.to_string(), true, true)
    })
}

/// The compact forms of the objects read, by kind (files and API alike).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Objects {
    pub pods: Vec<PodInfo>,
    pub pvs: Vec<PvInfo>,
    pub attachments: Vec<Attachment>,
    pub drivers: Vec<DriverInfo>,
    /// A VolumeAttachment, or their List (even empty), was seen.
    pub saw_attachments: bool,
    pub ignored: usize,
    /// The first object this check cannot use (a pod without a UID, a nameless PV).
    pub error: Option<String>,
}

impl Objects {
    /// Add the objects of a `kubectl get … -o json` document (`what` names its option; items
    /// nothing else names are `default_kind`).
    pub fn read(
        &mut self,
        path: &std::path::Path,
        what: &str,
        default_kind: &str,
    ) -> Result<(), Unknown> {
        let doc = kube::read_objects(path, what, default_kind, |o| self.add(o))?;
        if doc.kind == "VolumeAttachmentList" {
            self.saw_attachments = true;
        }
        match self.error.take() {
            Some(e) => Err(Unknown(format!("{what} {}: {e}", path.display()))),
            None => Ok(()),
        }
    }

    /// Keep what the cross-checks need of one object.
    pub fn add(&mut self, o: Object) {
        let fail = |e: &mut Option<String>, msg: String| {
            e.get_or_insert(msg);
        };
        match o {
            Object::Pod(p) => {
                let name = p.metadata.name;
                if p.metadata.uid.is_empty() {
                    return fail(&mut self.error, format!("pod '{name}' has no metadata.uid"));
                }
                self.pods.push(PodInfo {
                    uid: p.metadata.uid,
                    namespace: p.metadata.namespace,
                    name,
                    node: p.spec.node_name.filter(|n| !n.is_empty()),
                });
            }
            Object::PersistentVolume(pv) => {
                if pv.metadata.name.is_empty() {
                    return fail(&mut self.error, "a PersistentVolume without a name".into());
                }
                let csi = pv.spec.csi;
                let some = |s: String| Some(s).filter(|s| !s.is_empty());
                self.pvs.push(PvInfo {
                    name: pv.metadata.name,
                    driver: csi.as_ref().and_then(|c| some(c.driver.clone())),
                    volume_handle: csi.and_then(|c| some(c.volume_handle)),
                    claim: pv
                        .spec
                        .claim_ref
                        .filter(|c| !c.name.is_empty())
                        .map(|c| (c.namespace, c.name)),
                });
            }
            Object::VolumeAttachment(va) => {
                self.saw_attachments = true;
                // Inline (migrated in-tree) volumes carry no PV name: nothing to match.
                match (va.spec.source.persistent_volume_name, va.spec.node_name) {
                    (Some(pv), node) if !node.is_empty() => self.attachments.push(Attachment {
                        pv,
                        node,
                        attacher: va.spec.attacher,
                    }),
                    _ => self.ignored += 1,
                }
            }
            Object::CsiDriver(d) => self.drivers.push(DriverInfo {
                name: d.metadata.name,
                attach_required: d.spec.attach_required.unwrap_or(true),
            }),
            Object::Other(_) => self.ignored += 1,
        }
    }

    /// The view these objects make: pods known when a pods document was given, PVs when a PV
    /// document was given, attachments when any VolumeAttachment (or their List) was seen.
    pub fn into_view(self, node: String, pods_given: bool, pvs_given: bool) -> ClusterView {
        ClusterView {
            api: ApiUse::NotUsed,
            node,
            pods: pods_given.then_some(self.pods),
            pvs: pvs_given.then_some(self.pvs),
            attachments: self.saw_attachments.then_some(self.attachments),
            drivers: self.drivers,
        }
    }
}
