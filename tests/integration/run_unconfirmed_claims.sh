#!/usr/bin/env bash
# run_unconfirmed_claims.sh BUILD_DIR - a claim whose delivery was never
# confirmed is reported and counted, never silently lost (state.redis,
# v1:pending). A real redis-server, `trainwatch broker`, and an HTTP
# server of our own: /ok answers 200, /hang accepts the request and never
# answers.
#  1. Normal path: job-01, webhook to /ok: its alerts and its webhook are
#     delivered; after a graceful stop v1:pending is empty and
#     claims_unconfirmed=0.
#  2. job-02, webhook to /hang: run A is SIGKILLed while the request is in
#     flight (claimed, never confirmed: v1:pending holds exactly its key).
#     Run B (pending_after 1s, pending_check 1s) logs the WARN naming that
#     action id and counts 1 (summary line and /metrics); run C counts 0
#     (already reported) and v1:pending is empty.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-unconfirmed.XXXXXX)
BROKER_PID= REDIS_PID= SRV_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/http.sh"
cleanup() {
    for p in "${RUN_PID_OK:-}" "${RUN_PID_A:-}" "${RUN_PID_B:-}" "${RUN_PID_C:-}" \
        "$SRV_PID" "$BROKER_PID" "$REDIS_PID"; do
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in OK.err A.err B.err C.err; do
        [ -f "$WORK/$f" ] && { echo "--- $f" >&2; tail -n 15 "$WORK/$f" >&2; }
    done
    exit 1
}

# ---- servers ---------------------------------------------------------------
tw_redis_start || fail "redis start"
tw_broker_start --partitions 2 || fail "broker start"
$PY - "$WORK" <<'PY' 2>"$WORK/srv.err" &
import http.server, socketserver, sys, threading, time
work = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        aid = self.headers.get("X-Trainwatch-Action-Id", "")
        with open(work + "/arrived" + self.path.replace("/", "_"), "a") as f:
            f.write(aid + "\n")
        if self.path == "/hang":
            time.sleep(3600)  # accepted, never answered
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
open(work + "/srv.port.tmp", "w").write(str(s.server_address[1]))
import os; os.rename(work + "/srv.port.tmp", work + "/srv.port")
s.serve_forever()
PY
SRV_PID=$!
wait_for 15 test -s "$WORK/srv.port" || fail "HTTP server did not start"
PORT=$(cat "$WORK/srv.port")
HTTP_PORT=$(tw_free_port)

timeout 120 "$TW" synth "$WORK/cpu" --preset cpu_bottleneck --nodes 1 \
    --duration 4m --no-framework >/dev/null 2>"$WORK/synth.err" ||
    fail "synth: $(cat "$WORK/synth.err")"
replay_job() {
    timeout 120 "$TW" replay "$WORK/cpu" --job "$@" --brokers "$BOOTSTRAP" -q \
        >/dev/null || fail "replay $*"
}
mkdir -p "$WORK/res"
config() { # PATH_ON_SERVER HTTP(0|1)
    cat <<YAML
tick: 30s
kafka:
  group: unconfirmed-test
  properties:
    session.timeout.ms: 6000
state:
  store: redis
  checkpoint_interval: 200ms
  pending_check: 1s
  pending_after: 1s
  redis:
    host: 127.0.0.1
    port: $REDIS_PORT
http:
  enabled: $([ "$2" = 1 ] && echo true || echo false)
  port: $HTTP_PORT
engine:
  results_dir: $WORK/res
  progress_interval: 200ms
  commit_interval: 200ms
rules:
  - name: CPUBottleneck
    parameters: {patience: 200, init_grace: 0}
    actions:
      - type: webhook
        url: 'http://127.0.0.1:$PORT$1'
        timeout: 60s
        retries: 0
YAML
}
pending() { tw_redis_cli zrange tw:v1:pending 0 -1; }
last_progress() { grep '^progress:' "$WORK/$1.err" | tail -n 1; }

# ---- 1. everything delivered: nothing pending, nothing counted -------------
config /ok 0 >"$WORK/ok.yaml"
replay_job job-01
tw_run_start OK "$WORK/ok.yaml"
done_ok() {
    [ -s "$WORK/arrived_ok" ] && [ -f "$WORK/res/job-01.json" ] || return 1
    local l; l=$(last_progress OK)
    [ "$(field actions_queued "$l")" = 0 ] && [ "$(field actions_sent "$l")" -ge 1 ]
}
wait_for 120 done_ok || fail "run OK did not deliver job-01's webhook"
sleep 1 # a checkpoint after the last delivery
tw_run_stop OK || fail "run OK exit status $?"
SUM=$(grep '^run:' "$WORK/OK.out")
[ "$(field alerts_sent "$SUM")" -gt 0 ] || fail "run OK sent no alert: $SUM"
[ "$(field claims_unconfirmed "$SUM")" = 0 ] || fail "run OK: $SUM"
[ -z "$(pending)" ] || fail "v1:pending after a clean run: $(pending)"
NSENT=$(tw_redis_cli --scan --pattern 'tw:v1:sent:*' | wc -l)
echo "1. delivered: alerts_sent=$(field alerts_sent "$SUM") claims=$NSENT pending=0 claims_unconfirmed=0"

# ---- 2. SIGKILL while the webhook is in flight -------------------------------
config /hang 0 >"$WORK/hang.yaml"
config /hang 1 >"$WORK/hang_http.yaml"
HOOK=job-02/CPUBottleneck/1/webhook/once
replay_job job-02
tw_run_start A "$WORK/hang.yaml"
in_flight() { # the request arrived and only its claim is still pending
    grep -qx "$HOOK" "$WORK/arrived_hang" 2>/dev/null &&
        [ "$(pending)" = "v1:sent:$HOOK" ]
}
wait_for 120 in_flight || fail "job-02's webhook never got in flight alone (pending: $(pending))"
kill -KILL "$RUN_PID_A"
wait "$RUN_PID_A" 2>/dev/null
RUN_PID_A=
sleep 1.2 # older than pending_after

tw_run_start B "$WORK/hang_http.yaml"
counted() { [ "$(field claims_unconfirmed "$(last_progress B)")" = 1 ]; }
wait_for 60 counted || fail "run B did not count the unconfirmed claim"
grep -q "WARN .*action $HOOK, claimed at .*claimed but its delivery was never confirmed (the process stopped in between?): it may not have been sent" "$WORK/B.err" ||
    fail "run B: no WARN naming $HOOK"
# /metrics serves a snapshot republished every http.refresh (250 ms), so
# it may trail the progress line by that much: wait for it.
metric() { curl -s --max-time 5 "http://127.0.0.1:$HTTP_PORT/metrics" | grep '^trainwatch_claims_unconfirmed_total '; }
metric_is_1() { [ "$(metric)" = "trainwatch_claims_unconfirmed_total 1" ]; }
wait_for 10 metric_is_1 || fail "/metrics: '$(metric)'"
METRIC=$(metric)
sleep 2.5 # more sweeps: still 1
tw_run_stop B || fail "run B exit status $?"
SUM=$(grep '^run:' "$WORK/B.out")
[ "$(field claims_unconfirmed "$SUM")" = 1 ] || fail "run B: $SUM"
[ "$(grep -c 'claimed but its delivery was never confirmed' "$WORK/B.err")" = 1 ] ||
    fail "run B reported more than once"
[ -z "$(pending)" ] || fail "v1:pending after run B: $(pending)"
[ "$(tw_redis_cli exists "tw:v1:sent:$HOOK")" = 1 ] || fail "the claim itself was dropped"
echo "2. run B: $(grep 'claimed but its delivery' "$WORK/B.err" | sed 's/^[^ ]* //')"
echo "   run B: $METRIC; summary claims_unconfirmed=1"

tw_run_start C "$WORK/hang.yaml"
progressed_c() { [ -n "$(last_progress C)" ]; }
wait_for 30 progressed_c || fail "run C wrote no progress line"
sleep 2.5 # at least two sweeps
tw_run_stop C || fail "run C exit status $?"
SUM=$(grep '^run:' "$WORK/C.out")
[ "$(field claims_unconfirmed "$SUM")" = 0 ] || fail "run C counted again: $SUM"
grep -q 'claimed but its delivery' "$WORK/C.err" && fail "run C reported again"
[ "$(grep -c "$HOOK" "$WORK/arrived_hang")" = 1 ] || fail "the webhook was sent again"
echo "   run C: claims_unconfirmed=0 (already reported), webhook sent once"
echo "unconfirmed claims: reported once and counted, never silent"
