#!/usr/bin/env bash
# 0904 - defect 9 of the edge-case issue (config edges): duplicate keys in
# the YAML configuration were accepted and one of the values silently won
# (the top level kept the last `tick`, a settings section the first
# `job_idle`), hiding a copy-and-paste mistake. YAML 1.2 forbids them.
# Asserts: `eval --rules` and `run --config` refuse a duplicate top-level
# key, a duplicate rule parameter, a duplicate key in a settings section
# and a key given both dotted and nested (`a.b:` and `a: {b:}`), each with
# FILE:LINE of the repeat and the line of the first; JSON configs too.
# Usage: 0904-duplicate-yaml-keys.sh BUILD_DIR
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0904.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/job/system/incremental/2023111422"
echo '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":10,"NodeId":"algo-1","Timestamp":1700000000.0}' \
    >"$WORK/job/system/incremental/2023111422/1700000000.algo-1.json"

# refused CMD LINE FIRST KEY TEXT: CMD (eval|run) refuses TEXT with
# "FILE:LINE: ... KEY ... line FIRST".
refused() {
    local cmd=$1 line=$2 first=$3 key=$4 want rc
    printf '%s' "$5" >"$WORK/c.yaml"
    if [ "$cmd" = eval ]; then
        "$TW" eval "$WORK/job" --rules "$WORK/c.yaml" >/dev/null 2>"$WORK/err"
        rc=$?; want=1
    else
        "$TW" run --config "$WORK/c.yaml" --brokers 127.0.0.1:1 >/dev/null 2>"$WORK/err"
        rc=$?; want=2
    fi
    [ $rc -eq $want ] || fail "$cmd accepted a duplicate $key (exit $rc): $(cat "$WORK/err")"
    grep -q "c.yaml:$line: .*'$key'.*line $first)" "$WORK/err" ||
        fail "$cmd, duplicate $key: $(cat "$WORK/err")"
    echo "ok: $(cat "$WORK/err")"
}

refused eval 3 1 tick 'tick: 60s
lateness: 5s
tick: 1s
'
refused run 3 1 tick 'tick: 60s
lateness: 5s
tick: 1s
'
refused eval 5 4 threshold_p95 'rules:
  - name: LowGPUUtilization
    parameters:
      threshold_p95: 70
      threshold_p95: 10
'
refused run 4 2 job_idle 'engine:
  job_idle: 10m
  commit_interval: 1s
  job_idle: 1s
'
refused run 5 3 properties.session.timeout.ms 'kafka:
  group: g
  properties.session.timeout.ms: 6000
  properties:
    session.timeout.ms: 30000
'
refused eval 1 1 tick '{"tick": "60s", "tick": "1s"}
'
