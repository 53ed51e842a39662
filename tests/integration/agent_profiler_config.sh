#!/usr/bin/env bash
# agent_profiler_config.sh BUILD_DIR - `trainwatch agent --profiler-config`:
# every invalid case of the table the hook and the engine share
# (tests/data/profiler_config_cases.json) is refused (exit 2) with a
# message naming its fields, before anything is sent; so are a file that is
# not JSON, a missing file and an --interval-ms that contradicts the
# configuration. A valid one (inline, and from @FILE) goes out in the
# agent's JOB_START marker, read back from `trainwatch broker` with the
# generated readers, and sets the sampling interval.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-agent-pc.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
cleanup() {
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- refused before anything is sent (no broker listens on port 1) ------
"$PY" - "$SRC/tests/data/profiler_config_cases.json" "$WORK/cases" <<'PYEOF' || fail "case table"
import json, os, sys
cases = json.load(open(sys.argv[1]))["cases"]
os.makedirs(sys.argv[2])
n = 0
for i, c in enumerate(cases):
    if "error" not in c:
        continue
    d = os.path.join(sys.argv[2], "%03d" % i)
    os.makedirs(d)
    open(d + "/config.json", "w").write(json.dumps(c["config"]))
    open(d + "/fields", "w").write("\n".join(c["error"]) + "\n")
    open(d + "/name", "w").write(c["name"])
    n += 1
assert n >= 10, n
PYEOF
REFUSED=0
for d in "$WORK"/cases/*; do
    name=$(cat "$d/name")
    "$TW" agent --brokers 127.0.0.1:1 --job pc --no-gpus --duration 1 \
        --profiler-config "$(cat "$d/config.json")" >"$d/out" 2>"$d/err"
    rc=$?
    [ "$rc" = 2 ] || fail "case '$name': exit $rc, not 2: $(cat "$d/err")"
    while read -r field; do
        grep -qF -- "$field" "$d/err" || fail "case '$name': '$(cat "$d/err")' does not name $field"
    done <"$d/fields"
    REFUSED=$((REFUSED + 1))
done
echo '{"system_monitor_interval_millis": 100,' >"$WORK/broken.json"
"$TW" agent --brokers 127.0.0.1:1 --job pc --no-gpus --duration 1 \
    --profiler-config @"$WORK/broken.json" 2>"$WORK/broken.err"
[ $? = 2 ] && grep -q "broken.json: line" "$WORK/broken.err" || fail "not JSON: $(cat "$WORK/broken.err")"
"$TW" agent --brokers 127.0.0.1:1 --job pc --no-gpus --duration 1 \
    --profiler-config @"$WORK/absent.json" 2>"$WORK/absent.err"
[ $? = 2 ] && grep -q "absent.json" "$WORK/absent.err" || fail "missing file: $(cat "$WORK/absent.err")"
"$TW" agent --brokers 127.0.0.1:1 --job pc --no-gpus --duration 1 \
    --interval-ms 500 --profiler-config '{"system_monitor_interval_millis": 200}' \
    2>"$WORK/differ.err"
[ $? = 2 ] && grep -q "system_monitor_interval_millis 200 differ" "$WORK/differ.err" ||
    fail "--interval-ms against the configuration: $(cat "$WORK/differ.err")"

# ---- a valid one goes out in JOB_START --------------------------------------
CONFIG='{"system_monitor_interval_millis":200,"framework_profile_params":{"start_step":3,"num_steps":4,"python_profiling_config":{"python_profiler":"cprofile","cprofile_timer":"cpu_time"}}}'
printf '{\n  "system_monitor_interval_millis": 1000\n}\n' >"$WORK/file.json"
tw_broker_start || fail "broker start"
"$TW" agent --brokers "$BOOTSTRAP" --job inline --no-gpus --duration 1.2 -q \
    --profiler-config "$CONFIG" >"$WORK/inline.out" 2>"$WORK/inline.err" ||
    fail "agent inline: $(cat "$WORK/inline.err")"
"$TW" agent --brokers "$BOOTSTRAP" --job file --no-gpus --duration 2.5 -q \
    --profiler-config @"$WORK/file.json" >"$WORK/file.out" 2>"$WORK/file.err" ||
    fail "agent @file: $(cat "$WORK/file.err")"
"$TW" agent --brokers "$BOOTSTRAP" --job plain --no-gpus --duration 1 -q \
    >"$WORK/plain.out" 2>"$WORK/plain.err" || fail "agent plain: $(cat "$WORK/plain.err")"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.metrics -o beginning -e -q \
    -f '%R%s' >"$WORK/metrics.bin" || fail "kcat -C metrics"
"$PY" "$HERE/hook/decode.py" "$WORK/metrics.bin" >"$WORK/metrics.jsonl" || fail "decode"
"$PY" - "$WORK/metrics.jsonl" "$CONFIG" <<'PYEOF' || fail "JOB_START markers"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def start(job):
    ms = [m for r in rows if r["job"] == job for m in r["markers"]
          if m["kind"] == 1]
    assert len(ms) == 1, (job, ms)
    return ms[0]
m = start("inline")
assert m["config"] == json.loads(sys.argv[2]), m
assert m["interval"] == 200, m
m = start("file")
assert m["config"] == {"system_monitor_interval_millis": 1000}, m
assert m["interval"] == 1000, m
m = start("plain")
assert m["config"] is None and m["interval"] == 500, m
# JOB_END carries no configuration
assert all(m["config"] is None for r in rows for m in r["markers"]
           if m["kind"] == 2)
PYEOF
tw_broker_stop || fail "broker stop"
echo "PASS agent_profiler_config: $REFUSED invalid configurations refused naming their fields; JOB_START carries a valid one (inline and @FILE) with its interval"
