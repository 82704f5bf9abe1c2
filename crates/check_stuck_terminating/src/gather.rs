//! All I/O: the pods in scope (API or `--pods-json`), for wedged ones their events and, on their
//! own node, their volume mounts still in the mount table.

use crate::evaluate::{classify, is_teardown_failure, pod_mounts, Data};
use crate::Opts;
use kube::checks::stuck::Explain;
use kube::Time;
use plugin::{Ctx, Status, Unknown};
use std::collections::HashMap;

/// All I/O: pods (API or file), for wedged pods their events and volume mounts.
pub fn gather(opts: &Opts, ctx: &Ctx, now: Time) -> Result<Data, Unknown> {
    let scan = opts.stuck.scan(
        || opts.host.host().hostname(),
        ctx,
        classify,
        now,
        Explain {
            which: "wedged",
            keep: is_teardown_failure,
        },
    )?;
    let mut d = Data {
        scan,
        mounts: HashMap::new(),
        memory: None,
    };
    gather_mounts(opts, ctx, now, &mut d);
    Ok(d)
}

/// The volume mounts of wedged pods still on this node (only when the pods are this node's:
/// not with --all-nodes, nor with --node naming another node). A mount table that cannot be
/// read leaves a note.
fn gather_mounts(opts: &Opts, ctx: &Ctx, now: Time, d: &mut Data) {
    let policy = opts.policy();
    let uids: std::collections::BTreeSet<&str> = d
        .scan
        .found
        .iter()
        .filter(|t| policy.judge(*t, now) != Status::Ok && !t.uid.is_empty())
        .map(|t| t.uid.as_str())
        .collect();
    if uids.is_empty() || opts.stuck.scope.all_nodes {
        return;
    }
    let host = opts.host.host();
    if let Some(n) = &opts.stuck.scope.node.node {
        if host
            .hostname()
            .is_some_and(|h| !h.eq_ignore_ascii_case(n.trim()))
        {
            return;
        }
    }
    let roots = match opts.kubelet_root.resolve_if_any(&host) {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return,
        Err(e) => {
            d.scan
                .notes
                .push(format!("volume mounts not looked up: {e}"));
            return;
        }
    };
    ctx.stage("reading the mount table for the wedged pods' volume mounts");
    let mi = opts.mountinfo.path(&host);
    let prefixes: Vec<String> = roots
        .iter()
        .map(|r| {
            format!(
                "{}/pods/",
                node::mountinfo::escape(&r.to_string_lossy()).trim_end_matches('/')
            )
        })
        .collect();
    match node::mountinfo::read_with(&mi, |mp| {
        prefixes.iter().any(|p| mp.starts_with(p.as_str()))
    }) {
        Ok(mounts) => {
            d.mounts = pod_mounts(&mounts, &roots, &uids);
        }
        Err(e) => d
            .scan
            .notes
            .push(format!("volume mounts not looked up: {e}")),
    }
}

/// The state file's id (`<state-dir>/stuck_terminating.volumes.json`; the cluster-wide run keeps
/// `stuck_terminating_all_nodes.volumes.json`: it sees other pods than the node's run, and one
/// file for both would end each other's spells; see [`memory_id`]).
pub const CHECK_ID: &str = "stuck_terminating";

/// The memory's id of a run with these options (see [`kube::PodScopeArgs::memory_scope`]).
pub fn memory_id(opts: &Opts) -> String {
    let (base, narrowed) = opts.stuck.scope.memory_scope(CHECK_ID);
    node::history::scoped(&base, &narrowed)
}

/// Keep this run's stuck PVs (`pvs`: those of the wedged pods) in the memory of the volumes
/// under `--state-dir` (nothing without it) and give `d` what it remembers.
pub fn remember(opts: &Opts, d: &mut Data, pvs: &[String], ctx: &Ctx) {
    if opts.state.state_dir.is_none() {
        return;
    }
    ctx.stage("remembering the PVs' stuck spells");
    let seen: Vec<(String, node::history::Kind)> = pvs
        .iter()
        .map(|pv| (pv.clone(), node::history::Kind::Stuck))
        .collect();
    d.memory = opts
        .state
        .remember(&memory_id(opts), &seen, plugin::time::now_ms());
}
