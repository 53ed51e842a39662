#!/usr/bin/env bash
# The installable SDK: `cmake --install` into a fresh prefix puts the
# binary, the built-in rules, the public headers, trainwatch.pc and the
# CMake package config in place; the example rule builds out of tree
# against that prefix with pkg-config and with find_package(trainwatch);
# both builds pass `rules check` and the example's own `rules test`, and
# the installed binary finds its installed rules (not the build tree's).
# Usage: sdk_install.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || { echo "SKIP: no pkg-config"; exit 77; }

P=$WORK/prefix
cmake --install "$BUILD" --prefix "$P" >/dev/null
for f in bin/trainwatch include/trainwatch/plugin.h include/trainwatch/finding.h \
         lib/pkgconfig/trainwatch.pc lib/cmake/trainwatch/trainwatchConfig.cmake \
         lib/cmake/trainwatch/trainwatchConfigVersion.cmake; do
  [ -f "$P/$f" ] || fail "not installed: $f"
done
# every public header the source tree has is installed
for h in "$SRC"/plugins/include/trainwatch/*.h; do
  cmp -s "$h" "$P/include/trainwatch/$(basename "$h")" || fail "header $h not installed"
done
nrules=$(ls "$BUILD"/rules/*.so | wc -l)
[ "$(ls "$P"/lib/trainwatch/rules/*.so | wc -l)" -eq "$nrules" ] || fail "rules not all installed"
echo "ok: installed into a fresh prefix ($nrules rules)"

# The installed binary lists its own rules (the prefix differs from the
# configured one: found beside the executable).
out=$(env -u TRAINWATCH_RULES_DIR "$P/bin/trainwatch" rules list)
grep -q "^LowGPUUtilization  ($P/bin/../lib/trainwatch/rules/low_gpu_utilization.so)" <<<"$out" ||
  fail "installed binary does not list its installed rules: $(echo "$out" | head -3)"
echo "ok: installed binary lists the installed rules"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
[ "$(pkg-config --modversion trainwatch)" = "$("$P/bin/trainwatch" --version | awk '{print $2}')" ] ||
  fail "pkg-config version differs from the binary's"
[ "$(pkg-config --variable=plugin_abi trainwatch)" = \
  "$(grep -oP '^#define TW_PLUGIN_ABI_VERSION \K[0-9]+' "$SRC/plugins/include/trainwatch/plugin.h")" ] ||
  fail "pkg-config plugin_abi differs from plugin.h"

# Each out-of-tree build: rules check, then the example's rule unit tests
# (which name ./gpu_memory_ceiling.so beside themselves).
check_build() { # DIR HOW
  "$P/bin/trainwatch" rules check "$1/gpu_memory_ceiling.so" --entry gpu_memory_ceiling_rule \
    >"$WORK/check.out" || fail "$2: rules check: $(cat "$WORK/check.out")"
  grep -q "^ok: .*rule GPUMemoryCeiling" "$WORK/check.out" || fail "$2: $(cat "$WORK/check.out")"
  cp "$SRC/plugins/example/gpu_memory_ceiling_test.yaml" "$SRC/plugins/example/ceiling_rules.yaml" "$1/"
  env -u TRAINWATCH_RULES_DIR "$P/bin/trainwatch" rules test "$1/gpu_memory_ceiling_test.yaml" \
    >"$WORK/test.out" || fail "$2: rules test: $(cat "$WORK/test.out")"
  grep -q "^rules test: 2 passed, 0 failed" "$WORK/test.out" || fail "$2: $(cat "$WORK/test.out")"
  echo "ok: $2: built, checked and its rule unit tests pass"
}

mkdir "$WORK/pc"
# shellcheck disable=SC2046
cc $(pkg-config --cflags trainwatch) -std=c17 -Wall -Wextra -Werror -shared -fPIC \
   -fvisibility=hidden -o "$WORK/pc/gpu_memory_ceiling.so" "$SRC/plugins/example/gpu_memory_ceiling.c"
check_build "$WORK/pc" "pkg-config build"

cmake -S "$SRC/plugins/example" -B "$WORK/cm" -DCMAKE_PREFIX_PATH="$P" >/dev/null
cmake --build "$WORK/cm" >/dev/null
check_build "$WORK/cm/plugins/example" "find_package(trainwatch) build"
