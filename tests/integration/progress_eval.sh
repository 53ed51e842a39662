#!/usr/bin/env bash
# progress_eval.sh BUILD_DIR - Progress and StalledTrainingRule offline
# (`trainwatch eval`, where each scan's end stands in for the wall clock):
# a synth job (healthy preset, 300 s) with a pythontimeline file of two
# ranks' 1 s TRAIN steps; rank 1 stops at 120 s and rank 0 waits for it
# in an `allreduce` section (its file, named at 290 s, makes the job's
# scans run past the hang) -> Progress finds rank 1 behind, rank 0
# waiting, and StalledTrainingRule (threshold 60 s) fires after rank 0's
# last step, 110; the same steps without the gap -> nothing;
# `eval --roundtrip` (save / re-create / restore after every scan) agrees.
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
PY=${TW_PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$WORK/rules.yaml" <<'YAML'
tick: 10s
rules:
  - name: Progress
  - name: StalledTrainingRule
    parameters: {threshold: 60}
YAML

make_job() { # DIR HANG(0/1)
    "$TW" synth "$1" --preset healthy --duration 300 --no-framework 2>/dev/null
    "$PY" - "$1" "$2" <<'PYEOF'
import json, os, sys
out, hang = sys.argv[1], sys.argv[2] == "1"
start = 1700000000 * 10**6
events = []
for rank in (0, 1):
    for n in range(280):
        t = 10 * 10**6 + n * 10**6
        if hang and rank == 1 and n >= 110:
            break
        events.append({"name": "Step:ModeKeys.TRAIN", "pid": rank, "ph": "X",
                       "ts": t, "dur": 900000,
                       "args": {"pid": 100 + rank, "step_num": str(n)}})
        if hang and rank == 0 and n == 110:  # waits for rank 1 from here
            events.append({"name": "Section:allreduce:begin", "pid": rank,
                           "ph": "X", "ts": t + 950000, "dur": 0,
                           "args": {"section": "allreduce"}})
            break
d = os.path.join(out, "framework", "pevents", "2023111422")
os.makedirs(d, exist_ok=True)
for rank in (0, 1):
    mine = [e for e in events if e["pid"] == rank]
    end = start + max(e["ts"] + e["dur"] for e in mine)
    if hang and rank == 0:  # named at the job's end: L (scans run to it)
        end = start + 290 * 10**6
    head = [{"name": "process_name", "ph": "M", "pid": rank,
             "args": {"start_time_since_epoch_in_micros": start}}]
    name = f"{end}_{rank}-algo-1_pythontimeline.json"
    with open(os.path.join(d, name), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e) for e in head + mine) + "\n]")
PYEOF
}

status() { # JSON RULE: "<status> <violations>"
    "$PY" -c '
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"] if x["name"] == sys.argv[2]][0]
print(r["status"], r["violations"])' "$1" "$2"
}

make_job "$WORK/hang" 1
"$TW" eval "$WORK/hang" --rules "$WORK/rules.yaml" --json --quiet > "$WORK/hang.json"
[ "$(status "$WORK/hang.json" Progress)" = "IssuesFound 1" ] ||
    fail "hang: Progress $(status "$WORK/hang.json" Progress)"
"$PY" - "$WORK/hang.json" <<'PYEOF' || fail "hang: details"
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"] if x["name"] == "Progress"][0]
d = r["report"]["Details"]
roles = {k["node"]: k["role"] for k in d["ranks"]}
assert roles == {"algo-1-1": "behind", "algo-1-0": "waiting"}, roles
assert r["finding"]["nodes"]["listed"][0] == "algo-1-1", r["finding"]
print("hang (offline):", r["finding"]["summary"])
PYEOF
[ "$(status "$WORK/hang.json" StalledTrainingRule)" = "IssuesFound 1" ] ||
    fail "hang: StalledTrainingRule $(status "$WORK/hang.json" StalledTrainingRule)"
"$PY" -c '
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"] if x["name"] == "StalledTrainingRule"][0]
assert r["report"]["Details"]["fired_step"] == 110, r["report"]["Details"]' \
    "$WORK/hang.json" || fail "hang: StalledTrainingRule step"

make_job "$WORK/ok" 0
"$TW" eval "$WORK/ok" --rules "$WORK/rules.yaml" --json --quiet > "$WORK/ok.json"
for r in Progress StalledTrainingRule; do
    [ "$(status "$WORK/ok.json" $r)" = "NoIssuesFound 0" ] ||
        fail "healthy: $r $(status "$WORK/ok.json" $r)"
done
for job in hang ok; do
    out=$("$TW" eval "$WORK/$job" --rules "$WORK/rules.yaml" --roundtrip --quiet) ||
        fail "roundtrip $job: $out"
    echo "$out" | grep -q "^roundtrip: ok: 2 rule(s)" || fail "roundtrip $job: $out"
done
echo PASS
