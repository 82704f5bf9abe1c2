//! One page per chain in the real Nagios 4 (issue 32): the harness of `engines_nagios.rs` (Debian's
//! nagios.cfg plus our nagios-main.cfg, the shipped objects, the real NRPE with client
//! certificates, the notification script) plus the shipped `nagios/k8s-storage-dependencies.cfg`.
//!
//! The fault set is the storage cascade on one node ([`Cascade`]): the iSCSI session failed, the
//! kernel's errors on its disk, the read-only PV (the real kernel's ext4 error path) and the pod
//! wedged in Terminating on it. What the notification script receives:
//! - exactly one PROBLEM, check_iscsi_sessions' (the root), while check_storage_kernel_errors,
//!   check_ro_pvc_mounts and check_stuck_terminating reach HARD CRITICAL and keep being checked;
//! - the session repaired: its RECOVERY, then check_storage_kernel_errors (its records still in
//!   the window) pages — the held page is not lost — and the two above it still wait;
//! - the kernel's records out of the window: its RECOVERY, then check_ro_pvc_mounts pages;
//! - the wedged pod gone first: check_stuck_terminating recovers without a page (it never paged);
//! - the PV repaired: check_ro_pvc_mounts' RECOVERY. Nothing else, in that order.

use super::engines_nagios::{Nagios, HOST};
use e2e::engines::{
    free_port, start_nrpe, wait_for, Cascade, Incident, Intervals, Node, NrpeTls, Page,
};
use e2e::{need_root, need_tool, workspace_root};
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// How long the kernel's records of the cascade count (the check's `--window`): long enough for
/// the root's recovery and the next link's page, short enough to wait out.
const KERNEL_WINDOW: Duration = Duration::from_secs(120);

const ISCSI: &str = "check_iscsi_sessions";
const KERNEL: &str = "check_storage_kernel_errors";
const RO: &str = "check_ro_pvc_mounts";
const STUCK: &str = "check_stuck_terminating";

fn kinds(pages: &[Page]) -> Vec<(String, String)> {
    pages
        .iter()
        .map(|p| (p.kind.clone(), p.service.clone()))
        .collect()
}

#[test]
fn nagios_pages_once_per_chain_and_the_held_pages_follow_the_root_recovery() {
    let t = "nagios_pages_once_per_chain_and_the_held_pages_follow_the_root_recovery";
    if !need_root(t)
        || !need_tool(t, "/usr/sbin/nagios4")
        || !need_tool(t, "/etc/nagios4/nagios.cfg")
        || !need_tool(t, "/usr/sbin/nrpe")
        || !need_tool(t, "/usr/lib/nagios/plugins/check_nrpe")
        || !need_tool(t, "/usr/lib/nagios/plugins/check_dummy")
        || !need_tool(t, "bindfs")
        || !need_tool(t, "openssl")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let iv = Intervals::from_env();
    let mut node = Node::new();
    let port = free_port();
    let tls = NrpeTls::generate(&node.work.path().join("tls"));
    let mut commands = node.nrpe_commands_all();
    let mut cascade = Cascade::new(&node);
    // The node's iSCSI sysfs, and the kernel log's window of this test.
    let iscsi = commands.get_mut(ISCSI).unwrap();
    iscsi.push_str(&format!(" --sys {}", cascade.sys().display()));
    let kernel = commands.get_mut(KERNEL).unwrap();
    assert!(kernel.contains(" --window 15m "), "{kernel}");
    *kernel = kernel.replace(
        " --window 15m ",
        &format!(" --window {}s ", KERNEL_WINDOW.as_secs()),
    );
    let _nrpe = start_nrpe(&node, &commands, port, Some(&tls));
    let deps =
        std::fs::read_to_string(workspace_root().join("nagios/k8s-storage-dependencies.cfg"))
            .unwrap();
    let nagios = RefCell::new(Nagios::start_with(
        &node,
        port,
        &tls,
        iv,
        &[("k8s-storage-dependencies.cfg", deps.clone())],
    ));
    let ctx = || nagios.borrow_mut().context();
    let hard_limit = Duration::from_secs(u64::from(iv.check + iv.retry * iv.attempts + 40));
    let state = |svc: &str| nagios.borrow_mut().state(HOST, svc);
    // The node's pages; the cluster host's are asserted apart (below).
    let pages = || -> Vec<Page> {
        nagios
            .borrow()
            .pages()
            .into_iter()
            .filter(|p| p.host == HOST)
            .collect()
    };
    let cluster_pages = || -> Vec<Page> {
        nagios
            .borrow()
            .pages()
            .into_iter()
            .filter(|p| p.host != HOST)
            .collect()
    };

    wait_for(
        "every service OK",
        hard_limit,
        || nagios.borrow_mut().all_ok(),
        ctx,
    );
    assert!(
        pages().is_empty() && cluster_pages().is_empty(),
        "{}",
        ctx()
    );
    // The same-host dependencies, as the core made them (its object cache): every one of the
    // rendering, on the node, none on the cluster host.
    let cache = std::fs::read_to_string(nagios.borrow().dir.join("objects.cache")).unwrap();
    let made = cache.matches("define servicedependency {").count();
    let want: usize = deps
        .lines()
        .filter_map(|l| l.trim().strip_prefix("dependent_service_description"))
        .map(|l| l.trim().split(',').count())
        .sum();
    assert!(want >= 20, "{deps}");
    assert_eq!(made, want, "{cache}");
    assert_eq!(
        cache
            .matches(&format!("\tdependent_host_name\t{HOST}\n"))
            .count(),
        want,
        "{cache}"
    );

    // --- The cascade: one page, the root's; the others HARD CRITICAL, checked, not paged. ---
    let t0 = Instant::now();
    cascade.fail_session();
    cascade.kernel_errors();
    node.inject(Incident::Ext4ReadOnly);
    cascade.wedge_pod(&node);
    for svc in [ISCSI, KERNEL, RO, STUCK] {
        wait_for(
            &format!("{svc} HARD CRITICAL"),
            hard_limit,
            || state(svc) == Some((2, true)),
            ctx,
        );
    }
    wait_for(
        "the root's PROBLEM",
        Duration::from_secs(20),
        || !pages().is_empty(),
        ctx,
    );
    // Each symptom checked twice more in its HARD state (volatile: a notification attempt each
    // time), still not paged.
    let before: Vec<usize> = [KERNEL, RO, STUCK]
        .iter()
        .map(|s| nagios.borrow().hard_alerts(s))
        .collect();
    for (svc, n) in [KERNEL, RO, STUCK].iter().zip(before) {
        wait_for(
            &format!("two more HARD results of {svc}"),
            hard_limit,
            || nagios.borrow().hard_alerts(svc) >= n + 2,
            ctx,
        );
    }
    let p = pages();
    assert_eq!(
        kinds(&p),
        [("PROBLEM".to_string(), ISCSI.to_string())],
        "one page per chain, the root's: {}",
        ctx()
    );
    assert!(
        p[0].body.contains("session3") && p[0].body.contains("next: "),
        "{:#?}",
        p[0]
    );
    let log = nagios.borrow().log();
    for svc in [KERNEL, RO, STUCK] {
        assert!(
            !log.contains(&format!(
                "SERVICE NOTIFICATION: storage-oncall;{HOST};{svc};"
            )),
            "{svc} notified: {log}"
        );
    }

    // --- The root recovers: its RECOVERY, then the next link (the kernel's errors, still in
    // their window) pages; the read-only PV and the pod still wait. ---
    cascade.repair_session();
    wait_for(
        "the root's RECOVERY, then the kernel errors' PROBLEM",
        hard_limit,
        || pages().len() >= 3,
        ctx,
    );
    assert!(
        t0.elapsed() < KERNEL_WINDOW,
        "the kernel's records left their window before the test got here: {:?}",
        t0.elapsed()
    );
    let before: Vec<usize> = [RO, STUCK]
        .iter()
        .map(|s| nagios.borrow().hard_alerts(s))
        .collect();
    for (svc, n) in [RO, STUCK].iter().zip(before) {
        wait_for(
            &format!("two more HARD results of {svc}"),
            hard_limit,
            || nagios.borrow().hard_alerts(svc) >= n + 2,
            ctx,
        );
    }
    let p = pages();
    assert_eq!(
        kinds(&p),
        [
            ("PROBLEM".to_string(), ISCSI.to_string()),
            ("RECOVERY".to_string(), ISCSI.to_string()),
            ("PROBLEM".to_string(), KERNEL.to_string()),
        ],
        "{}",
        ctx()
    );
    assert!(
        p[2].body.contains("sdc") && p[2].body.contains("next: "),
        "{:#?}",
        p[2]
    );

    // --- The kernel's records leave the window: its RECOVERY, then the read-only PV pages. ---
    wait_for(
        "the kernel errors' RECOVERY, then the read-only PV's PROBLEM",
        hard_limit + KERNEL_WINDOW.saturating_sub(t0.elapsed()),
        || pages().len() >= 5,
        ctx,
    );
    let p = pages();
    assert_eq!(
        kinds(&p[3..]),
        [
            ("RECOVERY".to_string(), KERNEL.to_string()),
            ("PROBLEM".to_string(), RO.to_string()),
        ],
        "{}",
        ctx()
    );
    assert!(p[4].body.contains(e2e::engines::EXT4_PVC), "{:#?}", p[4]);

    // --- The wedged pod goes first: it recovers without a page (it was never paged). ---
    cascade.release_pod(&node);
    wait_for(
        &format!("{STUCK} OK"),
        hard_limit,
        || state(STUCK) == Some((0, true)),
        ctx,
    );
    // --- Then the PV: its RECOVERY, and every service OK. ---
    node.clear(Incident::Ext4ReadOnly);
    wait_for(
        "the read-only PV's RECOVERY",
        hard_limit,
        || pages().len() >= 6,
        ctx,
    );
    wait_for(
        "every service OK again",
        hard_limit,
        || nagios.borrow_mut().all_ok(),
        ctx,
    );
    let p = pages();
    assert_eq!(
        kinds(&p),
        [
            ("PROBLEM".to_string(), ISCSI.to_string()),
            ("RECOVERY".to_string(), ISCSI.to_string()),
            ("PROBLEM".to_string(), KERNEL.to_string()),
            ("RECOVERY".to_string(), KERNEL.to_string()),
            ("PROBLEM".to_string(), RO.to_string()),
            ("RECOVERY".to_string(), RO.to_string()),
        ],
        "{}",
        ctx()
    );
    // The cluster host's check_stuck_terminating_all_nodes watches every node's pods (for nodes without a
    // service of their own) and depends on nothing (docs/triage.md): the wedged pod is paged
    // there too, once, and recovers there. Nothing else of the cluster host pages.
    let c = cluster_pages();
    assert_eq!(
        kinds(&c),
        [
            (
                "PROBLEM".to_string(),
                "check_stuck_terminating_all_nodes".to_string()
            ),
            (
                "RECOVERY".to_string(),
                "check_stuck_terminating_all_nodes".to_string()
            ),
        ],
        "{}",
        ctx()
    );
    assert!(
        c.iter().all(|p| p.host == "prod-cluster") && c[0].body.contains(e2e::engines::EXT4_POD),
        "{c:#?}"
    );
}
