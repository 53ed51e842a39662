#!/usr/bin/env bash
# step_outlier_real.sh BUILD_DIR - StepOutlier in fixed semantics on the
# step durations of a real PyTorch run (1000 TRAIN steps of the hook tests'
# MLP with a 2-worker DataLoader, recorded once by
# tests/fixtures/real_steps/record.py into steps.csv; its mean + 3 std cut-off
# lies at ~1.65x the mean and its first step takes ~5x the median):
#  (a) the healthy run, recorded run played three times back to back (3000
#      steps: a longer job of the same shape): fixed raises nothing, while
#      the same rule with min_factor 1 and min_outlier_fraction 0 (the
#      cut-off and count before this fix, = reference) fires: over the
#      whole history more than n_outliers (10) steps pass mean + 3 std;
#  (b) the same run with every 15th step made 6x longer: fixed fires, on
#      algo-1 (node id algo-1-0), its outliers planted steps only.
# The steps go into a pythontimeline file of a synth healthy job's folder
# (its system files give the job's span; tick 5 s so the ~22 s of steps
# span several scans; 3000 steps ~66 s).
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
CSV="$HERE/../fixtures/real_steps/steps.csv"
PY=${TW_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$WORK/rules.yaml" <<'YAML'
tick: 5s
rules:
  - name: StepOutlier
YAML

# make_job DIR SLOW_EVERY REPEAT: a folder with the recorded steps played
# REPEAT times (every SLOW_EVERY-th step 6x longer when > 0; later steps
# shift accordingly)
make_job() {
    "$TW" synth "$1" --preset healthy --duration 150 --no-framework \
        2>/dev/null
    "$PY" - "$1" "$2" "$3" "$CSV" <<'PYEOF'
import json, os, sys
out, every, repeat, csv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    sys.argv[4]
rows = [line.strip().split(",") for line in open(csv)] * repeat
start = 1700000000 * 10**6 + 5 * 10**6     # 5 s into the synth job
events, t = [], 5 * 10**6                  # ts: from the hook's start
for num, (_, _, dur) in enumerate(rows):
    dur = int(dur)
    if every and num % every == every - 1:
        dur *= 6
    events.append({"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X",
                   "ts": t, "dur": dur,
                   "args": {"pid": 4242, "step_num": str(num)}})
    t += dur
d = os.path.join(out, "framework", "pevents", "2023111422")
os.makedirs(d, exist_ok=True)
head = [{"name": "process_name", "ph": "M", "pid": 0,
         "args": {"start_time_since_epoch_in_micros": start - 5 * 10**6}},
        {"name": "process_name", "ph": "M", "pid": 1,
         "args": {"name": "Step:ModeKeys.TRAIN"}}]
with open(os.path.join(d, f"{start + t}_0-algo-1_pythontimeline.json"),
          "w") as f:
    f.write("[\n" + ",\n".join(json.dumps(e) for e in head + events) + "\n]")
PYEOF
}

# so_status JSON: "<status> <violations> <finding nodes>" of StepOutlier
so_status() {
    "$PY" -c '
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"]
     if x["name"] == "StepOutlier"][0]
f = r.get("finding") or {}
nodes = (f.get("nodes") or {}).get("listed", [])
print(r["status"], r["violations"], ",".join(nodes) or "-")
' "$1"
}

[ "$(wc -l < "$CSV")" -eq 1000 ] || fail "fixture: expected 1000 steps"

make_job "$WORK/healthy" 0 3
"$TW" eval "$WORK/healthy" --rules "$WORK/rules.yaml" --json --quiet \
    > "$WORK/healthy.json"
got=$(so_status "$WORK/healthy.json")
echo "healthy real run (3 x 1000 steps), fixed: $got"
case "$got" in "NoIssuesFound 0 -") ;; *) fail "healthy: $got" ;; esac
cat > "$WORK/before.yaml" <<'YAML'
tick: 5s
rules:
  - name: StepOutlier
    parameters: {min_factor: 1, min_outlier_fraction: 0}
YAML
"$TW" eval "$WORK/healthy" --rules "$WORK/before.yaml" --json --quiet \
    > "$WORK/before.json"
got=$(so_status "$WORK/before.json")
echo "the same, without this fix's cut-off and fraction: $got"
case "$got" in IssuesFound\ *) ;; *) fail "before: $got (test cannot fail)" ;; esac

make_job "$WORK/slow" 15 1
"$TW" eval "$WORK/slow" --rules "$WORK/rules.yaml" --json --quiet \
    > "$WORK/slow.json"
got=$(so_status "$WORK/slow.json")
echo "every 15th step 6x, fixed: $got"
case "$got" in IssuesFound\ *\ algo-1-0) ;; *) fail "slow: $got" ;; esac
# the outliers are planted steps (14, 29, ...) only, most of the 66 (a slow
# step whose base was quick can stay under mean + 3 std: the slow steps
# themselves raise std)
"$PY" -c '
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"]
     if x["name"] == "StepOutlier"][0]
d = r["report"]["Details"]["step_details"]
steps = sorted(int(s) for v in d.values() for s in v["step_numbers"])
want = [n for n in range(1000) if n % 15 == 14]
assert set(steps) <= set(want), sorted(set(steps) - set(want))
assert len(steps) >= 50, (len(steps), len(want))
print("outliers:", len(steps), "of the", len(want), "planted steps, no other")
' "$WORK/slow.json" || fail "slow: the outliers are not the planted steps"
echo "ok"
