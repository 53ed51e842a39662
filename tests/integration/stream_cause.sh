#!/usr/bin/env bash
# stream_cause.sh BUILD_DIR - root cause first, streaming (docs/rules.md
# "Root cause first"), on other presets than cpu_bottleneck (which
# test_finding_cause and run_stream check): an io_bottleneck job and a
# straggler_wait job (4 nodes, algo-2 slow, the others wait) replayed
# through `trainwatch broker` into `trainwatch run`:
#  - the results equal `eval --json` on the same folders;
#  - the consequences' final alerts (LowGPUUtilization, and BatchSize for
#    straggler_wait) carry caused_by naming the cause (IOBottleneck,
#    Straggler) with the alert_id of the cause's IssuesFound status alert;
#  - every IssuesFound alert of a consequence from the cause's first
#    IssuesFound scan on carries caused_by; those before it (a
#    consequence found earlier than its cause stands alone) are counted
#    and printed;
#  - no alert of the cause itself carries caused_by, and the slow node's
#    GPUs are never among the straggler's consequences.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
$PY -c 'import jsonschema' 2>/dev/null ||
    { echo "SKIP: python3-jsonschema not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-streamcause.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 30 "$WORK/A.err" >&2
    exit 1
}

JOBS="io_bottleneck straggler_wait"
for p in $JOBS; do
    timeout 120 "$TW" synth "$WORK/$p" --preset $p --seed 7 \
        2>"$WORK/synth.err" >/dev/null || fail "synth $p: $(cat "$WORK/synth.err")"
    timeout 300 "$TW" eval "$WORK/$p" --json --quiet >"$WORK/$p.eval.json" ||
        fail "eval $p"
done

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: cause-test
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
for p in $JOBS; do
    timeout 120 "$TW" replay "$WORK/$p" --brokers "$BOOTSTRAP" \
        --group cause-test -q >/dev/null || fail "replay $p"
done
all_results() { [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 2 ]; }
wait_for 120 all_results || fail "results: $(ls "$WORK/res")"
for p in $JOBS; do
    $PY "$HERE/lib/results.py" same "$WORK/$p.eval.json" "$WORK/res/$p.json" ||
        fail "$p: streaming results differ from eval"
done
tw_run_stop A || fail "run exit status"

timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat -C alerts"
$PY "$HERE/lib/results.py" alerts "$SRC/schemas/alert.schema.json" \
    "$WORK/alerts.jsonl" >/dev/null || fail "alerts do not validate"
tw_broker_stop || fail "broker stop"

$PY - "$WORK/alerts.jsonl" <<'PY' || fail "caused_by in the alerts (above)"
import json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = {"io_bottleneck": ("IOBottleneck", ["LowGPUUtilization"]),
         "straggler_wait": ("Straggler", ["LowGPUUtilization", "BatchSize"])}
ok = True
for job, (cause, effects) in cases.items():
    mine = [a for a in alerts if a["job"] == job]
    found = [a for a in mine if a["rule"] == cause and a["kind"] == "status"
             and a["status"] == "IssuesFound"]
    if not found:
        print("%s: no IssuesFound status alert of %s" % (job, cause))
        ok = False
        continue
    cause_ids = {a["id"] for a in found}
    first_scan = min(a["scan"] for a in found)
    if any(a.get("caused_by") for a in mine if a["rule"] == cause):
        print("%s: an alert of the cause %s carries caused_by" % (job, cause))
        ok = False
    for rule in effects:
        issues = [a for a in mine if a["rule"] == rule
                  and a["status"] == "IssuesFound"]
        final = [a for a in issues if a.get("final")]
        with_cause = [a for a in issues if a.get("caused_by")]
        late_alone = [a for a in issues if not a.get("caused_by")
                      and a["scan"] >= first_scan]
        early = [a for a in issues if not a.get("caused_by")
                 and a["scan"] < first_scan]
        print("%s: %s: %d IssuesFound alerts, %d caused_by %s (first at "
              "scan %d; the cause's first IssuesFound scan %d), %d before it "
              "alone" % (job, rule, len(issues), len(with_cause), cause,
                         min([a["scan"] for a in with_cause] or [-1]),
                         first_scan, len(early)))
        if not final or not all(a.get("caused_by") for a in final):
            print("  the final alert is not caused_by"); ok = False
        if late_alone:
            print("  %d alerts from the cause's scan on lack caused_by"
                  % len(late_alone)); ok = False
        for a in with_cause:
            c = a["caused_by"]
            if c["rule"] != cause or c.get("alert_id") not in cause_ids:
                print("  wrong caused_by %s" % c); ok = False
            names = ((a.get("finding") or {}).get("nodes") or {}).get("listed", [])
            if job == "straggler_wait" and any(n.startswith("algo-2/")
                                               for n in names):
                print("  the slow node is listed as waiting: %s" % names)
                ok = False
sys.exit(0 if ok else 1)
PY
echo "PASS stream_cause"
