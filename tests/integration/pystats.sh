#!/usr/bin/env bash
# pystats.sh BUILD_DIR - `trainwatch pystats` against Python's own pstats:
#  (1) a pstats file written by cProfile in the test (recursion, so some
#      functions have total != primitive calls; built-ins): for each sort
#      key (tottime, cumtime, pcalls, ncalls) the top-12 rows equal, line
#      for line, those pstats.Stats.print_stats prints; the JSON's calls
#      and times equal the pstats dict's exactly;
#  (2) the legacy folder the hook writes around real PyTorch steps
#      (tests/integration/hook/train.py through `trainwatch broker`, Python
#      profiling on steps 0-2 of TRAIN and of EVAL): the interval list
#      (with each interval's mode) equals the folder's python_stats
#      folders; --mode EVAL --by-step 0:2 and --between-modes EVAL:EVAL the
#      six EVAL intervals; the forward intervals hold torch's module call;
#      --before-step0 selects the one START interval, --by-step 1:1 the two
#      of step 1, --time the START interval's span that one, --by job_phase
#      splits initialization / training_loop; a bad interval name and a
#      file that is no marshal data are reported, counted and skipped; and
#      the folder's top-15 by cumulative time equal
#      pstats.Stats(all files, in start order).print_stats(15).
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/tw-pystats.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
cleanup() {
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# pstats' rows (after the header line) of print_stats(N) with sort key K
pstats_rows() { # K N FILES...
    "$PY" - "$@" <<'PYEOF'
import io, pstats, sys
key, n, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
out = io.StringIO()
st = pstats.Stats(*files, stream=out)
st.sort_stats(key).print_stats(n)
lines = out.getvalue().splitlines()
i = next(i for i, l in enumerate(lines) if l.lstrip().startswith("ncalls"))
print("\n".join(l for l in lines[i + 1:] if l.strip()))
PYEOF
}
tw_rows() { # SORT N PATH [ARGS...]
    local sort=$1 n=$2 path=$3
    shift 3
    "$TW" pystats "$path" --sort "$sort" --top "$n" "$@" |
        sed -n '/^   ncalls/,$p' | sed '1d;/^$/d'
}

# ---- (1) a cProfile file written here --------------------------------------
"$PY" - "$WORK/own.prof" <<'PYEOF' || fail "writing the cProfile file"
import cProfile, sys
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)
def work():
    s = 0
    for i in range(2000):
        s += len(str(i)) + abs(-i)
    return sorted(range(500), key=lambda x: -x)[0] + s + fib(18)
p = cProfile.Profile()
p.enable()
work()
[fib(12) for _ in range(3)]
p.disable()
p.dump_stats(sys.argv[1])
PYEOF
for pair in tottime:tottime cumtime:cumulative pcalls:pcalls ncalls:calls; do
    ours=${pair%%:*} theirs=${pair#*:}
    pstats_rows "$theirs" 12 "$WORK/own.prof" >"$WORK/p.$ours" ||
        fail "pstats on own.prof"
    tw_rows "$ours" 12 "$WORK/own.prof" >"$WORK/t.$ours" ||
        fail "trainwatch pystats on own.prof"
    [ "$(wc -l <"$WORK/p.$ours")" -ge 8 ] || fail "pstats printed too few rows"
    grep -q '/' "$WORK/p.$ours" || [ "$ours" != ncalls ] ||
        fail "no recursive function (nc/cc) in pstats' rows"
    diff "$WORK/p.$ours" "$WORK/t.$ours" >&2 ||
        fail "own.prof --sort $ours: rows differ from pstats"
done
"$TW" pystats "$WORK/own.prof" --top 0 --json >"$WORK/own.json" ||
    fail "pystats --json"
"$PY" - "$WORK/own.prof" "$WORK/own.json" <<'PYEOF' || fail "own.prof JSON"
import json, marshal, sys
stats = marshal.load(open(sys.argv[1], "rb"))
doc = json.load(open(sys.argv[2]))
top = doc["groups"][0]["top"]
assert len(top) == len(stats), (len(top), len(stats))
for f in top:
    cc, nc, tt, ct, _ = stats[(f["file"], f["line"], f["function"])]
    got = (f["primitive_calls"], f["total_calls"], f["total_time"],
           f["cumulative_time"])
    assert got == (cc, nc, tt, ct), (f, (cc, nc, tt, ct))
print("own.prof: %d functions equal" % len(top))
PYEOF
echo "own.prof: rows equal pstats for tottime, cumtime, pcalls, ncalls"

# ---- (2) the hook's legacy folder around real PyTorch steps ----------------
"$PY" -c 'import torch, confluent_kafka, flatbuffers' 2>/dev/null || {
    echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"
    exit 77
}
export PYTHONPATH=$BUILD/hooks/python
tw_broker_start || fail "broker start"
D=$WORK/job
"$PY" "$HERE/hook/train.py" --job pystats --brokers "$BOOTSTRAP" \
    --workers 0 --epochs 1 --batches 8 --eval-batches 4 --profiler-output "$D" \
    --profiler-config '{"framework_profile_params": {"python_profiling_config": {"start_step": 0, "num_steps": 3}}}' \
    >"$WORK/train.out" 2>"$WORK/train.err" ||
    fail "training: $(tail -n 5 "$WORK/train.err")"
tw_broker_stop >/dev/null 2>&1
BROKER_PID=
ls "$D"/framework/pytorch/cprofile/*/*/python_stats >/dev/null 2>&1 ||
    fail "no python_stats written: $(find "$D" | head)"
"$TW" pystats "$D" --list --json --top 5 >"$WORK/all.json" ||
    fail "pystats on the folder"
"$TW" pystats "$D" --json --before-step0 >"$WORK/init.json" || fail "--before-step0"
"$TW" pystats "$D" --json --by-step 1:1 --mode TRAIN >"$WORK/step1.json" || fail "--by-step"
"$TW" pystats "$D" --json --by-step 0:2 --mode EVAL >"$WORK/eval.json" || fail "--mode EVAL"
"$TW" pystats "$D" --json --between-modes EVAL:EVAL >"$WORK/between.json" || fail "--between-modes"
"$TW" pystats "$D" --json --by job_phase >"$WORK/job.json" || fail "--by job_phase"
"$TW" pystats "$D" --json --by training_phase --sort cumtime --top 30 \
    >"$WORK/phase.json" || fail "--by training_phase"
"$PY" - "$D" "$WORK" <<'PYEOF' || fail "the hook's folder"
import glob, json, os, sys
d, w = sys.argv[1], sys.argv[2]
load = lambda n: json.load(open(os.path.join(w, n)))
files = glob.glob(d + "/framework/pytorch/cprofile/*/*/python_stats")
names = sorted((f.split("/")[-3], f.split("/")[-2]) for f in files)
iv = load("all.json")["intervals"]
listed = sorted((i["node"], "%d_%s-%d_%d_%s-%d" % (
    i["start_us"], i["start_phase"], i["start_step"], i["end_us"],
    i["end_phase"], i["end_step"])) for i in iv)
assert listed == names, (listed, names)
assert all(i["node"].startswith("0-") and i["functions"] > 0 for i in iv), iv
# START->STEP_START-0 (TRAIN), then per step of each mode
# STEP_START->FORWARD_PASS_END and FORWARD_PASS_END->STEP_END, steps 0..2
want = {("TRAIN", "START", 0, "STEP_START", 0)}
for m in ("TRAIN", "EVAL"):
    for s in range(3):
        want |= {(m, "STEP_START", s, "FORWARD_PASS_END", s),
                 (m, "FORWARD_PASS_END", s, "STEP_END", s)}
got = {(i["mode"], i["start_phase"], i["start_step"], i["end_phase"],
        i["end_step"]) for i in iv}
assert want == got, (want ^ got)
ev = load("eval.json")["intervals"]
assert len(ev) == 6 and all(i["mode"] == "EVAL" for i in ev), ev
bw = load("between.json")["intervals"]
assert bw == ev, (bw, ev)  # EVAL comes after TRAIN: the same six
init = load("init.json")["intervals"]
assert [(i["start_phase"], i["end_step"]) for i in init] == [("START", 0)], init
s1 = load("step1.json")["intervals"]
assert sorted((i["start_phase"], i["end_phase"]) for i in s1) == [
    ("FORWARD_PASS_END", "STEP_END"), ("STEP_START", "FORWARD_PASS_END")], s1
groups = {g["name"]: g["intervals"] for g in load("job.json")["groups"]}
assert groups.get("initialization") == 1, groups
assert groups.get("training_loop") == len(iv) - 1, groups
ph = {g["name"]: g for g in load("phase.json")["groups"]}
fwd = ph["STEP_START-FORWARD_PASS_END"]
assert fwd["intervals"] == 6, fwd["intervals"]
assert any(f["function"] == "_call_impl" and f["file"].endswith(
    "torch/nn/modules/module.py") for f in fwd["top"]), \
    [f["function"] for f in fwd["top"]]
print("folder: %d intervals, groups %s" % (len(iv), sorted(ph)))
PYEOF
# --time: the START interval's own span selects it alone
T=$("$PY" -c '
import json, sys
i = json.load(open(sys.argv[1]))["intervals"][0]
print("%.6f:%.6f" % (i["start_us"] / 1e6, i["end_us"] / 1e6))' "$WORK/init.json")
"$TW" pystats "$D" --json --time "$T" >"$WORK/time.json" || fail "--time"
"$PY" -c '
import json, sys
a, b = (json.load(open(f))["intervals"] for f in sys.argv[1:])
assert a == b, (a, b)' "$WORK/time.json" "$WORK/init.json" || fail "--time $T"
# bad input in a folder: a name that is no interval, a file that is no
# marshal data: both reported, counted, skipped; the rest still read
cp -r "$D" "$WORK/bad"
N=$(ls -d "$WORK"/bad/framework/pytorch/cprofile/*)
mkdir "$N/not-an-interval"
: >"$N/not-an-interval/python_stats"
LAST=$(ls -d "$N"/*_STEP_END-2 | head -n 1)
printf 'QQQ' >"$LAST/python_stats"
"$TW" pystats "$WORK/bad" --json >"$WORK/bad.json" 2>"$WORK/bad.err" ||
    fail "pystats on a folder with bad input failed"
grep -q "not-an-interval.*skipped" "$WORK/bad.err" || fail "no message for the bad name"
grep -q "STEP_END-2/python_stats: skipped: byte 0: type code" "$WORK/bad.err" ||
    fail "no message for the bad file: $(cat "$WORK/bad.err")"
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["skipped"] == 2, d["skipped"]
assert d["groups"][0]["intervals"] == len(d["intervals"]) - 1, d["groups"]' \
    "$WORK/bad.json" || fail "bad input not counted"
FILES=$("$PY" -c '
import json, sys
print("\n".join(i["path"] for i in json.load(open(sys.argv[1]))["intervals"]))' \
    "$WORK/all.json")
# shellcheck disable=SC2086
pstats_rows cumulative 15 $FILES >"$WORK/p.folder" || fail "pstats on the folder"
tw_rows cumtime 15 "$D" >"$WORK/t.folder" || fail "pystats top on the folder"
[ "$(wc -l <"$WORK/p.folder")" -eq 15 ] || fail "pstats printed no 15 rows"
diff "$WORK/p.folder" "$WORK/t.folder" >&2 ||
    fail "folder: top 15 by cumtime differ from pstats over the same files"
echo "folder: top 15 by cumulative time equal pstats over $(echo "$FILES" | wc -l) files"
echo "PASS"
