#!/usr/bin/env bash
# `reference` semantics equals the reference implementation's outputs on a
# fixed set of generated jobs (tests/diff/golden: the jobs' synth options
# and what the reference printed for them, written by
# tests/diff/run_diff.py --write-golden). Every ProfilerReport sub-rule's
# status, Datapoints, Violations, RuleTriggered, triggered windows and
# numeric details must match; needs only the build, not the reference.
# Usage: diff_golden.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
HERE=$(cd "$(dirname "$0")" && pwd)
exec python3 "$HERE/../diff/check_golden.py" "$BUILD"
