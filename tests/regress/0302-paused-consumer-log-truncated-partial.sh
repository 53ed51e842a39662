#!/usr/bin/env bash
# 0302 - the engine paused while the broker truncated its log (edge-case
# issue, defect 3). `kill -STOP` of `run` for 12 s during a 100x replay of
# a 30-minute job: the embedded broker (5 MiB per partition) deleted what
# the paused consumer had not read, librdkafka reset its position (offset
# out of range), 37 % of the job was gone, and the job ended "normally"
# with halved violation counts; no counter moved.
# Here the same (replay --group none: no flow control, so the log really
# is truncated under the consumer). Asserts: the offsets never read are
# counted (offset_gaps, offsets_lost) and logged with the partition and
# range; the job's results say partial with an offsets_lost range and its
# nodes' sequence gaps; its final alerts say partial.
. "$(dirname "$0")/lib/regress.sh"
need kcat
timeout 120 "$TW" synth "$WORK/paused" --preset cpu_bottleneck --nodes 2 \
    --duration 30m >/dev/null 2>&1 || fail "synth"
tw_broker_start || fail "broker start"
run_config A
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
timeout 300 "$TW" replay "$WORK/paused" --brokers "$BOOTSTRAP" --group none \
    --rate 100x -q >"$WORK/replay.out" 2>&1 &
REPLAY=$!
wait_for 60 grep -q "job paused started" "$WORK/A.err" || fail "job not started"
sleep 1
kill -STOP "$RUN_PID_A"
sleep 12
kill -CONT "$RUN_PID_A"
wait "$REPLAY" || fail "replay: $(cat "$WORK/replay.out")"
wait_for 120 test -e "$WORK/resA/paused.json" || fail "no results"
tw_run_stop A || fail "run exit status"
SUM=$(cat "$WORK/A.out")
echo "$SUM" | tr ' ' '\n' | grep -E '^(offset_gaps|offsets_lost|jobs_partial|samples)='
[ "$(field offset_gaps "$SUM")" -ge 1 ] || fail "no offset gap counted: $SUM"
[ "$(field offsets_lost "$SUM")" -ge 1 ] || fail "offsets_lost: $SUM"
[ "$(field jobs_partial "$SUM")" -eq 1 ] || fail "jobs_partial: $SUM"
grep -q 'WARN.*partition [0-9]*: offsets [0-9]*\.\.[0-9]* were never read' "$WORK/A.err" ||
    fail "no WARN naming the lost offsets"
python3 - "$WORK/resA/paused.json" <<'PY' || fail "results not marked partial"
import json, sys
r = json.load(open(sys.argv[1]))
assert r.get("partial") is True
kinds = [x["kind"] for x in r["data_loss"]["ranges"]]
assert "offsets_lost" in kinds, kinds
print("data_loss:", json.dumps(r["data_loss"])[:400])
PY
tw_broker_stop || fail "broker stop"
echo "PASS 0302"
