#!/usr/bin/env python3
"""A kubelet log of a busy node: klog text lines behind a journal/syslog prefix, a realistic mix
(pod workers, probes, volume manager, reconciler, image GC), with 0.1 % failed volume operations
(nestedpendingoperations) in the last minutes. Deterministic for a given size."""
import random, sys, time

TEMPLATES = [
    'I{md} {t}    2166 kubelet.go:2457] "SyncLoop (PLEG): event for pod" pod="media/radarr-{n}" event={{"ID":"8e1f6a2c-{n:04d}","Type":"ContainerStarted","Data":"5f1c{n:04d}"}}',
    'I{md} {t}    2166 prober.go:107] "Probe failed" probeType="Readiness" pod="coder/workspace-{n}" podUID="b70553ae-{n:04d}" containerName="app" probeResult="failure" output="HTTP probe failed with statuscode: 503"',
    'I{md} {t}    2166 reconciler_common.go:258] "operationExecutor.VerifyControllerAttachedVolume started for volume \\"pvc-{n:08x}\\" (UniqueName: \\"kubernetes.io/csi/driver.longhorn.io^pvc-{n:08x}\\") pod \\"web-{n}\\" (UID: \\"77aa{n:04d}\\") " pod="default/web-{n}"',
    'I{md} {t}    2166 operation_generator.go:721] "MountVolume.SetUp succeeded for volume \\"kube-api-access-{n:05d}\\" (UniqueName: \\"kubernetes.io/projected/77aa{n:04d}-kube-api-access\\") pod \\"web-{n}\\"" pod="default/web-{n}"',
    'W{md} {t}    2166 image_gc_manager.go:324] "Disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold" usage=74 highThreshold=70 amountToFree=2151235584 lowThreshold=65',
    'I{md} {t}    2166 kubelet_getters.go:218] "Pod status updated" pod="kube-system/coredns-{n}" status="Running"',
    'E{md} {t}    2166 pod_workers.go:1298] "Error syncing pod, skipping" err="failed to \\"StartContainer\\" for \\"app\\" with CrashLoopBackOff: \\"back-off 5m0s restarting failed container\\"" pod="openebs/pvc-8ecc-jiva-rep-1" podUID="11111111-{n:04d}"',
]
ERROR = ('E{md} {t}    2166 nestedpendingoperations.go:348] Operation for "{{volumeName:kubernetes.io/csi/driver.longhorn.io^pvc-81b676e6 podName: nodeName:}}" '
         'failed. No retries permitted until {iso} +0000 UTC m=+{m}.5 (durationBeforeRetry 2m2s). Error: GetDeviceMountRefs check failed for volume "pvc-81b676e6" '
         '(UniqueName: "kubernetes.io/csi/driver.longhorn.io^pvc-81b676e6") on node "worker-04" : the device mount path "/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/'
         '0f3a9c/globalmount" is still mounted by other references [/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/0f3a9c/globalmount]')


def main(size_bytes, out, now=None):
    rnd = random.Random(7)
    now = now or time.time()
    written = 0
    i = 0
    # Spread lines over the last 20 minutes, oldest first (the window is 15 minutes).
    est_lines = max(1, size_bytes // 190)
    start = now - 1200
    buf = []
    while written < size_bytes:
        ts = start + 1200 * i / est_lines
        lt = time.localtime(ts)
        md = time.strftime("%m%d", lt)
        t = time.strftime("%H:%M:%S", lt) + f".{int((ts % 1) * 1e6):06d}"
        prefix = time.strftime("%b %d %H:%M:%S", lt) + " worker-04 kubelet[2166]: "
        if rnd.random() < 0.001:
            iso = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts + 122)) + ".123456789"
            line = ERROR.format(md=md, t=t, iso=iso, m=int(ts) % 100000)
        else:
            line = rnd.choice(TEMPLATES).format(md=md, t=t, n=rnd.randrange(2000))
        line = prefix + line + "\n"
        buf.append(line)
        written += len(line)
        i += 1
        if len(buf) >= 10000:
            out.write("".join(buf))
            buf = []
    out.write("".join(buf))


if __name__ == "__main__":
    main(int(float(sys.argv[1]) * 1024 * 1024) if len(sys.argv) > 1 else 200 * 1024 * 1024, sys.stdout)
