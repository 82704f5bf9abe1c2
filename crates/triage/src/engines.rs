//! The engines page once per chain (issue 32): Nagios 4 `servicedependency` and Icinga 2
//! `Dependency` objects computed from the causal rules of [`crate::rules`].
//!
//! The engines know services, not findings: one service per check per host. So the rules are
//! lifted from signals to checks with [`CHECKS`], the table of which check can raise which
//! signal: service B (the dependent) depends on service A (the master) of the same node when a
//! rule lets a signal of A cause a signal of B. The dependencies suppress only the dependent's
//! **notifications**, only while the master is **CRITICAL** (an UNKNOWN master — a check that
//! could not tell — never silences a real CRITICAL), soft states included (the master's first
//! failing check counts, so that a dependent reaching its HARD state first is not paged), and the
//! dependents keep being **checked**: their states stay true in the UI, and a dependent still
//! failing when its master recovers pages then (the services are volatile: the engine runs the
//! notification again at the next non-OK check, and Icinga 2 also re-sends the suppressed one).
//!
//! Only the node's own services depend on each other. The cluster host's checks (Jiva,
//! VolumeAttachments, the watch cache, stuck pods of every node) answer for every volume of the
//! cluster at once: a dependency on one of them would silence a node's pages for as long as any
//! volume anywhere is degraded (the incident's Jiva replica: 14 days). Their joins on the PV are
//! `triage`'s and Alertmanager's, which see the subjects.
//!
//! The shipped files `nagios/k8s-storage-dependencies.cfg` and
//! `icinga2/k8s-storage-dependencies.conf` are [`nagios`] and [`icinga2`] (a test keeps them
//! equal; `K8S_STORAGE_BLESS=1 cargo test -p triage engines` writes them).

use crate::rules::RULES;

/// Where a check's service lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// Once per node (hostgroup `k8s-storage-nodes`, Icinga 2 node hosts).
    Node,
    /// Once per cluster (hostgroup `k8s-storage-cluster`, the host standing for the cluster).
    Cluster,
}

/// A check and every signal it can raise (its `docs/checks/<check>.md` "Signals" section, which
/// `tests/tests/docs.rs` keeps equal to the sources; a test here keeps this table equal to those).
#[derive(Debug)]
pub struct Check {
    pub name: &'static str,
    pub host: Host,
    pub signals: &'static [&'static str],
}

impl Check {
    /// The Icinga 2 service (and CheckCommand) name: `k8s_<check without check_>`.
    pub fn icinga_name(&self) -> String {
        format!("k8s_{}", self.name.trim_start_matches("check_"))
    }
}

/// Every check of the suite with the signals it can raise.
pub const CHECKS: &[Check] = &[
    Check {
        name: "check_iscsi_sessions",
        host: Host::Node,
        signals: &[
            "connection_down",
            "duplicate_session",
            "expected_target_missing",
            "no_disk",
            "recovery_tmo_low",
            "recovery_tmo_unknown",
            "scsi_device_state",
            "scsi_device_state_unknown",
            "session_failed",
            "session_ok",
            "session_recovery_timed_out",
            "session_state",
            "session_state_unknown",
            "sysfs_incomplete",
            "sysfs_unreadable",
            "too_few_sessions",
        ],
    },
    Check {
        name: "check_storage_kernel_errors",
        host: Host::Node,
        signals: &[
            "block_device_offline",
            "block_timeout",
            "btrfs_dev_errors",
            "btrfs_error",
            "critical_pattern",
            "disk_vanished",
            "ext4_data_loss",
            "ext4_error",
            "ext4_writeback_refused",
            "hung_task",
            "io_error",
            "iscsi_conn_error",
            "iscsi_recovery_timeout",
            "jbd2_data_flush_error",
            "journal_abort",
            "loop_write_error",
            "nfs_fileid_changed",
            "nfs_not_responding",
            "nfs_recovered",
            "nfs_timed_out",
            "nvme_removed",
            "nvme_reset",
            "remount_ro",
            "scsi_offline",
            "warning_pattern",
            "xfs_corruption",
            "xfs_internal_error",
            "xfs_log_recovery_failed",
            "xfs_shutdown",
        ],
    },
    Check {
        name: "check_ro_pvc_mounts",
        host: Host::Node,
        signals: &[
            "block_ro",
            "emergency_ro",
            "fs_errors",
            "mount_hung",
            "mount_io_error",
            "mount_still_hung",
            "node_fs_readonly",
            "presumed_ro",
            "remounted_ro",
            "ro_by_design",
            "ro_everywhere",
            "ro_no_error",
            "writable",
        ],
    },
    Check {
        name: "check_pv_capacity",
        host: Host::Node,
        signals: &[
            "pv_capacity_ok",
            "pv_filling_up",
            "pv_inodes_low",
            "pv_read_only",
            "pv_space_low",
            "pv_unmeasured",
        ],
    },
    Check {
        name: "check_stale_csi_mounts",
        host: Host::Node,
        signals: &[
            "healthy",
            "mount_hung",
            "not_probed",
            "orphaned_mount",
            "staging_not_attached",
            "staging_pv_gone",
            "staging_unpublished",
            "stale_mount",
        ],
    },
    Check {
        name: "check_csi_node_plugins",
        host: Host::Node,
        signals: &[
            "csi_api_unreadable",
            "csi_driver_ok",
            "csi_driver_unregistered",
            "csi_plugin_pod_unhealthy",
            "csi_socket_refused",
            "csi_socket_unresponsive",
        ],
    },
    Check {
        name: "check_kubelet_nested_ops",
        host: Host::Node,
        signals: &["log_source_read", "volume_op_failing", "volume_op_stuck"],
    },
    Check {
        name: "check_stuck_scheduled",
        host: Host::Node,
        signals: &["stuck_creating", "stuck_no_status"],
    },
    Check {
        name: "check_stuck_terminating",
        host: Host::Node,
        signals: &["stuck_terminating", "terminating"],
    },
    Check {
        name: "check_jiva_rep_crashloop",
        host: Host::Cluster,
        signals: &[
            "controller_crashloop",
            "crashloop",
            "degraded_redundancy",
            "jiva_quorum_lost",
            "jiva_status_unreadable",
            "jiva_target_ro",
            "jiva_volume_degraded",
            "jiva_volume_ok",
            "no_healthy_majority",
            "replica_ok",
            "toleration_short",
        ],
    },
    Check {
        name: "check_volume_attachments",
        host: Host::Cluster,
        signals: &[
            "attach_pending",
            "attachment_node_gone",
            "attachment_node_not_ready",
            "attachment_ok",
            "detach_pending",
            "multi_attach",
        ],
    },
    Check {
        name: "check_watch_cache",
        host: Host::Cluster,
        signals: &[
            "read_failed",
            "watch_cache_current",
            "watch_cache_lag",
            "watch_cache_stale",
        ],
    },
    Check {
        name: "check_longhorn_volumes",
        host: Host::Cluster,
        signals: &[
            "longhorn_filesystem_read_only",
            "longhorn_no_healthy_replica",
            "longhorn_replica_failed",
            "longhorn_robustness_unknown",
            "longhorn_volume_degraded",
            "longhorn_volume_faulted",
            "longhorn_volume_ok",
            "longhorn_volume_stuck",
        ],
    },
];

/// The check of that name.
pub fn check(name: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.name == name)
}

/// One signal-level reason for a dependency: `cause` (of the master) can cause `effect` (of the
/// dependent) by the rule whose groups are `from` → `to`.
#[derive(Debug, Clone)]
pub struct Reason {
    pub cause: &'static str,
    pub effect: &'static str,
    pub from: &'static str,
    pub to: &'static str,
}

/// The dependent's notifications wait while the master is CRITICAL.
#[derive(Debug, Clone)]
pub struct Dependency {
    pub master: &'static Check,
    pub dependent: &'static Check,
    /// The first rule found that links them (for the comments of the rendered files).
    pub reason: Reason,
}

fn reason(master: &Check, dependent: &Check) -> Option<Reason> {
    for r in RULES {
        for cause in master
            .signals
            .iter()
            .filter(|s| r.cause.signals.contains(s))
        {
            for g in r.effect {
                if let Some(effect) = dependent.signals.iter().find(|s| g.signals.contains(s)) {
                    return Some(Reason {
                        cause,
                        effect,
                        from: r.cause.name,
                        to: g.name,
                    });
                }
            }
        }
    }
    None
}

/// Every dependency between the node's own services, masters in table order, each master's
/// dependents in table order.
pub fn dependencies() -> Vec<Dependency> {
    let node: Vec<&'static Check> = CHECKS.iter().filter(|c| c.host == Host::Node).collect();
    let mut out = Vec::new();
    for m in &node {
        for d in &node {
            if m.name == d.name {
                continue;
            }
            if let Some(reason) = reason(m, d) {
                out.push(Dependency {
                    master: m,
                    dependent: d,
                    reason,
                });
            }
        }
    }
    out
}

/// The transitive reduction of [`dependencies`]: only each service's nearest masters (a master
/// also reached through another of its masters is left out). What Icinga 2 is given: before 2.14
/// it takes several dependencies of one service as redundant (unreachable only when all of them
/// fail), and in every version a service whose parent is unreachable is unreachable too, so the
/// nearest masters hold the dependent while any master below them is CRITICAL.
pub fn nearest() -> Vec<Dependency> {
    let all = dependencies();
    let reaches = |from: &str, to: &str| {
        all.iter()
            .any(|d| d.master.name == from && d.dependent.name == to)
    };
    all.iter()
        .filter(|d| {
            !all.iter().any(|via| {
                via.master.name == d.master.name
                    && via.dependent.name != d.dependent.name
                    && reaches(via.dependent.name, d.dependent.name)
            })
        })
        .cloned()
        .collect()
}

/// The masters in order, each with its dependents.
pub fn by_master() -> Vec<(&'static Check, Vec<Dependency>)> {
    group(dependencies())
}

fn group(deps: Vec<Dependency>) -> Vec<(&'static Check, Vec<Dependency>)> {
    let mut out: Vec<(&'static Check, Vec<Dependency>)> = Vec::new();
    for d in deps {
        match out.iter_mut().find(|(m, _)| m.name == d.master.name) {
            Some((_, v)) => v.push(d),
            None => out.push((d.master, vec![d])),
        }
    }
    out
}

/// Why `d` depends on its master, as one comment line.
fn why(dependent: &str, d: &Dependency) -> String {
    format!(
        "{dependent} ({} {} → {} {})",
        d.reason.from, d.reason.cause, d.reason.to, d.reason.effect
    )
}

const HEAD_COMMON: &str = "\
Generated from crates/triage/src/rules.rs (which signal can cause which) and the table of which
check raises which signal (crates/triage/src/engines.rs): do not edit; a test keeps this file
equal to them (K8S_STORAGE_BLESS=1 cargo test -p triage engines writes it). docs/triage.md,
\"The engines: one page per chain\", says what pages and what waits, per incident.

A dependent service keeps being checked (its state is always true); only its notifications wait,
and only while its master is CRITICAL — soft states included, so that a dependent reaching its
HARD state before its master is not paged. An UNKNOWN or WARNING master silences nothing. When
the master recovers, a dependent still failing pages at its next check (the services are
volatile); one that recovered meanwhile stays silent (it was never paged).
Only the services of one node depend on each other: the cluster host's checks answer for every
volume of the cluster, and a dependency on them would silence every node while any volume
anywhere is degraded.";

fn comment(prefix: &str, text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                prefix.trim_end().to_string()
            } else {
                format!("{prefix}{l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `nagios/k8s-storage-dependencies.cfg`.
pub fn nagios() -> String {
    let mut s = String::new();
    s.push_str(
        "# k8s-storage-checks — Nagios 4 service dependencies: one page per chain (issue 32).\n#\n",
    );
    s.push_str(
        "# Install next to k8s-storage-checks.cfg (/etc/nagios4/conf.d/), with nagios-main.cfg's\n",
    );
    s.push_str("# soft_state_dependencies=1 in nagios.cfg.\n#\n");
    s.push_str(&comment("# ", HEAD_COMMON));
    s.push_str("\n#\n");
    s.push_str(&comment(
        "# ",
        "Same-host dependencies: with hostgroup_name and no dependent host, Nagios makes them on each
host of the group, between that host's own services. execution_failure_criteria n: checks always
run; notification_failure_criteria c: only a CRITICAL master holds the dependent's notifications.",
    ));
    s.push('\n');
    for (m, deps) in by_master() {
        s.push('\n');
        s.push_str(&format!(
            "# While {} is CRITICAL on a node, these wait on that node:\n",
            m.name
        ));
        for d in &deps {
            s.push_str(&format!("#   {}\n", why(d.dependent.name, d)));
        }
        let names: Vec<&str> = deps.iter().map(|d| d.dependent.name).collect();
        s.push_str(&format!(
            "define servicedependency {{
    hostgroup_name                  k8s-storage-nodes
    service_description             {}
    dependent_service_description   {}
    execution_failure_criteria      n
    notification_failure_criteria   c
    inherits_parent                 0
}}
",
            m.name,
            names.join(",")
        ));
    }
    s
}

/// `icinga2/k8s-storage-dependencies.conf`.
pub fn icinga2() -> String {
    let mut s = String::new();
    s.push_str(
        "/* k8s-storage-checks — Icinga 2 dependencies: one page per chain (issue 32).\n *\n",
    );
    s.push_str(" * On the config master, next to k8s-storage-services.conf:\n");
    s.push_str(" * /etc/icinga2/zones.d/global-templates/k8s-storage-dependencies.conf.\n *\n");
    s.push_str(&comment(" * ", HEAD_COMMON));
    s.push_str("\n *\n");
    s.push_str(&comment(
        " * ",
        "Each apply rule makes, on every host that runs the master's service (host.vars.k8s_storage_checks
lists it), a Dependency of each dependent service of that host on it (parent_host_name: the
child's own host). states = [ OK, Warning, Unknown ]: only a CRITICAL parent fails the
dependency; ignore_soft_states = false: a SOFT CRITICAL parent counts; disable_checks = false:
the dependents keep running; disable_notifications = true: their notifications wait (Icinga 2
keeps them as suppressed and sends them when the parent recovers, if the problem is still there).

Each service is given only its nearest masters: a service whose parent is held is held too (in
every version), so it waits while any master below them is CRITICAL. Icinga 2 before 2.14 takes
several dependencies of one service as redundant (held only while all of them fail): there
k8s_kubelet_nested_ops, whose nearest masters are k8s_pv_capacity and k8s_stale_csi_mounts, is
held by those two only while both are CRITICAL (by anything below them, always); from 2.14 one
CRITICAL master is enough, as in Nagios.",
    ));
    s.push_str("\n */\n");
    for (m, deps) in group(nearest()) {
        let parent = m.icinga_name();
        s.push('\n');
        s.push_str(&format!(
            "/* While {parent} is CRITICAL or held on a host, these wait on that host:\n"
        ));
        for d in &deps {
            s.push_str(&format!(" *   {}\n", why(&d.dependent.icinga_name(), d)));
        }
        s.push_str(" */\n");
        let names: Vec<String> = deps
            .iter()
            .map(|d| format!("\"{}\"", d.dependent.icinga_name()))
            .collect();
        s.push_str(&format!(
            "apply Dependency \"k8s-storage-{parent}\" to Service {{
\tparent_service_name = \"{parent}\"
\tstates = [ OK, Warning, Unknown ]
\tignore_soft_states = false
\tdisable_checks = false
\tdisable_notifications = true
\tassign where service.vars.k8s_storage_service == true && service.name in [ {} ] && typeof(host.vars.k8s_storage_checks) == Array && \"{parent}\" in host.vars.k8s_storage_checks
}}
",
            names.join(", ")
        ));
    }
    s
}

/// The dependencies as `docs/triage.md` lists them (Markdown): each master with its dependents.
pub fn table_markdown() -> String {
    let mut s = String::from("| while this service is CRITICAL | these services of the same node do not page |\n|---|---|\n");
    for (m, deps) in by_master() {
        let names: Vec<String> = deps
            .iter()
            .map(|d| format!("`{}`", d.dependent.name))
            .collect();
        s.push_str(&format!("| `{}` | {} |\n", m.name, names.join(" ")));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// The signals a check page lists in its "## Signals" section (tests/tests/docs.rs keeps
    /// that section equal to what the check's sources can raise).
    fn page_signals(check: &str) -> BTreeSet<String> {
        let page = std::fs::read_to_string(root().join(format!("docs/checks/{check}.md")))
            .unwrap_or_else(|e| panic!("docs/checks/{check}.md: {e}"));
        let start = page
            .find("\n## Signals\n")
            .unwrap_or_else(|| panic!("docs/checks/{check}.md has no Signals section"));
        let body = &page[start + 12..];
        let body = &body[..body.find("\n## ").unwrap_or(body.len())];
        body.split("](../runbooks/")
            .skip(1)
            .filter_map(|s| s.split(".md)").next())
            .map(str::to_string)
            .collect()
    }

    /// Every check crate is in the table, with exactly the signals it can raise: a signal added
    /// to a check (and so to its page) fails here until the table knows it.
    #[test]
    fn the_table_knows_every_check_and_every_signal_it_raises() {
        let mut crates = BTreeSet::new();
        for e in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with("check_") {
                crates.insert(n);
            }
        }
        let table: BTreeSet<String> = CHECKS.iter().map(|c| c.name.to_string()).collect();
        assert_eq!(table, crates, "CHECKS and crates/check_* differ");
        let mut problems = Vec::new();
        for c in CHECKS {
            let listed = page_signals(c.name);
            let ours: BTreeSet<String> = c.signals.iter().map(|s| (*s).to_string()).collect();
            for s in listed.difference(&ours) {
                problems.push(format!(
                    "{} raises {s}, which engines::CHECKS does not list",
                    c.name
                ));
            }
            for s in ours.difference(&listed) {
                problems.push(format!(
                    "engines::CHECKS lists {s} for {}, which it does not raise",
                    c.name
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Every signal a rule names is raised by some check (a rule about nothing is a typo).
    #[test]
    fn every_signal_of_the_rules_is_raised_by_a_check() {
        for r in RULES {
            for g in std::iter::once(&r.cause).chain(r.effect.iter()) {
                for s in g.signals {
                    assert!(
                        CHECKS.iter().any(|c| c.signals.contains(s)),
                        "rule signal {s} ({}) is raised by no check",
                        g.name
                    );
                }
            }
        }
    }

    fn dep(m: &str, d: &str) -> bool {
        dependencies()
            .iter()
            .any(|x| x.master.name == m && x.dependent.name == d)
    }

    /// The examples, and what must not be.
    #[test]
    fn the_storage_cascade_and_the_stale_csi_mount_depend_as_the_rules_say() {
        // Storage cascade: the read-only PV on the iSCSI session and the kernel errors; the
        // wedged pod on all three.
        for (m, d) in [
            ("check_iscsi_sessions", "check_storage_kernel_errors"),
            ("check_iscsi_sessions", "check_ro_pvc_mounts"),
            ("check_storage_kernel_errors", "check_ro_pvc_mounts"),
            ("check_iscsi_sessions", "check_stuck_terminating"),
            ("check_storage_kernel_errors", "check_stuck_terminating"),
            ("check_ro_pvc_mounts", "check_stuck_terminating"),
            // Stale CSI mount: the backoff on the stale mount, the stuck pods on both.
            ("check_stale_csi_mounts", "check_kubelet_nested_ops"),
            ("check_stale_csi_mounts", "check_stuck_scheduled"),
            ("check_kubelet_nested_ops", "check_stuck_scheduled"),
        ] {
            assert!(dep(m, d), "{d} should depend on {m}");
        }
        for (m, d) in [
            // Never downwards: a symptom does not silence its cause.
            ("check_storage_kernel_errors", "check_iscsi_sessions"),
            ("check_ro_pvc_mounts", "check_storage_kernel_errors"),
            ("check_stuck_terminating", "check_ro_pvc_mounts"),
            // No rule involves the CSI node plugins' signals.
            ("check_csi_node_plugins", "check_stale_csi_mounts"),
            ("check_stale_csi_mounts", "check_csi_node_plugins"),
        ] {
            assert!(!dep(m, d), "{d} must not depend on {m}");
        }
        // Only node services, never a cluster host's.
        for d in dependencies() {
            assert_eq!((d.master.host, d.dependent.host), (Host::Node, Host::Node));
        }
    }

    /// No loop: each engine refuses (Nagios) or cannot resolve (Icinga 2) circular dependencies.
    #[test]
    fn the_dependencies_have_no_loop() {
        let deps = dependencies();
        let mut order: Vec<&str> = Vec::new();
        let mut left: Vec<&str> = CHECKS
            .iter()
            .filter(|c| c.host == Host::Node)
            .map(|c| c.name)
            .collect();
        while !left.is_empty() {
            let free: Vec<&str> = left
                .iter()
                .copied()
                .filter(|c| {
                    !deps
                        .iter()
                        .any(|d| d.dependent.name == *c && left.contains(&d.master.name))
                })
                .collect();
            assert!(!free.is_empty(), "a loop among {left:?}");
            left.retain(|c| !free.contains(c));
            order.extend(free);
        }
        assert_eq!(order[0], "check_iscsi_sessions", "{order:?}");
    }

    /// The shipped files are the rendering (`K8S_STORAGE_BLESS=1` writes them).
    #[test]
    fn engines_shipped_files_are_the_rendering() {
        let bless = std::env::var_os("K8S_STORAGE_BLESS").is_some();
        for (path, want) in [
            ("nagios/k8s-storage-dependencies.cfg", nagios()),
            ("icinga2/k8s-storage-dependencies.conf", icinga2()),
        ] {
            let p = root().join(path);
            if bless {
                std::fs::write(&p, &want).unwrap();
            }
            let have = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(
                have == want,
                "{path} is not the rendering of the rules: run \
                 `K8S_STORAGE_BLESS=1 cargo test -p triage engines` and commit it"
            );
        }
        // The page's table too.
        let page = std::fs::read_to_string(root().join("docs/triage.md")).unwrap();
        assert!(
            page.contains(&table_markdown()),
            "docs/triage.md lacks the dependency table:\n{}",
            table_markdown()
        );
    }

    /// The semantics that must not lose a page, in both renderings.
    #[test]
    fn only_a_critical_master_holds_only_notifications() {
        let n = nagios();
        assert_eq!(
            n.matches("define servicedependency").count(),
            by_master().len()
        );
        assert_eq!(
            n.matches("execution_failure_criteria      n\n").count(),
            by_master().len()
        );
        assert_eq!(
            n.matches("notification_failure_criteria   c\n").count(),
            by_master().len()
        );
        let i = icinga2();
        let masters = group(nearest()).len();
        for l in [
            "states = [ OK, Warning, Unknown ]",
            "ignore_soft_states = false",
            "disable_checks = false",
            "disable_notifications = true",
        ] {
            let l = format!("\t{l}\n");
            assert_eq!(i.matches(&l).count(), masters, "{l}");
        }
    }
}
