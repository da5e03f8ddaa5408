#!/usr/bin/env bash
# Install everything fusefs needs to build and test (Debian 12 / bookworm).
# Idempotent: returns in ~1 s when everything is already installed.
# apt-get update runs at most once, and only when the package lists are missing
# or the install failed against stale lists.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  clang-14 libclang-rt-14-dev       # make fuzz, fuzz-smoke (libFuzzer)
  fuse3 libfuse3-dev
  librados-dev
  liblmdb-dev lmdb-utils
  libxxhash-dev liburing-dev
  libcurl4-openssl-dev libxml2-dev
  libinih-dev libmicrohttpd-dev
  zlib1g-dev libzstd-dev zstd      # manifests: gzip, zstd (zstd: tests)
  ceph-mon ceph-osd ceph-mgr ceph-common radosgw python3-rados
  python3-pytest python3-pytest-xdist python3-boto3 python3-torch python3-venv
  python3-prometheus-client          # tests/fuse/test_metrics.py parses the page
  attr s3cmd
  dpkg-dev debhelper fakeroot python3-yaml man-db
  systemd
  rclone s3fs python3-matplotlib iproute2 e2fsprogs curl
  libssl-dev openssl socat
  python3-seccomp tini               # test_service.py (the unit's sandbox), the container's PID 1
  podman runc catatonit mmdebstrap uidmap   # make image, tests/integration/test_containers.py
)

missing=()
for p in "${PKGS[@]}"; do
  st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [[ "$st" == ii* ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "deps: all ${#PKGS[@]} packages already installed"
  exit 0
fi

echo "deps: installing: ${missing[*]}"
SUDO=()
[[ $(id -u) -eq 0 ]] || SUDO=(sudo)
export DEBIAN_FRONTEND=noninteractive
APT_OPTS=(-y --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

updated=0
apt_update() {
  ((updated)) && return 0
  "${SUDO[@]}" apt-get update -qq
  updated=1
}

# No package lists at all (fresh container): update first.
if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then
  apt_update
fi

if ! "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" "${missing[@]}"; then
  # Stale lists (404 on a superseded version) or unknown package: update once, retry.
  apt_update
  "${SUDO[@]}" apt-get install "${APT_OPTS[@]}" "${missing[@]}"
fi
echo "deps: done"
