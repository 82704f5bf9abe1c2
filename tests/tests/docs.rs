//! The documentation holds to the programs (issue 26): the README and every page under docs/.
//!
//! - Every shell command of their fenced shell blocks (and every `$ …` line of their other
//!   blocks) that runs one of the suite's programs names a program that exists and only options
//!   its `--help` lists; an NRPE call (`check_nrpe … -c NAME`) names a check of the suite.
//! - Every relative link of README.md, deploy/README.md and docs/**/*.md resolves: the file
//!   exists and, where the link names an `#anchor`, a heading of that file has that anchor
//!   (GitHub's rule: lowercase, punctuation dropped, spaces to hyphens).
//! - Every signal a check can raise (found in the checks' sources) has its runbook,
//!   docs/runbooks/<signal>.md, with the sections an on-call person needs and the recovery for
//!   each distribution; each check's page lists exactly its signals; every alert of
//!   deploy/prometheus/ links an existing runbook.
//! - Every check's page has a `## Limits` section saying what the check cannot see or decide.

use e2e::{all_checks, workspace_root, Cmd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// README.md, deploy/README.md and every Markdown file under docs/, sorted.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let root = workspace_root();
    let mut v = vec![root.join("README.md"), root.join("deploy/README.md")];
    walk(&root.join("docs"), &mut v);
    v.sort();
    v
}

fn rel(p: &Path) -> String {
    p.strip_prefix(workspace_root())
        .unwrap_or(p)
        .display()
        .to_string()
}

/// The fenced blocks of a Markdown text: (info string, body lines).
fn fenced_blocks(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            match cur.take() {
                Some(b) => out.push(b),
                None => cur = Some((info.trim().to_string(), Vec::new())),
            }
        } else if let Some((_, body)) = cur.as_mut() {
            body.push(line.to_string());
        }
    }
    out
}

/// Shell command lines of a page: the lines of its `sh`/`bash`/`shell` blocks (continuations
/// joined, comments dropped) and the `$ ` lines of its other blocks.
fn shell_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (info, body) in fenced_blocks(text) {
        let shell = matches!(info.as_str(), "sh" | "bash" | "shell" | "console");
        let mut acc = String::new();
        for line in body {
            let l = if shell {
                line.as_str()
            } else if let Some(rest) = line.trim_start().strip_prefix("$ ") {
                rest
            } else {
                continue;
            };
            let l = strip_comment(l);
            if let Some(head) = l.trim_end().strip_suffix('\\') {
                acc.push_str(head);
                acc.push(' ');
                continue;
            }
            acc.push_str(&l);
            if !acc.trim().is_empty() {
                out.push(std::mem::take(&mut acc));
            }
            acc.clear();
        }
    }
    out
}

/// A line without its `#` comment (a `#` that starts a word outside quotes).
fn strip_comment(l: &str) -> String {
    let (mut sq, mut dq) = (false, false);
    let mut prev = ' ';
    for (i, c) in l.char_indices() {
        match c {
            '\'' if !dq => sq = !sq,
            '"' if !sq => dq = !dq,
            '#' if !sq && !dq && prev.is_whitespace() => return l[..i].to_string(),
            _ => {}
        }
        prev = c;
    }
    if l.starts_with('#') {
        return String::new();
    }
    l.to_string()
}

/// Words of a shell line, split into simple commands at `|`, `&&`, `||`, `;` and `$(`/`)`;
/// quotes removed (enough for the documentation's commands, which use no nested quoting).
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut cmds = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let (mut sq, mut dq) = (false, false);
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let end_word = |word: &mut String, in_word: &mut bool, cmds: &mut Vec<Vec<String>>| {
        if *in_word {
            cmds.last_mut().unwrap().push(std::mem::take(word));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if sq {
            if c == '\'' {
                sq = false;
            } else {
                word.push(c);
            }
        } else if dq {
            if c == '"' {
                dq = false;
            } else {
                word.push(c);
            }
        } else if c == '\'' {
            sq = true;
            in_word = true;
        } else if c == '"' {
            dq = true;
            in_word = true;
        } else if c.is_whitespace() {
            end_word(&mut word, &mut in_word, &mut cmds);
        } else if c == '$' && chars.get(i + 1) == Some(&'(') {
            end_word(&mut word, &mut in_word, &mut cmds);
            cmds.push(Vec::new());
            i += 1;
        } else if matches!(c, '|' | '&' | ';' | ')' | '(') {
            end_word(&mut word, &mut in_word, &mut cmds);
            cmds.push(Vec::new());
        } else {
            word.push(c);
            in_word = true;
        }
        i += 1;
    }
    end_word(&mut word, &mut in_word, &mut cmds);
    cmds.retain(|c| !c.is_empty());
    cmds
}

/// The option names a program's `--help` lists (`-t`, `--timeout`, …).
fn options_of(program: &str) -> BTreeSet<String> {
    let out = Cmd::check(program).arg("--help").run();
    assert!(out.code == 0 || out.code == 3, "{program} --help: {out:?}");
    let mut set = BTreeSet::new();
    for word in out.stdout.split_whitespace() {
        let w = word.trim_start_matches(['[', '(']);
        let w = w.trim_end_matches([',', '.', ')', ']', ';', ':']);
        let w = w.split(['=', '[', '<']).next().unwrap();
        if w.len() > 1 && w.starts_with('-') && !w[1..].starts_with(|c: char| c.is_ascii_digit()) {
            set.insert(w.to_string());
        }
    }
    set
}

/// What is wrong with one simple command of the docs, if it runs a program of the suite.
fn command_problems(
    words: &[String],
    checks: &[String],
    help: &mut BTreeMap<String, BTreeSet<String>>,
) -> Vec<String> {
    // Skip `sudo`, `env`, `VAR=value` and `kubectl exec … --` prefixes.
    let mut w: Vec<&str> = words.iter().map(String::as_str).collect();
    loop {
        match w.first() {
            Some(&"sudo") | Some(&"env") | Some(&"exec") => {
                w.remove(0);
            }
            Some(first) if first.contains('=') && !first.starts_with('-') => {
                w.remove(0);
            }
            _ => break,
        }
    }
    if w.first() == Some(&"kubectl") {
        match w.iter().position(|x| *x == "--") {
            Some(p) => w.drain(..=p),
            None => return Vec::new(),
        };
    }
    let Some(first) = w.first() else {
        return Vec::new();
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let mut problems = Vec::new();
    // An NRPE call names its command: a check of the suite.
    if name == "check_nrpe" {
        if let Some(i) = w.iter().position(|x| *x == "-c") {
            if let Some(c) = w.get(i + 1) {
                if !checks.iter().any(|k| k == c) {
                    problems.push(format!("`check_nrpe -c {c}`: no check of that name"));
                }
            }
        }
        return problems;
    }
    let (program, args): (String, Vec<&str>) = if name == "k8s-storage-checks" {
        // The program runs the check named by its first argument.
        match w.get(1) {
            Some(c) if c.starts_with("check_") => (c.to_string(), w[2..].to_vec()),
            // A subcommand runs the applet of that name (`serve`, `textfile`).
            Some(&"serve") => ("k8s-storage-checks-serve".to_string(), w[2..].to_vec()),
            Some(&"textfile") => ("k8s-storage-checks-textfile".to_string(), w[2..].to_vec()),
            _ => (name.to_string(), w[1..].to_vec()),
        }
    } else if name == "k8s-storage-checks-textfile"
        || (name.starts_with("check_") && !name.contains('*'))
    {
        (name.to_string(), w[1..].to_vec())
    } else {
        return problems;
    };
    if program.starts_with("check_") && !checks.contains(&program) {
        problems.push(format!("{program}: no check of that name"));
        return problems;
    }
    let opts = help
        .entry(program.clone())
        .or_insert_with(|| options_of(&program));
    for a in args {
        if !a.starts_with('-') || a == "-" || a == "--" {
            continue;
        }
        let a = a.split('=').next().unwrap();
        if a[1..].starts_with(|c: char| c.is_ascii_digit()) {
            continue; // a negative number, e.g. a range
        }
        // Repeated short flags: -vv, -vvv.
        if !a.starts_with("--")
            && a.len() > 2
            && a[1..].chars().all(|c| c == 'v')
            && opts.contains("-v")
        {
            continue;
        }
        if !opts.contains(a) {
            problems.push(format!("{program} has no option {a}"));
        }
    }
    problems
}

#[test]
fn shell_blocks_name_programs_and_options_that_exist() {
    let checks = all_checks();
    let mut help = BTreeMap::new();
    let mut problems = Vec::new();
    let mut seen = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in shell_lines(&text) {
            for words in commands(&line) {
                let before = help.len();
                let p = command_problems(&words, &checks, &mut help);
                if help.len() > before || !p.is_empty() {
                    seen += 1;
                }
                for p in p {
                    problems.push(format!("{}: `{}`: {p}", rel(&page), line.trim()));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The documentation runs checks at all (the README's NRPE path, the runbooks' confirmations).
    assert!(
        seen > 0 && !help.is_empty(),
        "no command of the suite found"
    );
}

/// The checker itself catches a renamed option, an unknown check and an NRPE call of a name
/// that is no check, and accepts the forms the docs use.
#[test]
fn the_shell_block_checker_catches_what_it_should() {
    let checks = all_checks();
    let mut help = BTreeMap::new();
    let text = "```sh\nsudo /usr/lib/nagios/plugins/check_ro_pvc_mounts -t 8 --probe-timeout=3s -vv   # a comment --nope\ncheck_stuck_scheduled --warn-after 5m \\\n    --node k8s02\nk8s-storage-checks check_watch_cache --deadlin 5s\ncheck_nrpe -H k8s02 -c check_ro_pvc_mount\ncheck_no_such_thing -v\n```\n```\n$ check_iscsi_sessions --min-sessions 2 | grep x\nnot a command --bogus\n```\n";
    let mut problems = Vec::new();
    for line in shell_lines(text) {
        for words in commands(&line) {
            problems.extend(command_problems(&words, &checks, &mut help));
        }
    }
    assert_eq!(
        problems,
        vec![
            "check_stuck_scheduled has no option --warn-after".to_string(),
            "check_watch_cache has no option --deadlin".to_string(),
            "`check_nrpe -c check_ro_pvc_mount`: no check of that name".to_string(),
            "check_no_such_thing: no check of that name".to_string(),
        ]
    );
}

/// GitHub's anchor of a heading: lowercase, letters, digits, `-` and `_` kept, spaces to `-`,
/// everything else dropped.
fn slug(heading: &str) -> String {
    let text = heading.trim().replace('`', "");
    // A link in a heading counts by its text.
    let mut plain = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ']' && chars.peek() == Some(&'(') {
            for d in chars.by_ref() {
                if d == ')' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c == ' ' {
                Some('-')
            } else if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else {
                None
            }
        })
        .collect()
}

/// The lines of a Markdown text outside its fenced blocks (the fences themselves left out).
fn prose_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut fence = false;
    text.lines().filter(move |line| {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            return false;
        }
        !fence
    })
}

/// The anchors of a Markdown text's headings (outside fenced blocks), with GitHub's `-1`, `-2`
/// suffixes for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for line in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let s = slug(&line[hashes + 1..]);
            let n = count.entry(s.clone()).or_insert(0);
            set.insert(if *n == 0 {
                s.clone()
            } else {
                format!("{s}-{n}")
            });
            *n += 1;
        }
    }
    set
}

/// The link targets of a Markdown text: `[text](target)` outside fenced blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose_lines(text) {
        // Drop code spans.
        let plain: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" ");
        let mut rest = plain.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(j) = after.find(')') else { break };
            out.push(after[..j].trim().to_string());
            rest = &after[j..];
        }
    }
    out
}

#[test]
fn relative_links_resolve_to_files_and_anchors() {
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut n = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            n += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let Ok(file) = file.canonicalize() else {
                problems.push(format!("{}: {target}: no such file", rel(&page)));
                continue;
            };
            if !file.starts_with(&root) {
                problems.push(format!("{}: {target}: outside the repository", rel(&page)));
                continue;
            }
            if let Some(a) = anchor {
                let Ok(t) = std::fs::read_to_string(&file) else {
                    problems.push(format!(
                        "{}: {target}: an anchor into a directory",
                        rel(&page)
                    ));
                    continue;
                };
                if !anchors(&t).contains(a) {
                    problems.push(format!(
                        "{}: {target}: {} has no heading #{a}",
                        rel(&page),
                        rel(&file)
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(n > 50, "only {n} relative links found");
}

#[test]
fn the_link_checker_catches_what_it_should() {
    assert_eq!(
        slug("Time to alert: fault → page"),
        "time-to-alert-fault--page"
    );
    assert_eq!(
        slug("Container mode (Talos and other nodes without an agent)"),
        "container-mode-talos-and-other-nodes-without-an-agent"
    );
    assert_eq!(
        slug("`check_ro_pvc_mounts` options"),
        "check_ro_pvc_mounts-options"
    );
    let a = anchors("# A\n## b c\n```\n# not a heading\n```\n## b c\n");
    assert_eq!(
        a,
        ["a", "b-c", "b-c-1"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_eq!(
        links("see [x](a.md#b) and `[y](code.md)`\n```\n[z](fenced.md)\n```\n[w](../c/)"),
        vec!["a.md#b".to_string(), "../c/".to_string()]
    );
}

// ---- runbooks ----------------------------------------------------------------------------------

/// Snake-case string literals (`"stale_mount"`) in a piece of Rust source.
fn snake_literals(src: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut rest = src;
    while let Some(i) = rest.find('"') {
        let after = &rest[i + 1..];
        let Some(j) = after.find('"') else { break };
        let lit = &after[..j];
        if !lit.is_empty()
            && lit.starts_with(|c: char| c.is_ascii_lowercase())
            && lit
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            v.push(lit.to_string());
        }
        rest = &after[j + 1..];
    }
    v
}

/// From `open` (just after an opening bracket) to its matching closing bracket.
fn balanced(src: &str, open: char, close: char) -> &str {
    let mut depth = 1;
    for (i, c) in src.char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return &src[..i];
            }
        }
    }
    src
}

/// The signals a check crate can raise, read from its sources (tests excluded): the literals of
/// every `.signal(…)` argument, and where the argument is computed, the literals of the
/// functions that compute it (`fn signal`, `fn signal_of`, `fn label` returning snake case) and
/// of a `let signal = match …` block.
fn signals_of(krate: &Path) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let mut files = Vec::new();
    for e in std::fs::read_dir(krate.join("src")).unwrap().flatten() {
        files.push(e.path());
    }
    for f in files
        .into_iter()
        .filter(|f| f.extension().is_some_and(|x| x == "rs"))
    {
        let full = std::fs::read_to_string(&f).unwrap();
        let src = full.split("#[cfg(test)]").next().unwrap();
        let mut rest = src;
        while let Some(i) = rest.find(".signal(") {
            let arg = balanced(&rest[i + 8..], '(', ')');
            set.extend(snake_literals(arg));
            rest = &rest[i + 8..];
        }
        for head in [
            "fn signal(",
            "fn signal_of(",
            "fn label(",
            "let signal = match",
        ] {
            let mut rest = src;
            while let Some(i) = rest.find(head) {
                let after = &rest[i..];
                let Some(b) = after.find('{') else { break };
                let body = balanced(&after[b + 1..], '{', '}');
                // Only `=> "literal"` arms: the values the match returns.
                for arm in body.split("=>").skip(1) {
                    let arm = arm.trim_start();
                    if arm.starts_with('"') {
                        set.extend(
                            snake_literals(arm.split('\n').next().unwrap())
                                .into_iter()
                                .take(1),
                        );
                    }
                }
                rest = &after[b + 1..];
            }
        }
    }
    set
}

/// Every check's signals, by check.
fn all_signals() -> BTreeMap<String, BTreeSet<String>> {
    all_checks()
        .into_iter()
        .map(|c| {
            let s = signals_of(&workspace_root().join("crates").join(&c));
            (c, s)
        })
        .collect()
}

/// The text of a page's `## title` section.
fn section<'a>(page: &'a str, title: &str) -> Option<&'a str> {
    let start = page.find(&format!("\n## {title}\n"))? + title.len() + 5;
    let body = &page[start..];
    Some(match body.find("\n## ") {
        Some(e) => &body[..e],
        None => body,
    })
}

#[test]
fn every_signal_has_its_runbook() {
    let signals = all_signals();
    let total: usize = signals.values().map(BTreeSet::len).sum();
    // The known ones are found (the reader of the sources works).
    for (c, s) in [
        ("check_ro_pvc_mounts", "emergency_ro"),
        ("check_ro_pvc_mounts", "mount_still_hung"),
        ("check_stale_csi_mounts", "staging_pv_gone"),
        ("check_storage_kernel_errors", "journal_abort"),
        ("check_iscsi_sessions", "session_ok"),
        ("check_jiva_rep_crashloop", "controller_crashloop"),
        ("check_watch_cache", "watch_cache_stale"),
        ("check_stuck_scheduled", "stuck_no_status"),
    ] {
        assert!(
            signals[c].contains(s),
            "{c}: {s} not found in {:?}",
            signals[c]
        );
    }
    assert!(total >= 60, "only {total} signals found: {signals:?}");
    let mut problems = Vec::new();
    let dir = workspace_root().join("docs/runbooks");
    for (check, set) in &signals {
        for s in set {
            let path = dir.join(format!("{s}.md"));
            let Ok(page) = std::fs::read_to_string(&path) else {
                problems.push(format!("{check}: signal {s} has no docs/runbooks/{s}.md"));
                continue;
            };
            for title in ["What it means", "Confirm", "Recover", "Prevent"] {
                if section(&page, title).is_none_or(|t| t.trim().is_empty()) {
                    problems.push(format!("docs/runbooks/{s}.md: no section \"## {title}\""));
                }
            }
            if !page.contains(check.as_str()) {
                problems.push(format!("docs/runbooks/{s}.md does not name {check}"));
            }
            if let Some(rec) = section(&page, "Recover") {
                for d in ["microk8s", "k3s", "k0s", "kubeadm", "Talos"] {
                    if !rec.contains(d) {
                        problems.push(format!(
                            "docs/runbooks/{s}.md: its Recover section does not say how on {d}"
                        ));
                    }
                }
            }
            if let Some(conf) = section(&page, "Confirm") {
                if !conf.contains("```sh") {
                    problems.push(format!(
                        "docs/runbooks/{s}.md: its Confirm section has no command block"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Each check's page lists exactly the signals the check can raise, each linked to its runbook.
#[test]
fn each_check_page_lists_its_signals() {
    let mut problems = Vec::new();
    for (check, set) in all_signals() {
        let page =
            std::fs::read_to_string(workspace_root().join(format!("docs/checks/{check}.md")))
                .unwrap();
        let Some(sec) = section(&page, "Signals") else {
            problems.push(format!("docs/checks/{check}.md: no \"## Signals\" section"));
            continue;
        };
        let listed: BTreeSet<String> = sec
            .split("](../runbooks/")
            .skip(1)
            .filter_map(|s| s.split(".md)").next())
            .map(str::to_string)
            .collect();
        for s in set.difference(&listed) {
            problems.push(format!("docs/checks/{check}.md does not list signal {s}"));
        }
        for s in listed.difference(&set) {
            problems.push(format!(
                "docs/checks/{check}.md lists {s}, which {check} does not raise"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The runbooks' index names every runbook page (signals and alerts), and every page it links
/// exists (the link test checks that).
#[test]
fn the_runbook_index_lists_every_runbook() {
    let dir = workspace_root().join("docs/runbooks");
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let mut missing = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && name != "README.md" && !index.contains(&format!("({name})")) {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "docs/runbooks/README.md does not link {missing:?}"
    );
}

/// Every alert of the shipped rules, in both files, has a runbook_url whose page exists.
#[test]
fn every_alert_links_an_existing_runbook() {
    let root = workspace_root();
    let mut n = 0;
    for file in [
        "deploy/prometheus/k8s-storage-checks.rules.yml",
        "deploy/prometheus/prometheusrule.yaml",
    ] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        let groups = doc
            .get("spec")
            .and_then(|s| s.get("groups"))
            .or_else(|| doc.get("groups"))
            .and_then(|g| g.as_sequence())
            .unwrap_or_else(|| panic!("{file}: no groups"));
        for g in groups {
            for r in g["rules"].as_sequence().unwrap() {
                let Some(alert) = r.get("alert").and_then(|a| a.as_str()) else {
                    continue;
                };
                n += 1;
                let url = r["annotations"]["runbook_url"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{file}: {alert} has no runbook_url"));
                let page = url.rsplit('/').next().unwrap();
                assert!(
                    url.contains("/docs/runbooks/") && page == format!("{alert}.md"),
                    "{file}: {alert}: {url}"
                );
                assert!(
                    root.join("docs/runbooks").join(page).is_file(),
                    "{file}: {alert}: docs/runbooks/{page} does not exist"
                );
            }
        }
    }
    assert!(n >= 20, "only {n} alerts in the two files");
}

/// The README is a front door (issue 26): at most 300 lines, and its contents list links every
/// section of its own, so that nothing in it is found only by scrolling.
#[test]
fn readme_is_short_and_its_contents_list_every_section() {
    let text = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move the detail to docs/"
    );
    let contents: String = text
        .lines()
        .skip_while(|l| *l != "## Contents")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!contents.is_empty(), "README.md has no ## Contents section");
    for h in text.lines().filter_map(|l| l.strip_prefix("## ")) {
        if h == "Contents" {
            continue;
        }
        let link = format!("(#{})", slug(h));
        assert!(
            contents.contains(&link),
            "README.md's contents list does not link the section {h:?} ({link})"
        );
    }
}

/// Every check's page says what the check cannot see or decide (issue 26): a `## Limits`
/// section with real text, for every check of the suite (`all_checks`: each crates/check_*
/// crate, so a new check's page is held to it from its first commit).
#[test]
fn every_check_page_has_a_limits_section() {
    let checks = all_checks();
    assert!(checks.len() >= 11, "only {} checks found", checks.len());
    let mut problems = Vec::new();
    for check in &checks {
        let path = workspace_root().join(format!("docs/checks/{check}.md"));
        let Ok(page) = std::fs::read_to_string(&path) else {
            problems.push(format!("{check}: no docs/checks/{check}.md"));
            continue;
        };
        problems.extend(limits_problems(check, &page));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What is wrong with a page's `## Limits` section (pure): missing, empty, or a placeholder (less
/// than one sentence of prose outside headings).
fn limits_problems(check: &str, page: &str) -> Vec<String> {
    let Some(sec) = section(page, "Limits") else {
        return vec![format!(
            "docs/checks/{check}.md has no \"## Limits\" section (what {check} cannot see or decide)"
        )];
    };
    let prose: String = prose_lines(sec)
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let words = prose.split_whitespace().count();
    if words < 40 {
        return vec![format!(
            "docs/checks/{check}.md: its \"## Limits\" section has {words} words: say what {check} cannot see or decide"
        )];
    }
    Vec::new()
}

/// The Limits test fails a page without the section, with an empty one or a stub, and passes a
/// real one.
#[test]
fn the_limits_checker_catches_what_it_should() {
    let real = std::fs::read_to_string(workspace_root().join("docs/checks/check_ro_pvc_mounts.md"))
        .unwrap();
    assert_eq!(limits_problems("check_x", &real), Vec::<String>::new());
    let none = "# check_x\n\n## Options\n\ntext\n\n## See also\n\nx\n";
    let empty = "# check_x\n\n## Limits\n\n## See also\n\nx\n";
    let stub =
        "# check_x\n\n## Limits\n\nTo do.\n\n## See also\n\n".to_string() + &"word ".repeat(80);
    for (what, page) in [("none", none), ("empty", empty), ("stub", stub.as_str())] {
        let p = limits_problems("check_x", page);
        assert_eq!(p.len(), 1, "{what}: {p:?}");
        assert!(p[0].contains("docs/checks/check_x.md"), "{what}: {p:?}");
    }
}
