//! `k8s-storage-checks --generate-man DIR` (hidden; issue 26): the man pages, made by
//! `clap_mangen` from the same clap definitions that parse the command lines, so OPTIONS (with
//! their defaults) cannot drift from the program: one page per check, one for the textfile
//! runner and one for the program itself. Beside clap's sections each page has EXIT STATUS,
//! ENVIRONMENT, FILES (the paths the options default to), EXAMPLES (the `## Examples` block of
//! the check's page, docs/checks/<check>.md, compiled in) and SEE ALSO.
//!
//! It lives in the program rather than in an xtask so that the packaging makes the pages with the
//! very binary it ships (packaging/mkdeb runs it; nothing else is built), and the pages always
//! describe that binary's options.

use crate::{APPLETS, PROGRAM, SERVE, TEXTFILE, TEXTFILE_SUB};
use clap::CommandFactory;
use clap_mangen::roff::{bold, italic, roman, Inline, Roff};
use clap_mangen::Man;
use std::path::Path;

/// The hidden flag: `k8s-storage-checks --generate-man DIR`.
pub const FLAG: &str = "--generate-man";

/// Where the docs live once installed, and online.
const DOC_DIR: &str = "/usr/share/doc/k8s-storage-checks";
const NRPE_CFG: &str = "/etc/nagios/nrpe.d/k8s-storage-checks.cfg";
const KUBECONFIG: &str = "/etc/k8s-storage-checks/kubeconfig";

/// A check's clap definition and its docs page (for EXAMPLES), by name.
fn check(name: &str) -> Option<(clap::Command, &'static str)> {
    macro_rules! page {
        ($c:ident) => {
            (
                <$c::Opts as CommandFactory>::command(),
                include_str!(concat!("../../../docs/checks/", stringify!($c), ".md")),
            )
        };
    }
    Some(match name {
        "check_csi_node_plugins" => page!(check_csi_node_plugins),
        "check_iscsi_sessions" => page!(check_iscsi_sessions),
        "check_jiva_rep_crashloop" => page!(check_jiva_rep_crashloop),
        "check_kubelet_nested_ops" => page!(check_kubelet_nested_ops),
        "check_longhorn_volumes" => page!(check_longhorn_volumes),
        "check_pv_capacity" => page!(check_pv_capacity),
        "check_ro_pvc_mounts" => page!(check_ro_pvc_mounts),
        "check_stale_csi_mounts" => page!(check_stale_csi_mounts),
        "check_storage_kernel_errors" => page!(check_storage_kernel_errors),
        "check_stuck_scheduled" => page!(check_stuck_scheduled),
        "check_stuck_terminating" => page!(check_stuck_terminating),
        "check_volume_attachments" => page!(check_volume_attachments),
        "check_watch_cache" => page!(check_watch_cache),
        _ => return None,
    })
}

/// The command lines of the first ```sh block under `## Examples`: (command, comment).
fn examples(page: &str) -> Vec<(String, String)> {
    let Some(sec) = page.split("\n## Examples\n").nth(1) else {
        return Vec::new();
    };
    let Some(block) = sec.split("```sh\n").nth(1) else {
        return Vec::new();
    };
    let block = block.split("```").next().unwrap_or("");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.split_once("  #") {
            Some((cmd, comment)) => (cmd.trim().to_string(), comment.trim().to_string()),
            None => (l.trim().to_string(), String::new()),
        })
        .collect()
}

/// `SOURCE_DATE_EPOCH` (reproducible packages) as YYYY-MM-DD, else no date.
fn date() -> String {
    let Some(secs) = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
    else {
        return String::new();
    };
    // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm).
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

fn has(cmd: &clap::Command, id: &str) -> bool {
    cmd.get_arguments().any(|a| a.get_id() == id)
}

fn section(r: &mut Roff, title: &str) {
    r.control("SH", [title]);
}

fn item(r: &mut Roff, term: Vec<Inline>, text: &str) {
    r.control("TP", []);
    r.text(term);
    r.text([roman(text)]);
}

fn exit_status(r: &mut Roff, program: bool) {
    section(r, "EXIT STATUS");
    if program {
        r.text([roman(
            "With a check's name, the check's own exit status (below). --list exits 0; \
             --help, --version and an unknown name exit 3.",
        )]);
    }
    for (code, what) in [
        ("0", "OK: nothing to report."),
        (
            "1",
            "WARNING: a finding needs attention (or a -w threshold is crossed).",
        ),
        (
            "2",
            "CRITICAL: a finding needs action now (or a -c threshold is crossed).",
        ),
        (
            "3",
            "UNKNOWN: the check could not tell (a source it could not read, a usage error, \
             the -t timeout, an internal error), and for --help and --version. Never any other \
             code.",
        ),
    ] {
        item(r, vec![bold(code)], what);
    }
}

fn environment(r: &mut Roff, cmd: &clap::Command) {
    section(r, "ENVIRONMENT");
    let mut any = false;
    if has(cmd, "kubeconfig") {
        any = true;
        for (var, what) in [
            (
                "KUBECONFIG",
                "Kubeconfig files (colon-separated; the first existing one is used) when \
                 --kubeconfig is not given. Ignored when the check runs with more privilege \
                 than its caller.",
            ),
            (
                "KUBERNETES_SERVICE_HOST",
                "In a pod: the in-cluster API server (with KUBERNETES_SERVICE_PORT), used with \
                 the service account's token and CA.",
            ),
            (
                "HOME",
                "~/.kube/config, the last place credentials are looked for.",
            ),
            (
                "SUDO_UID",
                "Set by sudo: the check is privileged, so it finds no credentials by itself \
                 (give --kubeconfig).",
            ),
        ] {
            item(r, vec![bold(var)], what);
        }
    }
    if has(cmd, "node") || has(cmd, "host_root") {
        any = true;
        item(
            r,
            vec![bold("NODE_NAME")],
            "In container mode (--host-root): the node's name, from the pod's spec.nodeName.",
        );
    }
    if has(cmd, "tz") {
        any = true;
        item(
            r,
            vec![bold("TZ")],
            "The zone of klog and syslog timestamps when --tz is not given (else /etc/localtime).",
        );
    }
    if !any {
        r.text([roman("None is read.")]);
    }
}

fn files(r: &mut Roff, name: &str, cmd: &clap::Command) {
    section(r, "FILES");
    for a in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|v| v.to_string_lossy().into_owned())
            .filter(|v| v.starts_with('/'))
            .collect();
        if let (false, Some(long)) = (defaults.is_empty(), a.get_long()) {
            item(
                r,
                vec![bold(defaults.join(", "))],
                &format!("The default of --{long}."),
            );
        }
    }
    if has(cmd, "kubelet_root") {
        for root in [
            "/var/lib/kubelet",
            "/var/snap/microk8s/common/var/lib/kubelet",
            "/var/lib/k0s/kubelet",
            "/var/lib/rancher/k3s/agent/kubelet",
        ] {
            item(
                r,
                vec![bold(root)],
                "A kubelet root looked for when no --kubelet-root is given (each that exists is read).",
            );
        }
    }
    if name.starts_with("check_") {
        item(
            r,
            vec![bold(NRPE_CFG)],
            "The NRPE command of this check, with the arguments it runs with.",
        );
    }
    if has(cmd, "kubeconfig") {
        item(
            r,
            vec![bold(KUBECONFIG)],
            "The read-only kubeconfig the NRPE commands and the Ansible role give the checks.",
        );
    }
    let doc = if name.starts_with("check_") {
        format!("docs/checks/{name}.md.gz")
    } else {
        "README.md.gz".to_string()
    };
    item(
        r,
        vec![bold(format!("{DOC_DIR}/"))],
        &format!(
            "The documentation: {doc} (every signal, the options, the privileges) and \
             docs/runbooks/ (what to do about each signal)."
        ),
    );
}

fn examples_section(r: &mut Roff, ex: &[(String, String)]) {
    section(r, "EXAMPLES");
    for (cmd, comment) in ex {
        r.control("PP", []);
        if !comment.is_empty() {
            r.text([roman(comment.clone())]);
            r.control("br", []);
        }
        r.control("nf", []);
        r.control("RS", ["4"]);
        r.text([roman(cmd.clone())]);
        r.control("RE", []);
        r.control("fi", []);
    }
}

fn see_also(r: &mut Roff, name: &str) {
    section(r, "SEE ALSO");
    let mut refs: Vec<Inline> = Vec::new();
    let mut names: Vec<&str> = APPLETS
        .iter()
        .map(|a| a.name)
        .filter(|n| *n != name)
        .collect();
    if name != PROGRAM {
        names.insert(0, PROGRAM);
    }
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            refs.push(roman(", "));
        }
        refs.push(bold(*n));
        refs.push(roman("(1)"));
    }
    refs.push(roman(", "));
    refs.push(bold("check_nrpe"));
    refs.push(roman("(8). The runbooks: "));
    refs.push(italic(format!("{DOC_DIR}/docs/runbooks/")));
    refs.push(roman("."));
    r.text(refs);
}

/// The program's own clap definition (it dispatches by hand; this describes that).
fn program_command() -> clap::Command {
    use clap::{Arg, ArgAction};
    let mut names = String::new();
    for a in APPLETS {
        names.push_str(a.name);
        names.push(' ');
    }
    clap::Command::new(PROGRAM)
        .version(env!("CARGO_PKG_VERSION"))
        .about("the k8s-storage-checks suite in one program")
        .long_about(format!(
            "One static program is every check of the suite and the textfile runner: it runs \
             the one named by the name it is called by (each check's name is a link to it) or \
             by its first argument ({PROGRAM} check_ro_pvc_mounts -t 20). The textfile runner is \
             also {PROGRAM} {TEXTFILE_SUB}. {PROGRAM} triage runs every check for this node at \
             once and joins their findings into chains, root cause first ({PROGRAM} triage \
             --help; docs/triage.md). A copy with file capabilities keeps, for the check it \
             runs, only those that check needs. Names: {}.",
            names.trim_end()
        ))
        .disable_help_flag(true)
        .disable_version_flag(true)
        .arg(
            Arg::new("name")
                .value_name("NAME")
                .help("The check (or textfile) to run"),
        )
        .arg(
            Arg::new("args")
                .value_name("ARGS")
                .num_args(0..)
                .help("Its arguments: see its own page"),
        )
        .arg(
            Arg::new("list")
                .long("list")
                .action(ArgAction::SetTrue)
                .help("Print each name, the copy an install links it to and the capabilities it needs, one per line (what make install and the package install from)"),
        )
        .arg(
            Arg::new("help")
                .short('h')
                .long("help")
                .action(ArgAction::SetTrue)
                .help("Print the names and what each does"),
        )
        .arg(
            Arg::new("version")
                .short('V')
                .long("version")
                .action(ArgAction::SetTrue)
                .help("Print the version"),
        )
}

fn render(name: &str, cmd: &clap::Command, page: Option<&str>) -> std::io::Result<Vec<u8>> {
    let version = env!("CARGO_PKG_VERSION");
    let man = Man::new(cmd.clone())
        .title(name.to_uppercase())
        .section("1")
        .date(date())
        .source(format!("{PROGRAM} {version}"))
        .manual("Monitoring plugins");
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    let mut r = Roff::new();
    exit_status(&mut r, name == PROGRAM);
    environment(&mut r, cmd);
    files(&mut r, name, cmd);
    let mut ex = page.map(examples).unwrap_or_default();
    if name == PROGRAM {
        ex = vec![
            (
                format!("{PROGRAM} --list"),
                "The names and their capabilities".into(),
            ),
            (
                format!("{PROGRAM} check_ro_pvc_mounts -t 20 -v"),
                "Run a check by its name as the first argument".into(),
            ),
        ];
    } else if name == TEXTFILE {
        ex = vec![(
            format!("{TEXTFILE} --dir /var/lib/node_exporter/textfile_collector --host-root /host --check 'check_ro_pvc_mounts -t 30'"),
            "In the DaemonSet's pod (deploy/daemonset.yaml)".into(),
        )];
    } else if name == SERVE {
        ex = vec![(
            format!("{PROGRAM} serve --listen 0.0.0.0:9842 --host-root /host --check 'check_ro_pvc_mounts -t 30'"),
            "In the DaemonSet's pod (deploy/base); /metrics on port 9842".into(),
        )];
    }
    examples_section(&mut r, &ex);
    see_also(&mut r, name);
    r.to_writer(&mut out)?;
    Ok(out)
}

/// Write `<name>.1` into `dir` for the program and every applet. Exit status 0, or 1 naming
/// what failed (an applet with no clap definition here is a failure: its page would be missing).
pub fn generate(dir: &Path) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut pages = vec![(PROGRAM.to_string(), program_command(), None)];
    for a in APPLETS {
        if a.name == TEXTFILE {
            pages.push((
                TEXTFILE.to_string(),
                <textfile::Opts as CommandFactory>::command(),
                None,
            ));
            continue;
        }
        if a.name == SERVE {
            pages.push((
                SERVE.to_string(),
                // Named as installed (the page's file and whatis entry): `k8s-storage-checks
                // serve` is the same program.
                <textfile::serve::ServeOpts as CommandFactory>::command()
                    .name(SERVE)
                    .bin_name(SERVE),
                None,
            ));
            continue;
        }
        let (cmd, page) = check(a.name).ok_or_else(|| {
            format!(
                "{}: no clap definition for its man page (add it to crates/multicall/src/man.rs)",
                a.name
            )
        })?;
        pages.push((a.name.to_string(), cmd, Some(page)));
    }
    let mut written = Vec::new();
    for (name, cmd, page) in pages {
        let bytes = render(&name, &cmd, page).map_err(|e| format!("{name}: {e}"))?;
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

/// `k8s-storage-checks --generate-man DIR`: the exit code.
pub fn main(args: &[std::ffi::OsString]) -> i32 {
    let Some(dir) = args.get(2) else {
        eprintln!("usage: {PROGRAM} {FLAG} DIR");
        return 1;
    };
    match generate(Path::new(dir)) {
        Ok(paths) => {
            for p in paths {
                println!("{p}");
            }
            0
        }
        Err(e) => {
            eprintln!("{PROGRAM} {FLAG}: {e}");
            1
        }
    }
}
