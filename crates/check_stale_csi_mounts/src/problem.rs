//! What can be wrong with one mount ([`Problem`]: its status and signal) and how each mount's
//! problems are found (pure, on the gathered data and identities).

use crate::identity::{is_pod_mount, is_staging, Identity};
use crate::Data;
use node::kubelet::Kind;
use node::probe::Outcome;
use plugin::Status;

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
