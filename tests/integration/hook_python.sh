#!/usr/bin/env bash
# hook_python.sh BUILD_DIR - the Python hook's unit tests
# (tests/integration/hook/test_hook_unit.py: ProfilerConfig validation on
# the shared case table, wire encoding read back with the generated
# readers, node ids, the no-op hook, errors kept from training) against
# the package as the build assembled it (build/hooks/python).
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TW_SOURCE_DIR=${TW_SOURCE_DIR:-$(cd "$HERE/../.." && pwd)}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
cd "$HERE/hook" && exec "$PY" -m unittest -v test_hook_unit
