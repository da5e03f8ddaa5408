#!/usr/bin/env bash
# Throwaway single-node Ceph cluster (1 mon, 1 memstore OSD, 1 mgr, optional radosgw)
# for fusefs integration tests, the demo and benchmarks. Everything lives under DIR and
# binds 127.0.0.1 only.
#
# Usage:
#   cluster.sh start  DIR [--pool NAME] [--mem-bytes BYTES] [--rgw]
#   cluster.sh stop   DIR [--purge]
#   cluster.sh status DIR
#   cluster.sh osd-freeze DIR   # SIGSTOP the OSD: clients see a dead backend (ops time out)
#   cluster.sh osd-thaw   DIR   # SIGCONT the OSD: it carries on, data intact
#   cluster.sh rgw-stop   DIR   # SIGTERM (then SIGKILL) radosgw
#   cluster.sh rgw-start  DIR   # start radosgw again, wait until it answers HTTP
#
#   --pool NAME       pool to create (default fusefs; 8 PGs, size 1, application rados)
#   --mem-bytes BYTES memstore capacity (default 4 GiB); RAM use is ~2x the stored bytes
#   --rgw             also run radosgw and create S3 user fusefs-test
#   --purge           rm -rf DIR after stopping
#   status exits 0 when mon and osd.0 run (not frozen) and osd.0 is up in the osdmap.
#   Daemon logs: DIR/log/*.log; pids: DIR/run/*.pid; admin sockets: DIR/run/*.asok.
#
# Why freeze/thaw and not osd stop/start: the OSD uses memstore (RAM only); a killed OSD
# comes back empty. Freezing it simulates an unreachable backend without losing data.
#
# Environment:
#   CEPH_TEST_MON_PORT      mon port (default 6789)
#   CEPH_TEST_RGW_PORT      radosgw port (default 7480)
#   CEPH_TEST_START_TIMEOUT overall bound for `start`, seconds (default 90)
#
# After `start`, DIR/env holds `export CEPH_CONF=DIR/ceph.conf` and friends; with --rgw,
# DIR/s3.env (AWS_ACCESS_KEY_ID=/AWS_SECRET_ACCESS_KEY= lines) and DIR/aws-credentials
# (~/.aws/credentials INI format) hold the S3 user's keys.
# Only one cluster per port set can run at a time.
set -euo pipefail

FSID=5d3a8f2e-7c41-4b9e-9f0d-3e6b1a2c4d5e
OSD_UUID=0b9c1d7e-2f3a-4c5b-8d6e-7f8091a2b3c4
S3_UID=fusefs-test
S3_ACCESS=FUSEFSTESTACCESSKEY
S3_SECRET=fusefsTestSecretKey0123456789abcdefABCD

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2; }
log() { echo "cluster.sh: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Print the last lines of a log file to stderr (for failure reports).
tail_log() {
  local f=$1
  [[ -f $f ]] || return 0
  echo "---- last lines of $f ----" >&2
  tail -n 25 "$f" >&2 || true
  echo "----" >&2
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

# Remaining seconds until the global start deadline (integer, >= 0).
remaining() { awk -v d="$DEADLINE" -v n="$(now)" 'BEGIN{r=d-n; if (r<0) r=0; printf "%d", r}'; }

# ceph CLI with bounded time. Retried: right after mon start the CLI sometimes sends its
# first command with a zero fsid and gets EPERM ("problem getting command descriptions").
# Every command this script sends is idempotent.
ceph_cli() {
  local i out
  for i in 1 2 3 4; do
    if out=$(timeout 20 ceph -c "$CONF" --connect-timeout 10 "$@" 2>>"$LOGD/ceph-cli.err"); then
      [[ -z $out ]] || printf '%s\n' "$out"
      return 0
    fi
    sleep 0.5
  done
  return 1
}
# single attempt, for polling loops that retry anyway
ceph_try() { timeout 20 ceph -c "$CONF" --connect-timeout 10 "$@" 2>/dev/null; }

# ---------- paths / state ----------------------------------------------------------------

set_paths() {
  [[ -n ${1:-} ]] || usage
  mkdir -p "$1"
  DIR=$(cd "$1" && pwd)
  CONF=$DIR/ceph.conf
  RUN=$DIR/run
  LOGD=$DIR/log
  export CEPH_CONF=$CONF
  # Never let an ambient CEPH_ARGS/keyring setting point us at another cluster.
  unset CEPH_ARGS || true
}

pid_of() { # daemon name (mon.a, osd.0, mgr.x, client.rgw.a) -> pid or empty
  local f=$RUN/$1.pid
  [[ -s $f ]] || return 0
  tr -dc '0-9' <"$f"
}

# True when the pid in NAME's pid file is alive and really is that ceph daemon
# (guards against pid reuse after a reboot or a stale directory).
alive() {
  local name=$1 pid exe
  pid=$(pid_of "$name")
  [[ -n $pid ]] && [[ -d /proc/$pid ]] || return 1
  exe=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $exe == *ceph-* || $exe == *radosgw* ]] && [[ $exe == *" -c $CONF "* ]]
}

proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true; }

# Start a daemon in ceph's foreground mode (-f), detached from our session and stdio, and
# record its pid. setsid execs in place here (a non-interactive shell's background child is
# not a process-group leader), so $! is the daemon itself once the exec has happened.
# (ceph-mon/osd/mgr also write the pid file themselves; radosgw -f does not.)
spawn() { # name binary args...
  local name=$1 bin=${2##*/}; shift
  rm -f "$RUN/$name.pid"
  setsid "$@" -f -c "$CONF" </dev/null >>"$LOGD/$name.out" 2>&1 &
  local spid=$! i
  disown "$spid" 2>/dev/null || true   # no "Killed" job notices from this shell
  for ((i = 0; i < 100; i++)); do
    if [[ $(cat "/proc/$spid/comm" 2>/dev/null) == "${bin:0:15}" ]]; then
      echo "$spid" >"$RUN/$name.pid"
      return 0
    fi
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.05
  done
  tail_log "$LOGD/$name.out"; tail_log "$LOGD/$name.log"
  die "$name did not start (pid $spid)"
}

# kill_daemon NAME SIGNAL GRACE_S: signal, wait up to GRACE_S, then SIGKILL and wait.
kill_daemon() {
  local name=$1 sig=$2 grace=$3 pid i
  alive "$name" || { rm -f "$RUN/$name.pid"; return 0; }
  pid=$(pid_of "$name")
  kill -CONT "$pid" 2>/dev/null || true   # a frozen process cannot act on SIGTERM
  kill "-$sig" "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    [[ -d /proc/$pid && $(proc_state "$pid") != Z ]] || break
    sleep 0.1
  done
  if [[ -d /proc/$pid && $(proc_state "$pid") != Z ]]; then
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      [[ -d /proc/$pid && $(proc_state "$pid") != Z ]] || break
      sleep 0.1
    done
  fi
  [[ -d /proc/$pid && $(proc_state "$pid") != Z ]] && die "$name (pid $pid) did not exit"
  rm -f "$RUN/$name.pid" "$RUN/$name.asok"
}

# wait_for DESC LOGFILE MAX_S CMD...: poll CMD until it succeeds, bounded by MAX_S and by
# the global start deadline.
wait_for() {
  local desc=$1 logf=$2 max=$3; shift 3
  local rem; rem=$(remaining)
  ((max > rem)) && max=$rem
  local t0; t0=$(now)
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if awk -v a="$t0" -v b="$(now)" -v m="$max" 'BEGIN{exit !(b-a>=m)}'; then
      tail_log "$logf"
      echo "---- last check ($*): ----" >&2
      "$@" >&2 2>&1 || true
      die "timed out waiting for $desc after $(elapsed "$t0") s (start budget CEPH_TEST_START_TIMEOUT=${CEPH_TEST_START_TIMEOUT:-90} s; log: $logf)"
    fi
    sleep 0.3
  done
}

# ---------- checks ------------------------------------------------------------------------

mon_up() { ceph_try mon stat >/dev/null; }
osd_up() { ceph_try osd stat -f json | grep -q '"num_up_osds":1'; }
mgr_up() { ceph_try mgr stat -f json | grep -q '"available":true'; }

all_pgs_clean() {
  local j; j=$(ceph_try pg stat -f json) || return 1
  /usr/bin/python3 -c '
import json,sys
d=json.loads(sys.argv[1]); s=d.get("pg_summary", d)
n=s.get("num_pgs",0); by=s.get("num_pg_by_state",[])
clean=sum(x["num"] for x in by if x["name"]=="active+clean")
print("pgs:", n, ", ".join("%d %s" % (x["num"], x["name"]) for x in by))
sys.exit(0 if n>0 and clean==n else 1)' "$j"
}

rgw_port() { sed -n 's/^rgw frontends = .*endpoint=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$CONF"; }
rgw_answers() {
  local code
  code=$(curl --noproxy '*' -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$(rgw_port)/") || return 1
  [[ $code == 200 ]]
}

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# ---------- start -------------------------------------------------------------------------

write_conf() {
  local mem=$1 mon_port=$2 rgw_port=$3
  cat >"$CONF" <<EOF
# generated by tests/ceph/cluster.sh -- throwaway test cluster, do not use for real data
[global]
fsid = $FSID
mon host = v1:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr2 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth supported = none
keyring = $DIR/keyring
run dir = $RUN
crash dir = $DIR/crash
log to stderr = false
err to stderr = false
log to syslog = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon warn on insecure global id reclaim allowed = false
mon data avail warn = 2
mon data avail crit = 1
# publish PG stats (pool read counters) quickly
paxos propose interval = 0.2
osd objectstore = memstore
memstore device bytes = $mem
osd max write size = 256

[mon]
mon data = $DIR/\$name
pid file = $RUN/\$name.pid
admin socket = $RUN/\$name.asok
log file = $LOGD/\$name.log

[mgr]
mgr data = $DIR/\$name
pid file = $RUN/\$name.pid
admin socket = $RUN/\$name.asok
log file = $LOGD/\$name.log
mgr initial modules = iostat
mgr stats period = 1
mgr tick period = 1

[osd]
osd data = $DIR/\$name
pid file = $RUN/\$name.pid
admin socket = $RUN/\$name.asok
log file = $LOGD/\$name.log
osd crush update on start = false
osd class update on start = false
# survive long SIGSTOP freezes (osd-freeze) without the heartbeat map killing the OSD
osd op thread suicide timeout = 100000
osd recovery thread suicide timeout = 100000
osd command thread suicide timeout = 100000
osd heartbeat grace = 100000
osd mgr report interval = 1

[client]
rados osd op timeout = 10
rados mon op timeout = 10
client mount timeout = 10

[client.rgw.a]
rgw data = $DIR/\$name
pid file = $RUN/\$name.pid
admin socket = $RUN/\$name.asok
log file = $LOGD/\$name.log
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw init timeout = 60
# radosgw is a long-lived server: do not apply the short client timeouts to it
rados osd op timeout = 0
rados mon op timeout = 0
EOF
}

# Start osd.0 and wait until it is up with every PG active+clean (bounded). Sets OSD_OK=1
# on success; on failure (the OSD died -- seen: an early exit racing the monmap fetch -- or
# stalled) it kills the OSD, reports, and leaves OSD_OK=0. Not retried in place: memstore
# loses the PGs the OSD had created, so the caller rebuilds the whole cluster.
start_osd_once() {
  local t0 why
  OSD_OK=0
  spawn osd.0 ceph-osd -i 0
  t0=$(now)
  while :; do
    if ! alive osd.0; then why="died"; break; fi
    if all_pgs_clean >/dev/null 2>&1 && osd_up && alive osd.0; then OSD_OK=1; return 0; fi
    if awk -v a="$t0" -v b="$(now)" -v r="$(remaining)" 'BEGIN{exit !(b-a>=30 || r<=0)}'; then
      why="not up with all PGs active+clean after $(elapsed "$t0") s"
      break
    fi
    sleep 0.3
  done
  log "osd.0 $why"
  tail_log "$LOGD/osd.0.log"
  echo "---- ceph pg stat / osd stat: ----" >&2
  { all_pgs_clean; ceph_try osd stat; } >&2 2>&1 || true
  kill_daemon osd.0 KILL 1
}

# One full bring-up: mon, mgr, osd, pool. Sets OSD_OK.
bring_up() {
  local pool=$1 mem=$2 mon_port=$3 rgw_port=$4 rgw=$5
  rm -rf "$DIR"/{mon.a,osd.0,mgr.x,client.rgw.a,run,crash} \
    "$DIR"/{env,s3.env,aws-credentials,state,keyring,ceph.conf,monmap}
  mkdir -p "$RUN" "$LOGD" "$DIR/crash" "$DIR/mon.a" "$DIR/osd.0" "$DIR/mgr.x"
  : >"$DIR/keyring"
  write_conf "$mem" "$mon_port" "$rgw_port"
  printf 'POOL=%s\nRGW=%s\n' "$pool" "$rgw" >"$DIR/state"

  # mon; explicit monmap: mon.a's address (and so its bind port) comes from it
  monmaptool --create --clobber --fsid "$FSID" --addv a "[v1:127.0.0.1:$mon_port]" \
    "$DIR/monmap" >>"$LOGD/mon.a.out" 2>&1 || die "monmaptool failed"
  ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" >>"$LOGD/mon.a.out" 2>&1 ||
    { tail_log "$LOGD/mon.a.out"; tail_log "$LOGD/mon.a.log"; die "ceph-mon --mkfs failed"; }
  spawn mon.a ceph-mon -i a
  wait_for "mon.a quorum" "$LOGD/mon.a.log" 30 mon_up

  # mgr, in parallel with the OSD bring-up
  spawn mgr.x ceph-mgr -i x

  local id; id=$(ceph_cli osd create "$OSD_UUID") || die "ceph osd create failed"
  [[ $id == 0 ]] || die "ceph osd create returned '$id', expected 0"
  ceph-osd -c "$CONF" -i 0 --mkfs --osd-uuid "$OSD_UUID" >>"$LOGD/osd.0.out" 2>&1 ||
    { tail_log "$LOGD/osd.0.out"; tail_log "$LOGD/osd.0.log"; die "ceph-osd --mkfs failed"; }
  ceph_cli osd crush add osd.0 1.0 host=localhost root=default >/dev/null ||
    die "ceph osd crush add failed"

  # pool, created before the OSD boots: its PGs come up with the OSD
  ceph_cli osd pool create "$pool" 8 8 >/dev/null || die "ceph osd pool create $pool failed"
  ceph_cli osd pool application enable "$pool" rados >/dev/null || die "pool application enable failed"

  wait_for "mgr.x available" "$LOGD/mgr.x.log" 60 mgr_up
  start_osd_once
}

start_rgw() {
  alive client.rgw.a && return 0
  local port; port=$(rgw_port)
  port_busy "$port" && die "port 127.0.0.1:$port is already in use (set CEPH_TEST_RGW_PORT)"
  mkdir -p "$DIR/client.rgw.a"
  spawn client.rgw.a radosgw -n client.rgw.a
  wait_for "radosgw to answer on 127.0.0.1:$port" "$LOGD/client.rgw.a.log" 60 rgw_answers
}

create_s3_user() {
  if ! radosgw-admin -c "$CONF" user info --uid="$S3_UID" >/dev/null 2>&1; then
    radosgw-admin -c "$CONF" user create --uid="$S3_UID" --display-name="fusefs test" \
      --access-key="$S3_ACCESS" --secret-key="$S3_SECRET" >/dev/null 2>>"$LOGD/radosgw-admin.err" ||
      { tail_log "$LOGD/radosgw-admin.err"; die "radosgw-admin user create failed"; }
  fi
  (
    umask 077
    printf 'AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n' "$S3_ACCESS" "$S3_SECRET" >"$DIR/s3.env"
    printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
      "$S3_ACCESS" "$S3_SECRET" >"$DIR/aws-credentials"
  )
}

cmd_start() {
  local pool=fusefs mem=$((4 << 30)) rgw=0
  set_paths "${1:-}"; shift
  while (($#)); do
    case $1 in
      --pool) pool=${2:?--pool needs a name}; shift 2 ;;
      --mem-bytes) mem=${2:?--mem-bytes needs a number}; shift 2 ;;
      --rgw) rgw=1; shift ;;
      *) usage ;;
    esac
  done
  [[ $mem =~ ^[0-9]+$ ]] || die "--mem-bytes must be a number of bytes"
  local mon_port=${CEPH_TEST_MON_PORT:-6789} rgw_port=${CEPH_TEST_RGW_PORT:-7480}
  local T0; T0=$(now)
  DEADLINE=$(awk -v n="$T0" -v t="${CEPH_TEST_START_TIMEOUT:-90}" 'BEGIN{printf "%.3f", n+t}')

  for d in mon.a osd.0 mgr.x client.rgw.a; do
    alive "$d" && die "a cluster is already running in $DIR ($d); run: $0 stop $DIR"
  done
  port_busy "$mon_port" && die "port 127.0.0.1:$mon_port is in use (another cluster? set CEPH_TEST_MON_PORT)"
  ((rgw)) && port_busy "$rgw_port" && die "port 127.0.0.1:$rgw_port is in use (set CEPH_TEST_RGW_PORT)"

  # a failed start leaves no daemon behind (logs stay for inspection)
  trap 'rc=$?; if ((rc != 0)); then log "start failed; stopping what was started (logs in $LOGD)"; cmd_stop "$DIR" || true; fi' EXIT

  rm -rf "$LOGD"   # logs of an earlier cluster in DIR; kept across retries below
  local attempt
  for attempt in 1 2 3; do
    bring_up "$pool" "$mem" "$mon_port" "$rgw_port" "$rgw"
    ((OSD_OK)) && break
    if ((attempt == 3 || $(remaining) < 10)); then
      die "osd.0 did not come up with all PGs active+clean (log: $LOGD/osd.0.log)"
    fi
    log "rebuilding the cluster (attempt $((attempt + 1))/3)"
    cmd_stop "$DIR"
  done

  {
    echo "export CEPH_CONF=$CONF"
    echo "export CEPH_TEST_DIR=$DIR"
    echo "export CEPH_TEST_POOL=$pool"
    echo "export CEPH_TEST_MON_PORT=$mon_port"
  } >"$DIR/env"

  local msg_rgw=""
  if ((rgw)); then
    local R0; R0=$(now)
    start_rgw
    create_s3_user
    {
      echo "export CEPH_TEST_RGW_PORT=$rgw_port"
      echo "export CEPH_TEST_S3_ENDPOINT=http://127.0.0.1:$rgw_port"
      echo "export CEPH_TEST_S3_ENV=$DIR/s3.env"
      echo "export AWS_SHARED_CREDENTIALS_FILE=$DIR/aws-credentials"
    } >>"$DIR/env"
    msg_rgw=" (radosgw on 127.0.0.1:$rgw_port, $(elapsed "$R0") s of it)"
  fi
  trap - EXIT
  echo "ceph cluster ready in $(elapsed "$T0") s: $DIR, pool $pool, mon 127.0.0.1:$mon_port$msg_rgw; source $DIR/env"
}

# ---------- other subcommands -------------------------------------------------------------

cmd_stop() {
  local purge=0
  [[ -n ${1:-} ]] || usage
  if [[ ! -d $1 ]]; then return 0; fi
  set_paths "$1"; shift
  [[ ${1:-} == --purge ]] && purge=1
  # throwaway cluster: short graces (radosgw blocks in shutdown while the OSD is frozen)
  kill_daemon client.rgw.a TERM 2
  kill_daemon mgr.x TERM 2
  kill_daemon osd.0 KILL 0     # memstore: nothing to persist
  kill_daemon mon.a TERM 3
  if ((purge)); then rm -rf "${DIR:?}"; fi
  return 0
}

cmd_status() {
  set_paths "${1:?usage: status DIR}"
  local ok=0 d pid
  for d in mon.a osd.0 mgr.x client.rgw.a; do
    if alive "$d"; then
      pid=$(pid_of "$d")
      if [[ $(proc_state "$pid") == T ]]; then echo "$d: frozen (pid $pid)"; else echo "$d: running (pid $pid)"; fi
    else
      echo "$d: not running"
    fi
  done
  alive mon.a && alive osd.0 || ok=1
  if ((ok == 0)); then
    [[ $(proc_state "$(pid_of osd.0)") != T ]] || ok=1
    osd_up 2>/dev/null || { echo "osd.0 not up in the osdmap (or mon not answering)"; ok=1; }
  fi
  ((ok == 0)) && echo "cluster up" || echo "cluster down"
  return $ok
}

cmd_osd_freeze() {
  set_paths "${1:?usage: osd-freeze DIR}"
  alive osd.0 || die "osd.0 is not running"
  kill -STOP "$(pid_of osd.0)"
}

cmd_osd_thaw() {
  set_paths "${1:?usage: osd-thaw DIR}"
  alive osd.0 || die "osd.0 is not running"
  kill -CONT "$(pid_of osd.0)"
}

cmd_rgw_stop() {
  set_paths "${1:?usage: rgw-stop DIR}"
  kill_daemon client.rgw.a TERM 10
}

cmd_rgw_start() {
  set_paths "${1:?usage: rgw-start DIR}"
  [[ -f $CONF ]] || die "no cluster in $DIR"
  alive mon.a || die "mon.a is not running in $DIR"
  DEADLINE=$(awk -v n="$(now)" -v t="${CEPH_TEST_START_TIMEOUT:-90}" 'BEGIN{printf "%.3f", n+t}')
  start_rgw
}

cmd=${1:-}; shift || true
case $cmd in
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  status) cmd_status "$@" ;;
  osd-freeze) cmd_osd_freeze "$@" ;;
  osd-thaw) cmd_osd_thaw "$@" ;;
  rgw-stop) cmd_rgw_stop "$@" ;;
  rgw-start) cmd_rgw_start "$@" ;;
  -h | --help | help | "") usage ;;
  *) log "unknown subcommand: $cmd"; usage ;;
esac
