#!/usr/bin/env bash
# fusefs-entrypoint - the fusefs container's PID 1: mount from the
# environment (and/or a config file), stay in the foreground, unmount on
# SIGTERM, never leave a dead mount behind on the (propagated) volume.
#
# Environment (see docs/kubernetes.md):
#   FUSEFS_SOURCE        rados://POOL[/PREFIX] or s3://BUCKET[/PREFIX]
#   FUSEFS_MOUNTPOINT    where to mount (default /mnt/data)
#   FUSEFS_CONFIG        an INI config file ([mount] section); optional
#   FUSEFS_<OPTION>      any long option of `fusefs --help`, upper case,
#                        '-' as '_': FUSEFS_CACHE_DIR=/cache,
#                        FUSEFS_CACHE_SIZE=200G, FUSEFS_METRICS=0.0.0.0:9464;
#                        flags take true/false (FUSEFS_ALLOW_OTHER=true)
#   FUSEFS_OPTIONS       extra -o options, comma separated
#   FUSEFS_BIN           the fusefs binary (default: fusefs on PATH)
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY[, AWS_SESSION_TOKEN]
#                        S3 keys (from a Secret), or FUSEFS_CREDENTIALS_FILE
#                        pointing at a mounted Secret file
# Defaults: FUSEFS_CACHE_DIR=/var/cache/fusefs unless the config file or
# FUSEFS_OPTIONS names one.
#
# With arguments, they are run instead (e.g. `fusefs stats /mnt/data`),
# except for `run CMD...`: mount as above, run CMD (the training job)
# once the mount answers, forward SIGTERM/SIGINT/SIGHUP to it, and when
# it exits unmount (SIGTERM to fusefs, which saves the index) and exit
# with its status.  That is the single-container pod: fusefs and the
# trainer in one container, under tini as PID 1 (zombie reaping):
#   tini -- fusefs-entrypoint run python3 train.py
set -euo pipefail

workload=()
if (($#)); then
    [[ $1 == run ]] || exec "$@"
    shift
    (($#)) || { echo "fusefs-entrypoint: run needs a command" >&2; exit 2; }
    workload=("$@")
fi

FUSEFS=${FUSEFS_BIN:-fusefs}
mnt=${FUSEFS_MOUNTPOINT:-/mnt/data}
args=(mount)
[[ -n ${FUSEFS_SOURCE:-} ]] && args+=("$FUSEFS_SOURCE")
args+=("$mnt" -f)

# every FUSEFS_<OPTION> whose name is an option of this fusefs
helptext=$("$FUSEFS" --help 2>&1) || true
mapfile -t known < <(sed -n 's/^  --\([a-z0-9-]*\).*/\1/p' <<<"$helptext")
if ((${#known[@]} == 0)); then
    echo "fusefs-entrypoint: '$FUSEFS --help' lists no options:" >&2
    printf '%s\n' "$helptext" | head -5 >&2
    exit 1
fi
declare -A is_option=()
have_cache_dir=0
for opt in "${known[@]}"; do
    is_option[$opt]=1
    var=FUSEFS_$(tr 'a-z-' 'A-Z_' <<<"$opt")
    [[ -v $var ]] || continue
    val=${!var}
    case $opt in
    cache-dir) have_cache_dir=1 ;;
    esac
    case ${val,,} in
    true | yes | on) args+=("--$opt") ;;
    false | no | off) ;;
    *) args+=("--$opt=$val") ;;
    esac
done
# a FUSEFS_* variable that is none of the above is a mistake: say so
for var in $(compgen -e | grep '^FUSEFS_' || true); do
    case $var in
    FUSEFS_SOURCE | FUSEFS_MOUNTPOINT | FUSEFS_OPTIONS | FUSEFS_BIN) continue ;;
    esac
    opt=$(tr 'A-Z_' 'a-z-' <<<"${var#FUSEFS_}")
    # (not `printf ... | grep -q`: under pipefail, grep leaving early
    # fails printf with EPIPE, and a known option looked unknown)
    if [[ -z $opt || -z ${is_option[$opt]:-} ]]; then
        echo "fusefs-entrypoint: $var is not a fusefs option (fusefs --help)" >&2
        exit 2
    fi
done
if [[ -n ${FUSEFS_OPTIONS:-} ]]; then
    args+=(-o "$FUSEFS_OPTIONS")
    [[ $FUSEFS_OPTIONS == *cache_dir=* || $FUSEFS_OPTIONS == *cache-dir=* ]] && have_cache_dir=1
fi
if ((!have_cache_dir)) && ! { [[ -n ${FUSEFS_CONFIG:-} ]] &&
    grep -Eq '^[[:space:]]*cache[-_]dir[[:space:]]*=' "$FUSEFS_CONFIG"; }; then
    args+=(--cache-dir=/var/cache/fusefs)
fi

mkdir -p "$mnt"

# a mount left by a previous container that was killed (SIGKILL, OOM):
# every access fails with ENOTCONN; detach it before mounting again
detach_dead() {
    if ! stat "$mnt" >/dev/null 2>&1 && grep -qs " $mnt fuse" /proc/self/mounts; then
        echo "fusefs-entrypoint: detaching the dead mount on $mnt" >&2
        umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
    fi
}
detach_dead

# the command as logged: a URL's USER:KEY@ (an endpoint, manifest, source
# or -o value; fusefs refuses it without repeating it) is shown as ***@,
# up to the last @ of the argument (a secret key may hold '/'), so the
# secret never reaches the pod log; also a USER:KEY@ without a scheme
redact() {
    sed -E -e 's#://[^[:space:]]*@#://***@#g' \
        -e 's#(^|[=,])[^=,:/@[:space:]]+:([^/[:space:]]|/[^/[:space:]])[^[:space:]]*@#\1***@#g' \
        <<<"$1"
}
shown=()
for a in "${args[@]}"; do
    shown+=("$(redact "$a")")
done
echo "fusefs-entrypoint: $FUSEFS ${shown[*]}" >&2
"$FUSEFS" "${args[@]}" &
child=$!

# detach the mount if fusefs left it behind (it died instead of unmounting)
detach_left() {
    if grep -qs " $mnt fuse" /proc/self/mounts; then
        echo "fusefs-entrypoint: fusefs exited ($1) leaving $mnt mounted: detaching" >&2
        umount -l "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null || true
    fi
}

# wait for @1 until it has really exited (wait returns early, with
# 128+signal, when a trapped signal arrives); its status in $rc.  The last
# wait asks again once it is gone: an interrupted wait whose child then
# exited before the kill -0 would otherwise report 143, not the child's
# status (bash keeps the status of a reaped background job)
rc=0
wait_for() {
    while kill -0 "$1" 2>/dev/null; do
        wait "$1" && rc=0 || rc=$?
    done
    wait "$1" 2>/dev/null && rc=0 || rc=$?
}

if ((${#workload[@]})); then
    # the job starts once the mount answers; it gets the signals
    until "$FUSEFS" stats "$mnt" >/dev/null 2>&1; do
        if ! kill -0 "$child" 2>/dev/null; then
            wait "$child" && rc=0 || rc=$?
            echo "fusefs-entrypoint: fusefs exited ($rc) before the mount answered" >&2
            exit $((rc ? rc : 1))
        fi
        sleep 0.2
    done
    "${workload[@]}" &
    job=$!
    trap 'kill -TERM "$job" 2>/dev/null || true' TERM
    trap 'kill -INT "$job" 2>/dev/null || true' INT
    trap 'kill -HUP "$job" 2>/dev/null || true' HUP
    wait_for "$job"
    jobrc=$rc
    trap - TERM INT HUP
    kill -TERM "$child" 2>/dev/null || true
    wait_for "$child"
    detach_left "$rc"
    exit "$jobrc"
fi

trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT
trap 'kill -HUP "$child" 2>/dev/null || true' HUP
wait_for "$child"
# fusefs unmounts on SIGTERM; if it died instead, do not leave the
# propagated mount point dead for the other containers and the node
detach_left "$rc"
exit "$rc"
