#!/usr/bin/env bash
# run_alertmanager.sh BUILD_DIR - the `alertmanager` action, and the
# engine-wide `alertmanager:` sink, against Debian's real Alertmanager
# (prometheus-alertmanager, v2 API), each with a job of its own. A job whose
# ProfilerReport finds MaxInitializationTime is replayed without its end
# marker, so it ends by engine.job_idle a few seconds later. Asserts: while
# the job runs, Alertmanager holds its alerts (queried back from
# /api/v2/alerts) with the labels alertname, job_id, node, severity and
# semantics and the annotations summary, recommendation and report_url; a
# silence created before the replay (alertname=ProfilerReport, this job)
# suppresses exactly that alert while the other stays active; when the job
# ends, its alerts are resolved (posted again with endsAt) and leave the
# active list.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
for c in prometheus-alertmanager curl; do
    command -v $c >/dev/null || { echo "SKIP: $c not installed (scripts/setup.sh)"; exit 77; }
done
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-am.XXXXXX)
BROKER_PID=
AM_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/http.sh"
cleanup() {
    for p in ${RUN_PID_A:-} ${AM_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && grep -v "INFO  finding" "$WORK/A.err" | tail -n 15 >&2
    [ -f "$WORK/am.err" ] && tail -n 5 "$WORK/am.err" >&2
    exit 1
}

timeout 60 "$TW" synth "$WORK/job" --preset cpu_bottleneck --nodes 2 \
    --duration 40m --interval-ms 5000 --no-framework >/dev/null 2>&1 || fail "synth"

AM_PORT=$(tw_free_port)
AM=http://127.0.0.1:$AM_PORT
cat >"$WORK/am.yml" <<YAML
route:
  receiver: nobody
receivers:
  - name: nobody
YAML
prometheus-alertmanager --config.file="$WORK/am.yml" --storage.path="$WORK/am" \
    --web.listen-address="127.0.0.1:$AM_PORT" --cluster.listen-address= \
    >"$WORK/am.out" 2>"$WORK/am.err" &
AM_PID=$!
wait_for 30 tw_http_is 200 "$AM/-/ready" || fail "alertmanager not ready"

# run_mode action|sink: one job (its id names the mode) through the engine
# with an alertmanager action on ProfilerReport, or with the engine-wide
# alertmanager: sink and the default rules.
run_mode() {
    MODE=$1
    JOB=am-job-$MODE
# the silence, before any alert
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
LATER=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
curl -sf -X POST -H 'Content-Type: application/json' "$AM/api/v2/silences" -d "{
  \"matchers\": [{\"name\": \"alertname\", \"value\": \"ProfilerReport\", \"isRegex\": false},
                 {\"name\": \"job_id\", \"value\": \"$JOB\", \"isRegex\": false}],
  \"startsAt\": \"$NOW\", \"endsAt\": \"$LATER\",
  \"createdBy\": \"run_alertmanager.sh\", \"comment\": \"test\"}" >"$WORK/silence.json" ||
    fail "cannot create the silence"

tw_broker_start || fail "broker start"
rm -rf "$WORK/res"; mkdir -p "$WORK/res"
cat >"$WORK/A.yaml" <<YAML
kafka:
  group: am-group-$MODE
engine:
  results_dir: $WORK/res
  job_idle: 6s
  progress_interval: 0
YAML
if [ "$MODE" = action ]; then
    cat >>"$WORK/A.yaml" <<YAML
rules:
  - name: ProfilerReport
    actions:
      - type: alertmanager
        url: $AM/
        severity: critical
        report_url: http://trainwatch.example:9468
YAML
else # the engine-wide sink, with the default rules
    cat >>"$WORK/A.yaml" <<YAML
alertmanager:
  url: $AM
  severity: critical
  report_url: http://trainwatch.example:9468
YAML
fi
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
rm -rf "$WORK/$JOB"; cp -r "$WORK/job" "$WORK/$JOB"
timeout 120 "$TW" replay "$WORK/$JOB" --brokers "$BOOTSTRAP" --group am-group-$MODE \
    --no-end-marker -q >"$WORK/replay.out" 2>&1 || fail "replay: $(cat "$WORK/replay.out")"

# alerts: active ones, and silenced ones (state suppressed)
am_alerts() { curl -sf "$AM/api/v2/alerts?silenced=true&inhibited=true&active=true" >"$WORK/alerts.json"; }
has_two() { am_alerts && [ "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$WORK/alerts.json")" -ge 2 ]; }
wait_for 20 has_two || fail "alertmanager did not get two alerts: $(cat "$WORK/alerts.json")"
[ -f "$WORK/res/$JOB.json" ] && fail "the job ended before the alerts were checked (too slow)"
python3 - "$WORK/alerts.json" "$JOB" <<'PY' || fail "alert labels: $(cat "$WORK/alerts.json" | cut -c 1-1500)"
import json, sys
alerts, job = json.load(open(sys.argv[1])), sys.argv[2]
by = {a["labels"]["alertname"]: a for a in alerts if a["labels"].get("job_id") == job}
mi, pr = by["MaxInitializationTime"], by["ProfilerReport"]
for a in (mi, pr):
    l = a["labels"]
    assert l["severity"] == "critical" and l["semantics"] in ("fixed", "reference"), l
    assert a["annotations"]["report_url"] == "http://trainwatch.example:9468/jobs/%s/report" % job, a
    assert a["annotations"]["summary"], a
assert mi["labels"]["node"] in ("algo-1", "algo-2"), mi
assert mi["labels"]["parent"] == "ProfilerReport", mi
assert mi["annotations"]["recommendation"], mi
assert mi["status"]["state"] == "active", mi["status"]
assert pr["status"]["state"] == "suppressed" and pr["status"]["silencedBy"], pr["status"]
print("alertmanager: MaxInitializationTime active labels=%s" % json.dumps(mi["labels"], sort_keys=True))
print("alertmanager: ProfilerReport suppressed by silence %s" % pr["status"]["silencedBy"][0])
PY

# the job ends (idle): its alerts are resolved
wait_for 30 test -f "$WORK/res/$JOB.json" || fail "the job did not end"
none_left() {
    am_alerts && python3 - "$WORK/alerts.json" "$JOB" <<'PY'
import json, sys
left = [a for a in json.load(open(sys.argv[1])) if a["labels"].get("job_id") == sys.argv[2]]
sys.exit(1 if left else 0)
PY
}
wait_for 20 none_left || fail "alerts not resolved at job end: $(cut -c 1-800 "$WORK/alerts.json")"
echo "alertmanager: no alert of $JOB active after its end (resolved)"
tw_run_stop A || fail "exit status"
OUT=$(cat "$WORK/A.out")
[ "$(field actions_failed "$OUT")" = 0 ] || fail "actions failed: $OUT"
sent=$(field actions_sent "$OUT")
echo "actions_sent=$sent"
[ "$sent" -ge 4 ] || fail "fewer than 4 posts (2 alerts, 2 resolutions): $sent"
tw_broker_stop || fail "broker stop"
echo "PASS mode $MODE"
}

run_mode action
run_mode sink
echo "PASS run_alertmanager"
