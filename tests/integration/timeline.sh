#!/usr/bin/env bash
# `trainwatch timeline` against the inputs, read again by
# tests/timeline/timeline_check.py (its own parsing): per trace file the
# same events with the same absolute times, every sample, a trace-event
# object the JSON schema accepts, time order, named tracks. On the test
# copies of the agent's sample files (tests/data/smdebug) and a generated
# 2-node job; the same output when the sort spills to a temporary file; a
# step range, a time range, --framework-only and --system-metrics.
# Usage: timeline.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/../timeline/timeline_check.py"
DATA="$HERE/../data/smdebug"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { /usr/bin/python3 "$CHECK" "$@" || fail "timeline_check $*"; }

for d in merge_traces model_timeline_traces horovod_timeline_traces test_traces; do
  "$TW" timeline "$DATA/$d" -o "$WORK/$d.json" --quiet
  check "$DATA/$d" "$WORK/$d.json"
done

# absolute times written out by hand: base time of the file + ts
/usr/bin/python3 - "$WORK" <<'PY' || fail "absolute times"
import json, sys
w = sys.argv[1]
def find(doc, name, ts):
    return [e for e in json.load(open(f"{w}/{doc}.json"))["traceEvents"]
            if e.get("name") == name and e.get("ts") == ts]
# pythontimeline: start_time_since_epoch_in_micros 1594662605425850,
# Step:ModeKeys.TRAIN step 0 at ts 2664345 for 9020725 us
e = find("merge_traces", "Step:ModeKeys.TRAIN", 1594662605425850 + 2664345)
assert len(e) == 1 and e[0]["dur"] == 9020725 and e[0]["args"]["step_num"] == "0", e
# model_timeline (base 1594662597687738): dataset::GetNext at ts 17127479
e = find("merge_traces", "dataset::GetNext", 1594662597687738 + 17127479)
assert len(e) == 1 and e[0]["dur"] == 5, e
# horovod (base 1592860687560103): X event "4" at ts 8440610; its B
# events (NEGOTIATE_ALLREDUCE) are never closed in the file: no event
e = find("horovod_timeline_traces", "4", 1592860687560103 + 8440610)
assert len(e) == 1 and e[0]["dur"] == 812355471858, e
assert not find("horovod_timeline_traces", "NEGOTIATE_ALLREDUCE", 1592860687560103 + 8440608)
# a system sample: 1591748100.algo-1.json holds gpu0 GPUUtilization samples
doc = json.load(open(f"{w}/test_traces.json"))
assert any(e["ph"] == "C" and e["name"].startswith("gpu0") for e in doc["traceEvents"])
print("absolute times: ok")
PY

# the hand-written fixture job: numeric and string step numbers, a B/E
# pair and an E without its B (reported, counted, not an event)
FIX=$(cd "$HERE/../fixtures/agent" && pwd)
"$TW" timeline "$FIX/job" -o "$WORK/fixture.json" 2>"$WORK/fix.err"
grep -q "horovod_timeline.json:6: E event without a matching B" "$WORK/fix.err" ||
  fail "unmatched E not reported: $(cat "$WORK/fix.err")"
check "$FIX/job" "$WORK/fixture.json"

"$TW" synth "$WORK/job" --preset healthy --nodes 2 --duration 3m --seed 1 2>/dev/null
"$TW" timeline "$WORK/job" -o "$WORK/job.json" 2>"$WORK/log"
grep -q "(0 sorted runs)" "$WORK/log" || fail "a 3 MB job should sort in memory: $(cat "$WORK/log")"
check "$WORK/job" "$WORK/job.json"
# a 1 MiB buffer spills sorted runs; the output is byte for byte the same
"$TW" timeline "$WORK/job" -o "$WORK/job-spill.json" --buffer-mb 1 2>"$WORK/log"
grep -Eq "\(([2-9]|[1-9][0-9]+) sorted runs\)" "$WORK/log" || fail "no runs spilled: $(cat "$WORK/log")"
cmp -s "$WORK/job.json" "$WORK/job-spill.json" || fail "spilled output differs"

# track names: a process per framework node (rank) and per system node
/usr/bin/python3 - "$WORK/job.json" <<'PY' || fail "track names"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
name = {e["pid"]: e["args"]["name"] for e in ev
        if e["ph"] == "M" and e["name"] == "process_name"}
index = {e["pid"]: e["args"]["sort_index"] for e in ev
         if e["ph"] == "M" and e["name"] == "process_sort_index"}
shown = [name[p] for p in sorted(index, key=index.get)]
# by node name: a host's system metrics beside its ranks
assert shown == ["algo-1 system metrics", "algo-1 rank 0",
                 "algo-2 system metrics", "algo-2 rank 1"], shown
PY

# steps 100..200: from the first one's start to the last one's end
read -r from to < <(/usr/bin/python3 - "$WORK/job.json" <<'PY'
import json, sys
st = [e for e in json.load(open(sys.argv[1]))["traceEvents"]
      if e["name"] == "Step:ModeKeys.TRAIN" and 100 <= int(e["args"]["step_num"]) <= 200]
print(min(e["ts"] for e in st), max(e["ts"] + e["dur"] for e in st))
PY
)
"$TW" timeline "$WORK/job" -o "$WORK/steps.json" --steps 100:200 --quiet 2>/dev/null
check "$WORK/job" "$WORK/steps.json" --from-us "$from" --to-us "$to"
n=$(/usr/bin/python3 -c 'import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))["traceEvents"] if e["name"] == "Step:ModeKeys.TRAIN" and 100 <= int(e["args"]["step_num"]) <= 200))' "$WORK/steps.json")
[ "$n" -eq 202 ] || fail "steps 100:200 of 2 nodes: $n step events, expected 202"

"$TW" timeline "$WORK/job" -o "$WORK/time.json" --start 1700000030 --end 1700000060.5 2>/dev/null
check "$WORK/job" "$WORK/time.json" --from-us 1700000030000000 --to-us 1700000060500000
"$TW" timeline "$WORK/job" -o "$WORK/fw.json" --framework-only 2>/dev/null
check "$WORK/job" "$WORK/fw.json" --no-system
"$TW" timeline "$WORK/job" -o "$WORK/gpu.json" --system-metrics GPUUtilization,memory 2>/dev/null
check "$WORK/job" "$WORK/gpu.json" --metrics GPUUtilization,memory

set +e
"$TW" timeline "$WORK/job" 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "no -o: exit $rc"
"$TW" timeline "$WORK/job" -o "$WORK/x.json" --steps 5000000:5000001 2>"$WORK/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no TRAIN or GLOBAL step" "$WORK/err" && [ ! -e "$WORK/x.json" ] ||
  fail "empty step range: exit $rc"
set -e
echo "timeline: OK"
