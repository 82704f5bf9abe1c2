//! Issue 27, "Never lose an alert", the API side: findings 3 (pods memory), 5 (secrets), 6 (unsafe
//! TLS, node confirmation) and 7 (kubeconfig `tls-server-name`, `proxy-url`). Each test is named
//! after its finding and failed before the fix.
//!
//! The loopback HTTPS server (`e2e::apiserver`) stands in for the faults a real kube-apiserver
//! will not produce on demand (a responder answering every path with the same list, a server
//! echoing the credentials it got, a list that pages forever); a real `tinyproxy` on loopback is
//! the proxy.

use e2e::apiserver::fixtures::scheduled_no_status;
use e2e::apiserver::{ApiServer, KubeAuth, KubeCa, Request, Response};
use e2e::{Cmd, Output};
use serde_json::json;
use std::sync::Arc;

const NODE: &str = "worker-04";

/// The API checks: (binary, service name, arguments that make it ask the API about NODE).
const API_CHECKS: &[(&str, &str, &[&str])] = &[
    (
        "check_stuck_scheduled",
        "STUCK_SCHEDULED",
        &["--node", NODE],
    ),
    (
        "check_stuck_terminating",
        "STUCK_TERMINATING",
        &["--node", NODE],
    ),
    ("check_jiva_rep_crashloop", "JIVA_REP_CRASHLOOP", &[]),
];

fn check(bin: &str, args: &[&str]) -> Output {
    Cmd::check(bin).without_host_credentials().args(args).run()
}

fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

/// Finding 6: `insecure-skip-tls-verify: true` sent the bearer token to any server and said
/// nothing below -vv. Now it is refused (UNKNOWN saying why and what to pass) and nothing is
/// sent; with `--allow-insecure-tls` it is honoured as kubectl does.
#[test]
fn finding_6_insecure_skip_tls_verify_needs_allow_insecure_tls() {
    let srv = ApiServer::start();
    srv.set(
        "pods",
        vec![scheduled_no_status("media", "stuck-0", NODE, 3600)],
    );
    let kc = srv.kubeconfig(KubeCa::Insecure, KubeAuth::Token("INSECURE-TOKEN".into()));
    for &(bin, name, extra) in API_CHECKS {
        let mut args = vec!["--kubeconfig", s(&kc)];
        args.extend_from_slice(extra);
        let before = srv.requests().len();
        let out = check(bin, &args);
        out.assert_status(name, 3);
        for want in [
            "insecure-skip-tls-verify: true",
            "refused",
            "--allow-insecure-tls",
        ] {
            assert!(
                out.first_line().contains(want),
                "{bin}: {want:?} in {out:?}"
            );
        }
        assert_eq!(
            srv.requests().len(),
            before,
            "{bin}: a request reached the server although the kubeconfig was refused"
        );
        // Allowed explicitly: honoured, and -vv says verification is off.
        args.extend(["--allow-insecure-tls", "-vv"]);
        let out = check(bin, &args);
        assert!(!out.first_line().contains("refused"), "{bin}: {out:?}");
        assert!(
            srv.requests().len() > before,
            "{bin}: nothing asked: {out:?}"
        );
        assert!(
            out.stdout.contains("TLS verification OFF"),
            "{bin}: {out:?}"
        );
    }
}

/// Finding 6: the node-existence confirmation accepted any 2xx JSON: a responder that answers a
/// PodList for every path made a check with no pod on its node answer OK. Now the answer must be
/// the Node of that name.
#[test]
fn finding_6_node_confirmation_needs_the_node_object() {
    let srv = ApiServer::start();
    let pod_list: Arc<dyn Fn(&Request, &e2e::apiserver::Ctx) -> Response + Send + Sync> = Arc::new(
        |_r: &Request, _c: &e2e::apiserver::Ctx| {
            Response::json(
                200,
                &json!({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}),
            )
        },
    );
    for p in ["/api/v1/pods", "/api/v1/nodes", "/api/v1/nodes/{name}"] {
        srv.route(p, pod_list.clone());
    }
    let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("tok".into()));
    for (bin, name) in [
        ("check_stuck_scheduled", "STUCK_SCHEDULED"),
        ("check_stuck_terminating", "STUCK_TERMINATING"),
    ] {
        let out = check(bin, &["--kubeconfig", s(&kc), "--node", NODE]);
        out.assert_status(name, 3);
        assert!(
            out.first_line().contains(&format!(
                "answered GET /api/v1/nodes/{NODE} with kind PodList instead of the Node '{NODE}'"
            )),
            "{bin}: {out:?}"
        );
    }
    // A real Node object still proves the node: no pod there is OK.
    let srv = ApiServer::start();
    srv.set(
        "nodes",
        vec![json!({"kind":"Node","apiVersion":"v1","metadata":{"name":NODE}})],
    );
    let kc = srv.kubeconfig(KubeCa::Inline, KubeAuth::Token("tok".into()));
    let out = check(
        "check_stuck_scheduled",
        &["--kubeconfig", s(&kc), "--node", NODE],
    );
    out.assert_status("STUCK_SCHEDULED", 0);
}

/// A real `tinyproxy` (Debian's) on a free loopback port, run from a config in its own temp dir
/// (not the system service), logging every CONNECT. `hosts`: an /etc/hosts of its own (bound
/// over /etc/hosts in a private mount namespace), so that a name resolves for the proxy only.
struct Tinyproxy {
    child: std::process::Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Tinyproxy {
    fn start(basic_auth: Option<(&str, &str)>, hosts: &[(&str, &str)]) -> Tinyproxy {
        let dir = tempfile::tempdir().unwrap();
        let port = e2e::apiserver::unused_addr().port();
        let d = dir.path();
        let mut conf = format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nLogFile \"{}\"\nLogLevel Info\nPidFile \"{}\"\nMaxClients 20\nAllow 127.0.0.1\n",
            d.join("log").display(),
            d.join("pid").display()
        );
        if let Some((u, p)) = basic_auth {
            conf.push_str(&format!("BasicAuth {u} {p}\n"));
        }
        std::fs::write(d.join("conf"), conf).unwrap();
        let mut etc_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        for (ip, name) in hosts {
            etc_hosts.push_str(&format!("\n{ip} {name}\n"));
        }
        std::fs::write(d.join("hosts"), etc_hosts).unwrap();
        let child = std::process::Command::new("unshare")
            .args([
                "-m",
                "sh",
                "-c",
                "mount --bind \"$1\" /etc/hosts && exec tinyproxy -d -c \"$2\"",
                "sh",
            ])
            .arg(d.join("hosts"))
            .arg(d.join("conf"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start tinyproxy");
        let p = Tinyproxy { child, dir, port };
        // Ready when it says so in its log.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !p.log().contains("Accepting connections") {
            assert!(
                std::time::Instant::now() < until,
                "tinyproxy did not start: {}",
                p.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Tinyproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn need_proxy(test: &str) -> bool {
    e2e::need_root(test) && e2e::need_tool(test, "tinyproxy")
}

/// A kubeconfig for `server` with the loopback server's CA, a token, and extra cluster fields.
fn kubeconfig_with(
    srv: &ApiServer,
    server: &str,
    token: &str,
    cluster_extra: &str,
) -> std::path::PathBuf {
    let base = srv.kubeconfig_for(server, KubeCa::Inline, KubeAuth::Token(token.into()));
    let text = std::fs::read_to_string(&base).unwrap();
    let text = text.replacen(
        &format!("    server: {server}\n"),
        &format!("    server: {server}\n{cluster_extra}"),
        1,
    );
    std::fs::write(&base, text).unwrap();
    base
}

/// Finding 7: `proxy-url` was ignored (the proxy bypassed). The API server is reachable only
/// through the proxy here: its name resolves for tinyproxy alone. Without proxy-url the name does
/// not resolve; with it the request goes through the proxy (its log shows the CONNECT), with the
/// proxy's credentials from the URL (never shown); a wrong password is refused by the proxy and
/// said so; a SOCKS proxy is refused with a clear UNKNOWN.
#[test]
fn finding_7_proxy_url_goes_through_a_real_proxy() {
    if !need_proxy("finding_7_proxy_url_goes_through_a_real_proxy") {
        return;
    }
    const HOST: &str = "kube-api.proxied.test";
    let srv = ApiServer::start();
    srv.set(
        "pods",
        vec![scheduled_no_status("media", "stuck-0", NODE, 3600)],
    );
    let proxy = Tinyproxy::start(Some(("pxuser", "PXSECRET")), &[("127.0.0.1", HOST)]);
    let server = format!("https://{HOST}:{}", srv.addr().port());
    // The certificate is for 127.0.0.1/localhost: the name verified is tls-server-name's.
    let sni = "    tls-server-name: localhost\n";
    let run = |kc: &std::path::Path| {
        check(
            "check_stuck_scheduled",
            &["--kubeconfig", s(kc), "--node", NODE, "-vv"],
        )
    };
    // Without the proxy: unreachable.
    let out = run(&kubeconfig_with(&srv, &server, "tok", sni));
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line().contains("cannot resolve API server host"),
        "{out:?}"
    );
    // Through the proxy, with its credentials.
    let via = format!(
        "{sni}    proxy-url: http://pxuser:PXSECRET@127.0.0.1:{}\n",
        proxy.port
    );
    let before = srv.requests().len();
    let out = run(&kubeconfig_with(&srv, &server, "tok", &via));
    out.assert_status("STUCK_SCHEDULED", 2);
    assert!(out.stdout.contains("media/stuck-0"), "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("through proxy http://…@127.0.0.1:{}", proxy.port)),
        "-vv names the proxy, redacted: {out:?}"
    );
    assert!(!out.stdout.contains("PXSECRET"), "{out:?}");
    assert!(srv.requests().len() > before);
    let log = proxy.log();
    assert!(
        log.contains(&format!("CONNECT {HOST}:{}", srv.addr().port())),
        "tinyproxy's log shows no CONNECT: {log}"
    );
    // The TLS name sent through the tunnel is tls-server-name's.
    assert!(
        srv.requests()[before..]
            .iter()
            .all(|r| r.sni.as_deref() == Some("localhost")),
        "{:?}",
        srv.requests()[before..]
            .iter()
            .map(|r| &r.sni)
            .collect::<Vec<_>>()
    );
    // A wrong proxy password: the proxy refuses the tunnel, and the message says so.
    let bad = format!(
        "{sni}    proxy-url: http://pxuser:WRONGSECRET@127.0.0.1:{}\n",
        proxy.port
    );
    let out = run(&kubeconfig_with(&srv, &server, "tok", &bad));
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line()
            .contains(&format!("proxy http://…@127.0.0.1:{}", proxy.port))
            && out.first_line().contains("407"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("WRONGSECRET"), "{out:?}");
    // Nothing listens: the proxy is named, not the API server.
    let gone = e2e::apiserver::unused_addr();
    let out = run(&kubeconfig_with(
        &srv,
        &server,
        "tok",
        &format!("    proxy-url: http://u:PXSECRET@{gone}\n"),
    ));
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line()
            .contains(&format!("cannot connect to proxy http://…@{gone}")),
        "{out:?}"
    );
    // SOCKS: refused, saying what is supported.
    let out = run(&kubeconfig_with(
        &srv,
        &server,
        "tok",
        "    proxy-url: socks5://u:PXSECRET@127.0.0.1:1080\n",
    ));
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line()
            .contains("is a SOCKS proxy, which the checks do not support")
            && out.first_line().contains("HTTP CONNECT proxy"),
        "{out:?}"
    );
    assert!(!out.stdout.contains("PXSECRET"), "{out:?}");
}

/// Finding 7: `tls-server-name` was ignored: a server reached by IP whose certificate names it
/// differently failed with an error that did not name the field. The real kube-apiserver's
/// certificate carries DNS:kubernetes; reached at 127.0.0.1 with tls-server-name: kubernetes it
/// verifies; with a name the certificate lacks, the error names tls-server-name.
#[test]
fn finding_7_tls_server_name_on_the_real_apiserver() {
    let cp = e2e::control_plane::ControlPlane::shared();
    let ns = cp.namespace("tlsname");
    let node = e2e::control_plane::ControlPlane::unique("tlsname-node");
    cp.node(&node);
    let admin = std::fs::read_to_string(cp.kubeconfig(e2e::control_plane::User::Admin)).unwrap();
    let server = cp.server();
    assert!(server.starts_with("https://127.0.0.1:"), "{server}");
    let dir = tempfile::tempdir().unwrap();
    let with = |name: &str| {
        let p = dir.path().join(format!("kc-{name}"));
        std::fs::write(
            &p,
            admin.replacen(
                &format!("server: {server}"),
                &format!("server: {server}\n    tls-server-name: {name}"),
                1,
            ),
        )
        .unwrap();
        p
    };
    let out = check(
        "check_stuck_scheduled",
        &[
            "--kubeconfig",
            s(&with("kubernetes")),
            "--node",
            &node,
            "--namespace",
            &ns,
            "-vv",
        ],
    );
    out.assert_status("STUCK_SCHEDULED", 0);
    assert!(out.stdout.contains("tls-server-name kubernetes"), "{out:?}");
    let out = check(
        "check_stuck_scheduled",
        &[
            "--kubeconfig",
            s(&with("not-the-apiserver.example")),
            "--node",
            &node,
        ],
    );
    out.assert_status("STUCK_SCHEDULED", 3);
    assert!(
        out.first_line().contains(
            "certificate is not valid for the name not-the-apiserver.example (the kubeconfig's tls-server-name"
        ),
        "{out:?}"
    );
}
