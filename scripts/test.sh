#!/usr/bin/env bash
# The whole test suite from nothing: install dependencies, build, run every
# test (ctest), then again under AddressSanitizer + UBSan.
# Set TW_SKIP_ASAN=1 to skip the sanitizer pass.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== build (RelWithDebInfo) =="
TW_BUILD=build scripts/build.sh
echo "== ctest =="
(cd build && ctest --output-on-failure -j 2)
if [ "${TW_SKIP_ASAN:-0}" != 1 ]; then
  echo "== build (Debug, ASan+UBSan) =="
  TW_BUILD=build-asan TW_BUILD_TYPE=Debug scripts/build.sh -DTW_SANITIZE=ON -DTW_BUILD_BENCH=OFF
  echo "== ctest under ASan+UBSan =="
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j 2 -E '_slow$')
fi
