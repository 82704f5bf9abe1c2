//! Issue 26: every non-OK finding tells the operator the next step, pasteable. The incident
//! replay (the README quickstart's `./try-all`, from files: tests/src/bin/replay.rs) runs all
//! checks against their part of the incidents, once per output format; in each format every
//! non-OK finding has a `next:` step that names the right node (the scene's node for a node's
//! check, the finding's own node otherwise), ends with its runbook `docs/runbooks/<signal>.md`,
//! and holds commands between backticks that `sh -n` accepts exactly as printed, none of them
//! with a `|` or its `¦` stand-in, and none the runbook-only fallback (`plugin::report::NO_STEP`):
//! every non-OK finding has a step of its own. The harness (`e2e::Cmd::run`) fails every test
//! whose check prints that fallback, so every check's fixture-driven tests hold to it too. The
//! same checks' `-v`, `-vv` and `-vvv` add evidence, decisions and inputs in sentences, never a
//! Rust debug dump.

use e2e::Cmd;
use serde_json::Value;

/// The replay's answers in `format`: per check (in the replay's order), the scene's node and
/// the check's output.
fn replay(format: &str) -> Vec<(String, String, String)> {
    replay_with(format, &[])
}

/// [`replay`] with more arguments to every check.
fn replay_with(format: &str, check_args: &[&str]) -> Vec<(String, String, String)> {
    let mut c = Cmd::check("k8s-storage-checks-replay")
        .arg("--bin-dir")
        .arg(e2e::bin_dir())
        .arg("--files")
        .args(["--format", format]);
    for a in check_args {
        c = c.args(["--check-arg", a]);
    }
    let out = c.run();
    assert_eq!(out.code, 0, "{out:?}");
    let mut v: Vec<(String, String, String)> = Vec::new();
    for l in out.stdout.lines() {
        if let Some(rest) = l.strip_prefix("━━━ ") {
            // `━━━ 1/9 check_ro_pvc_mounts — node k8s02 ━━━`
            let mut w = rest.split(' ');
            let check = w.nth(1).unwrap_or("").to_string();
            let node = rest
                .split(" — node ")
                .nth(1)
                .and_then(|n| n.split(' ').next())
                .unwrap_or("")
                .to_string();
            if check.starts_with("check_") {
                v.push((check, node, String::new()));
            } else {
                v.push((String::new(), String::new(), String::new()));
            }
        } else if let Some((c, _, text)) = v.last_mut() {
            // Only the check's own answer: after its `$` line, up to `(exit N)`.
            if !c.is_empty() && !l.starts_with("(exit ") {
                text.push_str(l);
                text.push('\n');
            }
        }
    }
    let v: Vec<_> = v.into_iter().filter(|(c, _, _)| !c.is_empty()).collect();
    assert_eq!(v.len(), 12, "twelve scenes replayed:\n{}", out.stdout);
    v
}

/// The answer of a check: the lines after its `$` command line.
fn answer(text: &str) -> String {
    text.lines()
        .skip_while(|l| !l.starts_with("$ "))
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect()
}

/// `sh -n` on a command as printed.
fn sh_accepts(cmd: &str) -> Result<(), String> {
    let out = std::process::Command::new("sh")
        .args(["-n", "-c", cmd])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// A `next:` step judged: the runbook at its end, commands that parse, the node named.
fn judge(check: &str, what: &str, next: &str, signal: &str, node: Option<&str>) {
    assert!(
        !plugin::report::shows_missing_step(next) && !next.starts_with(plugin::report::NO_STEP),
        "{check} {what}: no step of its own, only the runbook: {next}"
    );
    let runbook = format!(" — runbook: docs/runbooks/{signal}.md");
    assert!(
        next.ends_with(&runbook),
        "{check} {what}: the next step does not end with {runbook:?}: {next}"
    );
    let cmds = plugin::next::commands(next);
    assert!(
        !cmds.is_empty(),
        "{check} {what}: no command in the next step: {next}"
    );
    assert_eq!(
        next.matches('`').count() % 2,
        0,
        "{check} {what}: unpaired backtick: {next}"
    );
    for c in cmds {
        assert!(
            !c.contains('|') && !c.contains('¦'),
            "{check} {what}: a pipe in {c:?}"
        );
        if let Err(e) = sh_accepts(c) {
            panic!("{check} {what}: sh -n rejects {c:?}: {e}\n{next}");
        }
    }
    // A Jiva target's tolerations are its deployment's policy, whichever node it ran on.
    if let Some(n) = node.filter(|_| signal != "toleration_short") {
        assert!(
            next.contains(&format!(" {n}")) || next.contains(&format!("={n}")),
            "{check} {what}: node {n} not named: {next}"
        );
    }
}

/// The node a finding's step must name: the scene's for a check about a node, else the
/// finding's own (a Jiva replica's), else none (a whole volume, an API server).
fn node_for<'a>(check: &str, scene: &'a str, subject_node: Option<&'a str>) -> Option<&'a str> {
    match check {
        "check_watch_cache" => None,
        // A Longhorn volume's replicas live on several nodes: its steps are the volume's (the
        // read-only one cordons the engine's node: longhorn_volumes.rs asserts that).
        "check_longhorn_volumes" => None,
        "check_jiva_rep_crashloop" => subject_node,
        _ => Some(scene),
    }
}

#[test]
fn every_non_ok_finding_of_the_replay_has_a_pasteable_next_step_in_text() {
    let mut seen = 0;
    for (check, scene, text) in replay("nagios") {
        let answer = answer(&text);
        let lines: Vec<&str> = answer.lines().collect();
        assert!(
            !answer.contains('¦'),
            "{check}: a mangled pipe in its answer:\n{answer}"
        );
        // Blocks: `[STATE] text` then indented lines; the step is the block's last line.
        let mut i = 1;
        let mut found = 0;
        while i < lines.len() {
            let l = lines[i];
            i += 1;
            let Some(state) = l.strip_prefix('[').and_then(|r| r.split(']').next()) else {
                continue;
            };
            let mut block = Vec::new();
            // The NRPE v2 marker may cut a long first finding between two of its lines.
            let v2_marker =
                |l: &str| l.starts_with("... ") && l.contains("NRPE v2 (check_nrpe -2)");
            while i < lines.len() && (lines[i].starts_with("    ") || v2_marker(lines[i])) {
                if !v2_marker(lines[i]) {
                    block.push(lines[i].trim_start());
                }
                i += 1;
            }
            if state == "OK" {
                continue;
            }
            found += 1;
            let last = block.last().copied().unwrap_or("");
            let next = last.strip_prefix("next: ").unwrap_or_else(|| {
                panic!("{check}: {l}: its last line is not a next: step:\n{answer}")
            });
            let signal = next
                .rsplit("docs/runbooks/")
                .next()
                .and_then(|s| s.strip_suffix(".md"))
                .unwrap_or("");
            assert!(plugin::report::is_snake_case(signal), "{check}: {next}");
            // The finding's node, as the text says it (`… on k8s02: …`), for a Jiva replica.
            let subject_node = l.split(" on ").nth(1).and_then(|r| r.split(':').next());
            judge(
                &check,
                l,
                next,
                signal,
                node_for(&check, &scene, subject_node),
            );
        }
        assert!(found > 0, "{check}: no non-OK finding:\n{answer}");
        seen += found;
    }
    assert!(seen >= 9, "{seen}");
}

#[test]
fn every_non_ok_finding_of_the_replay_has_its_next_step_and_runbook_in_json() {
    for (check, scene, text) in replay("json") {
        let answer = answer(&text);
        let v: Value = serde_json::from_str(answer.trim())
            .unwrap_or_else(|e| panic!("{check}: not JSON ({e}):\n{answer}"));
        let findings = v["findings"].as_array().expect("findings");
        let bad: Vec<&Value> = findings.iter().filter(|f| f["status"] != "OK").collect();
        assert!(!bad.is_empty(), "{check}: no non-OK finding: {answer}");
        for f in bad {
            let signal = f["signal"].as_str().unwrap_or("");
            let runbook = f["runbook"].as_str().unwrap_or("");
            assert_eq!(
                runbook,
                format!("docs/runbooks/{signal}.md"),
                "{check}: {f}"
            );
            let next = f["next"]
                .as_str()
                .unwrap_or_else(|| panic!("{check}: no \"next\": {f}"));
            judge(
                &check,
                f["text"].as_str().unwrap_or(""),
                next,
                signal,
                node_for(&check, &scene, f["subject"]["node"].as_str()),
            );
        }
    }
}

/// The harness fails every test whose check prints a non-OK finding without a step of its own
/// (the `next:` line with only the runbook), whatever the format: the guard can fail, and lets a
/// real step through.
#[test]
fn the_harness_fails_a_run_that_prints_a_finding_without_a_step() {
    use plugin::{Finding, Status};
    let bare = Finding::new(Status::Warning, "sdc has errors").signal("fs_errors");
    let fallback = bare.next_line().expect("a next: line");
    let with_step = bare
        .clone()
        .next(format!("on k8s02: {}", plugin::next::cordon("k8s02")))
        .next_line()
        .expect("a next: line");
    let printed = |line: &str| {
        let line = line.to_string();
        std::panic::catch_unwind(move || {
            Cmd::new("printf")
                .arg("%s\\n")
                .arg("CHECK WARNING - sdc has errors")
                .arg("[WARNING] sdc has errors")
                .arg(format!("    next: {line}"))
                .arg(format!("{{\"next\":\"{line}\"}}"))
                .run()
        })
    };
    assert!(printed(&fallback).is_err(), "not caught: {fallback}");
    let out = printed(&with_step).expect("a real step passes");
    assert!(out.stdout.contains(&with_step), "{out:?}");
}

/// A label value of the exposition format, unescaped.
fn label(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!(",{name}=\""))? + name.len() + 3;
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                c => out.push(c),
            },
            '"' => return Some(out),
            c => out.push(c),
        }
    }
    None
}

#[test]
fn every_non_ok_finding_of_the_replay_has_its_next_step_and_runbook_in_prometheus() {
    for (check, scene, text) in replay("prometheus") {
        let answer = answer(&text);
        let findings: Vec<&str> = answer
            .lines()
            .filter(|l| l.starts_with("k8s_storage_check_finding{"))
            .collect();
        assert!(
            !findings.is_empty(),
            "{check}: no finding series:\n{answer}"
        );
        let steps: Vec<&str> = answer
            .lines()
            .filter(|l| l.starts_with("k8s_storage_check_finding_next{"))
            .collect();
        for f in findings {
            let signal = label(f, "signal").unwrap_or_default();
            // The step series repeats the finding series' labels, then runbook and next.
            let labels = &f[f.find('{').unwrap() + 1..f.rfind('}').unwrap()];
            let info = steps
                .iter()
                .find(|s| {
                    s.starts_with(&format!(
                        "k8s_storage_check_finding_next{{{labels},runbook="
                    ))
                })
                .unwrap_or_else(|| panic!("{check}: no step series for {f}:\n{answer}"));
            assert_eq!(
                label(info, "runbook").as_deref(),
                Some(format!("docs/runbooks/{signal}.md").as_str()),
                "{check}: {info}"
            );
            let next = label(info, "next").unwrap_or_else(|| panic!("{check}: no next: {info}"));
            judge(
                &check,
                f,
                &next,
                &signal,
                node_for(&check, &scene, label(f, "node").as_deref()),
            );
        }
    }
}

/// What a Rust debug dump looks like in output: `Some(…)`, `None,`, `[\"…\"]`, `{ field: …`.
fn debug_dump(s: &str) -> Option<&str> {
    s.lines().find(|l| {
        l.contains("Some(") || l.contains("None)") || l.contains("None,") || l.contains(": Some")
    })
}

/// `-v` adds the evidence behind each finding, `-vv` the decisions taken, `-vvv` every input
/// read: each level shows more than the one before, in sentences.
#[test]
fn verbosity_adds_evidence_then_decisions_then_inputs_in_sentences() {
    let dir = tempfile::tempdir().unwrap();
    // An ext4 PV that the kernel remounted read-only, as files (the replay's k8s02).
    let mi = dir.path().join("mountinfo");
    let root = dir.path().join("var/lib/kubelet");
    let pv = "pvc-a634b9a3";
    let mp = root.join(format!("pods/u-1/volumes/kubernetes.io~csi/{pv}/mount"));
    std::fs::create_dir_all(&mp).unwrap();
    std::fs::write(
        &mi,
        format!(
            "22 1 253:0 / / rw,relatime shared:1 - ext4 /dev/mapper/vg0-root rw\n\
             101 22 8:32 / {} rw,relatime shared:2 - ext4 /dev/sdc ro,errors=remount-ro\n",
            mp.display()
        ),
    )
    .unwrap();
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(sys.join("fs/ext4/sdc")).unwrap();
    std::fs::write(sys.join("fs/ext4/sdc/errors_count"), "3\n").unwrap();
    let run = |v: &str| {
        let mut c = Cmd::check("check_ro_pvc_mounts")
            .arg("--mountinfo")
            .arg(&mi)
            .arg("--sys")
            .arg(&sys)
            .arg("--kubelet-root")
            .arg(&root)
            .args(["--no-names", "--node", "k8s02", "--max-output", "65536"]);
        if !v.is_empty() {
            c = c.arg(v);
        }
        let out = c.run();
        assert_eq!(out.code, 2, "{out:?}");
        out.stdout
    };
    let (v0, v1, v2, v3) = (run(""), run("-v"), run("-vv"), run("-vvv"));
    assert!(
        v0.contains("next: on k8s02: `kubectl cordon k8s02` first"),
        "{v0}"
    );
    assert!(!v0.contains("evidence: "), "{v0}");
    assert!(
        v1.contains("    evidence: filesystem options (superblock): ro,errors=remount-ro"),
        "{v1}"
    );
    assert!(
        v1.contains("    evidence: probe of the mount point: "),
        "{v1}"
    );
    assert!(!v1.contains("\ninfo: "), "{v1}");
    assert!(
        v2.contains("\ninfo: the running kernel is ")
            || v2.contains("\ninfo: the running kernel's version"),
        "{v2}"
    );
    assert!(v2.contains("\ninfo: kubelet roots: "), "{v2}");
    assert!(!v2.contains("\nread: "), "{v2}");
    assert!(v3.contains("\nread: reading the mount table "), "{v3}");
    for (v, out) in [("-v", &v1), ("-vv", &v2), ("-vvv", &v3)] {
        assert!(
            debug_dump(out).is_none(),
            "{v}: a debug dump: {:?}",
            debug_dump(out)
        );
    }
    assert!(v1.len() > v0.len() && v2.len() > v1.len() && v3.len() > v2.len());
}

/// `-vvv` of every check in the replay: sentences, never a Rust debug dump; and the replay's
/// own command lines paste as they are.
#[test]
fn no_check_prints_a_debug_dump_at_any_verbosity() {
    for (check, _, text) in replay_with("nagios", &["-vvv", "--max-output", "262144"]) {
        let cmdline = text
            .lines()
            .find(|l| l.starts_with("$ "))
            .unwrap_or_else(|| panic!("{check}: no command line"));
        // The replay's own command line pasted as it is, with -vvv: it is pasteable too.
        if let Err(e) = sh_accepts(&cmdline[2..]) {
            panic!("{check}: sh -n rejects the replay's command line: {e}\n{cmdline}");
        }
        let a = answer(&text);
        assert!(
            a.contains("\ninfo: ") || a.contains("\nread: "),
            "{check}: nothing at -vvv:\n{a}"
        );
        assert!(debug_dump(&a).is_none(), "{check}: {:?}", debug_dump(&a));
    }
}
