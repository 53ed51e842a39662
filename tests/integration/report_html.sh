#!/usr/bin/env bash
# `trainwatch report`: pages of three generated jobs (healthy, CPU
# bottleneck, straggler among 16 nodes) opened in Debian's headless
# Chromium: every section present, every chart a drawn SVG, no reference
# that leaves the page (the DOM's src/href/url() and a CSP meta tag that
# forbids every fetch, so a request would also show as a CSP console
# error), no console message. A planted bad page proves the check fails.
# Then --results mode from `eval --json` output, and the errors.
# Usage: report_html.sh BUILD_DIR   (skips, 77, without chromium)
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
CHECK="$HERE/../report/report_check.py"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
[ -n "$CHROMIUM" ] || { echo "SKIP: chromium not installed"; exit 77; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Headless Chromium with its console and errors logged to stderr; its
# profile lives in WORK so nothing outside the test is touched.
render() { # PAGE DOM LOG
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --user-data-dir="$WORK/profile" --enable-logging=stderr --v=1 \
    --no-first-run --disable-extensions --disable-background-networking \
    --disable-sync --disable-component-update --virtual-time-budget=2000 \
    --dump-dom "file://$1" > "$2" 2> "$3.all" || fail "chromium on $1: $?"
  # keep the page's own messages: console output and CSP refusals (a
  # blocked request is one); Chromium's own background lookups are not
  grep -E 'CONSOLE|Content Security Policy|Refused to' "$3.all" \
    > "$3" || true
}

"$TW" synth "$WORK/healthy" --preset healthy --nodes 2 --duration 4m --seed 1 \
  --detailed-steps 5 2>/dev/null
"$TW" synth "$WORK/cpu" --preset cpu_bottleneck --nodes 1 --duration 12m --seed 3 2>/dev/null
"$TW" synth "$WORK/straggler" --preset straggler --nodes 16 --duration 6m --seed 2 2>/dev/null

for job in healthy cpu straggler; do
  "$TW" report "$WORK/$job" -o "$WORK/$job.html" || fail "report $job exited $?"
  size=$(stat -c %s "$WORK/$job.html")
  [ "$size" -lt 2000000 ] || fail "$job.html is $size bytes"
  render "$WORK/$job.html" "$WORK/$job.dom" "$WORK/$job.log"
  expect=("Time per training phase" "Training phases" "Step durations on"
          "GPU utilization per" "Utilization histogram" "GPU memory per node"
          "CPU utilization per node" "CPUBottleneck: low-GPU"
          "GPU utilization over time per GPU")
  [ "$job" = healthy ] || expect+=("Finding time ranges")
  [ "$job" != healthy ] || expect+=("CPU operators" "GPU operators")
  out=$(/usr/bin/python3 "$CHECK" "$WORK/$job.dom" "$WORK/$job.log" \
    --expect-chart "${expect[@]}") || fail "$job: $out"
  echo "$job ($size bytes): $out"
done

# What each job's page says: the healthy one has no finding, the others
# name their rule in the summary sorted first and in the findings.
grep -q 'No rule found an issue' "$WORK/healthy.dom" || fail "healthy: findings"
first_rule() { grep -o '<td>[A-Za-z]*</td><td class="IssuesFound"' "$1" | head -1; }
[[ $(first_rule "$WORK/cpu.dom") == *CPUBottleneck* ]] ||
  fail "cpu: first rule $(first_rule "$WORK/cpu.dom")"
# the consequence names its root cause (fixed semantics' caused_by)
grep -q '<li class="cause">Caused by: CPUBottleneck' "$WORK/cpu.dom" ||
  fail "cpu: LowGPUUtilization's cause not shown"
grep -q '<h3>Straggler</h3>' "$WORK/straggler.dom" || fail "straggler: no Straggler finding"
grep -q 'algo-2' "$WORK/straggler.dom" || fail "straggler: algo-2 not named"
# the operator tables: OverallFrameworkMetrics' CPU/GPU shares, largest first
"$TW" eval "$WORK/healthy" --json > "$WORK/healthy.json" 2>/dev/null
/usr/bin/python3 - "$WORK/healthy.dom" "$WORK/healthy.json" <<'PY' || fail "healthy: operator tables"
import json, re, sys
dom = open(sys.argv[1]).read()
rules = json.load(open(sys.argv[2]))["rules"]
det = next(r for r in rules if r["name"] == "OverallFrameworkMetrics")["report"]["Details"]
for kind in ("CPU", "GPU"):
    table = re.search(r"<h3>%s operators</h3>\s*<table>(.*?)</table>" % kind, dom, re.S).group(1)
    rows = re.findall(r'<tr><td class="n">([^<]*)</td><td class="n">([^<]*)</td><td>([^<]*)</td></tr>', table)
    assert len(rows) == len(det[kind]) > 0, (kind, rows, det[kind])
    shares = [float(r[0]) for r in rows]
    assert shares == sorted(shares, reverse=True), shares
    for share, total, name in rows:
        assert abs(float(share) - det[kind][name]) < 1e-3, (name, share)
        assert abs(float(total) - det[kind + "_total"][name]) <= 1, (name, total)
print("operator tables: %d CPU, %d GPU rows as the rule's details" % (len(det["CPU"]), len(det["GPU"])))
PY
# the heat map: one row per node's GPU, and the straggler's row the palest
/usr/bin/python3 - "$WORK/straggler.dom" <<'PY' || fail "straggler: heat map"
import re, sys
dom = open(sys.argv[1]).read()
svg = re.search(r'aria-label="GPU utilization over time per GPU".*?</svg>', dom, re.S).group(0)
rows = re.findall(r'<text x="2" y="(\d+)" font-size="10">([^<]*)</text>', svg)
assert len(rows) == 16, rows
# darkness of a row: mean over its cells of (255 - red) weighted by width
dark = {}
for y, label in rows:
    cells = re.findall(r'<rect x="[\d.]+" y="%d" width="([\d.]+)" height="12" fill="#([0-9a-f]{2})' % (int(y) - 10), svg)
    w = sum(float(a) for a, _ in cells)
    dark[label] = sum(float(a) * (255 - int(r, 16)) for a, r in cells) / w
palest = min(dark, key=dark.get)
assert palest.startswith("algo-2/"), (palest, sorted(dark.items(), key=lambda kv: kv[1])[:3])
print("heat map: 16 rows, palest", palest)
PY
nodes=$(grep -c '<tr><td>GPU</td><td>algo-' "$WORK/straggler.dom" || true)
[ "$nodes" -eq 16 ] || fail "straggler: $nodes GPU rows, expected 16"

# The check itself fails on a page that fetches, logs or lacks a chart.
sed -e 's|</body>|<img src="http://192.0.2.1/x.png"><script>console.log("x")</script></body>|' \
    -e 's|<section id="gpu-memory">|<section id="gpu-mem">|' \
    -e '0,/<path [^>]*>/s|<path [^>]*>||' "$WORK/healthy.html" > "$WORK/bad.html"
render "$WORK/bad.html" "$WORK/bad.dom" "$WORK/bad.log"
if bad=$(/usr/bin/python3 "$CHECK" "$WORK/bad.dom" "$WORK/bad.log"); then
  fail "planted problems not found"
fi
for want in "section gpu-memory missing" "external reference img src=http" "chromium:"; do
  [[ $bad == *"$want"* ]] || fail "planted page: '$want' not reported: $bad"
done

# --results: the page from a results file, next to it unless -o.
"$TW" eval "$WORK/cpu" --json --quiet > "$WORK/cpu-results.json"
"$TW" report --results "$WORK/cpu-results.json" || fail "--results exited $?"
[ -s "$WORK/cpu-results.html" ] || fail "--results wrote no cpu-results.html"
render "$WORK/cpu-results.html" "$WORK/r.dom" "$WORK/r.log"
out=$(/usr/bin/python3 "$CHECK" "$WORK/r.dom" "$WORK/r.log") || fail "--results: $out"
grep -q 'need the folder' "$WORK/r.dom" || fail "--results: no note on what is missing"
# a merged timeline next to the page is linked by its relative name
"$TW" timeline "$WORK/cpu" -o "$WORK/cpu.timeline.json" --framework-only 2>/dev/null
"$TW" report "$WORK/cpu" -o "$WORK/cpu.html"
grep -q 'href="cpu.timeline.json"' "$WORK/cpu.html" || fail "timeline link absent"

# errors: bad usage 2, unreadable input 1
set +e
"$TW" report "$WORK/cpu" >/dev/null 2>&1; [ $? -eq 2 ] || fail "no -o: not 2"
"$TW" report >/dev/null 2>&1; [ $? -eq 2 ] || fail "no operand: not 2"
"$TW" report "$WORK/none" -o "$WORK/x.html" 2>/dev/null; [ $? -eq 1 ] || fail "no folder: not 1"
echo '{"job":"x"}' > "$WORK/bad.json"
"$TW" report --results "$WORK/bad.json" 2>"$WORK/err"; [ $? -eq 1 ] || fail "bad results: not 1"
grep -q 'rules' "$WORK/err" || fail "bad results: message: $(cat "$WORK/err")"
set -e
echo "PASS report_html"
