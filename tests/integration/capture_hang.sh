#!/usr/bin/env bash
# capture_hang.sh BUILD_DIR - the hook's side of the capture action
# (hooks/python/trainwatch/control.py) on a real PyTorch loop
# (tests/integration/capture/train_capture.py) through `trainwatch broker`,
# requests published by kcat on trainwatch.control:
#  (a) the training thread hung in Python (time.sleep in the loop): the
#      background thread still answers, with every thread's stack (the
#      hang's frame in the training thread's) and, for the trace, "no
#      step boundary" (the profiler starts only at a step);
#  (b) the same request id again: ignored (one answer, one capture);
#  (c) after the hang, a request for 3 steps: a torch.profiler trace of
#      3 steps (valid Chrome trace JSON that `trainwatch eval` reads) and
#      the stacks; a request for another rank only: no answer;
#  (e) a request for more steps than its wait allows: the profiler stops
#      at the deadline (80 % of wait_s) and the shorter trace is sent;
#  (d) a hang in C code holding the GIL (libc sleep through ctypes.PyDLL)
#      for 6 s with TRAINWATCH_GIL_WATCHDOG=2: nothing Python can answer,
#      faulthandler's watchdog writes rank-0.gil-hang.txt with the
#      training thread's stack.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-capture-hang.XXXXXX)
BROKER_PID=
TRAIN_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "$TRAIN_PID" ] && kill -KILL "$TRAIN_PID" 2>/dev/null
    [ -n "$BROKER_PID" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/train.err" ] && tail -n 20 "$WORK/train.err" >&2
    exit 1
}
tw_broker_start || fail "broker start"

# request ID RANKS STEPS WAIT: one capture request for job hang
request() {
    printf '{"type":"capture_request","request_id":"%s","job":"hang","rule":"Manual","alert_id":"%s","ranks":%s,"steps":%s,"what":["trace","stacks"],"wait_s":%s}\n' \
        "$1" "$1" "$2" "$3" "$4" |
        kcat -b "$BOOTSTRAP" -P -t trainwatch.control -k hang ||
        fail "kcat -P"
}
# acks: the answers on the control topic, one JSON per line
acks() {
    timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.control -o beginning -e \
        -q 2>/dev/null | grep '"capture_ack"'
}
has_ack() { acks | grep -q "$1"; }

TRAINWATCH_GIL_WATCHDOG=2 "$PY" "$HERE/capture/train_capture.py" \
    --job hang --brokers "$BOOTSTRAP" --capture-dir "$WORK/cap" \
    --hang-at 30 --hang-seconds 12 --gil-hang-at 900 --gil-hang-seconds 6 \
    --max-seconds 90 --stop-file "$WORK/stop" \
    >"$WORK/train.out" 2>"$WORK/train.err" &
TRAIN_PID=$!
wait_for 60 grep -q '^hanging' "$WORK/train.out" || fail "never hung"
HANG_T=$(date +%s)
grep -q '^ready' "$WORK/train.out" || fail "control consumer not ready"
T0=$(date +%s.%N)
request hung-1 '"all"' 5 4
request hung-1 '"all"' 5 4 # (b) the same id again
wait_for 20 has_ack hung-1 || fail "no answer while hung"
T1=$(date +%s.%N)
echo "answer while the training thread hangs: $(awk "BEGIN{print $T1 - $T0}") s"
acks | grep hung-1 >"$WORK/hung.json"
"$PY" - "$WORK/hung.json" <<'PYEOF' || fail "(a)/(b): the hung rank's answer"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, f"{len(lines)} answers to one request id (twice)"
a = json.loads(lines[0])
assert a["rank"] == 0 and a["world_size"] == 1, a
assert a["status"] == "partial" and a["trace"] is None, a
assert "no step boundary" in a["error"], a
text = open(a["stacks"]).read()
main = text.split("\nThread ")[1]
assert "training thread" in main.splitlines()[0], main[:200]
assert "hang_here" in main and "time.sleep(seconds)" in main, main
assert "trainwatch-control" in text, "no control thread in the dump"
print("(a) hung: stacks", a["stacks"], "- training thread in hang_here;",
      "(b) one answer to the id sent twice")
PYEOF

# (c) after the hang: a trace of 3 steps, and a request for rank 3 only
# the hang ends 12 s after it began
while [ "$(date +%s)" -lt $((HANG_T + 13)) ]; do sleep 0.5; done
request other-rank '[3]' 3 10
request steps-1 '[0]' 3 10
wait_for 20 has_ack steps-1 || fail "no answer with a trace"
acks | grep steps-1 >"$WORK/steps.json"
acks | grep -q other-rank && fail "rank 0 answered a request for rank 3"
"$PY" - "$WORK/steps.json" "$TW" <<'PYEOF' || fail "(c) the trace"
import json, subprocess, sys
a = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert a["status"] == "captured", a
first, last = a["steps"]
assert last - first == 2, a["steps"]
ev = json.load(open(a["trace"]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep")
         or e.get("name") == "aten::addmm"]
assert any(e.get("name") == "aten::addmm" for e in ev), "no operator events"
out = subprocess.run([sys.argv[2], "eval", a["trace"], "--steps", "--quiet"],
                     capture_output=True, text=True)
assert out.returncode == 0, out.stderr[-500:]
print("(c) trace", a["trace"], len(ev), "events, steps", a["steps"],
      "; trainwatch eval read it")
PYEOF
echo "(c) a request for rank 3 only: no answer from rank 0"

# (e) more steps than the answer's deadline allows: stopped short there
request long-1 '"all"' 100000 4
wait_for 20 has_ack long-1 || fail "no answer to the long request"
acks | grep long-1 | "$PY" -c '
import json, os, sys
a = json.loads(sys.stdin.readline())
assert a["status"] == "captured" and os.path.isfile(a["trace"]), a
first, last = a["steps"]
assert 0 < last - first < 100000, a["steps"]
print("(e) 100000 steps asked, wait_s 4: stopped at the deadline after",
      last - first + 1, "steps, trace written")
' || fail "(e) the long request"

# (d) the GIL held in C code: the watchdog file
wait_for 60 grep -q '^gil-hanging' "$WORK/train.out" || fail "no GIL hang"
GIL=$WORK/cap/hang/rank-0.gil-hang.txt
wait_for 15 grep -q gil_hang_here "$GIL" || fail "no GIL watchdog dump: $(cat "$GIL" 2>/dev/null | head -c 600)"
grep -q "most recent call first" "$GIL" || fail "GIL dump: not a traceback"
echo "(d) GIL held in C for 6 s: $GIL names gil_hang_here"
touch "$WORK/stop"
wait "$TRAIN_PID" || fail "training exited $?"
TRAIN_PID=
cat "$WORK/train.out" | tail -n 1
grep -q "duplicates=1" "$WORK/train.out" || fail "duplicate not counted"
tw_broker_stop || true
echo "ok"
