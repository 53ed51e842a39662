#!/usr/bin/env bash
# 0902 - defect 9 of the edge-case issue (config edges): YAML nested
# 100 000 deep ("[[[[...]]]]" or "{a: {a: ...}}") crashed `run --config`
# and `eval --rules` with SIGSEGV: the configuration tree was built by
# recursion, one C stack frame per level.
# Asserts: both commands refuse both files with their usage/config exit
# status (2 for run, 1 for eval, never a signal) and an error naming
# FILE:1 and the depth limit.
# Usage: 0902-deep-yaml-stack-overflow.sh BUILD_DIR
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0902.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 -c 'print("[" * 100000 + "]" * 100000)' >"$WORK/lists.yaml"
python3 -c 'print("{a: " * 100000 + "1" + "}" * 100000)' >"$WORK/maps.yaml"
# a one-sample job for eval to read
mkdir -p "$WORK/job/system/incremental/2023111422"
echo '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":10,"NodeId":"algo-1","Timestamp":1700000000.0}' \
    >"$WORK/job/system/incremental/2023111422/1700000000.algo-1.json"

for f in lists maps; do
    "$TW" run --config "$WORK/$f.yaml" --brokers 127.0.0.1:1 \
        >/dev/null 2>"$WORK/run.err"
    rc=$?
    [ $rc -eq 2 ] || fail "run --config $f.yaml: exit status $rc: $(tail -c 300 "$WORK/run.err")"
    grep -q "$f.yaml:1: .*nested more than 64 deep" "$WORK/run.err" ||
        fail "run --config $f.yaml: $(cat "$WORK/run.err")"
    "$TW" eval "$WORK/job" --rules "$WORK/$f.yaml" >/dev/null 2>"$WORK/eval.err"
    rc=$?
    [ $rc -eq 1 ] || fail "eval --rules $f.yaml: exit status $rc: $(tail -c 300 "$WORK/eval.err")"
    grep -q "$f.yaml:1: .*nested more than 64 deep" "$WORK/eval.err" ||
        fail "eval --rules $f.yaml: $(cat "$WORK/eval.err")"
    echo "ok: $f nested 100000 deep: $(cat "$WORK/eval.err")"
done
