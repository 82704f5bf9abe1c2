//! Protocol rules that hold for every binary of the suite, checked on the release binaries.

use e2e::{all_checks, run, Cmd};

fn status_name(check: &str) -> String {
    check.trim_start_matches("check_").to_uppercase()
}

#[test]
fn help_and_version_exit_3_for_every_check() {
    for c in all_checks() {
        let out = run(&c, ["--help"]);
        assert_eq!(out.code, 3, "{c} --help: {out:?}");
        assert!(
            out.stdout.contains("--timeout"),
            "{c} --help lacks --timeout"
        );
        let out = run(&c, ["--version"]);
        assert_eq!(out.code, 3, "{c} --version: {out:?}");
        assert!(out.stdout.contains(&c), "{c} --version: {out:?}");
    }
}

#[test]
fn usage_errors_exit_3_with_unknown_line_for_every_check() {
    for c in all_checks() {
        for args in [
            &["--no-such-option"][..],
            &["-t", "soon"],
            &["--format", "xml"],
        ] {
            let out = run(&c, args);
            out.assert_status(&status_name(&c), 3);
            assert!(
                out.first_line().contains("usage error"),
                "{c} {args:?}: {out:?}"
            );
        }
    }
}

/// Every option a check's `--help` lists is documented: on its page `docs/checks/<check>.md`, or
/// on the pages every check's links to (the common options, Kubernetes API access).
#[test]
fn every_option_of_every_check_is_in_the_docs() {
    let root = e2e::workspace_root();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let readme = read("README.md");
    let common = read("docs/checks/README.md") + &read("docs/api-access.md");
    for c in all_checks() {
        assert!(readme.contains(&c), "README does not mention {c}");
        let page = read(&format!("docs/checks/{c}.md"));
        let help = run(&c, ["--help"]).stdout;
        for word in help.split_whitespace() {
            let opt = word.trim_end_matches([',', '.', ')', ']', ';', ':']);
            let opt = opt.split(['=', '[', '<']).next().unwrap();
            if opt.starts_with("--") && opt.len() > 2 {
                assert!(
                    page.contains(opt) || common.contains(opt),
                    "docs/checks/{c}.md does not document {c} {opt}"
                );
            }
        }
    }
}

/// The release binaries are static and small: no dynamic section, and they run in an empty chroot.
#[test]
fn binaries_are_static_and_run_in_an_empty_chroot() {
    for c in all_checks() {
        let path = e2e::bin(&c);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..4], b"\x7fELF");
        // -L: the name is a link to the one program; what it runs is what must be static.
        let file = Cmd::new("file").arg("-L").arg(&path).run();
        if file.code == 0 {
            assert!(
                file.stdout.contains("statically linked") || file.stdout.contains("static-pie"),
                "{c}: {}",
                file.stdout
            );
        }
        let ldd = Cmd::new("ldd").arg(&path).run();
        assert!(
            ldd.stdout.contains("not a dynamic executable")
                || ldd.stderr.contains("not a dynamic executable")
                || ldd.stdout.contains("statically linked"),
            "{c}: ldd says {ldd:?}"
        );
    }
    if !e2e::need_root("binaries_run_in_an_empty_chroot") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for c in all_checks() {
        e2e::copy_executable(&e2e::bin(&c), &dir.path().join(&c));
        let out = Cmd::new("chroot")
            .arg(dir.path())
            .arg(format!("/{c}"))
            .arg("--version")
            .run();
        assert_eq!(out.code, 3, "{c} in an empty chroot: {out:?}");
        assert!(out.stdout.contains(&c));
    }
}

#[test]
fn a_panic_exits_3_with_internal_error() {
    let out = run("plugin_selftest", ["--mode", "panic"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.first_line()
            .starts_with("SELFTEST UNKNOWN - internal error: index out of bounds"),
        "{out:?}"
    );
}

#[test]
fn a_worker_killed_by_sigbus_is_unknown_naming_it() {
    // Real kernel: a mapped file truncated underneath the reader.
    let out = run("plugin_selftest", ["--mode", "sigbus"]);
    assert_eq!(out.code, 3, "{out:?}");
    assert!(
        out.first_line().starts_with(
            "SELFTEST UNKNOWN - internal error: the check process ended without an answer (killed by SIGBUS: an input file was truncated while it was read?)"
        ),
        "{out:?}"
    );
}

#[test]
fn watchdog_answers_while_the_gathering_thread_is_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let out = run(
        "plugin_selftest",
        [
            "--mode",
            "hang",
            "-t",
            "1",
            "--fifo",
            fifo.to_str().unwrap(),
        ],
    );
    out.assert_status("SELFTEST", 3);
    assert_eq!(
        out.first_line(),
        "SELFTEST UNKNOWN - timed out after 1s while opening the fifo"
    );
    let out = run(
        "plugin_selftest",
        [
            "--mode",
            "hang",
            "-t",
            "1:CRITICAL",
            "--fifo",
            fifo.to_str().unwrap(),
        ],
    );
    out.assert_status("SELFTEST", 2);
}

#[test]
fn formats_json_and_prometheus() {
    let out = run("plugin_selftest", ["--format", "json"]);
    assert_eq!(out.code, 0);
    let v: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["status"], "OK");
    assert_eq!(v["perfdata"][0]["label"], "n");
    let out = run("plugin_selftest", ["--format", "prometheus"]);
    assert!(
        out.stdout
            .contains("k8s_storage_check_status{check=\"plugin_selftest\"} 0\n"),
        "{out:?}"
    );
    assert!(
        out.stdout
            .contains("k8s_storage_check_n{check=\"plugin_selftest\"} 1\n"),
        "{out:?}"
    );
}
