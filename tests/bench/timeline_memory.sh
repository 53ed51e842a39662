#!/usr/bin/env bash
# Peak memory of `trainwatch timeline` on a small and a large generated job
# (not a timed test: it prints figures). Memory must not grow with the
# folder: the large job's events go through the external sort's temporary
# file, not through memory.
#   tests/bench/timeline_memory.sh BUILD_DIR [LARGE_NODES] [LARGE_DURATION]
# default large job: 32 nodes x 2 h (about 2.1 GB of agent files). Needs
# free space in $TMPDIR for the job, the temporary runs and the output.
set -euo pipefail
BUILD=${1:?build dir}
NODES=${2:-32}
DURATION=${3:-2h}
TW="$BUILD/trainwatch"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

run() { # NAME NODES DURATION
  local dir="$WORK/$1"
  "$TW" synth "$dir" --preset healthy --nodes "$2" --duration "$3" --seed 2 2>/dev/null
  local size
  size=$(du -sb "$dir" | cut -f1)
  /usr/bin/time -f "%M %e" -o "$WORK/time" \
    "$TW" timeline "$dir" -o "$WORK/$1.json" 2>"$WORK/log"
  read -r rss secs < "$WORK/time"
  local out
  out=$(stat -c %s "$WORK/$1.json")
  printf '%-6s %3s nodes %-4s  folder %8.1f MB  output %8.1f MB  peak RSS %6.1f MB  %6.1f s  %s\n' \
    "$1" "$2" "$3" "$(echo "$size / 1000000" | bc -l)" "$(echo "$out / 1000000" | bc -l)" \
    "$(echo "$rss / 1024" | bc -l)" "$secs" "$(sed 's/.*written to [^ ]* //' "$WORK/log")"
  rm -rf "$dir" "$WORK/$1.json"
}

run small 2 10m
run large "$NODES" "$DURATION"
