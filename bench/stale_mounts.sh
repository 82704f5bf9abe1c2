#!/usr/bin/env bash
# Scenario 5 of bench/: check_stale_csi_mounts on N healthy mounts and on M hung ones, in a
# private mount namespace (root). Prints "label seconds" lines for bench.py.
#   bench/stale_mounts.sh BIN HEALTHY HUNG PROBE_TIMEOUT
set -euo pipefail
bin=$1; healthy=$2; hung=$3; pt=$4
work=$(mktemp -d)
k=$work/var/lib/kubelet
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
mkdir -p "$work/src"
# healthy: tmpfs staging + pod mounts (cheap to make in numbers)
for i in $(seq 1 "$healthy"); do
    s=$k/plugins/kubernetes.io/csi/bench.csi/h$i/globalmount
    p=$k/pods/pod$i/volumes/kubernetes.io~csi/pvc-h$i/mount
    mkdir -p "$s" "$p"
    echo "{\"driverName\":\"bench.csi\",\"volumeHandle\":\"pvc-h$i\",\"specVolID\":\"pvc-h$i\"}" > "$(dirname "$s")/vol_data.json"
    mount -t tmpfs -o size=1m "tmpfs-h$i" "$s"
    mount --bind "$s" "$p"
done
for i in $(seq 1 "$hung"); do
    p=$k/pods/podh$i/volumes/kubernetes.io~csi/pvc-x$i/mount
    mkdir -p "$p" "$work/src/$i"
    bindfs "$work/src/$i" "$p"
    pid=$(pgrep -n -f "^bindfs $work/src/$i ")
    pids+=("$pid")
    kill -STOP "$pid"
done
t0=$(date +%s.%N)
"$bin" --kubelet-root "$k" --probe-timeout "$pt" -t 30 >/dev/null || true
t1=$(date +%s.%N)
echo "wall $(echo "$t1 - $t0" | bc)"
