# broker.sh - sourced by integration tests: starts `trainwatch broker` in the
# background and stops it again. Needs $TW (the trainwatch binary) and $WORK
# (a scratch folder). Sets BROKER_PID and BOOTSTRAP.

# tw_broker_start [ARGS...]: start it and wait (10 s at most) for the
# bootstrap file it writes once ready.
tw_broker_start() {
    rm -f "$WORK/bootstrap"
    "$TW" broker --bootstrap-file "$WORK/bootstrap" "$@" \
        >"$WORK/broker.out" 2>"$WORK/broker.err" &
    BROKER_PID=$!
    for _ in $(seq 100); do
        [ -s "$WORK/bootstrap" ] && break
        if ! kill -0 "$BROKER_PID" 2>/dev/null; then
            echo "FAIL: broker exited early:" >&2
            cat "$WORK/broker.err" >&2
            return 1
        fi
        sleep 0.1
    done
    if [ ! -s "$WORK/bootstrap" ]; then
        echo "FAIL: broker did not write its bootstrap file in 10 s" >&2
        return 1
    fi
    BOOTSTRAP=$(cat "$WORK/bootstrap")
}

# tw_broker_stop: SIGTERM, then wait (10 s at most) for a clean exit;
# returns its exit status (124 when it did not stop).
tw_broker_stop() {
    [ -n "${BROKER_PID:-}" ] || return 0
    kill -TERM "$BROKER_PID" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$BROKER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -KILL "$BROKER_PID" 2>/dev/null
        wait "$BROKER_PID" 2>/dev/null
        BROKER_PID=
        return 124
    fi
    wait "$BROKER_PID"
    local rc=$?
    BROKER_PID=
    return $rc
}
