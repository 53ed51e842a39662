#!/usr/bin/env bash
# capture_collective.sh BUILD_DIR - a capture request reaching a job hung
# in a collective: two ranks (torch.distributed, gloo on CPU,
# torch.multiprocessing; tests/integration/capture/collective_hang.py)
# with the hook listening; rank 1 sleeps before its all_reduce, rank 0
# waits inside it. A request for all ranks (kcat on trainwatch.control):
# both answer within the request's wait, with their stacks: rank 1's
# training thread in sleep_before_all_reduce, rank 0's in all_reduce;
# no trace (no step boundary comes: "partial").
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch.distributed, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
"$PY" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' 2>/dev/null ||
    { echo "SKIP: torch.distributed with gloo not available"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-capture-coll.XXXXXX)
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
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$PY" "$HERE/capture/collective_hang.py" --job coll --brokers "$BOOTSTRAP" \
    --capture-dir "$WORK/cap" --port "$PORT" --hang-at 20 --hung-rank 1 \
    --hang-seconds 20 >"$WORK/train.out" 2>"$WORK/train.err" &
TRAIN_PID=$!
wait_for 240 grep -q '^hanging' "$WORK/train.out" || fail "never hung: $(cat "$WORK/train.out")"
[ "$(grep -c '^ready' "$WORK/train.out")" = 2 ] ||
    fail "control not ready on both ranks: $(cat "$WORK/train.out")"
grep '^ready' "$WORK/train.out"
T0=$(date +%s.%N)
printf '{"type":"capture_request","request_id":"coll-1","job":"coll","rule":"Manual","alert_id":"coll-1","ranks":"all","steps":3,"what":["trace","stacks"],"wait_s":5}\n' |
    kcat -b "$BOOTSTRAP" -P -t trainwatch.control -k coll || fail "kcat -P"
acks() {
    timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.control -o beginning -e \
        -q 2>/dev/null | grep '"capture_ack"'
}
two_acks() { [ "$(acks | grep -c coll-1)" = 2 ]; }
wait_for 20 two_acks || fail "not both ranks answered: $(acks)"
T1=$(date +%s.%N)
echo "both ranks answered $(awk "BEGIN{print $T1 - $T0}") s after the request"
acks | "$PY" -c '
import json, sys
for line in sys.stdin:
    a = json.loads(line)
    assert a["status"] == "partial" and a["trace"] is None, a
    text = open(a["stacks"]).read()
    main = text.split("\nThread ")[1]
    assert "training thread" in main.splitlines()[0], main[:200]
    want = ("sleep_before_all_reduce" if a["rank"] == 1 else "all_reduce")
    assert want in main, (a["rank"], main[-800:])
    last = [l.strip() for l in main.splitlines() if l.strip()][-1]
    print("rank", a["rank"], a["stacks"].rsplit("/", 1)[1], "innermost:", last)
' || fail "the stacks"
wait "$TRAIN_PID" || fail "training exited $?"
TRAIN_PID=
tw_broker_stop || true
echo "ok"
