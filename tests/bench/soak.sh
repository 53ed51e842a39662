#!/usr/bin/env bash
# soak.sh - a soak benchmark (a program that prints figures; not in CI):
# a generated job of HOURS hours on NODES nodes streamed at RATE through
# `trainwatch broker` into `trainwatch run` with the Redis store and a
# checkpoint every second. Every SAMPLE seconds of wall time it prints the
# engine's RSS, its CPU seconds, Redis' used memory and the checkpoint
# count, against the event time reached; at the end it compares the
# results with `eval --json` of the same folder.
#
#   tests/bench/soak.sh [BUILD_DIR] [--hours 24] [--nodes 16] [--rate 100x]
#                       [--interval-ms 5000] [--sample 60] [--keep]
#
# Defaults are the hardening issue's soak: 24 h, 16 nodes, 100x (14.4 min
# of wall time), system metrics every 5 s (the mock broker keeps 5 MiB per
# partition; replay's flow control waits for the engine's group).
set -u
BUILD=$(cd "${1:-build}" && pwd)
[ $# -gt 0 ] && shift
HOURS=24 NODES=16 RATE=100x INTERVAL=5000 SAMPLE=60 KEEP=
while [ $# -gt 0 ]; do
    case $1 in
    --hours) HOURS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --interval-ms) INTERVAL=$2; shift 2 ;;
    --sample) SAMPLE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    *) echo "soak.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")/../integration" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-soak.XXXXXX)
BROKER_PID= REPLAY_PID= RUN_PID_S=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
cleanup() {
    for p in ${RUN_PID_S:-} ${REPLAY_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "$KEEP" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "soak: $*" >&2; exit 1; }

JOB=soak-job
echo "soak: $HOURS h x $NODES nodes at $RATE, samples every $INTERVAL ms"
"$TW" synth "$WORK/$JOB" --preset cpu_bottleneck --nodes "$NODES" \
    --duration "${HOURS}h" --interval-ms "$INTERVAL" --no-framework \
    >/dev/null 2>"$WORK/synth.err" || die "synth: $(cat "$WORK/synth.err")"
echo "soak: folder $(du -sh "$WORK/$JOB" | cut -f1)"
t0=$(date +%s.%N)
"$TW" eval "$WORK/$JOB" --json --quiet >"$WORK/eval.json" || die "eval"
echo "soak: eval $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"

tw_redis_start || die "redis"
tw_broker_start || die "broker"
cat >"$WORK/S.yaml" <<YAML
kafka:
  group: soak
engine:
  results_dir: $WORK/res
  progress_interval: 5s
state:
  store: redis
  checkpoint_interval: 1s
  redis:
    port: $REDIS_PORT
rules:
  - name: ProfilerReport
YAML
mkdir -p "$WORK/res"
tw_run_start S "$WORK/S.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/S.err" || die "no assignment"
"$TW" replay "$WORK/$JOB" --brokers "$BOOTSTRAP" --rate "$RATE" --group soak \
    -q >"$WORK/replay.out" 2>&1 &
REPLAY_PID=$!
pid=$RUN_PID_S
tick=$(getconf CLK_TCK)
start=$(date +%s)
total=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["input"]["samples"])' "$WORK/eval.json")
# event time reached = the share of the job's samples the engine has had
printf '%8s %10s %9s %10s %12s\n' wall_s event_h rss_mb cpu_s redis_mb
sample() {
    local now rss cpu mem got
    now=$(($(date +%s) - start))
    got=$(grep 'progress:' "$WORK/S.err" | tail -1 | sed -n 's/.* samples=\([0-9]*\).*/\1/p')
    [ -f "$WORK/res/$JOB.json" ] && got=$total
    rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null)
    cpu=$(awk -v t="$tick" '{printf "%.1f", ($14 + $15) / t}' "/proc/$pid/stat" 2>/dev/null)
    mem=$(tw_redis_cli info memory | awk -F: '/^used_memory:/ {printf "%.1f", $2 / 1048576}')
    printf '%8d %10.2f %9s %10s %12s\n' "$now" \
        "$(awk -v g="${got:-0}" -v t="$total" -v h="$HOURS" 'BEGIN{print h * g / t}')" \
        "${rss:-?}" "${cpu:-?}" "${mem:-?}"
}
while kill -0 "$REPLAY_PID" 2>/dev/null; do
    sample
    for _ in $(seq "$SAMPLE"); do
        kill -0 "$REPLAY_PID" 2>/dev/null || break
        sleep 1
    done
done
wait "$REPLAY_PID" || die "replay: $(cat "$WORK/replay.out")"
REPLAY_PID=
wait_for 600 test -f "$WORK/res/$JOB.json" || die "no results"
sample
tw_run_stop S || die "run exit status"
tw_broker_stop
echo "soak: replay: $(cat "$WORK/replay.out")"
echo "soak: run: $(cat "$WORK/S.out")"
if python3 "$HERE/lib/results.py" same "$WORK/eval.json" "$WORK/res/$JOB.json"; then
    echo "soak: results equal to eval's"
else
    die "results differ from eval's"
fi
