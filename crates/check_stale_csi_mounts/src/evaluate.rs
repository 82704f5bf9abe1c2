//! Every decision, on plain data: who each mount belongs to, what is wrong with it, and the
//! report.

use crate::cluster::{ApiUse, ClusterView};
use crate::text::{
    headline, hint, identity_line, kind_word, mount_subject, named, plural, short, CLASS_ORDER,
};
use crate::{CsiMount, Data, Policy};
use node::kubelet::Kind;
use node::probe::Outcome;
use plugin::{Finding, Perfdata, Report, Status};
use regex::Regex;

/// Who a mount belongs to, as far as the path, vol_data.json, the other mounts and the cluster tell.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub pv: Option<String>,
    /// Where the PV name came from (`path`, `vol_data.json`, `pod mount`, `PV list`, `volumeHandle`).
    pub pv_from: &'static str,
    pub driver: Option<String>,
    pub handle: Option<String>,
    pub pod_uid: Option<String>,
}

pub(crate) fn is_pod_mount(k: &Kind) -> bool {
    matches!(k, Kind::PodVolume { .. } | Kind::PodBlock { .. })
}

pub(crate) fn is_staging(k: &Kind) -> bool {
    matches!(k, Kind::CsiStaging { .. } | Kind::BlockStaging { .. })
}

/// Work out PV, driver, handle and pod of every mount (pure).
pub fn identify(mounts: &[CsiMount], cluster: &ClusterView) -> Vec<Identity> {
    mounts
        .iter()
        .map(|m| identify_one(m, mounts, cluster))
        .collect()
}

fn identify_one(m: &CsiMount, mounts: &[CsiMount], cluster: &ClusterView) -> Identity {
    let vd = m.vol_data.clone().unwrap_or_default();
    let mut id = Identity {
        driver: vd.driver_name.clone(),
        handle: vd.volume_handle.clone(),
        ..Default::default()
    };
    match &m.kind {
        Kind::PodVolume { pod_uid, name, .. } => {
            (id.pv, id.pv_from) = (Some(name.clone()), "path");
            id.pod_uid = Some(pod_uid.clone());
        }
        Kind::PodBlock { pod_uid, name } => {
            (id.pv, id.pv_from) = (Some(name.clone()), "path");
            id.pod_uid = pod_uid.clone();
        }
        Kind::BlockStaging { pv } => (id.pv, id.pv_from) = (Some(pv.clone()), "path"),
        Kind::CsiStaging { driver, pv, hash } => {
            if id.driver.is_none() {
                id.driver = driver.clone();
            }
            if let Some((pv, from)) = staging_pv(m, pv, hash, &vd, &id, mounts, cluster) {
                (id.pv, id.pv_from) = (Some(pv), from);
            }
        }
        Kind::PodSubpath { .. } | Kind::PluginDevice { .. } => {}
    }
    if id.driver.is_none() {
        // An in-tree network volume (NFS, iSCSI, …): its plugin is its driver.
        id.driver = m.kind.in_tree_plugin();
    }
    if id.driver.is_none() {
        // A pod mount without vol_data.json: the staging mount of the same device knows.
        id.driver = mounts
            .iter()
            .filter(|o| o.major == m.major && o.minor == m.minor)
            .find_map(|o| match &o.kind {
                Kind::CsiStaging { driver, .. } => driver.clone(),
                _ => None,
            });
    }
    if id.driver.is_none() {
        if let (Some(pv), Some(pvs)) = (&id.pv, &cluster.pvs) {
            id.driver = pvs
                .iter()
                .find(|p| &p.name == pv)
                .and_then(|p| p.driver.clone());
        }
    }
    id
}

/// The PV of a CSI staging mount and where its name came from, first that tells: the path (old
/// scheme), vol_data.json's specVolID, a pod mount of the same device, the PV list (by volume
/// handle or its sha256 in the path), else the volume handle itself.
fn staging_pv(
    m: &CsiMount,
    path_pv: &Option<String>,
    hash: &Option<String>,
    vd: &node::kubelet::VolData,
    id: &Identity,
    mounts: &[CsiMount],
    cluster: &ClusterView,
) -> Option<(String, &'static str)> {
    if let Some(pv) = path_pv {
        return Some((pv.clone(), "path"));
    }
    if let Some(spec) = vd.spec_vol_id.clone().filter(|s| !s.is_empty()) {
        return Some((spec, "vol_data.json"));
    }
    let same_device = mounts.iter().find(|o| {
        matches!(o.kind, Kind::PodVolume { .. }) && o.major == m.major && o.minor == m.minor
    });
    if let Some(p) = same_device {
        return match &p.kind {
            Kind::PodVolume { name, .. } => Some((name.clone(), "pod mount")),
            _ => None,
        };
    }
    let listed = cluster.pvs.as_ref().and_then(|pvs| {
        pvs.iter().find(|pv| {
            let h = pv.volume_handle.as_deref();
            (id.driver.is_none() || pv.driver == id.driver)
                && h.is_some()
                && (h == id.handle.as_deref()
                    || hash.as_deref() == h.map(node::kubelet::staging_hash).as_deref())
        })
    });
    if let Some(pv) = listed {
        return Some((pv.name.clone(), "PV list"));
    }
    id.handle.clone().map(|h| (h, "volumeHandle"))
}

/// --include/--exclude on the mount point, PV and driver (pure).
pub fn selected(m: &CsiMount, id: &Identity, include: &[Regex], exclude: &[Regex]) -> bool {
    let mp = m.mount_point.to_string_lossy();
    let subjects = [Some(mp.as_ref()), id.pv.as_deref(), id.driver.as_deref()];
    let hit = |re: &Regex| subjects.iter().flatten().any(|s| re.is_match(s));
    (include.is_empty() || include.iter().any(hit)) && !exclude.iter().any(hit)
}

/// A problem of one mount, most urgent first.
#[derive(Debug, Clone, PartialEq)]
pub enum Problem {
    Corrupted(String),
    /// No answer: why (`no answer in 3s`, or still hung from an earlier run).
    Hung(String),
    /// The probe failed in a way that says nothing about the mount (fork failed, other errno).
    NotProbed(String),
    Orphaned,
    PvGone,
    NotAttached,
    Unpublished,
}

impl Problem {
    pub fn status(&self) -> Status {
        match self {
            Problem::Unpublished => Status::Warning,
            Problem::NotProbed(_) => Status::Unknown,
            _ => Status::Critical,
        }
    }
    /// The finding's machine-readable kind.
    pub fn signal(&self) -> &'static str {
        match self {
            Problem::Corrupted(_) => "stale_mount",
            Problem::Hung(_) => "mount_hung",
            Problem::NotProbed(_) => "not_probed",
            Problem::Orphaned => "orphaned_mount",
            Problem::PvGone => "staging_pv_gone",
            Problem::NotAttached => "staging_not_attached",
            Problem::Unpublished => "staging_unpublished",
        }
    }
    /// Counts as a stale mount (everything but "could not probe").
    pub fn is_stale(&self) -> bool {
        !matches!(self, Problem::NotProbed(_))
    }
}

/// What is wrong with one mount (pure).
pub fn problems(i: usize, data: &Data, ids: &[Identity]) -> Vec<Problem> {
    let m = &data.mounts[i];
    let id = &ids[i];
    let c = &data.cluster;
    let mut out = Vec::new();
    match &m.probe {
        Some(o) if o.is_corrupted() => out.push(Problem::Corrupted(o.describe())),
        Some(o @ (Outcome::Hung { .. } | Outcome::StillHung { .. })) => {
            out.push(Problem::Hung(o.describe()))
        }
        Some(Outcome::ProbeError(e)) => out.push(Problem::NotProbed(e.clone())),
        // Gone between reading the table and probing: unmounted meanwhile, nothing stale.
        Some(Outcome::Failed { errno, .. }) if *errno == nix::errno::Errno::ENOENT => {}
        Some(o @ Outcome::Failed { .. }) => out.push(Problem::NotProbed(o.describe())),
        _ => {}
    }
    if is_pod_mount(&m.kind) {
        if let (Some(uid), Some(mut here)) = (&id.pod_uid, c.pods_on_node()) {
            if !here.any(|p| &p.uid == uid) {
                out.push(Problem::Orphaned);
            }
        }
    }
    if is_staging(&m.kind) {
        if c.pv_exists(id.pv.as_deref(), id.driver.as_deref(), id.handle.as_deref()) == Some(false)
        {
            out.push(Problem::PvGone);
        } else if let (Some(pv), Some(driver)) = (&id.pv, &id.driver) {
            if c.needs_attachment(driver) && c.attached_here(pv) == Some(false) {
                out.push(Problem::NotAttached);
            }
        }
        let published = data
            .mounts
            .iter()
            .zip(ids)
            .any(|(o, oid)| match (&m.kind, &o.kind) {
                (Kind::CsiStaging { .. }, Kind::PodVolume { .. }) => {
                    (o.major == m.major && o.minor == m.minor)
                        || (id.pv.is_some() && oid.pv == id.pv)
                }
                (Kind::BlockStaging { .. }, Kind::PodBlock { .. }) => {
                    id.pv.is_some() && oid.pv == id.pv
                }
                _ => false,
            });
        if !published {
            out.push(Problem::Unpublished);
        }
    }
    out
}

/// Counts of the selected mounts' problems, for state, summary and perfdata.
#[derive(Debug, Default)]
struct Tally {
    stale: usize,
    hung: usize,
    orphaned: usize,
    not_probed: usize,
    /// Mounts per class of their most urgent problem, in the order first met.
    by_class: Vec<(&'static str, usize)>,
}

/// Every decision, on plain data.
pub fn evaluate(data: &Data, policy: &Policy) -> Report {
    let c = &data.cluster;
    let sel: Vec<usize> = (0..data.mounts.len())
        .filter(|&i| data.mounts[i].selected)
        .collect();
    if let Some(r) = wrong_node(data, &sel) {
        return r;
    }
    let ids = identify(&data.mounts, c);
    // Names an operator knows, from what the cross-checks read (the shared resolver's format).
    let names = crate::cluster::names(c);
    let mut report = Report::new(Status::Ok, "").unit("mount", "mounts");
    let mut tally = Tally::default();
    for &i in &sel {
        report = report.finding(judge_mount(i, data, &ids, &names, &mut tally));
    }

    let thresholds = &policy.thresholds;
    let use_thresholds = thresholds.warning.is_some() || thresholds.critical.is_some();
    report.status = if use_thresholds {
        let s = thresholds.evaluate(tally.stale as f64);
        if tally.not_probed > 0 {
            s.worst(Status::Unknown)
        } else {
            s
        }
    } else {
        report.worst_finding()
    };
    report.summary = summary(data, sel.len(), &mut tally);
    report = cross_check_state(report, c);

    if c.pvs.is_some() && c.attachments.is_none() {
        report = report.note(
            "VolumeAttachment cross-check skipped: no VolumeAttachment in --pvs-json (kubectl get pv,volumeattachments,csidrivers -o json)",
        );
    }
    let excluded = data.mounts.len() - sel.len();
    if excluded > 0 {
        report = report.note(format!(
            "{} excluded by --include/--exclude",
            plural(excluded, "CSI mount", "CSI mounts")
        ));
    }
    if use_thresholds {
        report = report.note("state from -w/-c on the number of stale mounts");
    }
    for n in &data.notes {
        report = report.note(n.clone());
    }

    report
        .perf(Perfdata::new("csi_mounts", sel.len() as f64).min(0.0))
        .perf(
            Perfdata::new("stale_mounts", tally.stale as f64)
                .thresholds(thresholds)
                .min(0.0),
        )
        .perf(Perfdata::new("hung_mounts", tally.hung as f64).min(0.0))
        .perf(Perfdata::new("orphaned_mounts", tally.orphaned as f64).min(0.0))
}

/// A pod list without any pod on this node while pods have CSI mounts here: a wrong node name
/// would make every pod mount look orphaned, so refuse to guess.
fn wrong_node(data: &Data, sel: &[usize]) -> Option<Report> {
    let c = &data.cluster;
    let here = c.pods_on_node()?;
    let has_pod_mounts = sel.iter().any(|&i| is_pod_mount(&data.mounts[i].kind));
    if here.count() > 0 || !has_pod_mounts {
        return None;
    }
    let mut nodes: Vec<&str> = c
        .pods
        .iter()
        .flatten()
        .filter_map(|p| p.node.as_deref())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    let seen = if nodes.is_empty() {
        "none".to_string()
    } else {
        nodes.iter().take(5).copied().collect::<Vec<_>>().join(", ")
    };
    Some(Report::unknown(match c.api {
        // The API was asked for this node's pods only: no other node to show.
        ApiUse::Used(_) => format!(
            "the API has no pod on node '{}' although pods have CSI mounts here: give --node the kubelet's node name (kubectl get nodes)",
            c.node
        ),
        _ => format!(
            "--pods-json has no pod on node '{}' although pods have CSI mounts here: give --node (nodes seen: {seen}) and use kubectl get pods -A",
            c.node
        ),
    }))
}

/// The finding of one selected mount (counted into `tally`).
fn judge_mount(
    i: usize,
    data: &Data,
    ids: &[Identity],
    names: &kube::Names,
    tally: &mut Tally,
) -> Finding {
    let (m, id, c) = (&data.mounts[i], &ids[i], &data.cluster);
    let probs = problems(i, data, ids);
    if probs.iter().any(|p| matches!(p, Problem::Hung(_))) {
        tally.hung += 1;
    }
    if probs.contains(&Problem::Orphaned) {
        tally.orphaned += 1;
    }
    if probs.iter().any(Problem::is_stale) {
        tally.stale += 1;
    } else if !probs.is_empty() {
        tally.not_probed += 1;
    }
    let note = m.vol_data_error.as_ref().map(|e| format!("note: {e}"));
    let Some(primary) = probs.first() else {
        let f = Finding::new(
            Status::Ok,
            format!("healthy {} {}", kind_word(&m.kind), m.mount_point.display()),
        )
        .signal("healthy")
        .subject(mount_subject(m, id, c, names))
        .detail(identity_line(m, id, c, names));
        return match note {
            Some(n) => f.detail(n),
            None => f,
        };
    };
    match tally
        .by_class
        .iter_mut()
        .find(|(k, _)| *k == short(primary))
    {
        Some((_, n)) => *n += 1,
        None => tally.by_class.push((short(primary), 1)),
    }
    let mut text = headline(primary, m, id, c);
    if let Some(who) = named(id, names) {
        text.push_str(&format!(" — {who}"));
    }
    let mut f = Finding::new(primary.status(), text)
        .signal(primary.signal())
        .subject(mount_subject(m, id, c, names))
        .detail(identity_line(m, id, c, names));
    let also: Vec<&str> = probs[1..].iter().map(short).collect();
    if !also.is_empty() {
        f = f.detail(format!("also: {}", also.join(", ")));
    }
    if let Some(n) = note {
        f = f.detail(n);
    }
    f.detail(hint(primary, m, id, c))
}

/// The summary before the cross-check part: the stale classes, or the healthy count, or where it
/// looked when there was nothing.
fn summary(data: &Data, n: usize, tally: &mut Tally) -> String {
    let mut summary = if tally.stale > 0 {
        tally
            .by_class
            .sort_by_key(|(k, _)| CLASS_ORDER.iter().position(|c| c == k));
        let parts: Vec<String> = tally
            .by_class
            .iter()
            .filter(|(k, _)| *k != "not probed")
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let mut s = format!(
            "{} of {} stale: {}",
            tally.stale,
            plural(n, "CSI mount", "CSI mounts"),
            parts.join(", ")
        );
        // A mount is counted above by its most urgent problem only; perfdata counts every hung
        // and every orphaned mount. Say so where the two differ, so the line and the graph agree.
        let in_class = |k: &str| {
            tally
                .by_class
                .iter()
                .filter(|(c, _)| *c == k)
                .map(|(_, n)| n)
                .sum::<usize>()
        };
        let orphaned_shown = in_class("orphaned pod mount");
        if tally.orphaned > orphaned_shown {
            s.push_str(&format!(
                " ({} orphaned in all, {} of them counted above by a more urgent problem)",
                tally.orphaned,
                tally.orphaned - orphaned_shown
            ));
        }
        s
    } else if n == 0 {
        format!(
            "no CSI mounts under {} (nor in-tree network volume mounts)",
            data.roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!("{} healthy", plural(n, "CSI mount", "CSI mounts"))
    };
    if tally.not_probed > 0 {
        summary.push_str(&format!(", {} not probed", tally.not_probed));
    }
    summary
}

/// What the summary says of the cross-checks: failed (UNKNOWN at least: an OK would hide that
/// half the check did not run), skipped and why, or nothing when both lists were read.
fn cross_check_state(mut report: Report, c: &ClusterView) -> Report {
    match (&c.api, c.pods.is_some(), c.pvs.is_some()) {
        (ApiUse::Failed(e), _, _) => {
            report
                .summary
                .push_str(&format!("; API cross-checks failed: {e}"));
            report.status = report.status.worst(Status::Unknown);
        }
        (ApiUse::Skipped(e), _, _) => {
            report.summary.push_str("; API cross-checks skipped (no Kubernetes credentials: give --kubeconfig or --pods-json/--pvs-json)");
            report = report.note(e.clone());
        }
        (_, false, false) => report
            .summary
            .push_str("; API cross-checks skipped (no --pods-json/--pvs-json)"),
        (_, false, true) => report
            .summary
            .push_str("; pod cross-check skipped (no --pods-json)"),
        (_, true, false) => report
            .summary
            .push_str("; PV cross-check skipped (no --pvs-json)"),
        (_, true, true) => {}
    }
    report
}
