//! All I/O, bounded by the deadline: the kubelet root's registration sockets and CSI volumes,
//! the API (CSINode, the pods on the node), then the gRPC calls, each plugin's on a thread of
//! its own within `--probe-timeout`.

use crate::{Api, Data, DriverCalls, Opts, PodView, Registration};
use node::csi::{self, Failure};
use plugin::{Ctx, Unknown};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// At most this many pods of the node are kept (a node runs at most a few hundred).
pub const PODS_MAX: usize = 10_000;

impl PodView {
    pub fn of(p: &kube::csinode::PluginPod) -> PodView {
        let ready = p
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let crashloop = p
            .status
            .container_statuses
            .iter()
            .chain(p.status.init_container_statuses.iter())
            .find_map(|c| {
                c.state
                    .waiting
                    .as_ref()
                    .filter(|w| w.reason == "CrashLoopBackOff")
                    .map(|w| {
                        format!(
                            "container {} in CrashLoopBackOff ({} restarts){}",
                            c.name,
                            c.restart_count,
                            if w.message.is_empty() {
                                String::new()
                            } else {
                                format!(": {}", w.message)
                            }
                        )
                    })
            });
        PodView {
            pod: p.metadata.key(),
            phase: p.status.phase.clone(),
            ready,
            deleting: p.metadata.deletion_timestamp.is_some(),
            crashloop,
            restarts: p
                .status
                .container_statuses
                .iter()
                .map(|c| c.restart_count)
                .sum(),
            host_paths: p.host_paths().map(str::to_string).collect(),
            registration_paths: p
                .registration_paths()
                .into_iter()
                .map(str::to_string)
                .collect(),
        }
    }
}

fn api(opts: &Opts, ctx: &Ctx, node: &str, until: Instant) -> Result<Api, String> {
    let client = kube::connect_until(&opts.api, ctx, until).map_err(|e| e.0)?;
    ctx.stage(format!("reading CSINode {node} from {}", client.server()));
    let csinode = client
        .get_csinode(node)
        .map_err(|e| e.0)?
        .map(|c| c.spec.drivers.into_iter().map(|d| d.name).collect());
    ctx.stage(format!(
        "listing the pods on {node} from {}",
        client.server()
    ));
    let mut pods = Vec::new();
    let mut more = 0usize;
    client
        .list_pods_on_node_as_plugins(node, |p| {
            if pods.len() < PODS_MAX {
                pods.push(PodView::of(&p))
            } else {
                more += 1
            }
        })
        .map_err(|e| e.0)?;
    if more > 0 {
        return Err(format!(
            "more than {PODS_MAX} pods on node {node}: not judged"
        ));
    }
    for line in client.requests() {
        ctx.debug(line);
    }
    Ok(Api { csinode, pods })
}

type Job = Box<
    dyn FnOnce() -> (
            Option<Result<node::csi::proto::PluginInfo, Failure>>,
            Option<DriverCalls>,
        ) + Send,
>;

pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let host = opts.host.host();
    // Privilege (cap_dac_read_search) serves the node's own kubelet roots only, never a root the
    // caller named (node::privilege): raised around each look into them, as the other node
    // checks do.
    let own = node::kubelet::roots_are_own(&opts.kubelet_root.kubelet_root, &host);
    let roots =
        node::privilege::elevated_if(own, || opts.kubelet_root.resolve(&host)).map_err(Unknown)?;
    // Without the right to list the kubelet's pods/ no CSI volume could be seen: the missing
    // privilege, named, rather than "no CSI volumes".
    node::privilege::elevated_if(own, || node::args::check_listable(&host, &roots, &["pods"]))
        .map_err(Unknown)?;
    let node = opts.node.name_or(|| host.hostname())?;
    let probe = opts.probe_timeout;

    ctx.stage("listing the registration sockets and CSI volumes under the kubelet root");
    let sockets = node::privilege::elevated_if(own, || csi::registration_sockets(&host, &roots))
        .map_err(Unknown)?;
    let (mounts, mount_errors) =
        node::privilege::elevated_if(own, || csi::mount_uses(&host, &roots));

    // Round 1: each registration socket, GetInfo then the endpoint it names.
    ctx.stage(format!("calling {} registration sockets", sockets.len()));
    let deadline = (Instant::now() + probe).min(ctx.deadline());
    let jobs: Vec<Job> = sockets
        .iter()
        .map(|(_, sock)| {
            let (host, roots, sock) = (host.clone(), roots.clone(), sock.clone());
            Box::new(move || {
                node::privilege::elevated_if(own, || {
                    let info = csi::get_info(&host, &roots, &sock, deadline);
                    let calls = match &info {
                        Ok(i) if i.type_ == "CSIPlugin" => {
                            let endpoint = endpoint_of(&i.endpoint, &sock);
                            let r = csi::identity(&host, &roots, &endpoint, deadline);
                            Some(DriverCalls {
                                driver: i.name.clone(),
                                endpoint: endpoint.display().to_string(),
                                result: r,
                            })
                        }
                        _ => None,
                    };
                    (Some(info), calls)
                })
            }) as Job
        })
        .collect();
    let answers = csi::bounded(jobs, deadline + Duration::from_millis(50));
    let mut registrations = Vec::new();
    let mut calls = Vec::new();
    for ((root, sock), a) in sockets.iter().zip(answers) {
        let (info, c) = a.unwrap_or((None, None));
        registrations.push(Registration {
            root: root.display().to_string(),
            socket: sock.display().to_string(),
            result: info.unwrap_or_else(|| {
                Err(Failure::Timeout(format!(
                    "GetInfo on {}: no answer in time",
                    sock.display()
                )))
            }),
        });
        calls.extend(c);
    }

    // Then the API, keeping time back for round 2.
    // The time kept back for the second round of socket calls: --probe-timeout, never more than
    // half of what is left (a short -t still gives the API its half; round 2 is then capped by -t).
    let left = plugin::deadline::remaining(ctx.deadline());
    let until = plugin::deadline::Reserve::share(2, Duration::ZERO, probe).deadline(left);
    let api = if until <= Instant::now() {
        Err("no time left for the API within -t after the socket calls: raise -t or lower --probe-timeout".to_string())
    } else {
        api(opts, ctx, &node, until)
    };

    // Round 2: the drivers of CSINode and the volumes that no registration named: their
    // default endpoint.
    let named: BTreeSet<&str> = calls.iter().map(|c| c.driver.as_str()).collect();
    let mut wanted: BTreeSet<String> = mounts.iter().map(|m| m.driver.clone()).collect();
    if let Ok(a) = &api {
        wanted.extend(a.csinode.iter().flatten().cloned());
    }
    let rest: Vec<String> = wanted
        .into_iter()
        .filter(|d| !named.contains(d.as_str()))
        .collect();
    if !rest.is_empty() {
        ctx.stage(format!(
            "calling the default endpoints of {} drivers",
            rest.len()
        ));
        let deadline = (Instant::now() + probe).min(ctx.deadline());
        let root = roots[0].clone();
        let jobs: Vec<Job> = rest
            .iter()
            .map(|d| {
                let (host, roots, d) = (host.clone(), roots.clone(), d.clone());
                let endpoint = csi::default_endpoint(&root, &d);
                Box::new(move || {
                    let r = node::privilege::elevated_if(own, || {
                        csi::identity(&host, &roots, &endpoint, deadline)
                    });
                    (
                        None,
                        Some(DriverCalls {
                            driver: d,
                            endpoint: endpoint.display().to_string(),
                            result: r,
                        }),
                    )
                }) as Job
            })
            .collect();
        let answers = csi::bounded(jobs, deadline + Duration::from_millis(50));
        for (d, a) in rest.iter().zip(answers) {
            let endpoint = csi::default_endpoint(&root, d);
            calls.push(a.and_then(|(_, c)| c).unwrap_or_else(|| DriverCalls {
                driver: d.clone(),
                endpoint: endpoint.display().to_string(),
                result: Err(Failure::Timeout(format!(
                    "Probe on {}: no answer in time",
                    endpoint.display()
                ))),
            }));
        }
    }

    Ok(Data {
        node,
        roots: roots.iter().map(|r| r.display().to_string()).collect(),
        registrations,
        calls,
        mounts,
        mount_errors,
        api,
        host_root: host.root().map(Path::to_path_buf),
    })
}

/// The endpoint a registration names: as given (`unix://` stripped; a relative one is then
/// refused by `node::csi::socket`); empty means the registration socket serves CSI itself.
fn endpoint_of(given: &str, sock: &Path) -> PathBuf {
    let given = given.trim();
    if given.is_empty() {
        return sock.to_path_buf();
    }
    PathBuf::from(given.strip_prefix("unix://").unwrap_or(given))
}
