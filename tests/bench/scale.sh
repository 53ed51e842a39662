#!/usr/bin/env bash
# scale.sh - the scale benchmark (issue 14; a program that prints figures,
# not in CI; tests/integration/bench_scale_smoke.sh runs it small): one
# large job's per-node agents (bench_scale_producer: FlatBuffers batches
# made in process, flow-controlled like replay) streamed through
# `trainwatch broker` into `trainwatch run` with the Redis store and a
# checkpoint every second, for --event-minutes of event time, as fast as
# run keeps up.
#
#   tests/bench/scale.sh [BUILD_DIR] [--nodes 1000] [--gpus 8] [--cores 96]
#       [--interval-ms 500] [--event-minutes 10] [--jobs 1]
#       [--tick 60s|continuous] [--checkpoint-interval 1s] [--sample 10]
#       [--max-lag BYTES] [--compression none|lz4|zstd|...] [--realtime]
#       [--bottleneck-every E] [--init-grace MIN] [--restart-at MIN]
#       [--slice-bytes N] [--target-bytes N] [--noise] [--keep]
#       [--save-checkpoint FILE]
#
# --jobs K splits the nodes over K jobs, each on its own partition of the
# metrics topic (one job = one key = one partition). --max-lag: unread
# bytes (as produced, before compression) per partition the producer
# allows past the consumer group's committed offset (default replay's,
# within what the embedded broker keeps per partition: 5 MiB as stored,
# so compressed). run commits at each checkpoint, so the rate is at most
# about max-lag per checkpoint interval: the 100 ms load of 1000 nodes
# needs --compression zstd --max-lag 100000000 (lz4 with 30 MB already
# overflows the broker: run then counts offsets_lost). --realtime: the agents send at
# their own pace (a round every interval of wall time) instead of as fast
# as run keeps up: alert latency without a backlog, and each checkpoint
# holds about one checkpoint interval of input. --bottleneck-every E: every
# E-th node is CPU-bound (default 10; 1 = all). These agents send system
# metrics only, no step events, so in fixed semantics CPUBottleneck and
# LowGPUUtilization take the first `init_grace` minutes (default 30) as
# the job's initialization and judge nothing before: their findings come
# at the job's end unless the job is longer. --init-grace MIN sets that
# parameter (through ProfilerReport's CPUBottleneck_init_grace and
# LowGPUUtilization_init_grace), e.g. 1 with --bottleneck-every 1, so
# that CPUBottleneck fires during the job and the alert latency is that
# of alerts raised mid-job. CPUBottleneck then still waits for its
# `patience` (1000 snapshots; the nodes of a job sample at the same
# instants, so one snapshot a round: 8.3 event minutes at 500 ms): use
# --event-minutes 12 or more.
# --slice-bytes N: state.checkpoint_slice_bytes (default the engine's,
# 262144; 0 writes a job's windows and rule state whole after each scan);
# --target-bytes N: state.checkpoint_target_bytes (default the engine's,
# 1572864; 0: one slice per checkpoint). --noise: the varying part of each
# value random (bench_scale_producer --noise): the agents' pattern
# otherwise compresses far better than real utilization does.
# --restart-at MIN: at that event minute run is killed (SIGKILL) and
# started again; it restores the jobs from Redis (prints the "checkpoint
# loaded" line: parts, bytes, ms) and the run goes on. The invariants then
# count samples in the results files (each sample once across the crash).
# --save-checkpoint FILE (with --restart-at): right after the SIGKILL,
# Redis' data (the checkpoint the restart restores) is saved to FILE, an
# RDB file that tests/bench/restore.sh restores again and again.
# Prints a table every --sample seconds of wall time (run's RSS and CPU,
# samples consumed and their rate, consumer lag, checkpoints, Redis
# memory), then: sustained samples/s, run's CPU seconds per million
# samples, checkpoint p50/p99 (ms and bytes, from run's DEBUG line per
# checkpoint; then those with no scan since the previous one apart, with
# one job per partition: core, alerts and the new batches only), alert latency p50/p99 (all alerts, then those raised as
# scans run and the final ones of each job's end apart), and the
# invariants (samples consumed == produced, every job's results written,
# no offset lost, no dead letter), "invariants: ok" or exit 1.
set -u
usage() { sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }
case ${1:-} in -h | --help) usage; exit 0 ;; esac
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    BUILD=$1
    shift
else
    BUILD=build
fi
[ -d "$BUILD" ] || { echo "scale.sh: no build folder '$BUILD' (see --help)" >&2; exit 2; }
BUILD=$(cd "$BUILD" && pwd)
NODES=1000 GPUS=8 CORES=96 INTERVAL=500 MINUTES=10 JOBS=1 TICK=60s
CKPT=1s SAMPLE=10 MAXLAG= COMPRESSION=none KEEP= REALTIME= BOTTLENECK=10
NOISE= TARGET=
GRACE= RESTART= SLICE= SAVE_CKPT=
while [ $# -gt 0 ]; do
    case $1 in
    --nodes) NODES=$2; shift 2 ;;
    --gpus) GPUS=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --interval-ms) INTERVAL=$2; shift 2 ;;
    --event-minutes) MINUTES=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --tick) TICK=$2; shift 2 ;;
    --checkpoint-interval) CKPT=$2; shift 2 ;;
    --sample) SAMPLE=$2; shift 2 ;;
    --max-lag) MAXLAG=$2; shift 2 ;;
    --compression) COMPRESSION=$2; shift 2 ;;
    --realtime) REALTIME=--realtime; shift ;;
    --noise) NOISE=--noise; shift ;;
    --bottleneck-every) BOTTLENECK=$2; shift 2 ;;
    --init-grace) GRACE=$2; shift 2 ;;
    --restart-at) RESTART=$2; shift 2 ;;
    --slice-bytes) SLICE=$2; shift 2 ;;
    --target-bytes) TARGET=$2; shift 2 ;;
    --save-checkpoint) SAVE_CKPT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "scale.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
TW=$BUILD/trainwatch
# GLIBC_TUNABLES=glibc.malloc.hugetlb=1 in the environment: run's malloc
# asks for transparent huge pages (README "Memory")
PRODUCER=$BUILD/tests/bench_scale_producer
HERE=$(cd "$(dirname "$0")/../integration" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
[ -x "$PRODUCER" ] || { echo "scale.sh: $PRODUCER not built" >&2; exit 2; }
WORK=$(mktemp -d /tmp/tw-scale.XXXXXX)
BROKER_PID= PRODUCER_PID= RUN_PID_S=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
cleanup() {
    for p in ${PRODUCER_PID:-} ${RUN_PID_S:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "$KEEP" ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
die() { echo "scale: $*" >&2; exit 1; }

echo "scale: $NODES nodes x $GPUS GPUs x $CORES cores at $INTERVAL ms," \
    "$MINUTES event minutes, $JOBS job(s), tick $TICK, checkpoint every $CKPT${SLICE:+, slices of $SLICE bytes}${TARGET:+, target $TARGET bytes}${NOISE:+, random values}${REALTIME:+, paced as the agents}${GRACE:+, init_grace $GRACE min}, GLIBC_TUNABLES=${GLIBC_TUNABLES:-(none)}"
tw_redis_start || die "redis"
tw_broker_start --topic "trainwatch.metrics:$JOBS" || die "broker"
mkdir -p "$WORK/res"
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
  checkpoint_interval: $CKPT
${SLICE:+  checkpoint_slice_bytes: $SLICE
}${TARGET:+  checkpoint_target_bytes: $TARGET
}  redis:
    port: $REDIS_PORT
http:
  enabled: true
  port: 0
YAML
if [ -n "$GRACE" ]; then
    cat >>"$WORK/S.yaml" <<YAML
rules:
  - name: ProfilerReport
    parameters:
      CPUBottleneck_init_grace: $GRACE
      LowGPUUtilization_init_grace: $GRACE
YAML
fi
# -v: one DEBUG line per checkpoint (bytes, ms) for the percentiles
"$TW" run -v --config "$WORK/S.yaml" --brokers "$BOOTSTRAP" \
    >"$WORK/S.out" 2>"$WORK/S.err" &
RUN_PID_S=$!
pid=$RUN_PID_S
wait_for 60 grep -qs "assigned partition" "$WORK/S.err" || die "no assignment: $(tail -5 "$WORK/S.err")"
HTTP_PORT=$(sed -n 's/.*http: listening on .* port \([0-9]*\).*/\1/p' "$WORK/S.err" | head -1)
[ -n "$HTTP_PORT" ] || die "run's HTTP port not in its log"
metric() { # NAME: the sum of every series of that metric in /metrics
    curl -s --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics" |
        awk -v m="$1" '$1 == m || index($1, m "{") == 1 {s += $2; n++} END {if (n) printf "%.0f", s; else print "?"}'
}
tick=$(getconf CLK_TCK)
cpu_of() { awk -v t="$tick" '{printf "%.2f", ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null; }
cpu_start=$(cpu_of "$pid")
start_ns=$(date +%s%N)
"$PRODUCER" --brokers "$BOOTSTRAP" --group scale --results "$WORK/res" \
    --jobs "$JOBS" --nodes "$NODES" --gpus "$GPUS" --cores "$CORES" \
    --interval-ms "$INTERVAL" --event-minutes "$MINUTES" \
    --compression "$COMPRESSION" ${MAXLAG:+--max-lag "$MAXLAG"} $REALTIME $NOISE \
    --bottleneck-every "$BOTTLENECK" \
    >"$WORK/producer.out" 2>"$WORK/producer.err" &
PRODUCER_PID=$!
per_min=$((NODES * (2 * GPUS + 2 * CORES + 6) * 60000 / INTERVAL))
printf '%7s %9s %12s %11s %8s %8s %8s %6s %9s\n' wall_s event_min samples \
    samples_s rss_mb cpu_s lag ckpts redis_mb
prev_s=0 prev_n=0 max_lag=0 rows=0
sample() {
    local now n rate rss cpu lag ck mem
    now=$((($(date +%s%N) - start_ns) / 1000000))
    n=$(metric trainwatch_samples_total)
    [ "$n" = "?" ] && n=$prev_n
    rate=$(awk -v a="$n" -v b="$prev_n" -v t="$now" -v u="$prev_s" \
        'BEGIN{ if (t > u) printf "%.0f", (a - b) * 1000 / (t - u); else print 0 }')
    rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null)
    cpu=$(cpu_of "$pid")
    lag=$(metric trainwatch_consumer_lag)
    ck=$(metric trainwatch_checkpoints_total)
    mem=$(tw_redis_cli info memory | awk -F: '/^used_memory:/ {printf "%.1f", $2 / 1048576}')
    [ "$lag" != "?" ] && [ "$lag" -gt "$max_lag" ] && max_lag=$lag
    printf '%7.1f %9.2f %12s %11s %8s %8s %8s %6s %9s\n' \
        "$(awk -v t="$now" 'BEGIN{print t / 1000}')" \
        "$(awk -v n="$n" -v p="$per_min" 'BEGIN{print n / p}')" \
        "$n" "$rate" "${rss:-?}" "${cpu:-?}" "$lag" "$ck" "${mem:-?}"
    prev_s=$now prev_n=$n rows=$((rows + 1))
}
cpu_killed=0 restarted= S_OUT=$WORK/S.out
# --restart-at: SIGKILL run, start it again, report its restore
restart_run() {
    cpu_killed=$(awk -v a="$(cpu_of "$pid")" -v s="$cpu_start" 'BEGIN{print a - s}')
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    if [ -n "$SAVE_CKPT" ]; then
        tw_redis_cli save >/dev/null && cp "$REDIS_DIR/dump.rdb" "$SAVE_CKPT" ||
            die "could not save Redis' data to $SAVE_CKPT"
        echo "saved the checkpoint to restore (Redis' data) to $SAVE_CKPT"
    fi
    "$TW" run -v --config "$WORK/S.yaml" --brokers "$BOOTSTRAP" \
        >"$WORK/S2.out" 2>"$WORK/S2.err" &
    RUN_PID_S=$!
    pid=$RUN_PID_S
    wait_for 300 grep -qs "checkpoint loaded" "$WORK/S2.err" ||
        die "restarted run restored nothing: $(tail -5 "$WORK/S2.err")"
    cpu_start=$(cpu_of "$pid")
    wait_for 60 grep -qs "http: listening" "$WORK/S2.err" || die "no HTTP port after the restart"
    HTTP_PORT=$(sed -n 's/.*http: listening on .* port \([0-9]*\).*/\1/p' "$WORK/S2.err" | head -1)
    echo "restart at event minute $RESTART: run killed (SIGKILL) and started again;" \
        "$(grep -m1 -o 'partition [0-9]*: checkpoint loaded.*' "$WORK/S2.err")"
    grep -o 'checkpoint loaded, [0-9]* job(s) restored ([0-9]* part(s), [0-9]* bytes, [0-9.]* ms' "$WORK/S2.err" |
        awk -F'[(, ]+' '{for (i = 1; i <= NF; i++) { if ($i == "bytes") b += $(i - 1); if ($i == "ms") m = $(i - 1) > m ? $(i - 1) : m } n++}
            END {printf "restore: partitions=%d bytes=%d slowest_partition_ms=%.1f\n", n, b, m}'
    restarted=1 S_OUT=$WORK/S2.out
}
while kill -0 "$PRODUCER_PID" 2>/dev/null; do
    sample
    if [ -n "$RESTART" ] && [ -z "$restarted" ] &&
        awk -v n="$prev_n" -v p="$per_min" -v m="$RESTART" 'BEGIN{exit !(n / p >= m)}'; then
        restart_run
    fi
    for _ in $(seq "$((SAMPLE * 10))"); do
        kill -0 "$PRODUCER_PID" 2>/dev/null || break
        kill -0 "$pid" 2>/dev/null || die "run exited: $(tail -5 "$WORK/S.err")"
        sleep 0.1
    done
done
wait "$PRODUCER_PID"
prc=$?
PRODUCER_PID=
sample
cpu_end=$(cpu_of "$pid")
hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status")
tw_run_stop S || die "run's exit status"
tw_broker_stop
cat "$WORK/producer.out"
[ $prc -eq 0 ] || die "producer failed ($prc): $(tail -5 "$WORK/producer.err")"
P=$(grep '^producer:' "$WORK/producer.out")
RUNLINE=$(grep '^run:' "$S_OUT")
echo "$RUNLINE" | tr ' ' '\n' | grep -E '^(samples|batches|dead_letters|late|offsets_lost|checkpoints|scans|alerts_sent|results_written)=' | tr '\n' ' '
echo
produced=$(field samples "$P")
consumed=$(field samples "$RUNLINE")
# what the jobs counted: each sample once, whatever was re-read
counted=$(python3 -c 'import json, sys
print(sum(json.load(open(f))["input"]["samples"] for f in sys.argv[1:]))' "$WORK/res"/*.json 2>/dev/null)
[ -n "$restarted" ] && consumed=$counted
wall=$(field wall_s "$P")
awk -v n="$consumed" -v w="$wall" -v c0="$cpu_start" -v c1="$cpu_end" -v ck="$cpu_killed" -v h="$hwm" 'BEGIN{
    c = c1 - c0 + ck
    printf "sustained: samples=%d wall_s=%.1f samples_per_s=%.0f run_cpu_s=%.1f cpu_s_per_million_samples=%.2f run_peak_rss_mb=%s\n",
        n, w, n / w, c, c * 1e6 / n, h }'
echo "consumer lag: max_messages=$max_lag (sum over partitions, sampled every $SAMPLE s)"
python3 - "$WORK/S.err" ${restarted:+"$WORK/S2.err"} <<'PY'
import re, sys
ms, by = [], []
pat = re.compile(r"checkpoint partition \d+: .*, (\d+) part\(s\), (\d+) bytes, \d+ finished, ([0-9.]+) ms")
# with one job per partition (--jobs <= the topic's partitions), a
# checkpoint of at most 3 parts (core, alerts, the new batches' chunks.<n>)
# had no scan since the previous one: no windows, rule part or released
# segment
quiet_ms, quiet_by = [], []
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = pat.search(line)
        if m:
            by.append(int(m.group(2))); ms.append(float(m.group(3)))
            if int(m.group(1)) <= 3:
                quiet_by.append(int(m.group(2))); quiet_ms.append(float(m.group(3)))
def pct(v, q):
    v = sorted(v); return v[min(len(v) - 1, int(len(v) * q))]
if ms:
    print("checkpoints: n=%d ms_p50=%.1f ms_p99=%.1f ms_max=%.1f bytes_p50=%d bytes_p99=%d bytes_max=%d bytes_total=%d"
          % (len(ms), pct(ms, .5), pct(ms, .99), max(ms), pct(by, .5), pct(by, .99), max(by), sum(by)))
else:
    print("checkpoints: n=0")
if quiet_ms:
    print("  without a scan or a state slice since the previous: n=%d ms_p50=%.1f ms_p99=%.1f bytes_p50=%d bytes_p99=%d"
          % (len(quiet_ms), pct(quiet_ms, .5), pct(quiet_ms, .99), pct(quiet_by, .5), pct(quiet_by, .99)))
# a job's state snapshot whole in the store (DEBUG line, job_state.c): until
# then a restore runs the scans since the previous snapshot again
snap = re.compile(r"state snapshot \d+ in the store: (\d+) slice\(s\), (\d+) bytes, over (\d+) checkpoint\(s\), ([0-9.]+) s after it was taken; (\d+) scan")
sl, sb, sc, ss, sp = [], [], [], [], []
for path in sys.argv[1:]:
    for line in open(path, errors="replace"):
        m = snap.search(line)
        if m:
            sl.append(int(m.group(1))); sb.append(int(m.group(2)))
            sc.append(int(m.group(3))); ss.append(float(m.group(4))); sp.append(int(m.group(5)))
if ss:
    print("state snapshots: n=%d slices_p50=%d bytes_p50=%d in_store_after_s_p50=%.1f max=%.1f checkpoints_p50=%d max=%d scans_since_at_landing_max=%d"
          % (len(ss), pct(sl, .5), pct(sb, .5), pct(ss, .5), max(ss), pct(sc, .5), max(sc), max(sp)))
PY
grep '^alerts:' "$WORK/producer.out" | sed 's/^alerts:/alert latency (tick '"$TICK"'):/'
grep '^alerts not final:' "$WORK/producer.out" | sed 's/^alerts not final:/  not final (as scans run):/'
grep '^alerts final:' "$WORK/producer.out" | sed 's/^alerts final:/  final (job end):/'
fail=
[ "$produced" = "$consumed" ] || fail="$fail samples produced=$produced consumed=$consumed;"
[ "$produced" = "$counted" ] || fail="$fail samples produced=$produced counted in results=$counted;"
[ "$(field results "$P")" = all ] || fail="$fail results missing;"
[ "$(ls "$WORK/res"/*.json 2>/dev/null | wc -l)" -eq "$JOBS" ] || fail="$fail results files != $JOBS;"
[ "$(field results_written "$RUNLINE")" = "$JOBS" ] || fail="$fail results_written != $JOBS;"
[ "$(field offsets_lost "$RUNLINE")" = 0 ] || fail="$fail offsets lost;"
[ "$(field dead_letters "$RUNLINE")" = 0 ] || fail="$fail dead letters;"
[ "$(field checkpoints "$RUNLINE")" -gt 0 ] || fail="$fail no checkpoint;"
[ -z "$fail" ] || die "invariants violated:$fail"
echo "invariants: ok (samples consumed == produced = $consumed, $JOBS results file(s), no offset lost, no dead letter)"
