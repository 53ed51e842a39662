#!/usr/bin/env bash
# 0601 - checkpoint lost while the engine is down -> whole job skipped
# silently (edge-case issue, defect 6). With a Redis without persistence
# restarted empty while the engine was down, the restarted engine logged
# "checkpoint absent ... reading from offset N", then the false "previous
# owner finished it" (INFO only), and the job in flight was never
# evaluated: the Kafka commit was the checkpoint's offset, past the job's
# start, and only the lost checkpoint knew about the job.
# Here: a job is streamed at 60x into run A (redis store, no
# persistence), A is killed (-9) in the job's middle once it has
# checkpointed and committed, Redis is killed and restarted empty on the
# same port, the rest of the job reaches the topic, and run B starts.
# Asserts: B re-reads the job from its first message (commits never pass
# an unfinished job's start), its results equal eval's, it is not marked
# partial, and nothing is counted as skipped or finished before.
. "$(dirname "$0")/lib/regress.sh"
need kcat redis-server redis-cli
. "$LIB/state.sh"
timeout 120 "$TW" synth "$WORK/lost" --preset cpu_bottleneck --nodes 2 \
    --duration 10m --no-framework >/dev/null 2>&1 || fail "synth"
timeout 120 "$TW" eval "$WORK/lost" --json --quiet >"$WORK/lost.eval.json" || fail "eval"
STATE_REDIS_ARGS=""
GROUP=lost-group
tw_redis_start || fail "redis start"
tw_broker_start || fail "broker start"
state_config A lost-group "$WORK/res"
state_config B lost-group "$WORK/res"
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "A: no assignment"
# the whole job, paced (10 minutes at 60x: 10 s), so A dies in its middle
timeout 120 "$TW" replay "$WORK/lost" --brokers "$BOOTSTRAP" --group "$GROUP" \
    -q --rate 60x >"$WORK/replay.out" 2>&1 &
REPLAY=$!
checkpointed() { [ -n "$(tw_redis_cli --raw keys 't:v1:job:*:core')" ]; }
wait_for 60 checkpointed || fail "A never checkpointed the job"
sleep 1 # a commit after that checkpoint
[ -f "$WORK/res/lost.json" ] && fail "the job finished before the crash (too fast)"
kill -KILL "$RUN_PID_A"; wait "$RUN_PID_A" 2>/dev/null; RUN_PID_A=
state_redis_kill
state_redis_restart # empty: no AOF, no RDB
[ -z "$(tw_redis_cli --raw keys '*')" ] || fail "redis is not empty"
wait "$REPLAY" || fail "replay: $(cat "$WORK/replay.out")"
tw_run_start B "$WORK/B.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/B.err" || fail "B: no assignment"
wait_for 120 test -f "$WORK/res/lost.json" || fail "the job was never evaluated"
tw_run_stop B || fail "B: exit status"
SUM=$(cat "$WORK/B.out")
python3 "$LIB/results.py" same "$WORK/lost.eval.json" "$WORK/res/lost.json" ||
    fail "results differ from eval"
grep -q '"partial"' "$WORK/res/lost.json" && fail "the job is marked partial"
grep -q "job lost started (partition [0-9]*, offset" "$WORK/B.err" ||
    fail "B did not start the job from a message of its own"
for f in jobs_finished_before jobs_skipped_partial jobs_data_loss; do
    [ "$(field $f "$SUM")" -eq 0 ] || fail "$f: $SUM"
done
tw_broker_stop || fail "broker stop"
echo "PASS 0601: the job was re-read from its start after its checkpoint was lost"
