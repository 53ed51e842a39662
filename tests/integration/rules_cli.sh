#!/usr/bin/env bash
# `trainwatch rules list|check|test`: the list shows every built-in rule
# with parameters, defaults and bounds from its descriptor; check accepts
# the example plugin and refuses, with the reason, a wrong ABI, a missing
# entry symbol, a file that is no shared object, a missing file and a
# default out of its own bounds; test passes the example's rule unit
# tests, and on wrong expectations exits 1 with a diff naming each
# disagreement; an invalid tests file is refused naming the key.
# Usage: rules_cli.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
TW="$BUILD/trainwatch"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TRAINWATCH_RULES_DIR=$BUILD/rules
export TMPDIR=$WORK/tmp # where rules test generates synth inputs
mkdir "$TMPDIR"

# ---- list
out=$("$TW" rules list)
for so in "$BUILD"/rules/*.so; do
  name=$("$TW" rules check "$so" | sed -n 's/^ok: .*: rule \([A-Za-z]*\),.*/\1/p')
  grep -q "^$name  ($so)$" <<<"$out" || fail "rules list lacks $name ($so)"
done
grep -qE '^  threshold_p95 +number, default 70, from 0 to 100$' <<<"$out" ||
  fail "rules list: LowGPUUtilization's threshold_p95 line: $out"
echo "ok: rules list names every built-in rule with its parameters"

# ---- check
EX=$BUILD/plugins/example/gpu_memory_ceiling.so
out=$("$TW" rules check "$EX" --entry gpu_memory_ceiling_rule)
grep -q "^ok: $EX: rule GPUMemoryCeiling, plugin ABI 2" <<<"$out" || fail "check: $out"
grep -q "checkpoints: save/restore" <<<"$out" || fail "check: $out"
grep -qE '^    patience +integer, default 20, from 1 to 1e\+09$' <<<"$out" || fail "check: $out"
refused() { # WANT ARGS...: exit 1 and WANT in the message
  local want=$1; shift
  local rc=0
  "$TW" rules check "$@" >"$WORK/out" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || fail "rules check $*: exit $rc, expected 1: $(cat "$WORK/out")"
  grep -q -- "$want" "$WORK/out" || fail "rules check $*: '$want' not in: $(cat "$WORK/out")"
}
refused "ABI version 3, but this engine speaks versions 1 to 2" "$BUILD/tests/plugins/bad_abi.so"
refused "entry symbol 'trainwatch_rule' not found" "$EX"
refused "No such file or directory" "$WORK/none.so"
cp "$BUILD/CMakeCache.txt" "$WORK/text.so"
refused "cannot load: .*invalid ELF header" "$WORK/text.so"
refused "parameter 'threshold' = 150 is out of range \[0.0, 100.0\]" "$BUILD/tests/plugins/bad_default.so"
rc=0; "$TW" rules check >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "rules check without a file: exit $rc, expected 2"
echo "ok: rules check accepts the example and names what is wrong with bad plugins"

# ---- test: the example's own tests pass
out=$("$TW" rules test "$BUILD/plugins/example/gpu_memory_ceiling_test.yaml")
grep -q "^rules test: 2 passed, 0 failed, 0 skipped$" <<<"$out" || fail "example tests: $out"
echo "ok: the example plugin's rule unit tests pass"

# ---- test: wrong expectations fail with a diff
cp "$BUILD/plugins/example/gpu_memory_ceiling.so" "$BUILD/plugins/example/ceiling_rules.yaml" "$WORK/"
"$TW" synth "$WORK/full" --preset low_gpu --seed 3 --no-framework >/dev/null 2>&1
cat > "$WORK/wrong.yaml" <<'YAML'
tests:
  - name: wrong status, count and text
    input: {folder: full}
    rules: ceiling_rules.yaml
    expect:
      - rule: GPUMemoryCeiling
        status: NoIssuesFound
        violations: 7
        finding: [above 90 %]
      - {rule: NoSuchRule}
  - name: right in reference semantics
    input: {folder: full}
    rules: ceiling_rules.yaml
    semantics: reference
    expect:
      - {rule: GPUMemoryCeiling, status: IssuesFound, triggered: 1, finding: algo-1/gpu0}
YAML
rc=0; "$TW" rules test "$WORK/wrong.yaml" >"$WORK/out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "wrong expectations: exit $rc, expected 1: $(cat "$WORK/out")"
for want in "^test 'wrong status, count and text': FAILED (- expected, + got)$" \
            "^  -  status: NoIssuesFound$" "^  +  status: IssuesFound$" \
            "^  -  violations: 7$" "^  +  violations: 1$" \
            '^  -  contains "above 90 %"$' \
            "^  +  GPU memory stayed above 75 % for longer than 20 samples" \
            "^  NoSuchRule: not in the results$" \
            "^test 'right in reference semantics': ok$" \
            "^rules test: 1 passed, 1 failed, 0 skipped$"; do
  grep -q -- "$want" "$WORK/out" || fail "'$want' not in: $(cat "$WORK/out")"
done
out=$("$TW" rules test "$WORK/wrong.yaml" --run reference)
grep -q "^rules test: 1 passed, 0 failed, 1 skipped$" <<<"$out" || fail "--run: $out"
echo "ok: rules test exits 1 with a diff when a rule disagrees"

# ---- test: an invalid tests file names what is wrong, and evaluates nothing
cat > "$WORK/typo.yaml" <<'YAML'
tests:
  - name: typo
    input: {folder: full}
    expect: [{rule: GPUMemoryCeiling, statsu: IssuesFound}]
YAML
rc=0; "$TW" rules test "$WORK/typo.yaml" >"$WORK/out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "typo: exit $rc"
grep -q "typo.yaml: test 'typo': expect\[0\]: unknown key 'statsu'" "$WORK/out" || fail "typo: $(cat "$WORK/out")"
printf 'tests:\n  - name: x\n    input: {folder: full, synth: {preset: healthy}}\n    expect: [{rule: A}]\n' >"$WORK/both.yaml"
rc=0; "$TW" rules test "$WORK/both.yaml" >"$WORK/out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "'input' needs one of 'folder' or 'synth'" "$WORK/out" || fail "both: $(cat "$WORK/out")"
[ -z "$(ls "$TMPDIR")" ] || fail "generated inputs left behind: $(ls "$TMPDIR")"
echo "ok: invalid tests files are refused with the reason"
