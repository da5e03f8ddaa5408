#!/usr/bin/env bash
# Build the fusefs Debian package from this checkout (working tree, not
# just what is committed), in a scratch copy so the checkout stays clean:
#
#   packaging/build-deb.sh [OUTDIR]     # default OUTDIR: ./dist
#
# Needs dpkg-dev, debhelper and the build dependencies of
# packaging/debian/control (scripts/deps.sh installs all of them).
# Prints the path of the .deb on its last line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(realpath -m "${1:-$root/dist}")
work=$(mktemp -d "${TMPDIR:-/tmp}/fusefs-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT

version=$(dpkg-parsechangelog -l "$root/packaging/debian/changelog" -S Version)
src=$work/fusefs-$version
mkdir -p "$src"
# the tree without VCS data and build products
tar -C "$root" --exclude=./.git --exclude='./build*' --exclude=./dist \
    --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -C "$src" -xf -
rm -rf "$src/debian"
cp -a "$src/packaging/debian" "$src/debian"

(cd "$src" && dpkg-buildpackage -b -us -uc -J"$(nproc)") >"$work/build.log" 2>&1 || {
    tail -n 60 "$work/build.log" >&2
    echo "build-deb: dpkg-buildpackage failed (log above)" >&2
    exit 1
}
mkdir -p "$out"
deb=$(ls "$work"/fusefs_"${version}"_*.deb)
cp "$deb" "$out/"
echo "$out/${deb##*/}"
