//! One page per chain in the real Icinga 2 (issue 32): the harness of `engines_icinga.rs`
//! (the daemon with Icinga's defaults, the shipped CheckCommands, services and notifications)
//! plus the shipped `icinga2/k8s-storage-dependencies.conf`.
//!
//! The fault set is the storage cascade on one node ([`Cascade`]): the iSCSI session failed, the
//! kernel's errors on its disk, the read-only PV (the real kernel's ext4 error path) and the pod
//! wedged in Terminating on it. What the notification script receives:
//! - exactly one PROBLEM, k8s_iscsi_sessions' (the root), while k8s_storage_kernel_errors,
//!   k8s_ro_pvc_mounts and k8s_stuck_terminating reach HARD CRITICAL and keep being checked;
//! - the session repaired: its RECOVERY, then k8s_storage_kernel_errors (its records still in
//!   the window) pages — Icinga 2 sends the notification it held — and the two above it wait;
//! - the kernel's records out of the window: its RECOVERY, then k8s_ro_pvc_mounts pages;
//! - the wedged pod gone first: k8s_stuck_terminating recovers without a page (never paged);
//! - the PV repaired: k8s_ro_pvc_mounts' RECOVERY. Nothing else, in that order.

use super::engines_icinga::{svc_of, Icinga};
use e2e::engines::{wait_for, Cascade, Incident, Intervals, Node, Page, NODE};
use e2e::{need_root, need_tool, workspace_root};
use serde_json::json;
use std::cell::RefCell;
use std::time::{Duration, Instant};

/// How long the kernel's records of the cascade count (the check's `--window`): long enough for
/// the root's recovery and the next link's page, short enough to wait out.
const KERNEL_WINDOW: Duration = Duration::from_secs(120);

fn kinds(pages: &[Page]) -> Vec<(String, String)> {
    pages
        .iter()
        .map(|p| (p.kind.clone(), p.service.clone()))
        .collect()
}

fn pair(kind: &str, svc: &str) -> (String, String) {
    (kind.to_string(), svc.to_string())
}

#[test]
fn icinga2_pages_once_per_chain_and_the_held_pages_follow_the_root_recovery() {
    let t = "icinga2_pages_once_per_chain_and_the_held_pages_follow_the_root_recovery";
    if !need_root(t) || !need_tool(t, "icinga2") || !need_tool(t, "curl") || !need_tool(t, "bindfs")
    {
        return;
    }
    // Beside other tests, not alone: see "Side by side" in tests/src/engines.rs.
    let _machine = e2e::shared();
    let iv = Intervals::from_env();
    let (iscsi, kernel, ro, stuck) = (
        svc_of("check_iscsi_sessions"),
        svc_of("check_storage_kernel_errors"),
        svc_of("check_ro_pvc_mounts"),
        svc_of("check_stuck_terminating"),
    );
    let mut node = Node::new();
    node.quiet_cluster();
    let mut cascade = Cascade::new(&node);
    let deps =
        std::fs::read_to_string(workspace_root().join("icinga2/k8s-storage-dependencies.conf"))
            .unwrap();
    let icinga = RefCell::new(Icinga::start_with(
        &node,
        iv,
        &[("k8s-storage-dependencies.conf", deps.clone())],
        &[
            ("k8s_iscsi_sessions_sys".to_string(), json!(cascade.sys())),
            (
                "k8s_storage_kernel_errors_window".to_string(),
                json!(format!("{}s", KERNEL_WINDOW.as_secs())),
            ),
        ],
    ));
    let ctx = || icinga.borrow_mut().context();
    let hard_limit = Duration::from_secs(u64::from(iv.check + iv.retry * iv.attempts + 40));
    let state = |svc: &str| icinga.borrow_mut().state(NODE, svc);
    // The node's pages; the cluster host's are asserted apart (below).
    let pages = || -> Vec<Page> {
        icinga
            .borrow()
            .pages()
            .into_iter()
            .filter(|p| p.host == NODE)
            .collect()
    };
    let cluster_pages = || -> Vec<Page> {
        icinga
            .borrow()
            .pages()
            .into_iter()
            .filter(|p| p.host != NODE)
            .collect()
    };

    wait_for(
        "every service OK",
        hard_limit,
        || icinga.borrow_mut().all_ok(),
        ctx,
    );
    assert!(
        pages().is_empty() && cluster_pages().is_empty(),
        "{}",
        ctx()
    );
    // Every dependency of the apply rules made on the node, none on the cluster host (which runs
    // none of the masters).
    let want: usize = deps
        .lines()
        .filter_map(|l| l.split_once("service.name in [ ")?.1.split_once(" ]"))
        .map(|(names, _)| names.split(", ").count())
        .sum();
    assert!(want >= 8, "{deps}");
    let out = icinga.borrow().daemon_log();
    assert!(
        out.contains(&format!("Instantiated {want} Dependencies")),
        "{out}"
    );

    // --- The cascade: one page, the root's; the others HARD CRITICAL, checked, not paged. ---
    let t0 = Instant::now();
    cascade.fail_session();
    cascade.kernel_errors();
    node.inject(Incident::Ext4ReadOnly);
    cascade.wedge_pod(&node);
    for svc in [&iscsi, &kernel, &ro, &stuck] {
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
    // Each symptom checked twice more in its HARD state (volatile: a notification each time,
    // held), still not paged.
    for svc in [&kernel, &ro, &stuck] {
        icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    }
    let p = pages();
    assert_eq!(
        kinds(&p),
        [pair("PROBLEM", &iscsi)],
        "one page per chain, the root's: {}",
        ctx()
    );
    assert!(
        p[0].body.contains("session3") && p[0].body.contains("next: "),
        "{:#?}",
        p[0]
    );

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
    for svc in [&ro, &stuck] {
        icinga.borrow_mut().wait_checks(svc, 2, hard_limit);
    }
    let p = pages();
    assert_eq!(
        kinds(&p),
        [
            pair("PROBLEM", &iscsi),
            pair("RECOVERY", &iscsi),
            pair("PROBLEM", &kernel)
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
        [pair("RECOVERY", &kernel), pair("PROBLEM", &ro)],
        "{}",
        ctx()
    );
    assert!(p[4].body.contains(e2e::engines::EXT4_PVC), "{:#?}", p[4]);

    // --- The wedged pod goes first: it recovers without a page (it was never paged). ---
    cascade.release_pod(&node);
    wait_for(
        &format!("{stuck} OK"),
        hard_limit,
        || state(&stuck) == Some((0, true)),
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
        || icinga.borrow_mut().all_ok(),
        ctx,
    );
    // A held notification fires from Icinga's 5 s timer: three more checks of the pod's service
    // give it the time to show up if it were (wrongly) still held.
    icinga.borrow_mut().wait_checks(&stuck, 3, hard_limit);
    let p = pages();
    assert_eq!(
        kinds(&p),
        [
            pair("PROBLEM", &iscsi),
            pair("RECOVERY", &iscsi),
            pair("PROBLEM", &kernel),
            pair("RECOVERY", &kernel),
            pair("PROBLEM", &ro),
            pair("RECOVERY", &ro),
        ],
        "{}",
        ctx()
    );
    // The cluster host of this harness runs the three cluster-wide checks (not the example's
    // k8s_stuck_terminating over every node, which would page the wedged pod a second time:
    // docs/triage.md); none of them pages for the cascade.
    assert!(cluster_pages().is_empty(), "{}", ctx());
}

/// The fleet layout with the dependencies validates with the real `icinga2 daemon -C`: the zones,
/// CheckCommands, services, example hosts (a node with every node check, the cluster) and
/// notifications as shipped, plus `k8s-storage-dependencies.conf`: every dependency of the apply
/// rules made on the example node, none on the cluster host, no warning (no loop, no parent
/// missing).
#[test]
fn icinga2_dependencies_validate_in_the_fleet_layout() {
    let t = "icinga2_dependencies_validate_in_the_fleet_layout";
    if !need_tool(t, "icinga2") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    // The daemon reads its configuration as its own user.
    std::fs::set_permissions(
        work.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let root = workspace_root().join("icinga2");
    let cfg = work.path().join("icinga2.conf");
    let include: String = [
        "zones.conf.example",
        "k8s-storage-checks.conf",
        "k8s-storage-services.conf",
        "k8s-storage-dependencies.conf",
        "k8s-storage-hosts.conf.example",
        "k8s-storage-notifications.conf",
    ]
    .iter()
    .map(|f| format!("include \"{}\"\n", root.join(f).display()))
    .collect();
    std::fs::write(
        &cfg,
        format!(
            r#"const PluginDir = "/usr/lib/nagios/plugins"
const NodeName = "icinga-master"
const ZoneName = "master"
include <itl>
include <plugins>
{include}object NotificationComponent "notification" {{ }}
object User "alice" {{ email = "alice@example.org"; groups = [ "k8s-storage-oncall" ] }}
"#
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cfg, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let out = e2e::Cmd::new("icinga2")
        .args(["daemon", "-C", "-c"])
        .arg(&cfg)
        .run();
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(out.code, 0, "icinga2 daemon -C:\n{all}");
    let deps = std::fs::read_to_string(root.join("k8s-storage-dependencies.conf")).unwrap();
    let want: usize = deps
        .lines()
        .filter_map(|l| l.split_once("service.name in [ ")?.1.split_once(" ]"))
        .map(|(names, _)| names.split(", ").count())
        .sum();
    assert!(
        all.contains(&format!("Instantiated {want} Dependencies")),
        "every dependency on the example node, none on the cluster:\n{all}"
    );
    assert!(!all.contains("warning/"), "{all}");
}
