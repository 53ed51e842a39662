#!/usr/bin/env bash
# Configures and builds trainwatch into build/ (or $TW_BUILD, with extra
# cmake arguments passed through). Usage: scripts/build.sh [cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${TW_BUILD:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=${TW_BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
cmake --build "$BUILD" -j "$(nproc)"
