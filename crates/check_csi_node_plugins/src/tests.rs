//! evaluate on in-memory data: every rule has a test.

use super::*;
use node::csi::proto::{GetPluginInfo, PluginInfo, Probe};
use node::csi::{Failure, MountUse};
use plugin::Status;
use std::time::Duration;

const D: &str = "hostpath.csi.k8s.io";
const ROOT: &str = "/var/lib/kubelet";
const EP: &str = "/var/lib/kubelet/plugins/csi-hostpath/csi.sock";

fn policy() -> Policy {
    Policy {
        probe_timeout: Duration::from_secs(3),
        thresholds: plugin::Thresholds::default(),
    }
}

fn reg(name: &str) -> Registration {
    Registration {
        root: ROOT.into(),
        socket: format!("{ROOT}/plugins_registry/{name}-reg.sock"),
        result: Ok(PluginInfo {
            type_: "CSIPlugin".into(),
            name: name.into(),
            endpoint: EP.into(),
            supported_versions: vec!["1.0.0".into()],
        }),
    }
}

fn calls(name: &str, ready: Option<bool>) -> DriverCalls {
    DriverCalls {
        driver: name.into(),
        endpoint: EP.into(),
        result: Ok((
            Probe { ready },
            GetPluginInfo {
                name: name.into(),
                vendor_version: "1".into(),
            },
        )),
    }
}

fn plugin_pod(ready: bool) -> PodView {
    PodView {
        pod: "kube-system/csi-hostpathplugin-x1".into(),
        phase: "Running".into(),
        ready,
        host_paths: vec![
            "/var/lib/kubelet/plugins/csi-hostpath/".into(),
            "/var/lib/kubelet/plugins_registry".into(),
        ],
        ..Default::default()
    }
}

fn healthy() -> Data {
    Data {
        node: "worker-04".into(),
        roots: vec![ROOT.into()],
        registrations: vec![reg(D)],
        calls: vec![calls(D, Some(true))],
        mounts: vec![MountUse {
            root: ROOT.into(),
            pod_uid: "u1".into(),
            volume: "pvc-1".into(),
            driver: D.into(),
        }],
        mount_errors: vec![],
        api: Ok(Api {
            csinode: Some(vec![D.into()]),
            pods: vec![plugin_pod(true)],
        }),
        host_root: None,
    }
}

fn signals(r: &plugin::Report) -> Vec<(&'static str, Status)> {
    r.findings.iter().map(|f| (f.signal, f.status)).collect()
}

#[test]
fn healthy_is_ok_and_names_the_pod() {
    let r = evaluate(&healthy(), &policy());
    assert_eq!(r.status, Status::Ok, "{r:#?}");
    assert_eq!(signals(&r), vec![("csi_driver_ok", Status::Ok)]);
    assert!(
        r.findings[0]
            .text
            .contains("kube-system/csi-hostpathplugin-x1 Ready"),
        "{}",
        r.findings[0].text
    );
    assert!(r.summary.contains("1 CSI driver"), "{}", r.summary);
}

#[test]
fn nothing_at_all_is_ok_and_says_so() {
    let mut d = healthy();
    d.registrations.clear();
    d.calls.clear();
    d.mounts.clear();
    d.api = Ok(Api {
        csinode: Some(vec![]),
        pods: vec![],
    });
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Ok);
    assert!(
        r.summary
            .contains("no CSI drivers registered and no CSI volumes"),
        "{}",
        r.summary
    );
}

#[test]
fn a_socket_that_does_not_answer_is_critical() {
    let mut d = healthy();
    d.calls[0].result = Err(Failure::Timeout(format!(
        "Probe on {EP}: no answer in time"
    )));
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    assert_eq!(
        signals(&r),
        vec![("csi_socket_unresponsive", Status::Critical)]
    );
    let f = &r.findings[0];
    assert!(f.text.contains("--probe-timeout 3s"), "{}", f.text);
    let next = f.next.as_deref().unwrap();
    assert!(
        next.contains("kubectl -n kube-system delete pod csi-hostpathplugin-x1"),
        "{next}"
    );
}

#[test]
fn a_gone_socket_is_critical() {
    let mut d = healthy();
    d.calls[0].result = Err(Failure::Missing(format!("{EP}: no such file")));
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0].text.contains("gone"),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn used_by_a_volume_but_not_registered_nor_in_csinode() {
    let mut d = healthy();
    d.registrations.clear();
    d.calls[0].result = Err(Failure::Missing("gone".into()));
    d.api = Ok(Api {
        csinode: Some(vec![]),
        pods: vec![],
    });
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    let s = signals(&r);
    assert!(
        s.contains(&("csi_driver_unregistered", Status::Critical)),
        "{s:?}"
    );
    let texts: Vec<&str> = r.findings.iter().map(|f| f.text.as_str()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.contains("not registered") && t.contains("used by 1 volume")),
        "{texts:?}"
    );
    assert!(
        texts.iter().any(|t| t.contains("not in CSINode worker-04")),
        "{texts:?}"
    );
    assert!(r
        .findings
        .iter()
        .all(|f| f.next.as_deref().is_some_and(|n| n.contains("kubectl"))));
}

#[test]
fn a_failing_registration_socket_is_named_for_its_driver() {
    let mut d = healthy();
    d.registrations[0].result = Err(Failure::Unreachable("connection refused".into()));
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    assert!(
        r.findings[0]
            .text
            .starts_with(&format!("{D}: registration socket")),
        "{}",
        r.findings[0].text
    );
}

#[test]
fn not_ready_probe_is_warning_and_absent_ready_is_ready() {
    let mut d = healthy();
    d.calls[0] = calls(D, Some(false));
    assert_eq!(evaluate(&d, &policy()).status, Status::Warning);
    d.calls[0] = calls(D, None);
    assert_eq!(evaluate(&d, &policy()).status, Status::Ok);
}

#[test]
fn another_drivers_socket_is_critical() {
    let mut d = healthy();
    d.calls[0] = calls(D, Some(true));
    if let Ok((_, i)) = &mut d.calls[0].result {
        i.name = "other.csi".into();
    }
    assert_eq!(evaluate(&d, &policy()).status, Status::Critical);
}

#[test]
fn unready_or_crashlooping_pod_is_critical() {
    let mut d = healthy();
    d.api.as_mut().unwrap().pods = vec![plugin_pod(false)];
    let r = evaluate(&d, &policy());
    assert_eq!(
        signals(&r),
        vec![("csi_plugin_pod_unhealthy", Status::Critical)]
    );
    let mut p = plugin_pod(true);
    p.crashloop = Some("container hostpath in CrashLoopBackOff (7 restarts)".into());
    d.api.as_mut().unwrap().pods = vec![p];
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    assert!(r.findings[0].text.contains("CrashLoopBackOff"));
    // A pod found by its registrar's --kubelet-registration-path alone.
    let mut p = PodView {
        pod: "ns/reg".into(),
        ready: false,
        registration_paths: vec![EP.into()],
        ..Default::default()
    };
    p.phase = "Running".into();
    d.api.as_mut().unwrap().pods = vec![p];
    assert_eq!(evaluate(&d, &policy()).status, Status::Critical);
    // An unrelated pod does not count.
    d.api.as_mut().unwrap().pods = vec![PodView {
        pod: "ns/app".into(),
        host_paths: vec!["/data".into()],
        ..Default::default()
    }];
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Ok);
    assert!(r.findings[0].text.contains("no node-plugin pod found"));
}

#[test]
fn api_failure_is_unknown_but_a_dead_socket_stays_critical() {
    let mut d = healthy();
    d.api = Err("403 Forbidden: cannot get csinodes".into());
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Unknown, "{r:#?}");
    assert!(r.summary.contains("403"), "{}", r.summary);
    assert!(
        signals(&r).contains(&("csi_driver_ok", Status::Ok)),
        "the socket calls are still reported"
    );
    d.calls[0].result = Err(Failure::Timeout("no answer".into()));
    assert_eq!(evaluate(&d, &policy()).status, Status::Critical);
}

#[test]
fn a_refused_link_is_unknown_not_ok() {
    let mut d = healthy();
    d.calls[0].result = Err(Failure::Refused(format!(
        "{EP} is a symbolic link: not followed"
    )));
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Unknown);
    assert_eq!(r.findings[0].signal, "csi_socket_refused");
}

#[test]
fn other_plugin_types_are_noted_not_judged() {
    let mut d = healthy();
    d.registrations.push(Registration {
        root: ROOT.into(),
        socket: format!("{ROOT}/plugins_registry/gpu.sock"),
        result: Ok(PluginInfo {
            type_: "DRAPlugin".into(),
            name: "gpu.example.com".into(),
            ..Default::default()
        }),
    });
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Ok);
    assert!(r.notes.iter().any(|n| n.contains("DRAPlugin")));
}

#[test]
fn no_csinode_object_is_critical_for_used_drivers() {
    let mut d = healthy();
    d.api.as_mut().unwrap().csinode = None;
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Critical);
    assert!(r.findings[0].text.contains("has no CSINode"));
}

#[test]
fn a_refused_registration_link_alone_is_unknown_not_critical() {
    let mut d = healthy();
    d.registrations.push(Registration {
        root: ROOT.into(),
        socket: format!("{ROOT}/plugins_registry/evil.csi.example.com-reg.sock"),
        result: Err(Failure::Refused("a symbolic link: not followed".into())),
    });
    let r = evaluate(&d, &policy());
    assert_eq!(r.status, Status::Unknown, "{r:#?}");
    let s = signals(&r);
    assert!(
        s.contains(&("csi_socket_refused", Status::Unknown)),
        "{s:?}"
    );
    assert!(
        !s.contains(&("csi_driver_unregistered", Status::Critical)),
        "{s:?}"
    );
}

#[test]
fn w_and_c_count_unhealthy_drivers() {
    let mut d = healthy();
    d.calls[0].result = Err(Failure::Timeout("no answer".into()));
    let mut p = policy();
    p.thresholds = plugin::Thresholds::new(
        Some(plugin::args::range("1").unwrap()),
        Some(plugin::args::range("2").unwrap()),
    );
    // One unhealthy driver: within -w 1 and -c 2 (Nagios ranges: alert outside 0..N).
    let r = evaluate(&d, &p);
    assert_eq!(r.status, Status::Ok, "{r:#?}");
    assert!(r.notes.iter().any(|n| n.contains("-w/-c")));
    p.thresholds = plugin::Thresholds::new(Some(plugin::args::range("0").unwrap()), None);
    assert_eq!(evaluate(&d, &p).status, Status::Warning);
    // An UNKNOWN finding is not hidden by the count.
    d.api = Err("403".into());
    assert_eq!(evaluate(&d, &p).status, Status::Warning);
    d.calls[0] = calls(D, Some(true));
    assert_eq!(evaluate(&d, &p).status, Status::Unknown);
}
