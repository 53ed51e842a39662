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
#      pstats.Stats(all files, in start order).print_stats(15);
#  (3) `pystats --job pystats` over the same run's PythonProfile tables on
#      the broker's metrics topic: for every query above (and each sort
#      key and grouping) the text output equals, byte for byte, what
#      `pystats DIR` prints for the run's legacy folder, and the JSON's
#      numbers are equal (== ) but for the "path" of each interval; the
#      brokers and topic may come from --config's kafka: section; another
#      job's profiles on the topic are left out (and read alone with
#      their own --job); bad messages keyed with the job (not a
#      FlatBuffer, a NaN time, an unknown phase, another Batch.job) are
#      each named with partition and offset, counted, skipped, and change
#      no number; an unknown job id and an unreachable broker give a clear
#      error (exit 1), the latter within the --timeout.
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

# ---- (3) --job: the same run's PythonProfile tables on the topic -----------
JOB=("$TW" pystats --job pystats --brokers "$BOOTSTRAP")
TIME_OPTS=(--time "$T")
i=0
for q in "--list --top 0" "--sort cumtime --top 15" \
    "--sort pcalls --by training_phase --top 0" \
    "--sort ncalls --by job_phase --top 0 --list" \
    "--by-step 1:1 --mode TRAIN --list" "--mode EVAL --by-step 0:2 --list" \
    "--by-step 0:1 --start-phase FORWARD_PASS_END --end-phase STEP_END --list" \
    "--between-modes EVAL:EVAL --list" "--before-step0 --list" \
    "--after-close --list" "--node 0-nosuchnode --list" \
    "${TIME_OPTS[*]} --list"; do
    i=$((i + 1))
    # shellcheck disable=SC2086
    "$TW" pystats "$D" $q >"$WORK/dir.$i" || fail "pystats DIR $q"
    # shellcheck disable=SC2086
    "${JOB[@]}" $q >"$WORK/job.$i" 2>"$WORK/job.$i.err" ||
        fail "pystats --job $q: $(cat "$WORK/job.$i.err")"
    diff "$WORK/dir.$i" "$WORK/job.$i" >&2 ||
        fail "pystats --job $q differs from pystats DIR"
done
# and so the top 15 by cumulative time equal pstats' over the same files
sed -n '/^   ncalls/,$p' "$WORK/job.2" | sed '1d;/^$/d' | diff "$WORK/p.folder" - >&2 ||
    fail "--job: top 15 by cumtime differ from pstats over the folder's files"
grep -q "0-nosuchnode" "$WORK/dir.11" && fail "a node filter listed no interval"
[ "$(grep -c '^  0-' "$WORK/dir.1")" -eq 13 ] || fail "--job: not 13 intervals"
echo "--job: text output equals pystats DIR for $i queries"
"${JOB[@]}" --json --list --top 0 --by training_phase >"$WORK/job.json" ||
    fail "pystats --job --json"
"$TW" pystats "$D" --json --list --top 0 --by training_phase >"$WORK/dir.json" ||
    fail "pystats DIR --json"
"$PY" - "$WORK/dir.json" "$WORK/job.json" <<'PYEOF' || fail "--job JSON"
import json, re, sys
d, j = (json.load(open(f)) for f in sys.argv[1:])
for i in j["intervals"]:
    assert re.fullmatch(r"trainwatch\.metrics:\d+@\d+\[\d+\]", i["path"]), i
for doc in (d, j):
    for i in doc["intervals"]:
        del i["path"]
assert d == j, "JSON differs"
n = sum(len(g["top"]) for g in j["groups"])
print("--job: JSON equal (%d intervals, %d function rows)" % (
    len(j["intervals"]), n))
PYEOF
# brokers and topic from the configuration run reads
printf 'kafka:\n  brokers: %s\n  metrics_topic: trainwatch.metrics\n' \
    "$BOOTSTRAP" >"$WORK/tw.yaml"
"$TW" pystats --job pystats --config "$WORK/tw.yaml" --list --top 0 \
    >"$WORK/cfg.txt" || fail "pystats --job --config"
cmp "$WORK/cfg.txt" "$WORK/job.1" || fail "--config: output differs"
# an unknown job: a clear error naming the topic and what was read
"$TW" pystats --job no-such-job --brokers "$BOOTSTRAP" >"$WORK/none.out" 2>"$WORK/none.err" &&
    fail "an unknown job succeeded"
grep -q "job 'no-such-job' has no Python profiles on topic 'trainwatch.metrics' (brokers $BOOTSTRAP): [0-9]* partitions read, [1-9][0-9]* messages seen" \
    "$WORK/none.err" || fail "unknown job: $(cat "$WORK/none.err")"
[ -s "$WORK/none.out" ] && fail "unknown job: printed a result"
# another job's profile, and bad messages keyed with this job
"$PY" - "$BOOTSTRAP" <<'PYEOF' || fail "producing the other job and bad messages"
import sys
from confluent_kafka import Producer
from trainwatch.wire_batch import encode_batch
def prof(**kw):
    p = {"profiler": "cprofile", "timer": "total_time", "mode": "TRAIN",
         "start_step": 5, "end_step": 5, "start_phase": "STEP_START",
         "end_phase": "STEP_END", "start_us": 1700000000000000,
         "end_us": 1700000000001000, "pid": 1, "functions_cut": 0,
         "functions": [{"function": "f", "file": "x.py", "line": 3,
                        "primitive_calls": 2, "total_calls": 2,
                        "total_time": 0.25, "cumulative_time": 0.5,
                        "callers": []}]}
    p.update(kw)
    return p
pr = Producer({"bootstrap.servers": sys.argv[1]})
send = lambda key, v: pr.produce("trainwatch.metrics", key=key, value=v)
send("other-job", encode_batch("other-job", "0-h", 1, profiles=[prof()]))
send("pystats", b"not a flatbuffer at all")
bad_fn = prof()["functions"][0] | {"total_time": float("nan")}
send("pystats", encode_batch("pystats", "0-h", 1,
                             profiles=[prof(functions=[bad_fn])]))
send("pystats", encode_batch("pystats", "0-h", 2,
                             profiles=[prof(start_phase="MIDDLE")]))
send("pystats", encode_batch("other-job", "0-h", 2, profiles=[prof()]))
assert pr.flush(10) == 0
PYEOF
"${JOB[@]}" --json --list --top 0 --by training_phase >"$WORK/bad.job.json" \
    2>"$WORK/bad.job.err" || fail "--job with bad messages failed"
for why in "bad_identifier\|too_short" "bad_value: python_profiles\[0\].functions\[0\] 'f': total_time nan" \
    "phases 'MIDDLE'-'STEP_END' are not" "key 'pystats' but Batch.job 'other-job'"; do
    grep -q "topic 'trainwatch.metrics' partition [0-9]* offset [0-9]*: skipped: .*\($why\)" \
        "$WORK/bad.job.err" || fail "no message for '$why': $(cat "$WORK/bad.job.err")"
done
"$PY" - "$WORK/job.json" "$WORK/bad.job.json" <<'PYEOF' || fail "bad messages changed the numbers"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert b["skipped"] == 4, b["skipped"]
assert a["groups"] == b["groups"] and len(a["intervals"]) == len(b["intervals"])
PYEOF
"$TW" pystats --job other-job --brokers "$BOOTSTRAP" --json --top 0 \
    >"$WORK/other.json" || fail "--job other-job"
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["intervals"]) == 1 and d["intervals"][0]["node"] == "0-h", d
f = d["groups"][0]["top"]
assert [(x["function"], x["total_calls"], x["total_time"]) for x in f] == [
    ("f", 2, 0.25)], f' "$WORK/other.json" || fail "--job other-job: wrong"
echo "--job: bad messages named and skipped, other jobs left out"
tw_broker_stop >/dev/null 2>&1
BROKER_PID=
# an unreachable broker: a clear error within the timeout
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$(date +%s)
"$TW" pystats --job pystats --brokers "127.0.0.1:$PORT" --timeout 1s \
    >/dev/null 2>"$WORK/down.err" && fail "an unreachable broker succeeded"
[ $(($(date +%s) - t0)) -le 10 ] || fail "unreachable broker: not time-bounded"
grep -q "brokers 127.0.0.1:$PORT unreachable or silent: no metadata for topic 'trainwatch.metrics' within 1000 ms" \
    "$WORK/down.err" || fail "unreachable broker: $(cat "$WORK/down.err")"
echo "--job: unknown job and unreachable broker give clear errors"
echo "PASS"
