#!/usr/bin/env bash
# The demo, from a fresh Debian 12 machine (as root): installs dependencies,
# builds fusefs, starts a throwaway single-node Ceph cluster on 127.0.0.1,
# loads a sample dataset (shards and small files) into a RADOS pool, mounts
# it, lists and reads it cold and warm, remounts to show the persistent
# cache, prints the stats, and cleans everything up.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)" >/dev/null
BIN=$PWD/build/bin/fusefs
W=$(mktemp -d /tmp/fusefs-demo.XXXXXX)
MNT=$W/mnt
mkdir -p "$MNT"

cleanup() {
	mountpoint -q "$MNT" && fusermount3 -u "$MNT" || true
	tests/ceph/cluster.sh stop "$W/ceph" >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT

tests/ceph/cluster.sh start "$W/ceph"
CONF=$W/ceph/ceph.conf
echo "== loading a sample dataset: 16 shards of 8 MiB, 200 small files =="
for i in $(seq -w 0 15); do
	head -c $((8 << 20)) /dev/urandom > "$W/shard"
	rados -c "$CONF" -p fusefs put "imagenet-mini/train/shard-$i.tar" "$W/shard"
done
for i in $(seq -w 0 199); do
	echo "label $i" > "$W/small"
	rados -c "$CONF" -p fusefs put "imagenet-mini/labels/$i.txt" "$W/small"
done

echo "== mount rados://fusefs/imagenet-mini on $MNT =="
"$BIN" mount rados://fusefs/imagenet-mini "$MNT" --cache-dir "$W/cache" \
	--cache-size 1G --ceph-conf "$CONF"
ls -l "$MNT" "$MNT/train" | head -12
echo "labels: $(ls "$MNT/labels" | wc -l) files; $(cat "$MNT/labels/042.txt")"

timed_read() {
	sync; echo 3 > /proc/sys/vm/drop_caches
	local t0=$(date +%s.%N)
	cat "$MNT"/train/* > /dev/null
	awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f MiB/s", 128/(b-a)}'
}
echo "cold read of 128 MiB (from Ceph):   $(timed_read)"
echo "warm read of 128 MiB (local cache): $(timed_read)"
"$BIN" stats "$MNT" | grep -E '^(hits|misses|bytes_from|cache_bytes|checksum)'

echo "== remount: the cache survives =="
fusermount3 -u "$MNT"
sleep 1
"$BIN" mount rados://fusefs/imagenet-mini "$MNT" --cache-dir "$W/cache" \
	--cache-size 1G --ceph-conf "$CONF"
echo "read after remount:                 $(timed_read)"
"$BIN" stats "$MNT" | grep -E '^(bytes_from|verified_chunks|stop_trusted|checksum)'
echo "== done: unmounting and stopping the cluster =="
