#!/bin/sh
# Finish the NRPE image's root file system (the Containerfile's nrpe stage runs it as
# `harden.sh /`; tests/tests/container_mode.rs runs it on its emulated image, so the two cannot
# drift apart):
#
#   harden.sh ROOT [PLUGIN_LAYER]
#
# - nrpe runs as `nagios` with no capability at all (it is the network-facing process). The
#   checks that need one carry it as a file capability, and only the agent may run them:
#   root:nagios 0750 (every other check root:root 0755). The kernel grants a file capability
#   only within the container's bounding set (the manifest's `capabilities.add`) and only
#   without no_new_privs: daemonset-nrpe.yaml sets `allowPrivilegeEscalation: true` for this.
# - Because privilege escalation is then possible in the pod, no set-user-ID or set-group-ID
#   file is left in the image (su, mount, passwd...): the file capabilities below are the only
#   way to more privilege.
# - /run/k8s-storage-checks, the checks' run directory (stuck-probe markers): nagios, 0750.
#
# ROOT holds etc/passwd and etc/group (the nagios ids are read there); PLUGIN_LAYER (default
# ROOT) holds usr/lib/nagios/plugins and gets the run directory.
set -eu
root=$1
layer=${2:-$1}
id_of() { awk -F: -v n=nagios '$1 == n { print $3 }' "$root/etc/$1"; }
uid=$(id_of passwd)
gid=$(id_of group)
[ -n "$uid" ] && [ -n "$gid" ] || { echo "harden.sh: no nagios user/group in $root/etc" >&2; exit 1; }

# Each check's capabilities in the pod (a subset of the DaemonSet's capabilities.add):
#   CAP_SYS_PTRACE: enter the host's mount namespace through /host/proc/1/root (probes);
#   CAP_DAC_READ_SEARCH: kubelet directories, PV roots, the host's journal files;
#   CAP_SYSLOG: /host/dev/kmsg under dmesg_restrict.
caps_of() {
    case $1 in
    check_ro_pvc_mounts|check_stale_csi_mounts|check_iscsi_sessions)
        echo cap_dac_read_search,cap_sys_ptrace=ep ;;
    check_storage_kernel_errors)
        echo cap_dac_read_search,cap_sys_ptrace,cap_syslog=ep ;;
    check_kubelet_nested_ops)
        echo cap_dac_read_search=ep ;;
    *) echo "" ;;
    esac
}

n=0
for b in "$layer"/usr/lib/nagios/plugins/check_*; do
    [ -f "$b" ] || continue
    c=$(caps_of "$(basename "$b")")
    if [ -n "$c" ]; then
        # chown first: changing the owner drops a file capability.
        chown "0:$gid" "$b"
        chmod 0750 "$b"
        setcap "$c" "$b"
    else
        chown 0:0 "$b"
        chmod 0755 "$b"
    fi
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "harden.sh: no checks in $layer/usr/lib/nagios/plugins" >&2; exit 1; }

for r in "$root" "$layer"; do
    find "$r" -xdev -type f -perm /6000 -exec chmod ug-s {} +
done

install -d -m 0755 "$layer/run"
install -d -o "$uid" -g "$gid" -m 0750 "$layer/run/k8s-storage-checks"
