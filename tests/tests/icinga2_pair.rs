//! Icinga 2 as it is deployed (issue 29): the shipped files installed the two ways at once — the
//! CheckCommands ITL style where the .deb puts them (`plugins-contrib.d`, included by the stock
//! `include <plugins-contrib>`), the services, example hosts and notifications in the config
//! master's `zones.d` — validated by the real `icinga2 daemon -C`; and a real master + agent pair:
//! two `icinga2` daemons in their own network namespaces joined by a veth pair, with certificates
//! made the documented manual way (`icinga2 pki new-ca`, `new-cert`, `sign-csr`), the master
//! scheduling the shipped apply rule's services and the agent executing them
//! (`command_endpoint`). The master's PluginDir does not exist, so only the agent can run a check;
//! every result must say it came from the agent (`check_source`). States are polled through the
//! master's REST API, from inside its namespace, with a deadline.

use e2e::apiserver::fixtures::{self, Rep};
use e2e::engines::{wait_for, Daemon};
use e2e::{need_root, need_tool, workspace_root, Cmd};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The CheckCommands, services, example hosts, notifications and zones as shipped.
fn shipped(f: &str) -> PathBuf {
    workspace_root().join("icinga2").join(f)
}

/// `-D` constants that keep a daemon's (or a CLI command's) paths under `dir`, as root.
fn defines(dir: &Path) -> Vec<String> {
    let d = dir.display();
    [
        format!("Configuration.DataDir={d}/data"),
        format!("Configuration.LogDir={d}/log"),
        format!("Configuration.CacheDir={d}/cache"),
        format!("Configuration.SpoolDir={d}/spool"),
        format!("Configuration.InitRunDir={d}/run"),
        format!("Configuration.PidPath={d}/run/icinga2.pid"),
        format!("Configuration.StatePath={d}/data/icinga2.state"),
        format!("Configuration.ObjectsPath={d}/cache/icinga2.debug"),
        format!("Configuration.VarsPath={d}/cache/icinga2.vars"),
        format!("Configuration.ZonesDir={d}/etc/zones.d"),
        "Configuration.RunAsUser=root".to_string(),
        "Configuration.RunAsGroup=root".to_string(),
    ]
    .into_iter()
    .flat_map(|x| ["-D".to_string(), x])
    .collect()
}

fn mkdirs(dir: &Path) {
    for sub in ["data/certs", "log", "cache", "spool", "run", "etc/zones.d"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
}

/// An Icinga 2 include directory like /usr/share/icinga2/include with our CheckCommands in
/// `plugins-contrib.d`, where the .deb installs them.
fn itl_with_our_commands(dir: &Path) -> PathBuf {
    let sys = Path::new("/usr/share/icinga2/include");
    let inc = dir.join("include");
    std::fs::create_dir_all(inc.join("plugins-contrib.d")).unwrap();
    for e in std::fs::read_dir(sys).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "plugins-contrib.d" {
            std::os::unix::fs::symlink(e.path(), inc.join(e.file_name())).unwrap();
        }
    }
    for e in std::fs::read_dir(sys.join("plugins-contrib.d")).unwrap() {
        let e = e.unwrap();
        std::os::unix::fs::symlink(e.path(), inc.join("plugins-contrib.d").join(e.file_name()))
            .unwrap();
    }
    std::fs::copy(
        shipped("k8s-storage-checks.conf"),
        inc.join("plugins-contrib.d/k8s-storage-checks.conf"),
    )
    .unwrap();
    inc
}

/// `icinga2 daemon -C` of a config master laid out as docs/deploy/icinga2.md says: the stock
/// includes (with our CheckCommands in plugins-contrib.d), zones.conf.example, and zones.d with
/// the services in global-templates, the example hosts in the satellite's zone and the
/// notifications in master. `tweak` may change the layout before validating.
fn validate_master_layout(tweak: impl FnOnce(&Path)) -> (i32, String) {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    mkdirs(dir);
    let inc = itl_with_our_commands(dir);
    let zones = dir.join("etc/zones.d");
    for (zone, src, name) in [
        (
            "global-templates",
            "k8s-storage-services.conf",
            "k8s-storage-services.conf",
        ),
        (
            "prod",
            "k8s-storage-hosts.conf.example",
            "k8s-storage-hosts.conf",
        ),
        (
            "master",
            "k8s-storage-notifications.conf",
            "k8s-storage-notifications.conf",
        ),
    ] {
        std::fs::create_dir_all(zones.join(zone)).unwrap();
        std::fs::copy(shipped(src), zones.join(zone).join(name)).unwrap();
    }
    // The stock icinga2.conf's includes and constants (Debian's constants.conf).
    std::fs::write(
        dir.join("etc/icinga2.conf"),
        format!(
            r#"const PluginDir = "/usr/lib/nagios/plugins"
const ManubulonPluginDir = "/usr/lib/nagios/plugins"
const PluginContribDir = "/usr/lib/nagios/plugins"
const NodeName = "icinga-master"
const ZoneName = "master"
include "{zones}"
include <itl>
include <plugins>
include <plugins-contrib>
include <manubulon>
include <windows-plugins>
include <nscp>
object NotificationComponent "notification" {{ }}
object User "oncall" {{ email = "oncall@your-company.tld"; groups = [ "k8s-storage-oncall" ] }}
"#,
            zones = shipped("zones.conf.example").display()
        ),
    )
    .unwrap();
    tweak(dir);
    let out = Cmd::new("icinga2")
        .args(["daemon", "-C", "-c"])
        .arg(dir.join("etc/icinga2.conf"))
        .args(defines(dir))
        .arg("-D")
        .arg(format!("Configuration.IncludeConfDir={}", inc.display()))
        .run();
    (out.code, format!("{}{}", out.stdout, out.stderr))
}

/// The shipped files installed both ways at once validate: no object defined twice, the
/// example hosts' services (nine on the node, four on the cluster) and their notifications.
/// The old way — the CheckCommands also copied into zones.d/global-templates — is refused as the
/// issue saw it, and the example host without its zone is refused too.
#[test]
fn icinga2_shipped_files_validate_installed_both_ways() {
    let t = "icinga2_shipped_files_validate_installed_both_ways";
    if !need_tool(t, "icinga2") {
        return;
    }
    let (code, all) = validate_master_layout(|_| {});
    assert_eq!(code, 0, "icinga2 daemon -C:\n{all}");
    for want in [
        "Instantiated 13 Services",
        "Instantiated 13 Notifications",
        "Instantiated 2 Hosts",
    ] {
        assert!(all.contains(want), "{want}:\n{all}");
    }
    assert!(!all.contains("warning/"), "{all}");
    // The services file alone holds no CheckCommand, the commands file no service or host.
    let services = std::fs::read_to_string(shipped("k8s-storage-services.conf")).unwrap();
    let commands = std::fs::read_to_string(shipped("k8s-storage-checks.conf")).unwrap();
    assert!(!services.contains("object CheckCommand"));
    assert!(!commands.contains("apply Service") && !commands.contains("object Host"));

    // The README's old second copy of the CheckCommands collides with the package's.
    let (code, all) = validate_master_layout(|dir| {
        std::fs::copy(
            shipped("k8s-storage-checks.conf"),
            dir.join("etc/zones.d/global-templates/k8s-storage-checks.conf"),
        )
        .unwrap();
    });
    assert_ne!(
        code, 0,
        "a second copy of the CheckCommands validated:\n{all}"
    );
    assert!(
        all.contains("Object 'k8s-storage-checks-common' of type 'CheckCommand' re-defined"),
        "{all}"
    );
    // The example host without its zone, outside zones.d (conf.d): its command_endpoint services
    // are refused.
    let (code, all) = validate_master_layout(|dir| {
        std::fs::remove_file(dir.join("etc/zones.d/prod/k8s-storage-hosts.conf")).unwrap();
        let hosts = std::fs::read_to_string(shipped("k8s-storage-hosts.conf.example")).unwrap();
        assert!(hosts.contains("\tzone = \"prod\"\n"));
        let no_zone = dir.join("etc/hosts-without-zone.conf");
        std::fs::write(&no_zone, hosts.replace("\tzone = \"prod\"\n", "")).unwrap();
        let conf = dir.join("etc/icinga2.conf");
        let text = std::fs::read_to_string(&conf).unwrap();
        std::fs::write(&conf, format!("{text}include \"{}\"\n", no_zone.display())).unwrap();
    });
    assert_ne!(code, 0, "the hosts validated without a zone:\n{all}");
    assert!(all.contains("requires a zone"), "{all}");
}

/// Two network namespaces joined by a veth pair; removed when dropped (after the daemons in
/// them, which are declared later and so dropped first).
struct NetPair {
    master: String,
    agent: String,
}

const MASTER_IP: &str = "10.231.7.1";
const AGENT_IP: &str = "10.231.7.2";
const PORT: u16 = 5665;

impl NetPair {
    fn new() -> NetPair {
        let id = std::process::id();
        let pair = NetPair {
            master: format!("k8sc{id}m"),
            agent: format!("k8sc{id}a"),
        };
        let ip = |args: &[&str]| {
            let out = Cmd::new("ip").args(args).run();
            assert_eq!(out.code, 0, "ip {args:?}: {out:?}");
        };
        ip(&["netns", "add", &pair.master]);
        ip(&["netns", "add", &pair.agent]);
        ip(&[
            "link",
            "add",
            &pair.master,
            "netns",
            &pair.master,
            "type",
            "veth",
            "peer",
            "name",
            &pair.agent,
            "netns",
            &pair.agent,
        ]);
        for (ns, addr) in [(&pair.master, MASTER_IP), (&pair.agent, AGENT_IP)] {
            ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", ns]);
            ip(&["-n", ns, "link", "set", ns, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        pair
    }

    fn exec(ns: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        c
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        for ns in [&self.master, &self.agent] {
            let _ = Cmd::new("ip").args(["netns", "del", ns]).run();
        }
    }
}

/// The node's and the agent's name (Endpoint, Zone, Host), as `icinga2 node setup` names them.
const AGENT: &str = "worker-04";
const CLUSTER: &str = "prod-cluster";
const API_USER: &str = "storage-monitor";
const API_PASSWORD: &str = "cGFpci10ZXN0LXB3";

/// `icinga2 pki …` with the master's paths (its CA is in `<master>/data/ca`).
fn pki(master: &Path, args: &[&str]) {
    let out = Cmd::new("icinga2")
        .arg("pki")
        .args(args)
        .args(defines(master))
        .run();
    assert_eq!(out.code, 0, "icinga2 pki {args:?}: {out:?}");
}

/// The documented manual certificate steps: a CA on the master, a key and CSR per endpoint
/// (CN = its name), signed by the master's CA; each node gets its certificate, key and ca.crt.
fn certificates(master: &Path, agent: &Path) {
    pki(master, &["new-ca"]);
    for (dir, cn) in [(master, "master"), (agent, AGENT)] {
        let certs = dir.join("data/certs");
        let p = |ext: &str| certs.join(format!("{cn}.{ext}")).display().to_string();
        pki(
            master,
            &[
                "new-cert",
                "--cn",
                cn,
                "--key",
                &p("key"),
                "--csr",
                &p("csr"),
            ],
        );
        pki(
            master,
            &["sign-csr", "--csr", &p("csr"), "--cert", &p("crt")],
        );
        std::fs::copy(master.join("data/ca/ca.crt"), certs.join("ca.crt")).unwrap();
    }
}

/// The master's view of every service: "host!service" → attrs, through its REST API from
/// inside its namespace; None while it does not answer.
fn services(pair: &NetPair, master: &Path) -> Option<BTreeMap<String, Value>> {
    let out = NetPair::exec(&pair.master)
        .args(["curl", "-sS", "--max-time", "5", "--cacert"])
        .arg(master.join("data/certs/ca.crt"))
        .arg("--resolve")
        .arg(format!("master:{PORT}:{MASTER_IP}"))
        .arg("-u")
        .arg(format!("{API_USER}:{API_PASSWORD}"))
        .args(["-H", "Accept: application/json"])
        .arg(format!(
            "https://master:{PORT}/v1/objects/services?attrs=state&attrs=last_check_result"
        ))
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(
        v["results"]
            .as_array()?
            .iter()
            .filter_map(|r| Some((r["name"].as_str()?.to_string(), r["attrs"].clone())))
            .collect(),
    )
}

/// (state, check_source, output) of a checked service.
fn result(s: &BTreeMap<String, Value>, name: &str) -> Option<(u8, String, String)> {
    let a = s.get(name)?;
    let r = &a["last_check_result"];
    if r.is_null() {
        return None;
    }
    Some((
        a["state"].as_f64()? as u8,
        r["check_source"].as_str()?.to_string(),
        r["output"].as_str()?.to_string(),
    ))
}

/// A real master and agent: the master schedules the shipped apply rule's services (the node's
/// kubelet log check, and the cluster host's check_jiva_rep_crashloop and check_stuck_terminating
/// --all-nodes, whose `vars.agent_endpoint` is the node's agent) and the agent executes them; a
/// kubelet volume failure appended to the node's log turns the node's service CRITICAL, again
/// executed by the agent.
#[test]
fn icinga2_master_and_agent_in_network_namespaces() {
    let t = "icinga2_master_and_agent_in_network_namespaces";
    if !need_root(t) || !need_tool(t, "icinga2") || !need_tool(t, "ip") || !need_tool(t, "curl") {
        return;
    }
    let started = Instant::now();
    let work = tempfile::tempdir().unwrap();
    let master = work.path().join("master");
    let agent = work.path().join("agent");
    mkdirs(&master);
    mkdirs(&agent);
    certificates(&master, &agent);

    // The agent's node: the suite's binaries in its PluginDir, a kubelet log, the cluster's pods.
    let plugins = agent.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    for c in [
        "check_kubelet_nested_ops",
        "check_jiva_rep_crashloop",
        "check_stuck_terminating",
    ] {
        e2e::copy_executable(&e2e::bin(c), &plugins.join(c));
    }
    let now = e2e::logs::now_secs();
    let kubelet_log = agent.join("kubelet.log");
    let healthy: String = (0..3)
        .map(|i| {
            json!({"ts": (now - 300 + i) as f64 * 1000.0, "caller": "kubelet/kubelet.go:2468",
                   "msg": "SyncLoop (PLEG): event for pod", "v": 2})
            .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&kubelet_log, healthy).unwrap();
    let state_dir = agent.join("state");
    std::fs::create_dir_all(&state_dir).unwrap();
    let pods = agent.join("pods.json");
    let pv = "pvc-0716a7ba-9e8d-4c7b-a6f5-e4d3c2b1a090";
    std::fs::write(
        &pods,
        json!({"apiVersion": "v1", "kind": "List", "items": [
            fixtures::jiva_replica(pv, 0, AGENT, 86400, Rep::Healthy),
            fixtures::jiva_replica(pv, 1, "worker-05", 86400, Rep::Healthy),
        ]})
        .to_string(),
    )
    .unwrap();

    // The shipped services with the intervals scaled from minutes to seconds.
    let services_conf = std::fs::read_to_string(shipped("k8s-storage-services.conf"))
        .unwrap()
        .replace("check_interval = 5m", "check_interval = 2s")
        .replace("retry_interval = 1m", "retry_interval = 1s");
    assert!(services_conf.contains("check_interval = 2s"));
    std::fs::write(master.join("k8s-storage-services.conf"), services_conf).unwrap();
    let commands = shipped("k8s-storage-checks.conf");
    let zones = |me: &str| {
        format!(
            r#"object Endpoint "master" {{ {host} }}
object Zone "master" {{ endpoints = [ "master" ] }}
object Endpoint "{AGENT}" {{ }}
object Zone "{AGENT}" {{ endpoints = [ "{AGENT}" ]; parent = "master" }}
object ApiListener "api" {{
  bind_host = "{ip}"
  bind_port = {PORT}
  accept_config = false
  accept_commands = {accept}
}}
object FileLogger "main-log" {{ path = "{{dir}}/log/icinga2.log"; severity = "information" }}
"#,
            // The agent connects to its parent.
            host = if me == AGENT {
                format!("host = \"{MASTER_IP}\"; port = {PORT}")
            } else {
                String::new()
            },
            ip = if me == AGENT { AGENT_IP } else { MASTER_IP },
            accept = me == AGENT,
        )
    };
    let master_conf = format!(
        r#"/* The master has no plugins: only the agent can execute a check. */
const PluginDir = "{missing}"
const NodeName = "master"
const ZoneName = "master"
include <itl>
include <plugins>
include "{commands}"
include "{services}"
{zones}object CheckerComponent "checker" {{ }}
object ApiUser "{API_USER}" {{
  password = "{API_PASSWORD}"
  permissions = [ "objects/query/Host", "objects/query/Service" ]
}}
object Host "{AGENT}" {{
  check_command = "dummy"
  zone = "master"
  vars.agent_endpoint = name
  vars.k8s_storage_checks = [ "k8s_kubelet_nested_ops" ]
  vars.k8s_kubelet_nested_ops_log_file = [ "{log}" ]
  vars.k8s_kubelet_nested_ops_window = "30s"
  vars.k8s_kubelet_nested_ops_state_dir = "{state}"
}}
object Host "{CLUSTER}" {{
  check_command = "dummy"
  vars.dummy_state = 0
  zone = "master"
  vars.agent_endpoint = "{AGENT}"
  vars.k8s_storage_checks = [ "k8s_jiva_rep_crashloop", "k8s_stuck_terminating" ]
  vars.k8s_stuck_terminating_all_nodes = true
  vars.k8s_jiva_rep_crashloop_pods_json = "{pods}"
  vars.k8s_stuck_terminating_pods_json = "{pods}"
  vars.k8s_stuck_terminating_no_events = true
  vars.k8s_jiva_rep_crashloop_state_dir = "{state}"
  vars.k8s_stuck_terminating_state_dir = "{state}"
}}
"#,
        missing = master.join("no-plugins-here").display(),
        commands = commands.display(),
        services = master.join("k8s-storage-services.conf").display(),
        zones = zones("master").replace("{dir}", &master.display().to_string()),
        log = kubelet_log.display(),
        state = state_dir.display(),
        pods = pods.display(),
    );
    let agent_conf = format!(
        r#"const PluginDir = "{plugins}"
const NodeName = "{AGENT}"
const ZoneName = "{AGENT}"
include <itl>
include <plugins>
include "{commands}"
{zones}"#,
        plugins = plugins.display(),
        commands = commands.display(),
        zones = zones(AGENT).replace("{dir}", &agent.display().to_string()),
    );
    std::fs::write(master.join("icinga2.conf"), master_conf).unwrap();
    std::fs::write(agent.join("icinga2.conf"), agent_conf).unwrap();

    let pair = NetPair::new();
    let start = |ns: &str, dir: &Path, name: &str| {
        let mut cmd = NetPair::exec(ns);
        cmd.args(["icinga2", "daemon", "-c"])
            .arg(dir.join("icinga2.conf"))
            .args(defines(dir));
        Daemon::start(name, cmd, &dir.join("daemon.out"))
    };
    let mut agent_d = start(&pair.agent, &agent, "icinga2 agent");
    let mut master_d = start(&pair.master, &master, "icinga2 master");
    let context = |s: &Option<BTreeMap<String, Value>>| {
        let log = |d: &Path| std::fs::read_to_string(d.join("log/icinga2.log")).unwrap_or_default();
        format!(
            "services: {s:#?}\nmaster log:\n{}\nagent log:\n{}",
            log(&master),
            log(&agent)
        )
    };
    let limit = Duration::from_secs(60);
    let node_svc = format!("{AGENT}!k8s_kubelet_nested_ops");
    let cluster_svcs = [
        format!("{CLUSTER}!k8s_jiva_rep_crashloop"),
        format!("{CLUSTER}!k8s_stuck_terminating"),
    ];
    let mut last = None;
    wait_for(
        "every service OK, executed by the agent",
        limit,
        || {
            agent_d.assert_running();
            master_d.assert_running();
            last = services(&pair, &master);
            let Some(s) = &last else { return false };
            std::iter::once(&node_svc)
                .chain(cluster_svcs.iter())
                .all(|n| matches!(result(s, n), Some((0, src, _)) if src == AGENT))
        },
        || context(&services(&pair, &master)),
    );
    let s = last.clone().unwrap();
    assert_eq!(s.len(), 3, "{s:#?}");
    let (_, _, out) = result(&s, &cluster_svcs[1]).unwrap();
    assert!(
        out.contains("on all nodes"),
        "--all-nodes not passed: {out}"
    );

    // The worker-04 incident's kubelet loop, appended to the node's log.
    let mut text = String::new();
    let t = e2e::logs::now_secs();
    for k in [2, 1, 0] {
        let at = t - 122 * k;
        let msg = e2e::logs::nested_op_msg(
            at,
            "rbd.csi.ceph.com",
            pv,
            "",
            122_000,
            &e2e::logs::mount_refs_err("rbd.csi.ceph.com", pv, AGENT),
        );
        text.push_str(&e2e::logs::json_line(at, &msg));
        text.push('\n');
    }
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&kubelet_log)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }
    wait_for(
        "the node's service CRITICAL, executed by the agent",
        limit,
        || {
            last = services(&pair, &master);
            let Some(s) = &last else { return false };
            matches!(result(s, &node_svc), Some((2, src, _)) if src == AGENT)
        },
        || context(&services(&pair, &master)),
    );
    let (_, _, out) = result(last.as_ref().unwrap(), &node_svc).unwrap();
    assert!(
        out.starts_with("KUBELET_NESTED_OPS CRITICAL") && out.contains(pv),
        "{out}"
    );
    // The master never ran a check itself (it has no plugins: it would answer UNKNOWN).
    let master_log = std::fs::read_to_string(master.join("log/icinga2.log")).unwrap_or_default();
    assert!(!master_log.contains("no-plugins-here"), "{master_log}");
    println!("icinga2 master + agent test took {:?}", started.elapsed());
    drop(master_d);
    drop(agent_d);
    drop(pair);
}
