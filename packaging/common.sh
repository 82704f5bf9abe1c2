# Shared by packaging/mkdeb, mkdist, mkimage and mkrepo (sourced, POSIX sh). Sets:
#   arch     the Debian architecture built for: amd64 or arm64 ($ARCH; default the machine's)
#   bin      the static release binaries (./build-static --arch $arch, or $BIN_DIR: prebuilt)
#   out      where packages go ($OUT_DIR, default <target dir>/packages)
#   version  the workspace version (Cargo.toml [workspace.package]; $VERSION overrides it, e.g. to
#            build the next version of a package for an upgrade test)
#   checks   the check names (crates/check_*), each a link to the program in $bin
#   program  the one program they all run (k8s-storage-checks)
#   run      what runs $bin's program here: empty, or qemu-aarch64-static for arm64 on amd64
#   PROJECT_* the project's metadata (packaging/project.env, the one place it is written)
set -eu
cd "$(dirname "$0")/.."
. packaging/project.env
case "${ARCH:-$(uname -m)}" in
    amd64|x86_64) arch=amd64 uname_m=x86_64 elf_machine=003e ;;
    arm64|aarch64) arch=arm64 uname_m=aarch64 elf_machine=00b7 ;;
    *) echo "packaging: ARCH must be amd64 or arm64, not $ARCH" >&2; exit 2 ;;
esac
if [ -n "${BIN_DIR-}" ]; then
    bin=$BIN_DIR
else
    bin=$(./build-static --arch "$arch" --quiet)
fi
out=${OUT_DIR:-${CARGO_TARGET_DIR:-$(pwd)/target}/packages}
mkdir -p "$out"
version=${VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}
checks=$(cd crates && ls -d check_* | sort)
program=k8s-storage-checks
for c in $program $checks; do
    [ -x "$bin/$c" ] || { echo "$bin/$c missing" >&2; exit 1; }
done
# The program must be built for $arch (ELF e_machine, little-endian, at offset 18).
got=$(od -An -tx2 -j18 -N2 "$bin/$program" | tr -d ' ')
[ "$got" = "$elf_machine" ] || {
    echo "packaging: $bin/$program is not an $arch program (ELF machine 0x$got): set ARCH or BIN_DIR" >&2
    exit 1
}
run=
case $(uname -m) in
    "$uname_m") ;;
    *)
        run=$(command -v "qemu-$uname_m-static" || command -v "qemu-$uname_m" || true)
        [ -n "$run" ] || {
            echo "packaging: an $arch program runs here only under qemu-user (Debian: apt-get install qemu-user-static): its --list and --help make the links and man pages" >&2
            exit 1
        }
        ;;
esac
# Reproducible archives: file times from the last commit when there is one.
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH
