# state.sh - sourced by the checkpoint tests (run_crash.sh,
# run_redis_restart.sh, run_rebalance.sh). Needs $TW, $WORK, $HERE and
# lib/broker.sh, lib/run.sh, lib/redis.sh sourced.
#
# The job: a 2-hour, 4-node generated job (cpu_bottleneck preset; rules:
# ProfilerReport and the example custom rule GPUMemoryCeiling, whose
# checkpoints -- plugin ABI 2 save/restore -- must be exact too; without
# them a restored run reported fewer datapoints), system metrics sampled
# every 5 s (the
# agent's 500 ms would be 22 MB of FlatBuffers, and librdkafka 2.0.2's mock
# broker keeps only ~5 MB per partition): 92,160 samples, 120 scans,
# ~2.3 MB on the topic.

STATE_JOB=${STATE_JOB:-ckpt-job}

# The rules of every run and of the reference `eval`.
state_rules() {
    cat <<YAML
rules:
  - name: ProfilerReport
  - name: GPUMemoryCeiling
    source: $(dirname "$TW")/plugins/example/gpu_memory_ceiling.so
    rule_to_invoke: gpu_memory_ceiling_rule
    parameters: {ceiling: 30, patience: 3}
YAML
}

# state_make_job: synth + `eval --json` (the reference results).
state_make_job() {
    timeout 120 "$TW" synth "$WORK/$STATE_JOB" --preset cpu_bottleneck \
        --nodes 4 --duration 2h --interval-ms 5000 --no-framework \
        >/dev/null 2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
    state_rules >"$WORK/rules.yaml"
    timeout 300 "$TW" eval "$WORK/$STATE_JOB" --json --quiet \
        --rules "$WORK/rules.yaml" >"$WORK/$STATE_JOB.eval.json" || fail "eval"
}

# state_config NAME GROUP RESULTS_DIR [EXTRA YAML]: $WORK/NAME.yaml with the
# redis store on $REDIS_PORT (STATE_SLICE_BYTES: its checkpoint_slice_bytes;
# STATE_TARGET_BYTES: its checkpoint_target_bytes).
state_config() {
    mkdir -p "$3"
    cat >"$WORK/$1.yaml" <<YAML
kafka:
  group: $2
  client_id: $1
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 500
engine:
  results_dir: $3
  progress_interval: 0
state:
  store: redis
  checkpoint_interval: 200ms
${STATE_SLICE_BYTES:+  checkpoint_slice_bytes: $STATE_SLICE_BYTES
}${STATE_TARGET_BYTES:+  checkpoint_target_bytes: $STATE_TARGET_BYTES
}  redis:
    port: $REDIS_PORT
    prefix: "t:"
    retry_initial: 50ms
    retry_max: 500ms
    connect_timeout: 1s
    command_timeout: 2s
${4:-}
$(state_rules)
YAML
}

# Alerts are ~200 KB each here (CPUBottleneck's report lists every
# bottleneck), 350 of them: far more than the mock broker keeps per
# partition. So a kcat consumer reads the alert topic from before the
# engine starts to after it stops, and nothing is lost to retention.
# state_alerts_start OUT / state_alerts_stop: one alert JSON per line.
state_alerts_start() {
    kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -u -q \
        -f '%s\n' >"$1" 2>"$WORK/kcat.err" &
    KCAT_PID=$!
    KCAT_OUT=$1
}
state_alerts_stop() {
    # done when nothing new arrived for 3 s
    local last=-1 now
    for _ in $(seq 120); do
        now=$(stat -c %s "$KCAT_OUT")
        [ "$now" = "$last" ] && break
        last=$now
        sleep 3
    done
    kill -TERM "$KCAT_PID" 2>/dev/null
    wait "$KCAT_PID" 2>/dev/null
    KCAT_PID=
}

# state_ids FILE: "id sha256" per alert of FILE, sorted (repeats kept).
state_ids() {
    python3 -c 'import hashlib,json,sys
for l in open(sys.argv[1], "rb"):
    l = l.strip()
    if l: print(json.loads(l)["id"], hashlib.sha256(l).hexdigest())' "$1" | sort
}

# state_baseline: an uninterrupted run (its own broker) of the job:
# $WORK/base/$STATE_JOB.json and $WORK/base.alerts.jsonl.
state_baseline() {
    tw_broker_start || fail "broker start"
    state_config base base-group "$WORK/base"
    state_alerts_start "$WORK/base.alerts.jsonl"
    tw_run_start BASE "$WORK/base.yaml"
    wait_for 60 grep -q "assigned partition" "$WORK/BASE.err" || fail "base: no assignment"
    timeout 120 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" -q \
        >"$WORK/replay.out" || fail "replay"
    awk -v m="$(field mb "$(cat "$WORK/replay.out")")" 'BEGIN { exit !(m < 4.5) }' ||
        fail "replay: $(cat "$WORK/replay.out"): more than the mock broker keeps"
    wait_for 120 test -f "$WORK/base/$STATE_JOB.json" || fail "base: no results"
    tw_run_stop BASE || fail "base: exit status"
    python3 "$HERE/lib/results.py" same "$WORK/$STATE_JOB.eval.json" \
        "$WORK/base/$STATE_JOB.json" || fail "uninterrupted run differs from eval"
    state_alerts_stop
    [ "$(state_ids "$WORK/base.alerts.jsonl" | cut -d' ' -f1 | uniq -d | wc -l)" -eq 0 ] ||
        fail "uninterrupted run: duplicate alert ids"
    [ -s "$WORK/base.alerts.jsonl" ] || fail "uninterrupted run: no alerts"
    tw_broker_stop || fail "broker stop"
}

# state_check RESULTS_FILE ALERTS_FILE: results byte-identical to the
# uninterrupted run's and to eval's; no alert id twice; every alert of the
# uninterrupted run there (none lost), and no other.
state_check() {
    cmp "$WORK/base/$STATE_JOB.json" "$1" || fail "results differ from the uninterrupted run"
    python3 "$HERE/lib/results.py" same "$WORK/$STATE_JOB.eval.json" "$1" ||
        fail "results differ from eval"
    local dup
    dup=$(state_ids "$2" | cut -d' ' -f1 | uniq -d | wc -l)
    [ "$dup" -eq 0 ] || fail "$dup alert id(s) on the topic more than once"
    diff <(state_ids "$WORK/base.alerts.jsonl") <(state_ids "$2") >"$WORK/ids.diff" ||
        fail "alerts (id, bytes) differ from the uninterrupted run: $(head -5 "$WORK/ids.diff")"
    echo "results identical to eval and to the uninterrupted run; $(grep -c . "$2") alerts, byte-identical, no id twice, none missing"
    echo "example plugin GPUMemoryCeiling: restored run $(state_ceiling "$1"), eval $(state_ceiling "$WORK/$STATE_JOB.eval.json")"
}

# state_ceiling RESULTS: the example rule's counters in a results file.
state_ceiling() {
    python3 -c 'import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"] if x["name"] == "GPUMemoryCeiling"][0]
print("%s: %d violations / %d datapoints" % (r["status"], r["violations"], r["datapoints"]))' "$1"
}

# state_redis_kill / state_redis_restart: SIGKILL the redis-server of
# lib/redis.sh and start it again on the same port, same folder (its AOF)
# and the same arguments ($STATE_REDIS_ARGS).
state_redis_kill() {
    kill -KILL "$REDIS_PID" 2>/dev/null
    wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
}
state_redis_up() { [ "$(tw_redis_cli ping 2>/dev/null)" = PONG ]; }
state_redis_restart() {
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
        --dir "$REDIS_DIR" --daemonize no --logfile "$REDIS_DIR/redis.log" \
        $STATE_REDIS_ARGS &
    REDIS_PID=$!
    wait_for 30 state_redis_up ||
        fail "redis did not restart on port $REDIS_PORT"
}
