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
