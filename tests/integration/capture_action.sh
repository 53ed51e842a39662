#!/usr/bin/env bash
# capture_action.sh BUILD_DIR - the `capture` action end to end: real
# PyTorch loops (tests/integration/capture/train_capture.py, every 15th
# step 30x slower: 300 ms, an outlier even on a loaded machine) with the hook streaming through `trainwatch broker` into
# `trainwatch run` (continuous ticks); StepOutlier fires and its capture
# action publishes a request on trainwatch.control; the hooks answer:
#  job cap     2 ranks listening: outcome "captured", on disk per rank a
#              torch.profiler trace (Chrome trace JSON, `trainwatch eval`
#              reads it) and the stacks, their paths in the capture alert
#              (schema-valid); the time from the finding to the files is
#              printed (goal <= 60 s); `trainwatch timeline` on the
#              job's capture folder merges both ranks' traces; the rule's
#              second capture action, within min_interval: rate limited;
#  job unreach world size 2, rank 1 never answers (not running):
#              "rank unreachable", missing [1];
#  job deaf    no rank listening: "timed out" after the action's wait.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, confluent_kafka, flatbuffers, jsonschema' 2>/dev/null ||
    { echo "SKIP: python3-torch, -confluent-kafka, -flatbuffers or -jsonschema missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-capture-action.XXXXXX)
BROKER_PID=
PIDS=()
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "$BROKER_PID" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && grep -i "capture\|error" "$WORK/A.err" | tail -n 20 >&2
    exit 1
}

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
tick: continuous
lateness: 1s
kafka:
  group: capture-action
engine:
  results_dir: $WORK/res
  progress_interval: 0
rules:
  - name: StepOutlier
    # 2 sigma and 3 outliers: on 2 cores shared with other jobs the base
    # step time spreads too, and every run must fire, early
    parameters: {stddev: 2, n_outliers: 3}
    actions:
      - type: capture
        steps: 3
        wait: 12s
      - type: capture
        what: [stacks]
        wait: 12s
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
grep -q "capture requests on 'trainwatch.control'" "$WORK/A.err" ||
    fail "no capture channel: $(grep -i capture "$WORK/A.err")"

# train JOB RANK WORLD [--capture-dir DIR]: one rank in the background
train() {
    local job=$1 rank=$2 world=$3; shift 3
    "$PY" "$HERE/capture/train_capture.py" --job "$job" --brokers "$BOOTSTRAP" \
        --rank "$rank" --world-size "$world" --slow-every 15 --slow-factor 30 \
        --max-seconds 90 --stop-file "$WORK/stop" "$@" \
        >"$WORK/$job.$rank.out" 2>"$WORK/$job.$rank.err" &
    PIDS+=($!)
}
train cap 0 2 --capture-dir "$WORK/cap"
train cap 1 2 --capture-dir "$WORK/cap"
train unreach 0 2 --capture-dir "$WORK/cap" # rank 1 never starts
train deaf 0 1

# the alert topic as it comes: "<ms> <job> <alert>" lines
kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -q -u \
    -f '%T %k %s\n' >"$WORK/alerts.txt" 2>"$WORK/kcat.err" &
PIDS+=($!)
# outcome JOB: the job's capture alert is on the alert topic
outcome() { grep "^[0-9]* $1 " "$WORK/alerts.txt" | grep -q '"kind":"capture"'; }
for job in cap unreach deaf; do
    wait_for 120 outcome $job || fail "no capture outcome for $job"
done
touch "$WORK/stop"
kill -TERM "${PIDS[4]}" 2>/dev/null
unset 'PIDS[4]'
for p in "${PIDS[@]}"; do wait "$p" || fail "a training process exited $?"; done
PIDS=()
sed 's/^[0-9]* [^ ]* //' "$WORK/alerts.txt" >"$WORK/alerts.json"
"$PY" "$HERE/lib/results.py" alerts "$SRC/schemas/alert.schema.json" \
    "$WORK/alerts.json" || fail "alerts do not match the schema"

"$PY" - "$WORK/alerts.txt" "$TW" <<'PYEOF' || fail "capture outcomes"
import json, os, subprocess, sys
by_id, capture = {}, {}
for line in open(sys.argv[1]):
    ts, job, text = line.split(" ", 2)
    a = json.loads(text)
    by_id[a["id"]] = (int(ts), a)
    if a["kind"] == "capture":
        assert job not in capture, f"two capture alerts for {job}"
        capture[job] = (int(ts), a)
# cap: both ranks, trace + stacks on disk, paths in the alert
ts_c, c = capture["cap"]
cap = c["capture"]
# the alert that fired it: StepOutlier's first finding or status change
# to IssuesFound (both fire the rule's actions)
ts_f, f = by_id[cap["alert_id"]]
assert f["job"] == "cap" and f["rule"] == "StepOutlier", f
assert f["status"] == "IssuesFound" and f["kind"] in ("finding", "status"), f
assert cap["outcome"] == "captured", cap
assert cap["request_id"] == f["id"] + "-1", cap
assert c["id"] != f["id"] and c["rule"] == "StepOutlier", c["id"]
assert sorted(r["rank"] for r in cap["ranks"]) == [0, 1], cap["ranks"]
last = 0
for r in cap["ranks"]:
    assert r["status"] == "captured", r
    for k in ("trace", "stacks"):
        assert os.path.isfile(r[k]), r[k]
        last = max(last, os.path.getmtime(r[k]))
    assert f"/cap/StepOutlier-{f['id']}/rank-{r['rank']}." in r["trace"], r
    ev = json.load(open(r["trace"]))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    assert any(e.get("ph") == "X" for e in ev), "no complete events"
    out = subprocess.run([sys.argv[2], "eval", r["trace"], "--quiet"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-400:]
    assert "Thread MainThread" in open(r["stacks"]).read(), r["stacks"]
print(f"cap: captured, ranks 0 and 1; firing ({f['kind']} alert) -> files "
      f"on disk "
      f"{last - ts_f / 1000:.1f} s, -> capture alert {(ts_c - ts_f) / 1000:.1f}"
      f" s (elapsed_s {cap['elapsed_s']:.1f}, answers "
      + ", ".join(f"{r['received_s']:.1f}" for r in cap["ranks"]) + ")")
assert last - ts_f / 1000 <= 60, "more than 60 s from the finding to files"
u = capture["unreach"][1]["capture"]
assert u["outcome"] == "rank unreachable" and u["missing"] == [1], u
assert [r["rank"] for r in u["ranks"]] == [0], u
print("unreach: rank unreachable, missing", u["missing"])
d = capture["deaf"][1]["capture"]
assert d["outcome"] == "timed out" and d["ranks"] == [], d
print(f"deaf: timed out after {d['elapsed_s']:.1f} s")
PYEOF

# every rank's trace in one timeline
"$TW" timeline "$WORK/cap/cap" -o "$WORK/merged.json" 2>"$WORK/timeline.err" ||
    fail "timeline: $(tail -n 5 "$WORK/timeline.err")"
"$PY" - "$WORK/merged.json" "$SRC/tests/timeline/trace_event.schema.json" <<'PYEOF' || fail "merged timeline"
import json, sys
import jsonschema
d = json.load(open(sys.argv[1]))
# the trace-event format the timeline tests hold Perfetto's input to
jsonschema.Draft7Validator(json.load(open(sys.argv[2]))).validate(d)
names = {e["args"]["name"] for e in d["traceEvents"]
         if e.get("ph") == "M" and e.get("name") == "process_name"}
x = [e for e in d["traceEvents"] if e.get("ph") == "X"]
assert len(names) >= 2, names
print("timeline:", len(x), "events,", "processes", sorted(names),
      "(trace-event schema valid)")
PYEOF
tw_run_stop A || fail "run exit $?"
# 3 requests (one per job); the rule's second capture action (and every
# later finding) within min_interval: rate limited
SUMMARY=$(tail -n 1 "$WORK/A.out")
[ "$(field captures_requested "$SUMMARY")" = 3 ] || fail "requests: $SUMMARY"
[ "$(field captures_captured "$SUMMARY")" = 1 ] || fail "captured: $SUMMARY"
[ "$(field captures_unreachable "$SUMMARY")" = 1 ] || fail "unreachable: $SUMMARY"
[ "$(field captures_timed_out "$SUMMARY")" = 1 ] || fail "timed out: $SUMMARY"
[ "$(field captures_rate_limited "$SUMMARY")" -ge 3 ] || fail "rate limit: $SUMMARY"
echo "summary: captures_rate_limited=$(field captures_rate_limited "$SUMMARY") (the second action of each job, later findings)"
tw_broker_stop || true
echo "ok"
