#!/usr/bin/env bash
# Runs one libFuzzer target for a while:
#   scripts/fuzz.sh NAME [SECONDS]      e.g. scripts/fuzz.sh wire 300
# NAME: wire, reader, config, actions, yaml_json, profiler_config, state,
# snapshot (README "Fuzzing" says what each reads).
# Builds tests/fuzz/fuzz_NAME.c with clang -fsanitize=fuzzer,address,undefined into
# build-fuzz/ (the whole engine is instrumented), seeds it with
# tests/fuzz/corpus/NAME/ (read only), and keeps what it finds under
# tests/fuzz/findings/NAME/ (git-ignored): new inputs in corpus/, crashing
# inputs as crash-*. Reproduce one with the ctest build:
#   build/tests/fuzz_NAME tests/fuzz/findings/NAME/crash-...
# Worth adding a minimised crash to the seed corpus once it is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 NAME [SECONDS]   (NAME: tests/fuzz/fuzz_NAME.c)" >&2
  exit 2
fi
NAME=$1
SECONDS_TO_RUN=${2:-60}
SRC=tests/fuzz/fuzz_${NAME}.c
SEEDS=tests/fuzz/corpus/${NAME}
if [ ! -f "$SRC" ]; then
  echo "fuzz: no $SRC" >&2
  exit 2
fi
if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "fuzz: clang and clang++ are needed (libFuzzer ships with clang;" \
       "gcc has no equivalent). Install the Debian package 'clang'." >&2
  exit 1
fi

BUILD=${TW_FUZZ_BUILD:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTW_LIBFUZZER=ON -DTW_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD" -j "${TW_JOBS:-2}" --target "fuzz_${NAME}"

# Targets that build jobs (state) load the instrumented built-in rules.
export TRAINWATCH_RULES_DIR="$(cd "$BUILD" && pwd)/rules"

OUT=tests/fuzz/findings/${NAME}
mkdir -p "$OUT/corpus"
DIRS=("$OUT/corpus")
if [ -d "$SEEDS" ]; then DIRS+=("$SEEDS"); fi
# New inputs go to the first directory only, so the seed corpus stays as
# committed.
"$BUILD/tests/fuzz_${NAME}" -max_total_time="$SECONDS_TO_RUN" \
  -artifact_prefix="$OUT/" -print_final_stats=1 "${DIRS[@]}"
