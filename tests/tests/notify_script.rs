//! The shipped notification command `nagios/k8s-storage-notify`, driven the way Nagios 4 runs it
//! (environment macros, one run per notification of a volatile service), without an engine: what
//! it pages for a sequence of check outputs. The engine tests (`engines_nagios`,
//! `engines_icinga`) run it through the real engines; this module covers the sequences an engine
//! test cannot make on demand.

use std::path::Path;
use std::process::Command;

const PV_A: &str = "pvc-a634b9a3-0000-4000-8000-00000000000a";
const PV_B: &str = "pvc-746b2837-0000-4000-8000-00000000000b";
const PV_C: &str = "pvc-5e7f0b11-0000-4000-8000-00000000000c";
const PV_D: &str = "pvc-81b676e6-0000-4000-8000-00000000000d";

/// A finding line of check_ro_pvc_mounts for `pv`.
fn finding(pv: &str) -> String {
    format!("[CRITICAL] media/app-0 (PVC media/app, {pv}) is read-only: ext4 remounted ro")
}

/// One notification: the script run with Nagios' environment macros; returns how many pages
/// (records in the --append file) there are now.
fn notify(dir: &Path, kind: &str, state: &str, long: &str) -> usize {
    let out = dir.join("pages");
    let st = Command::new(e2e::workspace_root().join("nagios/k8s-storage-notify"))
        .args(["--append", out.to_str().unwrap()])
        .args(["--state-dir", dir.join("state").to_str().unwrap()])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("NAGIOS_NOTIFICATIONTYPE", kind)
        .env("NAGIOS_HOSTNAME", "k8s02")
        .env("NAGIOS_SERVICEDESC", "k8s_check_ro_pvc_mounts")
        .env("NAGIOS_SERVICESTATE", state)
        .env("NAGIOS_SERVICEOUTPUT", "RO_PVC_MOUNTS CRITICAL - read-only")
        // Nagios passes the long output's line breaks as the two characters \n.
        .env("NAGIOS_LONGSERVICEOUTPUT", long.replace('\n', "\\n"))
        .status()
        .expect("run k8s-storage-notify");
    assert!(st.success(), "k8s-storage-notify failed: {st:?}");
    std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("=== ") && *l != "=== end")
        .count()
}

fn lines(pvs: &[&str], tail: &str) -> String {
    let mut s: Vec<String> = pvs.iter().map(|p| finding(p)).collect();
    if !tail.is_empty() {
        s.push(tail.to_string());
    }
    s.join("\n")
}

/// A run whose output was cut (at --max-output, or by an NRPE v2 packet) shows fewer volumes:
/// that is not a recovery, and when the next complete output shows them again they are not
/// "newly failing" — only a volume never paged before is. (Before, the script kept the smaller
/// set and paged the hidden volume again.)
#[test]
fn a_cut_output_does_not_make_hidden_volumes_new() {
    for tail in [
        "... and 1 more volume",
        "... 1 more volume follow: NRPE v2 (check_nrpe -2) stops at 1 KiB here; to see all, query without -2 or run check_ro_pvc_mounts on the node (add --format json for one line per finding)",
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        assert_eq!(notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B, PV_C], "")), 1);
        // The same three, one hidden by the cut: no page.
        assert_eq!(
            notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B], tail)),
            1,
            "{tail}"
        );
        // Complete again: C was paged already, no page.
        assert_eq!(
            notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B, PV_C], "")),
            1,
            "{tail}: a volume hidden by a cut output was paged again as new"
        );
        // A fourth volume: paged, named in the subject.
        assert_eq!(
            notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B, PV_C, PV_D], "")),
            2
        );
        let pages = std::fs::read_to_string(p.join("pages")).unwrap();
        assert!(
            pages.contains(&format!("(newly failing: {PV_D})")),
            "{pages}"
        );
        // Recovery always goes out; after it, every volume is new again.
        assert_eq!(notify(p, "RECOVERY", "OK", ""), 3);
        assert_eq!(notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_C], "")), 4);
    }
}

/// Without a cut, a volume that recovered while others still fail, and then fails again, is new
/// (the kept set shrinks with a complete output).
#[test]
fn a_volume_that_recovers_and_fails_again_is_paged() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    assert_eq!(
        notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B], "")),
        1
    );
    assert_eq!(notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A], "")), 1);
    assert_eq!(
        notify(p, "PROBLEM", "CRITICAL", &lines(&[PV_A, PV_B], "")),
        2
    );
}
