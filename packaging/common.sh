# Shared by packaging/mkdeb and packaging/mkdist (sourced, POSIX sh). Sets:
#   bin      the static release binaries (./build-static, or $BIN_DIR when given: prebuilt)
#   out      where packages go ($OUT_DIR, default <target dir>/packages)
#   version  the workspace version (Cargo.toml [workspace.package])
#   checks   the check names (crates/check_*), each a link to the program in $bin
#   program  the one program they all run (k8s-storage-checks)
set -eu
cd "$(dirname "$0")/.."
if [ -n "${BIN_DIR-}" ]; then
    bin=$BIN_DIR
else
    bin=$(./build-static --quiet)
fi
out=${OUT_DIR:-${CARGO_TARGET_DIR:-$(pwd)/target}/packages}
mkdir -p "$out"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
checks=$(cd crates && ls -d check_* | sort)
program=k8s-storage-checks
for c in $program $checks; do
    [ -x "$bin/$c" ] || { echo "$bin/$c missing" >&2; exit 1; }
done
# Reproducible archives: file times from the last commit when there is one.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
