#!/usr/bin/env bash
# run_http_prometheus.sh BUILD_DIR - the HTTP endpoints of `trainwatch run`
# (http: section) with Debian's real Prometheus server scraping them every
# second during a replay. Asserts: /healthz 200; /readyz 200 once a
# partition is assigned; /metrics accepted by `promtool check metrics`;
# after the job, Prometheus' HTTP API returns the engine's own summary
# counters (batches, samples, jobs_finished, alerts_sent) and the job's
# per-rule status equal to `eval --json`'s; /jobs lists the job;
# /jobs/<id> serves its results file (the JSON of eval --json); a job id
# with '/' or '..' never leaves the results folder; /jobs/<id>/report
# serves the HTML report run wrote (404 with a message for an unknown
# job); the bearer token is required on /metrics; HTTPS with
# http.tls_cert/tls_key and the token from http.token_env.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
for c in prometheus promtool curl; do
    command -v $c >/dev/null || { echo "SKIP: $c not installed (scripts/setup.sh)"; exit 77; }
done
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-httpprom.XXXXXX)
BROKER_PID=
PROM_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/http.sh"
cleanup() {
    for p in ${RUN_PID_A:-} ${RUN_PID_B:-} ${PROM_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 15 "$WORK/A.err" >&2
    [ -f "$WORK/prom.err" ] && tail -n 5 "$WORK/prom.err" >&2
    [ -n "${PROM:-}" ] && curl -s "$PROM/api/v1/targets" | cut -c 1-800 >&2
    exit 1
}

JOB=http-job
timeout 60 "$TW" synth "$WORK/$JOB" --preset cpu_bottleneck --nodes 2 \
    --duration 40m --interval-ms 5000 --no-framework >/dev/null 2>&1 || fail "synth"
timeout 60 "$TW" eval "$WORK/$JOB" --json --quiet >"$WORK/eval.json" || fail "eval"

tw_broker_start || fail "broker start"
HTTP_PORT=$(tw_free_port)
TOKEN=s3cret-$$
printf '%s\n' "$TOKEN" >"$WORK/token"
chmod 600 "$WORK/token"
mkdir -p "$WORK/res"
cat >"$WORK/A.yaml" <<YAML
kafka:
  group: http-group
engine:
  results_dir: $WORK/res
  job_idle: 30s
  progress_interval: 0
http:
  enabled: true
  port: $HTTP_PORT
  token_file: $WORK/token
  refresh: 100ms
YAML
tw_run_start A "$WORK/A.yaml"
wait_for 20 grep -q "http: listening" "$WORK/A.err" || fail "no http listener"
URL=http://127.0.0.1:$HTTP_PORT
[ "$(tw_http_code "$URL/healthz")" = 200 ] || fail "/healthz"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
wait_for 10 tw_http_is 200 "$URL/readyz" || fail "/readyz not 200: $(curl -s "$URL/readyz")"
[ "$(tw_http_code "$URL/metrics")" = 401 ] || fail "/metrics without the token is not 401"
AUTH="Authorization: Bearer $TOKEN"

# Prometheus scrapes every second, with the token.
PROM_PORT=$(tw_free_port)
cat >"$WORK/prom.yml" <<YAML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: trainwatch
    authorization:
      credentials_file: $WORK/token
    static_configs:
      - targets: ['127.0.0.1:$HTTP_PORT']
YAML
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$WORK/prom.out" 2>"$WORK/prom.err" &
PROM_PID=$!
PROM=http://127.0.0.1:$PROM_PORT
wait_for 30 tw_http_is 200 "$PROM/-/ready" || fail "prometheus not ready"
prom_value() {
    curl -sf "$PROM/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "none")'
}
prom_label() { # QUERY LABEL
    curl -sf "$PROM/api/v1/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["metric"][sys.argv[1]] if r else "none")' "$2"
}
prom_up() { [ "$(prom_value 'up{job="trainwatch"}')" = 1 ]; }
# the first scrape waits for target discovery (about 5 s)
wait_for 30 prom_up || fail "prometheus: target not up"

timeout 120 "$TW" replay "$WORK/$JOB" --brokers "$BOOTSTRAP" --group http-group -q \
    >"$WORK/replay.out" 2>&1 || fail "replay: $(cat "$WORK/replay.out")"
wait_for 60 test -f "$WORK/res/$JOB.json" || fail "no results file"

# promtool accepts the exposition (lint problems are errors too)
finished_published() {
    curl -sf -H "$AUTH" "$URL/metrics" >"$WORK/metrics.txt" &&
        grep -q '^trainwatch_jobs_finished_total 1$' "$WORK/metrics.txt"
}
wait_for 10 finished_published || fail "GET /metrics: no finished job"
promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(head -20 "$WORK/promtool.out")"
grep -q "^trainwatch_rule_status{job_id=\"$JOB\"" "$WORK/metrics.txt" || fail "no per-rule series"
grep -q '^trainwatch_consumer_lag{partition="' "$WORK/metrics.txt" || fail "no consumer lag"

# /jobs, /jobs/<id>, the report, bad ids
curl -sf -H "$AUTH" "$URL/jobs" >"$WORK/jobs.json" || fail "GET /jobs"
python3 - "$WORK/jobs.json" "$JOB" <<'PY' || fail "/jobs"
import json, sys
d = json.load(open(sys.argv[1]))
j = [x for x in d["jobs"] if x["job"] == sys.argv[2]]
assert j and j[0]["state"] == "finished" and j[0]["rules"], d
PY
curl -sf -H "$AUTH" "$URL/jobs/$JOB" >"$WORK/job.json" || fail "GET /jobs/<id>"
cmp -s "$WORK/job.json" "$WORK/res/$JOB.json" || fail "/jobs/<id> is not the results file"
# run wrote the HTML report next to the results (engine.report_html)
test -s "$WORK/res/$JOB.html" || fail "no $JOB.html in results_dir"
[ "$(tw_http_code -H "$AUTH" "$URL/jobs/$JOB/report")" = 200 ] || fail "report not 200"
curl -sf -H "$AUTH" "$URL/jobs/$JOB/report" >"$WORK/report.html" || fail "GET report"
cmp -s "$WORK/report.html" "$WORK/res/$JOB.html" || fail "/jobs/<id>/report is not the .html file"
grep -q '<section id="rules-summary">' "$WORK/report.html" || fail "report has no rules summary"
[ "$(tw_http_code -H "$AUTH" "$URL/jobs/nope/report")" = 404 ] || fail "unknown report not 404"
curl -s -H "$AUTH" "$URL/jobs/nope/report" | grep -q "no report for job 'nope'" || fail "report 404 message"
echo secret >"$WORK/outside.json"
for bad in "..%2Foutside" "%2E%2E%2Foutside" "..%2F..%2Fetc%2Fpasswd" "%2Fetc%2Fpasswd"; do
    code=$(tw_http_code -H "$AUTH" "$URL/jobs/$bad")
    [ "$code" = 404 ] || fail "/jobs/$bad answered $code, not 404"
done
[ "$(tw_http_code -H "$AUTH" "$URL/jobs/a%01b")" = 400 ] || fail "control byte not 400"
[ "$(tw_http_code -H "$AUTH" "$URL/jobs/nope")" = 404 ] || fail "unknown job not 404"

# what Prometheus scraped equals the engine's counters (queried while the
# engine still runs: once it stops, its series are marked stale)
sleep 3 # two more scrapes of the final values
prom_up || fail "prometheus: target down at the end"
for f in batches samples jobs_finished alerts_sent; do
    eval "prom_$f=\$(prom_value trainwatch_${f}_total)"
done
# every rule's status as eval --json has it
python3 - "$WORK/eval.json" >"$WORK/statuses" <<'PY' || fail "eval json"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["rules"]:
    print(r["name"], r.get("parent", "-"), r["status"])
PY
[ -s "$WORK/statuses" ] || fail "no statuses"
while read -r rule parent status; do
    [ "$parent" = - ] && parent=
    sel="job_id=\"$JOB\",rule=\"$rule\",parent=\"$parent\""
    st=$(prom_label "trainwatch_rule_status{$sel}" status)
    echo "prometheus: $rule${parent:+ in $parent}: $st (eval --json: $status)"
    [ "$st" = "$status" ] || fail "rule $rule: prometheus $st, eval $status"
done <"$WORK/statuses"
tw_run_stop A || fail "exit status"
OUT=$(cat "$WORK/A.out")
echo "$OUT" | cut -c 1-200
for f in batches samples jobs_finished alerts_sent; do
    want=$(field "$f" "$OUT")
    eval "got=\$prom_$f"
    echo "prometheus trainwatch_${f}_total=$got engine $f=$want"
    [ "$got" = "$want" ] || fail "prometheus says trainwatch_${f}_total=$got, the engine $want"
done
[ "$(field batches "$OUT")" -gt 0 ] || fail "no batches"

# TLS (http.tls_cert / tls_key) with the token from the environment
if command -v openssl >/dev/null; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
        -keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1 || fail "openssl"
    chmod 600 "$WORK/tls.key"
    TLS_PORT=$(tw_free_port)
    cat >"$WORK/B.yaml" <<YAML
kafka:
  group: http-tls
http:
  enabled: true
  port: $TLS_PORT
  token_env: TW_TEST_HTTP_TOKEN
  tls_cert: $WORK/tls.crt
  tls_key: $WORK/tls.key
YAML
    TW_TEST_HTTP_TOKEN=$TOKEN tw_run_start B "$WORK/B.yaml"
    wait_for 20 grep -q "http: listening.*https" "$WORK/B.err" || fail "no https listener: $(tail -3 "$WORK/B.err")"
    [ "$(tw_http_code --cacert "$WORK/tls.crt" "https://127.0.0.1:$TLS_PORT/healthz")" = 200 ] || fail "https /healthz"
    [ "$(tw_http_code --cacert "$WORK/tls.crt" -H "$AUTH" "https://127.0.0.1:$TLS_PORT/metrics")" = 200 ] || fail "https /metrics"
    [ "$(tw_http_code --cacert "$WORK/tls.crt" "https://127.0.0.1:$TLS_PORT/metrics")" = 401 ] || fail "https /metrics without token"
    [ "$(tw_http_code "http://127.0.0.1:$TLS_PORT/healthz")" != 200 ] || fail "plain http served on the TLS port"
    tw_run_stop B || fail "B exit status"
    echo "https: /healthz 200, /metrics 200 with the token, 401 without"
fi
tw_broker_stop || fail "broker stop"
echo "PASS run_http_prometheus"
