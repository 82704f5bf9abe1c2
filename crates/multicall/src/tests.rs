use super::*;

fn args(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn run_of(d: Dispatch) -> (&'static str, Vec<String>) {
    match d {
        Dispatch::Run(a, rest) => (
            a.name,
            rest.iter()
                .map(|s| s.to_string_lossy().into_owned())
                .collect(),
        ),
        other => panic!("expected a run, got {other:?}"),
    }
}

#[test]
fn the_name_called_by_chooses_the_check_and_keeps_every_argument() {
    let (name, rest) = run_of(dispatch(args(&[
        "/usr/lib/nagios/plugins/check_ro_pvc_mounts",
        "-t",
        "20",
    ])));
    assert_eq!(name, "check_ro_pvc_mounts");
    assert_eq!(
        rest,
        ["/usr/lib/nagios/plugins/check_ro_pvc_mounts", "-t", "20"]
    );
    // A bare name (PATH lookup) and the runner's own name.
    assert_eq!(
        run_of(dispatch(args(&["check_watch_cache"]))).0,
        "check_watch_cache"
    );
    assert_eq!(
        run_of(dispatch(args(&[
            "/usr/local/bin/k8s-storage-checks-textfile",
            "--once"
        ])))
        .0,
        TEXTFILE
    );
}

#[test]
fn the_first_argument_chooses_the_check_when_called_by_the_programs_name() {
    for program in [
        "k8s-storage-checks",
        "/usr/lib/nagios/plugins/k8s-storage-checks-cap_dac_read_search",
        "./a-copy-with-any-name",
    ] {
        let (name, rest) = run_of(dispatch(args(&[
            program,
            "check_storage_kernel_errors",
            "--window",
            "5m",
        ])));
        assert_eq!(name, "check_storage_kernel_errors");
        // The check sees its own name first, as if it had been called by it.
        assert_eq!(rest, ["check_storage_kernel_errors", "--window", "5m"]);
    }
    let (name, rest) = run_of(dispatch(args(&[
        "k8s-storage-checks",
        "textfile",
        "--once",
    ])));
    assert_eq!(name, TEXTFILE);
    // Its usage line names the command as typed.
    assert_eq!(rest, ["k8s-storage-checks textfile", "--once"]);
}

#[test]
fn an_applets_name_wins_over_the_first_argument() {
    // check_watch_cache called with an argument that happens to be another check's name: the
    // argument is the check's (a usage error there), never a second dispatch.
    let (name, rest) = run_of(dispatch(args(&[
        "check_watch_cache",
        "check_ro_pvc_mounts",
    ])));
    assert_eq!(name, "check_watch_cache");
    assert_eq!(rest, ["check_watch_cache", "check_ro_pvc_mounts"]);
}

#[test]
fn unknown_names_are_unknown() {
    // A link named like a check this version does not have.
    match dispatch(args(&[
        "/usr/lib/nagios/plugins/check_gone",
        "check_ro_pvc_mounts",
    ])) {
        Dispatch::Unknown(n) => assert_eq!(n, "check_gone"),
        other => panic!("{other:?}"),
    }
    for first in ["check_nope", "-w", "ro_pvc_mounts", ""] {
        match dispatch(args(&["k8s-storage-checks", first])) {
            Dispatch::Unknown(n) => assert_eq!(n, first),
            other => panic!("{first}: {other:?}"),
        }
    }
    assert!(matches!(
        dispatch(args(&["k8s-storage-checks"])),
        Dispatch::Usage
    ));
    assert!(matches!(dispatch(args(&[])), Dispatch::Usage));
    let line = unknown("check_nope|x\n");
    assert!(
        line.starts_with("K8S_STORAGE_CHECKS UNKNOWN - no check named 'check_nope"),
        "{line}"
    );
    assert!(
        !line.trim_end().contains('\n') && !line.contains('|'),
        "{line}"
    );
    assert!(line.contains("check_ro_pvc_mounts") && line.contains(TEXTFILE_SUB));
}

#[test]
fn the_programs_own_options() {
    assert!(matches!(
        dispatch(args(&["k8s-storage-checks", "--help"])),
        Dispatch::Help
    ));
    assert!(matches!(
        dispatch(args(&["k8s-storage-checks", "-V"])),
        Dispatch::Version
    ));
    assert!(matches!(
        dispatch(args(&["k8s-storage-checks", "--list", "x"])),
        Dispatch::List
    ));
    let h = help();
    for a in APPLETS {
        assert!(h.contains(a.name), "{} missing from --help:\n{h}", a.name);
    }
    assert!(h.contains("needs cap_syslog"), "{h}");
}

#[test]
fn every_check_crate_is_an_applet_with_the_capabilities_it_needs() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut on_disk: Vec<String> = std::fs::read_dir(crates)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("check_"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<&str> = APPLETS
        .iter()
        .map(|a| a.name)
        .filter(|n| n.starts_with("check_"))
        .collect();
    listed.sort_unstable();
    assert_eq!(listed, on_disk);
    let want = "\
check_csi_node_plugins k8s-storage-checks-cap_dac_read_search cap_dac_read_search
check_iscsi_sessions k8s-storage-checks
check_jiva_rep_crashloop k8s-storage-checks
check_kubelet_nested_ops k8s-storage-checks
check_longhorn_volumes k8s-storage-checks
check_pv_capacity k8s-storage-checks-cap_dac_read_search cap_dac_read_search
check_ro_pvc_mounts k8s-storage-checks-cap_dac_read_search cap_dac_read_search
check_stale_csi_mounts k8s-storage-checks-cap_dac_read_search cap_dac_read_search
check_storage_kernel_errors k8s-storage-checks-cap_syslog cap_syslog
check_stuck_scheduled k8s-storage-checks
check_stuck_terminating k8s-storage-checks
check_volume_attachments k8s-storage-checks
check_watch_cache k8s-storage-checks
k8s-storage-checks-textfile k8s-storage-checks
k8s-storage-checks-serve k8s-storage-checks
";
    assert_eq!(list(), want);
}

#[test]
fn masks_and_copy_names_follow_the_capabilities() {
    assert_eq!(applet("check_ro_pvc_mounts").unwrap().mask(), 1 << 2);
    assert_eq!(
        applet("check_storage_kernel_errors").unwrap().mask(),
        1 << 34
    );
    assert_eq!(applet("check_watch_cache").unwrap().mask(), 0);
    assert_eq!(applet("textfile").unwrap().name, TEXTFILE);
    assert_eq!(applet("serve").unwrap().name, SERVE);
    assert_eq!(applet(SERVE).unwrap().mask(), 0);
    let (name, rest) = run_of(dispatch(args(&[
        "k8s-storage-checks",
        "serve",
        "--listen",
        "127.0.0.1:9842",
    ])));
    assert_eq!(name, SERVE);
    assert_eq!(
        rest,
        ["k8s-storage-checks serve", "--listen", "127.0.0.1:9842"]
    );
    assert_eq!(copy_name(&[]), "k8s-storage-checks");
    assert_eq!(
        copy_name(&[Cap::DacReadSearch]),
        "k8s-storage-checks-cap_dac_read_search"
    );
    assert_eq!(
        copy_name(&[Cap::Syslog, Cap::DacReadSearch, Cap::Syslog]),
        "k8s-storage-checks-cap_dac_read_search+cap_syslog"
    );
}
