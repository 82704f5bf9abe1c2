//! Reading the attach/detach plane through the API into plain [`Data`] for `evaluate`:
//! VolumeAttachments, Nodes (their Ready condition), the `FailedAttachVolume` events, the PVs
//! (for their claims) and the pods of the claims' namespaces (who uses a claim, who waits).

use crate::{parse_multi_attach, Attachment, Data, MultiAttach, NodeState, Opts, PodUse};
use kube::{Event, Node, PersistentVolume, Pod, PodFilter, VolumeAttachment};
use plugin::{Ctx, Unknown};
use std::collections::{BTreeMap, BTreeSet};

/// At most this many objects of each kind are kept; past it the answer is UNKNOWN naming the
/// cap (memory stays bounded whatever the server sends).
pub const OBJECTS_MAX: usize = 50_000;

/// Past this many namespaces the pods are listed once for the cluster, not per namespace.
pub const NAMESPACES_MAX: usize = 8;

fn over(what: &str, n: usize) -> Unknown {
    Unknown(format!(
        "more than {OBJECTS_MAX} {what} ({n} more not kept: OBJECTS_MAX, the cap of this check): \
         not judged"
    ))
}

impl From<VolumeAttachment> for Attachment {
    fn from(v: VolumeAttachment) -> Attachment {
        let msg = |e: Option<kube::types::VolumeError>| {
            e.map(|e| e.message).filter(|m| !m.trim().is_empty())
        };
        Attachment {
            name: v.metadata.name,
            attacher: v.spec.attacher,
            node: v.spec.node_name,
            pv: v.spec.source.persistent_volume_name.unwrap_or_default(),
            attached: v.status.attached,
            attach_error: msg(v.status.attach_error),
            detach_error: msg(v.status.detach_error),
            created: v.metadata.creation_timestamp,
            deleting_since: v.metadata.deletion_timestamp,
        }
    }
}

impl From<&Node> for NodeState {
    fn from(n: &Node) -> NodeState {
        match n.condition("Ready") {
            Some(c) => NodeState {
                ready: c.status.clone(),
                since: c.last_transition_time.or(n.metadata.creation_timestamp),
                reason: c.reason.clone(),
                message: c.message.clone(),
            },
            None => NodeState {
                since: n.metadata.creation_timestamp,
                ..Default::default()
            },
        }
    }
}

impl PodUse {
    /// `None` for a pod that mounts no claim (it cannot hold nor wait for an attachment).
    pub fn of(p: &Pod) -> Option<PodUse> {
        let ns = &p.metadata.namespace;
        let claims: Vec<String> = p.claim_names().map(|c| format!("{ns}/{c}")).collect();
        if claims.is_empty() {
            return None;
        }
        Some(PodUse {
            pod: p.metadata.key(),
            uid: p.metadata.uid.clone(),
            node: p.spec.node_name.clone().unwrap_or_default(),
            phase: p.status.phase.clone(),
            deleting: p.metadata.deletion_timestamp.is_some(),
            claims,
        })
    }
}

impl MultiAttach {
    /// `None` for a `FailedAttachVolume` event that is no Multi-Attach error.
    pub fn of(e: &Event) -> Option<MultiAttach> {
        // The controller records it on the pod that waits.
        let kind = &e.involved_object.kind;
        if e.reason != "FailedAttachVolume" || !(kind.is_empty() || kind == "Pod") {
            return None;
        }
        let (volume, pods, others) = parse_multi_attach(&e.message)?;
        let ns = if e.involved_object.namespace.is_empty() {
            &e.metadata.namespace
        } else {
            &e.involved_object.namespace
        };
        Some(MultiAttach {
            pod: format!("{ns}/{}", e.involved_object.name),
            pod_uid: e.involved_object.uid.clone(),
            volume,
            holders: pods.iter().map(|p| format!("{ns}/{p}")).collect(),
            other_namespaces: others,
            message: e.message.clone(),
            last_seen: e.last_seen(),
        })
    }
}

/// All I/O: VolumeAttachments, Nodes, Multi-Attach events, PVs, then the pods of the
/// claims' namespaces.
pub fn gather(opts: &Opts, ctx: &Ctx) -> Result<Data, Unknown> {
    let client = kube::connect(&opts.api, ctx)?;
    let node = opts
        .node
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_string);

    ctx.stage(format!(
        "listing VolumeAttachments from {}",
        client.server()
    ));
    let mut attachments = Vec::new();
    let mut more = 0;
    client.list_volume_attachments(|v| {
        if attachments.len() < OBJECTS_MAX {
            attachments.push(Attachment::from(v))
        } else {
            more += 1
        }
    })?;
    if more > 0 {
        return Err(over("VolumeAttachments", more));
    }

    ctx.stage(format!("listing Nodes from {}", client.server()));
    let mut nodes = BTreeMap::new();
    let mut more = 0;
    client.list_nodes(|n| {
        if nodes.len() < OBJECTS_MAX {
            nodes.insert(n.metadata.name.clone(), NodeState::from(&n));
        } else {
            more += 1
        }
    })?;
    if more > 0 {
        return Err(over("Nodes", more));
    }

    ctx.stage(format!(
        "listing FailedAttachVolume events from {}",
        client.server()
    ));
    let mut multi_attach = Vec::new();
    let mut more = 0;
    client.list_events_with_reason("FailedAttachVolume", |e| {
        if let Some(m) = MultiAttach::of(&e) {
            if multi_attach.len() < OBJECTS_MAX {
                multi_attach.push(m)
            } else {
                more += 1
            }
        }
    })?;
    if more > 0 {
        return Err(over("Multi-Attach events", more));
    }

    // The PVs named: by the attachments in scope, by the Multi-Attach events.
    let in_scope = |a: &Attachment| node.as_deref().is_none_or(|n| a.node == n);
    let wanted: BTreeSet<&str> = attachments
        .iter()
        .filter(|a| in_scope(a))
        .map(|a| a.pv.as_str())
        .chain(multi_attach.iter().map(|m| m.volume.as_str()))
        .filter(|p| !p.is_empty())
        .collect();
    ctx.stage(format!(
        "listing PersistentVolumes from {}",
        client.server()
    ));
    let mut claims = BTreeMap::new();
    client.list_pvs(|pv: PersistentVolume| {
        if let Some(c) = pv
            .spec
            .claim_ref
            .as_ref()
            .filter(|_| wanted.contains(pv.metadata.name.as_str()))
            .filter(|c| !c.name.is_empty())
        {
            claims.insert(
                pv.metadata.name.clone(),
                format!("{}/{}", c.namespace, c.name),
            );
        }
    })?;

    // Who uses the claims, who waits: the pods of those namespaces.
    let namespaces: BTreeSet<String> = claims
        .values()
        .filter_map(|c| c.split_once('/').map(|(ns, _)| ns.to_string()))
        .chain(
            multi_attach
                .iter()
                .filter_map(|m| m.pod.split_once('/').map(|(ns, _)| ns.to_string())),
        )
        .collect();
    let mut pods = Vec::new();
    if namespaces.is_empty() {
        // Nothing to name: still prove the grant, so a missing one shows on every run.
        ctx.stage(format!(
            "checking pods may be listed on {}",
            client.server()
        ));
        client.may_list("/api/v1/pods")?;
    } else {
        let filter = PodFilter {
            namespaces: if namespaces.len() > crate::gather::NAMESPACES_MAX {
                Vec::new()
            } else {
                namespaces.into_iter().collect()
            },
            ..Default::default()
        };
        ctx.stage(format!(
            "listing pods {} from {}",
            filter.describe(),
            client.server()
        ));
        let mut more = 0;
        client.list_pods(&filter, |p| {
            if let Some(u) = PodUse::of(&p) {
                if pods.len() < OBJECTS_MAX {
                    pods.push(u)
                } else {
                    more += 1
                }
            }
        })?;
        if more > 0 {
            return Err(over("pods with claims", more));
        }
    }
    for line in client.requests() {
        ctx.debug(line);
    }
    Ok(Data {
        attachments,
        nodes,
        claims,
        pods,
        multi_attach,
        node,
    })
}
