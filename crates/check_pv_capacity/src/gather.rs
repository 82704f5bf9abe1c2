//! Everything check_pv_capacity reads from the node, through `node` only: the kubelet's volume
//! mounts grouped into PV filesystems, a bounded probe of each that keeps what `statvfs` says,
//! and the history of earlier runs in the state directory.

use crate::history::{History, Sample};
use crate::Policy;
use node::kubelet;
use node::logs::state;
use node::probe::{self, Outcome, Space};
use node::usage::{DeviceUsage, Scope};
use plugin::deadline::Reserve;
use plugin::{Ctx, Unknown};
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The state file's id (`<state-dir>/pv_capacity.history.json`).
pub const CHECK_ID: &str = "pv_capacity";

/// One PV filesystem as found on the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volume {
    /// `maj:min` of the filesystem.
    pub dev: String,
    /// The PV names the kubelet paths tell (usually one).
    pub names: BTreeSet<String>,
    pub fstype: String,
    pub source: String,
    /// Mount points (the staging mount first when there is one).
    pub mounts: Vec<PathBuf>,
    pub pod_uids: BTreeSet<String>,
    /// Read-only by design: the filesystem is `ro`, or every mount of it is a read-only bind.
    pub read_only: bool,
    /// The probe's outcome and, when it answered, the filesystem's size and use.
    pub probe: Option<Outcome>,
    pub space: Option<Space>,
    /// Earlier samples within the window, this run's last (empty without --state-dir).
    pub history: Vec<Sample>,
}

impl Volume {
    /// The key of its history: the PV name, else the mount source and device.
    pub fn key(&self) -> String {
        match self.names.iter().next() {
            Some(n) => n.clone(),
            None => format!("{}@{}", self.source, self.dev),
        }
    }
}

/// Everything gathered.
#[derive(Debug, Clone, Default)]
pub struct NodeData {
    pub volumes: Vec<Volume>,
    /// This node's name (for the next-step hints).
    pub node_name: Option<String>,
    /// When this run measured (epoch ms).
    pub now_ms: i64,
    /// A history is kept (--state-dir given and usable).
    pub history_kept: bool,
    pub notes: Vec<String>,
}

/// Group the kubelet's volume mounts into PV filesystems, one per device (`maj:min`); block-mode
/// volumes (no filesystem) are left out. Pure.
pub fn group(usage: &DeviceUsage, filter: &node::FilterArgs) -> Vec<Volume> {
    let mut index: HashMap<(u32, u32), usize> = HashMap::new();
    let mut volumes: Vec<Volume> = Vec::new();
    let mut any_rw: Vec<bool> = Vec::new();
    for m in usage.uses().filter(|m| m.kubelet && !m.block) {
        if filter.is_set() && !filter.selects([m.mount_point].into_iter().chain(m.volume)) {
            continue;
        }
        let i = *index.entry(m.dev).or_insert_with(|| {
            volumes.push(Volume {
                dev: format!("{}:{}", m.dev.0, m.dev.1),
                fstype: m.fstype.to_string(),
                source: m.source.to_string(),
                ..Default::default()
            });
            any_rw.push(false);
            volumes.len() - 1
        });
        let v = &mut volumes[i];
        if let Some(n) = m.volume {
            v.names.insert(n.to_string());
        }
        if let Some(u) = m.pod_uid {
            v.pod_uids.insert(u.to_string());
        }
        let super_ro = m.super_options.split(',').any(|o| o == "ro");
        v.read_only = super_ro;
        any_rw[i] |= !m.mount_ro;
        if m.mount_point.ends_with("/globalmount") {
            v.mounts.insert(0, PathBuf::from(m.mount_point));
        } else {
            v.mounts.push(PathBuf::from(m.mount_point));
        }
    }
    for (v, rw) in volumes.iter_mut().zip(any_rw) {
        v.read_only |= !rw;
    }
    volumes.sort_by(|a, b| a.key().cmp(&b.key()).then_with(|| a.dev.cmp(&b.dev)));
    volumes
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Read everything the decision needs, under the deadline, and keep this run's samples.
pub fn gather(o: &crate::Opts, policy: &Policy, ctx: &Ctx) -> Result<NodeData, Unknown> {
    let host = o.host.host();
    if let Some(problem) = host.access_problem() {
        return Err(Unknown(problem));
    }
    // Privilege serves the node's own kubelet roots and mount table only (as check_ro_pvc_mounts).
    let own =
        o.mountinfo.is_own(&host) && kubelet::roots_are_own(&o.kubelet_root.kubelet_root, &host);
    let roots = node::privilege::elevated_if(own, || o.kubelet_root.resolve(&host))?;
    node::privilege::elevated_if(own, || node::args::check_listable(&host, &roots, &["pods"]))
        .map_err(Unknown)?;
    ctx.stage("reading the mount table");
    let mi = o.mountinfo.path(&host);
    ctx.debug(format!("mount table: {}", mi.display()));
    let usage = DeviceUsage::read(&mi, &roots, Scope::Volumes).map_err(Unknown)?;
    let mut volumes = group(&usage, &o.filter);
    if volumes.is_empty() && o.filter.is_set() && !usage.is_empty() {
        return Err(Unknown(format!(
            "{} matched none of the {} mounts under the kubelet roots",
            o.filter.describe(),
            usage.len()
        )));
    }

    ctx.stage("measuring PV filesystems");
    // The probes' timeout: --probe-timeout within what is left less 300 ms, at least 50 ms.
    let timeout = Reserve::fixed(Duration::from_millis(300)).cap(
        o.probe.probe_timeout,
        ctx.remaining(),
        Duration::from_millis(50),
    );
    let targets: Vec<(PathBuf, String)> = volumes
        .iter()
        .map(|v| (host.mount_path(&v.mounts[0]), v.dev.clone()))
        .collect();
    let memory = probe::memory_for(o.run_dir.run_dir.as_deref(), o.host.host_root.as_deref());
    let (outcomes, spaces, mut notes) = node::privilege::elevated_if(own, || {
        probe::probe_remembered_space(
            &targets,
            timeout,
            16,
            memory.as_ref().map_err(|e| e.as_str()),
        )
    });
    for ((v, out), sp) in volumes.iter_mut().zip(outcomes).zip(spaces) {
        v.probe = Some(out);
        v.space = sp;
    }
    let now = now_ms();
    let history_kept = match &o.state_dir {
        Some(dir) => keep_history(dir, &mut volumes, policy, now, &mut notes, ctx),
        None => false,
    };
    Ok(NodeData {
        volumes,
        node_name: host.hostname(),
        now_ms: now,
        history_kept,
        notes,
    })
}

/// Load the history, add this run's samples, save it, and give each volume its samples.
fn keep_history(
    dir: &Path,
    volumes: &mut [Volume],
    policy: &Policy,
    now: i64,
    notes: &mut Vec<String>,
    ctx: &Ctx,
) -> bool {
    ctx.stage("reading the volumes' history");
    let path = state::path(dir, CHECK_ID, "history");
    let mut h: History = match state::load(&path) {
        Ok(h) => h.unwrap_or_default(),
        Err(e) => {
            notes.push(e);
            History::default()
        }
    };
    let newest = h.volumes.values().flatten().map(|s| s.t).max();
    if let Some(ahead) = state::clock_went_back(h.saved_ms, newest, now) {
        let dropped = h.prune(now, policy.predict_window);
        notes.push(state::clock_note(&path, ahead, dropped, "the history"));
    } else {
        h.prune(now, policy.predict_window);
    }
    let samples: Vec<(String, Sample)> = volumes
        .iter()
        .filter_map(|v| {
            let s = v.space?;
            Some((
                v.key(),
                Sample {
                    t: now,
                    total: s.total,
                    used: s.used(),
                    avail: s.avail,
                    iused: s.files_used(),
                    ifree: s.files_free,
                },
            ))
        })
        .collect();
    // A volume that did not answer this run keeps its samples for the next.
    let mut unmeasured: Vec<(String, Vec<Sample>)> = volumes
        .iter()
        .filter(|v| v.space.is_none())
        .filter_map(|v| h.volumes.get(&v.key()).map(|s| (v.key(), s.clone())))
        .collect();
    h.record(&samples, policy.predict_window, now);
    for v in volumes.iter_mut() {
        v.history = h.volumes.get(&v.key()).cloned().unwrap_or_default();
    }
    h.volumes.extend(unmeasured.drain(..));
    ctx.debug(format!(
        "history: {} in {}",
        plugin::count(h.volumes.len(), "volume", "volumes"),
        path.display()
    ));
    match state::save(&path, &h) {
        Ok(()) => true,
        Err(e) => {
            if !notes.contains(&e) {
                notes.push(e);
            }
            false
        }
    }
}
