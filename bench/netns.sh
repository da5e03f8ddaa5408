#!/usr/bin/env bash
# A bandwidth-limited link to a throwaway Ceph cluster, for the epoch benchmark
# (bench/epoch.py, docs/benchmarks-epoch.md).
#
# The cluster's daemons (mon, mgr, memstore OSD, radosgw) run inside network namespace
# NS, which is joined to the host by a veth pair:
#
#   host  HOST_IF 10.213.0.1/30  <---- veth ---->  NS_IF 10.213.0.2/30  (namespace NS)
#
# Every address in the cluster (mon host, public/cluster addr, radosgw endpoint) is the
# namespace side, so a client on the host reaches mon, OSD and radosgw only through the
# veth; traffic between the daemons stays inside the namespace. `shape` puts a tbf qdisc
# on both ends (netem is not available here: only the rate is limited, no added delay).
#
# Usage:
#   netns.sh up                       create NS and the veth pair (no shaping)
#   netns.sh shape RATE_MBIT          tbf RATE_MBIT on both ends (replaces a previous one)
#   netns.sh unshape                  remove the qdiscs
#   netns.sh cluster-start DIR [cluster.sh start options]   e.g. --rgw --mem-bytes N
#   netns.sh cluster-stop DIR         stop the cluster (as cluster.sh stop)
#   netns.sh bytes                    "rx tx" byte counters of HOST_IF (host view)
#   netns.sh down                     stop nothing but the link: delete NS (and the veth)
#   netns.sh show                     addresses and qdiscs
#
# The cluster is tests/ceph/cluster.sh with 127.0.0.1 replaced by the namespace address
# (a generated copy in DIR.cluster-ns.sh; tests/ceph/cluster.sh itself is not changed),
# run with `ip netns exec NS`. CEPH_TEST_MON_PORT/CEPH_TEST_RGW_PORT as for cluster.sh.
#
# Environment: FUSEFS_NETNS (default fzbench), FUSEFS_NETNS_NET (default 10.213.0; the
# /30 uses .1 and .2), FUSEFS_NETNS_IF (host side, default fzb0; the namespace side is
# the same name with 0 -> 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
NS=${FUSEFS_NETNS:-fzbench}
NET=${FUSEFS_NETNS_NET:-10.213.0}
HOST_IF=${FUSEFS_NETNS_IF:-fzb0}
NS_IF=${HOST_IF%0}1
HOST_IP=$NET.1
NS_IP=$NET.2

die() { echo "netns.sh: $*" >&2; exit 1; }
nsx() { ip netns exec "$NS" "$@"; }

cmd_up() {
  [[ $(id -u) == 0 ]] || die "must run as root"
  if ip netns list | grep -qw "$NS"; then die "namespace $NS exists (netns.sh down first)"; fi
  ip netns add "$NS"
  ip link add "$HOST_IF" type veth peer name "$NS_IF"
  ip link set "$NS_IF" netns "$NS"
  ip addr add "$HOST_IP/30" dev "$HOST_IF"
  ip link set "$HOST_IF" up
  nsx ip addr add "$NS_IP/30" dev "$NS_IF"
  nsx ip link set "$NS_IF" up
  nsx ip link set lo up
  # reachability without ping (not installed): the namespace's ARP answer for NS_IP
  ip neigh flush dev "$HOST_IF" 2>/dev/null || true
  timeout 3 bash -c "exec 3<>/dev/tcp/$NS_IP/9" 2>/dev/null || true   # RST is fine
  ip neigh show dev "$HOST_IF" | grep -q "^$NS_IP .*lladdr" ||
    die "no ARP answer from $NS_IP through $HOST_IF"
  echo "netns.sh: $NS up: host $HOST_IF $HOST_IP <-> $NS_IF $NS_IP"
}

# tbf: burst >= rate/HZ is needed to reach the rate; 64 KiB + rate/100 is plenty and
# keeps bursts short. latency bounds the queue (TCP fills it; 20 ms of data).
cmd_shape() {
  local mbit=${1:?rate in mbit/s}
  [[ $mbit =~ ^[0-9]+$ ]] || die "rate must be an integer (mbit/s)"
  local burst=$((65536 + mbit * 1250))
  tc qdisc replace dev "$HOST_IF" root tbf rate "${mbit}mbit" burst "$burst" latency 20ms
  nsx tc qdisc replace dev "$NS_IF" root tbf rate "${mbit}mbit" burst "$burst" latency 20ms
}

cmd_unshape() {
  tc qdisc del dev "$HOST_IF" root 2>/dev/null || true
  nsx tc qdisc del dev "$NS_IF" root 2>/dev/null || true
}

gen_cluster_sh() { # DIR -> path of the namespace copy of cluster.sh
  local out=$1.cluster-ns.sh
  local re=${NS_IP//./'\\.'}   # 10\\.213... : a literal "\." in sed's replacement
  sed -e "s/127\\\\\\.0\\\\\\.0\\\\\\.1/$re/g" \
      -e "s/127\\.0\\.0\\.1/$NS_IP/g" "$root/tests/ceph/cluster.sh" >"$out"
  chmod +x "$out"
  if grep -q '127\.0\.0\.1\|127\\\.0' "$out"; then
    die "could not rewrite every 127.0.0.1 in $out: $(grep -n '127' "$out" | head -3)"
  fi
  echo "$out"
}

cmd_cluster_start() {
  local dir=${1:?DIR}; shift
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local sh; sh=$(gen_cluster_sh "$dir")
  nsx env CEPH_TEST_MON_PORT="${CEPH_TEST_MON_PORT:-6900}" \
    CEPH_TEST_RGW_PORT="${CEPH_TEST_RGW_PORT:-7600}" "$sh" start "$dir" "$@"
}

cmd_cluster_stop() {
  local dir=${1:?DIR}
  [[ -d $dir ]] || return 0
  dir=$(cd "$dir" && pwd)
  local sh=$dir.cluster-ns.sh
  [[ -x $sh ]] || sh=$(gen_cluster_sh "$dir")
  # stopping only signals pids; it works from the host even if the namespace is gone
  "$sh" stop "$dir" "${@:2}"
}

cmd_bytes() {
  local s=/sys/class/net/$HOST_IF/statistics
  echo "$(cat "$s/rx_bytes") $(cat "$s/tx_bytes")"
}

cmd_down() {
  tc qdisc del dev "$HOST_IF" root 2>/dev/null || true
  if ip netns list | grep -qw "$NS"; then ip netns del "$NS"; fi
  ip link del "$HOST_IF" 2>/dev/null || true
}

cmd_show() {
  ip -br addr show dev "$HOST_IF" || true
  tc qdisc show dev "$HOST_IF" || true
  nsx ip -br addr || true
  nsx tc qdisc show dev "$NS_IF" || true
}

cmd=${1:-}; shift || true
case $cmd in
  up) cmd_up ;;
  shape) cmd_shape "$@" ;;
  unshape) cmd_unshape ;;
  cluster-start) cmd_cluster_start "$@" ;;
  cluster-stop) cmd_cluster_stop "$@" ;;
  bytes) cmd_bytes ;;
  down) cmd_down ;;
  show) cmd_show ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
