#!/usr/bin/env python3
"""`kubectl get pods -A -o json` of a large cluster: N pods with realistic bulk (labels,
annotations, managedFields, containers, volumes, conditions, statuses); a few are scheduled but
never started (the stuck pods the check looks for). Deterministic for a given N."""
import json, random, sys

def pod(i, rnd, now):
    ns = rnd.choice(["media", "coder", "default", "kube-system", "openebs", "monitoring"])
    name = f"app-{i}-{rnd.getrandbits(32):08x}"
    uid = f"{rnd.getrandbits(128):032x}"
    node = f"worker-{i % 40:02d}"
    created = "2026-07-13T09:00:00Z"
    stuck = i % 997 == 0
    containers = [{
        "name": f"c{j}", "image": f"registry.example.com/team/app-{j}:1.{i % 50}.{j}",
        "ports": [{"containerPort": 8080 + j, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "env": [{"name": f"ENV_{k}", "value": f"value-{k}-{i}"} for k in range(6)],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": True}],
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080 + j}, "periodSeconds": 10},
    } for j in range(2)]
    status = {
        "phase": "Pending" if stuck else "Running",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": created}],
        "hostIP": f"10.0.{i % 40}.1", "podIP": f"10.244.{i % 250}.{i % 200}", "startTime": created, "qosClass": "Burstable",
    }
    if not stuck:
        status["conditions"] += [{"type": t, "status": "True", "lastTransitionTime": created} for t in ["Initialized", "Ready", "ContainersReady"]]
        status["containerStatuses"] = [{
            "name": c["name"], "ready": True, "restartCount": rnd.randrange(3), "image": c["image"],
            "imageID": f"registry.example.com/team/app@sha256:{rnd.getrandbits(256):064x}",
            "containerID": f"containerd://{rnd.getrandbits(256):064x}", "started": True,
            "state": {"running": {"startedAt": created}},
        } for c in containers]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "uid": uid, "resourceVersion": str(100000 + i), "creationTimestamp": created,
            "labels": {"app.kubernetes.io/name": f"app-{i % 300}", "app.kubernetes.io/instance": name, "pod-template-hash": f"{rnd.getrandbits(40):010x}"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": created, "checksum/config": f"{rnd.getrandbits(256):064x}"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"app-{i % 300}-rs", "uid": f"{rnd.getrandbits(128):032x}", "controller": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": created,
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/name": {}}}, "f:spec": {"f:containers": {f"k:{{\"name\":\"c{j}\"}}": {".": {}, "f:image": {}} for j in range(2)}}}}],
        },
        "spec": {
            "nodeName": node, "schedulerName": "default-scheduler", "serviceAccountName": "default", "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "containers": containers,
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}},
                        {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        },
        "status": status,
    }

def main(n, out):
    rnd = random.Random(11)
    out.write('{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":""},"items":[')
    for i in range(n):
        if i:
            out.write(",")
        out.write(json.dumps(pod(i, rnd, None), separators=(",", ":")))
    out.write("]}\n")

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000, sys.stdout)
