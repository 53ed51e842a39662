#!/usr/bin/env bash
# Findings (plugin ABI 2): for every built-in rule that a synth preset
# triggers, `trainwatch eval --json` carries a finding whose nodes, time
# range and magnitude match what the preset planted, recomputed from the
# generated files by lib/findings_check.py; eval's table shows each finding
# as labelled lines and no raw report JSON. Usage: findings.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for preset in cpu_bottleneck io_bottleneck low_gpu gpu_fluctuation \
              gpu_memory_growth small_batch step_outliers load_imbalance \
              slow_init dataloader straggler; do
  dir="$WORK/$preset"
  "$TW" synth "$dir" --preset "$preset" --seed 7 2>/dev/null
  "$TW" eval "$dir" --json > "$WORK/$preset.json"
  python3 "$HERE/lib/findings_check.py" "$preset" "$dir" "$WORK/$preset.json" ||
    fail "$preset: findings do not match what was planted"
  "$TW" eval "$dir" > "$WORK/$preset.txt"
  # below the rule table: findings only, as labelled lines
  sed -n '/^RULE /,$p' "$WORK/$preset.txt" | grep -q '^  what: ' ||
    fail "$preset: eval's table shows no finding"
  if sed -n '/^RULE /,$p' "$WORK/$preset.txt" | grep -q '[{}]'; then
    fail "$preset: eval's table prints raw JSON: $(grep '[{}]' "$WORK/$preset.txt" | head -2)"
  fi
  for label in where when 'how much' try 'decided by'; do
    grep -q "^  $label: " "$WORK/$preset.txt" ||
      fail "$preset: eval's findings lack '$label:'"
  done
  echo "ok: $preset"
done
