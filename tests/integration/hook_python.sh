#!/usr/bin/env bash
# hook_python.sh BUILD_DIR - the Python hook's unit tests
# (tests/integration/hook/test_hook_unit.py: ProfilerConfig validation on
# the shared case table, wire encoding read back with the generated
# readers, node ids, the no-op hook, errors kept from training, steps and
# modes on a real torch model) against the package as the build
# assembled it (build/hooks/python); then `pip install` of hooks/python.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TW_SOURCE_DIR=${TW_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
(cd "$HERE/hook" && "$PY" -m unittest -v test_hook_unit test_hook_profiling) || exit 1

# `pip install ./hooks/python` (setup.py runs flatc on the schema), from a
# copy so the source tree gets no build folders; offline: no isolation.
if "$PY" -m pip --version >/dev/null 2>&1 && command -v flatc >/dev/null; then
    WORK=$(mktemp -d /tmp/tw-hook-pip.XXXXXX)
    trap 'rm -rf "$WORK"' EXIT
    cp -r "$TW_SOURCE_DIR/hooks/python" "$WORK/src"
    rm -rf "$WORK/src/build" "$WORK/src"/*.egg-info
    TRAINWATCH_SCHEMA=$TW_SOURCE_DIR/schemas/metrics.fbs "$PY" -m pip install \
        -q --no-deps --no-build-isolation --no-index --target "$WORK/site" \
        "$WORK/src" >"$WORK/pip.log" 2>&1 ||
        { echo "FAIL: pip install: $(tail -n 5 "$WORK/pip.log")"; exit 1; }
    (cd "$WORK" && PYTHONPATH=$WORK/site "$PY" -c '
import trainwatch, trainwatch.wire_batch as w
from trainwatch.wire.Batch import Batch
assert trainwatch.__file__.startswith("'"$WORK"'/site/"), trainwatch.__file__
b = Batch.GetRootAs(w.encode_batch("j", "n", 7), 0)
assert (b.Job(), b.Seq()) == (b"j", 7)
print("pip install: ok")') || { echo "FAIL: the installed package"; exit 1; }
else
    echo "pip or flatc missing: pip install not checked"
fi
