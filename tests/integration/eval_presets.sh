#!/usr/bin/env bash
# `trainwatch eval` on generated jobs fires the planted rule and nothing the
# preset does not plant; the healthy job raises nothing; the project's
# agent-format fixtures (tests/fixtures/agent, including a corrupt file)
# evaluate with bad lines reported by file and line. The sample files of
# ../shared/data are checked too when present (skipped with a message
# otherwise). Usage: eval_presets.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
SHARED=${TW_SHARED_DIR:-$(dirname "$0")/../../../shared}
FIXTURES=$(cd "$(dirname "$0")/../fixtures/agent" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# statuses PRESET -> "Rule=Status ..." for every rule, from --json
statuses() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
# Leaf rules only: a composite (ProfilerReport) is listed before its
# sub-rules, which carry "parent".
parents = {r.get("parent") for r in d["rules"]}
print(" ".join("%s=%s" % (r["name"], r["status"]) for r in d["rules"]
               if r["name"] not in parents))
' < "$1"
}

# expect PRESET "RULE RULE..." [SEMANTICS]: exactly these rules say
# IssuesFound on the preset's default job (docs/synth.md explains each
# overlap: a starved GPU is also a low-utilization GPU, and so on).
expect_only() {
  local preset=$1 want=$2 sem=${3:-fixed}
  local dir="$WORK/$preset-$sem"
  "$TW" synth "$dir" --preset "$preset" --seed 7 2>/dev/null
  "$TW" eval "$dir" --json --semantics "$sem" > "$WORK/$preset-$sem.json"
  local got
  got=$(statuses "$WORK/$preset-$sem.json" | tr ' ' '\n' | { grep '=IssuesFound' || true; } | cut -d= -f1 | sort | tr '\n' ' ' | sed 's/ $//')
  local exp
  exp=$(echo "$want" | tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//')
  [ "$got" = "$exp" ] || fail "$preset ($sem): IssuesFound for [$got], expected [$exp]"
  if statuses "$WORK/$preset-$sem.json" | grep -q '=Error'; then
    fail "$preset: a rule is in Error: $(statuses "$WORK/$preset-$sem.json")"
  fi
  echo "ok: $preset ($sem) -> [${got}]"
}

for sem in fixed reference; do
  expect_only healthy "" $sem
  expect_only low_gpu "LowGPUUtilization" $sem
  expect_only gpu_fluctuation "LowGPUUtilization" $sem
  expect_only cpu_bottleneck "CPUBottleneck LowGPUUtilization" $sem
  expect_only io_bottleneck "IOBottleneck LowGPUUtilization" $sem
  expect_only gpu_memory_growth "GPUMemoryIncrease" $sem
  expect_only small_batch "BatchSize LowGPUUtilization" $sem
  expect_only step_outliers "StepOutlier" $sem
  expect_only dataloader "Dataloader" $sem
done
# Straggler runs in fixed semantics only (a trainwatch rule) and names
# algo-2; LowGPUUtilization and BatchSize flag its GPUs in both.
expect_only straggler "BatchSize LowGPUUtilization Straggler" fixed
expect_only straggler "BatchSize LowGPUUtilization" reference
# LoadBalancing never triggers in the reference (docs/rules.md, LoadBalancing).
expect_only load_imbalance "BatchSize LoadBalancing LowGPUUtilization" fixed
expect_only load_imbalance "BatchSize LowGPUUtilization" reference
# Initialization: in the reference the idle GPUs before the first step also
# look low and small-batch, and its overlapping averages see the first
# allocation as a memory increase (§3.4 quirk 6). `fixed` leaves the init
# phase to MaxInitializationTime (docs/rules.md, "Phases").
expect_only slow_init "MaxInitializationTime" fixed
# Under ProfilerReport in the reference, sub-rule clocks are frozen and
# MaxInitializationTime never fires (§3.8 quirk 1); `fixed` corrects that.
expect_only slow_init "BatchSize GPUMemoryIncrease LowGPUUtilization" reference

# The counts behind the table are the rule's own: CPUBottleneck's violations
# are its bottleneck snapshots and exceed half of its datapoints.
python3 - "$WORK/cpu_bottleneck-fixed.json" <<'PY' || fail "cpu_bottleneck counts"
import json, sys
d = json.load(open(sys.argv[1]))
r = {x["name"]: x for x in d["rules"]}["CPUBottleneck"]
pr = {x["name"]: x for x in d["rules"]}["ProfilerReport"]
assert r["parent"] == "ProfilerReport" and pr["status"] == "IssuesFound", pr
assert r["violations"] * 2 > r["datapoints"] > 1000, r
assert r["rule_triggered"] > 0 and r["report"]["Details"]["low_gpu_utilization"] > 0
PY

# The fixtures parse: framework traces only -> the system rules have no
# data (NoData, input none), the others judge them healthy; the E event
# without its B is reported by file and line.
"$TW" eval "$FIXTURES/job/framework" --json > "$WORK/fx.json" 2> "$WORK/fx.err"
grep -q "horovod_timeline.json:6: E event without a matching B" "$WORK/fx.err" \
  || fail "orphan E event not reported: $(cat "$WORK/fx.err")"
python3 - "$WORK/fx.json" <<'PY' || fail "fixture traces"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["files"] == 3 and d["input"]["events"] == 6, d["input"]
assert d["input"]["bad_lines"] == 1, d["input"]
for r in d["rules"]:
    want = "NoIssuesFound" if r["input"] == "received" else "NoData"
    assert r["status"] == want, r
assert {r["name"] for r in d["rules"] if r["input"] == "none"} == {
    "CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "GPUMemoryIncrease",
    "BatchSize", "LoadBalancing", "OverallSystemUsage"}, d["rules"]
# ProfilerReport, its eleven and Straggler (fixed)
assert len(d["rules"]) == 13, [r["name"] for r in d["rules"]]
PY
"$TW" eval "$FIXTURES/job" --json > "$WORK/fxjob.json" 2> /dev/null
python3 - "$WORK/fxjob.json" <<'PY' || fail "fixture job"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["files"] == 4 and d["input"]["samples"] == 12, d["input"]
assert not [r for r in d["rules"] if r["status"] == "Error"], d["rules"]
PY
# A corrupt system file reports its bad line with file and line number and
# its good lines still count.
mkdir -p "$WORK/fxcorrupt/system/incremental/2021030410"
cp "$FIXTURES/1614852000.algo-1.json.corrupt" \
   "$WORK/fxcorrupt/system/incremental/2021030410/1614852000.algo-1.json"
"$TW" eval "$WORK/fxcorrupt" --json > "$WORK/fxcorrupt.json" 2> "$WORK/fxcorrupt.err"
grep -q "1614852000.algo-1.json:7:" "$WORK/fxcorrupt.err" || fail "corrupt line not reported: $(cat "$WORK/fxcorrupt.err")"
python3 - "$WORK/fxcorrupt.json" <<'PY' || fail "fixture corrupt counts"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["bad_lines"] == 1 and d["input"]["samples"] == 11, d["input"]
PY

# Extra: the sample files of ../shared/data, when that folder is there.
if [ -d "$SHARED/data/smdebug/test_traces" ]; then
# The shared sample data parses; a corrupt system file reports its bad line
# with file and line number and its good lines still count.
"$TW" eval "$SHARED/data/smdebug/test_traces" --json > "$WORK/traces.json" 2> "$WORK/traces.err"
python3 - "$WORK/traces.json" <<'PY' || fail "test_traces"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["files"] == 7 and d["input"]["bad_lines"] == 0, d["input"]
# framework traces only: the system rules had no data (NoData, input none),
# the others judged it healthy
for r in d["rules"]:
    want = "NoIssuesFound" if r["input"] == "received" else "NoData"
    assert r["status"] == want, r
assert {r["name"] for r in d["rules"] if r["input"] == "none"} == {
    "CPUBottleneck", "IOBottleneck", "LowGPUUtilization", "GPUMemoryIncrease",
    "BatchSize", "LoadBalancing", "OverallSystemUsage"}, d["rules"]
# ProfilerReport, its eleven and Straggler (fixed)
assert len(d["rules"]) == 13, [r["name"] for r in d["rules"]]
PY
mkdir -p "$WORK/corrupt/system/incremental/2020060305"
cp "$SHARED/data/smdebug/1591160699.algo-1.json.corrupt" \
   "$WORK/corrupt/system/incremental/2020060305/1591160699.algo-1.json"
"$TW" eval "$WORK/corrupt" --json > "$WORK/corrupt.json" 2> "$WORK/corrupt.err"
grep -q "1591160699.algo-1.json:14:" "$WORK/corrupt.err" || fail "corrupt line not reported: $(cat "$WORK/corrupt.err")"
python3 - "$WORK/corrupt.json" <<'PY' || fail "corrupt counts"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["bad_lines"] == 1 and d["input"]["samples"] == 13, d["input"]
PY

else
  echo "skipped: shared sample data absent ($SHARED/data/smdebug); fixture checks above cover the formats"
fi

# Bad usage: clear messages and exit status 2 / 1.
set +e
"$TW" eval > /dev/null 2>&1; [ $? -eq 2 ] || fail "eval without a folder must exit 2"
"$TW" eval "$WORK/nope" 2> "$WORK/nope.err"; rc=$?
set -e
[ $rc -eq 1 ] || fail "eval on a missing folder must exit 1"
grep -q "$WORK/nope" "$WORK/nope.err" || fail "missing folder not named: $(cat "$WORK/nope.err")"
echo "eval_presets: all checks passed"
