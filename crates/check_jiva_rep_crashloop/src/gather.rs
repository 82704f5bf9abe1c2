//! Which pods are Jiva replicas or controllers, and reading them (and the PVs' claims) from the
//! API or files: plain [`Data`] for `evaluate`.

use crate::{
    judge, Data, Opts, Replica, CONTROLLER_LABELS, CSI_CTRL_NAME, CSI_NAME, LEGACY_CTRL_NAME,
    LEGACY_NAME, PVC_LABEL, PV_LABEL, REPLICA_LABELS,
};
use kube::{Pod, PodFilter};
use plugin::{Ctx, Status, Unknown};
use regex_lite::Regex;
use std::collections::BTreeMap;

/// A controller: (pv from its label or name).
fn match_controller(p: &Pod) -> Option<Option<String>> {
    let labels = &p.metadata.labels;
    let by_label = CONTROLLER_LABELS
        .iter()
        .any(|(k, v)| labels.get(*k).map(|s| s.as_str()) == Some(*v));
    let by_name = [&*CSI_CTRL_RE, &*LEGACY_CTRL_RE]
        .into_iter()
        .find_map(|re| re.captures(&p.metadata.name))
        .and_then(|c| c.name("pv").map(|m| m.as_str().to_string()));
    // By name only with Jiva's labels (`<x>-ctrl-<hash>-<id>` is a common Deployment pod name).
    let jiva = labels.get("openebs.io/cas-type").map(|s| s.as_str()) == Some("jiva")
        || labels.contains_key(PV_LABEL);
    (by_label || (by_name.is_some() && jiva)).then(|| {
        labels
            .get(PV_LABEL)
            .filter(|v| !v.is_empty())
            .cloned()
            .or(by_name)
    })
}

/// How a replica was recognised.
fn match_replica(p: &Pod, o: &Opts) -> Option<Option<String>> {
    let labels = &p.metadata.labels;
    let name = &p.metadata.name;
    let mut pv_from_name = None;
    let mut hit = REPLICA_LABELS
        .iter()
        .any(|(k, v)| labels.get(*k).map(|s| s.as_str()) == Some(*v));
    for re in [&*CSI_RE, &*LEGACY_RE]
        .into_iter()
        .chain(o.name_regex.as_ref())
    {
        if let Some(c) = re.captures(name) {
            hit = true;
            if pv_from_name.is_none() {
                pv_from_name = c.name("pv").map(|m| m.as_str().to_string());
            }
        }
    }
    if o.selector.as_ref().is_some_and(|s| s.matches(labels)) {
        hit = true;
    }
    hit.then(|| {
        labels
            .get(PV_LABEL)
            .filter(|v| !v.is_empty())
            .cloned()
            .or(pv_from_name)
    })
}

static CSI_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(CSI_NAME).unwrap());
static LEGACY_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(LEGACY_NAME).unwrap());
static CSI_CTRL_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(CSI_CTRL_NAME).unwrap());
static LEGACY_CTRL_RE: std::sync::LazyLock<Regex> =
    std::sync::LazyLock::new(|| Regex::new(LEGACY_CTRL_NAME).unwrap());

/// Reduce a pod to a [`Replica`] if it is one.
pub fn replica_of(p: &Pod, o: &Opts) -> Option<Replica> {
    let (pv, controller) = match match_controller(p) {
        Some(pv) => (pv, true),
        None => (match_replica(p, o)?, false),
    };
    let statuses: Vec<_> = p.all_container_statuses().collect();
    let worst = statuses.iter().max_by_key(|c| c.restart_count);
    let backoff = statuses.iter().any(|c| {
        c.state
            .waiting
            .as_ref()
            .is_some_and(|w| w.reason == "CrashLoopBackOff")
    });
    let regular_ready = !p.status.container_statuses.is_empty()
        && p.status.container_statuses.iter().all(|c| c.ready);
    let ready_cond = p.condition("Ready");
    Some(Replica {
        namespace: p.metadata.namespace.clone(),
        name: p.metadata.name.clone(),
        node: p.spec.node_name.clone().unwrap_or_default(),
        pv,
        controller,
        claim: p
            .metadata
            .labels
            .get(PVC_LABEL)
            .filter(|c| !c.is_empty())
            .cloned(),
        ready: p.status.phase == "Running"
            && p.metadata.deletion_timestamp.is_none()
            && regular_ready
            && ready_cond.is_none_or(|c| c.status == "True"),
        phase: p.status.phase.clone(),
        restarts: worst.map(|c| c.restart_count).unwrap_or(0),
        backoff,
        waiting: worst
            .and_then(|c| c.state.waiting.as_ref())
            .map(|w| w.reason.clone())
            .unwrap_or_default(),
        last_exit: worst
            .and_then(|c| c.last_state.terminated.as_ref())
            .map(|t| (t.exit_code, t.reason.clone(), t.finished_at)),
        not_ready_since: ready_cond
            .filter(|c| c.status != "True")
            .and_then(|c| c.last_transition_time),
        evict_after: crate::status::EVICTION_TAINTS
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    crate::status::evict_after(&p.spec.tolerations, t),
                )
            })
            .collect(),
    })
}

/// All I/O: the pods of the namespaces, from the API or a file.
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let filter = PodFilter {
        namespaces: opts.namespace.clone(),
        node: None,
        labels: None,
    };
    let mut d = Data {
        scope: filter.describe().replace("on all nodes ", ""),
        namespaces: opts.namespace.clone(),
        ..Default::default()
    };
    // Bounded (issue 27, finding 3): past REPLICAS_MAX replicas are counted, not kept, and
    // the answer is UNKNOWN naming the cap (the verdicts group replicas per volume).
    let mut over = 0usize;
    let mut take = |p: Pod| {
        if let Some(r) = replica_of(&p, opts) {
            if d.replicas.len() < REPLICAS_MAX {
                d.replicas.push(r)
            } else {
                over += 1;
            }
        }
    };
    match &opts.pods.pods_json {
        Some(path) => {
            ctx.stage(format!("reading {}", path.display()));
            let n = kube::load_pods_json(path, &filter, &mut take)?;
            ctx.debug(format!("{n} pods from {}", path.display()));
            too_many(over)?;
            if opts.jiva_status == "required" {
                d.status_unreadable = Some(
                    "read from the API only, not from --pods-json (--jiva-status required)".into(),
                );
            }
        }
        None => {
            let client = kube::connect(&opts.api, ctx)?;
            ctx.stage(format!(
                "listing pods {} from {}",
                filter.describe(),
                client.server()
            ));
            client.list_pods(&filter, &mut take)?;
            too_many(over)?;
            if opts.jiva_status != "off" {
                opts.read_jiva_volumes(&client, ctx, &mut d);
            }
            // The claims of the volumes it will alert on: one paged list of PVs, only when
            // something is unhealthy (a healthy cluster costs no extra request). A failure
            // (RBAC without `list persistentvolumes`) leaves the PV names, with a note.
            let now = kube::time::now();
            let min_tol = opts.policy().min_toleration;
            if d.replicas.iter().any(|r| {
                r.pv.is_some()
                    && (!r.ready
                        || judge(r, &opts.policy(), now).0 != Status::Ok
                        || (r.controller
                            && min_tol.is_some_and(|m| {
                                r.evict_after.iter().any(|(_, s)| {
                                    s.is_some_and(|s| (s.max(0) as u64) < m.as_secs())
                                })
                            })))
            }) || d.volumes.iter().any(|v| !volume_ok(v))
            {
                ctx.stage(format!(
                    "listing PersistentVolumes from {}",
                    client.server()
                ));
                let mut claims = BTreeMap::new();
                let wanted = replica_pvs(&d);
                match client.list_pvs(|pv| {
                    if wanted.contains(pv.metadata.name.as_str()) {
                        add_claim(&mut claims, &pv)
                    }
                }) {
                    Ok(_) => d.claims = claims,
                    Err(e) => d.notes.push(format!("PVC names not resolved: {}", e.0)),
                }
            }
            for line in client.requests() {
                ctx.debug(line);
            }
        }
    }
    if let Some(path) = &opts.pvs.pvs_json {
        ctx.stage(format!("reading {}", path.display()));
        let mut claims = BTreeMap::new();
        let wanted = replica_pvs(&d);
        kube::load_pvs_json(path, |pv| {
            if wanted.contains(pv.metadata.name.as_str()) {
                add_claim(&mut claims, &pv)
            }
        })?;
        d.claims = claims;
    }
    Ok(d)
}

/// At most this many Jiva replica pods are kept (3 per volume: 16 000 volumes); past it the
/// answer is UNKNOWN naming the cap, so memory stays bounded whatever a file or an API server
/// sends.
pub const REPLICAS_MAX: usize = 50_000;

fn too_many(over: usize) -> Result<(), Unknown> {
    if over == 0 {
        return Ok(());
    }
    Err(Unknown(format!(
        "more than {REPLICAS_MAX} Jiva replica pods ({} more not kept: REPLICAS_MAX, the cap of \
         this check): not judged; narrow it with --namespace",
        kube::checks::stuck::grouped(over)
    )))
}

/// The PVs the replicas and JivaVolumes belong to: only their claims are kept (a cluster's other
/// PVs are not).
fn replica_pvs(d: &Data) -> std::collections::BTreeSet<String> {
    d.replicas
        .iter()
        .filter_map(|r| r.pv.clone())
        .chain(d.volumes.iter().map(|v| v.pv.clone()))
        .collect()
}

/// A JivaVolume with nothing to report (its claim need not be looked up).
fn volume_ok(v: &crate::status::JivaVolume) -> bool {
    crate::status::judge_volume(v, "", &[]).0.status == Status::Ok
}

impl Opts {
    /// Jiva's own status: is the JivaVolume resource served (API discovery, which every
    /// authenticated identity may read), then the JivaVolumes of each namespace. A resource not
    /// served is a note (`auto`: legacy Jiva has none) or UNKNOWN (`required`); a failed list
    /// (403: the rule to grant) is UNKNOWN.
    fn read_jiva_volumes(&self, client: &kube::Client, ctx: &Ctx, d: &mut Data) {
        use crate::status::{JivaVolumeObj, JIVA_GROUP_VERSION, JIVA_RESOURCE};
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Discovery {
            resources: Vec<DiscRes>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct DiscRes {
            name: String,
        }
        let gv_path = format!("/apis/{JIVA_GROUP_VERSION}");
        ctx.stage(format!("reading {gv_path} from {}", client.server()));
        let served = match client.send::<Discovery>("GET", &gv_path, &[], None) {
            Ok(disc) => disc.resources.iter().any(|r| r.name == JIVA_RESOURCE),
            Err(e) if e.status == Some(404) => false,
            Err(e) => {
                d.status_unreadable = Some(e.error.0);
                return;
            }
        };
        if !served {
            let why = format!(
                "the API server does not serve {JIVA_RESOURCE}.{} (the JivaVolume CRD of \
                 jiva-operator is not installed)",
                JIVA_GROUP_VERSION.replace("/", " ")
            );
            if self.jiva_status == "required" {
                d.status_unreadable = Some(format!("{why}; --jiva-status required"));
            } else {
                d.notes.push(format!(
                    "Jiva's own status not read: {why}; legacy (maya) Jiva volumes have none, \
                     pods only judged (--jiva-status required makes this UNKNOWN)"
                ));
            }
            return;
        }
        for ns in &self.namespace {
            let path = format!("/apis/{JIVA_GROUP_VERSION}/namespaces/{ns}/{JIVA_RESOURCE}");
            ctx.stage(format!("listing {path} from {}", client.server()));
            let mut n = 0usize;
            let res = client.list(&path, &kube::ListParams::default(), |o: JivaVolumeObj| {
                n += 1;
                if d.volumes.len() < REPLICAS_MAX {
                    d.volumes.push(o.into());
                }
            });
            if let Err(e) = res {
                d.status_unreadable = Some(e.0);
                return;
            }
            if n > REPLICAS_MAX {
                d.status_unreadable = Some(format!(
                    "more than {REPLICAS_MAX} JivaVolumes: not all judged; narrow it with --namespace"
                ));
                return;
            }
        }
    }
}

fn add_claim(claims: &mut BTreeMap<String, String>, pv: &kube::PersistentVolume) {
    if let Some(c) = pv.spec.claim_ref.as_ref().filter(|c| !c.name.is_empty()) {
        claims.insert(
            pv.metadata.name.clone(),
            format!("{}/{}", c.namespace, c.name),
        );
    }
}
