#!/usr/bin/env bash
# Measures what the deployment files' resource requests are based on: the
# engine's (`run`) peak RSS and CPU while a generated job is replayed into
# it at full speed, and the agent's over a short sampling run. Uses the
# embedded broker and the memory store. Usage:
#   scripts/measure_footprint.sh [BUILD_DIR] [NODES] [DURATION]
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
NODES=${2:-4}
DURATION=${3:-2h}
TW=$BUILD/trainwatch
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
export TRAINWATCH_RULES_DIR=$BUILD/rules
cpu_s() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; } # utime+stime, USER_HZ 100
hwm_mib() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

"$TW" broker --bootstrap-file "$WORK/bs" >/dev/null 2>&1 & PIDS+=($!)
for _ in $(seq 50); do [ -s "$WORK/bs" ] && break; sleep 0.1; done
BS=$(cat "$WORK/bs")
"$TW" synth "$WORK/job" --preset cpu_bottleneck --nodes "$NODES" --duration "$DURATION" \
  --interval-ms 5000 --no-framework >/dev/null 2>&1
mkdir "$WORK/res"
printf 'engine:\n  results_dir: %s\n  job_idle: 5s\n' "$WORK/res" >"$WORK/run.yaml"
"$TW" run --config "$WORK/run.yaml" --brokers "$BS" -q >"$WORK/run.out" 2>"$WORK/run.err" & RUN=$!
PIDS+=($RUN)
sleep 1
c0=$(cpu_s $RUN); t0=$(date +%s.%N)
"$TW" replay "$WORK/job" --brokers "$BS" >"$WORK/replay.out" 2>&1
for _ in $(seq 600); do [ -s "$WORK/res/job.json" ] && break; sleep 0.1; done
c1=$(cpu_s $RUN); t1=$(date +%s.%N)
[ -s "$WORK/res/job.json" ] || { echo "no results: $(tail -3 "$WORK/run.err")"; exit 1; }
samples=$(python3 -c "import json;print(json.load(open('$WORK/res/job.json'))['input']['samples'])")
echo "run: $NODES node(s), $DURATION at 5 s: $samples samples replayed at full speed in" \
  "$(echo "$t1 - $t0" | bc) s; engine CPU $(echo "$c1 - $c0" | bc) s; peak RSS $(hwm_mib $RUN) MiB"
idle0=$(cpu_s $RUN); sleep 5; idle1=$(cpu_s $RUN)
echo "run idle (no traffic, 5 s): CPU $(echo "$idle1 - $idle0" | bc) s; RSS now" \
  "$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$RUN/status) MiB"

"$TW" agent --brokers "$BS" --job agentjob --interval-ms 500 --duration 10 --no-gpus -q \
  >"$WORK/agent.out" 2>&1 & AG=$!
PIDS+=($AG)
sleep 9
echo "agent: 500 ms sampling, 9 s: CPU $(cpu_s $AG) s; peak RSS $(hwm_mib $AG) MiB"
wait $AG || true
