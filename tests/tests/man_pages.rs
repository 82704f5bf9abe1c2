//! The man pages (issue 26): `k8s-storage-checks --generate-man DIR` makes them with clap_mangen
//! from the clap definitions, one per check, the textfile runner and the program. Each renders
//! with the real `man -l` without a single groff warning (what lintian checks), has the sections
//! an operator looks for (OPTIONS, EXIT STATUS, ENVIRONMENT, FILES, EXAMPLES, SEE ALSO), names
//! every option its `--help` lists, with the defaults it shows, and carries the examples of its
//! docs page.

use e2e::{all_checks, need_tool, workspace_root, Cmd, Output};
use std::path::Path;

fn generate(dir: &Path) -> Output {
    Cmd::check("k8s-storage-checks")
        .arg("--generate-man")
        .arg(dir)
        .env("SOURCE_DATE_EPOCH", "1764892800")
        .run()
}

/// `man -l PAGE` as a reader sees it, and groff's warnings (`man --warnings`, as lintian runs it).
fn man(page: &Path) -> (Output, Output) {
    let run = |warn: bool| {
        let mut c = Cmd::new("man")
            .env("LC_ALL", "C.UTF-8")
            .env("MANWIDTH", "80")
            .env("MANPAGER", "cat")
            .env("MAN_DISABLE_SECCOMP", "1");
        if warn {
            c = c.args(["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z"]);
        } else {
            c = c.arg("-l");
        }
        c.arg(page).run()
    };
    (run(false), run(true))
}

/// Roff text as plain text: escaped hyphens and quotes undone.
fn plain(roff: &str) -> String {
    roff.replace("\\-", "-")
        .replace("\\*(Aq", "'")
        .replace("\\fB", "")
        .replace("\\fI", "")
        .replace("\\fR", "")
        .replace("\\\\", "\\")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn every_page_renders_with_its_sections_options_defaults_and_examples() {
    let t = "every_page_renders_with_its_sections_options_defaults_and_examples";
    if !need_tool(t, "man") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = generate(dir.path());
    assert_eq!(out.code, 0, "{out:?}");
    let mut names = all_checks();
    names.push("k8s-storage-checks".into());
    names.push("k8s-storage-checks-textfile".into());
    for name in &names {
        let page = dir.path().join(format!("{name}.1"));
        assert!(page.is_file(), "{name}.1 not generated: {out:?}");
        let (shown, warned) = man(&page);
        assert_eq!(shown.code, 0, "man -l {name}.1: {shown:?}");
        assert!(
            warned.stderr.trim().is_empty() && warned.code == 0,
            "man --warnings {name}.1: {warned:?}"
        );
        let headings: Vec<&str> = shown
            .stdout
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with(' '))
            .collect();
        for section in [
            "NAME",
            "SYNOPSIS",
            "DESCRIPTION",
            "OPTIONS",
            "EXIT STATUS",
            "ENVIRONMENT",
            "FILES",
            "EXAMPLES",
            "SEE ALSO",
        ] {
            assert!(
                headings.contains(&section),
                "{name}.1 has no {section} section: {headings:?}"
            );
        }
        assert!(
            shown.stdout.contains("2025-12-05"),
            "{name}.1: the date is not SOURCE_DATE_EPOCH's"
        );
        let roff = plain(&std::fs::read_to_string(&page).unwrap());
        for code in ["0", "1", "2", "3"] {
            assert!(
                roff.contains(&format!(".TP {code} ")),
                "{name}.1: EXIT STATUS lacks {code}"
            );
        }
        if name == "k8s-storage-checks" {
            assert!(roff.contains("--list"), "{roff}");
            continue;
        }
        // Every option of --help, with every default --help shows.
        let help = Cmd::check(name).arg("--help").run().stdout;
        let help_plain = help.split_whitespace().collect::<Vec<_>>().join(" ");
        for word in help.split_whitespace() {
            let opt = word.trim_end_matches([',', '.', ')', ']', ';', ':']);
            let opt = opt.split(['=', '[', '<']).next().unwrap();
            if opt.starts_with("--") && opt.len() > 2 {
                assert!(roff.contains(opt), "{name}.1 does not name {opt}");
            }
        }
        let mut defaults = 0;
        for d in help_plain.split("[default: ").skip(1) {
            let d = d.split(']').next().unwrap();
            defaults += 1;
            assert!(
                roff.contains(&format!("[default: {d}]")),
                "{name}.1 lacks the default {d}"
            );
        }
        assert!(defaults > 0, "{name} --help shows no default");
        // The examples of the check's page, docs/checks/<check>.md.
        if name.starts_with("check_") {
            let doc =
                std::fs::read_to_string(workspace_root().join(format!("docs/checks/{name}.md")))
                    .unwrap();
            let ex = doc
                .split("\n## Examples\n")
                .nth(1)
                .and_then(|s| s.split("```sh\n").nth(1))
                .and_then(|s| s.split("```").next())
                .unwrap_or_else(|| panic!("docs/checks/{name}.md has no Examples block"));
            let mut n = 0;
            for line in ex.lines().filter(|l| l.starts_with("check_")) {
                let cmd = line.split("  #").next().unwrap().trim();
                n += 1;
                assert!(
                    roff.contains(&plain(cmd)),
                    "{name}.1 lacks the example `{cmd}`"
                );
            }
            assert!(n > 0, "docs/checks/{name}.md: no example runs {name}");
        }
    }
}

/// A directory that cannot be made is an error, not a silent success.
#[test]
fn an_unwritable_directory_fails_loudly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let out = generate(&file.join("man"));
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("--generate-man"), "{out:?}");
    // Without a directory: a usage line, exit 1.
    let out = Cmd::check("k8s-storage-checks").arg("--generate-man").run();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("usage"), "{out:?}");
}
