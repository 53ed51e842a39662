#!/usr/bin/env bash
# The main job on the embedded default, from nothing: install dependencies,
# build, generate the bundled sample training job (2 nodes, 20 minutes, a
# planted CPU bottleneck; deterministic) and evaluate it with the default
# rule set, printing each rule's status and findings.
# Extra arguments go to `trainwatch eval` (e.g. --json, --semantics reference).
#
#   scripts/demo.sh --state memory|redis
# instead streams the same job: starts `trainwatch broker`, (with redis) a
# throw-away redis-server on a free loopback port, and `trainwatch run`
# with that state store; replays the job into it, waits for the job's
# results and prints them with the engine's summary line (and, with redis,
# the keys the checkpoints left). Everything started is stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=
if [ "${1:-}" = --state ]; then
  STATE=${2:-}
  case "$STATE" in
    memory|redis) shift 2 ;;
    *) echo "usage: scripts/demo.sh [--state memory|redis] | [eval options]" >&2; exit 2 ;;
  esac
fi
scripts/setup.sh
scripts/build.sh
SAMPLE=build/sample-job
if [ ! -f "$SAMPLE/.complete" ]; then
  rm -rf "$SAMPLE"
  build/trainwatch synth "$SAMPLE" --preset cpu_bottleneck --nodes 2 \
    --gpus 4 --cores 8 --duration 20m --seed 42
  touch "$SAMPLE/.complete"
fi
[ -n "$STATE" ] || exec build/trainwatch eval "$SAMPLE" "$@"

# ---- streaming: broker -> run (state store) <- replay ---------------------
export TRAINWATCH_RULES_DIR=$PWD/build/rules
TW=$PWD/build/trainwatch
WORK=$(mktemp -d /tmp/trainwatch-demo.XXXXXX)
BROKER_PID= RUN_PID= REDIS_PID=
cleanup() {
  [ -n "$RUN_PID" ] && kill -KILL "$RUN_PID" 2>/dev/null || true
  [ -n "$BROKER_PID" ] && kill -TERM "$BROKER_PID" 2>/dev/null || true
  [ -n "$REDIS_PID" ] && kill -TERM "$REDIS_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
wait_file() { # wait_file SECONDS FILE
  for _ in $(seq $(($1 * 10))); do [ -s "$2" ] && return 0; sleep 0.1; done
  return 1
}
"$TW" broker --bootstrap-file "$WORK/bootstrap" >"$WORK/broker.out" 2>"$WORK/broker.err" &
BROKER_PID=$!
wait_file 30 "$WORK/bootstrap" || { echo "demo: broker did not start" >&2; exit 1; }
BS=$(cat "$WORK/bootstrap")
mkdir -p "$WORK/results"
{
  printf 'kafka:\n  group: demo\nengine:\n  results_dir: %s\n' "$WORK/results"
  printf 'state:\n  store: %s\n' "$STATE"
} >"$WORK/run.yaml"
if [ "$STATE" = redis ]; then
  set +u; . tests/integration/lib/redis.sh; set -u
  tw_redis_start --appendonly yes
  printf '  redis:\n    port: %s\n' "$REDIS_PORT" >>"$WORK/run.yaml"
  echo "demo: redis-server on 127.0.0.1:$REDIS_PORT"
fi
echo "demo: broker at $BS; engine config:"; sed 's/^/    /' "$WORK/run.yaml"
"$TW" run --config "$WORK/run.yaml" --brokers "$BS" >"$WORK/run.out" 2>"$WORK/run.err" &
RUN_PID=$!
# 60x real time (20 s). The standalone broker keeps only 5 MiB per
# partition (9.8 MB in all here): replay waits for the engine's group
# whenever it is 3 MiB ahead, so nothing is lost even at full speed.
echo "demo: replaying $SAMPLE at 60x real time (20 s) ..."
"$TW" replay "$SAMPLE" --brokers "$BS" --job sample-job --rate 60x --group demo -q
wait_file 120 "$WORK/results/sample-job.json" ||
  { echo "demo: no results; engine log:" >&2; tail -20 "$WORK/run.err" >&2; exit 1; }
kill -TERM "$RUN_PID"; wait "$RUN_PID" || true; RUN_PID=
python3 - "$WORK/results/sample-job.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
print("\n%-28s %-14s %6s %10s" % ("rule", "status", "scans", "violations"))
for r in doc["rules"]:
    name = ("  " if r.get("parent") else "") + r["name"]
    print("%-28s %-14s %6d %10d" % (name, r["status"], r["scans"], r["violations"]))
PY
echo; cat "$WORK/run.out"
if [ "$STATE" = redis ]; then
  echo "demo: keys in redis after the job finished (README, State):"
  tw_redis_cli --raw keys '*' | grep -v ':sent:' | sort | sed 's/^/    /'
  echo "    ... and $(tw_redis_cli --raw keys '*:sent:*' | wc -l) claimed alert ids (tw:v1:sent:<id>)"
fi
