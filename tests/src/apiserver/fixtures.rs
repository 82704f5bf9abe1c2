//! Realistic API objects as `kubectl get … -o json` and the API server show them: full metadata
//! (uid, resourceVersion, ownerReferences, managedFields, annotations), container specs and
//! statuses, conditions. Times are relative to now ([`ago`]).

use serde_json::{json, Value};

/// RFC 3339 for `secs` seconds ago (the suite's one calendar, `plugin::time`).
pub fn ago(secs: i64) -> String {
    plugin::time::format_rfc3339(plugin::time::now_secs() - secs)
}

fn uid(seed: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in seed.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100000001b3);
    }
    let h2 = h.rotate_left(29) ^ 0x9e3779b97f4a7c15;
    format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        h2 & 0xfff,
        h2 >> 16
    )
}

fn managed_fields(manager: &str, t: &str) -> Value {
    json!([{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{}}},
        "f:spec":{"f:containers":{}}},"manager":manager,"operation":"Update","time":t},
        {"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:conditions":{}}},
        "manager":"kubelet","operation":"Update","subresource":"status","time":t}])
}

/// jiva-operator's JivaVolume CRD (v3.6.0, vendored with its source at its top).
pub const JIVA_CRD: &str = include_str!("../../fixtures/jivavolumes.openebs.io.yaml");

/// A `kubectl get … -o json` list document.
pub fn kubectl_list(items: Vec<Value>) -> Value {
    json!({"apiVersion":"v1","items":items,"kind":"List","metadata":{"resourceVersion":""}})
}

/// The state of a Jiva replica pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rep {
    Healthy,
    /// CrashLoopBackOff with this many restarts, not Ready for this many seconds.
    CrashLoop {
        restarts: i64,
        unready_secs: i64,
    },
}

/// The incident's Jiva volume `pv`: replica 1 on k8s03 crash-looping (92 restarts, unready for
/// 14 days), its peers 0 (k8s01) and 2 (k8s02) healthy, all 60 days old.
pub fn jiva_incident_replicas(pv: &str) -> Vec<Value> {
    const DAY: i64 = 86400;
    vec![
        jiva_replica(pv, 0, "k8s01", 60 * DAY, Rep::Healthy),
        jiva_replica(
            pv,
            1,
            "k8s03",
            60 * DAY,
            Rep::CrashLoop {
                restarts: 92,
                unready_secs: 14 * DAY,
            },
        ),
        jiva_replica(pv, 2, "k8s02", 60 * DAY, Rep::Healthy),
    ]
}

/// A jiva-operator replica: StatefulSet pod `<pv>-jiva-rep-<n>` with the operator's labels.
pub fn jiva_replica(pv: &str, n: u32, node: &str, age_secs: i64, state: Rep) -> Value {
    let name = format!("{pv}-jiva-rep-{n}");
    let created = ago(age_secs);
    let (ready, cs, ready_since, phase_ready) = match state {
        Rep::Healthy => (
            true,
            json!({"containerID":"containerd://1f2e","image":"docker.io/openebs/jiva:3.6.0","imageID":"docker.io/openebs/jiva@sha256:ab12",
                "lastState":{},"name":"jiva-replica","ready":true,"restartCount":0,"started":true,
                "state":{"running":{"startedAt":created}}}),
            created.clone(),
            "True",
        ),
        Rep::CrashLoop {
            restarts,
            unready_secs,
        } => (
            false,
            json!({"containerID":"containerd://9a8b","image":"docker.io/openebs/jiva:3.6.0","imageID":"docker.io/openebs/jiva@sha256:ab12",
                "lastState":{"terminated":{"containerID":"containerd://9a8b","exitCode":1,"finishedAt":ago(95),"reason":"Error","startedAt":ago(97)}},
                "name":"jiva-replica","ready":false,"restartCount":restarts,"started":false,
                "state":{"waiting":{"message":format!("back-off 5m0s restarting failed container=jiva-replica pod={name}_openebs({})", uid(&name)),"reason":"CrashLoopBackOff"}}}),
            ago(unready_secs),
            "False",
        ),
    };
    let _ = ready;
    json!({
        "apiVersion":"v1","kind":"Pod",
        "metadata":{
            "creationTimestamp":created,"generateName":format!("{pv}-jiva-rep-"),
            "labels":{"app.kubernetes.io/name":"jiva-replica","apps.kubernetes.io/pod-index":n.to_string(),
                "controller-revision-hash":format!("{pv}-jiva-rep-6d5f8b9c7"),"openebs.io/cas-type":"jiva",
                "openebs.io/component":"jiva-replica","openebs.io/persistent-volume":pv,
                "openebs.io/persistent-volume-claim":"coder-workspace-data","openebs.io/version":"3.6.0",
                "statefulset.kubernetes.io/pod-name":name},
            "managedFields":managed_fields("kube-controller-manager", &created),
            "name":name,"namespace":"openebs",
            "ownerReferences":[{"apiVersion":"apps/v1","blockOwnerDeletion":true,"controller":true,"kind":"StatefulSet","name":format!("{pv}-jiva-rep"),"uid":uid(pv)}],
            "resourceVersion":"48213377","uid":uid(&name)},
        "spec":{
            "affinity":{"podAntiAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"openebs.io/component":"jiva-replica","openebs.io/persistent-volume":pv}},"topologyKey":"kubernetes.io/hostname"}]}},
            "containers":[{"args":["replica","--frontendIP",format!("{pv}-jiva-ctrl-svc.openebs.svc.cluster.local"),"--size","5368709120","openebs"],
                "command":["launch"],"image":"docker.io/openebs/jiva:3.6.0","imagePullPolicy":"IfNotPresent","name":"jiva-replica",
                "ports":[{"containerPort":9502,"protocol":"TCP"},{"containerPort":9503,"protocol":"TCP"},{"containerPort":9504,"protocol":"TCP"}],
                "volumeMounts":[{"mountPath":"/openebs","name":"openebs"}]}],
            "hostname":name,"nodeName":node,"restartPolicy":"Always","schedulerName":"default-scheduler","serviceAccountName":"default",
            "volumes":[{"name":"openebs","persistentVolumeClaim":{"claimName":format!("openebs-{name}")}}]},
        "status":{
            "conditions":[
                {"lastProbeTime":null,"lastTransitionTime":created,"status":"True","type":"PodReadyToStartContainers"},
                {"lastProbeTime":null,"lastTransitionTime":created,"status":"True","type":"Initialized"},
                {"lastProbeTime":null,"lastTransitionTime":ready_since,"status":phase_ready,"type":"Ready"},
                {"lastProbeTime":null,"lastTransitionTime":ready_since,"status":phase_ready,"type":"ContainersReady"},
                {"lastProbeTime":null,"lastTransitionTime":created,"status":"True","type":"PodScheduled"}],
            "containerStatuses":[cs],
            "hostIP":"10.0.0.13","phase":"Running","podIP":"10.1.3.77","qosClass":"BestEffort","startTime":created}
    })
}

/// A pod scheduled `secs` ago to `node` that the kubelet never synced: Pending, PodScheduled=True,
/// no containerStatuses field at all.
pub fn scheduled_no_status(ns: &str, name: &str, node: &str, secs: i64) -> Value {
    let t = ago(secs);
    json!({
        "apiVersion":"v1","kind":"Pod",
        "metadata":{"annotations":{"workspace.llmsafespaces.dev/restart-generation":"3"},
            "creationTimestamp":t,"labels":{"app":"workspace","workspace":name},
            "managedFields":managed_fields("llmsafespaces-controller", &t),
            "name":name,"namespace":ns,"resourceVersion":"77120","uid":uid(name)},
        "spec":{"containers":[{"image":"ghcr.io/lenaxia/workspace:1.4","name":"workspace",
                "volumeMounts":[{"mountPath":"/home/coder","name":"home"}]}],
            "nodeName":node,"restartPolicy":"Always","schedulerName":"default-scheduler",
            "volumes":[{"name":"home","persistentVolumeClaim":{"claimName":format!("{name}-home")}}]},
        "status":{"conditions":[{"lastProbeTime":null,"lastTransitionTime":t,"status":"True","type":"PodScheduled"}],
            "phase":"Pending","qosClass":"Burstable"}
    })
}

/// A healthy Running pod on `node`.
pub fn running(ns: &str, name: &str, node: &str, secs: i64) -> Value {
    let t = ago(secs);
    json!({
        "apiVersion":"v1","kind":"Pod",
        "metadata":{"creationTimestamp":t,"labels":{"app":name},"name":name,"namespace":ns,"uid":uid(name),
            "managedFields":managed_fields("kube-controller-manager", &t)},
        "spec":{"containers":[{"image":"nginx:1.27","name":"main"}],"nodeName":node},
        "status":{"conditions":[
                {"lastTransitionTime":t,"status":"True","type":"Initialized"},
                {"lastTransitionTime":t,"status":"True","type":"Ready"},
                {"lastTransitionTime":t,"status":"True","type":"PodScheduled"}],
            "containerStatuses":[{"name":"main","ready":true,"restartCount":0,"started":true,"image":"nginx:1.27",
                "state":{"running":{"startedAt":t}},"lastState":{}}],
            "phase":"Running","startTime":t}
    })
}

/// A core/v1 event about a pod.
pub fn pod_event(ns: &str, pod: &str, reason: &str, message: &str, secs_ago: i64) -> Value {
    let t = ago(secs_ago);
    json!({
        "apiVersion":"v1","kind":"Event","count":42,"firstTimestamp":ago(secs_ago + 3600),
        "involvedObject":{"apiVersion":"v1","kind":"Pod","name":pod,"namespace":ns,"resourceVersion":"77120","uid":uid(pod)},
        "lastTimestamp":t,"message":message,
        "metadata":{"creationTimestamp":ago(secs_ago + 3600),"name":format!("{pod}.17f3a{:x}", secs_ago),"namespace":ns,"resourceVersion":"88123","uid":uid(&format!("{pod}{reason}"))},
        "reason":reason,"reportingComponent":"kubelet","reportingInstance":"worker-04",
        "source":{"component":"kubelet","host":"worker-04"},"type":if reason.starts_with("Failed") {"Warning"} else {"Normal"}
    })
}
