#!/usr/bin/env bash
# restore.sh - how long `trainwatch run` takes to restore a saved
# checkpoint (issue 14: a full restore of a 1000-node job), again and
# again on the same data (a program that prints figures, not in CI).
#
#   tests/bench/restore.sh [BUILD_DIR] --rdb FILE [--tick 60s] [--reps 5]
#       [--perf FILE]
#
# FILE is Redis' data saved at a crash (tests/bench/scale.sh
# --restart-at MIN --save-checkpoint FILE). Each repetition starts a
# redis-server on that data and a broker with one empty partition, starts
# `run` with the scale benchmark's configuration (--tick as there), waits
# for its "checkpoint loaded" line and stops it. Prints that line's split
# (store, batches, scans run again, rest) per repetition, then the
# median and the minimum of the total. --perf FILE: the last repetition
# runs under `perf record -g` into FILE.
set -u
usage() { sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
case ${1:-} in -h | --help) usage; exit 0 ;; esac
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    BUILD=$1
    shift
else
    BUILD=build
fi
[ -d "$BUILD" ] || { echo "restore.sh: no build folder '$BUILD' (see --help)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
RDB= TICK=60s REPS=5 PERF=
while [ $# -gt 0 ]; do
    case $1 in
    --rdb) RDB=$2; shift 2 ;;
    --tick) TICK=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --perf) PERF=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "restore.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$RDB" ] || { echo "restore.sh: --rdb FILE is required (see --help)" >&2; exit 2; }
[ -r "$RDB" ] || { echo "restore.sh: cannot read '$RDB'" >&2; exit 2; }
case $REPS in '' | *[!0-9]* | 0) echo "restore.sh: --reps wants a count of 1 or more" >&2; exit 2 ;; esac
TW=$BUILD/trainwatch
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in the environment: run's malloc
# asks for transparent huge pages (README "Memory")
echo "restore: GLIBC_TUNABLES=${GLIBC_TUNABLES:-(none)}"
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
HERE=$(cd "$(dirname "$0")/../integration" && pwd)
WORK=$(mktemp -d /tmp/tw-restore.XXXXXX)
BROKER_PID= RUN_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
cleanup() {
    [ -n "${RUN_PID:-}" ] && kill -KILL "$RUN_PID" 2>/dev/null
    tw_broker_stop >/dev/null 2>&1
    tw_redis_stop
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "restore: $*" >&2; exit 1; }

totals=
for rep in $(seq "$REPS"); do
    mkdir -p "$WORK/data" "$WORK/res"
    cp "$RDB" "$WORK/data/dump.rdb"
    tw_redis_start --dir "$WORK/data" --dbfilename dump.rdb || die "redis"
    tw_broker_start --topic "trainwatch.metrics:1" || die "broker"
    cat >"$WORK/S.yaml" <<YAML
tick: $TICK
kafka:
  group: scale
engine:
  results_dir: $WORK/res
  report_html: false
  progress_interval: 0
state:
  store: redis
  redis:
    port: $REDIS_PORT
YAML
    wrap=()
    [ -n "$PERF" ] && [ "$rep" = "$REPS" ] && wrap=(perf record -q --call-graph "${PERF_CALLGRAPH:-dwarf,16384}" -o "$PERF" --)
    "${wrap[@]}" "$TW" run -v --config "$WORK/S.yaml" --brokers "$BOOTSTRAP" \
        >"$WORK/S.out" 2>"$WORK/S.err" &
    RUN_PID=$!
    wait_for 300 grep -qs "checkpoint loaded" "$WORK/S.err" ||
        die "run restored nothing: $(tail -5 "$WORK/S.err")"
    line=$(grep -m1 -o 'checkpoint loaded, .*ms: [^)]*)' "$WORK/S.err")
    echo "rep $rep: $line"
    totals="$totals $(sed -n 's/.* bytes, \([0-9.]*\) ms:.*/\1/p' <<<"$line")"
    # perf writes its file when the program it runs ends
    if [ ${#wrap[@]} -gt 0 ]; then
        pkill -INT -P "$RUN_PID" 2>/dev/null
    else
        kill -INT "$RUN_PID" 2>/dev/null
    fi
    wait "$RUN_PID" 2>/dev/null
    RUN_PID=
    tw_broker_stop >/dev/null 2>&1
    tw_redis_stop
    rm -rf "$WORK/data" "$WORK/res"
done
printf '%s\n' $totals | sort -n | awk '{v[NR] = $1}
    END {printf "restore ms: reps=%d median=%.1f min=%.1f max=%.1f\n", NR, v[int((NR + 1) / 2)], v[1], v[NR]}'
