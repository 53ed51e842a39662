#!/usr/bin/env bash
# debug_legacy_ref.sh BUILD_DIR - the legacy debug-output folder checked
# against the reference's own public reader and writer (smdebug from
# awslabs/sagemaker-debugger; tests/debug_legacy/ref_env.py). Skipped (77)
# where the reference is not available: TW_REF_MIRROR unset (see
# ../shared/reference/README.md), or protoc, python3-protobuf or torch
# missing. tests/integration/debug_legacy.sh checks the committed golden
# files without it.
#  (1) a folder written by the reference's PyTorch hook (torch, CPU, tiny
#      model: TRAIN and EVAL steps, weights and gradients as full tensors,
#      biases as stored reductions, ReLU outputs, a NaN batch, a dead
#      ReLU) and its --small variant: read by the reference's trial and by
#      `trainwatch debug-dump`, every value equal, every derived reduction
#      equal to numpy's on the reference's values and to the reference's
#      own numpy reductions, every stored reduction equal; the NaN and the
#      dead ReLU found; trainwatch's Python writer encodes every record
#      byte for byte as the reference wrote it; the same for a run with a
#      learning rate of 0 (update_l2 0 on every parameter) and a deep
#      sigmoid network (first-layer gradient abs_mean < 1e-3 of the last's);
#      `trainwatch eval` of those folders finds the NaN and the dead ReLU
#      (ExplodingTensor, DeadRelu), lr 0 (UnchangedTensor) and the
#      vanishing gradient (VanishingGradient);
#  (2) a folder written by trainwatch's Python writer (two workers), read
#      by the reference's trial: the values it reads are those written, and
#      debug-dump agrees with it as in (1).
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
DL=$HERE/../debug_legacy
why=$("$PY" -c "import sys; sys.path.insert(0, '$DL'); import ref_env; print(ref_env.unavailable() or '')")
if [ -n "$why" ]; then
    echo "SKIP: the reference is not available: $why"
    exit 77
fi
WORK=$(mktemp -d /tmp/tw-debug-legacy-ref.XXXXXX)
cleanup() { [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
export SMDEBUG_LOG_LEVEL=error
"$PY" "$DL/write_reference.py" --all "$WORK" >"$WORK/ref.log" 2>&1 ||
    fail "the reference's hook: $(tail -n 5 "$WORK/ref.log")"
for f in ref:default small:default lr0:lr0 sigmoid:sigmoid; do
    "$PY" "$DL/compare.py" "$TW" "$WORK/${f%%:*}" --pathologies "${f#*:}" \
        --bytes || fail "reference-written folder ${f%%:*}"
done
# the planted pathologies found by `eval` (the debugging rules whose
# tensors are present) on the reference-written folders
for f in ref:ExplodingTensor,DeadRelu lr0:UnchangedTensor sigmoid:VanishingGradient; do
    "$TW" eval "$WORK/${f%%:*}" --json --quiet >"$WORK/${f%%:*}.eval.json" ||
        fail "eval of the reference-written folder ${f%%:*}"
    "$PY" - "$WORK/${f%%:*}.eval.json" "${f#*:}" <<'PY' || fail "eval ${f%%:*}"
import json, sys
r = json.load(open(sys.argv[1]))
found = {x["name"] for x in r["rules"] if x["status"] == "IssuesFound"}
want = set(sys.argv[2].split(","))
assert want <= found, (sorted(want), sorted(found))
print(f"eval {r['job']}: {', '.join(sorted(found))}")
PY
done
"$PY" "$DL/write_python.py" --workers 2 "$WORK/py" || fail "write_python.py"
"$PY" "$DL/compare.py" "$TW" "$WORK/py" --written "$WORK/py.npz" --bytes ||
    fail "trainwatch-written folder read by the reference"
echo "debug_legacy_ref: ok"
