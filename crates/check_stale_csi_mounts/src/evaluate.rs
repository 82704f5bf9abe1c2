//! Every decision, on plain data: who each mount belongs to, what is wrong with it, and the
//! report.

use crate::cluster::{ApiUse, ClusterView};
use crate::identity::{identify, is_pod_mount, Identity};
use crate::problem::{problems, Problem};
use crate::text::{
    headline, hint, identity_line, kind_word, mount_subject, named, plural, short, CLASS_ORDER,
};
use crate::Data;
use plugin::{Finding, Perfdata, Report, Status, Thresholds};

/// What decides, from the options: `-w/-c` on the number of stale mounts (none: the classes'
/// own states).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub thresholds: Thresholds,
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
    let ids = identify(&data.mounts, c.pvs.as_deref());
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
    names: &kube::checks::names::Names,
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
    f.next(hint(primary, m, id, c))
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
