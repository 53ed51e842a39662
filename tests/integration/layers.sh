#!/usr/bin/env bash
# layers.sh BUILD_DIR - the engine's layers keep their declared direction
# (engine/CMakeLists.txt):
#  - every #include "x.h" in engine/<layer>/ names a header of that layer
#    or of a layer it may use (base < eval < io < actions < stream < tools
#    < cli, with io and eval side by side: io may not use eval);
#  - base and eval reference no Kafka, Redis, HTTP or SMTP library symbol
#    (nm -u on their static libraries: rd_kafka_, redis, curl_, MHD_);
#  - base references nothing of YAML, jansson, simdjson or FlatBuffers;
#  - the product libraries (base eval io actions stream) reference no
#    symbol that only the development tools define.
# Prints the layer graph it checked.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v nm >/dev/null || { echo "SKIP: nm not installed"; exit 77; }

python3 - "$SRC/engine" <<'PY' || fail "include direction"
import os, re, sys
eng = sys.argv[1]
allowed = {
    "base": {"base"},
    "eval": {"base", "eval"},
    "io": {"base", "io"},
    "actions": {"base", "eval", "actions"},
    "stream": {"base", "eval", "io", "actions", "stream"},
    "tools": {"base", "eval", "io", "stream", "tools"},
    "cli": {"base", "eval", "io", "actions", "stream", "tools", "cli"},
}
owner = {}
for layer in allowed:
    for f in os.listdir(os.path.join(eng, layer)):
        if f.endswith(".h"):
            if f in owner:
                sys.exit(f"{f} is in both {owner[f]} and {layer}")
            owner[f] = layer
bad = []
edges = set()
for layer in allowed:
    for f in sorted(os.listdir(os.path.join(eng, layer))):
        for n, line in enumerate(open(os.path.join(eng, layer, f), encoding="utf-8"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m or "/" in m.group(1) or m.group(1) not in owner:
                continue  # trainwatch/plugin.h, generated code
            dep = owner[m.group(1)]
            if dep != layer:
                edges.add((layer, dep))
            if dep not in allowed[layer]:
                bad.append(f"engine/{layer}/{f}:{n}: includes {m.group(1)} of layer {dep}")
for b in bad:
    print(b, file=sys.stderr)
order = list(allowed)
for layer in order:
    deps = sorted({d for l, d in edges if l == layer}, key=order.index)
    print(f"{layer:8s} -> {' '.join(deps) if deps else '(nothing)'}")
sys.exit(1 if bad else 0)
PY

lib() { echo "$BUILD/engine/libtw_$1.a"; }
for l in base eval io actions stream tools cli; do
    [ -f "$(lib $l)" ] || fail "no $(lib $l)"
done
undefined() { nm -u "$(lib "$1")" 2>/dev/null | awk '$1 == "U" {print $2}' | sort -u; }
for l in base eval; do
    hits=$(undefined $l | grep -E '^(rd_kafka_|redis|curl_|MHD_)' | head -5)
    [ -z "$hits" ] || fail "tw_$l references a Kafka/Redis/HTTP symbol: $hits"
done
hits=$(undefined base | grep -E '^(yaml_|json_|simdjson|_ZN11flatbuffers)' | head -5)
[ -z "$hits" ] || fail "tw_base references a parser library: $hits"
# symbols the tools define and the product would need
nm --defined-only "$(lib tools)" | awk '$2 ~ /[TDBR]/ {print $3}' | sort -u >"$BUILD/tools.syms"
for l in base eval io actions stream; do
    hits=$(undefined $l | comm -12 - "$BUILD/tools.syms" | head -5)
    [ -z "$hits" ] || fail "tw_$l uses the development tools: $hits"
done
echo "PASS layers: base and eval link no Kafka/Redis/HTTP library; the product uses no tool"
