#!/usr/bin/env bash
# 1001 - a job's first timestamp was the LAST JOB_START before its first
# scan, not the earliest (issue 10, the training hook). With the Python
# hook and `trainwatch agent` beside it, each sends a JOB_START: the
# hook's carries the training process's start, the agent's its own,
# later start. Whichever arrived last fixed F, so MaxInitializationTime
# measured the initialization from the agent's start, not the process's
# (tests/integration/hook_init.sh saw F = the agent's time).
# Here two nodes send JOB_START, the earlier time first and the later
# second, then events and JOB_ENDs (batches encoded by the hook's
# generated FlatBuffers code). Asserts: the results' first_timestamp_us
# is the earlier JOB_START time.
. "$(dirname "$0")/lib/regress.sh"
PY=${TW_PYTHON:-/usr/bin/python3}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
tw_broker_start || fail "broker start"
run_config A
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
"$PY" - "$BOOTSTRAP" <<'PYEOF' || fail "produce"
import sys
import confluent_kafka
from trainwatch import wire_batch as w
T = 1795000000000000  # us
p = confluent_kafka.Producer({"bootstrap.servers": sys.argv[1]})
def send(node, seq, events=(), markers=()):
    p.produce("trainwatch.metrics", key="early",
              value=w.encode_batch("early", node, seq, events, markers))
# the hook's JOB_START (the process start) arrives first, the agent's
# (started later) second: the order of hook_init.sh
send("0-hook", 1, markers=[(w.MARKER_JOB_START, T, 500, None)])
send("agent", 1, markers=[(w.MARKER_JOB_START, T + 30_000_000, 500, None)])
step = lambda n, s: ("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN",
                     T + s, T + s + 1000, 7, {"step_num": str(n)}, 0)
send("0-hook", 2, events=[step(i, 40_000_000 + i * 10_000) for i in range(5)])
send("0-hook", 3, markers=[(w.MARKER_JOB_END, T + 41_000_000, 500, None)])
send("agent", 2, markers=[(w.MARKER_JOB_END, T + 41_000_000, 500, None)])
assert p.flush(30) == 0
PYEOF
wait_for 60 test -e "$WORK/resA/early.json" || fail "no results"
tw_run_stop A || fail "run exit status"
F=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_timestamp_us"])' \
    "$WORK/resA/early.json") || fail "results"
[ "$F" -eq 1795000000000000 ] ||
    fail "first_timestamp_us=$F, the earliest JOB_START was 1795000000000000 (the later one: 1795000030000000)"
tw_broker_stop || fail "broker stop"
echo "PASS 1001: first timestamp = the earliest JOB_START"
