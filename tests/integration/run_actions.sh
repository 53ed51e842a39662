#!/usr/bin/env bash
# run_actions.sh BUILD_DIR - rule actions fired by `trainwatch run`:
#  - a bad action in the config: `run` refuses to start (exit 2) naming
#    file:line and the key;
#  - 12 cpu_bottleneck jobs, rule CPUBottleneck with a webhook (HMAC), a
#    stop_training (SigV4) and an e-mail action (SMTP AUTH, aiosmtpd
#    recorder) each; a real redis-server holds the
#    once-ledger; an HTTP recorder answers after 1 s. Jobs 01-06 and the
#    first part of job-07 (no end marker) are on the topic when run A
#    starts; A is killed with SIGKILL while actions are in flight, once it
#    has claimed job-07's actions (job-07 has no checkpoint yet: run B
#    evaluates it again from its start and must find those actions in the
#    ledger); then job-07's end and jobs 08-12 are produced and run B, with
#    the same config, finishes everything;
#    then: no action id reached the recorder twice, no job was stopped
#    twice, every job's actions were claimed in Redis, every claimed id that
#    never arrived was claimed by the killed run (at most once by design:
#    a claim whose send the crash interrupted is not resent; counted and
#    printed), every request verified (HMAC, SigV4, SMTP AUTH), the webhook
#    body is the alert that fired it (finding or IssuesFound status), the e-mail names the finding, the alert id
#    and the report path, and no secret is in any log.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
$PY -c 'import aiosmtpd' 2>/dev/null || { echo "SKIP: python3-aiosmtpd not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-runactions.XXXXXX)
BROKER_PID= REDIS_PID= REC_PID= SMTP_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/run.sh"
cleanup() {
    for p in "${RUN_PID_A:-}" "${RUN_PID_B:-}" "$REC_PID" "$SMTP_PID" "$BROKER_PID" "$REDIS_PID"; do
        [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    done
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in A.err B.err; do
        [ -f "$WORK/$f" ] && { echo "--- $f" >&2; tail -n 20 "$WORK/$f" >&2; }
    done
    exit 1
}

AWS_SECRET=wJalrRUNsecretKEY4444
HOOK_SECRET=hmacRUNsecret5555
SMTP_PASS=smtpRUNpass6666
export AWS_ACCESS_KEY_ID=AKIDRUNTEST01 AWS_SECRET_ACCESS_KEY=$AWS_SECRET
export HOOK_SECRET SMTP_PASS

# ---- a bad action is a start-up error naming file:line:key -----------------
cat >"$WORK/bad.yaml" <<'YAML'
rules:
  - name: CPUBottleneck
    actions:
      - type: webhook
        url: 'http://127.0.0.1:9/x'
      - type: webhook
        timeout: 5s
YAML
"$TW" run --config "$WORK/bad.yaml" --brokers 127.0.0.1:1 2>"$WORK/bad.err"
[ $? -eq 2 ] || fail "a webhook without url was accepted"
grep -q "bad.yaml:[67]:.*CPUBottleneck.*url" "$WORK/bad.err" ||
    fail "bad action error: $(cat "$WORK/bad.err")"

# ---- servers -------------------------------------------------------------
tw_redis_start || fail "redis start"
tw_broker_start --partitions 12 || fail "broker start"
JOBS=$(for i in $(seq -w 1 12); do printf 'job-%s ' "$i"; done)
$PY "$HERE/lib/http_recorder.py" --port-file "$WORK/rec.port" \
    --log "$WORK/rec.jsonl" --delay 1 --delay-count 1000000 \
    --aws-secret "$AWS_SECRET" --hmac-secret "$HOOK_SECRET" \
    --list-jobs "$(echo $JOBS | tr ' ' ,)" 2>"$WORK/rec.err" &
REC_PID=$!
wait_for 15 test -s "$WORK/rec.port" || fail "recorder did not start"
PORT=$(cat "$WORK/rec.port")
$PY "$HERE/lib/smtp_recorder.py" --port-file "$WORK/smtp.port" \
    --log "$WORK/smtp.jsonl" --user trainwatch --password "$SMTP_PASS" \
    2>"$WORK/smtp.err" &
SMTP_PID=$!
wait_for 15 test -s "$WORK/smtp.port" || fail "SMTP recorder did not start"
SMTP_PORT=$(cat "$WORK/smtp.port")

# ---- 12 short jobs: 01-06 and most of 07 before run A ----------------------
timeout 120 "$TW" synth "$WORK/cpu" --preset cpu_bottleneck --nodes 1 \
    --duration 4m --no-framework >/dev/null 2>"$WORK/synth.err" ||
    fail "synth: $(cat "$WORK/synth.err")"
replay_job() {
    timeout 120 "$TW" replay "$WORK/cpu" --job "$@" --brokers "$BOOTSTRAP" -q \
        >/dev/null || fail "replay $*"
}
for j in job-01 job-02 job-03 job-04 job-05 job-06; do replay_job "$j"; done
replay_job job-07 --no-end-marker
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
tick: 30s
kafka:
  group: actions-test
  properties:
    session.timeout.ms: 6000   # the killed member leaves the group sooner
state:
  store: redis
  checkpoint_interval: 60s     # an unfinished job (07) is not checkpointed
                               # before the kill (finished jobs still are)
  redis:
    host: 127.0.0.1
    port: $REDIS_PORT
engine:
  results_dir: $WORK/res
  progress_interval: 500ms
  commit_interval: 60s
rules:
  - name: CPUBottleneck
    # system metrics only (no hook): judged from the start, not after the
    # init_grace that keeps a job's initialization out (docs/rules.md)
    parameters: {patience: 200, init_grace: 0}
    actions:
      - type: webhook
        url: 'http://127.0.0.1:$PORT/hook'
        hmac_secret_env: HOOK_SECRET
        timeout: 20s
      - type: stop_training
        endpoint: 'http://127.0.0.1:$PORT'
        region: us-west-2
        timeout: 20s
      - type: email
        to: [oncall@example.com]
        smtp_url: 'smtp://127.0.0.1:$SMTP_PORT'
        username: trainwatch
        password_env: SMTP_PASS
YAML

# ---- run A: SIGKILL while actions are in flight -------------------------
tw_run_start A "$WORK/run.yaml"
requests() { [ "$(wc -l <"$WORK/rec.jsonl" 2>/dev/null || echo 0)" -ge "$1" ]; }
wait_for 180 requests 4 || fail "no action reached the recorder"
claimed7() { [ "$(tw_redis_cli exists 'tw:v1:sent:job-07/CPUBottleneck/1/webhook/once')" = 1 ]; }
wait_for 120 claimed7 || fail "run A did not claim job-07's webhook"
grep -q "job job-07 finished" "$WORK/A.err" && fail "job-07 finished in run A (no end marker was sent)"
kill -KILL "$RUN_PID_A"
wait "$RUN_PID_A" 2>/dev/null
RUN_PID_A=
tw_redis_cli --scan --pattern 'tw:v1:sent:*' | sort >"$WORK/claimed_A.txt"
echo "killed run A: $(wc -l <"$WORK/rec.jsonl") requests received, $(wc -l <"$WORK/claimed_A.txt") ids claimed"

# ---- run B: same config, until every job is done and nothing is queued --
replay_job job-07 # its batches again (duplicates, dropped) and its end
for j in job-08 job-09 job-10 job-11 job-12; do replay_job "$j"; done
tw_run_start B "$WORK/run.yaml"
settled() {
    [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 12 ] || return 1
    local l
    l=$(grep '^progress:' "$WORK/B.err" | tail -n 1)
    [ "$(field jobs_active "$l")" = 0 ] && [ "$(field actions_queued "$l")" = 0 ]
}
wait_for 300 settled || fail "run B did not finish the jobs: $(ls "$WORK/res")"
sleep 1 # the last progress line may predate a fire by < 500 ms
wait_for 60 settled || fail "run B did not settle"
tw_run_stop B || fail "run B exit status $?"
SUMMARY=$(grep '^run:' "$WORK/B.out")
echo "run B: ${SUMMARY#*alerts_sent=}"
[ "$(field actions_fired "$SUMMARY")" -gt 0 ] || fail "run B fired nothing: $SUMMARY"
[ "$(field actions_deduplicated "$SUMMARY")" -gt 0 ] ||
    fail "run B found no action in the ledger: $SUMMARY"
tw_redis_cli --scan --pattern 'tw:v1:sent:*' | sort >"$WORK/claimed.txt"

# ---- the books -----------------------------------------------------------
$PY - "$WORK" "$JOBS" <<'PY' || fail "action books"
import json, sys
work, jobs = sys.argv[1], sys.argv[2].split()
recs = [json.loads(l) for l in open(work + "/rec.jsonl")]
claimed_a = {l.strip()[len("tw:v1:sent:"):] for l in open(work + "/claimed_A.txt") if l.strip()}
claimed = {l.strip()[len("tw:v1:sent:"):] for l in open(work + "/claimed.txt") if l.strip()}
errors = []
hooks, stops, lists = {}, {}, 0
for r in recs:
    target = r["headers"].get("x-amz-target", "")
    if r["path"] == "/hook":
        aid = r["headers"].get("x-trainwatch-action-id", "")
        hooks[aid] = hooks.get(aid, 0) + 1
        if not r.get("hmac_ok"):
            errors.append("webhook %s: bad HMAC" % aid)
        a = json.loads(r["body"])
        fires = a.get("kind") == "finding" or a.get("status") == "IssuesFound"
        if not fires or a.get("rule") != "CPUBottleneck":
            errors.append("webhook %s: body is not the alert that fired it" % aid)
        elif "GPUs sat idle" not in a.get("finding", {}).get("summary", ""):
            errors.append("webhook %s: alert without its finding" % aid)
    elif target == "SageMaker.StopTrainingJob":
        name = json.loads(r["body"])["TrainingJobName"]
        stops[name] = stops.get(name, 0) + 1
        if not r.get("sigv4_ok"):
            errors.append("stop %s: bad SigV4" % name)
    elif target == "SageMaker.ListTrainingJobs":
        lists += 1
        if not r.get("sigv4_ok"):
            errors.append("list: bad SigV4")
    else:
        errors.append("unexpected request %s %s" % (r["path"], target))
for aid, n in hooks.items():
    if n > 1:
        errors.append("webhook %s received %d times" % (aid, n))
for j, n in stops.items():
    if n > 1:
        errors.append("job %s stopped %d times" % (j, n))
mails = {}
for l in open(work + "/smtp.jsonl"):
    m = json.loads(l)
    d = m["data"]
    aid = [x for x in d.splitlines() if x.startswith("Action id: ")][0][11:]
    mails[aid] = mails.get(aid, 0) + 1
    j = aid.split("/")[0]
    # the finding (plugin ABI 2) as paragraphs, the subject naming rule,
    # job and worst node
    for want in ("Subject: trainwatch: CPUBottleneck in job %s (" % j,
                 "  %-14sThe GPUs sat idle while CPU cores were" % "what:",
                 "  %-14s" % "where:", "  %-14sGPU below" % "how much:",
                 "  %-14s" % "try:", "  %-14sthreshold 50 %%" % "decided by:",
                 "Report: %s/res/%s.json" % (work, j), "Rule: CPUBottleneck"):
        if want not in d:
            errors.append("mail %s lacks %r" % (aid, want))
    if "Alert id: " not in d or "Alert id: (none)" in d:
        errors.append("mail %s: no alert id" % aid)
    if not m["authenticated"]:
        errors.append("mail %s: not authenticated" % aid)
if mails:
    print("--- one e-mail as the SMTP server received it:")
    print(json.loads(open(work + "/smtp.jsonl").readline())["data"])
for aid, n in mails.items():
    if n > 1:
        errors.append("mail %s received %d times" % (aid, n))
lost = []
for j in jobs:
    hook_id, stop_id = j + "/CPUBottleneck/1/webhook/once", j + "/stop/stop_training"
    for aid in (hook_id, stop_id, j + "/CPUBottleneck/3/email/once"):
        if aid not in claimed:
            errors.append("%s never claimed (the rule did not fire?)" % aid)
    mail_id = j + "/CPUBottleneck/3/email/once"
    for aid, got in ((hook_id, hooks.get(hook_id, 0)), (stop_id, stops.get(j, 0)),
                     (mail_id, mails.get(mail_id, 0))):
        if got == 0:
            lost.append(aid)
            if aid not in claimed_a:
                errors.append("%s claimed by the restarted run but never sent" % aid)
if not claimed_a:
    errors.append("the kill came before any claim: nothing was tested")
print("books: jobs=%d webhooks=%d stops=%d mails=%d lists=%d "
      "claimed_by_killed_run=%d claimed=%d lost_in_crash=%d %s" % (
      len(jobs), sum(hooks.values()), sum(stops.values()),
      sum(mails.values()), lists, len(claimed_a), len(claimed), len(lost),
      " ".join(lost)))
for e in errors:
    print("FAIL: " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY


# ---- no secret in any log --------------------------------------------------
for f in A.err A.out B.err B.out; do
    for s in "$AWS_SECRET" "$HOOK_SECRET" "$SMTP_PASS"; do
        grep -qF "$s" "$WORK/$f" && fail "a secret appears in $f"
    done
done
echo "actions: once across SIGKILL + restart, secrets absent from logs"
