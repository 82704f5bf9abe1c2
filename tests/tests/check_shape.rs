//! The shape of a check (issue 35), `docs/development.md#the-shape-of-a-check`: every
//! `crates/check_*` has the same files with the same names, so that a newcomer who read one
//! check finds their way in every other, and a new check starts in that shape.
//!
//! - `src/lib.rs`: `#![forbid(unsafe_code)]`, the clap `Opts`, `impl Check for Opts` with `run`;
//! - `src/gather.rs`: `pub fn gather(…)`, a free function (not a method of `Opts`);
//! - `src/evaluate.rs`: `pub fn evaluate(…)`; `pub struct Policy` (or `pub type Policy`) there
//!   when the check has one, in no other file; besides `evaluate` only `evaluate_named` (the same
//!   decision with names resolved), no other `evaluate_*`;
//! - `src/tests.rs`: the unit tests;
//! - `-w/-c` through `plugin::args::RangeArgs` (directly or through `kube`'s `StuckArgs`), never
//!   declared by hand — but for the checks in [`OWN_THRESHOLDS`], whose `-w/-c` are not ranges.
//!
//! A failure names the check, the file and the rule.

use e2e::{all_checks, workspace_root};

/// Checks whose `-w/-c` are not monitoring-plugins ranges, and why.
const OWN_THRESHOLDS: &[(&str, &str)] = &[(
    "check_pv_capacity",
    "-w/-c are free-space limits (`15%`, `2GiB`: below is WARNING), not ranges",
)];

const SHAPE: &str = "docs/development.md#the-shape-of-a-check";

/// Lines that start (after indentation `indent`) with `prefix`, outside comments.
fn has_line(text: &str, indent: usize, prefix: &str) -> bool {
    text.lines().any(|l| {
        l.len() > indent && l[..indent].chars().all(|c| c == ' ') && l[indent..].starts_with(prefix)
    })
}

/// What `check`'s crate lacks of the shape, one message each. `read` gives a file's text by its
/// path from the workspace root (`None`: no such file); `files` lists the crate's `src/*.rs`.
fn shape_problems(
    check: &str,
    files: &[String],
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut out = Vec::new();
    let src = format!("crates/{check}/src");
    let mut text = |name: &str, what: &str| -> Option<String> {
        let path = format!("{src}/{name}");
        let t = read(&path);
        if t.is_none() {
            out.push(format!("{check}: {path} does not exist ({what}; {SHAPE})"));
        }
        t
    };
    let lib = text("lib.rs", "the clap Opts and `impl Check for Opts`");
    let gather = text("gather.rs", "all I/O: `pub fn gather`");
    let evaluate = text("evaluate.rs", "the decision: `pub fn evaluate`, `Policy`");
    let _tests = text("tests.rs", "the unit tests of evaluate");
    let lib_path = format!("{src}/lib.rs");
    if let Some(lib) = &lib {
        for (needle, what) in [
            ("#![forbid(unsafe_code)]", "`#![forbid(unsafe_code)]`"),
            ("pub struct Opts", "the clap options `pub struct Opts`"),
            ("impl Check for Opts", "`impl Check for Opts`"),
            ("mod gather;", "`mod gather;`"),
            ("mod evaluate;", "`mod evaluate;`"),
            ("mod tests;", "`mod tests;`"),
        ] {
            if !lib.contains(needle) {
                out.push(format!("{check}: {lib_path} lacks {what} ({SHAPE})"));
            }
        }
        let own = OWN_THRESHOLDS.iter().any(|(c, _)| *c == check);
        let ranges = lib.contains("RangeArgs") || lib.contains("StuckArgs");
        if !own && !ranges && (lib.contains("short = 'w'") || lib.contains("\"warning\"")) {
            out.push(format!(
                "{check}: {lib_path} declares -w/-c by hand: flatten \
                 `plugin::args::RangeArgs` and word them with `mut_arg` ({SHAPE})"
            ));
        }
    }
    if let Some(g) = &gather {
        if !has_line(g, 0, "pub fn gather(") {
            let method = has_line(g, 4, "pub fn gather(&self");
            out.push(format!(
                "{check}: {src}/gather.rs has no free `pub fn gather(`{} ({SHAPE})",
                if method {
                    " (it is a method of Opts: make it `pub fn gather(opts: &Opts, …)`)"
                } else {
                    ""
                }
            ));
        }
    }
    if let Some(e) = &evaluate {
        if !has_line(e, 0, "pub fn evaluate(") {
            out.push(format!(
                "{check}: {src}/evaluate.rs has no `pub fn evaluate(` ({SHAPE})"
            ));
        }
    }
    for f in files {
        let path = format!("{src}/{f}");
        let Some(t) = read(&path) else { continue };
        let code: String = t
            .split("\n#[cfg(test)]\nmod tests {")
            .next()
            .unwrap_or("")
            .to_string();
        if f != "evaluate.rs"
            && (has_line(&code, 0, "pub struct Policy") || has_line(&code, 0, "pub type Policy"))
        {
            out.push(format!(
                "{check}: {path} defines Policy: its home is {src}/evaluate.rs ({SHAPE})"
            ));
        }
        for l in code.lines() {
            let l = l.trim_start();
            if let Some(rest) = l.strip_prefix("pub fn evaluate_") {
                if !rest.starts_with("named(") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.push(format!(
                        "{check}: {path} has `evaluate_{name}`: a check has `evaluate` and, \
                         when it names volumes, `evaluate_named`, nothing else ({SHAPE})"
                    ));
                }
            }
        }
    }
    out
}

fn src_files(check: &str) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(workspace_root().join("crates").join(check).join("src"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".rs"))
                    .collect()
            })
            .unwrap_or_default();
    v.sort();
    v
}

fn read_workspace(path: &str) -> Option<String> {
    std::fs::read_to_string(workspace_root().join(path)).ok()
}

#[test]
fn every_check_has_the_shape() {
    let checks = all_checks();
    assert!(checks.len() >= 12, "{checks:?}");
    let problems: Vec<String> = checks
        .iter()
        .flat_map(|c| shape_problems(c, &src_files(c), &read_workspace))
        .collect();
    assert!(
        problems.is_empty(),
        "a check is not in the shape of a check:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_shape_is_written_down() {
    let dev = read_workspace("docs/development.md").unwrap();
    assert!(dev.contains("\n## The shape of a check\n"), "{SHAPE}");
    for word in [
        "src/lib.rs",
        "src/gather.rs",
        "src/evaluate.rs",
        "src/tests.rs",
        "RangeArgs",
        "evaluate_named",
        "pub struct Policy",
        "pub fn gather",
    ] {
        assert!(
            dev.contains(word),
            "docs/development.md's shape lacks {word}"
        );
    }
    for (check, _) in OWN_THRESHOLDS {
        assert!(
            dev.contains(check),
            "docs/development.md: the exception {check}"
        );
    }
}

/// An edit of one file's text (`None`: the file is gone).
type Edit = fn(String) -> Option<String>;

/// The rules on planted crates: a check without gather.rs, with gather as a method, with a
/// hand-declared -w, with Policy in lib.rs or an `evaluate_with` is caught, naming the file.
#[test]
fn a_check_out_of_shape_is_caught() {
    let real = "check_volume_attachments";
    let files = src_files(real);
    assert!(shape_problems(real, &files, &read_workspace).is_empty());
    let planted = |path: &'static str, edit: Edit| {
        move |p: &str| {
            let t = read_workspace(p)?;
            if p == path {
                edit(t)
            } else {
                Some(t)
            }
        }
    };
    let cases: [(&str, Edit, &str); 6] = [
        (
            "crates/check_volume_attachments/src/gather.rs",
            |_| None,
            "check_volume_attachments: crates/check_volume_attachments/src/gather.rs does not exist",
        ),
        (
            "crates/check_volume_attachments/src/evaluate.rs",
            |_| None,
            "check_volume_attachments: crates/check_volume_attachments/src/evaluate.rs does not exist",
        ),
        (
            "crates/check_volume_attachments/src/gather.rs",
            |t| Some(t.replace("pub fn gather(opts: &Opts", "impl Opts {\n    pub fn gather(&self")),
            "check_volume_attachments: crates/check_volume_attachments/src/gather.rs has no free `pub fn gather(` (it is a method of Opts",
        ),
        (
            "crates/check_volume_attachments/src/lib.rs",
            |t| {
                Some(t.replace(
                    "#[command(flatten)]\n    pub thresholds: plugin::args::RangeArgs,",
                    "#[arg(short = 'w', long = \"warning\")]\n    pub warning: Option<Range>,",
                ))
            },
            "check_volume_attachments: crates/check_volume_attachments/src/lib.rs declares -w/-c by hand",
        ),
        (
            "crates/check_volume_attachments/src/lib.rs",
            |t| Some(format!("{t}\npub struct Policy {{}}\n")),
            "check_volume_attachments: crates/check_volume_attachments/src/lib.rs defines Policy",
        ),
        (
            "crates/check_volume_attachments/src/evaluate.rs",
            |t| Some(format!("pub fn evaluate_with() {{}}\n{t}")),
            "check_volume_attachments: crates/check_volume_attachments/src/evaluate.rs has `evaluate_with`",
        ),
    ];
    for (path, edit, want) in cases {
        let m = shape_problems(real, &files, &planted(path, edit));
        assert_eq!(m.len(), 1, "{path}: {m:#?}");
        assert!(m[0].starts_with(want), "{m:#?}");
        assert!(m[0].ends_with(&format!("{SHAPE})")), "{m:#?}");
    }
}
