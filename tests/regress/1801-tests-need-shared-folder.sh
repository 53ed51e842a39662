#!/usr/bin/env bash
# 1801 - issue 18 (self-contained repository), item 4.
#
# Defect: with no ../shared beside the checkout (anyone cloning the
# project), scripts/test.sh failed: test_reader failed 7 tests (they read
# the sample files of ../shared/data/smdebug) and
# tests/integration/eval_presets.sh exited 1 (it evaluated
# ../shared/data/smdebug/test_traces and its corrupt file).
#
# Also, README.md and plugins/include/trainwatch/plugin.h sent readers to
# ../shared/RULES.md and ../shared/DESIGN.md, which a clone does not have.
#
# Asserts: both pass with TW_SHARED_DIR naming a folder that does not
# exist: the formats are covered by the project's own fixtures
# (tests/fixtures/agent), the shared-data checks are skipped with a
# message naming the missing folder; README.md and plugin.h name no
# document outside the repository, and the documents they name instead
# (docs/rules.md, docs/plugins.md) exist.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/tw-1801.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export TW_SOURCE_DIR=$SRC TW_BUILD_DIR=$BUILD
export TW_SHARED_DIR=$WORK/no-shared-here

"$BUILD/tests/test_reader" > "$WORK/reader.out" 2>&1 ||
    fail "test_reader without shared data: $(grep -E 'FAILED|ERROR' "$WORK/reader.out" | head -20)"
grep -q "skipped: no shared sample data at $TW_SHARED_DIR" "$WORK/reader.out" ||
    fail "test_reader did not say what it skipped"
grep -q "OK \] test_fixture_" "$WORK/reader.out" ||
    fail "test_reader ran no fixture test"
bash "$SRC/tests/integration/eval_presets.sh" "$BUILD" > "$WORK/presets.out" 2>&1 ||
    fail "eval_presets.sh without shared data: $(tail -5 "$WORK/presets.out")"
grep -q "skipped: shared sample data absent" "$WORK/presets.out" ||
    fail "eval_presets.sh did not say what it skipped"
for f in README.md plugins/include/trainwatch/plugin.h; do
    if grep -nE '\.\./shared|RULES\.md|DESIGN\.md' "$SRC/$f"; then
        fail "$f points outside the repository (above)"
    fi
done
for d in docs/rules.md docs/plugins.md; do
    [ -s "$SRC/$d" ] || fail "$d missing"
    grep -q "$d" "$SRC/README.md" || fail "README.md does not name $d"
done
echo "1801: test_reader and eval_presets.sh pass without ../shared; docs in the repository"
