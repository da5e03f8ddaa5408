#!/usr/bin/env bash
# Build the fusefs OCI image from this checkout with podman, without a
# registry (docs/kubernetes.md, "The image"):
#
#   scripts/image.sh [TAG]          # default TAG: localhost/fusefs:0.1.0
#
# The Dockerfile's bases (debian:12 and debian:12-slim) are made from the
# Debian archive with mmdebstrap when podman does not have them yet, and
# imported as localhost/debian:12 and localhost/debian:12-slim; the build
# then never pulls (--pull=never) and runs apt-get against the archive
# through the host's network (--network host).  Where a registry is
# reachable the same Dockerfile builds from the public images with a plain
# `docker build -f packaging/container/Dockerfile .` or `podman build`.
#
# Environment: CONTAINERS_CONF (podman's settings; `make image` points it
# at tests/containers/containers.conf, what a restricted host needs),
# MIRROR (default: the first URIs: of /etc/apt/sources.list.d/debian.sources,
# else deb.debian.org), BASE_REBUILD=1 makes the bases again.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tag=${1:-localhost/fusefs:0.1.0}

for t in podman mmdebstrap; do
    command -v "$t" >/dev/null || { echo "image: $t is not installed (scripts/deps.sh)" >&2; exit 1; }
done

mirror=${MIRROR:-}
if [[ -z $mirror && -r /etc/apt/sources.list.d/debian.sources ]]; then
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
fi
mirror=${mirror:-http://deb.debian.org/debian}
security=${SECURITY_MIRROR:-${mirror%/debian}/debian-security}

PATHENV="ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# make_base NAME [MMDEBSTRAP_ARGS...]: a Debian 12 minbase rootfs imported
# as NAME (an imported tarball has no PATH: set it, as the registry's has)
make_base() {
    local name=$1; shift
    if [[ ${BASE_REBUILD:-0} != 1 ]] && podman image exists "$name"; then
        return 0
    fi
    local tmp
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/fusefs-base.XXXXXX")
    echo "image: making $name with mmdebstrap from $mirror" >&2
    if ! mmdebstrap --quiet --variant=minbase "$@" bookworm "$tmp/rootfs.tar" \
            "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
            "deb $security bookworm-security main"; then
        rm -rf "$tmp"
        return 1
    fi
    podman import --change "$PATHENV" --change 'CMD ["bash"]' \
        "$tmp/rootfs.tar" "$name" >/dev/null
    rm -rf "$tmp"
}

make_base localhost/debian:12
# the slim variant: what the registry's debian:12-slim leaves out
make_base localhost/debian:12-slim \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*'

old=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
podman build --pull=never --network host -f "$root/packaging/container/Dockerfile" \
    -t "$tag" "$root"
# the image this tag named before, now untagged: not kept (the build
# stage stays, as the layer cache; `podman image prune` removes it)
new=$(podman image inspect --format '{{.Id}}' "$tag")
if [[ -n $old && $old != "$new" ]]; then
    podman rmi "$old" >/dev/null 2>&1 || true
fi
echo "$tag"
