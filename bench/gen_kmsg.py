#!/usr/bin/env python3
"""A kernel log of a busy Kubernetes node as /dev/kmsg records (`prio,seq,usec,-;text`, device
records followed by their ` SUBSYSTEM=`/` DEVICE=` lines), for check_storage_kernel_errors.

Mix per 1000 records: 5 storage errors of every class the check knows (0.5 %), 150 storage
records that are not errors (mounts, attaches, NVMe queues, NFS and btrfs info: they pass the
prefilter's first look and must be told from errors by the rules) and 845 everyday records
(CNI veths, audit, cgroups, TCP). Timestamps are CLOCK_MONOTONIC microseconds spread over the
10 minutes before generation, so every record is inside the check's default 15-minute window
for 5 minutes after. Deterministic for a given count (except the timestamps)."""
import random, sys, time

ERRORS = [
    "EXT4-fs error (device sdc): ext4_find_entry:1456: inode #2: comm kubelet: reading directory lblock 0",
    "Aborting journal on device sdc-8.",
    "EXT4-fs (sdc): Remounting filesystem read-only",
    "XFS (dm-{n}): log I/O error -5",
    "XFS (dm-{n}): Log I/O Error Detected. Shutting down filesystem",
    "I/O error, dev sd{d}, sector {n} op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2",
    "device offline error, dev sd{d}, sector {n} op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2",
    "timeout error, dev nvme0n1, sector {n} op 0x1:(WRITE) flags 0x8800 phys_seg 4 prio class 2",
    "blk_update_request: I/O error, dev nvme1n1, sector {n} op 0x1:(WRITE) flags 0x800 phys_seg 2 prio class 0",
    "Buffer I/O error on dev sd{d}1, logical block {n}, lost async page write",
    "sd 3:0:0:{l}: rejecting I/O to offline device",
    " connection{l}:0: detected conn error (1020)",
    " session{l}: session recovery timed out after 120 secs",
    "nvme nvme0: I/O tag {l} (0{l:03d}) opcode 0x1 (I/O Cmd) QID 3 timeout, reset controller",
    "nvme nvme1: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0x10",
    "nvme nvme1: Disabling device after reset failure: -19",
    "nvme1n1: detected capacity change from 3907029168 to 0",
    "nfs: server 10.0.{l}.5 not responding, still trying",
    "nfs: server 10.0.{l}.5 OK",
    "NFS: server nas.lan error: fileid changed\\x0afsid 0:60: expected fileid 0x9fbe8fe, got 0x9fbe903",
    "BTRFS: error (device dm-0 state A) in btrfs_run_delayed_refs:2207: errno=-5 IO failure",
    "BTRFS info (device dm-0 state EA): forced readonly",
    "BTRFS error (device md1): bdev /dev/md1 errs: wr 11, rd 5, flush 0, corrupt 0, gen 0",
    "INFO: task jbd2/sdc-8:512 blocked for more than 120 seconds.",
    "JBD2: Detected IO errors -5 while flushing file data on sdc1-8",
]
STORAGE = [
    "EXT4-fs (sd{d}): mounted filesystem 6c1f8e2a-{n:04x}-4b1e-9d57-0a5f2c1e{n:04x} r/w with ordered data mode. Quota mode: none.",
    "EXT4-fs (sd{d}): unmounting filesystem 6c1f8e2a-{n:04x}-4b1e-9d57-0a5f2c1e{n:04x}.",
    "XFS (dm-{l}): Mounting V5 Filesystem a488de9e-d346-4098-aff4-84e6ca6{n:05x}",
    "XFS (dm-{l}): Ending clean mount",
    "XFS (dm-{l}): Unmounting Filesystem a488de9e-d346-4098-aff4-84e6ca6{n:05x}",
    "sd 3:0:0:{l}: [sd{d}] Attached SCSI disk",
    "sd 3:0:0:{l}: [sd{d}] 20971520 512-byte logical blocks: (10.7 GB/10.0 GiB)",
    "scsi host3: iSCSI Initiator over TCP/IP",
    "scsi 3:0:0:{l}: Direct-Access     IET      VIRTUAL-DISK     0001 PQ: 0 ANSI: 4",
    "nvme nvme0: 2/0/0 default/read/poll queues",
    "nvme0n1: p1 p2",
    "loop{l}: detected capacity change from 0 to 8",
    "NFS: Registering the id_resolver key type",
    "BTRFS info (device sd{d}): first mount of filesystem 1d0c8e2a-{n:04x}",
    "BTRFS info (device sd{d}): using crc32c (crc32c-intel) checksum algorithm",
    "EXT4-fs (dm-{l}): recovery complete",
    "JBD2: Spotted dirty metadata buffer (dev = sd{d}1, blocknr = {n}). There's a risk of filesystem corruption in case of system crash.",
    "device-mapper: multipath: 253:{l}: Reinstating path 8:{n}.",
]
NOISE = [
    "IPv6: ADDRCONF(NETDEV_CHANGE): cali{n:011x}: link becomes ready",
    "cni0: port {l}(veth{n:08x}) entered forwarding state",
    "cni0: port {l}(veth{n:08x}) entered blocking state",
    "veth{n:08x}: entered promiscuous mode",
    "eth0: renamed from tmp{n:05x}",
    "audit: type=1400 audit(1733380000.{l}:{n}): apparmor=\"DENIED\" operation=\"open\" class=\"file\" profile=\"cri-containerd.apparmor.d\" name=\"/proc/{n}/status\" pid={n} comm=\"node\" requested_mask=\"r\" denied_mask=\"r\" fsuid=0 ouid=0",
    "Memory cgroup out of memory: Killed process {n} (java) total-vm:8123456kB, anon-rss:2048000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:5000kB oom_score_adj:985",
    "TCP: request_sock_TCP: Possible SYN flooding on port 8080. Sending cookies.  Check SNMP counters.",
    "overlayfs: idmapped layers are currently not supported",
    "IPVS: rr: TCP 10.96.0.{l}:443 - no destination available",
    "nf_conntrack: nf_conntrack: table full, dropping packet",
    "kauditd_printk_skb: {l} callbacks suppressed",
]


def main(count, out, now_us=None):
    rnd = random.Random(34)
    now_us = now_us or int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1e6)
    start = now_us - 600 * 1_000_000
    step = 600 * 1_000_000 // max(count, 1)
    w = out.write
    for seq in range(count):
        r = rnd.random()
        n, l, d = rnd.randrange(1 << 20), rnd.randrange(64), "abcdef"[rnd.randrange(6)]
        if r < 0.005:
            t, prio = rnd.choice(ERRORS), 3
        elif r < 0.155:
            t, prio = rnd.choice(STORAGE), 6
        else:
            t, prio = rnd.choice(NOISE), 6
        text = t.format(n=n, l=l, d=d)
        w(f"{prio},{seq},{start + seq * step},-;{text}\n")
        if text.startswith(("sd ", "scsi ", "nvme ", "XFS", "EXT4", "I/O", "device offline", "timeout error")):
            w(" SUBSYSTEM=block\n DEVICE=b8:32\n")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000, sys.stdout)
