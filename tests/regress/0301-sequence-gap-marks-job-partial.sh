#!/usr/bin/env bash
# 0301 - gaps in a node's sequence were never detected (edge-case issue,
# defect 3). Batches carry per-node sequence numbers, checked only for
# duplicates: a job that lost a third of its messages on the way (a
# broker that truncated its log under a paused consumer) ended "normally"
# with halved violation counts and no counter moved.
# Here `replay --drop-every 7` loses every 7th data message. Asserts: the
# job's results say partial, with data_loss ranges of kind sequence_gap
# whose sizes add up to what replay dropped; its final alerts say partial;
# one WARN per range names the job, the node and the missing batches; the
# summary counts jobs_partial=1. A complete job beside it is not marked.
. "$(dirname "$0")/lib/regress.sh"
need kcat
timeout 120 "$TW" synth "$WORK/lossy" --preset cpu_bottleneck --nodes 2 \
    --duration 8m --no-framework >/dev/null 2>&1 || fail "synth"
tw_broker_start || fail "broker start"
run_config A
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
OUT=$(timeout 120 "$TW" replay "$WORK/lossy" --brokers "$BOOTSTRAP" --group "$GROUP" -q \
    --job lossy --drop-every 7) || fail "replay lossy"
DROPPED=$(field dropped "$OUT")
[ "$DROPPED" -gt 0 ] || fail "replay dropped nothing: $OUT"
timeout 120 "$TW" replay "$WORK/lossy" --brokers "$BOOTSTRAP" --group "$GROUP" -q --job whole \
    >/dev/null || fail "replay whole"
wait_for 120 test -e "$WORK/resA/lossy.json" -a -e "$WORK/resA/whole.json" ||
    fail "results: $(ls "$WORK/resA")"
tw_run_stop A || fail "run exit status"
SUM=$(cat "$WORK/A.out")
[ "$(field jobs_partial "$SUM")" -eq 1 ] || fail "jobs_partial: $SUM"
python3 - "$WORK/resA/lossy.json" "$WORK/resA/whole.json" "$DROPPED" <<'PY' || fail "results"
import json, sys
lossy, whole, dropped = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
assert lossy.get("partial") is True, "lossy not partial"
ranges = lossy["data_loss"]["ranges"]
assert ranges and all(r["kind"] == "sequence_gap" for r in ranges), ranges
missing = sum(r["to"] - r["from"] + 1 for r in ranges)
assert missing == dropped == lossy["data_loss"]["missing"], (missing, dropped)
assert "partial" not in whole and "data_loss" not in whole, "whole job marked"
PY
NWARN=$(grep -c 'WARN.*job lossy: node [^:]*: batches [0-9]*\.\.[0-9]* never arrived' "$WORK/A.err")
[ "$NWARN" -ge 1 ] || fail "no WARN naming the missing batches"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%k %s\n' >"$WORK/alerts.txt" || fail "kcat alerts"
grep '^lossy .*"final":true' "$WORK/alerts.txt" | grep -qv '"partial":true' &&
    fail "a final alert of the lossy job is not marked partial"
grep -q '^lossy .*"final":true,"partial":true,"missing":'"$DROPPED" "$WORK/alerts.txt" ||
    fail "no partial final alert with missing=$DROPPED"
grep '^whole ' "$WORK/alerts.txt" | grep -q '"partial"' && fail "whole job's alerts marked"
tw_broker_stop || fail "broker stop"
echo "PASS 0301: $DROPPED dropped batches reported in $NWARN range(s)"
