#!/usr/bin/env bash
# run_kill_write.sh BUILD_DIR - SIGKILL of `trainwatch run` exactly while
# it writes a finished job's results file or HTML report, then a restart
# from the Redis checkpoint. strace's syscall injection (-e inject=...:
# signal=KILL, -P the file) kills the engine on entering one syscall on one
# file; nothing in the engine is built for the test. Windows:
#   tmp-write   write() of the results' temporary file (created, empty)
#   tmp-fsync   fsync() of it (all bytes written, not synced)
#   link        link() of it to <job>.json (synced, not placed)
#   placed      unlink() of it after the link (placed; no tombstone,
#               no checkpoint, no Kafka commit yet)
#   html-write  write() of the report's temporary file (results placed)
#   html-fsync  fsync() of it (the page written, not synced)
#   html-rename rename() of the report into place
# Each window: its own broker, group, Redis prefix and results folder, a
# 30-minute 2-node job replayed at 600x (checkpoints before it ends); the
# seven run side by side (each restart mostly waits for the killed
# member's 6 s session). Asserts after the kill: the engine died at that
# syscall, <job>.json is absent (first three windows) or already complete;
# after the restart (the job restored from its Redis checkpoint, the tail
# of its messages read again): <job>.json byte-identical to an
# uninterrupted run's and equal to `eval --json`, <job>.html identical to
# the uninterrupted run's,
# no temporary file left in the results folder, every alert of the
# uninterrupted run on the topic exactly once, and a tombstone in Redis.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
command -v strace >/dev/null || { echo "SKIP: strace not installed"; exit 77; }
# a container may forbid ptrace
strace -D -f -qq -o /dev/null true 2>/dev/null ||
    { echo "SKIP: strace cannot trace here (ptrace not permitted)"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-killwrite.XXXXXX)
STATE_JOB=kw-job
BROKER_PID=
KILLED_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/state.sh"
cleanup() {
    for p in ${KILLED_PID:-} ${RUN_PID_B:-} ${RUN_PID_BASE:-} ${KCAT_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.err "$WORK"/*.strace; do
        [ -f "$f" ] && { echo "--- $f:" >&2; tail -n 8 "$f" >&2; }
    done
    exit 1
}

# A smaller job than state_make_job's (same rules): one window is a
# broker, a replay, a kill, a restart and a session timeout.
timeout 60 "$TW" synth "$WORK/$STATE_JOB" --preset cpu_bottleneck --nodes 2 \
    --duration 30m --interval-ms 5000 --no-framework >/dev/null 2>"$WORK/synth.err" ||
    fail "synth: $(cat "$WORK/synth.err")"
state_rules >"$WORK/rules.yaml"
timeout 60 "$TW" eval "$WORK/$STATE_JOB" --json --quiet --rules "$WORK/rules.yaml" \
    >"$WORK/$STATE_JOB.eval.json" || fail "eval"

tw_redis_start || fail "redis start"
state_baseline
[ -s "$WORK/base/$STATE_JOB.html" ] || fail "uninterrupted run: no HTML report"
tw_redis_cli flushall >/dev/null
SIZE=$(stat -c %s "$WORK/base/$STATE_JOB.json")

# kill_window NAME SYSCALLS FILE: one window, in $TOP/NAME (run in a
# subshell); FILE is results (the temporary file of the engine's first
# results write: .<job>.tmp-<pid>-0) or html (.<job>.html.tmp).
kill_window() {
    local name=$1 calls=$2 file=$3
    WORK=$TOP/$name
    local dir=$WORK/res
    mkdir -p "$WORK"
    ln -s "$TOP/base" "$TOP/$STATE_JOB" "$TOP/$STATE_JOB.eval.json" "$TOP/base.alerts.jsonl" "$WORK/"
    trap 'for p in ${KILLED_PID:-} ${RUN_PID_B:-} ${KCAT_PID:-} ${BROKER_PID:-}; do kill -KILL "$p" 2>/dev/null; done' EXIT
    tw_broker_start || fail "$name: broker start"
    state_config "$name" "$name-group" "$dir"
    sed -i "s/prefix: \"t:\"/prefix: \"$name:\"/" "$WORK/$name.yaml"
    state_alerts_start "$WORK/$name.alerts.jsonl"
    # strace -D: the tracer is a grandchild, so the engine keeps this
    # shell's pid, which names its temporary file
    # shellcheck disable=SC2016
    bash -c 'pid=$$
        case $3 in
        results) path="$2/.$1.tmp-$pid-0" ;;
        html) path="$2/.$1.html.tmp" ;;
        esac
        exec strace -D -f -qq -o "$4.strace" -e trace="$5" \
            -e inject="$5":signal=KILL:when=1 -P "$path" -- \
            "$6" run --config "$4.yaml" --brokers "$7" 2>"$4.err" >"$4.out"' \
        _ "$STATE_JOB" "$dir" "$file" "$WORK/$name" "$calls" "$TW" "$BOOTSTRAP" &
    KILLED_PID=$!
    wait_for 60 grep -qs "assigned partition" "$WORK/$name.err" || fail "$name: no assignment"
    # 30 min at 600x: 3 s, so the job has checkpoints (every 200 ms) before
    # it ends and the restart restores it from the last one
    timeout 60 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" -q \
        --rate 600x --group "$name-group" >"$WORK/$name.replay" 2>&1 || fail "$name: replay: $(cat "$WORK/$name.replay")"
    wait_for 60 eval '! kill -0 $KILLED_PID 2>/dev/null' || fail "$name: not killed at $calls"
    local pid=$KILLED_PID rc at
    wait "$KILLED_PID"
    rc=$?
    KILLED_PID=
    [ "$rc" -eq 137 ] || fail "$name: exit status $rc, not SIGKILL's"
    # the first call traced is the one killed (-P: only calls on the file);
    # strace also logs signals the engine receives (a SIGALRM of its timer
    # came first once, under ASan's slower run): those lines are skipped
    at=$(grep -Ev '^[0-9]+ +--- SIG' "$WORK/$name.strace" | head -1)
    grep -Eq "^$pid +(${calls//,/|})\(.*(<unfinished \.\.\.>| = \?)$" <<<"$at" &&
        grep -Eq "^$pid +\+\+\+ killed by SIGKILL \+\+\+" "$WORK/$name.strace" ||
        fail "$name: not killed by strace at $calls: $at"
    # what the kill left: never a partial <job>.json
    case $name in
    tmp-write | tmp-fsync | link)
        [ -e "$dir/$STATE_JOB.json" ] && fail "$name: $STATE_JOB.json exists after the kill" ;;
    *)
        cmp -s "$WORK/base/$STATE_JOB.json" "$dir/$STATE_JOB.json" ||
            fail "$name: $STATE_JOB.json not complete after the kill" ;;
    esac
    local left
    left=$(find "$dir" -name '.*' -type f -printf '%f:%s ' | tr -d '\n')
    [ -n "$left" ] || fail "$name: the kill left no temporary file (not at the window?)"

    tw_run_start B "$WORK/$name.yaml"
    wait_for 60 grep -qs "job $STATE_JOB finished" "$WORK/B.err" ||
        fail "$name: restart: the job did not finish again"
    grep -q "job $STATE_JOB restored from checkpoint" "$WORK/B.err" ||
        fail "$name: restart: the job was not restored from its checkpoint"
    wait_for 30 eval '[ "$(tw_redis_cli exists "$name:v1:done:{$STATE_JOB}")" -eq 1 ]' ||
        fail "$name: restart: no tombstone"
    tw_run_stop B || fail "$name: restart: exit status"
    mv "$WORK/B.err" "$WORK/$name.restart.err"
    state_alerts_stop
    state_check "$dir/$STATE_JOB.json" "$WORK/$name.alerts.jsonl" >"$WORK/$name.check"
    cmp -s "$WORK/base/$STATE_JOB.html" "$dir/$STATE_JOB.html" ||
        fail "$name: HTML report differs from the uninterrupted run's"
    local after
    after=$(find "$dir" -name '.*' -type f -printf '%f ' | tr -d '\n')
    [ -z "$after" ] || fail "$name: temporary file(s) left after the restart: $after"
    tw_broker_stop || fail "$name: broker stop"
    echo "$name: killed at: $(cut -c1-120 <<<"$at")"
    echo "$name: left by the kill: $left; restart: job restored from its checkpoint; $(head -1 "$WORK/$name.check")"
}

TOP=$WORK
set -- "tmp-write write results" "tmp-fsync fsync results" \
    "link link,linkat results" "placed unlink,unlinkat results" \
    "html-write write html" "html-fsync fsync html" \
    "html-rename rename,renameat,renameat2 html"
pids=()
for w in "$@"; do
    # shellcheck disable=SC2086
    (kill_window $w >"$TOP/${w%% *}.log" 2>&1) &
    pids+=($!)
done
bad=0
for p in "${pids[@]}"; do wait "$p" || bad=1; done
for w in "$@"; do cat "$TOP/${w%% *}.log"; done
[ "$bad" -eq 0 ] || { echo "FAIL: a window failed (above)" >&2; exit 1; }
echo "PASS run_kill_write ($SIZE-byte results, $# windows)"
