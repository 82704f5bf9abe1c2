#!/usr/bin/env python3
"""A node's mount table at scale: N mounts of which P are PV mounts (staging + pod publish pairs
of ext4/xfs volumes under /var/lib/kubelet), the rest container overlays, tmpfs secrets and
projected volumes like a busy node has. Deterministic for a given size."""
import random, sys

def main(total=50_000, pv_mounts=10_000, out=sys.stdout, k="/var/lib/kubelet"):
    rnd = random.Random(42)
    lines = ["1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro"]
    mid = 2
    vols = pv_mounts // 2
    for v in range(vols):
        dev = f"{8 + v // 256}:{v % 256}"
        fs = "xfs" if v % 3 == 0 else "ext4"
        opts = "rw,attr2,inode64" if fs == "xfs" else "rw"
        pv = f"pvc-{rnd.getrandbits(128):032x}"
        pod = f"{rnd.getrandbits(128):032x}"
        h = f"{rnd.getrandbits(256):064x}"
        lines.append(f"{mid} 1 {dev} / {k}/plugins/kubernetes.io/csi/driver.longhorn.io/{h}/globalmount rw,relatime shared:{mid} - {fs} /dev/sd{v} {opts}")
        mid += 1
        lines.append(f"{mid} 1 {dev} / {k}/pods/{pod}/volumes/kubernetes.io~csi/{pv}/mount rw,relatime shared:{mid} - {fs} /dev/sd{v} {opts}")
        mid += 1
    while len(lines) < total:
        pod = f"{rnd.getrandbits(128):032x}"
        kind = len(lines) % 3
        if kind == 0:
            lines.append(f"{mid} 1 0:{mid % 4000} / /run/containerd/io.containerd.runtime.v2.task/k8s.io/{pod}/rootfs rw,relatime - overlay overlay rw,lowerdir=/var/lib/containerd/a:/var/lib/containerd/b,upperdir=/var/lib/containerd/u,workdir=/var/lib/containerd/w")
        elif kind == 1:
            lines.append(f"{mid} 1 0:{mid % 4000} / {k}/pods/{pod}/volumes/kubernetes.io~projected/kube-api-access-{pod[:5]} rw,relatime shared:{mid} - tmpfs tmpfs rw,size=4096k")
        else:
            lines.append(f"{mid} 1 0:{mid % 4000} / {k}/pods/{pod}/volumes/kubernetes.io~secret/tls rw,relatime shared:{mid} - tmpfs tmpfs rw,size=1024k")
        mid += 1
    out.write("\n".join(lines[:total]) + "\n")

if __name__ == "__main__":
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    pv = int(sys.argv[2]) if len(sys.argv) > 2 else total // 5
    main(total, pv)
