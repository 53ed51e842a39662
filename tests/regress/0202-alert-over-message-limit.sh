#!/usr/bin/env bash
# 0202-alert-over-message-limit.sh BUILD_DIR - edge-case issue, defect 2
# (oversized alert).
#
# Defect: an alert is the rule's report plus the job's node list, so a
# legitimate job of ~6 000 nodes had a 1.19 MB final alert, more than the
# producer's message.max.bytes (1 000 000): librdkafka refused it, `run`
# exited 1 and every restart failed on the same job.
#
# Asserts, with the same situation scaled down (message.max.bytes 4000 in
# kafka.properties, a 300-node job whose node list alone is ~3 KB): `run`
# keeps running and writes the job's results (equal to `eval --json`);
# every alert on the topic is at most 4000 bytes, valid JSON and valid
# against schemas/alert.schema.json; the ones cut carry "truncated": true
# and a truncation object (at least one lists fewer nodes than the job
# has); the summary counts them (alerts_truncated).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
SRC=$(cd "$HERE/../.." && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null ||
    { echo "SKIP: python3-jsonschema not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0202.XXXXXX)
BROKER_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" | cut -c1-300 >&2
    exit 1
}

timeout 120 "$TW" synth "$WORK/wide" --preset cpu_bottleneck --nodes 300 \
    --duration 4m --interval-ms 60000 --no-framework 2>/dev/null >/dev/null ||
    fail "synth"
timeout 120 "$TW" eval "$WORK/wide" --json --quiet >"$WORK/wide.eval.json" ||
    fail "eval"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: r0202
  properties:
    message.max.bytes: 4000
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
timeout 120 "$TW" replay "$WORK/wide" --brokers "$BOOTSTRAP" -q >/dev/null || fail "replay"
wait_for 60 test -s "$WORK/res/wide.json" || fail "results not written"
kill -0 "$RUN_PID_A" 2>/dev/null || fail "run exited"
python3 "$LIB/results.py" same "$WORK/wide.eval.json" "$WORK/res/wide.json" ||
    fail "results differ from eval"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
OUT=$(cat "$WORK/A.out")
echo "$OUT"
SENT=$(field alerts_sent "$OUT")
CUT=$(field alerts_truncated "$OUT")
[ "${CUT:-0}" -gt 0 ] || fail "no alert counted as truncated"

timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat alerts"
[ "$(wc -l <"$WORK/alerts.jsonl")" -eq "$SENT" ] || fail "alerts on the topic != alerts_sent $SENT"
python3 - "$WORK/alerts.jsonl" "$CUT" <<'EOF' || fail "alert sizes or markers"
import json, sys
cut = fewer = 0
for line in open(sys.argv[1], "rb"):
    raw = line.rstrip(b"\n")
    assert len(raw) <= 4000, f"alert of {len(raw)} bytes"
    a = json.loads(raw)
    if a.get("truncated"):
        t = a["truncation"]
        assert t["full_bytes"] > t["max_bytes"] >= len(raw), t
        assert len(a["nodes"]) == t["nodes_listed"] <= t["nodes_total"] == 300, t
        assert "report" not in a["details"]
        cut += 1
        fewer += t["nodes_listed"] < 300
    else:
        assert len(a["nodes"]) <= 300
assert cut == int(sys.argv[2]), (cut, sys.argv[2])
assert fewer > 0, "no alert with a shortened node list"
print(f"alerts cut: {cut}, with fewer nodes: {fewer}")
EOF
python3 "$LIB/results.py" alerts "$SRC/schemas/alert.schema.json" "$WORK/alerts.jsonl" \
    >"$WORK/valid.txt" || fail "alerts do not validate: $(head -3 "$WORK/valid.txt")"
tw_broker_stop || fail "broker stop"
echo "PASS 0202: $CUT of $SENT alerts truncated below message.max.bytes, results == eval"
