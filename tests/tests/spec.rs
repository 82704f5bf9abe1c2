//! The deployment files proven against the binaries: every option that nrpe.d, the Icinga 2
//! CheckCommands, the role (its rendered commands, its option lists) and the docs' option tables
//! pass or name exists in that check, with the right arity and a value its own parser takes;
//! every check option has its Icinga argument. The binaries describe themselves
//! (`--print-spec`), and judge a command line with their own parser (`--print-spec ARGS…`).

use e2e::{all_checks, workspace_root, Cmd};
use serde_json::Value;
use std::collections::BTreeMap;

/// One option of a check, as `--print-spec` describes it.
#[derive(Debug, Clone)]
struct Opt {
    id: String,
    names: Vec<String>,
    takes_value: bool,
    multiple: bool,
    kind: String,
    /// Not in `--help` (`--print-spec`, test hooks): no table row needed.
    hidden: bool,
    /// The `--help` section it is listed under (`Common options`, `Kubernetes API`, …).
    heading: String,
}

#[derive(Debug, Clone)]
struct Spec {
    binary: String,
    options: Vec<Opt>,
}

impl Spec {
    fn of(bin: &str) -> Spec {
        let out = Cmd::check(bin).arg("--print-spec").run();
        assert_eq!(out.code, 0, "{bin} --print-spec: {out:?}");
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        let options = v["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut names: Vec<String> = Vec::new();
                for l in o["long"].as_array().unwrap() {
                    names.push(format!("--{}", l.as_str().unwrap()));
                }
                for s in o["short"].as_array().unwrap() {
                    names.push(format!("-{}", s.as_str().unwrap()));
                }
                Opt {
                    id: o["id"].as_str().unwrap().to_string(),
                    names,
                    takes_value: o["takes_value"].as_bool().unwrap(),
                    multiple: o["multiple"].as_bool().unwrap(),
                    kind: o["kind"].as_str().unwrap().to_string(),
                    hidden: o["hidden"].as_bool().unwrap_or(false),
                    heading: o["help_heading"].as_str().unwrap_or("").to_string(),
                }
            })
            .collect();
        Spec {
            binary: bin.to_string(),
            options,
        }
    }

    fn find(&self, name: &str) -> Option<&Opt> {
        self.options
            .iter()
            .find(|o| o.names.iter().any(|n| n == name))
    }

    /// Options a deployment file should offer (help and version are no setting).
    fn settings(&self) -> impl Iterator<Item = &Opt> {
        self.options
            .iter()
            .filter(|o| o.id != "help" && o.id != "version")
    }
}

/// The check's own parser on a command line: `Ok` or its usage error.
fn parses(bin: &str, args: &[String]) -> Result<(), String> {
    let out = Cmd::check(bin).arg("--print-spec").args(args).run();
    let v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("{bin} --print-spec {args:?}: {e}: {out:?}"));
    if v["parse"]["ok"] == true {
        Ok(())
    } else {
        Err(v["parse"]["error"].as_str().unwrap_or("?").to_string())
    }
}

/// How a deployment file uses one option.
#[derive(Debug, Clone, PartialEq)]
struct Use {
    /// Where, for the message: `nrpe.d command[check_x]`, `icinga2 k8s_x`, …
    place: String,
    option: String,
    /// `Some(true)`: passes a value; `Some(false)`: a flag (set_if); `None`: not known.
    value: Option<bool>,
    /// Repeated (Icinga `repeat_key = true`, an array variable).
    repeat: bool,
}

/// What is wrong with these uses of `spec`'s options (pure).
fn problems(spec: &Spec, uses: &[Use]) -> Vec<String> {
    let mut p = Vec::new();
    for u in uses {
        let Some(o) = spec.find(&u.option) else {
            p.push(format!(
                "{}: {} has no option {}",
                u.place, spec.binary, u.option
            ));
            continue;
        };
        match u.value {
            Some(true) if !o.takes_value => p.push(format!(
                "{}: {} {} is a flag but is given a value",
                u.place, spec.binary, u.option
            )),
            Some(false) if o.takes_value => p.push(format!(
                "{}: {} {} takes a value ({}) but is passed as a flag",
                u.place, spec.binary, u.option, o.kind
            )),
            _ => {}
        }
        if u.repeat && !o.multiple {
            p.push(format!(
                "{}: {} {} is repeated but takes one value",
                u.place, spec.binary, u.option
            ));
        }
    }
    p
}

// ---- nrpe.d --------------------------------------------------------------------------------

fn nrpe_commands(text: &str) -> BTreeMap<String, Vec<String>> {
    text.lines()
        .filter_map(|l| l.strip_prefix("command["))
        .filter_map(|l| l.split_once("]="))
        .map(|(n, c)| {
            let words: Vec<String> = c.split_whitespace().map(str::to_string).collect();
            (n.to_string(), words)
        })
        .collect()
}

/// The uses in one command line (after the binary), and the problems its parser finds.
fn nrpe_problems(spec: &Spec, place: &str, args: &[String]) -> Vec<String> {
    let mut uses = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with('-') {
            let (name, inline) = match a.split_once('=') {
                Some((n, _)) => (n.to_string(), true),
                None => (a.clone(), false),
            };
            let takes = spec.find(&name).map(|o| o.takes_value);
            uses.push(Use {
                place: place.into(),
                option: name,
                value: None,
                repeat: false,
            });
            if takes == Some(true) && !inline {
                i += 1;
            }
        }
        i += 1;
    }
    let mut p = problems(spec, &uses);
    if p.is_empty() {
        if let Err(e) = parses(&spec.binary, args) {
            p.push(format!("{place}: {} rejects it: {e}", spec.binary));
        }
    }
    p
}

#[test]
fn nrpe_d_commands_are_command_lines_each_check_accepts() {
    let text =
        std::fs::read_to_string(workspace_root().join("nrpe.d/k8s-storage-checks.cfg")).unwrap();
    let cmds = nrpe_commands(&text);
    let mut all = Vec::new();
    for c in all_checks() {
        let words = cmds
            .get(&c)
            .unwrap_or_else(|| panic!("nrpe.d has no command for {c}"));
        assert!(words[0].ends_with(&format!("/{c}")), "{words:?}");
        let spec = Spec::of(&c);
        all.extend(nrpe_problems(
            &spec,
            &format!("nrpe.d command[{c}]"),
            &words[1..],
        ));
        // The watch-cache deadline is set once, by the binary.
        assert!(!words.iter().any(|w| w == "--deadline"), "{words:?}");
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

// ---- Icinga 2 --------------------------------------------------------------------------------

/// One CheckCommand: the binary and its arguments (with the imported templates'), each as
/// (key, value macro or set_if macro, repeat_key); plus the `vars.` defaults in scope.
#[derive(Debug, Default)]
struct IcingaCommand {
    binary: String,
    args: Vec<(String, IcingaArg)>,
    vars: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
struct IcingaArg {
    value: Option<String>,
    set_if: Option<String>,
    repeat: bool,
}

fn icinga_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("object ")
            || line.starts_with("template ")
            || line.starts_with("apply ")
        {
            blocks.push((line.to_string(), String::new()));
        } else if let Some(b) = blocks.last_mut() {
            b.1.push_str(line);
            b.1.push('\n');
        }
    }
    blocks
}

fn quoted(s: &str) -> String {
    s.split('"').nth(1).unwrap_or("").to_string()
}

/// The `"-x" = { … }` entries of a block body (entries may span lines).
fn icinga_args(body: &str) -> Vec<(String, IcingaArg)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find("\"-") {
        let after = &rest[start..];
        let key = quoted(after);
        let Some(open) = after.find('{') else { break };
        let mut depth = 0;
        let mut end = open;
        for (i, ch) in after[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let inner = &after[open + 1..end];
        let field = |name: &str| {
            inner.split([';', '\n']).map(str::trim).find_map(|f| {
                f.strip_prefix(name)
                    .map(str::trim_start)
                    .and_then(|f| f.strip_prefix('='))
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        };
        out.push((
            key,
            IcingaArg {
                value: field("value"),
                set_if: field("set_if"),
                repeat: field("repeat_key").as_deref() == Some("true"),
            },
        ));
        rest = &after[end..];
    }
    out
}

fn icinga_vars(body: &str) -> BTreeMap<String, String> {
    body.lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("vars."))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

fn icinga_commands(text: &str) -> BTreeMap<String, IcingaCommand> {
    let blocks = icinga_blocks(text);
    let templates: BTreeMap<String, &String> = blocks
        .iter()
        .filter(|(h, _)| h.starts_with("template CheckCommand"))
        .map(|(h, b)| (quoted(h), b))
        .collect();
    let mut out = BTreeMap::new();
    for (h, b) in blocks
        .iter()
        .filter(|(h, _)| h.starts_with("object CheckCommand"))
    {
        let mut cmd = IcingaCommand::default();
        for l in b
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("import "))
        {
            if let Some(t) = templates.get(&quoted(l)) {
                cmd.args.extend(icinga_args(t));
                cmd.vars.extend(icinga_vars(t));
            }
        }
        cmd.args.extend(icinga_args(b));
        cmd.vars.extend(icinga_vars(b));
        cmd.binary = b
            .lines()
            .find_map(|l| l.split("PluginDir + \"/").nth(1))
            .and_then(|r| r.split('"').next())
            .unwrap_or("")
            .to_string();
        out.insert(quoted(h), cmd);
    }
    out
}

fn macro_name(m: &str) -> Option<&str> {
    m.strip_prefix('$').and_then(|m| m.strip_suffix('$'))
}

fn icinga_problems(spec: &Spec, name: &str, cmd: &IcingaCommand) -> Vec<String> {
    let place = format!("icinga2 {name}");
    let uses: Vec<Use> = cmd
        .args
        .iter()
        .map(|(k, a)| Use {
            place: place.clone(),
            option: k.clone(),
            value: match (&a.value, &a.set_if) {
                (Some(_), _) => Some(true),
                (None, Some(_)) => Some(false),
                (None, None) => None,
            },
            repeat: a.repeat,
        })
        .collect();
    let mut p = problems(spec, &uses);
    // Every option of the check has its argument (repeatable ones with repeat_key).
    for o in spec.settings() {
        let arg = cmd.args.iter().find(|(k, _)| o.names.contains(k));
        match arg {
            None => p.push(format!(
                "{place}: no argument for {} {}",
                spec.binary,
                o.names.join("/")
            )),
            Some((k, a)) if o.multiple && o.takes_value && !a.repeat => p.push(format!(
                "{place}: {k} is repeatable in {}: give it repeat_key = true",
                spec.binary
            )),
            _ => {}
        }
    }
    // A default the file sets must be a value the check takes.
    for (k, a) in &cmd.args {
        let Some(var) = a.value.as_deref().and_then(macro_name) else {
            continue;
        };
        if let Some(v) = cmd.vars.get(var) {
            if let Err(e) = parses(&spec.binary, &[k.clone(), v.clone()]) {
                p.push(format!("{place}: vars.{var} = {v:?} for {k}: {e}"));
            }
        }
    }
    p
}

#[test]
fn icinga2_commands_offer_every_option_as_each_check_takes_it() {
    let text =
        std::fs::read_to_string(workspace_root().join("icinga2/k8s-storage-checks.conf")).unwrap();
    let cmds = icinga_commands(&text);
    let mut all = Vec::new();
    for c in all_checks() {
        let name = format!("k8s_{}", c.trim_start_matches("check_"));
        let cmd = cmds
            .get(&name)
            .unwrap_or_else(|| panic!("no CheckCommand {name}"));
        assert_eq!(cmd.binary, c);
        all.extend(icinga_problems(&Spec::of(&c), &name, cmd));
        // The watch-cache deadline is set once, by the binary.
        assert!(
            !cmd.vars.keys().any(|k| k.ends_with("_deadline")),
            "{name} sets a deadline default: {:?}",
            cmd.vars
        );
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

// ---- the role ---------------------------------------------------------------------------------

/// The role's fixed option lists (`k8s_storage_checks__known_options`) name options of each check.
#[test]
fn role_option_lists_name_options_each_check_has() {
    let vars = std::fs::read_to_string(
        workspace_root().join("ansible/roles/k8s_storage_checks/vars/main.yml"),
    )
    .unwrap();
    let mut in_list = false;
    let mut all = Vec::new();
    for line in vars.lines() {
        if line.starts_with("k8s_storage_checks__known_options:") {
            in_list = true;
            continue;
        }
        if in_list && !line.starts_with("  ") {
            in_list = false;
        }
        if !in_list {
            continue;
        }
        let Some((check, opts)) = line.trim().split_once(':') else {
            continue;
        };
        let spec = Spec::of(check.trim());
        let uses: Vec<Use> = opts
            .trim()
            .trim_matches(['[', ']'])
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .map(|o| Use {
                place: "role vars k8s_storage_checks__known_options".into(),
                option: o.to_string(),
                value: None,
                repeat: false,
            })
            .collect();
        all.extend(problems(&spec, &uses));
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The role's commands, rendered by the real ansible-playbook with every variable that adds
/// options set (thresholds for every check, a kubeconfig, a node name, kubelet roots, iSCSI
/// management, a watch-cache deadline), are command lines each check accepts.
#[test]
fn role_renders_command_lines_each_check_accepts_with_every_variable_set() {
    let t = "role_renders_command_lines_each_check_accepts_with_every_variable_set";
    if !e2e::need_tool(t, "ansible-playbook") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let mut thresholds = serde_json::Map::new();
    for c in all_checks() {
        let (w, c_) = match c.as_str() {
            "check_stuck_scheduled" | "check_stuck_terminating" => ("15m", "1h"),
            "check_watch_cache" => ("1s", "3s"),
            "check_volume_attachments" => ("10m", "30m"),
            _ => ("-10:-2", "@1:5"),
        };
        thresholds.insert(c.clone(), serde_json::json!({"warning": w, "critical": c_}));
    }
    let vars = serde_json::json!({
        "k8s_storage_checks_nrpe_config_dir": work.path(),
        "k8s_storage_checks_nrpe_restart": false,
        "k8s_storage_checks_cluster_scope": true,
        "k8s_storage_checks_cluster_checks": ["check_jiva_rep_crashloop", "check_watch_cache", "check_longhorn_volumes", "check_volume_attachments"],
        "k8s_storage_checks_thresholds": thresholds,
        "k8s_storage_checks_kubeconfig_present": true,
        "k8s_storage_checks_node_name": "worker-04",
        "k8s_storage_checks_kubelet_roots": ["/var/lib/kubelet", "/var/snap/microk8s/common/var/lib/kubelet"],
        "k8s_storage_checks_journal_units": ["kubelet.service"],
        "k8s_storage_checks_iscsi_manage": true,
        "k8s_storage_checks_watch_cache_deadline": 4,
    });
    let vars_file = work.path().join("vars.json");
    std::fs::write(&vars_file, vars.to_string()).unwrap();
    let out = Cmd::new("ansible-playbook")
        .args(["-i", "localhost,", "-c", "local"])
        .arg(workspace_root().join("tests/deploy/render-nrpe.yml"))
        .arg("--extra-vars")
        .arg(format!("@{}", vars_file.display()))
        .env("ANSIBLE_ROLES_PATH", workspace_root().join("ansible/roles"))
        .env("ANSIBLE_LOCAL_TEMP", work.path().join("tmp"))
        .env("NO_COLOR", "1")
        .run();
    assert_eq!(out.code, 0, "ansible-playbook: {out:?}");
    let text = std::fs::read_to_string(work.path().join("k8s-storage-checks.cfg")).unwrap();
    let cmds = nrpe_commands(&text);
    let mut all = Vec::new();
    for c in all_checks() {
        let words = cmds
            .get(&c)
            .unwrap_or_else(|| panic!("the role rendered no command for {c}:\n{text}"));
        let spec = Spec::of(&c);
        let args = &words[1..];
        all.extend(nrpe_problems(&spec, &format!("role command[{c}]"), args));
        for flag in ["-w", "-c"] {
            assert!(
                args.iter().any(|a| a == flag),
                "{c}: {flag} not rendered: {args:?}"
            );
        }
    }
    assert!(all.is_empty(), "{}\n{text}", all.join("\n"));
}

/// Every variable of the role's argument spec is one its defaults define, and the spec's option
/// part offers what the templates use.
#[test]
fn role_argument_spec_covers_the_option_variables() {
    let role = workspace_root().join("ansible/roles/k8s_storage_checks");
    let spec = std::fs::read_to_string(role.join("meta/argument_specs.yml")).unwrap();
    let templ = std::fs::read_to_string(role.join("templates/_commands.j2")).unwrap();
    let mut used: Vec<&str> = templ
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("k8s_storage_checks_") && !w.starts_with("k8s_storage_checks__"))
        .collect();
    used.sort_unstable();
    used.dedup();
    for v in used {
        assert!(
            spec.contains(&format!("      {v}:")),
            "_commands.j2 uses {v}, which meta/argument_specs.yml does not describe"
        );
    }
}

// ---- docs/checks/<check>.md ----------------------------------------------------------------

/// The options an option table of a Markdown page names, as (name, shown with a value), from
/// the first cell of each row that starts with an option (`| `-w/--warning`, `-c RANGE` | …`).
fn table_options(page: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for line in page.lines() {
        if !line.starts_with("| `-") {
            continue;
        }
        let first_cell = line[1..].split(" |").next().unwrap_or("");
        for code in first_cell.split('`').skip(1).step_by(2) {
            let words: Vec<&str> = code.split_whitespace().collect();
            let Some(first) = words.first() else { continue };
            for name in first.split(['/', ',']).filter(|n| n.starts_with('-')) {
                out.push((name.to_string(), words.len() > 1));
            }
        }
    }
    out
}

/// The option tables of each check's page, `docs/checks/<check>.md`, name options that check has,
/// with a value where the table shows one; and every page has an option table.
#[test]
fn docs_option_tables_name_options_each_check_has() {
    let mut all = Vec::new();
    for c in all_checks() {
        let path = workspace_root().join(format!("docs/checks/{c}.md"));
        let page =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let spec = Spec::of(&c);
        let rows = table_options(&page);
        for (name, value) in &rows {
            let u = Use {
                place: format!("docs/checks/{c}.md table"),
                option: name.clone(),
                value: value.then_some(true),
                repeat: false,
            };
            all.extend(problems(&spec, &[u]));
        }
        if rows.is_empty() {
            all.push(format!("docs/checks/{c}.md has no option table"));
        }
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The options of `spec` that `--help` offers and no table documents (pure): every one must have
/// a row in the check's page (`page`); the `Common options` every check takes (`-t`, `-v`,
/// `--format` …) may have theirs in the common table instead (`common`, docs/checks/README.md).
fn undocumented(spec: &Spec, page: &str, common: &str) -> Vec<String> {
    let rows: Vec<String> = table_options(page).into_iter().map(|(n, _)| n).collect();
    let shared: Vec<String> = table_options(common).into_iter().map(|(n, _)| n).collect();
    spec.settings()
        .filter(|o| !o.hidden)
        .filter(|o| {
            let in_rows = |rows: &[String]| o.names.iter().any(|n| rows.contains(n));
            !(in_rows(&rows) || (o.heading == "Common options" && in_rows(&shared)))
        })
        .map(|o| {
            format!(
                "docs/checks/{}.md: no option table row for {} ({}, under \"{}\" in --help)",
                spec.binary,
                o.names.join("/"),
                o.kind,
                o.heading
            )
        })
        .collect()
}

/// The converse of the test above: every option a check's `--help` offers (the hidden ones
/// excepted) has its row in the check's page, `docs/checks/<check>.md` (the common options in
/// docs/checks/README.md's table).
#[test]
fn every_option_a_check_offers_has_its_row_in_the_docs() {
    let common = std::fs::read_to_string(workspace_root().join("docs/checks/README.md")).unwrap();
    let mut all = Vec::new();
    let mut n = 0;
    for c in all_checks() {
        let path = workspace_root().join(format!("docs/checks/{c}.md"));
        let page =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let spec = Spec::of(&c);
        n += spec.settings().filter(|o| !o.hidden).count();
        all.extend(undocumented(&spec, &page, &common));
    }
    assert!(n > 100, "only {n} options seen");
    assert!(all.is_empty(), "{}", all.join("\n"));
}

/// The converse checker catches an option the page's table lost (a row deleted, or an option
/// added to the check and not to its page), and the common table covers only common options.
#[test]
fn an_option_missing_from_its_page_is_caught() {
    let spec = Spec::of("check_stuck_terminating");
    let page =
        std::fs::read_to_string(workspace_root().join("docs/checks/check_stuck_terminating.md"))
            .unwrap();
    let common = std::fs::read_to_string(workspace_root().join("docs/checks/README.md")).unwrap();
    assert_eq!(undocumented(&spec, &page, &common), Vec::<String>::new());
    // One row less: that option is named.
    let row = page
        .lines()
        .find(|l| l.starts_with("| `--namespace"))
        .expect("the page has a --namespace row");
    let cut = page.replace(&format!("{row}\n"), "");
    let p = undocumented(&spec, &cut, &common);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with(
            "docs/checks/check_stuck_terminating.md: no option table row for --namespace"
        ),
        "{p:?}"
    );
    // An option named only in the common table is not documented unless it is a common one.
    let cut_common = format!("{common}\n| `--namespace NS` | moved here |\n");
    assert_eq!(undocumented(&spec, &cut, &cut_common), p);
    // A common option missing from the common table and the page is caught too.
    let no_timeout: String = common
        .lines()
        .filter(|l| !l.starts_with("| `-t, --timeout"))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = undocumented(&spec, &page, &no_timeout);
    assert!(
        p.len() == 1 && p[0].contains("no option table row for --timeout/-t"),
        "{p:?}"
    );
}

// ---- the test's own fixture: a renamed option is caught -------------------------------------

#[test]
fn a_renamed_option_in_a_deployment_file_is_caught() {
    let spec = Spec::of("check_stuck_terminating");
    // nrpe.d: an option the check does not have (renamed in the file, or in the check).
    let line = "/usr/lib/nagios/plugins/check_stuck_terminating -t 8 --warn-after 5m";
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let p = nrpe_problems(&spec, "fixture nrpe.d", &words[1..]);
    assert_eq!(
        p,
        vec!["fixture nrpe.d: check_stuck_terminating has no option --warn-after".to_string()]
    );
    // A value its parser refuses.
    let words: Vec<String> = ["-t", "8", "-w", "5 minutes"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let p = nrpe_problems(&spec, "fixture nrpe.d", &words);
    assert!(p.len() == 1 && p[0].contains("rejects it"), "{p:?}");
    // Icinga: a renamed option, a flag passed with a value, a missing argument.
    let text = r#"
template CheckCommand "k8s-storage-checks-common" {
	arguments = {
		"-t" = {
			value = "$k8s_storage_timeout$"
		}
	}
}
object CheckCommand "k8s_stuck_terminating" {
	import "k8s-storage-checks-common"
	command = [ PluginDir + "/check_stuck_terminating" ]
	arguments += {
		"--warn-after" = { value = "$k8s_stuck_terminating_warning$"; description = "x" }
		"--no-events" = { value = "$k8s_stuck_terminating_no_events$" }
		"--namespace" = { value = "$k8s_stuck_terminating_namespace$" }
	}
	vars.k8s_storage_timeout = "soon"
}
"#;
    let cmds = icinga_commands(text);
    let cmd = &cmds["k8s_stuck_terminating"];
    assert_eq!(cmd.binary, "check_stuck_terminating");
    let p = icinga_problems(&spec, "k8s_stuck_terminating", cmd);
    let has = |s: &str| p.iter().any(|x| x.contains(s));
    assert!(has("has no option --warn-after"), "{p:?}");
    assert!(has("--no-events is a flag but is given a value"), "{p:?}");
    assert!(has("--namespace is repeatable"), "{p:?}");
    assert!(
        has("no argument for check_stuck_terminating --critical"),
        "{p:?}"
    );
    assert!(has("vars.k8s_storage_timeout = \"soon\" for -t"), "{p:?}");
    // The real files pass the same judge: the fixture's failures are the judge's, not noise.
    assert!(problems(
        &spec,
        &[Use {
            place: "x".into(),
            option: "--warning".into(),
            value: Some(true),
            repeat: false,
        }]
    )
    .is_empty());
}
