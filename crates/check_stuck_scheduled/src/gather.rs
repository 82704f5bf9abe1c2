//! All I/O: the pods in scope (API or `--pods-json`) and, for stuck ones, their events.

use crate::evaluate::{classify, is_volume_failure, Data};
use crate::Opts;
use kube::checks::stuck::Explain;
use kube::Time;
use plugin::{Ctx, Unknown};

/// All I/O: pods (API or file) and, for stuck pods, their events.
pub fn gather(opts: &Opts, ctx: &Ctx, now: Time) -> Result<Data, Unknown> {
    opts.stuck.scan(
        || opts.host.host().hostname(),
        ctx,
        classify,
        now,
        Explain {
            which: "stuck",
            keep: is_volume_failure,
        },
    )
}

/// The state file's id (`<state-dir>/stuck_scheduled.volumes.json`;
/// `stuck_scheduled_all_nodes.volumes.json` with `--all-nodes`; with `--namespace`, its own,
/// see [`memory_id`]).
pub const CHECK_ID: &str = "stuck_scheduled";

/// The memory's id of a run with these options (see [`kube::PodScopeArgs::memory_scope`]).
pub fn memory_id(opts: &Opts) -> String {
    let (base, narrowed) = opts.stuck.scope.memory_scope(CHECK_ID);
    node::history::scoped(&base, &narrowed)
}

/// Keep this run's stuck PVs (`pvs`: those the stuck pods' volume events name) in the memory of
/// the volumes under `--state-dir`; what it remembers (`None` without it).
pub fn remember(opts: &Opts, pvs: &[String], ctx: &Ctx) -> Option<node::history::Remembered> {
    opts.state.state_dir.as_ref()?;
    ctx.stage("remembering the PVs' stuck spells");
    let seen: Vec<(String, node::history::Kind)> = pvs
        .iter()
        .map(|pv| (pv.clone(), node::history::Kind::Stuck))
        .collect();
    opts.state
        .remember(&memory_id(opts), &seen, plugin::time::now_ms())
}
