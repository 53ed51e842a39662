#!/usr/bin/env bash
# fixed_table.sh BUILD_DIR - what `fixed` semantics reports on every synth
# preset and on the shapes of issue 13 (a straggler among 8 and 16 nodes,
# and in synchronous training where the other nodes wait for it
# (straggler_wait among 4, 8 and 16 nodes, with step events and from
# system metrics alone: --no-framework), a healthy job with a long
# initialization that its configuration allows,
# a healthy job with an evaluation pass every 600 steps, a healthy job
# whose last 8 minutes are a finalization (no steps, idle GPUs), and one
# with a 24-minute initialization, an evaluation pass every 300 steps and
# a 10-minute finalization), under the default
# rule set (ProfilerReport): the rules that end IssuesFound, each with the
# nodes/GPUs its finding names first (and how many in all, when more
# than two), split into root causes and the
# findings marked caused_by another (docs/rules.md "Root cause first").
# Healthy jobs raise nothing; the slow initialization raises
# MaxInitializationTime only (not LowGPUUtilization, BatchSize or
# GPUMemoryIncrease for the idle, empty GPUs before the first step); CPU
# and I/O starvation raise CPU/IOBottleneck with LowGPUUtilization as its
# consequence; the straggler is named by Straggler, the LowGPUUtilization
# and BatchSize findings it explains are its consequences. Prints the
# table (markdown).
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
PY=${TW_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A long initialization (24 min) that the job's configuration allows (30).
cat > "$WORK/long_init.yaml" <<'YAML'
rules:
  - name: ProfilerReport
    parameters: {MaxInitializationTime_threshold: 30}
YAML

# A job without the hook judged from its start (docs/rules.md "Phases").
cat > "$WORK/no_grace.yaml" <<'YAML'
rules:
  - name: ProfilerReport
    parameters: {LowGPUUtilization_init_grace: 0, BatchSize_init_grace: 0,
                 LoadBalancing_init_grace: 0, CPUBottleneck_init_grace: 0,
                 IOBottleneck_init_grace: 0}
YAML

# row NAME [--rules FILE] -- SYNTH ARGS...: one table row
row() {
    local name=$1 rules=()
    shift
    if [ "$1" = --rules ]; then rules=(--rules "$2"); shift 2; fi
    shift # --
    "$TW" synth "$WORK/$name" "$@" --seed 7 2>/dev/null
    "$TW" eval "$WORK/$name" "${rules[@]}" --json --quiet > "$WORK/$name.json"
    "$PY" - "$name" "$WORK/$name.json" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
roots, effects = [], []
for r in d["rules"]:
    if r["status"] == "IssuesFound" and r["name"] != "ProfilerReport":
        f = r.get("finding") or {}
        listed = (f.get("nodes") or {}).get("listed", [])
        count = (f.get("nodes") or {}).get("count", len(listed))
        more = ", ... %d in all" % count if count > 2 else ""
        cell = "%s (%s%s)" % (r["name"], ", ".join(listed[:2]), more)
        cause = r.get("caused_by")
        if cause:
            effects.append("%s <- %s" % (cell, cause["rule"]))
        else:
            roots.append(cell)
print("| %s | %s | %s |" % (name, "; ".join(roots) or "none",
                            "; ".join(effects) or "none"))
PY
}

{
    echo "| job | fixed semantics: root-cause findings (names) | caused_by: consequence (names) <- cause |"
    echo "| --- | --- | --- |"
    for p in healthy low_gpu gpu_fluctuation cpu_bottleneck io_bottleneck \
             gpu_memory_growth small_batch step_outliers load_imbalance \
             slow_init dataloader straggler; do
        row "$p" -- --preset "$p"
    done
    row straggler_8_nodes -- --preset straggler --nodes 8
    row straggler_16_nodes -- --preset straggler --nodes 16
    row straggler_wait -- --preset straggler_wait
    row straggler_wait_8_nodes -- --preset straggler_wait --nodes 8
    row straggler_wait_16_nodes -- --preset straggler_wait --nodes 16
    row straggler_wait_system -- --preset straggler_wait --no-framework
    row straggler_wait_system_8_nodes -- --preset straggler_wait --nodes 8 \
        --no-framework
    row straggler_wait_system_16_nodes -- --preset straggler_wait \
        --nodes 16 --no-framework
    row straggler_wait_system_judged_from_start --rules "$WORK/no_grace.yaml" \
        -- --preset straggler_wait --nodes 8 --no-framework
    row healthy_long_init --rules "$WORK/long_init.yaml" -- --preset slow_init
    row healthy_eval_passes -- --preset healthy --duration 1800
    row healthy_long_final -- --preset healthy --duration 1200 --final-s 480
    row healthy_long_init_final_eval_300 --rules "$WORK/long_init.yaml" -- \
        --preset slow_init --duration 2700 --final-s 600 --eval-every 300
} > "$WORK/table.md"
cat "$WORK/table.md"

# the healthy job's evaluation passes are there: EVAL steps between TRAIN
n_eval=$(cat "$WORK"/healthy_eval_passes/framework/pevents/*/*.json |
    grep -c '"name": "Step:ModeKeys.EVAL", "pid"' || true)
[ "$n_eval" -ge 60 ] || fail "healthy_eval_passes: $n_eval EVAL steps"

# the finalization is there: reference semantics judges it (and fires)
"$TW" eval "$WORK/healthy_long_final" --semantics reference --json --quiet |
    "$PY" -c '
import json, sys
d = json.load(sys.stdin)
fired = [r["name"] for r in d["rules"] if r["status"] == "IssuesFound"]
assert "LowGPUUtilization" in fired, fired' ||
    fail "healthy_long_final: reference semantics does not see the idle end"
n_eval=$(cat "$WORK"/healthy_long_init_final_eval_300/framework/pevents/*/*.json |
    grep -c '"name": "Step:ModeKeys.EVAL", "pid"' || true)
[ "$n_eval" -ge 60 ] || fail "healthy_long_init_final_eval_300: $n_eval EVAL steps"

# the waiting nodes' GPUs are the consequences, never the slow node's
for n in straggler_wait straggler_wait_8_nodes straggler_wait_16_nodes \
         straggler_wait_system_judged_from_start; do
    "$PY" - "$WORK/$n.json" <<'PY' || fail "$n: algo-2 listed as waiting"
import json, sys
for r in json.load(open(sys.argv[1]))["rules"]:
    if r.get("caused_by"):
        assert not any(x.startswith("algo-2/")
                       for x in r["finding"]["nodes"]["listed"]), r["name"]
PY
done

cat > "$WORK/want.md" <<'EOF2'
| job | fixed semantics: root-cause findings (names) | caused_by: consequence (names) <- cause |
| --- | --- | --- |
| healthy | none | none |
| low_gpu | LowGPUUtilization (algo-1/gpu0) | none |
| gpu_fluctuation | LowGPUUtilization (algo-1/gpu0) | none |
| cpu_bottleneck | CPUBottleneck (algo-1) | LowGPUUtilization (algo-1/gpu0) <- CPUBottleneck |
| io_bottleneck | IOBottleneck (algo-1) | LowGPUUtilization (algo-1/gpu0) <- IOBottleneck |
| gpu_memory_growth | GPUMemoryIncrease (algo-1/gpu0) | none |
| small_batch | LowGPUUtilization (algo-1/gpu0); BatchSize (algo-1/gpu0) | none |
| step_outliers | StepOutlier (algo-1-0) | none |
| load_imbalance | LowGPUUtilization (algo-1/gpu1, algo-1/gpu2, ... 3 in all); BatchSize (algo-1/gpu1, algo-1/gpu2, ... 3 in all); LoadBalancing (algo-1/gpu0, algo-1/gpu1, ... 4 in all) | none |
| slow_init | MaxInitializationTime (algo-1) | none |
| dataloader | Dataloader (algo-1) | none |
| straggler | Straggler (algo-2-1) | LowGPUUtilization (algo-2/gpu0) <- Straggler; BatchSize (algo-2/gpu0) <- Straggler |
| straggler_8_nodes | Straggler (algo-2-1) | LowGPUUtilization (algo-2/gpu0) <- Straggler; BatchSize (algo-2/gpu0) <- Straggler |
| straggler_16_nodes | Straggler (algo-2-1) | LowGPUUtilization (algo-2/gpu0) <- Straggler; BatchSize (algo-2/gpu0) <- Straggler |
| straggler_wait | Straggler (algo-2-1) | LowGPUUtilization (algo-1/gpu0, algo-3/gpu0, ... 3 in all) <- Straggler; BatchSize (algo-1/gpu0, algo-3/gpu0, ... 3 in all) <- Straggler |
| straggler_wait_8_nodes | Straggler (algo-2-1) | LowGPUUtilization (algo-1/gpu0, algo-3/gpu0, ... 7 in all) <- Straggler; BatchSize (algo-1/gpu0, algo-3/gpu0, ... 7 in all) <- Straggler |
| straggler_wait_16_nodes | Straggler (algo-2-1) | LowGPUUtilization (algo-1/gpu0, algo-10/gpu0, ... 15 in all) <- Straggler; BatchSize (algo-1/gpu0, algo-10/gpu0, ... 15 in all) <- Straggler |
| straggler_wait_system | Straggler (algo-2) | none |
| straggler_wait_system_8_nodes | Straggler (algo-2) | none |
| straggler_wait_system_16_nodes | Straggler (algo-2) | none |
| straggler_wait_system_judged_from_start | Straggler (algo-2) | LowGPUUtilization (algo-1/gpu0, algo-3/gpu0, ... 7 in all) <- Straggler; BatchSize (algo-1/gpu0, algo-3/gpu0, ... 7 in all) <- Straggler |
| healthy_long_init | none | none |
| healthy_eval_passes | none | none |
| healthy_long_final | none | none |
| healthy_long_init_final_eval_300 | none | none |
EOF2
diff "$WORK/want.md" "$WORK/table.md" || fail "the table differs (above)"
echo "ok"
