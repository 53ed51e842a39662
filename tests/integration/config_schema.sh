#!/usr/bin/env bash
# The configuration schema (engine/eval/config_schema.c) against what users
# read and run: `config --sample` loads back with run's and eval's
# parsers; every key of the sample, of deploy/trainwatch.yaml (live and
# commented) and of the README's "State" example is in the schema; the
# README's "Configuration keys" table is `config --markdown` exactly (so
# every schema key is documented, and nothing else); misspelt keys in each
# section are refused with FILE:LINE and the closest key; one duration
# grammar (7d) in every section. Usage: config_schema.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TW" config --describe > "$WORK/describe.txt"
for title in "Top level" "rules: each entry" "kafka:" "engine:" "state:" \
             "rules[].actions: each entry"; do
  grep -qF "$title" "$WORK/describe.txt" || fail "--describe lacks $title"
done
"$TW" config --markdown > "$WORK/keys.md"
# every key's last name ("redis.port" -> port, "properties.*" -> properties)
sed -n 's/^| `\([^`]*\)`.*/\1/p' "$WORK/keys.md" > "$WORK/keys.txt"
[ "$(wc -l < "$WORK/keys.txt")" -gt 60 ] || fail "schema too small: $(cat "$WORK/keys.txt")"

# 1. The sample loads back with run's parser (all sections, --check) and
# eval's (top level and rules), and names every key of the schema.
"$TW" config --sample > "$WORK/sample.yaml"
"$TW" run --check --config "$WORK/sample.yaml" --brokers 127.0.0.1:1 \
  > "$WORK/check.out" 2>&1 || fail "run --check refused the sample: $(cat "$WORK/check.out")"
"$TW" eval "$SRC/tests/fixtures/agent/job" --rules "$WORK/sample.yaml" \
  > /dev/null 2> "$WORK/eval.err" || fail "eval refused the sample: $(cat "$WORK/eval.err")"
python3 - "$WORK/keys.txt" "$WORK/sample.yaml" <<'PY' || fail "sample incomplete"
import re, sys
keys = [k.strip() for k in open(sys.argv[1])]
text = open(sys.argv[2]).read()
names = set(re.findall(r"^[ #-]*([a-z_]+):", text, re.M))
missing = [k for k in keys
           if re.split(r"\[\]\.|\.", k.replace(".*", ""))[-1] not in names]
assert not missing, "keys missing from --sample: %s" % missing
PY

# 2. deploy/trainwatch.yaml: valid for run, and its commented keys exist.
"$TW" run --check --config "$SRC/deploy/trainwatch.yaml" > "$WORK/deploy.out" 2>&1 ||
  fail "deploy/trainwatch.yaml: $(cat "$WORK/deploy.out")"
python3 - "$WORK/keys.txt" "$SRC/deploy/trainwatch.yaml" "$SRC/README.md" <<'PY' || fail "unknown documented keys"
import re, sys
keys = [k.strip() for k in open(sys.argv[1])]
names = set()
for k in keys:
    parts = re.split(r"\[\]\.|\.", k.replace(".*", ""))
    names.update(parts)
bad = []
# Commented keys of the sample configuration, indented inside their
# section ("    #   region: us-east-1"; prose comments start at column 0);
# dotted ones are librdkafka properties, passed through unchanged.
for n, line in enumerate(open(sys.argv[2]), 1):
    m = re.match(r"\s+#\s+(?:-\s+)?([a-z_][a-z0-9_.]*):(\s|$)", line)
    if m and "." not in m.group(1) and m.group(1) not in names:
        bad.append("deploy/trainwatch.yaml:%d: %s" % (n, m.group(1)))
# The README's "State" example block.
readme = open(sys.argv[3]).read()
block = readme.split("## State", 1)[1].split("\n\n", 2)[1]
for line in block.splitlines():
    m = re.match(r"\s+([a-z_]+):", line)
    if m and m.group(1) not in names:
        bad.append("README State example: %s" % m.group(1))
assert not bad, bad
PY

# 3. The README's table is the schema's, both ways.
python3 - "$WORK/keys.md" "$SRC/README.md" <<'PY' || fail "README table differs from 'trainwatch config --markdown' (regenerate it)"
import sys
want = open(sys.argv[1]).read().strip().splitlines()
readme = open(sys.argv[2]).read()
sec = readme.split("## Configuration keys", 1)[1].split("\n## ", 1)[0]
got = [l for l in sec.splitlines() if l.startswith("|")]
only_readme = sorted(set(got) - set(want))
only_schema = sorted(set(want) - set(got))
for l in only_readme: print("README only:", l)
for l in only_schema: print("schema only:", l)
assert got == want
PY

# 4. Misspelt keys: FILE:LINE, the key and the closest valid one.
refused() { # YAML LINE KEY NEAR
  printf '%b' "$1" > "$WORK/bad.yaml"
  if "$TW" run --check --config "$WORK/bad.yaml" --brokers 127.0.0.1:1 > /dev/null 2> "$WORK/bad.err"; then
    fail "accepted: $1"
  fi
  grep -q "bad.yaml:$2: .*$3.*did you mean '$4'" "$WORK/bad.err" || fail "$3: $(cat "$WORK/bad.err")"
  echo "ok: $(cat "$WORK/bad.err")"
}
refused 'tick: 60s\nlatenes: 10s\n' 2 latenes lateness
refused 'rules:\n  - name: CPUBottleneck\n    paramters: {threshold: 50}\n' 3 paramters parameters
refused 'kafka:\n  grup: g\n' 2 grup group
refused 'engine:\n  job_idl: 5m\n' 2 job_idl job_idle
refused 'state:\n  store: redis\n  redis:\n    hots: h\n' 4 redis.hots redis.host
refused 'rules:\n  - name: CPUBottleneck\n    actions:\n      - type: webhook\n        urll: http://x/\n' 5 urll url
# Bad values: FILE:LINE, the key, the bounds.
printf 'state:\n  redis:\n    port: 70000\n' > "$WORK/bad.yaml"
"$TW" run --check --config "$WORK/bad.yaml" --brokers 127.0.0.1:1 2> "$WORK/bad.err" > /dev/null && fail "port 70000 accepted"
grep -q "bad.yaml:3: .*redis.port.*outside \[1, 65535\]" "$WORK/bad.err" || fail "port: $(cat "$WORK/bad.err")"

# 5. One duration grammar: days everywhere.
printf 'tick: 1d\nidle_node: 1d\nclock_skew: 1d\nrules:\n  - name: CPUBottleneck\n    actions:\n      - {type: webhook, url: "http://127.0.0.1:9/", timeout: 1d, repeat_after: 7d}\nengine:\n  job_idle: 7d\nstate:\n  finished_ttl: 7d\n' > "$WORK/days.yaml"
"$TW" run --check --config "$WORK/days.yaml" --brokers 127.0.0.1:1 > "$WORK/days.out" 2>&1 ||
  fail "days refused: $(cat "$WORK/days.out")"
echo "config_schema: all checks passed"
