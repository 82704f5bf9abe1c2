//! The kustomize manifests of issue 28 (`deploy/base`, `deploy/overlays/<distro>`,
//! `deploy/components/*`): every overlay renders (`kubectl kustomize`, the control plane's own
//! kubectl), validates with `kubernetes-validate --strict` for Kubernetes 1.27 and the newest
//! release the tool knows, and is admitted by the real kube-apiserver with server-side dry run,
//! with and without the components: `apparmor-field` (the field, for 1.30 and later: no
//! deprecation warning then) and `monitors` (PodMonitor and ServiceMonitor, checked against the
//! Prometheus Operator's own CRDs from its Go module, applied to the real API server). The
//! cluster-wide Deployment runs its three checks as its own ServiceAccount on the real API server
//! without a refused request, and its pod meets Pod Security "restricted".

use e2e::apiserver::KubeCa;
use e2e::control_plane::{Auth, ControlPlane, User};
use e2e::{need_tool, workspace_root, Cmd};
use serde_json::Value;
use std::path::{Path, PathBuf};

const DISTROS: [(&str, &str); 6] = [
    ("kubeadm", "/var/lib/kubelet"),
    ("k3s", "/var/lib/kubelet"),
    ("rke2", "/var/lib/kubelet"),
    ("k0s", "/var/lib/k0s/kubelet"),
    ("microk8s", "/var/snap/microk8s/common/var/lib/kubelet"),
    ("talos", "/var/lib/kubelet"),
];

const IMAGE: &str = "ghcr.io/k8s-storage-checks/k8s-storage-checks:";

/// The Prometheus Operator release whose CRDs the monitors are checked against.
const PROMETHEUS_OPERATOR: &str = "v0.85.0";

/// A copy of deploy/ with, per distro, an overlay `<distro>-all` that adds both components
/// (kustomize takes relative paths only, and the repository is not written to).
fn deploy_copy() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let out = Cmd::new("cp")
        .arg("-r")
        .arg(workspace_root().join("deploy"))
        .arg(d.path())
        .run();
    assert_eq!(out.code, 0, "{out:?}");
    for (distro, _) in DISTROS {
        let o = d.path().join(format!("deploy/overlays/{distro}-all"));
        std::fs::create_dir_all(&o).unwrap();
        std::fs::write(
            o.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../{distro}\ncomponents:\n  - ../../components/apparmor-field\n  - ../../components/monitors\n"
            ),
        )
        .unwrap();
    }
    d
}

fn render(cp: &ControlPlane, dir: &Path) -> String {
    let out = cp.kubectl_as(User::Admin, &["kustomize", dir.to_str().unwrap()], None);
    assert_eq!(out.code, 0, "kubectl kustomize {}: {out:?}", dir.display());
    out.stdout
}

fn docs(yaml: &str) -> Vec<Value> {
    yaml.split("\n---")
        .filter_map(|d| serde_yaml_ng::from_str::<Value>(d).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn validate(file: &Path, version: Option<&str>) {
    let mut cmd = Cmd::new("kubernetes-validate").args(["--strict", "--quiet"]);
    if let Some(v) = version {
        cmd = cmd.args(["-k", v]);
    }
    let out = cmd.arg(file).run();
    assert_eq!(
        out.code,
        0,
        "kubernetes-validate --strict {version:?} {}:\n{}{}",
        file.display(),
        out.stdout,
        out.stderr
    );
}

/// What every rendering must say, whatever the distribution.
fn assert_shape(distro: &str, root: &str, docs: &[Value]) {
    let ds = find(docs, "DaemonSet", "k8s-storage-checks-node");
    let spec = &ds["spec"]["template"]["spec"];
    let c = &spec["containers"][0];
    // The kubelet root agrees in its three places.
    let env = c["env"].as_array().unwrap();
    let kr = env.iter().find(|e| e["name"] == "KUBELET_ROOT").unwrap();
    assert_eq!(kr["value"], root, "{distro}");
    let vol = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "kubelet")
        .unwrap();
    assert_eq!(vol["hostPath"]["path"], root, "{distro}");
    let mount = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "kubelet")
        .unwrap();
    assert_eq!(mount["mountPath"], format!("/host{root}"), "{distro}");
    assert_eq!(mount["mountPropagation"], "HostToContainer", "{distro}");
    let args = strs(&c["args"]);
    for a in args.iter().filter(|a| a.contains("--kubelet-root")) {
        assert!(
            a.ends_with("--kubelet-root $(KUBELET_ROOT)"),
            "{distro}: {a}"
        );
    }
    for check in [
        "check_ro_pvc_mounts",
        "check_pv_capacity",
        "check_stale_csi_mounts",
        "check_csi_node_plugins",
    ] {
        assert!(
            args.iter().any(
                |a| a.starts_with(&format!("--check={check} ")) && a.contains("--kubelet-root")
            ),
            "{distro}: {check} without --kubelet-root: {args:?}"
        );
    }
    // Per node only; the cluster-wide checks run once, in the Deployment.
    for check in [
        "check_jiva_rep_crashloop",
        "check_watch_cache",
        "check_volume_attachments",
        "--all-nodes",
    ] {
        assert!(
            !args.iter().any(|a| a.contains(check)),
            "{distro}: {check} on every node"
        );
    }
    // The log the nested-ops check reads is where the distribution (or the receiver) puts it.
    let nested = args
        .iter()
        .find(|a| a.starts_with("--check=check_kubelet_nested_ops"));
    match distro {
        "rke2" => assert!(
            nested.is_some_and(
                |a| a.contains("--log-file /host/var/lib/rancher/rke2/agent/logs/kubelet.log")
            ),
            "{args:?}"
        ),
        "talos" => {
            let a = nested.expect("Talos runs check_kubelet_nested_ops");
            let rx = spec["containers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "receive-logs")
                .expect("Talos' receive-logs container");
            assert_eq!(strs(&rx["command"])[1], "receive-logs");
            let rargs = strs(&rx["args"]);
            let dir = rargs
                .iter()
                .find_map(|a| a.strip_prefix("--state-dir="))
                .unwrap();
            assert!(
                a.contains(&format!("--log-file {dir}/kubelet.log")),
                "{a} does not read what receive-logs writes ({dir})"
            );
            assert!(
                rargs.iter().any(|a| a.starts_with("--listen=127.0.0.1:")),
                "{rargs:?}"
            );
            assert_eq!(
                spec["hostNetwork"], true,
                "Talos sends to the node's loopback"
            );
        }
        _ => assert!(nested.is_none(), "{distro}: {nested:?} (no log file there)"),
    }
    // The image, from one place.
    for d in docs.iter().filter(|d| d["spec"]["template"].is_object()) {
        for c in d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            assert!(
                c["image"].as_str().unwrap().starts_with(IMAGE),
                "{distro}: {}",
                c["image"]
            );
        }
    }
    // The cluster-wide checks: once, no host access, their own identity.
    let dep = find(docs, "Deployment", "k8s-storage-checks-cluster");
    assert_eq!(dep["spec"]["replicas"], 1);
    let ps = &dep["spec"]["template"]["spec"];
    assert_eq!(ps["serviceAccountName"], "k8s-storage-checks-cluster");
    let text = ps.to_string();
    for host in [
        "hostPath",
        "\"hostNetwork\":true",
        "\"hostPID\":true",
        "\"privileged\":true",
    ] {
        assert!(!text.contains(host), "{distro}: the Deployment has {host}");
    }
    let dargs = strs(&ps["containers"][0]["args"]);
    for check in [
        "check_jiva_rep_crashloop",
        "check_watch_cache",
        "check_stuck_terminating",
        "check_volume_attachments",
    ] {
        assert!(
            dargs
                .iter()
                .any(|a| a.starts_with(&format!("--check={check} "))),
            "{dargs:?}"
        );
    }
    assert!(dargs.iter().any(|a| a.contains("--all-nodes")), "{dargs:?}");
    find(docs, "Service", "k8s-storage-checks-cluster");
    let ns = find(docs, "Namespace", "k8s-storage-checks");
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"],
        "privileged"
    );
}

/// The Prometheus Operator's CRDs of the monitors, from its Go module.
fn monitor_crds() -> Vec<PathBuf> {
    let out = Cmd::new("go")
        .args(["mod", "download", "-json"])
        .arg(format!(
            "github.com/prometheus-operator/prometheus-operator@{PROMETHEUS_OPERATOR}"
        ))
        .run();
    assert_eq!(out.code, 0, "go mod download: {out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    let dir = PathBuf::from(v["Dir"].as_str().unwrap()).join("example/prometheus-operator-crd");
    ["podmonitors", "servicemonitors"]
        .iter()
        .map(|k| dir.join(format!("monitoring.coreos.com_{k}.yaml")))
        .collect()
}

#[test]
fn every_overlay_renders_validates_and_is_admitted_by_the_real_api_server() {
    let t = "every_overlay_renders_validates_and_is_admitted_by_the_real_api_server";
    if !need_tool(t, "kubernetes-validate") || !need_tool(t, "go") {
        return;
    }
    let cp = ControlPlane::with_rbac();
    let copy = deploy_copy();
    let work = tempfile::tempdir().unwrap();

    // The operator's CRDs, for real, and established.
    for crd in monitor_crds() {
        let out = cp.kubectl_as(
            User::Admin,
            &["apply", "--server-side", "-f", crd.to_str().unwrap()],
            None,
        );
        assert_eq!(out.code, 0, "{}: {out:?}", crd.display());
    }
    for crd in ["podmonitors", "servicemonitors"] {
        cp.wait_crd_served(&format!("{crd}.monitoring.coreos.com"));
    }

    for (distro, root) in DISTROS {
        for all in [false, true] {
            let name = if all {
                format!("{distro}-all")
            } else {
                distro.to_string()
            };
            let yaml = render(cp, &copy.path().join("deploy/overlays").join(&name));
            let d = docs(&yaml);
            assert_shape(distro, root, &d);
            let file = work.path().join(format!("{name}.yaml"));
            let ds = find(&d, "DaemonSet", "k8s-storage-checks-node");
            let tmpl = &ds["spec"]["template"];
            if all {
                assert!(find(&d, "PodMonitor", "k8s-storage-checks-node").is_object());
                assert!(find(&d, "ServiceMonitor", "k8s-storage-checks-cluster").is_object());
                assert_eq!(
                    tmpl["spec"]["containers"][0]["securityContext"]["appArmorProfile"]["type"],
                    "Unconfined"
                );
                assert!(tmpl["metadata"]["annotations"]
                    .as_object()
                    .is_none_or(|a| a.is_empty()));
                // Offline validation knows no CRDs: the built-in kinds only, for 1.30 (the
                // field's first release) and the newest; the monitors go to the real server.
                let builtin: Vec<&Value> = d
                    .iter()
                    .filter(|x| x["apiVersion"] != "monitoring.coreos.com/v1")
                    .collect();
                let text: Vec<String> = builtin
                    .iter()
                    .map(|x| serde_yaml_ng::to_string(x).unwrap())
                    .collect();
                std::fs::write(&file, text.join("---\n")).unwrap();
                validate(&file, Some("1.30.0"));
                validate(&file, None);
            } else {
                assert_eq!(
                    tmpl["metadata"]["annotations"]
                        ["container.apparmor.security.beta.kubernetes.io/checks"],
                    "unconfined"
                );
                std::fs::write(&file, &yaml).unwrap();
                validate(&file, Some("1.27.0"));
                validate(&file, None);
            }

            // The real API server admits it all (Pod Security on, the CRDs' schemas).
            let out = cp.kubectl_as(
                User::Admin,
                &["apply", "--dry-run=server", "-f", "-"],
                Some(&yaml),
            );
            // stderr last: CI keeps the start and the end of a long message, not its middle.
            assert_eq!(
                out.code, 0,
                "{name} not admitted: stdout {}; stderr {}",
                out.stdout, out.stderr
            );
            let warnings: Vec<&str> = out
                .stderr
                .lines()
                .filter(|l| l.contains("Warning"))
                .collect();
            if all {
                assert!(warnings.is_empty(), "{name}: {out:?}");
            } else {
                // The annotation is deprecated from 1.30: the one warning, and the reason for
                // the component.
                assert!(
                    warnings.iter().all(|w| w.contains("apparmor")),
                    "{name}: {out:?}"
                );
            }
            println!(
                "{name}: rendered, kubernetes-validate --strict ({}), server-side dry run ok",
                if all { "1.30, newest" } else { "1.27, newest" }
            );
        }
    }
}

#[test]
fn the_cluster_deployment_meets_restricted_and_its_rbac_serves_its_checks() {
    let cp = ControlPlane::with_rbac();
    let copy = deploy_copy();
    let yaml = render(cp, &copy.path().join("deploy/base"));
    let d = docs(&yaml);
    // Its RBAC for real (the ServiceAccount's namespace exists: deploy/rbac.yaml).
    let rbac: Vec<String> = d
        .iter()
        .filter(|x| {
            x["metadata"]["labels"]["app.kubernetes.io/component"] == "cluster"
                && x["kind"] != "Deployment"
                && x["kind"] != "Service"
        })
        .map(|x| x.to_string())
        .collect();
    assert_eq!(rbac.len(), 4, "{rbac:?}");
    for r in &rbac {
        cp.apply(r);
    }
    let sa = "system:serviceaccount:k8s-storage-checks:k8s-storage-checks-cluster";
    cp.wait_can(sa, &["list", "pods", "-A"]);
    cp.wait_can(
        sa,
        &[
            "patch",
            "configmap/k8s-storage-checks-canary",
            "-n",
            "kube-system",
        ],
    );
    // check_volume_attachments lists attachments and nodes (issue 30).
    cp.wait_can(sa, &["list", "volumeattachments.storage.k8s.io"]);
    cp.wait_can(sa, &["list", "nodes"]);
    // Nothing else of the node's: no node get, no secrets, no writes but the canary.
    for denied in [
        vec!["get", "nodes"],
        vec!["list", "secrets", "-A"],
        vec!["create", "configmaps", "-n", "kube-system"],
    ] {
        let mut args = vec!["auth", "can-i"];
        args.extend(&denied);
        args.extend(["--as", sa]);
        let out = cp.kubectl_as(User::Admin, &args, None);
        assert_eq!(out.stdout.trim(), "no", "{denied:?}: {out:?}");
    }

    // The pod as the Deployment would create it: admitted at "restricted".
    let dep = find(&d, "Deployment", "k8s-storage-checks-cluster");
    let restricted = cp.namespace("psa-restricted");
    cp.kubectl(
        &[
            "label",
            "namespace",
            &restricted,
            "pod-security.kubernetes.io/enforce=restricted",
        ],
        None,
    );
    let pod = serde_json::json!({"apiVersion":"v1","kind":"Pod",
        "metadata":{"name":"admission-probe","namespace":restricted},
        "spec":dep["spec"]["template"]["spec"]});
    let out = cp.kubectl_as(
        User::Admin,
        &["create", "--dry-run=server", "-f", "-"],
        Some(&pod.to_string()),
    );
    assert_eq!(
        out.code, 0,
        "the cluster pod is refused at restricted: {out:?}"
    );
    assert!(!out.stderr.contains("Warning"), "{out:?}");

    // Its three checks, with their arguments, as an identity bound exactly like its
    // ServiceAccount (to the ClusterRole and the canary Role): none is refused anything.
    let user = ControlPlane::unique("cluster-checks");
    cp.kubectl(
        &[
            "create",
            "clusterrolebinding",
            &user,
            "--clusterrole=k8s-storage-checks-cluster",
            &format!("--user={user}"),
        ],
        None,
    );
    cp.kubectl(
        &[
            "create",
            "rolebinding",
            &user,
            "-n",
            "kube-system",
            "--role=k8s-storage-checks-canary",
            &format!("--user={user}"),
        ],
        None,
    );
    cp.wait_can(&user, &["list", "pods", "-A"]);
    cp.wait_can(
        &user,
        &[
            "patch",
            "configmap/k8s-storage-checks-canary",
            "-n",
            "kube-system",
        ],
    );
    // Where jiva-operator runs, check_jiva_rep_crashloop lists its JivaVolumes too.
    cp.apply_crd(e2e::apiserver::fixtures::JIVA_CRD, "jivavolumes.openebs.io");
    cp.wait_can(&user, &["list", "jivavolumes.openebs.io", "-A"]);
    let kc = cp.kubeconfig_with(None, KubeCa::Inline, Auth::CertInline(user.clone()));
    let args = strs(&dep["spec"]["template"]["spec"]["containers"][0]["args"]);
    let mut n = 0;
    for line in args.iter().filter_map(|a| a.strip_prefix("--check=")) {
        let mut w = line.split_whitespace();
        let name = w.next().unwrap();
        let out = Cmd::check(name)
            .args(w)
            .arg("--kubeconfig")
            .arg(&kc)
            .arg("--format")
            .arg("json")
            .run();
        let text = format!("{}{}", out.stdout, out.stderr);
        assert!(
            !text.contains("forbidden") && !text.contains("HTTP 40"),
            "{name} is refused something with the Deployment's RBAC: {out:?}"
        );
        println!("{name} with the Deployment's RBAC: {}", out.first_line());
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn every_overlay_on_disk_is_tested_and_documented() {
    let dir = workspace_root().join("deploy/overlays");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    let mut tested: Vec<String> = DISTROS.iter().map(|(d, _)| d.to_string()).collect();
    tested.sort();
    assert_eq!(on_disk, tested);
    let doc = std::fs::read_to_string(workspace_root().join("docs/deploy/kustomize.md")).unwrap();
    for (distro, root) in DISTROS {
        assert!(
            doc.contains(&format!("| `{distro}` | {root} |")),
            "docs/deploy/kustomize.md: no row for {distro} with {root}"
        );
    }
}
