//! From the options to a client: find the configuration (`--kubeconfig`, `--context`,
//! `$KUBECONFIG`, in-cluster, the node's files) and bind a [`Client`] to the check's deadline.

use crate::args::ApiArgs;
use crate::client::Client;
use crate::config::{Config, Lookup, Source};
use plugin::{Ctx, Unknown};

/// Find the configuration as the options and environment say, build a client bound to the
/// check's deadline, and tell `-vv` which source was used (never a secret).
pub fn connect(api: &ApiArgs, ctx: &Ctx) -> Result<Client, Unknown> {
    connect_until(api, ctx, ctx.deadline())
}

/// [`connect`] with a deadline of the caller's own, earlier than the check's (a check that must
/// keep time for its node work after the API calls).
pub fn connect_until(
    api: &ApiArgs,
    ctx: &Ctx,
    deadline: std::time::Instant,
) -> Result<Client, Unknown> {
    let cfg = config(api, ctx)?;
    let client = Client::new(&cfg, deadline.min(ctx.deadline()))?;
    ctx.debug(format!("kube config: {}", client.description));
    Ok(client)
}

/// Find the configuration as the options and environment say (telling `-vv` how), without
/// connecting: for checks that build several clients from it (one per API server of an HA
/// control plane, `Config::server` replaced).
pub fn config(api: &ApiArgs, ctx: &Ctx) -> Result<Config, Unknown> {
    ctx.stage("reading the kubeconfig");
    let lookup = Lookup::from_env(api.kubeconfig.clone(), api.context.clone());
    let mut notes = Vec::new();
    let cfg = lookup.resolve(&mut notes);
    for n in &notes {
        ctx.debug(format!("kube config lookup: {n}"));
    }
    let mut cfg = cfg?;
    cfg.allow_http = api.allow_insecure_http;
    cfg.allow_insecure_tls = api.allow_insecure_tls;
    if matches!(cfg.source, Source::Env(_)) {
        ctx.debug("kube config: $KUBECONFIG is a list: the first existing file is used, files are not merged");
    }
    Ok(cfg)
}
