#!/usr/bin/env bash
# 0403 - keyless or mis-keyed producers split a job (edge-case issue,
# defect 4). Valid batches sent without a key spread over all partitions:
# fragments were skipped ("joined mid-stream ... a previous owner finished
# it" - untrue) or evaluated on their own, each overwriting <job>.json.
# The key was never compared with the batch's job.
# Here one job is replayed without a key and another with a wrong key.
# Asserts: every message of both lands on the dead-letter topic with
# reason key_mismatch and an error naming the job, key_mismatches counts
# them, neither job is evaluated (no results file, no fragment), and a
# correctly keyed job beside them gives eval's results.
. "$(dirname "$0")/lib/regress.sh"
need kcat
timeout 120 "$TW" synth "$WORK/good" --preset cpu_bottleneck --nodes 2 \
    --duration 5m --no-framework >/dev/null 2>&1 || fail "synth"
timeout 120 "$TW" eval "$WORK/good" --json --quiet >"$WORK/good.eval.json" || fail "eval"
tw_broker_start || fail "broker start"
run_config A
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
K1=$(timeout 120 "$TW" replay "$WORK/good" --brokers "$BOOTSTRAP" --group "$GROUP" -q --job keyless --key '') ||
    fail "replay keyless"
K2=$(timeout 120 "$TW" replay "$WORK/good" --brokers "$BOOTSTRAP" --group "$GROUP" -q --job miskeyed --key other) ||
    fail "replay miskeyed"
timeout 120 "$TW" replay "$WORK/good" --brokers "$BOOTSTRAP" --group "$GROUP" -q >/dev/null ||
    fail "replay good"
N=$(( $(field batches "$K1") + $(field batches "$K2") ))
wait_for 120 test -e "$WORK/resA/good.json" || fail "good job not evaluated"
enough() { grep -q "key_mismatch" "$WORK/A.err"; }
wait_for 30 enough || fail "no key_mismatch logged"
sleep 1
tw_run_stop A || fail "run exit status"
SUM=$(cat "$WORK/A.out")
[ "$(field key_mismatches "$SUM")" -eq "$N" ] || fail "key_mismatches: $SUM (want $N)"
[ "$(field dead_letters "$SUM")" -eq "$N" ] || fail "dead_letters: $SUM (want $N)"
ls "$WORK/resA" | grep -Eq 'keyless|miskeyed|other' && fail "a mis-keyed job was evaluated: $(ls "$WORK/resA")"
python3 "$LIB/results.py" same "$WORK/good.eval.json" "$WORK/resA/good.json" ||
    fail "good job differs from eval"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning -e -q \
    -f '%h\n' >"$WORK/dl.txt" || fail "kcat dead letters"
[ "$(grep -c 'trainwatch.reason=key_mismatch' "$WORK/dl.txt")" -eq "$N" ] ||
    fail "dead letters with reason key_mismatch: $(grep -c key_mismatch "$WORK/dl.txt") of $N"
grep -q "trainwatch.error=message without a key (batch of job 'keyless')" "$WORK/dl.txt" ||
    fail "keyless error text: $(head -2 "$WORK/dl.txt")"
grep -q "trainwatch.error=message key 'other' is not the batch's job 'miskeyed'" "$WORK/dl.txt" ||
    fail "mis-keyed error text"
tw_broker_stop || fail "broker stop"
echo "PASS 0403: $N mis-keyed messages dead-lettered, the good job equals eval"
