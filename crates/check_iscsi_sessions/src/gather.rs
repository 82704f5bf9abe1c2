//! What check_iscsi_sessions reads, through `node` only: the iSCSI sessions in sysfs and, when
//! they have disks, the device-usage map that says what each disk carries.

use node::iscsi::Sessions;
use node::usage::{DeviceUsage, Scope};
use plugin::{Ctx, Unknown};

/// Everything gathered from the node.
#[derive(Debug, Clone, Default)]
pub struct Gathered {
    pub sessions: Sessions,
    /// `None`: not read (no block device to map). `Some(Err)`: unreadable (a note, not an alert).
    /// The map classifies kubelet volume mounts under the kubelet roots it was read with.
    pub mounts: Option<Result<DeviceUsage, String>>,
    /// This host's name ($NODE_NAME in container mode), for the next steps.
    pub node_name: Option<String>,
}

/// All I/O: the session class, then (only when there are disks) the mount table.
pub fn gather(o: &crate::Opts, ctx: &Ctx) -> Result<Gathered, Unknown> {
    let host = o.host.host();
    let sys = o.sys.path(&host);
    // A mistyped --kubelet-root is a usage mistake even when no disk needs mapping.
    let roots = o.kubelet_root.resolve_if_any(&host)?;
    ctx.stage(format!(
        "reading {}",
        sys.join("class/iscsi_session").display()
    ));
    if let Some(problem) = node::blockdev::sysfs_problem(&sys) {
        return Err(Unknown(problem));
    }
    let sessions = node::iscsi::read(&sys).map_err(Unknown)?;
    ctx.debug(format!(
        "read {} under {}{}",
        plugin::count(sessions.sessions.len(), "iSCSI session", "iSCSI sessions"),
        sys.display(),
        if sessions.class_present {
            ""
        } else {
            " (no iSCSI transport class there)"
        }
    ));
    let has_disks = sessions
        .sessions
        .iter()
        .any(|s| s.block_devices().next().is_some());
    let mut g = Gathered {
        sessions,
        node_name: host.hostname(),
        ..Default::default()
    };
    if has_disks {
        let mi = o.mountinfo.path(&host);
        ctx.stage(format!("reading {}", mi.display()));
        let shown: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        ctx.debug(format!("kubelet roots: {}", shown.join(", ")));
        let usage = DeviceUsage::read(&mi, &roots, Scope::All);
        if let Ok(u) = &usage {
            ctx.input(format!("read {} mounts from {}", u.len(), mi.display()));
        }
        g.mounts = Some(usage);
    }
    Ok(g)
}
