#!/usr/bin/env bash
# hook_debug_folder.sh BUILD_DIR - the same run, live and offline: real
# PyTorch training (hook/debug_train.py: healthy, then a dead-ReLU and a
# lr-0 run) with the hook's debugging side publishing TensorRecords to
# `trainwatch broker` and, with DebuggerHookConfig's
# container_local_output_path, writing the legacy debug-output folder
# (hooks/python/trainwatch/debug_writer.py). `trainwatch debug-dump`
# reads the folder back (the C reader, reductions derived from the whole
# tensors) and every record on the topic must have its twin in the folder
# -- same worker step, mode, mode step, name and collections -- with equal
# reductions (1e-9 relative: the hook reduces on the device, the reader
# from the saved float32 values), and the folder must hold nothing the
# topic does not.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$BUILD/hooks/python:$HERE/hook
"$PY" -c 'import torch, numpy, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, numpy, confluent-kafka or flatbuffers missing"; exit 77; }
WORK=$(mktemp -d /tmp/tw-hook-debug-folder.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
cleanup() {
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

tw_broker_start || fail "broker start"
for scenario in healthy deadrelu lr0; do
    job=folder-$scenario
    "$PY" "$HERE/hook/debug_train.py" --job "$job" --brokers "$BOOTSTRAP" \
        --scenario "$scenario" --steps 8 --local-output "$WORK/$job" --quiet \
        2>"$WORK/$job.err" || fail "training $job: $(tail -n 5 "$WORK/$job.err")"
    "$TW" debug-dump --json "$WORK/$job" >"$WORK/$job.jsonl" 2>"$WORK/$job.dump.err" ||
        fail "debug-dump $job: $(cat "$WORK/$job.dump.err")"
    "$PY" - "$BOOTSTRAP" "$job" "$WORK/$job.jsonl" <<'PY' || fail "$job: folder and topic differ"
import json, math, sys
import tensor_topic
bootstrap, job, dump = sys.argv[1:]
live, _ = tensor_topic.consume(bootstrap, job)
live = [r for r in live if r["name"] != "heartbeat"]
offline = [json.loads(l) for l in open(dump) if l.strip()]
key = lambda r: (r["step"], r["mode"], r["mode_step"], r["name"])
byk = {key(r): r for r in offline}
assert len(byk) == len(offline), "a tensor twice in the folder"
assert len(live) == len(offline), (len(live), len(offline))
compared = 0
for r in live:
    o = byk.get(key(r))
    assert o is not None, ("not in the folder", key(r))
    assert sorted(o["collections"]) == sorted(r["collections"]), (key(r), o["collections"], r["collections"])
    assert o["numel"] == r["numel"] and o["shape"] == r["shape"], key(r)
    for op, v in r["red"].items():
        if op in ("p5", "p95"):
            continue  # the reader derives no quantiles
        assert op in o["reductions"], (key(r), op, sorted(o["reductions"]))
        w = o["reductions"][op]
        same = (math.isnan(v) and math.isnan(w)) or v == w or \
            abs(v - w) <= 1e-9 * max(abs(v), abs(w))
        assert same, (key(r), op, v, w)
        compared += 1
print(f"{job}: {len(live)} tensors, {compared} reductions equal live and offline")
PY
done
echo "PASS hook_debug_folder"
