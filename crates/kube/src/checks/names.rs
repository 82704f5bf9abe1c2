//! Names an operator knows: the node-side checks see pod UIDs and PV names in kubelet paths
//! (`…/pods/8e1f6a2c-…/volumes/kubernetes.io~csi/pvc-a634b9a3-…/mount`); this module turns them
//! into `namespace/pod` and the claim `namespace/pvc`, from the API or from
//! `--pods-json`/`--pvs-json`.
//!
//! How a mount check uses it, after its own gathering and only for what it will alert on:
//! ```ignore
//! let mut wanted = kube::checks::names::Wanted::default();
//! wanted.add("pvc-a634b9a3-…", ["8e1f6a2c-…"]);          // only volumes of non-OK findings
//! let names = kube::checks::names::resolve(&self.names, &wanted, ctx); // no I/O when `wanted` is empty
//! let report = evaluate(&data, &names);                  // names.volume(pv, uids) in texts
//! ```
//!
//! Rules:
//! - nothing wanted (a healthy node) → no file read, no API request, no note;
//! - `--no-names` → nothing resolved, no note;
//! - `--pods-json`/`--pvs-json` given → those files only, never the API;
//! - otherwise the API, if a kubeconfig is found: one paged list of PersistentVolumes, then the
//!   pods of each namespace that claims a wanted PV (a pod can only use claims of its own
//!   namespace, so no node name is needed and no cluster-wide pod list is read);
//! - every failure becomes a note in [`Names::notes`], never an error: the check's verdict stands;
//! - the lookups get what is left of the check's `-t` minus a reserve for evaluating and
//!   answering (a quarter of it, at least 500 ms).

use crate::args::{ApiArgs, PodsJsonArg, PvsJsonArg};
use crate::client::Client;
use crate::config::Lookup;
use crate::types::{PersistentVolume, Pod};
use plugin::deadline::Reserve;
use plugin::Ctx;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The options a check flattens to resolve names (`--no-names`, `--kubeconfig`, `--context`,
/// `--pods-json`, `--pvs-json`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct NamesArgs {
    /// Do not resolve pod UIDs and PV names to namespace/pod and namespace/pvc
    #[arg(long, help_heading = "Kubernetes API")]
    pub no_names: bool,

    #[command(flatten)]
    pub api: ApiArgs,

    #[command(flatten)]
    pub pods: PodsJsonArg,

    #[command(flatten)]
    pub pvs: PvsJsonArg,
}

impl NamesArgs {
    /// `--pods-json -` or `--pvs-json -` (return it from `Check::reads_stdin`).
    pub fn reads_stdin(&self) -> bool {
        self.pods.reads_stdin() || self.pvs.reads_stdin()
    }
}

/// What a check wants named: PV names (or CSI volume handles) and pod UIDs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Wanted {
    pub pvs: BTreeSet<String>,
    pub pod_uids: BTreeSet<String>,
}

impl Wanted {
    /// A volume and the UIDs of the pods the node shows using it.
    pub fn add<'a>(&mut self, pv: &str, uids: impl IntoIterator<Item = &'a str>) {
        if !pv.is_empty() {
            self.pvs.insert(pv.to_string());
        }
        for u in uids {
            if !u.is_empty() {
                self.pod_uids.insert(u.to_string());
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.pvs.is_empty() && self.pod_uids.is_empty()
    }
}

/// A pod as the resolver keeps it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodName {
    pub namespace: String,
    pub name: String,
    pub node: Option<String>,
}

impl PodName {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// What was resolved, and notes on what was not (for the report; never an error).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    /// Pod UID → pod.
    pub pods: BTreeMap<String, PodName>,
    /// PV name (and CSI volume handle) → (claim namespace, claim name).
    pub claims: BTreeMap<String, (String, String)>,
    /// (namespace, claim) → pods using it (`namespace/name`, sorted).
    pub claim_pods: BTreeMap<(String, String), Vec<String>>,
    /// Why names are missing ("names not resolved (no API access)", a failed request …).
    pub notes: Vec<String>,
    /// PV name (and CSI volume handle) → the PV's access modes.
    pub access_modes: BTreeMap<String, Vec<String>>,
    /// Claims some pod mounts with `readOnly: true`.
    pub read_only_claims: BTreeSet<(String, String)>,
}

/// What the API says a volume is for: read-only by intent, or to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    /// Read-only on purpose: why (`the PV's access modes are ReadOnlyMany`, `pod … mounts the
    /// claim readOnly`).
    ReadOnly(String),
    /// Meant to be written: why (`the PV's access modes are ReadWriteOnce`).
    Writable(String),
}

/// At most this many pods named per volume; the rest are counted.
const PODS_SHOWN: usize = 3;

impl Names {
    /// Keep from `pvs` and `pods` what `wanted` needs. Pure (unit-tested; used for files and API).
    pub fn build(
        wanted: &Wanted,
        pvs: impl IntoIterator<Item = PersistentVolume>,
        pods: impl IntoIterator<Item = Pod>,
    ) -> Names {
        let mut n = Names::default();
        for pv in pvs {
            n.add_pv(wanted, &pv);
        }
        for p in pods {
            n.add_pod(wanted, &p);
        }
        n.finish();
        n
    }

    /// Record `pv` if it is wanted (by name or CSI volume handle) and has a claim.
    pub fn add_pv(&mut self, wanted: &Wanted, pv: &PersistentVolume) {
        let handle = pv.spec.csi.as_ref().map(|c| c.volume_handle.as_str());
        let keys: Vec<&str> = std::iter::once(pv.metadata.name.as_str())
            .chain(handle)
            .filter(|k| !k.is_empty() && wanted.pvs.contains(*k))
            .collect();
        let Some(c) = pv.spec.claim_ref.as_ref().filter(|c| !c.name.is_empty()) else {
            return;
        };
        for k in keys {
            self.claims
                .insert(k.to_string(), (c.namespace.clone(), c.name.clone()));
            self.access_modes
                .insert(k.to_string(), pv.spec.access_modes.clone());
        }
    }

    /// Namespaces that claim a wanted PV: where the pods using them live.
    pub fn claim_namespaces(&self) -> BTreeSet<String> {
        self.claims.values().map(|(ns, _)| ns.clone()).collect()
    }

    /// Record `p` if its UID is wanted or it uses a claim of a wanted PV.
    pub fn add_pod(&mut self, wanted: &Wanted, p: &Pod) {
        let ns = &p.metadata.namespace;
        let uses: Vec<(String, String)> = p
            .claim_names()
            .map(|c| (ns.clone(), c.to_string()))
            .filter(|k| self.claims.values().any(|v| v == k))
            .collect();
        let by_uid = wanted.pod_uids.contains(&p.metadata.uid);
        if !by_uid && uses.is_empty() {
            return;
        }
        let pn = PodName {
            namespace: ns.clone(),
            name: p.metadata.name.clone(),
            node: p.spec.node_name.clone(),
        };
        for v in &p.spec.volumes {
            if let Some(c) = v.persistent_volume_claim.as_ref().filter(|c| c.read_only) {
                let k = (ns.clone(), c.claim_name.clone());
                if uses.contains(&k) {
                    self.read_only_claims.insert(k);
                }
            }
        }
        for k in uses {
            self.claim_pods.entry(k).or_default().push(pn.key());
        }
        if by_uid {
            self.pods.insert(p.metadata.uid.clone(), pn);
        }
    }

    fn finish(&mut self) {
        for v in self.claim_pods.values_mut() {
            v.sort();
            v.dedup();
        }
    }

    /// Notes for wanted things that were not found (after a successful read).
    fn note_missing(&mut self, wanted: &Wanted, pvs_read: bool, pods_read: bool) {
        /// The wanted keys `found` lacks, joined; `None` when none is missing.
        fn missing<V>(wanted: &BTreeSet<String>, found: &BTreeMap<String, V>) -> Option<String> {
            let m: Vec<&str> = wanted
                .iter()
                .filter(|k| !found.contains_key(*k))
                .map(String::as_str)
                .collect();
            (!m.is_empty()).then(|| m.join(", "))
        }
        if let Some(pvs) = missing(&wanted.pvs, &self.claims).filter(|_| pvs_read) {
            self.notes.push(format!(
                "no bound PersistentVolume named {pvs}: its claim is not named"
            ));
        }
        if let Some(uids) = missing(&wanted.pod_uids, &self.pods).filter(|_| pods_read) {
            self.notes.push(format!(
                "no pod with UID {uids} found{}",
                if pvs_read {
                    " in the namespaces claiming the volumes (pod deleted?)"
                } else {
                    ""
                }
            ));
        }
    }

    /// `namespace/pod` of a UID, if known.
    pub fn pod(&self, uid: &str) -> Option<String> {
        self.pods.get(uid).map(PodName::key)
    }

    /// A pod UID as an operator knows it: `namespace/pod`, else the UID.
    pub fn pod_or_uid(&self, uid: &str) -> String {
        self.pod(uid).unwrap_or_else(|| uid.to_string())
    }

    /// What the API says `pv` (name or CSI handle) is for, if it says: read-only when its only
    /// access mode is ReadOnlyMany or a pod mounts its claim `readOnly`; writable when an access
    /// mode is ReadWriteOnce, ReadWriteMany or ReadWriteOncePod.
    pub fn intent(&self, pv: &str) -> Option<Intent> {
        if let Some(k) = self.claims.get(pv) {
            if self.read_only_claims.contains(k) {
                return Some(Intent::ReadOnly(format!(
                    "a pod mounts the claim {}/{} with readOnly: true",
                    k.0, k.1
                )));
            }
        }
        let modes = self.access_modes.get(pv).filter(|m| !m.is_empty())?;
        let text = modes.join(",");
        if modes.iter().all(|m| m == "ReadOnlyMany") {
            Some(Intent::ReadOnly(format!(
                "the PV's access modes are {text}"
            )))
        } else if modes.iter().any(|m| m.starts_with("ReadWrite")) {
            Some(Intent::Writable(format!(
                "the PV's access modes are {text}"
            )))
        } else {
            None
        }
    }

    /// `namespace/pvc` of a PV (name or CSI handle), if known.
    pub fn claim(&self, pv: &str) -> Option<String> {
        self.claims.get(pv).map(|(ns, c)| format!("{ns}/{c}"))
    }

    /// The pods to name for a volume: those of `uids` that resolved (the pods the node shows
    /// using it), else every pod using its claim.
    pub fn pods_of<'a>(&self, pv: &str, uids: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut v: Vec<String> = uids.into_iter().filter_map(|u| self.pod(u)).collect();
        if v.is_empty() {
            if let Some(k) = self.claims.get(pv) {
                v = self.claim_pods.get(k).cloned().unwrap_or_default();
            }
        }
        v.sort();
        v.dedup();
        v
    }

    /// A volume as an operator knows it:
    /// `media/radarr-0 (PVC media/radarr-config, pvc-a634b9a3)`, `PVC media/radarr-config
    /// (pvc-a634b9a3)` when no pod is known, `media/radarr-0 (pvc-a634b9a3)` when no claim is,
    /// or just `pvc-a634b9a3`.
    pub fn volume<'a>(&self, pv: &str, uids: impl IntoIterator<Item = &'a str>) -> String {
        let pods = self.pods_of(pv, uids);
        let claim = self.claim(pv);
        let pods_text = if pods.len() > PODS_SHOWN {
            format!(
                "{} +{} more",
                pods[..PODS_SHOWN].join(", "),
                pods.len() - PODS_SHOWN
            )
        } else {
            pods.join(", ")
        };
        match (pods.is_empty(), claim) {
            (true, None) => pv.to_string(),
            (true, Some(c)) => format!("PVC {c} ({pv})"),
            (false, None) => format!("{pods_text} ({pv})"),
            (false, Some(c)) => format!("{pods_text} (PVC {c}, {pv})"),
        }
    }

    /// The subject of a finding about volume `pv` (PV name or CSI handle; empty when unknown)
    /// used by the pods `uids`: the PV, its claim (namespace, pvc) when known, the pod when
    /// exactly one resolves (else only its namespace). Never `node`: that is identity, which a
    /// lookup that may fail must not provide (the check sets the node it runs on).
    pub fn subject<'a>(
        &self,
        pv: &str,
        uids: impl IntoIterator<Item = &'a str>,
    ) -> plugin::Subject {
        let mut s = plugin::Subject::new().pv(pv);
        if let Some((ns, pvc)) = self.claims.get(pv) {
            s = s.namespace(ns.as_str()).pvc(pvc.as_str());
        }
        let mut pods: Vec<&PodName> = uids.into_iter().filter_map(|u| self.pods.get(u)).collect();
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        pods.dedup_by(|a, b| a.namespace == b.namespace && a.name == b.name);
        if let [p] = pods.as_slice() {
            if s.namespace.is_none() {
                s = s.namespace(p.namespace.as_str());
            }
            if s.namespace.as_deref() == Some(p.namespace.as_str()) {
                // Not the pod's node: a finding's `node` is identity, so it comes from the
                // check itself (the node it runs on), never from a lookup that can fail.
                s = s.pod(p.name.as_str());
            }
        } else if s.namespace.is_none()
            && !pods.is_empty()
            && pods.iter().all(|p| p.namespace == pods[0].namespace)
        {
            s = s.namespace(pods[0].namespace.as_str());
        }
        s
    }

    /// Nothing at all was resolved.
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.claims.is_empty()
    }
}

/// The note when no configuration is found and no file is given.
pub const NO_ACCESS: &str = "names not resolved (no API access)";

/// Resolve what `wanted` lists: the one call of every check's names step. Never fails: problems
/// become [`Names::notes`]. Does no I/O when nothing is wanted or `--no-names` is given. Built
/// without the `api` feature it is [`resolve_files_only`].
pub fn resolve(args: &NamesArgs, wanted: &Wanted, ctx: &Ctx) -> Names {
    #[cfg(feature = "api")]
    if !args.no_names
        && !wanted.is_empty()
        && args.pods.pods_json.is_none()
        && args.pvs.pvs_json.is_none()
    {
        return from_api(args, wanted, ctx);
    }
    resolve_files_only(args, wanted, ctx)
}

/// The note of a build without the API client when no file is given.
pub const NO_API_BUILD: &str =
    "names not resolved (built without API support): give --pods-json and --pvs-json";

/// Like [`resolve`] but never the API: what `resolve` is in a build without the `api` feature
/// (nothing of the HTTPS client is linked then). Without files: a note.
pub fn resolve_files_only(args: &NamesArgs, wanted: &Wanted, ctx: &Ctx) -> Names {
    if args.no_names || wanted.is_empty() {
        return Names::default();
    }
    if args.pods.pods_json.is_none() && args.pvs.pvs_json.is_none() {
        return Names {
            notes: vec![NO_API_BUILD.into()],
            ..Default::default()
        };
    }
    let mut n = Names::default();
    let pvs_read = n.add_file(
        args.pvs.pvs_json.as_deref(),
        ("PVC", "--pvs-json with --pods-json"),
        ctx,
        |p, f| crate::json::load_pvs_json(p, f),
        |n, pv| n.add_pv(wanted, pv),
    );
    let pods_read = n.add_file(
        args.pods.pods_json.as_deref(),
        ("pod", "--pods-json with --pvs-json"),
        ctx,
        |p, f| crate::json::load_pods_json(p, &Default::default(), f),
        |n, pod| n.add_pod(wanted, pod),
    );
    n.finish();
    n.note_missing(wanted, pvs_read, pods_read);
    n
}

impl Names {
    /// One file of the names step: all its objects `add`ed once `load` read the whole file (a
    /// file that fails adds nothing), else a note: `what` names the names ("PVC"), `give` the
    /// option to give ("--pvs-json with --pods-json"). True when the file was read.
    fn add_file<T>(
        &mut self,
        path: Option<&std::path::Path>,
        (what, give): (&str, &str),
        ctx: &Ctx,
        load: impl FnOnce(&std::path::Path, &mut dyn FnMut(T)) -> Result<usize, plugin::Unknown>,
        add: impl Fn(&mut Names, &T),
    ) -> bool {
        let Some(p) = path else {
            self.notes
                .push(format!("{what} names not resolved: give {give}"));
            return false;
        };
        ctx.stage(format!("resolving names: reading {}", p.display()));
        let mut objects = Vec::new();
        match load(p, &mut |o| objects.push(o)) {
            Ok(_) => {
                for o in &objects {
                    add(self, o);
                }
                true
            }
            Err(e) => {
                self.notes.push(format!("{what} names not resolved: {e}"));
                false
            }
        }
    }
}

/// The time name lookups may take: what is left of `-t` minus a reserve for evaluating and
/// answering. `None` when too little is left to try.
pub fn lookup_budget(remaining: Duration) -> Option<Duration> {
    let budget = Reserve::share(4, Duration::from_millis(500), Duration::MAX).left(remaining);
    (budget >= Duration::from_millis(200)).then_some(budget)
}

#[cfg_attr(not(feature = "api"), allow(dead_code))]
fn from_api(args: &NamesArgs, wanted: &Wanted, ctx: &Ctx) -> Names {
    let mut n = Names::default();
    let Some(deadline) = lookup_budget(ctx.remaining()).map(|b| Instant::now() + b) else {
        n.notes
            .push("names not resolved: too little of -t left after the node checks".into());
        return n;
    };
    ctx.stage("resolving names: reading the kubeconfig");
    let lookup = Lookup::from_env(args.api.kubeconfig.clone(), args.api.context.clone());
    let mut tried = Vec::new();
    let cfg = lookup.resolve(&mut tried);
    for t in &tried {
        ctx.debug(format!("kube config lookup: {t}"));
    }
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) if e.0.starts_with(crate::config::NO_CREDENTIALS) => {
            let mut s = NO_ACCESS.to_string();
            if !tried.is_empty() {
                s.push_str(&format!(": {}", tried.join("; ")));
            }
            n.notes.push(s);
            return n;
        }
        Err(e) => {
            n.notes.push(format!("names not resolved: {e}"));
            return n;
        }
    };
    let client = match Client::new(&cfg, deadline) {
        Ok(c) => c,
        Err(e) => {
            n.notes.push(format!("names not resolved: {e}"));
            return n;
        }
    };
    ctx.debug(format!("names: {}", client.description));
    let res = lookups(&client, wanted, &mut n, ctx);
    for line in client.requests() {
        ctx.debug(format!("names: {line}"));
    }
    match res {
        Ok(()) => {
            n.finish();
            n.note_missing(wanted, true, true);
        }
        Err(e) => {
            n.finish();
            n.notes.push(format!("names not resolved: {e}"));
        }
    }
    n
}

/// Up to this many of the node's volumes are read one by one; more, and one list of every
/// PersistentVolume costs fewer requests.
const NAMED_PV_LOOKUPS_MAX: usize = 64;

fn lookups(
    client: &Client,
    wanted: &Wanted,
    n: &mut Names,
    ctx: &Ctx,
) -> Result<(), plugin::Unknown> {
    // The node's own volumes by name (a list with `fieldSelector=metadata.name=…`: the `list`
    // verb, one object each), so a run costs what the node mounts, not the cluster's PVs; the
    // whole list only for keys no PV is named after (a CSI volume handle) or when the node mounts
    // so many that one list is cheaper.
    let mut by_handle = Vec::new();
    if wanted.pvs.len() <= NAMED_PV_LOOKUPS_MAX {
        for key in &wanted.pvs {
            ctx.stage(format!("resolving names: reading PersistentVolume {key}"));
            if client.list_pv_named(key, |pv| n.add_pv(wanted, &pv))? == 0 {
                by_handle.push(key.as_str());
            }
        }
    }
    if wanted.pvs.len() > NAMED_PV_LOOKUPS_MAX || !by_handle.is_empty() {
        if !by_handle.is_empty() {
            ctx.debug(format!(
                "names: no PersistentVolume named {}: listing them all to match volume handles",
                by_handle.join(", ")
            ));
        }
        ctx.stage(format!(
            "resolving names: listing PersistentVolumes from {}",
            client.server()
        ));
        client.list_pvs(|pv| n.add_pv(wanted, &pv))?;
    }
    for ns in n.claim_namespaces() {
        ctx.stage(format!("resolving names: listing pods in namespace {ns}"));
        let filter = crate::filter::PodFilter {
            namespaces: vec![ns],
            ..Default::default()
        };
        let mut pods = Vec::new();
        client.list_pods(&filter, |p| {
            // Keep only what is needed: a namespace may hold thousands of pods.
            if wanted.pod_uids.contains(&p.metadata.uid) || p.claim_names().next().is_some() {
                pods.push(p)
            }
        })?;
        for p in &pods {
            n.add_pod(wanted, p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(name: &str, handle: &str, claim: Option<(&str, &str)>) -> PersistentVolume {
        let cr = claim
            .map(|(ns, c)| format!(r#","claimRef":{{"kind":"PersistentVolumeClaim","namespace":"{ns}","name":"{c}"}}"#))
            .unwrap_or_default();
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}"}},"spec":{{"csi":{{"driver":"jiva.csi.openebs.io","volumeHandle":"{handle}"}}{cr}}}}}"#
        ))
        .unwrap()
    }

    fn pod(ns: &str, name: &str, uid: &str, claims: &[&str]) -> Pod {
        let vols: Vec<String> = claims
            .iter()
            .map(|c| format!(r#"{{"name":"v-{c}","persistentVolumeClaim":{{"claimName":"{c}"}}}}"#))
            .collect();
        serde_json::from_str(&format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","uid":"{uid}"}},"spec":{{"nodeName":"k8s02","volumes":[{}]}}}}"#,
            vols.join(",")
        ))
        .unwrap()
    }

    fn cluster(wanted: &Wanted) -> Names {
        Names::build(
            wanted,
            [
                pv(
                    "pvc-a634b9a3",
                    "pvc-a634b9a3",
                    Some(("media", "radarr-config")),
                ),
                pv("pvc-746b2837", "h-746b", Some(("media", "seerr-config"))),
                pv("pvc-other", "pvc-other", Some(("sec", "vault"))),
                pv("pvc-released", "pvc-released", None),
            ],
            [
                pod("media", "radarr-0", "8e1f6a2c", &["radarr-config"]),
                pod("media", "seerr-0", "77aa", &["seerr-config"]),
                pod("media", "seerr-backup", "99bb", &["seerr-config", "x"]),
                pod("sec", "vault-0", "55cc", &["vault"]),
                pod("media", "sonarr-0", "1234", &["sonarr-config"]),
            ],
        )
    }

    #[test]
    fn volume_labels_name_pod_claim_and_pv() {
        let mut w = Wanted::default();
        w.add("pvc-a634b9a3", ["8e1f6a2c"]);
        w.add("h-746b", []);
        w.add("pvc-released", ["dead-uid"]);
        let n = cluster(&w);
        assert_eq!(
            n.volume("pvc-a634b9a3", ["8e1f6a2c"]),
            "media/radarr-0 (PVC media/radarr-config, pvc-a634b9a3)"
        );
        // Found by CSI handle; no UID known: every pod using the claim, sorted.
        assert_eq!(
            n.volume("h-746b", []),
            "media/seerr-0, media/seerr-backup (PVC media/seerr-config, h-746b)"
        );
        // No claim: the PV name alone (the UID did not resolve either).
        assert_eq!(n.volume("pvc-released", ["dead-uid"]), "pvc-released");
        assert_eq!(n.pod_or_uid("dead-uid"), "dead-uid");
        assert_eq!(n.pod("8e1f6a2c").as_deref(), Some("media/radarr-0"));
        // Unwanted things are not kept.
        assert!(n.claim("pvc-other").is_none());
        assert!(n.pod("55cc").is_none());
        assert!(n.pod("1234").is_none());
        assert_eq!(
            n.claim_namespaces().into_iter().collect::<Vec<_>>(),
            ["media"]
        );
    }

    #[test]
    fn subject_names_pv_claim_and_pod_never_the_node() {
        let mut w = Wanted::default();
        w.add("pvc-a634b9a3", ["8e1f6a2c"]);
        w.add("h-746b", ["77aa", "99bb"]);
        w.add("pvc-released", ["dead-uid"]);
        let n = cluster(&w);
        assert_eq!(
            n.subject("pvc-a634b9a3", ["8e1f6a2c"]),
            plugin::Subject::new()
                .namespace("media")
                .pod("radarr-0")
                .pvc("radarr-config")
                .pv("pvc-a634b9a3")
        );
        // Two pods: no pod field, the claim's namespace stays.
        assert_eq!(
            n.subject("h-746b", ["77aa", "99bb"]),
            plugin::Subject::new()
                .namespace("media")
                .pvc("seerr-config")
                .pv("h-746b")
        );
        assert_eq!(
            n.subject("pvc-released", ["dead-uid"]),
            plugin::Subject::new().pv("pvc-released")
        );
        assert_eq!(n.subject("", []), plugin::Subject::new());
    }

    #[test]
    fn labels_with_partial_knowledge_and_many_pods() {
        let mut n = Names::default();
        n.claims
            .insert("pvc-1".into(), ("media".into(), "data".into()));
        assert_eq!(n.volume("pvc-1", []), "PVC media/data (pvc-1)");
        n.pods.insert(
            "u1".into(),
            PodName {
                namespace: "media".into(),
                name: "a".into(),
                node: None,
            },
        );
        assert_eq!(n.volume("pvc-2", ["u1"]), "media/a (pvc-2)");
        n.claim_pods.insert(
            ("media".into(), "data".into()),
            (0..5).map(|i| format!("media/p{i}")).collect(),
        );
        assert_eq!(
            n.volume("pvc-1", []),
            "media/p0, media/p1, media/p2 +2 more (PVC media/data, pvc-1)"
        );
    }

    #[test]
    fn missing_things_are_noted() {
        let mut w = Wanted::default();
        w.add("pvc-a634b9a3", ["8e1f6a2c", "gone"]);
        w.add("pvc-nope", []);
        let mut n = cluster(&w);
        n.note_missing(&w, true, true);
        assert_eq!(
            n.notes,
            [
                "no bound PersistentVolume named pvc-nope: its claim is not named",
                "no pod with UID gone found in the namespaces claiming the volumes (pod deleted?)"
            ]
        );
    }

    /// Names options naming a kubeconfig that does not exist.
    fn missing_kubeconfig() -> NamesArgs {
        NamesArgs {
            api: ApiArgs {
                kubeconfig: Some("/nonexistent/kubeconfig".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn nothing_wanted_or_off_does_no_io() {
        let ctx = Ctx::for_test(Duration::from_secs(5));
        // A kubeconfig that does not exist would be an error note if it were read.
        let args = missing_kubeconfig();
        assert_eq!(resolve(&args, &Wanted::default(), &ctx), Names::default());
        let mut w = Wanted::default();
        w.add("pvc-1", []);
        let off = NamesArgs {
            no_names: true,
            ..args.clone()
        };
        assert_eq!(resolve(&off, &w, &ctx), Names::default());
        let n = resolve(&args, &w, &ctx);
        assert_eq!(n.notes.len(), 1);
        assert!(
            n.notes[0].starts_with("names not resolved: ")
                && n.notes[0].contains("/nonexistent/kubeconfig"),
            "{:?}",
            n.notes
        );
    }

    #[test]
    fn files_only_never_reads_a_kubeconfig() {
        let ctx = Ctx::for_test(Duration::from_secs(5));
        let args = missing_kubeconfig();
        let mut w = Wanted::default();
        assert_eq!(resolve_files_only(&args, &w, &ctx), Names::default());
        w.add("pvc-1", []);
        assert_eq!(resolve_files_only(&args, &w, &ctx).notes, [NO_API_BUILD]);
    }

    #[test]
    fn no_credentials_is_no_api_access() {
        // A lookup that finds nothing: only the flagless path with an empty environment.
        let l = Lookup {
            home: Some("/nonexistent".into()),
            ..Default::default()
        };
        let e = l.resolve(&mut vec![]).unwrap_err();
        assert!(e.0.starts_with(crate::config::NO_CREDENTIALS), "{e}");
    }

    #[test]
    fn files_only_and_missing_pvs_file() {
        let dir = std::env::temp_dir().join(format!("kube-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pods = dir.join("pods.json");
        std::fs::write(
            &pods,
            r#"{"kind":"List","items":[{"metadata":{"name":"radarr-0","namespace":"media","uid":"8e1f6a2c"},
               "spec":{"volumes":[{"name":"c","persistentVolumeClaim":{"claimName":"radarr-config"}}]}}]}"#,
        )
        .unwrap();
        let pvs = dir.join("pvs.json");
        std::fs::write(
            &pvs,
            r#"{"kind":"List","items":[{"metadata":{"name":"pvc-a634b9a3"},
               "spec":{"claimRef":{"namespace":"media","name":"radarr-config"}}}]}"#,
        )
        .unwrap();
        let ctx = Ctx::for_test(Duration::from_secs(5));
        let mut w = Wanted::default();
        w.add("pvc-a634b9a3", ["8e1f6a2c"]);
        let mut args = NamesArgs::default();
        args.pods.pods_json = Some(pods.clone());
        args.pvs.pvs_json = Some(pvs);
        let n = resolve(&args, &w, &ctx);
        assert!(n.notes.is_empty(), "{:?}", n.notes);
        assert_eq!(
            n.volume("pvc-a634b9a3", ["8e1f6a2c"]),
            "media/radarr-0 (PVC media/radarr-config, pvc-a634b9a3)"
        );
        args.pvs.pvs_json = None;
        let n = resolve(&args, &w, &ctx);
        assert_eq!(
            n.volume("pvc-a634b9a3", ["8e1f6a2c"]),
            "media/radarr-0 (pvc-a634b9a3)"
        );
        assert_eq!(
            n.notes,
            ["PVC names not resolved: give --pvs-json with --pods-json"]
        );
        args.pods.pods_json = Some(dir.join("missing.json"));
        let n = resolve(&args, &w, &ctx);
        assert!(n
            .notes
            .iter()
            .any(|s| s.starts_with("pod names not resolved: cannot read --pods-json")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lookup_budget_keeps_a_reserve() {
        assert_eq!(lookup_budget(Duration::from_millis(600)), None);
        assert_eq!(
            lookup_budget(Duration::from_secs(8)),
            Some(Duration::from_secs(6))
        );
        assert_eq!(
            lookup_budget(Duration::from_secs(1)),
            Some(Duration::from_millis(500))
        );
    }
}
