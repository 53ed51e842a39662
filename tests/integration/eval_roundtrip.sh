#!/usr/bin/env bash
# `trainwatch eval --roundtrip` (checkpoint exactness, offline): every
# built-in rule (ProfilerReport and its sub-rules, both semantics, on
# presets that make them fire) and the example plugin come back from a
# save / re-create / restore after each scan with the results of an
# uninterrupted evaluation; a plugin whose save forgets state is caught
# and named (exit 1). Usage: eval_roundtrip.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for preset in cpu_bottleneck step_outliers slow_init dataloader \
              load_imbalance gpu_memory_growth; do
  "$TW" synth "$WORK/$preset" --preset "$preset" --seed 3 2>/dev/null
  for sem in fixed reference; do
    out=$("$TW" eval "$WORK/$preset" --roundtrip --semantics "$sem" --quiet) ||
      fail "$preset ($sem): $out"
    # fixed: the reference's eleven and Straggler
    nsub=11; [ "$sem" = fixed ] && nsub=12
    echo "$out" | grep -q "^roundtrip: ok: 1 rule(s) (and $nsub sub-rule(s))" ||
      fail "$preset ($sem): $out"
  done
  echo "ok: $preset"
done

cat > "$WORK/custom.yaml" <<YAML
rules:
  - name: GPUMemoryCeiling
    source: $BUILD/plugins/example/gpu_memory_ceiling.so
    rule_to_invoke: gpu_memory_ceiling_rule
    parameters: {ceiling: 50, patience: 3}
YAML
out=$("$TW" eval "$WORK/cpu_bottleneck" --rules "$WORK/custom.yaml" --roundtrip --quiet) ||
  fail "example plugin: $out"
echo "ok: example plugin: $out"

cat >> "$WORK/custom.yaml" <<YAML
  - name: Lossy
    source: $BUILD/tests/plugins/lossy_save.so
    rule_to_invoke: lossy_save
YAML
rc=0
out=$("$TW" eval "$WORK/cpu_bottleneck" --rules "$WORK/custom.yaml" --roundtrip --quiet) || rc=$?
[ "$rc" -eq 1 ] || fail "lossy save not caught (rc $rc): $out"
echo "$out" | grep -q '^roundtrip: rule Lossy: results differ' ||
  fail "lossy rule not named: $out"
if echo "$out" | grep -q 'rule GPUMemoryCeiling: results differ'; then
  fail "the example was blamed: $out"
fi
echo "$out" | grep -q '^roundtrip: FAILED: 2 rule(s)' || fail "summary: $out"
echo "ok: lossy save caught"
