//! The Ansible role's choices, by real `ansible-playbook` runs (issues 28 and 29): booleans given
//! with `-e` as strings act as false everywhere; the monitoring agent (`nrpe | icinga2 | none`):
//! on a fresh, minimal Debian (debootstrap, no python3-apt) an Icinga 2 agent node gets the
//! binaries, their capabilities and the CheckCommands but no NRPE; node_exporter's own textfile
//! directory is never touched; the cluster-wide checks land only on the hosts named in
//! `k8s_storage_checks_cluster_checks_on`; and the role README's variable table is the argument
//! spec's, with the defaults of `defaults/main.yml`.

use crate::deployment::{changed_tasks_of, fresh_host_rootfs};
use e2e::{bin_dir, need_root, need_tool, workspace_root, Cmd, Output};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn role() -> PathBuf {
    workspace_root().join("ansible/roles/k8s_storage_checks")
}

/// `tests/deploy/render-nrpe.yml` (the role's nrpe.d rendering only) with `vars` as a vars file
/// and `extra` as further `-e` arguments, the way an operator gives them on the command line.
/// Returns the rendered commands.
fn render(vars: &Value, extra: &[&str]) -> BTreeMap<String, String> {
    let work = tempfile::tempdir().unwrap();
    let mut vars = vars.clone();
    vars["k8s_storage_checks_nrpe_config_dir"] = json!(work.path());
    vars["k8s_storage_checks_nrpe_restart"] = json!(false);
    let file = work.path().join("vars.json");
    std::fs::write(&file, vars.to_string()).unwrap();
    let mut cmd = Cmd::new("ansible-playbook")
        .args(["-i", "localhost,", "-c", "local"])
        .arg(workspace_root().join("tests/deploy/render-nrpe.yml"))
        .arg("-e")
        .arg(format!("@{}", file.display()));
    for e in extra {
        cmd = cmd.arg("-e").arg(e);
    }
    let out = cmd
        .env("ANSIBLE_ROLES_PATH", workspace_root().join("ansible/roles"))
        .env("ANSIBLE_LOCAL_TEMP", work.path().join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .run();
    assert_eq!(out.code, 0, "ansible-playbook: {out:?}");
    let text = std::fs::read_to_string(work.path().join("k8s-storage-checks.cfg")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("command["))
        .filter_map(|l| l.split_once("]="))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `-e k8s_storage_checks_iscsi_manage=false` (a string) over a play that sets it true: no
/// `--min-recovery-timeout` in nrpe.d (it was rendered while the iSCSI task was skipped); the
/// same for the other booleans the command lines depend on.
#[test]
fn booleans_given_as_strings_with_e_act_as_false() {
    let t = "booleans_given_as_strings_with_e_act_as_false";
    if !need_tool(t, "ansible-playbook") {
        return;
    }
    let play = json!({
        "k8s_storage_checks_iscsi_manage": true,
        "k8s_storage_checks_kubeconfig_present": true,
        "k8s_storage_checks_cluster_scope": true,
    });
    // The play as written: the iSCSI action item, the kubeconfig for the node checks, the
    // cluster-wide commands.
    let on = render(&play, &[]);
    assert!(
        on["check_iscsi_sessions"].contains("--min-recovery-timeout 300"),
        "{on:#?}"
    );
    assert!(
        on["check_stale_csi_mounts"].contains("--kubeconfig"),
        "{on:#?}"
    );
    assert!(on.contains_key("check_watch_cache"), "{on:#?}");
    // The same play with the booleans overridden on the command line, as strings.
    for f in ["false", "no", "0", "False"] {
        let off = render(
            &play,
            &[
                &format!("k8s_storage_checks_iscsi_manage={f}"),
                &format!("k8s_storage_checks_kubeconfig_present={f}"),
                &format!("k8s_storage_checks_cluster_scope={f}"),
            ],
        );
        assert!(
            off.values().all(|c| !c.contains("--min-recovery-timeout")),
            "-e k8s_storage_checks_iscsi_manage={f}: {off:#?}"
        );
        assert!(
            !off["check_stale_csi_mounts"].contains("--kubeconfig"),
            "-e k8s_storage_checks_kubeconfig_present={f}: {off:#?}"
        );
        assert!(
            !off.contains_key("check_watch_cache"),
            "-e k8s_storage_checks_cluster_scope={f}: {off:#?}"
        );
    }
}

/// Every use of a boolean variable of the argument spec in the role's Jinja (templates, `when`
/// conditions, expressions in tasks, handlers and vars) goes through `| bool`: a string from
/// `-e` is otherwise true whatever it says. Found by Python's YAML parser and a scan of the
/// expressions; the scan itself is shown to find an unfiltered use.
#[test]
fn every_boolean_of_the_role_goes_through_the_bool_filter() {
    let t = "every_boolean_of_the_role_goes_through_the_bool_filter";
    if !need_tool(t, "python3") {
        return;
    }
    // Expressions only: {{ }}, {% %}, and the bare Jinja of when/changed_when/failed_when.
    let script = r#"
import glob, json, os, re, sys, yaml
role = sys.argv[1]
spec = yaml.safe_load(open(os.path.join(role, 'meta/argument_specs.yml')))
bools = [k for k, v in spec['argument_specs']['main']['options'].items() if v.get('type') == 'bool']
exprs = []
def walk(node, where, key=None):
    if isinstance(node, dict):
        for k, v in node.items():
            walk(v, where, k)
    elif isinstance(node, list):
        for v in node:
            walk(v, where, key)
    elif isinstance(node, str):
        if key in ('when', 'changed_when', 'failed_when'):
            exprs.append((where, node))
        exprs.extend((where, m) for m in re.findall(r'\{\{(.*?)\}\}|\{%(.*?)%\}', node, re.S) for m in m if m)
files = sorted(glob.glob(os.path.join(role, '*/*.yml')) + glob.glob(os.path.join(role, 'templates/*')))
for f in files:
    text = open(f).read()
    if f.endswith('.yml'):
        walk(yaml.safe_load(text), f)
    else:
        text = re.sub(r'\{#.*?#\}', '', text, flags=re.S)
        exprs.extend((f, m) for m in re.findall(r'\{\{(.*?)\}\}|\{%(.*?)%\}', text, re.S) for m in m if m)
bad = []
for where, e in exprs:
    for b in bools:
        for m in re.finditer(re.escape(b) + r'\b', e):
            if not re.match(r'\s*\|\s*bool\b', e[m.end():]):
                bad.append('%s: %s in %r' % (os.path.relpath(where, role), b, ' '.join(e.split())))
print(json.dumps({'bools': bools, 'expressions': len(exprs), 'bad': bad}))
"#;
    let scan = |role_dir: &Path| -> Value {
        let out = Cmd::new("python3")
            .arg("-c")
            .arg(script)
            .arg(role_dir)
            .run();
        assert_eq!(out.code, 0, "{out:?}");
        serde_json::from_str(&out.stdout).unwrap()
    };
    let r = scan(&role());
    assert!(r["bools"].as_array().unwrap().len() >= 8, "{r}");
    assert!(r["expressions"].as_u64().unwrap() > 100, "{r}");
    assert_eq!(r["bad"], json!([]), "booleans used without | bool");
    // The scan finds the bug the issue found: _commands.j2 as it was.
    let copy = tempfile::tempdir().unwrap();
    let cp = Cmd::new("cp")
        .arg("-rL")
        .arg(role())
        .arg(copy.path().join("role"))
        .run();
    assert_eq!(cp.code, 0, "{cp:?}");
    let f = copy.path().join("role/templates/_commands.j2");
    let text = std::fs::read_to_string(&f).unwrap();
    let broken = text.replace(
        "k8s_storage_checks_iscsi_manage | bool",
        "k8s_storage_checks_iscsi_manage",
    );
    assert_ne!(broken, text);
    std::fs::write(&f, broken).unwrap();
    let r = scan(&copy.path().join("role"));
    assert!(
        r["bad"]
            .to_string()
            .contains("k8s_storage_checks_iscsi_manage"),
        "{r}"
    );
}

/// The cluster-wide checks only on the hosts named in `k8s_storage_checks_cluster_checks_on`
/// (default none), as a list or, with `-e`, a comma-separated string; there they include
/// check_stuck_terminating with --all-nodes as its own command.
#[test]
fn cluster_checks_only_on_the_named_hosts() {
    let t = "cluster_checks_only_on_the_named_hosts";
    if !need_tool(t, "ansible-playbook") {
        return;
    }
    let cluster = [
        "check_jiva_rep_crashloop",
        "check_watch_cache",
        "check_volume_attachments",
    ];
    let default = render(&json!({}), &[]);
    assert!(
        cluster.iter().all(|c| !default.contains_key(*c))
            && !default.contains_key("check_stuck_terminating_all_nodes"),
        "the default installs cluster checks: {default:#?}"
    );
    assert!(
        default["check_stuck_terminating"].contains("--kubeconfig")
            && !default["check_stuck_terminating"].contains("--all-nodes"),
        "{default:#?}"
    );
    let other = render(
        &json!({"k8s_storage_checks_cluster_checks_on": ["node-1", "node-2"]}),
        &[],
    );
    assert_eq!(
        other.keys().collect::<Vec<_>>(),
        default.keys().collect::<Vec<_>>()
    );
    for named in [
        render(
            &json!({"k8s_storage_checks_cluster_checks_on": ["node-1", "localhost"]}),
            &[],
        ),
        render(
            &json!({}),
            &["k8s_storage_checks_cluster_checks_on=node-1,localhost"],
        ),
    ] {
        for c in cluster {
            assert!(named.contains_key(c), "{c}: {named:#?}");
        }
        let all = &named["check_stuck_terminating_all_nodes"];
        assert!(
            all.starts_with("/usr/lib/nagios/plugins/check_stuck_terminating -t 8 ")
                && all.ends_with(" --all-nodes")
                && !all.contains("--node "),
            "{all}"
        );
        // The per-node one stays.
        assert!(!named["check_stuck_terminating"].contains("--all-nodes"));
    }
    // A host name that only contains the host's name is not it.
    let near = render(
        &json!({}),
        &["k8s_storage_checks_cluster_checks_on=localhost2"],
    );
    assert!(!near.contains_key("check_watch_cache"), "{near:#?}");
}

/// The role README's variable table lists exactly the argument spec's variables, each with the
/// default of `defaults/main.yml`, and every variable of the spec has a default there.
#[test]
fn role_readme_variable_table_is_the_argument_spec() {
    let t = "role_readme_variable_table_is_the_argument_spec";
    if !need_tool(t, "python3") {
        return;
    }
    let script = r#"
import json, os, sys, yaml
role = sys.argv[1]
spec = yaml.safe_load(open(os.path.join(role, 'meta/argument_specs.yml')))['argument_specs']['main']['options']
defaults = yaml.safe_load(open(os.path.join(role, 'defaults/main.yml')))
rows = {}
for line in open(os.path.join(role, 'README.md')):
    if line.startswith('| `k8s_storage_checks_'):
        cells = [c.strip() for c in line.replace('\\|', '\x00').strip().strip('|').split('|')]
        name = cells[0].strip('`')
        d = cells[1].replace('\x00', '|')
        if d.startswith('`') and d.endswith('`'):
            d = d[1:-1]
            # A Jinja default is shown as written.
            d = d if d.startswith('{{') else yaml.safe_load(d)
        rows[name] = d
print(json.dumps({'spec': sorted(spec), 'defaults': defaults, 'rows': rows}, default=str))
"#;
    let out = Cmd::new("python3").arg("-c").arg(script).arg(role()).run();
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let spec: BTreeSet<&str> = v["spec"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    let rows = v["rows"].as_object().unwrap();
    let table: BTreeSet<&str> = rows.keys().map(String::as_str).collect();
    let missing: Vec<_> = spec.difference(&table).collect();
    let extra: Vec<_> = table.difference(&spec).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "README table vs meta/argument_specs.yml: missing {missing:?}, not in the spec {extra:?}"
    );
    let defaults = v["defaults"].as_object().unwrap();
    for name in &spec {
        let d = defaults
            .get(*name)
            .unwrap_or_else(|| panic!("{name}: no default in defaults/main.yml"));
        assert_eq!(
            &rows[*name], d,
            "{name}: the README's default differs from defaults/main.yml"
        );
    }
}

/// An overlay of the cached fresh host (the cache stays as debootstrap made it); unmounted and
/// removed when dropped, even on failure.
struct Overlay {
    dir: tempfile::TempDir,
}

impl Overlay {
    fn new(lower: &Path) -> Overlay {
        // On the target directory's filesystem (not tmpfs): the capabilities are xattrs.
        let base = lower.parent().unwrap();
        let dir = tempfile::tempdir_in(base).unwrap();
        for d in ["upper", "work", "root"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let p = |d: &str| dir.path().join(d).display().to_string();
        let out = Cmd::new("mount")
            .args(["-t", "overlay", "overlay", "-o"])
            .arg(format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                p("upper"),
                p("work")
            ))
            .arg(p("root"))
            .run();
        assert_eq!(out.code, 0, "mount overlay: {out:?}");
        Overlay { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Cmd::new("umount").arg(self.root()).run();
    }
}

fn chroot(root: &Path, args: &[&str]) -> Output {
    Cmd::new("chroot").arg(root).args(args).run()
}

/// The example playbook's host group with one chroot host; the role from the repository.
fn run_in_chroot(root: &Path, work: &Path, vars: &Value, extra: &[&str]) -> (Output, Value) {
    let inventory = work.join("inventory");
    std::fs::write(
        &inventory,
        format!(
            "[k8s_nodes]\nfresh-node ansible_connection=community.general.chroot ansible_host={} ansible_python_interpreter=/usr/bin/python3\n",
            root.display()
        ),
    )
    .unwrap();
    let file = work.join("vars.json");
    std::fs::write(&file, vars.to_string()).unwrap();
    let mut cmd = Cmd::new("ansible-playbook")
        .arg("-i")
        .arg(&inventory)
        .arg(workspace_root().join("tests/deploy/site.yml"))
        .arg("-e")
        .arg(format!("@{}", file.display()));
    for e in extra {
        cmd = cmd.arg("-e").arg(e);
    }
    let out = cmd
        .env("ANSIBLE_ROLES_PATH", workspace_root().join("ansible/roles"))
        .env("ANSIBLE_STDOUT_CALLBACK", "json")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .run();
    let doc: Value = serde_json::from_str(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out.code, 0,
        "ansible-playbook failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    (out, doc)
}

/// `k8s_storage_checks_agent: icinga2` on a fresh, minimal Debian (no python3-apt; the agent's
/// user `nagios` made as icinga2-common's postinst makes it): a real run installs the binaries
/// with their capabilities and the CheckCommands where the stock icinga2.conf includes them, and
/// no NRPE at all (no package, no nrpe.d, no TLS files, no restart); the cluster-wide checks
/// because the host is named; the textfile timer writes into the suite's own directory while
/// node_exporter's `/var/lib/prometheus/node-exporter` keeps its owner, group, mode and files.
/// A second run changes nothing.
#[test]
fn icinga2_agent_node_gets_no_nrpe_and_node_exporters_directory_is_untouched() {
    let t = "icinga2_agent_node_gets_no_nrpe_and_node_exporters_directory_is_untouched";
    if !need_root(t)
        || !need_tool(t, "ansible-playbook")
        || !need_tool(t, "debootstrap")
        || !need_tool(t, "chroot")
    {
        return;
    }
    let overlay = Overlay::new(&fresh_host_rootfs());
    let root = overlay.root();
    // The Icinga 2 agent's user, as icinga2-common makes it (the agent itself is set up by
    // icinga2 node wizard, not by this role).
    for args in [
        &["groupadd", "--system", "nagios"][..],
        &[
            "useradd",
            "--system",
            "--gid",
            "nagios",
            "--home-dir",
            "/var/lib/nagios",
            "--shell",
            "/usr/sbin/nologin",
            "nagios",
        ][..],
    ] {
        let out = chroot(&root, args);
        assert_eq!(out.code, 0, "{out:?}");
    }
    // node_exporter's own textfile directory, as prometheus-node-exporter ships it, with a file
    // of another collector.
    let ne = root.join("var/lib/prometheus/node-exporter");
    std::fs::create_dir_all(&ne).unwrap();
    std::fs::set_permissions(&ne, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ne.join("apt.prom"), "apt_upgrades_pending 0\n").unwrap();
    let ne_before = std::fs::metadata(&ne).unwrap();
    assert!(!root.join("usr/lib/python3/dist-packages/apt").exists());

    let work = tempfile::tempdir().unwrap();
    let vars = json!({
        "k8s_storage_checks_agent": "icinga2",
        "k8s_storage_checks_src_dir": bin_dir(),
        "k8s_storage_checks_cluster_checks_on": ["fresh-node"],
        "k8s_storage_checks_textfile_enabled": true,
        "k8s_storage_checks_textfile_start_timer": false,
        // No init system in the chroot: the handler is notified, and skipped.
        "k8s_storage_checks_icinga2_restart": false,
        "k8s_storage_checks_iscsi_manage": true,
    });
    // The iSCSI management switched off on the command line, as a string.
    let extra = ["k8s_storage_checks_iscsi_manage=false"];
    let (_, doc) = run_in_chroot(&root, work.path(), &vars, &extra);
    let s = &doc["stats"]["fresh-node"];
    assert_eq!(s["failures"], 0, "{s}");
    assert!(s["changed"].as_u64().unwrap_or(0) > 0, "{s}");
    let changed = changed_tasks_of(&doc, "fresh-node");
    assert!(
        changed
            .iter()
            .any(|n| n.ends_with("Install the CheckCommands for the Icinga 2 agent")),
        "{changed:?}"
    );

    // No NRPE: no package, no configuration, no TLS material.
    let dpkg = chroot(&root, &["dpkg-query", "-W", "nagios-nrpe-server"]);
    assert_ne!(dpkg.code, 0, "NRPE got installed: {dpkg:?}");
    for p in ["etc/nagios", "usr/sbin/nrpe"] {
        assert!(
            !root.join(p).exists(),
            "{p} exists on an Icinga 2 agent node"
        );
    }
    let tasks: Vec<String> = doc["plays"][0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            !t["hosts"]["fresh-node"]["skipped"]
                .as_bool()
                .unwrap_or(false)
        })
        .filter_map(|t| t["task"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        !tasks
            .iter()
            .any(|n| n.contains("NRPE") && !n.contains("Restart") && !n.contains("arg spec")),
        "NRPE tasks ran: {tasks:?}"
    );
    // The CheckCommands, ITL style, identical to the shipped file.
    let commands = root.join("usr/share/icinga2/include/plugins-contrib.d/k8s-storage-checks.conf");
    assert_eq!(
        std::fs::read(&commands).unwrap(),
        std::fs::read(workspace_root().join("icinga2/k8s-storage-checks.conf")).unwrap()
    );
    // The binaries, the privileged ones only for root and the agent's group, with capabilities.
    let plugins = root.join("usr/lib/nagios/plugins");
    for c in [
        "check_ro_pvc_mounts",
        "check_kubelet_nested_ops",
        "check_jiva_rep_crashloop",
        "check_watch_cache",
        "check_stuck_terminating",
    ] {
        assert!(plugins.join(c).exists(), "{c} not installed");
    }
    let caps = chroot(
        &root,
        &[
            "getcap",
            "/usr/lib/nagios/plugins/check_storage_kernel_errors",
        ],
    );
    assert!(caps.stdout.contains("cap_syslog"), "{caps:?}");
    let m = std::fs::metadata(plugins.join("check_ro_pvc_mounts")).unwrap();
    assert_eq!(m.permissions().mode() & 0o7777, 0o750);
    // -e k8s_storage_checks_iscsi_manage=false: iscsid.conf left alone (there is none, and the
    // role did not stop for it), and the textfile wrapper's command lines without the timeout.
    let wrapper =
        std::fs::read_to_string(root.join("usr/local/sbin/k8s-storage-checks-textfile")).unwrap();
    assert!(!wrapper.contains("--min-recovery-timeout"), "{wrapper}");
    assert!(
        wrapper.contains("run check_stuck_terminating_all_nodes /usr/lib/nagios/plugins/check_stuck_terminating ")
            && wrapper.contains("run check_watch_cache "),
        "the cluster host's commands are missing: {wrapper}"
    );
    assert!(
        wrapper.contains("/var/lib/prometheus/node-exporter-k8s-storage-checks"),
        "{wrapper}"
    );
    // Our own textfile directory; node_exporter's untouched.
    let ours = std::fs::metadata(root.join("var/lib/prometheus/node-exporter-k8s-storage-checks"))
        .unwrap();
    assert_eq!(ours.permissions().mode() & 0o7777, 0o755);
    let nagios_uid: u32 = std::fs::read_to_string(root.join("etc/passwd"))
        .unwrap()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f[0] == "nagios").then(|| f[2].parse().unwrap())
        })
        .unwrap();
    assert_eq!(ours.uid(), nagios_uid);
    let ne_after = std::fs::metadata(&ne).unwrap();
    assert_eq!(
        (ne_after.mode(), ne_after.uid(), ne_after.gid()),
        (ne_before.mode(), ne_before.uid(), ne_before.gid()),
        "node_exporter's directory changed"
    );
    let files: Vec<String> = std::fs::read_dir(&ne)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files, vec!["apt.prom".to_string()]);
    // Idempotent.
    let (_, doc) = run_in_chroot(&root, work.path(), &vars, &extra);
    assert_eq!(
        doc["stats"]["fresh-node"]["changed"],
        0,
        "second run changed: {:?}",
        changed_tasks_of(&doc, "fresh-node")
    );
}

/// node_exporter reads the suite's own directory next to its own through the glob the README
/// documents (`--collector.textfile.directory=/var/lib/prometheus/node-exporter*`, Debian's
/// node_exporter 1.5): the real daemon on a loopback port serves both directories' metrics.
#[test]
fn node_exporter_reads_its_own_and_the_suites_textfile_directory_through_the_glob() {
    let t = "node_exporter_reads_its_own_and_the_suites_textfile_directory_through_the_glob";
    let ne = "prometheus-node-exporter";
    if !need_tool(t, ne) || !need_tool(t, "curl") {
        return;
    }
    let readme = std::fs::read_to_string(role().join("README.md")).unwrap();
    let flag = "--collector.textfile.directory=/var/lib/prometheus/node-exporter*";
    assert!(
        readme.contains(flag),
        "the README no longer documents {flag}"
    );
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("var/lib/prometheus");
    for (d, m) in [
        ("node-exporter", "apt_upgrades_pending 0\n"),
        (
            "node-exporter-k8s-storage-checks",
            "k8s_storage_check_status{check=\"ro_pvc_mounts\"} 0\n",
        ),
        ("metrics2", "not_a_textfile_dir 1\n"),
    ] {
        std::fs::create_dir_all(base.join(d)).unwrap();
        std::fs::write(base.join(d).join("x.prom"), m).unwrap();
    }
    let port = e2e::engines::free_port();
    let mut cmd = std::process::Command::new(ne);
    cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(["--collector.disable-defaults", "--collector.textfile"])
        .arg(format!(
            "--collector.textfile.directory={}/node-exporter*",
            base.display()
        ));
    let mut daemon = e2e::engines::Daemon::start(ne, cmd, &work.path().join("ne.log"));
    let mut body = String::new();
    e2e::engines::wait_for(
        "node_exporter to answer",
        std::time::Duration::from_secs(20),
        || {
            daemon.assert_running();
            let out = Cmd::new("curl")
                .args(["-sf", "--max-time", "2"])
                .arg(format!("http://127.0.0.1:{port}/metrics"))
                .run();
            body = out.stdout;
            out.code == 0
        },
        String::new,
    );
    assert!(body.contains("\napt_upgrades_pending 0\n"), "{body}");
    assert!(
        body.contains("\nk8s_storage_check_status{check=\"ro_pvc_mounts\"} 0\n"),
        "{body}"
    );
    assert!(!body.contains("not_a_textfile_dir"), "{body}");
    assert!(body.contains("node_textfile_scrape_error 0"), "{body}");
}
