#!/bin/sh
# Lay out the suite's part of the container image under DEST: what the Containerfile copies into
# its final stages (COPY --from=build /stage/<variant>/ /), and what tests/tests/container_mode.rs
# uses to build the same root for its emulated container. One script, so the two cannot drift.
#
#   stage.sh plain|nrpe BINDIR DEST [NRPE_D_CFG]
#
# plain: the static check binaries in /usr/lib/nagios/plugins (the same path as on an NRPE host,
#        so nrpe.d command lines carry over) and the textfile runner in /usr/local/bin.
# nrpe:  the same, plus /usr/local/bin/nrpe-entrypoint, the default /etc/k8s-storage-checks/nrpe.cfg
#        and /etc/nagios/nrpe.d/k8s-storage-checks.cfg: the suite's nrpe.d commands (NRPE_D_CFG,
#        default nrpe.d/k8s-storage-checks.cfg of the repository) with --host-root /host added
#        after each check binary and any sudo prefix removed (the pod's capabilities replace it).
set -eu
variant=$1 bindir=$2 dest=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
nrped=${4:-$repo/nrpe.d/k8s-storage-checks.cfg}

case $variant in plain|nrpe) ;; *) echo "stage.sh: variant must be plain or nrpe" >&2; exit 2;; esac

install -d -m 0755 "$dest/usr/lib/nagios/plugins" "$dest/usr/local/bin" "$dest/host" \
    "$dest/var/lib/k8s-storage-checks" "$dest/textfile"
n=0
for b in "$bindir"/check_*; do
    case $(basename "$b") in *.*) continue;; esac   # check_x.d dependency files
    [ -f "$b" ] && [ -x "$b" ] || continue
    install -m 0755 "$b" "$dest/usr/lib/nagios/plugins/"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "stage.sh: no check_* binaries in $bindir" >&2; exit 1; }
install -m 0755 "$bindir/k8s-storage-checks-textfile" "$dest/usr/local/bin/"

if [ "$variant" = nrpe ]; then
    install -d -m 0755 "$dest/etc/nagios/nrpe.d" "$dest/etc/k8s-storage-checks"
    install -m 0755 "$here/nrpe-entrypoint" "$dest/usr/local/bin/nrpe-entrypoint"
    install -m 0644 "$here/nrpe.cfg" "$dest/etc/k8s-storage-checks/nrpe.cfg"
    if [ -f "$nrped" ]; then
        sed -E \
            -e 's#^(command\[[^]]*\][[:space:]]*=[[:space:]]*)(/usr/bin/)?sudo([[:space:]]+-n)?[[:space:]]+#\1#' \
            -e 's#^(command\[[^]]*\][[:space:]]*=[[:space:]]*[^[:space:]]*check_[a-z0-9_]+)([[:space:]]|$)#\1 --host-root /host\2#' \
            "$nrped" > "$dest/etc/nagios/nrpe.d/k8s-storage-checks.cfg"
    else
        echo "stage.sh: $nrped not found: the image has no suite NRPE commands" >&2
        : > "$dest/etc/nagios/nrpe.d/k8s-storage-checks.cfg"
    fi
fi
