#!/usr/bin/env bash
# The whole test suite from nothing: install dependencies, check the
# formatting (scripts/format.sh --check), build, run every test (ctest),
# every unit test again under valgrind (memcheck), then the whole suite
# under AddressSanitizer + UBSan.
# TW_SKIP_VALGRIND=1 / TW_SKIP_ASAN=1 skip those passes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
echo "== format (clang-format 14, .clang-format) =="
scripts/format.sh --check
echo "== build (RelWithDebInfo) =="
TW_BUILD=build scripts/build.sh
echo "== ctest =="
(cd build && ctest --output-on-failure -j 2)
if [ "${TW_SKIP_VALGRIND:-0}" != 1 ]; then
  echo "== unit tests under valgrind =="
  vg_failed=0
  for t in build/tests/test_* build/tests/regress_*; do
    [ -x "$t" ] || continue
    if TW_BUILD_DIR=$PWD/build TW_SOURCE_DIR=$PWD TW_SHARED_DIR=$PWD/../shared \
       TRAINWATCH_RULES_DIR=$PWD/build/rules \
       valgrind -q --error-exitcode=99 --leak-check=full \
         --errors-for-leak-kinds=definite,indirect "$t" > "build/$(basename "$t").valgrind.log" 2>&1; then
      echo "valgrind clean: $(basename "$t")"
    else
      echo "valgrind FAILED: $(basename "$t") (see build/$(basename "$t").valgrind.log)"
      tail -30 "build/$(basename "$t").valgrind.log"
      vg_failed=1
    fi
  done
  [ "$vg_failed" = 0 ] || exit 1
fi
if [ "${TW_SKIP_ASAN:-0}" != 1 ]; then
  echo "== build (Debug, ASan+UBSan) =="
  TW_BUILD=build-asan TW_BUILD_TYPE=Debug scripts/build.sh -DTW_SANITIZE=ON -DTW_BUILD_BENCH=OFF
  echo "== ctest under ASan+UBSan =="
  (cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j 2 -E '_slow$')
fi
