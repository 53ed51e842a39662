#!/usr/bin/env bash
# PyTorch profiler traces as eval input (README "PyTorch profiler traces"):
# real PyTorch (Debian's /usr/bin/python3) trains a tiny model under
# torch.profiler with a schedule and export_chrome_trace; `trainwatch eval`
# on each file finds the steps torch recorded, with the documented anchor
# (relative ts: the file's mtime is the end of its newest event;
# --trace-start overrides). A hand-written Kineto-form trace gives its base
# time and rank; truncated and wrongly typed input is reported and counted.
# Usage: torch_trace.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
FIXTURES=$(cd "$HERE/../fixtures/torch" && pwd)
PY=/usr/bin/python3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- real PyTorch: the plain event array of a build without Kineto ---------
mkdir "$WORK/run"
"$PY" "$HERE/torch_trace/profile_steps.py" "$WORK/run"
"$PY" - "$WORK/run" "$TW" <<'PYEOF' || fail "torch profiler traces"
import json, os, subprocess, sys
run, tw = sys.argv[1], sys.argv[2]
exp = json.load(open(os.path.join(run, "expected.json")))
assert len(exp["files"]) == 2, exp
def steps(*args):
    out = subprocess.run([tw, "eval", "--steps", *args], check=True,
                         capture_output=True, text=True).stdout
    return [l.split()[1:] for l in out.splitlines() if l.startswith("step ")]
total = 0
for f in exp["files"]:
    path = os.path.join(run, f["file"])
    got = steps(path)
    nums = sorted(int(s[2]) for s in got)
    assert f["steps"] and nums == f["steps"], (f, got)
    assert all(s[0] == f["file"].split(".")[0] and s[1] == "TRAIN"
               for s in got), got
    # the anchor: the newest event ends at the file's mtime, which lies
    # between the script's clock readings around export_chrome_trace
    last_end = max(int(s[4]) for s in got)
    mtime_us = os.stat(path).st_mtime_ns // 1000
    assert abs(last_end - mtime_us) <= 1, (last_end, mtime_us)
    # (file times come from the kernel's coarse clock, up to a tick (4 ms
    # at HZ=250) behind time.time_ns(): an ASan run saw 1.5 ms before
    # the call's start)
    tick = 10000
    assert f["export_enter_us"] - tick <= last_end <= f["export_exit_us"] + tick, (f, last_end)
    # so times are late by the profiler's stop and the export: measured
    late = last_end - f["last_step_end_us"]
    assert 0 <= late < 2000000, (f, last_end)
    # durations are the file's own
    raw = {e["name"]: e for e in json.load(open(path))
           if e["name"].startswith("ProfilerStep#")}
    for s in got:
        e = raw["ProfilerStep#" + s[2]]
        assert int(s[4]) - int(s[3]) == e["dur"], (s, e)
    total += len(got)
    print("%s: steps %s, newest event ends at mtime %d: %d us after the "
          "step really ended (export alone: %d us)"
          % (f["file"], nums, mtime_us, late,
             f["export_exit_us"] - f["export_enter_us"]))
# the folder: both files (named *.pt.trace.json), all steps
assert len(steps(run)) == total, total
# --trace-start: ts 0 is the given time
path = os.path.join(run, exp["files"][0]["file"])
raw = [e for e in json.load(open(path)) if e["name"].startswith("ProfilerStep#")]
first = min(raw, key=lambda e: e["ts"])
got = steps("--trace-start", "1700000000.5", path)
start = min(int(s[3]) for s in got)
assert start == 1700000000500000 + first["ts"], (start, first)
print("torch %s: %d steps in %d files as torch recorded them" %
      (exp["torch"], total, len(exp["files"])))
PYEOF

# --- replay: the same folder through the broker into `run` == eval ---------
# (trace files of a real run: trainwatch broker, run, replay)
LIB=$HERE/lib
BROKER_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
cleanup() {
    [ -n "${RUN_PID_T:-}" ] && kill -KILL "$RUN_PID_T" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mv "$WORK/run" "$WORK/torchjob"
"$TW" eval "$WORK/torchjob" --json --quiet > "$WORK/eval.json" || fail "eval of the folder"
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat > "$WORK/run.yaml" <<YAML
kafka:
  group: torch-trace
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
tw_run_start T "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/T.err" || fail "no partition assigned"
OUT=$(timeout 120 "$TW" replay "$WORK/torchjob" --brokers "$BOOTSTRAP" --group torch-trace -q) \
  || fail "replay"
[ "$(field files "$OUT")" = 2 ] || fail "replay: $OUT"
wait_for 60 test -s "$WORK/res/torchjob.json" || fail "no results file: $(tail -5 "$WORK/T.err")"
tw_run_stop T || fail "run exit status"
"$PY" "$LIB/results.py" same "$WORK/eval.json" "$WORK/res/torchjob.json" \
  || fail "run's results of the replayed traces differ from eval's"
tw_broker_stop || fail "broker stop"
echo "replay of the torch traces into run: the same results as eval ($OUT)"

# --- Kineto object form (hand-written fixture) -----------------------------
K="$FIXTURES/kineto_rank1.pt.trace.json"
"$TW" eval --steps "$K" > "$WORK/k.txt"
grep '^step ' "$WORK/k.txt" > "$WORK/k.steps"
printf '%s\n' "step rank-1 TRAIN 7 1700000000001001 1700000000021001" \
  "step rank-1 TRAIN 8 1700000000021001 1700000000041001" > "$WORK/k.want"
diff -u "$WORK/k.want" "$WORK/k.steps" || fail "Kineto steps: base time or rank"
"$TW" eval --json "$K" > "$WORK/k.json"
"$PY" - "$WORK/k.json" <<'PYEOF' || fail "Kineto phases"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["first_timestamp_us"] == 1700000000001001, d["first_timestamp_us"]
assert d["latest_timestamp_us"] == 1700000000041001, d["latest_timestamp_us"]
# 4 operator/kernel events and 2 steps; the profiler's span, M, s, i are not events
assert d["input"]["events"] == 6 and d["input"]["bad_lines"] == 0, d["input"]
ofm = next(r for r in d["rules"] if r["name"] == "OverallFrameworkMetrics")
det = ofm["report"]["Details"]
assert set(det["ratio"]) == {"cpu_functions", "gpu_functions-dev:0"}, det
assert det["GPU_total"]["void gemm_kernel<float>(float*)"] == 50, det
assert det["CPU_total"]["aten::linear"] == 300, det
PYEOF
# gzip-compressed, inside a folder among other files: the same steps
mkdir -p "$WORK/gz/deep"
gzip -c "$K" > "$WORK/gz/deep/k.pt.trace.json.gz"
echo '[]' > "$WORK/gz/deep/other.json"
"$TW" eval --steps "$WORK/gz" | grep '^step ' > "$WORK/gz.steps"
diff -u "$WORK/k.want" "$WORK/gz.steps" || fail "gzip trace in a folder"
# a bad --trace-start is a usage error naming the option
for cmd in "eval" "replay --brokers 127.0.0.1:1"; do
  set +e
  # shellcheck disable=SC2086
  "$TW" $cmd "$K" --trace-start yesterday > /dev/null 2> "$WORK/ts.err"
  rc=$?
  set -e
  [ $rc = 2 ] && grep -q -- "--trace-start" "$WORK/ts.err" || fail "$cmd --trace-start yesterday: exit $rc"
done
echo "Kineto fixture: base time, rank-1 and phases as written (also gzip, in a folder)"

# --- bad input ---------------------------------------------------------------
# cut inside the event array: the complete events are read, the cut is
# reported (the base time at the end is lost: the mtime anchors instead)
"$PY" - "$K" "$WORK/cut.pt.trace.json" <<'PYEOF'
import sys
text = open(sys.argv[1]).read()
open(sys.argv[2], "w").write(text[:text.index('"ProfilerStep#8"') + 10])
PYEOF
"$TW" eval --steps "$WORK/cut.pt.trace.json" > "$WORK/cut.out" 2> "$WORK/cut.err" \
  || fail "a truncated trace must still evaluate"
grep -q "cut.pt.trace.json:[0-9]*: truncated: the file ends inside an event" "$WORK/cut.err" \
  || { cat "$WORK/cut.err"; fail "truncation not reported"; }
[ "$(grep -c '^step rank-1 TRAIN 7 ' "$WORK/cut.out")" = 1 ] || fail "step before the cut lost"
grep -q '^step .* 8 ' "$WORK/cut.out" && fail "cut step read"

# wrong types: each bad event named by line and counted, the others read
cat > "$WORK/types.pt.trace.json" <<'JEOF'
[
{"name": "ProfilerStep#1", "ph": "X", "ts": "soon", "dur": 5, "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::mm", "ph": "X", "ts": 10, "dur": [1], "tid": 1, "pid": "CPU functions", "args": {}},
{"name": "aten::add", "ph": "X", "ts": 12, "dur": 1, "tid": 1, "pid": "CPU functions", "args": 5},
{"name": "ProfilerStep#2", "ph": "X", "ts": 20, "dur": 30, "tid": 1, "pid": "CPU functions", "args": {}}
]
JEOF
"$TW" eval --json "$WORK/types.pt.trace.json" > "$WORK/types.json" 2> "$WORK/types.err"
for line in 2 3 4; do
  grep -q "types.pt.trace.json:$line: " "$WORK/types.err" \
    || { cat "$WORK/types.err"; fail "bad event on line $line not named"; }
done
"$PY" - "$WORK/types.json" <<'PYEOF' || fail "bad events not counted"
import json, sys
i = json.load(open(sys.argv[1]))["input"]
assert i["bad_lines"] == 3 and i["events"] == 1 and i["lines"] == 4, i
PYEOF
"$TW" eval --steps "$WORK/types.pt.trace.json" 2>/dev/null | grep -q '^step types TRAIN 2 ' \
  || fail "the good step was lost"

# not a trace at all: one bad file, named
echo '"hello"' > "$WORK/str.pt.trace.json"
"$TW" eval --json "$WORK/str.pt.trace.json" > "$WORK/str.json" 2> "$WORK/str.err" || true
grep -q "str.pt.trace.json:1: malformed trace file: not a JSON array or object" "$WORK/str.err" \
  || { cat "$WORK/str.err"; fail "wrong top-level type not reported"; }
"$PY" -c 'import json,sys; i=json.load(open(sys.argv[1]))["input"]; assert i["bad_files"] == 1, i' \
  "$WORK/str.json" || fail "wrong top-level type not counted"

echo "torch_trace: ok"
