//! The causal rules: which signal can cause which, joined on which subject key. One table, read
//! by `triage` and written out in `docs/triage.md` (a test keeps the two equal).
//!
//! The groups are layers of the storage stack, bottom up: the storage system's own objects
//! (Jiva, Longhorn, the attach/detach plane), the transport (iSCSI sessions, the block device),
//! the filesystem, the mount as the kubelet made it, the kubelet's volume operations, and the
//! pods. A rule says a finding of the lower group can be the cause of a finding of the upper one
//! when both name the same value of one of its keys. Every rule goes upward, so the chains have
//! no loops (tested).

/// A subject key two findings are joined on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The PersistentVolume.
    Pv,
    /// The block device (`sdc`, `loop0`).
    Device,
    /// The iSCSI session (`session3`).
    Session,
    /// The pod, as namespace/name.
    Pod,
    /// The node: only where one finding stops everything of the other kind on that node.
    Node,
}

impl Key {
    pub fn name(self) -> &'static str {
        match self {
            Key::Pv => "pv",
            Key::Device => "device",
            Key::Session => "session",
            Key::Pod => "pod",
            Key::Node => "node",
        }
    }
}

/// A replica that keeps failing.
pub const REPLICA_FAILING: Group = Group {
    name: "replica",
    signals: &["crashloop", "longhorn_replica_failed"],
};

/// A volume with fewer healthy replicas than configured, still serving.
pub const DEGRADED: Group = Group {
    name: "degraded",
    signals: &[
        "degraded_redundancy",
        "jiva_volume_degraded",
        "longhorn_volume_degraded",
    ],
};

/// A volume its storage system no longer serves, or cannot attach or detach.
pub const BACKEND_DOWN: Group = Group {
    name: "storage system",
    signals: &[
        "controller_crashloop",
        "jiva_quorum_lost",
        "no_healthy_majority",
        "jiva_target_ro",
        "longhorn_volume_faulted",
        "longhorn_no_healthy_replica",
        "longhorn_filesystem_read_only",
        "longhorn_volume_stuck",
        "attachment_node_gone",
        "attachment_node_not_ready",
        "attach_pending",
        "detach_pending",
        "multi_attach",
    ],
};

/// The iSCSI session under a volume.
pub const SESSION: Group = Group {
    name: "iSCSI session",
    signals: &[
        "session_failed",
        "session_recovery_timed_out",
        "session_state",
        "connection_down",
        "expected_target_missing",
    ],
};

/// The block device and its transport, as sysfs and the kernel log report them.
pub const BLOCK: Group = Group {
    name: "block device",
    signals: &[
        "scsi_device_state",
        "iscsi_conn_error",
        "iscsi_recovery_timeout",
        "scsi_offline",
        "io_error",
        "block_device_offline",
        "block_timeout",
        "disk_vanished",
        "nvme_reset",
        "nvme_removed",
        "loop_write_error",
        "nfs_not_responding",
        "nfs_timed_out",
        "nfs_fileid_changed",
    ],
};

/// The filesystem's own errors, from the kernel log.
pub const FILESYSTEM: Group = Group {
    name: "filesystem",
    signals: &[
        "journal_abort",
        "jbd2_data_flush_error",
        "ext4_error",
        "ext4_data_loss",
        "ext4_writeback_refused",
        "xfs_shutdown",
        "xfs_corruption",
        "xfs_internal_error",
        "xfs_log_recovery_failed",
        "btrfs_error",
        "btrfs_dev_errors",
    ],
};

/// The kernel remounting a filesystem read-only after its error.
pub const REMOUNT: Group = Group {
    name: "remount",
    signals: &["remount_ro"],
};

/// The node's own filesystem (the kubelet's root) read-only.
pub const NODE_FS: Group = Group {
    name: "node filesystem",
    signals: &["node_fs_readonly"],
};

/// The mounts of a volume as the kubelet made them: read-only, hung, stale, orphaned.
pub const MOUNT: Group = Group {
    name: "mount",
    signals: &[
        "emergency_ro",
        "remounted_ro",
        "fs_errors",
        "block_ro",
        "presumed_ro",
        "pv_read_only",
        "mount_hung",
        "mount_io_error",
        "mount_still_hung",
        "stale_mount",
        "staging_pv_gone",
        "staging_not_attached",
        "staging_unpublished",
        "orphaned_mount",
    ],
};

/// The kubelet's volume operations failing or in backoff.
pub const KUBELET: Group = Group {
    name: "kubelet",
    signals: &["volume_op_stuck", "volume_op_failing"],
};

/// Pods that do not start or do not go away.
pub const POD: Group = Group {
    name: "pod",
    signals: &[
        "stuck_no_status",
        "stuck_creating",
        "stuck_terminating",
        "terminating",
    ],
};

/// Pods waiting for their volumes to be set up.
pub const POD_WAITING: Group = Group {
    name: "pod waiting",
    signals: &["stuck_no_status", "stuck_creating"],
};

/// A named set of signals: a layer of the stack (or a part of one).
#[derive(Debug, Clone, Copy)]
pub struct Group {
    pub name: &'static str,
    pub signals: &'static [&'static str],
}

/// One causal rule: a finding whose signal is in `cause` can cause one whose signal is in
/// `effect` when both name the same value of one of the keys `on`.
#[derive(Debug)]
pub struct Rule {
    pub cause: Group,
    pub effect: &'static [Group],
    pub on: &'static [Key],
    /// Why, as `docs/triage.md` says it.
    pub why: &'static str,
}

use Key::*;

/// The table. Order does not matter; every rule goes up the stack.
pub const RULES: &[Rule] = &[
    Rule {
        cause: REPLICA_FAILING,
        effect: &[DEGRADED, BACKEND_DOWN],
        on: &[Pv],
        why: "a replica that keeps failing leaves its volume with fewer healthy copies",
    },
    Rule {
        cause: DEGRADED,
        effect: &[BACKEND_DOWN],
        on: &[Pv],
        why: "a degraded volume that loses one more replica loses its quorum",
    },
    Rule {
        cause: BACKEND_DOWN,
        effect: &[SESSION, BLOCK, FILESYSTEM, REMOUNT, MOUNT, KUBELET, POD],
        on: &[Pv, Pod],
        why: "a volume its storage system does not serve fails every layer above it",
    },
    Rule {
        cause: SESSION,
        effect: &[BLOCK, FILESYSTEM, REMOUNT, MOUNT, KUBELET, POD],
        on: &[Session, Device, Pv],
        why: "a session that is not logged in takes its disk's I/O with it",
    },
    Rule {
        cause: BLOCK,
        effect: &[FILESYSTEM, REMOUNT, MOUNT, KUBELET, POD],
        on: &[Device, Pv],
        why: "I/O errors of a device become errors of the filesystem on it",
    },
    Rule {
        cause: FILESYSTEM,
        effect: &[REMOUNT, MOUNT, KUBELET, POD],
        on: &[Device, Pv],
        why: "with errors=remount-ro the kernel stops writes to a filesystem after its error",
    },
    Rule {
        cause: REMOUNT,
        effect: &[MOUNT, KUBELET, POD],
        on: &[Device, Pv],
        why: "a filesystem remounted read-only is read-only in every mount of it",
    },
    Rule {
        cause: MOUNT,
        effect: &[KUBELET, POD],
        on: &[Pv, Pod],
        why:
            "the kubelet cannot unmount, unstage or reuse a mount that is hung, stale or read-only",
    },
    Rule {
        cause: KUBELET,
        effect: &[POD],
        on: &[Pv, Pod],
        why: "a pod waits for the volume operations of its volumes",
    },
    Rule {
        cause: KUBELET,
        effect: &[POD_WAITING],
        on: &[Node],
        why: "the kubelet's NestedPendingOperations queue is serialized: one volume operation \
              in backoff blocks the volume set-up of every pod on the node",
    },
    Rule {
        cause: NODE_FS,
        effect: &[MOUNT, KUBELET, POD],
        on: &[Node],
        why: "a read-only kubelet root fails every volume operation on the node",
    },
];

/// The layers in order, bottom up (the rules only go up this list).
pub const LAYERS: &[Group] = &[
    REPLICA_FAILING,
    DEGRADED,
    BACKEND_DOWN,
    NODE_FS,
    SESSION,
    BLOCK,
    FILESYSTEM,
    REMOUNT,
    MOUNT,
    KUBELET,
    POD,
];

/// The layer of a signal (its index in [`LAYERS`]), if a rule knows it.
pub fn layer(signal: &str) -> Option<usize> {
    LAYERS.iter().position(|g| g.signals.contains(&signal))
}

/// The keys on which a finding of `cause` can cause one of `effect` (empty: it cannot).
pub fn joins(cause: &str, effect: &str) -> Vec<Key> {
    let mut keys = Vec::new();
    for r in RULES {
        if r.cause.signals.contains(&cause) && r.effect.iter().any(|g| g.signals.contains(&effect))
        {
            for k in r.on {
                if !keys.contains(k) {
                    keys.push(*k);
                }
            }
        }
    }
    keys
}

/// The table as `docs/triage.md` prints it (Markdown).
pub fn table_markdown() -> String {
    let mut s = String::from("| cause | can cause | joined on | why |\n|---|---|---|---|\n");
    for r in RULES {
        let effect: Vec<&str> = r.effect.iter().map(|g| g.name).collect();
        let on: Vec<&str> = r.on.iter().map(|k| k.name()).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.cause.name,
            effect.join(", "),
            on.join(", "),
            r.why
        ));
    }
    s.push_str("\n| layer, bottom up | signals |\n|---|---|\n");
    for g in LAYERS.iter().chain([&POD_WAITING]) {
        let signals: Vec<String> = g.signals.iter().map(|x| format!("`{x}`")).collect();
        s.push_str(&format!("| {} | {} |\n", g.name, signals.join(" ")));
    }
    s
}
