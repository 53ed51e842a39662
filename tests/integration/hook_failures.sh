#!/usr/bin/env bash
# hook_failures.sh BUILD_DIR - the Python hook never hurts training (real
# PyTorch CPU training, tests/integration/hook/train.py):
#  1. no broker at all: every step runs, close() gives up after its
#     timeout and reports the batches it could not deliver;
#  2. broker down at start, up once the hook has reported it down
#     (`trainwatch broker --port P` on the port the hook was given): every
#     step runs, the hook's batches
#     wait in memory and are all delivered; `trainwatch run` evaluates a
#     complete job (no sequence gap) ended by the hook's JOB_END;
#  3. queue overflow (cap 50 events, one send round every 5 s): every step
#     runs, the drops are counted and reported once, and the job is still
#     complete (events are dropped before they get a sequence number);
#  4. SIGTERM mid-run: the hook sends JOB_END and flushes, then the
#     process dies of the signal as it would have without the hook (143);
#     the engine ends the job by that JOB_END, complete;
#  5. broker killed (-9) mid-run and restarted on its port: every step
#     runs, nothing is left undelivered, and the restarted broker gets
#     the rest of the hook's batches in sequence, ending with JOB_END.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
WORK=$(mktemp -d /tmp/tw-hook-fail.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "${TRAIN_PID:-}" ] && kill -KILL "$TRAIN_PID" 2>/dev/null
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}
free_port() {
    "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
STEPS=60
train_args=(--epochs 1 --batches $STEPS --workers 2 --step-ms 5)

# ---- 1. no broker ever ------------------------------------------------------
P=$(free_port)
T0=$(date +%s%N)
"$PY" "$HERE/hook/train.py" --job nobroker --brokers "127.0.0.1:$P" \
    "${train_args[@]}" --close-timeout 2 >"$WORK/nobroker.out" 2>"$WORK/nobroker.err" ||
    fail "training without broker: $(tail -n 5 "$WORK/nobroker.err")"
T1=$(date +%s%N)
OUT=$(cat "$WORK/nobroker.out")
echo "$OUT"
[ "$(field steps "$OUT")" -eq $STEPS ] || fail "no broker: steps $(field steps "$OUT")"
[ "$(field undelivered "$OUT")" -gt 0 ] || fail "no broker: undelivered=$(field undelivered "$OUT")"
grep -q "closed: .*undelivered=[1-9]" "$WORK/nobroker.err" ||
    fail "no broker: no closing report: $(tail -n 3 "$WORK/nobroker.err")"
[ $(( (T1 - T0) / 1000000 )) -lt 30000 ] || fail "no broker: took $(( (T1 - T0) / 1000000 )) ms"

# ---- 2. broker down at start, up 2 s later ---------------------------------
P=$(free_port)
"$PY" "$HERE/hook/train.py" --job late-broker --brokers "127.0.0.1:$P" \
    "${train_args[@]}" --epochs 3 \
    >"$WORK/late.out" 2>"$WORK/late.err" &
TRAIN_PID=$!
# the hook has met the closed port before the broker comes up
wait_for 30 grep -q "events wait for the broker" "$WORK/late.err" ||
    fail "late broker: the hook did not report the broker down: $(cat "$WORK/late.err")"
tw_broker_start --port "$P" || fail "broker start on port $P"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: hook-failures
engine:
  results_dir: $WORK/res
  progress_interval: 0
YAML
tw_run_start A "$WORK/run.yaml"
wait "$TRAIN_PID" || fail "training with a late broker: $(tail -n 5 "$WORK/late.err")"
TRAIN_PID=
OUT=$(cat "$WORK/late.out")
echo "$OUT"
[ "$(field steps "$OUT")" -eq $((3 * STEPS)) ] || fail "late broker: steps $(field steps "$OUT")"
[ "$(field undelivered "$OUT")" = 0 ] || fail "late broker: undelivered=$(field undelivered "$OUT")"
[ "$(field dropped "$OUT")" = 0 ] || fail "late broker: dropped=$(field dropped "$OUT")"
wait_for 60 test -f "$WORK/res/late-broker.json" || fail "late broker: no results"
"$PY" - "$WORK/res/late-broker.json" "$(field events "$OUT")" <<'PYEOF' || fail "late broker results"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d.get("partial"), "partial: %s" % d.get("data_loss")
sent = int(sys.argv[2])
# the hook's count is the training process's events; workers' come on top
assert d["input"]["events"] >= sent, (d["input"], sent)
PYEOF
grep -q "job late-broker finished (end marker)" "$WORK/A.err" || fail "late broker: not ended by JOB_END"

# ---- 3. queue overflow ------------------------------------------------------
"$PY" "$HERE/hook/train.py" --job overflow --brokers "$BOOTSTRAP" \
    "${train_args[@]}" --max-queue 50 --flush-interval 5 \
    >"$WORK/overflow.out" 2>"$WORK/overflow.err" ||
    fail "training with a small queue: $(tail -n 5 "$WORK/overflow.err")"
OUT=$(cat "$WORK/overflow.out")
echo "$OUT"
[ "$(field steps "$OUT")" -eq $STEPS ] || fail "overflow: steps $(field steps "$OUT")"
DROPPED=$(field dropped "$OUT")
[ "$DROPPED" -gt 0 ] || fail "overflow: nothing dropped"
[ "$(grep -c "event queue full" "$WORK/overflow.err")" -eq 1 ] ||
    fail "overflow: the drop warning must come once: $(grep -c "event queue full" "$WORK/overflow.err")"
wait_for 60 test -f "$WORK/res/overflow.json" || fail "overflow: no results"
"$PY" - "$WORK/res/overflow.json" <<'PYEOF' || fail "overflow results"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d.get("partial"), "partial: %s" % d.get("data_loss")
PYEOF

# ---- 4. SIGTERM mid-run -------------------------------------------------------
"$PY" "$HERE/hook/train.py" --job sigterm --brokers "$BOOTSTRAP" \
    "${train_args[@]}" --epochs 1000 >"$WORK/sigterm.out" 2>"$WORK/sigterm.err" &
TRAIN_PID=$!
wait_for 60 grep -q "job sigterm started" "$WORK/A.err" || fail "sigterm: the job never started"
sleep 0.5
kill -TERM "$TRAIN_PID"
wait "$TRAIN_PID"
RC=$?
TRAIN_PID=
[ "$RC" -eq 143 ] || fail "sigterm: training exit status $RC, expected 143 (terminated by SIGTERM): $(tail -n 5 "$WORK/sigterm.err")"
grep -q "job sigterm node .* closed: .*undelivered=0" "$WORK/sigterm.err" ||
    fail "sigterm: no closing report: $(tail -n 5 "$WORK/sigterm.err")"
wait_for 60 test -f "$WORK/res/sigterm.json" || fail "sigterm: no results"
grep -q "job sigterm finished (end marker)" "$WORK/A.err" || fail "sigterm: not ended by JOB_END"
"$PY" - "$WORK/res/sigterm.json" <<'PYEOF' || fail "sigterm results"
import json, sys
d = json.load(open(sys.argv[1]))
assert not d.get("partial"), "partial: %s" % d.get("data_loss")
assert d["input"]["events"] > 0, d["input"]
PYEOF

tw_run_stop A || fail "run exit status"
tw_broker_stop || fail "broker stop"

# ---- 5. broker killed mid-run and restarted ----------------------------------
# The embedded broker keeps its log in memory: what it held dies with it
# (the engine would see that job's beginning lost). The hook must go on
# training, hold what it could not send, and send it all to the new one.
P=$(free_port)
tw_broker_start --port "$P" || fail "broker start on port $P"
"$PY" "$HERE/hook/train.py" --job killed --brokers "127.0.0.1:$P" \
    "${train_args[@]}" --epochs 12 >"$WORK/killed.out" 2>"$WORK/killed.err" &
TRAIN_PID=$!
sleep 3
kill -KILL "$BROKER_PID"
wait "$BROKER_PID" 2>/dev/null
BROKER_PID=
wait_for 30 grep -q "events wait for the broker" "$WORK/killed.err" ||
    fail "killed broker: the hook did not notice"
sleep 1
tw_broker_start --port "$P" || fail "broker restart on port $P"
wait "$TRAIN_PID" || fail "training with a killed broker: $(tail -n 5 "$WORK/killed.err")"
TRAIN_PID=
OUT=$(cat "$WORK/killed.out")
echo "$OUT"
[ "$(field steps "$OUT")" -eq $((12 * STEPS)) ] || fail "killed broker: steps $(field steps "$OUT")"
[ "$(field undelivered "$OUT")" = 0 ] || fail "killed broker: undelivered=$(field undelivered "$OUT")"
grep -q "Kafka reachable again" "$WORK/killed.err" || fail "killed broker: no recovery logged"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.metrics -o beginning -e -q \
    -f '%R%s' >"$WORK/killed.bin" || fail "kcat -C metrics"
"$PY" "$HERE/hook/decode.py" "$WORK/killed.bin" >"$WORK/killed.jsonl" || fail "decode"
"$PY" - "$WORK/killed.jsonl" "$(field batches "$OUT")" <<'PYEOF' || fail "killed broker: what the new broker got"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
seqs = [r["seq"] for r in rows if r["job"] == "killed"]
assert seqs, "nothing reached the restarted broker"
assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs
assert seqs[-1] == int(sys.argv[2]), (seqs[-1], sys.argv[2])
last = [r for r in rows if r["job"] == "killed"][-1]
assert [m["kind"] for m in last["markers"]] == [2], last  # JOB_END
print("restarted broker got seq %d..%d, the last the JOB_END" % (seqs[0], seqs[-1]))
PYEOF
tw_broker_stop || fail "broker stop"
echo "PASS hook_failures: no broker (undelivered reported), broker up late (all delivered, complete job), queue overflow ($DROPPED events dropped, counted, job complete), SIGTERM (JOB_END sent, complete job, exit 143), broker killed and restarted (training went on, the rest delivered in order)"
