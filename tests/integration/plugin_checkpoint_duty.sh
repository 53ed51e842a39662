#!/usr/bin/env bash
# Plugin ABI 2's checkpoint duty: with a persistent state store
# (state.store: redis) `trainwatch run` refuses at start-up, naming the
# rule and its file, a rule that keeps state but has no save/restore (an
# ABI 1 fixture); it accepts a rule declaring TW_RULE_STATELESS and the
# example plugin (real save/restore); with the memory store the ABI 1 rule
# runs. The check happens before any connection, so no broker or redis
# is needed: both point at a closed port. Usage: BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

config() { # STORE SOURCE ENTRY
  {
    echo "state:"
    echo "  store: $1"
    if [ "$1" = redis ]; then
      printf '  redis:\n    host: 127.0.0.1\n    port: 1\n'
    fi
    printf 'rules:\n  - name: Custom\n    source: %s\n    rule_to_invoke: %s\n' "$2" "$3"
  } > "$WORK/run.yaml"
}

# refused: exits by itself, and says who and why
config redis "$BUILD/tests/plugins/abi1_counter.so" abi1_counter
rc=0
timeout 30 "$TW" run --config "$WORK/run.yaml" --brokers 127.0.0.1:1 \
  > "$WORK/out" 2> "$WORK/err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "rule without save/restore not refused (rc $rc)"
grep -q "rule Custom (.*abi1_counter.so): has no save() nor restore()" "$WORK/err" ||
  fail "refusal does not name the rule: $(cat "$WORK/err")"
grep -q "TW_RULE_STATELESS" "$WORK/err" || fail "refusal does not say the way out"
echo "ok: refused under redis: $(grep -o 'rule Custom.*' "$WORK/err")"

# accepted: still running when killed after 3 s (it waits for the broker)
accepted() { # WHAT
  rc=0
  timeout -s KILL 3 "$TW" run --config "$WORK/run.yaml" --brokers 127.0.0.1:1 \
    > "$WORK/out" 2> "$WORK/err" || rc=$?
  if grep -q "has no save" "$WORK/err"; then
    fail "$1 refused: $(grep 'has no save' "$WORK/err")"
  fi
  [ "$rc" -eq 137 ] || fail "$1: run exited early (rc $rc): $(tail -3 "$WORK/err")"
  echo "ok: $1 accepted (rc $rc)"
}
config redis "$BUILD/tests/plugins/stateless_rule.so" stateless_rule
accepted "stateless rule under redis"
config redis "$BUILD/plugins/example/gpu_memory_ceiling.so" gpu_memory_ceiling_rule
accepted "example plugin under redis"
config memory "$BUILD/tests/plugins/abi1_counter.so" abi1_counter
accepted "ABI 1 rule with the memory store"
