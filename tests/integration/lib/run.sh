# run.sh - sourced by the `trainwatch run` integration tests. Needs $TW,
# $WORK and $BOOTSTRAP (lib/broker.sh).

# tw_run_start NAME CONFIG: starts `trainwatch run` in the background with
# its log in $WORK/NAME.err and summary in $WORK/NAME.out; sets
# RUN_PID_<NAME>.
tw_run_start() {
    "$TW" run --config "$2" --brokers "$BOOTSTRAP" \
        >"$WORK/$1.out" 2>"$WORK/$1.err" &
    eval "RUN_PID_$1=$!"
}

# wait_for SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
    local t=$1; shift
    local n=$((t * 5))
    for _ in $(seq "$n"); do
        "$@" && return 0
        sleep 0.2
    done
    return 1
}

# tw_run_stop NAME: SIGTERM, wait (60 s at most); returns its exit status.
tw_run_stop() {
    local pid
    eval "pid=\${RUN_PID_$1:-}"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        eval "RUN_PID_$1="
        return 124
    fi
    wait "$pid"
    local rc=$?
    eval "RUN_PID_$1="
    return $rc
}

# field NAME LINE: the value of NAME=... in a summary line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }
