#!/bin/sh
# The NRPE image's last step, run where the nagios group exists (the Containerfile's final stage;
# tests/tests/container_mode.rs on its staged layer): the checks that nrpe runs through sudo
# (the list stage.sh wrote) become root:nagios 0750, as on an agent host, and the sudoers drop-in
# root:root 0440.
#
#   harden.sh [ROOT [GROUP_FILE]]     (ROOT default /, GROUP_FILE default ROOT/etc/group)
set -eu
root=${1:-}
groups=${2:-$root/etc/group}
gid=$(awk -F: '$1 == "nagios" { print $3 }' "$groups")
[ -n "$gid" ] || { echo "harden.sh: no nagios group in $groups" >&2; exit 1; }
lib=$root/usr/local/lib/k8s-storage-checks
n=0
for c in $(cat "$lib/privileged"); do
    b=$root/usr/lib/nagios/plugins/$c
    [ -e "$b" ] || continue
    chown 0:"$gid" "$b"
    chmod 0750 "$b"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "harden.sh: none of $(cat "$lib/privileged") installed" >&2; exit 1; }
chown 0:0 "$root/etc/sudoers.d/k8s-storage-checks"
chmod 0440 "$root/etc/sudoers.d/k8s-storage-checks"
