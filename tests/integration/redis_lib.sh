#!/usr/bin/env bash
# redis_lib.sh BUILD_DIR - the harness's redis-server (lib/redis.sh): starts
# on a free loopback port with a password and answers only with it, serves
# the unix socket, keeps no RDB file, and stops on SIGTERM leaving nothing
# running and the port closed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/tw-redis-lib.XXXXXX)
REDIS_PID=
. "$HERE/lib/redis.sh"
cleanup() {
    [ -n "${REDIS_PID:-}" ] && kill -KILL "$REDIS_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; cat "$REDIS_DIR/redis.log" >&2 2>/dev/null; exit 1; }

tw_redis_start --requirepass 'pw-test-123' || fail "start"
[ "$REDIS_PORT" -gt 0 ] || fail "no port"
PID=$REDIS_PID
# the password is required
out=$(redis-cli -p "$REDIS_PORT" set k v 2>&1)
case "$out" in *NOAUTH*) ;; *) fail "no password accepted: $out" ;; esac
[ "$(tw_redis_cli set k v)" = OK ] || fail "set with password"
[ "$(tw_redis_cli get k)" = v ] || fail "get"
[ "$(REDISCLI_AUTH=pw-test-123 redis-cli -s "$REDIS_SOCKET" get k)" = v ] ||
    fail "unix socket"
[ "$(tw_redis_cli config get save | tail -1)" = "" ] || fail "RDB saves on"
[ "$(tw_redis_cli config get bind | tail -1)" = 127.0.0.1 ] || fail "bind"
tw_redis_stop || fail "stop status $?"
kill -0 "$PID" 2>/dev/null && fail "still running"
redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && fail "port still answers"
[ -e "$REDIS_DIR/dump.rdb" ] && fail "wrote dump.rdb"
echo "PASS: redis_lib"
