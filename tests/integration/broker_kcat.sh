#!/usr/bin/env bash
# broker_kcat.sh BUILD_DIR - `trainwatch broker` serves a third-party Kafka
# client: kcat lists its topics, produces to it and consumes from it, over
# the printed bootstrap address and over the fixed --port relay; SIGTERM
# stops it with exit status 0 and nothing left running.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-broker-kcat.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
cleanup() {
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; cat "$WORK/broker.err" >&2 2>/dev/null; exit 1; }

# --help tells the truth about ports and exits 0
"$TW" broker --help >"$WORK/help" || fail "broker --help exit status"
grep -q -- '--port P' "$WORK/help" || fail "--help lacks --port"
grep -q 'kernel picks' "$WORK/help" || fail "--help does not explain ports"
"$TW" broker --brokers 0 2>/dev/null; [ $? -eq 2 ] || fail "--brokers 0 accepted"

# a free port for the relay
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')

tw_broker_start --brokers 2 --port "$PORT" --topic extra.topic:3 || fail "start"
[ "$BOOTSTRAP" = "127.0.0.1:$PORT" ] || fail "bootstrap file says '$BOOTSTRAP'"
[ "$(head -1 "$WORK/broker.out")" = "bootstrap=127.0.0.1:$PORT" ] ||
    fail "first stdout line: $(head -1 "$WORK/broker.out")"
DIRECT=$(sed -n 's/^brokers=//p' "$WORK/broker.out")
[ -n "$DIRECT" ] || fail "no brokers= line"

# metadata: both brokers and every topic with its partition count
timeout 20 kcat -b "$BOOTSTRAP" -L >"$WORK/meta" || fail "kcat -L"
grep -q ' 2 brokers:' "$WORK/meta" || fail "kcat -L: not 2 brokers"
for t in trainwatch.metrics trainwatch.alerts trainwatch.deadletter; do
    grep -q "topic \"$t\" with 4 partitions" "$WORK/meta" || fail "kcat -L: $t"
done
grep -q 'topic "extra.topic" with 3 partitions' "$WORK/meta" || fail "extra.topic"

# produce 50 keyed messages, consume them back (through the relay and
# directly)
for i in $(seq 1 50); do echo "job-$((i % 3)):message $i"; done >"$WORK/in"
timeout 20 kcat -b "$BOOTSTRAP" -P -t trainwatch.alerts -K: <"$WORK/in" ||
    fail "kcat -P"
timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%k:%s\n' >"$WORK/out" || fail "kcat -C"
[ "$(sort "$WORK/in")" = "$(sort "$WORK/out")" ] ||
    fail "consumed messages differ: $(wc -l <"$WORK/out") lines"
timeout 20 kcat -b "$DIRECT" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%k:%s\n' >"$WORK/out2" || fail "kcat -C direct"
[ "$(sort "$WORK/in")" = "$(sort "$WORK/out2")" ] || fail "direct consume differs"
# one key stays in one partition
timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%k %p\n' | sort -u >"$WORK/kp"
[ "$(wc -l <"$WORK/kp")" -eq 3 ] || fail "a key spread over partitions: $(cat "$WORK/kp")"

# SIGTERM: exit 0, bootstrap file removed, process gone
PID=$BROKER_PID
tw_broker_stop; rc=$?
[ $rc -eq 0 ] || fail "broker exit status $rc after SIGTERM"
kill -0 "$PID" 2>/dev/null && fail "broker still running"
[ ! -e "$WORK/bootstrap" ] || fail "bootstrap file left behind"
grep -q 'SIGTERM received' "$WORK/broker.err" || fail "no stop message"

# SIGINT too, without --port (bootstrap = the brokers' own list)
tw_broker_start || fail "second start"
[ "$BOOTSTRAP" = "$(sed -n 's/^brokers=//p' "$WORK/broker.out")" ] ||
    fail "without --port the bootstrap is not the brokers' list"
echo "x" | timeout 20 kcat -b "$BOOTSTRAP" -P -t trainwatch.metrics || fail "kcat -P 2"
PID=$BROKER_PID
kill -INT "$PID"
for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "broker ignored SIGINT"
wait "$PID"; rc=$?; BROKER_PID=
[ $rc -eq 0 ] || fail "exit status $rc after SIGINT"

# a port in use is a clear error, exit 1
python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(1); print(s.getsockname()[1], flush=True); time.sleep(30)' >"$WORK/busy" &
HOLDER=$!
for _ in $(seq 50); do [ -s "$WORK/busy" ] && break; sleep 0.1; done
BUSY=$(cat "$WORK/busy")
timeout 20 "$TW" broker --port "$BUSY" >/dev/null 2>"$WORK/busy.err"; rc=$?
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
[ $rc -eq 1 ] || fail "broker on a busy port: exit $rc"
grep -q "cannot listen on 127.0.0.1:$BUSY" "$WORK/busy.err" || fail "busy port message: $(cat "$WORK/busy.err")"
echo "PASS broker_kcat"
