#!/usr/bin/env bash
# debug_legacy.sh BUILD_DIR - the legacy debug-output folder reader
# (`trainwatch debug-dump`, engine/io/reader_debug.h) without the
# reference:
#  (1) the committed folder written by the reference's own PyTorch hook
#      (tests/debug_legacy/golden/ref_small): the output equals the golden
#      JSON lines, and agrees with what the reference's reader read from
#      it (values bit for bit, reductions, stored reductions, the planted
#      NaN and dead ReLU);
#  (2) folders written by trainwatch's Python writer
#      (hooks/python/trainwatch/debug_writer.py) in 8 dtypes with NaN/Inf,
#      two workers in one folder with the reference's constant footers, one
#      with payload CRCs: every value and derived reduction (update_l2 per
#      worker) equals numpy's;
#  (3) bad input: a length CRC, a footer, a truncated event file, a wrong
#      dtype size, a varint past 64 bits and an index file that is no JSON are
#      each reported with file and offset, counted, and skipped; every
#      other tensor is printed as before; exit status 0;
#  (4) not a debug-output folder: exit 1; bad usage: exit 2; `eval` of a
#      debug-output folder runs the debugging rules whose tensors are
#      present and finds the golden folder's NaN and dead ReLU, and
#      `replay` sends its tensors into `run`, which finds the same.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
DL=$HERE/../debug_legacy
WORK=$(mktemp -d /tmp/tw-debug-legacy.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}

# ---- (1) the reference-written golden folder -------------------------------
"$PY" "$DL/check_golden.py" "$TW" || fail "golden folder"

# ---- (2) trainwatch's writer -----------------------------------------------
"$PY" "$DL/write_python.py" --int8 --workers 2 "$WORK/py" ||
    fail "write_python.py"
"$PY" "$DL/check_written.py" "$TW" "$WORK/py" || fail "python writer folder"
"$PY" "$DL/write_python.py" --int8 --payload-crc "$WORK/pycrc" ||
    fail "write_python.py --payload-crc"
"$PY" "$DL/check_written.py" "$TW" "$WORK/pycrc" || fail "payload-CRC folder"
"$TW" debug-dump "$WORK/pycrc" 2>"$WORK/pycrc.err" >/dev/null ||
    fail "debug-dump payload-CRC folder"
grep -q 'footers: 0 constant, 39 payload CRC' "$WORK/pycrc.err" ||
    fail "payload CRC footers not counted: $(cat "$WORK/pycrc.err")"

# ---- (3) bad input ----------------------------------------------------------
cp -r "$DL/golden/ref_small" "$WORK/bad"
"$PY" - "$WORK/bad" <<'PYEOF' || fail "corrupting the copy"
import json, os, sys
root = sys.argv[1]
def records(step):
    with open(f"{root}/index/000000000/{step:012d}_worker_0.json") as f:
        ix = json.load(f)
    return f"{root}/{ix['meta']['event_file_name']}", ix["tensor_payload"]
def patch(path, at, data):
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data)
ev0, rec0 = records(0)
patch(ev0, rec0[0]["start_idx"] + 8, b"\0")         # length CRC
e = rec0[1]
patch(ev0, e["start_idx"] + e["length"] - 4, b"\0\0\0\0")  # footer
ev1, rec1 = records(1)
os.truncate(ev1, os.path.getsize(ev1) - 10)          # last record cut
ev3, rec3 = records(3)
loss = next(e for e in rec3 if e["tensorname"] == "MSELoss_output_0")
with open(ev3, "rb") as f:
    f.seek(loss["start_idx"])
    rec = f.read(loss["length"])
at = rec.index(b"\x42", rec.index(b"MSELoss_output_0"))
assert rec[at + 2:at + 4] == b"\x08\x01", rec[at:at + 8].hex()
patch(ev3, loss["start_idx"] + at + 3, b"\x02")      # float32 -> float64
patch(ev3, rec3[0]["start_idx"] + 12, b"\x10" + b"\xff" * 10)  # varint
with open(f"{root}/index/000000000/000000000005_worker_0.json", "w") as f:
    f.write("{\"meta\": ")
print(json.dumps({"step0": [rec0[0]["tensorname"], rec0[1]["tensorname"]],
                  "step1_last": rec1[-1]["tensorname"],
                  "step3": [loss["tensorname"], rec3[0]["tensorname"]]}))
PYEOF
"$TW" debug-dump --json "$WORK/bad" >"$WORK/bad.jsonl" 2>"$WORK/bad.err" ||
    fail "debug-dump on bad input exited $?: $(cat "$WORK/bad.err")"
E0=events/000000000000/000000000000_worker_0.tfevents
E1=events/000000000001/000000000001_worker_0.tfevents
E3=events/000000000003/000000000003_worker_0.tfevents
for want in \
    "$E0: record at offset 0 ('Net_fc1.weight'): offset 8: length CRC" \
    "$E0: record at offset 176 ('smdebug/reductions/max/Net_fc1.bias'): offset 103: footer 0x00000000 is neither the debug constant nor the payload's CRC" \
    "$E1: offset [0-9]*: record of [0-9]* bytes runs past the end of the file" \
    "$E3: record at offset [0-9]* ('MSELoss_output_0'): 4 content bytes are not the shape's elements of 8 bytes (float64)" \
    "$E3: record at offset 0 ('Net_fc1.weight'), payload offset 1: varint overflows 64 bits" \
    "index/000000000/000000000005_worker_0.json: not JSON" \
    "bad: 1 files, 5 records"; do
    grep -q -- "$want" "$WORK/bad.err" ||
        fail "no '$want' in: $(cat "$WORK/bad.err")"
done
# Every tensor not hit prints as in the golden output; the hit ones are
# gone (Net_fc1.bias keeps its other stored reductions).
"$PY" - "$DL/golden/ref_small.jsonl" "$WORK/bad.jsonl" <<'PYEOF' ||
import json, sys
golden = [json.loads(l) for l in open(sys.argv[1])]
bad = {(r["step"], r["name"]): r for r in map(json.loads, open(sys.argv[2]))}
gone = {(0, "Net_fc1.weight"), (3, "MSELoss_output_0"), (3, "Net_fc1.weight")}
same = 0
for r in golden:
    k = (r["step"], r["name"])
    if k in gone:
        assert k not in bad, k
    elif k == (0, "Net_fc1.bias"):
        assert "max" not in bad[k]["reductions"], bad[k]
        assert set(bad[k]["reductions"]) == set(r["reductions"]) - {"max"}
    elif k == (1, "Net_fc1.weight"):
        # its step-0 record is gone: no update_l2, the rest as before
        want = dict(r, prev_step=-1, reductions={
            op: v for op, v in r["reductions"].items() if op != "update_l2"})
        assert bad[k] == want, (k, bad[k], want)
    elif k in bad:
        assert bad[k] == r, (k, bad[k], r)
        same += 1
missing = [k for k in ((r["step"], r["name"]) for r in golden)
           if k not in bad and k not in gone]
assert len(missing) == 1, missing   # the truncated record of step 1
assert same == len(golden) - 6, same
print(json.dumps({"unchanged": same, "cut": missing}))
PYEOF
    fail "the tensors beside the bad records"

# ---- (4) exit statuses -----------------------------------------------------
"$TW" debug-dump "$WORK" >/dev/null 2>&1
[ $? -eq 1 ] || fail "a folder without index/ should exit 1"
"$TW" debug-dump >/dev/null 2>&1
[ $? -eq 2 ] || fail "no DIR should exit 2"
"$TW" debug-dump --raw-max x "$WORK/py" >/dev/null 2>&1
[ $? -eq 2 ] || fail "--raw-max x should exit 2"
# eval runs the debugging rules whose tensors are present on the folder
# the reference's hook wrote: its planted NaN batch and dead ReLU are found
"$TW" eval "$DL/golden/ref_small" --json >"$WORK/eval.json" 2>"$WORK/eval.err" ||
    fail "eval of a debug-output folder: $(cat "$WORK/eval.err")"
grep -q "debug-output folder: 49 tensors, the debugging rules ExplodingTensor" \
    "$WORK/eval.err" || fail "eval did not say which rules run: $(cat "$WORK/eval.err")"
"$PY" - "$WORK/eval.json" <<'PY' || fail "eval's findings on the golden folder"
import json, sys
r = json.load(open(sys.argv[1]))
found = {x["name"]: x for x in r["rules"] if x["status"] == "IssuesFound"}
for want in ("ExplodingTensor", "DeadRelu"):
    assert want in found, (want, sorted(found))
assert "LossNotDecreasing" not in found, sorted(found)
print("eval of the reference-written folder: " + ", ".join(sorted(found)))
PY
"$TW" eval "$DL/golden/ref_small" --roundtrip >/dev/null 2>&1 &&
    fail "--roundtrip on a debug-output folder should be refused"
# replay sends the folder's tensors as the hook would: `run` finds the
# same as eval
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: debug-legacy
engine:
  results_dir: $WORK/res
  progress_interval: 0
tick: continuous
lateness: 0s
rules:
  - name: ExplodingTensor
  - name: DeadRelu
  - name: VanishingGradient
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "run: no partition assigned"
timeout 60 "$TW" replay "$DL/golden/ref_small" --brokers "$BOOTSTRAP" \
    --job ref_small >"$WORK/replay.out" 2>"$WORK/replay.err" ||
    fail "replay: $(cat "$WORK/replay.err")"
grep -q "a legacy debug-output folder (tensors)" "$WORK/replay.err" ||
    fail "replay did not say what it reads: $(cat "$WORK/replay.err")"
wait_for 60 test -f "$WORK/res/ref_small.json" || fail "run: no results for the replayed folder"
tw_run_stop A || fail "run exit status"
"$PY" - "$WORK/res/ref_small.json" "$WORK/eval.json" <<'PY' || fail "replayed folder in run"
import json, sys
r, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert r["input"]["tensors"] == 49, r["input"]
got = {x["name"]: x["status"] for x in r["rules"]}
want = {x["name"]: x["status"] for x in e["rules"] if x["name"] in got}
assert got == want, (got, want)
print("replay -> run: 49 tensors, " + ", ".join(f"{k} {v}" for k, v in sorted(got.items())))
PY
tw_broker_stop || fail "broker stop"
echo "debug_legacy: ok"
