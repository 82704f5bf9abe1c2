//! Everything check_ro_pvc_mounts reads from the node, through `node` only: the kubelet volume
//! mounts grouped into PV filesystems, their error state in sysfs and a bounded probe of each.

use node::fsstate;
use node::kubelet;
use node::probe::{self, Outcome};
use node::usage::{DeviceUsage, Scope};
use plugin::deadline::Reserve;
use plugin::{Ctx, Unknown};
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

/// One PV filesystem (or block device) as found on the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volume {
    /// `maj:min` of the filesystem, or `block:<dev>` for block-mode volumes.
    pub key: String,
    pub names: BTreeSet<String>,
    pub fstype: String,
    pub source: String,
    pub block_dev: Option<String>,
    /// Options of the filesystem itself (the superblock), comma-separated as in mountinfo.
    pub super_options: String,
    /// (mount point, per-mount read-only)
    pub mounts: Vec<(PathBuf, bool)>,
    pub pod_uids: BTreeSet<String>,
    pub block_mode: bool,
    pub ext4_errors: Option<fsstate::Ext4Errors>,
    pub block_ro: Option<bool>,
    pub probe: Option<Outcome>,
}

/// A filesystem the node itself must be able to write (issue 31): the one holding a kubelet
/// root (pods' directories, volume mounts, plugin sockets), and `/`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFs {
    /// The kubelet roots it holds (empty: only `/`).
    pub kubelet_roots: Vec<PathBuf>,
    /// It is the node's `/`.
    pub is_root: bool,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
    /// Per-mount `ro`.
    pub mount_ro: bool,
    /// Options of the filesystem itself.
    pub super_options: String,
}

/// Everything gathered from the node.
#[derive(Debug, Clone, Default)]
pub struct NodeData {
    pub volumes: Vec<Volume>,
    /// The probes could read any directory (CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE): an
    /// EACCES then means a broken mount (a FUSE daemon refusing), not our lack of rights.
    pub can_read_all: bool,
    pub kernel: Option<(u32, u32, u32)>,
    pub roots: Vec<PathBuf>,
    /// This node's name (for the next-step hints).
    pub node_name: Option<String>,
    /// Notes of the gathering (a stuck probe that could not be remembered).
    pub notes: Vec<String>,
    /// The filesystems of the kubelet roots and of `/`.
    pub node_fs: Vec<NodeFs>,
    /// The PVs' earlier read-only spells and this run's (with `--state-dir`).
    pub memory: Option<node::history::Remembered>,
}

/// The state file's id (`<state-dir>/ro_pvc_mounts.volumes.json`; a run narrowed with
/// `--include`/`--exclude` keeps its own, see [`node::history::scoped`]).
pub const CHECK_ID: &str = "ro_pvc_mounts";

/// Keep this run's read-only PVs (`ro`, PV names) in the memory of the volumes under
/// `--state-dir` (nothing without it) and give `data` what it remembers.
pub fn remember(o: &crate::Opts, data: &mut NodeData, ro: &[String], ctx: &Ctx) {
    if o.state.state_dir.is_none() {
        return;
    }
    ctx.stage("remembering the PVs' read-only spells");
    let seen: Vec<(String, node::history::Kind)> = ro
        .iter()
        .map(|pv| (pv.clone(), node::history::Kind::ReadOnly))
        .collect();
    let id = node::history::scoped(CHECK_ID, &o.filter.describe());
    data.memory = o.state.remember(&id, &seen, plugin::time::now_ms());
}

/// The filesystems holding the kubelet roots and `/`, one entry per mount. Pure.
pub fn node_filesystems(roots: &[PathBuf], held: &[Option<node::Mount>]) -> Vec<NodeFs> {
    let mut out: Vec<(u64, NodeFs)> = Vec::new();
    // `held` is the roots' mounts, then `/`'s.
    for (i, m) in held.iter().enumerate() {
        let Some(m) = m else { continue };
        let k = match out.iter().position(|(id, _)| *id == m.id) {
            Some(k) => k,
            None => {
                out.push((
                    m.id,
                    NodeFs {
                        mount_point: m.mount_point.clone(),
                        fstype: m.fstype.clone(),
                        source: m.source.clone(),
                        mount_ro: m.mount_ro(),
                        super_options: m.super_options.clone(),
                        ..Default::default()
                    },
                ));
                out.len() - 1
            }
        };
        match roots.get(i) {
            Some(r) => out[k].1.kubelet_roots.push(r.clone()),
            None => out[k].1.is_root = true,
        }
    }
    out.into_iter().map(|(_, f)| f).collect()
}

/// Group the kubelet's volume mounts into PV filesystems: one per device (`maj:min`), one per
/// device node for block-mode volumes; ordered by that key as text. Pure.
pub fn group(usage: &DeviceUsage, filter: &node::FilterArgs) -> Vec<Volume> {
    // Grouped by a key borrowed from the map; each volume's own key is written once.
    let mut index: HashMap<(bool, u32, u32, &str), usize> = HashMap::new();
    let mut volumes: Vec<Volume> = Vec::new();
    for m in usage.uses().filter(|m| m.kubelet) {
        if filter.is_set() && !filter.selects([m.mount_point]) {
            continue;
        }
        let block_mode = m.block && matches!(m.fstype, "devtmpfs" | "tmpfs" | "udev");
        let dev_node = m.root.trim_start_matches('/');
        let k = if block_mode {
            (true, 0, 0, dev_node)
        } else {
            (false, m.dev.0, m.dev.1, "")
        };
        let i = *index.entry(k).or_insert_with(|| {
            let mut key = String::new();
            let _ = if block_mode {
                write!(key, "block:{dev_node}")
            } else {
                write!(key, "{}:{}", m.dev.0, m.dev.1)
            };
            volumes.push(Volume {
                key,
                fstype: m.fstype.to_string(),
                source: m.source.to_string(),
                block_mode,
                block_dev: block_mode.then(|| dev_node.to_string()),
                ..Default::default()
            });
            volumes.len() - 1
        });
        let v = &mut volumes[i];
        if let Some(n) = m.volume {
            if !v.names.contains(n) {
                v.names.insert(n.to_string());
            }
        }
        if let Some(u) = m.pod_uid {
            if !v.pod_uids.contains(u) {
                v.pod_uids.insert(u.to_string());
            }
        }
        // The super options are the filesystem's: the same on every mount, but take the
        // latest-listed in case the table was read mid-change.
        v.super_options.clear();
        v.super_options.push_str(m.super_options);
        v.mounts.push((PathBuf::from(m.mount_point), m.mount_ro));
    }
    // Keys are unique ("maj:min" per device, "block:<node>" per device node).
    volumes.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    volumes
}

/// Read everything the decision needs, under the deadline.
pub fn gather(o: &crate::Opts, ctx: &Ctx) -> Result<NodeData, Unknown> {
    let host = o.host.host();
    if let Some(problem) = host.access_problem() {
        return Err(Unknown(problem));
    }
    let sys = o.sys.path(&host);
    // Privilege (cap_dac_read_search) serves the node's own kubelet roots and the mount points of
    // its own mount table only: never a root or a mount table the caller named.
    let own =
        o.mountinfo.is_own(&host) && kubelet::roots_are_own(&o.kubelet_root.kubelet_root, &host);
    let roots = node::privilege::elevated_if(own, || o.kubelet_root.resolve(&host))?;
    let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
    ctx.debug(format!("kubelet roots: {}", shown.join(", ")));
    // Without the right to list the kubelet's pods/ every probe of a volume would fail with
    // EACCES and read as a broken mount: the missing privilege, named.
    node::privilege::elevated_if(own, || node::args::check_listable(&host, &roots, &["pods"]))
        .map_err(Unknown)?;
    ctx.stage("reading the mount table");
    let mi = o.mountinfo.path(&host);
    ctx.input(format!("reading the mount table {}", mi.display()));
    // The kubelet roots as the mount table names them (a root may be a link to another disk),
    // then `/`: the node's own filesystems, found in the same pass over the table.
    let mut paths: Vec<PathBuf> = roots
        .iter()
        .map(|r| {
            if host.is_local() && o.mountinfo.is_own(&host) {
                node::host::canonical_or_same(r)
            } else {
                r.clone()
            }
        })
        .collect();
    paths.push(PathBuf::from("/"));
    // Only kubelet volume mounts matter; every line is still validated. One read of the table:
    // procfs writes a 50 000-mount table at ~90 ms of CPU each time.
    let (usage, held) =
        DeviceUsage::read_holding(&mi, &roots, Scope::Volumes, &paths).map_err(Unknown)?;
    let under_roots = if o.filter.is_set() { usage.len() } else { 0 };
    let mut volumes = group(&usage, &o.filter);
    // A filter that matched nothing must not read as "no PV mounts".
    if volumes.is_empty() && under_roots > 0 {
        return Err(Unknown(format!(
            "{} matched none of the {under_roots} mounts under the kubelet roots",
            o.filter.describe()
        )));
    }

    ctx.stage("reading filesystem error state from sysfs");
    let ext4 = fsstate::Ext4Index::read(&sys);
    for v in &mut volumes {
        if v.block_mode {
            if let Some(dev) = &v.block_dev {
                v.block_ro = fsstate::block_readonly(&sys, dev);
            }
            continue;
        }
        if ext4.is_empty() || !matches!(v.fstype.as_str(), "ext4" | "ext3" | "ext2") {
            continue;
        }
        let (maj, min) = v.key.split_once(':').unwrap_or(("0", "0"));
        let (maj, min): (u32, u32) = (maj.parse().unwrap_or(0), min.parse().unwrap_or(0));
        if let Some(name) = ext4.name(maj, min, &v.source) {
            v.ext4_errors = fsstate::ext4_errors(&sys, name);
        }
    }

    ctx.stage("probing PV mount points");
    // The probes' timeout: --probe-timeout within what is left less 300 ms, at least 50 ms.
    let timeout = Reserve::fixed(Duration::from_millis(300)).cap(
        o.probe.probe_timeout,
        ctx.remaining(),
        Duration::from_millis(50),
    );
    let targets: Vec<(PathBuf, String)> = volumes
        .iter()
        .map(|v| {
            // Probe a staging mount when there is one (it exists as long as any pod uses the
            // volume), otherwise the first mount.
            let mp = v
                .mounts
                .iter()
                .find(|(p, _)| p.ends_with("globalmount"))
                .unwrap_or(&v.mounts[0])
                .0
                .clone();
            (host.mount_path(mp), v.key.clone())
        })
        .collect();
    let memory = probe::memory_for(o.run_dir.run_dir.as_deref(), o.host.host_root.as_deref());
    let (outcomes, notes) = node::privilege::elevated_if(own, || {
        probe::probe_remembered(
            &targets,
            timeout,
            16,
            memory.as_ref().map_err(|e| e.as_str()),
        )
    });
    for (v, out) in volumes.iter_mut().zip(outcomes) {
        v.probe = Some(out);
    }
    let node_fs = node_filesystems(&roots, &held);
    let kernel = host
        .kernel_release()
        .and_then(|r| node::host::parse_kernel_version(&r));
    match kernel {
        Some((a, b, c)) => ctx.debug(format!(
            "the running kernel is {a}.{b}.{c}: read-only judgements use its way of showing an aborted filesystem"
        )),
        None => ctx.debug("the running kernel's version could not be read"),
    }
    // What the probes ran with: the binary's own privilege for the node's own roots.
    let can_read_all = node::privilege::elevated_if(own, || {
        node::host::has_capability(2) || node::host::has_capability(1)
    });
    Ok(NodeData {
        volumes,
        kernel,
        roots,
        can_read_all,
        // The node as Kubernetes names it: --node, else the host's name (lower case, as the
        // kubelet registers it by default; $NODE_NAME in container mode).
        node_name: o.node.name_or_host(|| host.hostname()),
        notes,
        node_fs,
        memory: None,
    })
}
