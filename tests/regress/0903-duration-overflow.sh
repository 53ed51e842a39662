#!/usr/bin/env bash
# 0903 - defect 9 of the edge-case issue (config edges): a duration past
# the int64 range of microseconds (`tick: 1e300s`) was accepted: the
# double -> int64 conversion is undefined there, gave 0 on x86-64, and
# tick 0 means continuous mode, so the typo silently changed how the engine
# scans. The other duration keys (engine.job_idle, state.finished_ttl,
# an action's timeout...) had the same unchecked conversion.
# Asserts: every duration key given 1e300s, 1e300d or inf is refused by
# `eval --rules` (tick, lateness) and `run --config` (all sections) with
# FILE:LINE, the key and the accepted range; 36525d (the maximum) is fine.
# Usage: 0903-duration-overflow.sh BUILD_DIR
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0903.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/job/system/incremental/2023111422"
echo '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":10,"NodeId":"algo-1","Timestamp":1700000000.0}' \
    >"$WORK/job/system/incremental/2023111422/1700000000.algo-1.json"

# refused CMD LINE KEY YAML: CMD (eval|run) refuses the file YAML with
# "FILE:LINE: ... KEY ... 36525d".
refused() {
    local cmd=$1 line=$2 key=$3 want rc
    printf '%s' "$4" >"$WORK/c.yaml"
    if [ "$cmd" = eval ]; then
        "$TW" eval "$WORK/job" --rules "$WORK/c.yaml" >/dev/null 2>"$WORK/err"
        rc=$?; want=1
    else
        "$TW" run --config "$WORK/c.yaml" --brokers 127.0.0.1:1 >/dev/null 2>"$WORK/err"
        rc=$?; want=2
    fi
    [ $rc -eq $want ] || fail "$cmd accepted $key (exit $rc): $(cat "$WORK/err")"
    grep -q "c.yaml:$line: .*$key.*36525d" "$WORK/err" ||
        fail "$cmd, $key: $(cat "$WORK/err")"
    echo "ok: $(cat "$WORK/err")"
}

refused eval 1 tick 'tick: 1e300s
'
refused eval 2 lateness 'tick: 60s
lateness: inf
'
refused run 1 tick 'tick: 1e300s
'
refused run 3 job_idle 'engine:
  commit_interval: 1s
  job_idle: 1e300s
'
refused run 2 commit_interval 'engine:
  commit_interval: 1e300h
'
refused run 3 finished_ttl 'state:
  store: memory
  finished_ttl: 1e300d
'
refused run 3 checkpoint_interval 'state:
  store: memory
  checkpoint_interval: 1e20s
'
refused run 5 timeout 'rules:
  - name: CPUBottleneck
    actions:
      - type: stop_file
        timeout: 1e300s
        path: /tmp/x
'
# the maximum itself is a duration
printf 'tick: 36525d\n' >"$WORK/max.yaml"
"$TW" eval "$WORK/job" --rules "$WORK/max.yaml" >/dev/null 2>"$WORK/err" ||
    fail "tick: 36525d refused: $(cat "$WORK/err")"
echo "ok: tick: 36525d accepted"
