//! The "add a check" checklist (issue 35): every file outside a check's crate that must name it,
//! as one table ([`PLACES`]), which `docs/development.md#adding-a-check` lists row by row (the
//! docs test here holds the two to each other, both ways).
//!
//! For every check of the workspace (`crates/check_*`) each place of its kind names it — as a
//! whole word, so `check_foo` is not found inside `check_foo_bar` — or carries a line that does,
//! saying why it is left out there (`check_volume_attachments has no scene: …` in the replay).
//! A failure names the check and each file it is missing from, with what goes there.
//!
//! Which checks a place is for is read from the code, not kept here: privileged checks are the
//! ones whose row in multicall's `APPLETS` has a capability, API checks the ones whose options
//! in the role's `k8s_storage_checks__known_options` include `--kubeconfig`, cluster-wide checks
//! the ones in the role's default `k8s_storage_checks_cluster_checks` (an opt-in one, like
//! check_longhorn_volumes, is named there in a comment only, so it is not held to the cluster
//! places).

use e2e::{all_checks, workspace_root};
use std::collections::BTreeSet;

/// Which checks a place must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Every check.
    Every,
    /// The checks with a file capability (multicall's `APPLETS` row has one).
    Privileged,
    /// The checks that read the Kubernetes API (`--kubeconfig` in the role's known options).
    Api,
    /// The checks the role runs once per cluster by default (`k8s_storage_checks_cluster_checks`).
    ClusterWide,
}

impl Who {
    fn label(self) -> &'static str {
        match self {
            Who::Every => "every check",
            Who::Privileged => "privileged checks",
            Who::Api => "API checks",
            Who::ClusterWide => "cluster-wide checks",
        }
    }
}

/// One file a new check must touch.
struct Place {
    /// Relative to the workspace root; `{check}` is the check's name, `{module}` the name
    /// without `check_` (its e2e module).
    path: &'static str,
    /// What the file must hold: `{check}` (the check's name as a word) unless said otherwise.
    needle: &'static str,
    who: Who,
}

const fn at(path: &'static str, who: Who) -> Place {
    Place {
        path,
        needle: "{check}",
        who,
    }
}

/// The checklist, in the order to do it (docs/development.md's table has the same rows).
const PLACES: &[Place] = &[
    // The program.
    at("crates/multicall/Cargo.toml", Who::Every),
    at("crates/multicall/src/lib.rs", Who::Every),
    at("crates/multicall/src/man.rs", Who::Every),
    at("crates/multicall/src/tests.rs", Who::Every),
    // The docs.
    at("docs/checks/{check}.md", Who::Every),
    at("docs/checks/README.md", Who::Every),
    at("docs/runbooks/README.md", Who::Every),
    at("README.md", Who::Every),
    at("docs/output.md", Who::Every),
    at("docs/limits.md", Who::Every),
    at("docs/security.md", Who::Every),
    at("docs/deploy/README.md", Who::Every),
    at("docs/deploy/install.md", Who::Privileged),
    at("docs/deploy/nrpe.md", Who::Privileged),
    at("docs/api-access.md", Who::Api),
    at("docs/deploy/kubernetes.md", Who::Api),
    at("docs/deploy/ansible.md", Who::ClusterWide),
    at("docs/deploy/kustomize.md", Who::ClusterWide),
    // Deployment.
    at("nrpe.d/k8s-storage-checks.cfg", Who::Every),
    at("nagios/k8s-storage-checks.cfg", Who::Every),
    at("icinga2/k8s-storage-checks.conf", Who::Every),
    Place {
        path: "icinga2/k8s-storage-hosts.conf.example",
        needle: "k8s_{module}",
        who: Who::Every,
    },
    at(
        "ansible/roles/k8s_storage_checks/defaults/main.yml",
        Who::Every,
    ),
    at("ansible/roles/k8s_storage_checks/vars/main.yml", Who::Every),
    at(
        "ansible/roles/k8s_storage_checks/meta/argument_specs.yml",
        Who::Every,
    ),
    at(
        "ansible/roles/k8s_storage_checks/templates/_commands.j2",
        Who::Every,
    ),
    at("ansible/roles/k8s_storage_checks/README.md", Who::Every),
    at("deploy/base/cluster.yaml", Who::ClusterWide),
    at("deploy/grafana/k8s-storage-checks.json", Who::Every),
    // Tests.
    at("tests/tests/{module}.rs", Who::Every),
    Place {
        path: "tests/tests/main.rs",
        needle: "mod {module};",
        who: Who::Every,
    },
    at("tests/tests/deployment.rs", Who::Every),
    at("tests/tests/structured_output.rs", Who::Every),
    at("tests/tests/fault_matrix.rs", Who::Every),
    at("tests/tests/from_zero.rs", Who::Every),
    at("tests/src/bin/replay.rs", Who::Every),
    at("tests/src/engines.rs", Who::Every),
    at("tests/tests/real_apiserver.rs", Who::Api),
    at("tests/tests/engines_nagios.rs", Who::ClusterWide),
    at("tests/tests/engines_icinga.rs", Who::ClusterWide),
];

/// `{check}` and `{module}` of a path or needle filled in for `check`.
fn fill(template: &str, check: &str) -> String {
    template
        .replace("{check}", check)
        .replace("{module}", check.trim_start_matches("check_"))
}

/// True when `text` holds `word` with no identifier character on either side.
fn names(text: &str, word: &str) -> bool {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(ident)
            && !text[i + word.len()..].chars().next().is_some_and(ident)
    })
}

/// What kinds a check is of, read from the code (see the module documentation).
struct Kinds {
    privileged: BTreeSet<String>,
    api: BTreeSet<String>,
    cluster_wide: BTreeSet<String>,
}

impl Kinds {
    fn read(read: &dyn Fn(&str) -> Option<String>) -> Kinds {
        let applets = read("crates/multicall/src/lib.rs").expect("crates/multicall/src/lib.rs");
        // `check::<check_x::Opts>(&[Cap::…])`: a capability between the brackets.
        let privileged = applets
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let rest = l.strip_prefix("check::<")?;
                let (name, caps) = rest.split_once("::Opts>(&[")?;
                caps.trim_start()
                    .starts_with("Cap::")
                    .then(|| name.to_string())
            })
            .collect();
        let vars = read("ansible/roles/k8s_storage_checks/vars/main.yml").expect("role vars");
        // `  check_x: [--kubeconfig, …]` under k8s_storage_checks__known_options.
        let api = vars
            .lines()
            .skip_while(|l| !l.starts_with("k8s_storage_checks__known_options:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| {
                let (name, opts) = l.trim().split_once(':')?;
                names(opts, "--kubeconfig").then(|| name.to_string())
            })
            .collect();
        let defaults =
            read("ansible/roles/k8s_storage_checks/defaults/main.yml").expect("role defaults");
        // `  - check_x` under k8s_storage_checks_cluster_checks (comments are not entries).
        let cluster_wide = defaults
            .lines()
            .skip_while(|l| !l.starts_with("k8s_storage_checks_cluster_checks:"))
            .skip(1)
            .take_while(|l| l.starts_with("  - "))
            .map(|l| l.trim_start_matches("  - ").trim().to_string())
            .collect();
        Kinds {
            privileged,
            api,
            cluster_wide,
        }
    }

    fn is(&self, who: Who, check: &str) -> bool {
        match who {
            Who::Every => true,
            Who::Privileged => self.privileged.contains(check),
            Who::Api => self.api.contains(check),
            Who::ClusterWide => self.cluster_wide.contains(check),
        }
    }
}

/// The files of the checklist `check` is missing from, one message each naming the check, the
/// file and what goes there. `read` gives a file's text by its path from the workspace root
/// (`None`: no such file).
fn missing(check: &str, kinds: &Kinds, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    for p in PLACES.iter().filter(|p| kinds.is(p.who, check)) {
        let path = fill(p.path, check);
        let needle = fill(p.needle, check);
        match read(&path) {
            None => out.push(format!(
                "{check}: {path} does not exist (a file of {}; docs/development.md#adding-a-check)",
                p.who.label()
            )),
            Some(text) if !names(&text, &needle) => out.push(format!(
                "{check}: {path} does not name it (`{needle}` not found; a place of {}: name it \
                 there, or add a line naming it that says why it is left out; \
                 docs/development.md#adding-a-check)",
                p.who.label()
            )),
            Some(_) => {}
        }
    }
    out
}

fn read_workspace(path: &str) -> Option<String> {
    std::fs::read_to_string(workspace_root().join(path)).ok()
}

/// A path of the table as the docs write it: `<check>`, `<module>` for the placeholders.
fn as_documented(path: &str) -> String {
    path.replace("{check}", "<check>")
        .replace("{module}", "<module>")
}

/// The first cell of each row of the table in the "Adding a check" section, without backticks.
fn documented_paths(development: &str) -> Vec<String> {
    let section: String = development
        .split("\n## ")
        .find(|s| s.starts_with("Adding a check"))
        .expect("docs/development.md has a section `## Adding a check`")
        .to_string();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cell = l.trim_start_matches("| ").split(" |").next()?;
            Some(cell.trim().trim_matches('`').to_string())
        })
        .collect()
}

#[test]
fn every_check_is_named_in_every_file_of_its_checklist() {
    let kinds = Kinds::read(&read_workspace);
    let checks = all_checks();
    assert!(checks.len() >= 12, "{checks:?}");
    // The kinds were read: the known members are found (so a parse that finds nothing fails).
    for (set, c) in [
        (&kinds.privileged, "check_storage_kernel_errors"),
        (&kinds.api, "check_volume_attachments"),
        (&kinds.cluster_wide, "check_watch_cache"),
    ] {
        assert!(set.contains(c), "{c} not found among {set:?}");
    }
    assert!(
        !kinds.cluster_wide.contains("check_longhorn_volumes"),
        "opt-in"
    );
    let problems: Vec<String> = checks
        .iter()
        .flat_map(|c| missing(c, &kinds, &read_workspace))
        .collect();
    assert!(
        problems.is_empty(),
        "a check is missing from its checklist:\n{}",
        problems.join("\n")
    );
}

/// What docs/development.md's checklist (its text `development`) lacks or has beyond PLACES.
fn docs_problems(development: &str) -> Vec<String> {
    let documented = documented_paths(development);
    let table: Vec<String> = PLACES.iter().map(|p| as_documented(p.path)).collect();
    let mut problems = Vec::new();
    for p in &table {
        if !documented.contains(p) {
            problems.push(format!(
                "docs/development.md#adding-a-check has no row for `{p}` (a place of \
                 tests/tests/add_a_check.rs's PLACES)"
            ));
        }
    }
    for d in &documented {
        if !table.contains(d) {
            problems.push(format!(
                "docs/development.md#adding-a-check has a row for `{d}`, which \
                 tests/tests/add_a_check.rs's PLACES lacks"
            ));
        }
    }
    // The same order: the table is the order to do it in.
    if problems.is_empty() && documented != table {
        problems.push(format!(
            "docs/development.md#adding-a-check lists the places in another order than PLACES:\n\
             docs:  {documented:?}\ntable: {table:?}"
        ));
    }
    problems
}

#[test]
fn the_docs_checklist_is_the_tests_table() {
    let development = read_workspace("docs/development.md").unwrap();
    let problems = docs_problems(&development);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_check_missing_from_its_files_is_caught() {
    let kinds = Kinds::read(&read_workspace);
    // A check nobody added anywhere: every place for every check, by name.
    let fake = "check_not_there";
    let m = missing(fake, &kinds, &read_workspace);
    let every: Vec<&Place> = PLACES.iter().filter(|p| p.who == Who::Every).collect();
    assert_eq!(m.len(), every.len(), "{m:#?}");
    for p in &every {
        let path = fill(p.path, fake);
        assert!(
            m.iter().any(|x| x.starts_with(&format!("{fake}: {path} "))),
            "{path} not named in {m:#?}"
        );
    }
    assert!(
        m.iter()
            .any(|x| x == &format!("{fake}: docs/checks/{fake}.md does not exist (a file of every check; docs/development.md#adding-a-check)")),
        "{m:#?}"
    );
    assert!(
        m.iter().any(|x| x.starts_with(&format!(
            "{fake}: tests/tests/main.rs does not name it (`mod not_there;` not found"
        ))),
        "{m:#?}"
    );

    // A real check with one place's mention removed in memory: that file, and only it.
    for (check, path) in [
        ("check_volume_attachments", "nrpe.d/k8s-storage-checks.cfg"),
        ("check_volume_attachments", "deploy/base/cluster.yaml"),
        ("check_volume_attachments", "tests/tests/real_apiserver.rs"),
        ("check_storage_kernel_errors", "docs/deploy/install.md"),
        ("check_pv_capacity", "tests/src/bin/replay.rs"),
    ] {
        assert!(missing(check, &kinds, &read_workspace).is_empty());
        let without = |p: &str| {
            let text = read_workspace(p)?;
            Some(if p == path {
                text.replace(check, "check_removed")
            } else {
                text
            })
        };
        let m = missing(check, &kinds, &without);
        assert_eq!(m.len(), 1, "{check} without {path}: {m:#?}");
        assert!(
            m[0].starts_with(&format!("{check}: {path} does not name it")),
            "{m:#?}"
        );
    }
    // A look-alike does not count: check_volume_attachments_old is not check_volume_attachments.
    assert!(!names(
        "run check_volume_attachments_old",
        "check_volume_attachments"
    ));
    assert!(names(
        "run check_volume_attachments.",
        "check_volume_attachments"
    ));
    assert!(!names(
        "xcheck_volume_attachments",
        "check_volume_attachments"
    ));
}

#[test]
fn a_lost_or_extra_docs_row_is_caught() {
    let development = read_workspace("docs/development.md").unwrap();
    let row = "| `docs/limits.md` |";
    assert_eq!(development.matches(row).count(), 1);
    let lost = development
        .lines()
        .filter(|l| !l.starts_with(row))
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        docs_problems(&lost),
        [
            "docs/development.md#adding-a-check has no row for `docs/limits.md` (a place of \
          tests/tests/add_a_check.rs's PLACES)"
        ]
    );
    let extra = development.replace(row, &format!("| `docs/elsewhere.md` | x |\n{row}"));
    assert_eq!(
        docs_problems(&extra),
        [
            "docs/development.md#adding-a-check has a row for `docs/elsewhere.md`, which \
          tests/tests/add_a_check.rs's PLACES lacks"
        ]
    );
}
