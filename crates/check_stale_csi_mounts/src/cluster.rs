//! The cluster view: what the API (or `kubectl … -o json` files) says of this node's pods, the
//! PVs and their attachments, kept as the compact plain data `evaluate` decides on. Each part is
//! `None` when it was not supplied, so the check can say which cross-check it skipped.

pub use crate::identity::PvInfo;
use crate::identity::{identify, is_staging};
use crate::{api_budget, CsiMount, Opts};
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

/// The shared resolver's [`kube::checks::names::Names`] from what the cross-checks already read (no further
/// request): pods by UID, PVs (by name and volume handle) to their claims, claims to their pods.
pub fn names(view: &ClusterView) -> kube::checks::names::Names {
    let mut n = kube::checks::names::Names::default();
    for p in view.pods.iter().flatten() {
        n.pods.insert(
            p.uid.clone(),
            kube::checks::names::PodName {
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
pub fn view(
    opts: &Opts,
    host: &node::Host,
    mounts: &[CsiMount],
    ctx: &Ctx,
) -> Result<ClusterView, Unknown> {
    if opts.pods.reads_stdin() && opts.pvs.reads_stdin() {
        return Err("--pods-json and --pvs-json cannot both read stdin".into());
    }
    let node = opts.node.name_or(|| host.hostname())?;
    if opts.pods.pods_json.is_none() && opts.pvs.pvs_json.is_none() {
        return Ok(api_view(opts, node, mounts, ctx));
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

fn api_view(opts: &Opts, node: String, mounts: &[CsiMount], ctx: &Ctx) -> ClusterView {
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
        "listing pods on node {node}, the PVs and VolumeAttachments of its {} CSI mounts from {}",
        mounts.len(),
        client.description
    ));
    match from_api(&client, &node, mounts, ctx) {
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

/// The view from the API server, at the cost of this node's own volumes: the pods bound to
/// `node` (field selector); each PV the node's mounts name (`fieldSelector=metadata.name=…`, one
/// small list each: the RBAC grants `list` only); the VolumeAttachment of each staging mount, by
/// the name the kubelet gives it ([`kube::attachment_name`]). The whole PV or VolumeAttachment
/// list is read only where a name cannot be known or a by-name answer cannot decide as the whole
/// list would (`-vv` says which and why): a staging mount known only by its volume handle, a PV
/// missing by name (another PV of the same handle would still count), a staging mount whose
/// attachment is missing and whose driver shows no attachment here (does it attach at all?).
/// CSIDriver objects are not read (the VolumeAttachment rule then applies to drivers that have
/// VolumeAttachments somewhere). Where no PV or no attachment was asked for, one item of each
/// (`limit=1`) proves the grant.
pub fn from_api(
    client: &kube::Client,
    node: &str,
    mounts: &[CsiMount],
    ctx: &Ctx,
) -> Result<ClusterView, Unknown> {
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
    check(&mut objects)?;

    // The PVs: by name where the mounts tell it, else all of them.
    let local = identify(mounts, None);
    let unnamed: Vec<&CsiMount> = mounts
        .iter()
        .zip(&local)
        .filter(|(m, id)| is_staging(&m.kind) && (id.pv.is_none() || id.pv_from == "volumeHandle"))
        .map(|(m, _)| m)
        .collect();
    let mut all_pvs = false;
    if let Some(m) = unnamed.first() {
        ctx.debug(format!(
            "listing every PV: {} known only by volume handle, e.g. {}",
            plugin::count(unnamed.len(), "staging mount", "staging mounts"),
            m.mount_point.display()
        ));
        list_all_pvs(client, &mut objects)?;
        all_pvs = true;
    } else {
        let names: std::collections::BTreeSet<&str> =
            local.iter().filter_map(|id| id.pv.as_deref()).collect();
        for name in &names {
            client.list_pv_named(name, |pv| objects.add(Object::PersistentVolume(pv)))?;
        }
        check(&mut objects)?;
        let missing = mounts.iter().zip(&local).find(|(m, id)| {
            is_staging(&m.kind)
                && id
                    .pv
                    .as_deref()
                    .is_some_and(|n| !objects.pvs.iter().any(|p| p.name == n))
        });
        if let Some((m, id)) = missing {
            ctx.debug(format!(
                "listing every PV: PV {} of {} not found by name (a PV of the same volume handle would still count)",
                id.pv.as_deref().unwrap_or_default(),
                m.mount_point.display()
            ));
            list_all_pvs(client, &mut objects)?;
            all_pvs = true;
        }
    }
    ctx.debug(format!(
        "{} PVs read ({})",
        objects.pvs.len(),
        if all_pvs { "every PV" } else { "by name" }
    ));

    // The VolumeAttachments of the staging mounts whose PV exists, by name.
    let partial = ClusterView {
        pvs: Some(objects.pvs.clone()),
        ..ClusterView::local_only(node)
    };
    let ids = identify(mounts, partial.pvs.as_deref());
    let mut all_attachments = false;
    let mut asked = std::collections::BTreeSet::new();
    let mut wanted = Vec::new();
    for (m, id) in mounts.iter().zip(&ids) {
        if !is_staging(&m.kind)
            || partial.pv_exists(id.pv.as_deref(), id.driver.as_deref(), id.handle.as_deref())
                == Some(false)
        {
            continue;
        }
        let pv = id
            .pv
            .as_deref()
            .and_then(|n| objects.pvs.iter().find(|p| p.name == n));
        let driver = pv.and_then(|p| p.driver.clone()).or(id.driver.clone());
        let handle = pv
            .and_then(|p| p.volume_handle.clone())
            .or(id.handle.clone());
        match (&id.pv, driver, handle) {
            (Some(pv), Some(driver), Some(handle)) => {
                let name = kube::attachment_name(&handle, &driver, node);
                if asked.insert(name.clone()) {
                    client.list_volume_attachment_named(&name, |va| {
                        objects.add(Object::VolumeAttachment(va))
                    })?;
                }
                // evaluate asks needs_attachment of the driver the mount names.
                wanted.push((m, pv.clone(), id.driver.clone().unwrap_or(driver)));
            }
            // evaluate checks the attachment only of a mount whose driver it knows.
            (Some(_), _, _) if id.driver.is_some() => {
                ctx.debug(format!(
                    "listing every VolumeAttachment: no driver or volume handle known for {} (its attachment's name cannot be computed)",
                    m.mount_point.display()
                ));
                all_attachments = true;
                break;
            }
            _ => {}
        }
    }
    check(&mut objects)?;
    if !all_attachments {
        // A missing attachment counts only for a driver that attaches: without CSIDriver
        // objects, one that has a VolumeAttachment somewhere, which the whole list tells.
        let here = |pv: &str| {
            objects
                .attachments
                .iter()
                .any(|a| a.pv == pv && a.node == node)
        };
        let seen = |d: &str| objects.attachments.iter().any(|a| a.attacher == d);
        if let Some((m, _, driver)) = wanted.iter().find(|(_, pv, d)| !here(pv) && !seen(d)) {
            ctx.debug(format!(
                "listing every VolumeAttachment: none found for {} and none of driver {driver} here (does {driver} attach at all?)",
                m.mount_point.display()
            ));
            all_attachments = true;
        }
    }
    if all_attachments {
        objects.attachments.clear();
        client.list_volume_attachments(|va| objects.add(Object::VolumeAttachment(va)))?;
        check(&mut objects)?;
    }
    // A node without CSI mounts asks for no PV nor attachment: one item of each proves the
    // grants anyway, so a missing one shows now, not once a volume arrives.
    if !all_pvs && local.iter().all(|id| id.pv.is_none()) {
        client.may_list("/api/v1/persistentvolumes")?;
    }
    if !all_attachments && asked.is_empty() {
        client.may_list("/apis/storage.k8s.io/v1/volumeattachments")?;
    }
    ctx.debug(format!(
        "{} VolumeAttachments read ({})",
        objects.attachments.len(),
        if all_attachments {
            "every one"
        } else {
            "by name"
        }
    ));
    Ok(ClusterView {
        api: ApiUse::Used(client.description.clone()),
        ..objects.into_view(node.to_string(), true, true)
    })
}

fn list_all_pvs(client: &kube::Client, objects: &mut Objects) -> Result<(), Unknown> {
    objects.pvs.clear();
    client.list_pvs(|pv| objects.add(Object::PersistentVolume(pv)))?;
    check(objects)
}

/// The first object this check cannot use, as the API's failure.
fn check(objects: &mut Objects) -> Result<(), Unknown> {
    match objects.error.take() {
        Some(e) => Err(Unknown(format!("the API server's answer: {e}"))),
        None => Ok(()),
    }
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
