#!/usr/bin/env bash
# 0804 - edge-case issue, defect 8 ("no data reported healthy"), part 4.
#
# Defect: the folder listing never followed a symbolic link to a folder, so
# an agent hour folder kept on another disk and linked into
# system/incremental/ (or a linked framework/ folder) was left out without
# a word: its data was missing from `eval` and `replay`.
#
# Asserts: with the hour folder of system files and the framework folder
# both symbolic links, `eval --json` gives byte-identical rule results to the
# plain folder (same files, samples, events); a symbolic link loop
# (incremental/loop -> ..) and a second link to the same hour folder end,
# are named in a WARN ("symbolic link loop", "same folder as") and counted
# (input.skipped_dirs = 2), and nothing is read twice (the results stay
# identical).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0804.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$TW" synth "$WORK/plain" --preset cpu_bottleneck --nodes 1 --duration 4m \
    >/dev/null 2>&1 || fail "synth"
# results without the run time ("seconds") and the folder name
rules_of() {
    python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({"input": {k: v for k, v in d["input"].items() if k != "seconds"},
                  "rules": d["rules"], "scans": d["scans"]}, sort_keys=True))' "$1"
}
"$TW" eval "$WORK/plain" --json --job j --quiet >"$WORK/plain.json" || fail "eval plain"

# The same job with its hour folder and its framework folder elsewhere.
mkdir -p "$WORK/linked/system/incremental" "$WORK/disk2"
cp -a "$WORK/plain/system/training_job_end.ts" "$WORK/linked/system/" 2>/dev/null
HOUR=$(basename "$WORK"/plain/system/incremental/*)
cp -a "$WORK/plain/system/incremental/$HOUR" "$WORK/disk2/$HOUR"
cp -a "$WORK/plain/framework" "$WORK/disk2/framework"
ln -s "$WORK/disk2/$HOUR" "$WORK/linked/system/incremental/$HOUR"
ln -s ../disk2/framework "$WORK/linked/framework"
timeout 60 "$TW" eval "$WORK/linked" --json --job j >"$WORK/linked.json" \
    2>"$WORK/linked.err" || fail "eval linked: $(cat "$WORK/linked.err")"
[ "$(rules_of "$WORK/plain.json")" = "$(rules_of "$WORK/linked.json")" ] ||
    fail "linked folders give other results: $(head -c 400 "$WORK/linked.json")"

# A loop and a second link to the same folder: both end and are reported.
ln -s .. "$WORK/linked/system/incremental/loop"
ln -s "$WORK/disk2/$HOUR" "$WORK/linked/system/incremental/zz-again"
timeout 60 "$TW" eval "$WORK/linked" --json --job j >"$WORK/loop.json" \
    2>"$WORK/loop.err" || fail "eval with a loop (exit $?): $(tail -3 "$WORK/loop.err")"
grep -q "WARN .*incremental/loop: symbolic link loop" "$WORK/loop.err" ||
    fail "loop not reported: $(cat "$WORK/loop.err")"
grep -q "WARN .*incremental/zz-again: same folder as" "$WORK/loop.err" ||
    fail "second link not reported: $(cat "$WORK/loop.err")"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["skipped_dirs"] == 2 and d["input"]["unreadable_dirs"] == 0, d["input"]
' "$WORK/loop.json" || fail "counters: $(head -c 400 "$WORK/loop.json")"
python3 - "$WORK/plain.json" "$WORK/loop.json" <<'PY' || fail "a loop changed the results"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["rules"] == b["rules"] and a["input"]["samples"] == b["input"]["samples"]
PY
echo "PASS 0804: symbolic links to folders followed; loop and repeat named, counted, read once"
