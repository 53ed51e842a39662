#!/usr/bin/env bash
# The public plugin headers (plugins/include/trainwatch/*.h) are
# self-contained: each compiles alone, with a copy of that folder as the
# only include path, under -Wall -Wextra -Werror -Wpedantic (C11 and C17;
# and as C++17 where a C++ compiler is installed),
# and includes nothing but libc and other trainwatch/ headers. The example
# plugin builds by hand against that copy, loads, and its report is the
# host's envelope around its Details. Usage: public_headers.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
CC=${CC:-cc}

cp -r "$SRC/plugins/include" "$WORK/include"
n=0
for h in "$WORK"/include/trainwatch/*.h; do
  name=$(basename "$h")
  bad=$(grep -E '^\s*#\s*include\s+"' "$h" | grep -v '"trainwatch/[a-z_]*\.h"' || true)
  [ -z "$bad" ] || fail "$name includes outside trainwatch/: $bad"
  for std in c11 c17; do
    printf '#include "trainwatch/%s"\n#include "trainwatch/%s"\nint main(void) { return 0; }\n' \
      "$name" "$name" >"$WORK/t.c"
    "$CC" -std=$std -Wall -Wextra -Werror -Wpedantic -Wshadow \
      -Wstrict-prototypes -Wmissing-prototypes -I "$WORK/include" \
      "$WORK/t.c" -o "$WORK/t" -lm 2>"$WORK/err" ||
      fail "$name does not compile alone ($std): $(head -5 "$WORK/err")"
  done
  # a C++ plugin can include them too (extern "C", no implicit void *)
  if command -v "${CXX:-c++}" >/dev/null; then
    printf '#include "trainwatch/%s"\nint main() { return 0; }\n' "$name" >"$WORK/t.cc"
    "${CXX:-c++}" -std=c++17 -Wall -Wextra -Werror -I "$WORK/include" \
      "$WORK/t.cc" -o "$WORK/t" -lm 2>"$WORK/err" ||
      fail "$name does not compile as C++17: $(head -5 "$WORK/err")"
  fi
  n=$((n + 1))
done
[ "$n" -ge 6 ] || fail "expected at least 6 public headers, found $n"
echo "ok: $n headers compile alone"

"$CC" -std=c17 -Wall -Wextra -Werror -O2 -fPIC -fvisibility=hidden -shared \
  -I "$WORK/include" -o "$WORK/gpu_memory_ceiling.so" \
  "$SRC/plugins/example/gpu_memory_ceiling.c" 2>"$WORK/err" ||
  fail "the example does not build against the public headers: $(head -5 "$WORK/err")"
"$TW" synth "$WORK/job" --preset gpu_memory_growth --seed 3 --duration 300 2>/dev/null
cat >"$WORK/rules.yaml" <<YAML
rules:
  - name: GPUMemoryCeiling
    source: $WORK/gpu_memory_ceiling.so
    rule_to_invoke: gpu_memory_ceiling_rule
    parameters: {ceiling: 10, patience: 3}
YAML
"$TW" eval "$WORK/job" --rules "$WORK/rules.yaml" --json >"$WORK/out.json"
python3 - "$WORK/out.json" <<'PY' || fail "the example's report is not the host's envelope"
import json, sys
d = json.load(open(sys.argv[1]))
r = [x for x in d["rules"] if x["name"] == "GPUMemoryCeiling"][0]
rep = r["report"]
assert list(rep) == ["RuleTriggered", "Violations", "Details", "Datapoints",
                     "RuleParameters"], list(rep)
assert rep["Violations"] == r["violations"] > 0, (rep, r)
assert rep["Datapoints"] == r["datapoints"] > 0, (rep, r)
assert rep["RuleTriggered"] == r["rule_triggered"], (rep, r)
assert rep["RuleParameters"] == "ceiling:10\npatience:3", rep
assert rep["Details"]["longest_run"] > 3 and rep["Details"]["gpu"] == "gpu0", rep
print("ok: example report", json.dumps(rep))
PY
