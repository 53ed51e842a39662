# redis.sh - sourced by integration tests (and usable by hand for the demo):
# starts a real redis-server on a free loopback port with its own temp
# folder and stops it again. Needs $WORK (a scratch folder). Sets REDIS_PID,
# REDIS_PORT, REDIS_DIR and REDIS_SOCKET.
#
#   tw_redis_start [--requirepass PW] [--appendonly yes] [more redis args]
#   tw_redis_cli ARGS...     redis-cli against it (with the password)
#   tw_redis_stop            SIGTERM, wait; 124 when it would not stop
#
# Call tw_redis_stop (or kill $REDIS_PID) from the test's EXIT trap.

tw_redis_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

tw_redis_start() {
    command -v redis-server >/dev/null || {
        echo "FAIL: redis-server not installed (scripts/setup.sh installs it)" >&2
        return 1
    }
    REDIS_PASSWORD=
    local prev=
    for a in "$@"; do
        [ "$prev" = --requirepass ] && REDIS_PASSWORD=$a
        prev=$a
    done
    REDIS_DIR=$(mktemp -d "$WORK/redis.XXXXXX")
    REDIS_SOCKET=$REDIS_DIR/redis.sock
    local attempt
    for attempt in 1 2 3 4 5; do
        REDIS_PORT=$(tw_redis_free_port)
        # no RDB snapshots, no AOF unless asked; loopback only
        redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
            --appendonly no --dir "$REDIS_DIR" --daemonize no \
            --unixsocket "$REDIS_SOCKET" --unixsocketperm 700 \
            --logfile "$REDIS_DIR/redis.log" "$@" &
        REDIS_PID=$!
        local i
        for i in $(seq 200); do
            if ! kill -0 "$REDIS_PID" 2>/dev/null; then
                break # port taken, most likely: try another
            fi
            if [ "$(tw_redis_cli ping 2>/dev/null)" = PONG ]; then
                return 0
            fi
            sleep 0.05
        done
        kill -KILL "$REDIS_PID" 2>/dev/null
        wait "$REDIS_PID" 2>/dev/null
        REDIS_PID=
    done
    echo "FAIL: redis-server did not start; its log:" >&2
    cat "$REDIS_DIR/redis.log" >&2 2>/dev/null
    return 1
}

tw_redis_cli() {
    if [ -n "${REDIS_PASSWORD:-}" ]; then
        REDISCLI_AUTH=$REDIS_PASSWORD redis-cli -p "$REDIS_PORT" "$@"
    else
        redis-cli -p "$REDIS_PORT" "$@"
    fi
}

tw_redis_stop() {
    [ -n "${REDIS_PID:-}" ] || return 0
    kill -TERM "$REDIS_PID" 2>/dev/null
    local i
    for i in $(seq 100); do
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$REDIS_PID" 2>/dev/null; then
        kill -KILL "$REDIS_PID" 2>/dev/null
        wait "$REDIS_PID" 2>/dev/null
        REDIS_PID=
        return 124
    fi
    wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
    return 0
}
