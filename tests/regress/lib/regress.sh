# lib.sh - sourced by the numbered regression tests (tests/regress/NNNN-*.sh):
# the integration tests' helpers plus a scratch folder, cleanup and fail().
# Sets TW, HERE, SRC, WORK; the test sets RUN_NAMES (instances to kill).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
LIB=$SRC/tests/integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
GROUP=regress-$(basename "$0" .sh)
WORK=$(mktemp -d "/tmp/tw-regress-$(basename "$0" .sh).XXXXXX")
BROKER_PID=
REDIS_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
. "$LIB/redis.sh"
tw_regress_cleanup() {
    for n in A B C; do
        eval "p=\${RUN_PID_$n:-}"
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    done
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${REDIS_PID:-}" ] && kill -KILL "$REDIS_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap tw_regress_cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $(basename "$0"): $*" >&2
    for n in A B C; do
        [ -f "$WORK/$n.err" ] && { echo "--- $n:" >&2; grep -v '^progress' "$WORK/$n.err" | tail -n 25 >&2; }
    done
    exit 1
}
# need CMD...: skip (exit 77) when a tool is missing
need() {
    for c in "$@"; do
        command -v "$c" >/dev/null || { echo "SKIP: $c not installed"; exit 77; }
    done
}
# run_config NAME [extra yaml]: $WORK/NAME.yaml with results in $WORK/resNAME
run_config() {
    mkdir -p "$WORK/res$1"
    cat >"$WORK/$1.yaml" <<YAML
kafka:
  group: $GROUP
engine:
  results_dir: $WORK/res$1
  commit_interval: 200ms
  progress_interval: 0
${2:-}
YAML
}
