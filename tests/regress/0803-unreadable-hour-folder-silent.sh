#!/usr/bin/env bash
# 0803 - edge-case issue, defect 8 ("no data reported healthy"), part 3.
#
# Defect: an agent's system/incremental/<hour> folder that cannot be read
# (EACCES) was skipped without a word by the folder listing, and with the
# system data gone the Dataloader rule compared the loader count with
# "200 % of 0 cores" and reported a false IssuesFound; the system rules said
# NoIssuesFound over no data.
#
# Asserts (a healthy 1-node job with framework data, its hour folder of
# system files made unreadable): `eval` names the folder with the errno
# text in a WARN, counts it (input.unreadable_dirs = 1 in --json, a "folders
# not read" line in the table); Dataloader is NoIssuesFound in fixed
# semantics (no core count, no comparison); the system rules end NoData
# with "input": "none"; the framework rules still judge their data.
#
# Root ignores permission bits, so as root the reader runs as `nobody`
# (setpriv drops every capability with the uid); skipped (77) only when
# neither that nor an unprivileged user is available.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0803.XXXXXX)
cleanup() {
    chmod -R u+rwx "$WORK" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

AS=()
if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 ||
        { echo "SKIP: running as root without setpriv or user nobody"; exit 77; }
    AS=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
    # the build tree must be readable by nobody
    "${AS[@]}" test -x "$TW" -a -r "$TRAINWATCH_RULES_DIR" ||
        { echo "SKIP: $TW not usable by nobody"; exit 77; }
fi
chmod 755 "$WORK"

"$TW" synth "$WORK/j" --preset healthy --nodes 1 --duration 5m >/dev/null 2>&1 ||
    fail "synth"
HOURS=("$WORK"/j/system/incremental/*)
[ ${#HOURS[@]} -eq 1 ] || fail "expected one hour folder: ${HOURS[*]}"
chmod -R a+rX "$WORK/j"
chmod 000 "${HOURS[0]}"
"${AS[@]}" test -r "${HOURS[0]}" && { echo "SKIP: cannot make a folder unreadable here"; exit 77; }

"${AS[@]}" "$TW" eval "$WORK/j" --json >"$WORK/out.json" 2>"$WORK/err.txt" ||
    fail "eval: $(cat "$WORK/err.txt")"
grep -q "WARN .*${HOURS[0]}: cannot open folder: Permission denied" "$WORK/err.txt" ||
    fail "no WARN naming the folder: $(cat "$WORK/err.txt")"
python3 - "$WORK/out.json" <<'PY' || fail "results: $(head -c 800 "$WORK/out.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["unreadable_dirs"] == 1, d["input"]
assert d["input"]["samples"] == 0 and d["input"]["events"] > 0, d["input"]
r = {x["name"]: x for x in d["rules"]}
assert r["Dataloader"]["status"] == "NoIssuesFound", r["Dataloader"]
assert r["Dataloader"]["input"] == "received", r["Dataloader"]
for name in ("CPUBottleneck", "IOBottleneck", "LowGPUUtilization",
             "GPUMemoryIncrease", "BatchSize", "LoadBalancing",
             "OverallSystemUsage"):
    assert r[name]["status"] == "NoData" and r[name]["input"] == "none", r[name]
assert r["StepOutlier"]["status"] == "NoIssuesFound", r["StepOutlier"]
assert r["ProfilerReport"]["status"] == "NoIssuesFound", r["ProfilerReport"]
PY
"${AS[@]}" "$TW" eval "$WORK/j" >"$WORK/table.txt" 2>/dev/null || fail "eval table"
grep -q '^folders not read: 1 unreadable' "$WORK/table.txt" ||
    fail "table: $(head -3 "$WORK/table.txt")"
echo "PASS 0803: unreadable hour folder named and counted; Dataloader not a false IssuesFound"
