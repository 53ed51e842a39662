#!/usr/bin/env bash
# 0905 - defect 9 of the edge-case issue (config edges) and item 4 of the
# hardening issue: a configuration holding a secret (kafka
# properties.sasl.password), a state.redis.password_file or an AWS
# credentials file that every user of the machine can read (mode 0644,
# the default under umask 022) was used without a word.
# trainwatch now refuses such files (README "Secrets"): asserts that `run`
# exits 2 for each of the three with FILE:LINE, the key, the mode and the
# chmod to run, that `eval --rules` refuses the config too, that no secret
# appears in the error, and that the same files with mode 0600 (or 0640:
# only "other" matters) pass the check.
# Usage: 0905-world-readable-secret.sh BUILD_DIR
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0905.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$WORK/job/system/incremental/2023111422"
echo '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":10,"NodeId":"algo-1","Timestamp":1700000000.0}' \
    >"$WORK/job/system/incremental/2023111422/1700000000.algo-1.json"

# refused CMD FILE PATTERN SECRET: CMD (eval|run) with config FILE exits
# 1|2 with PATTERN in the error, and SECRET nowhere in it.
refused() {
    local cmd=$1 file=$2 pattern=$3 secret=$4 want rc
    if [ "$cmd" = eval ]; then
        "$TW" eval "$WORK/job" --rules "$file" >/dev/null 2>"$WORK/err"
        rc=$?; want=1
    else
        timeout 30 "$TW" run --config "$file" --brokers 127.0.0.1:1 >/dev/null 2>"$WORK/err"
        rc=$?; want=2
    fi
    [ $rc -eq $want ] || fail "$cmd $(basename "$file"): exit $rc: $(cat "$WORK/err")"
    grep -q -- "$pattern" "$WORK/err" || fail "$cmd $(basename "$file"): $(cat "$WORK/err")"
    grep -q -- "$secret" "$WORK/err" && fail "the secret is in the error: $(cat "$WORK/err")"
    echo "ok: $(cat "$WORK/err")"
}

# 1. a config with a secret in it
cat >"$WORK/sasl.yaml" <<'YAML'
kafka:
  group: g
  properties:
    sasl.password: hunter2sasl
YAML
chmod 0644 "$WORK/sasl.yaml"
refused run "$WORK/sasl.yaml" \
    "sasl.yaml:4: kafka: key 'properties.sasl.password': holds a secret, and every user can read .*sasl.yaml (mode 0644): refused, run 'chmod o-r" \
    hunter2sasl
refused eval "$WORK/sasl.yaml" "sasl.yaml:4: .*mode 0644" hunter2sasl
for mode in 0600 0640; do
    chmod $mode "$WORK/sasl.yaml"
    "$TW" eval "$WORK/job" --rules "$WORK/sasl.yaml" >/dev/null 2>"$WORK/err" ||
        fail "mode $mode refused: $(cat "$WORK/err")"
done
echo "ok: the same config with mode 0600 or 0640 is accepted"

# 2. state.redis.password_file (refused before any connection is tried)
printf 'hunter2redis\n' >"$WORK/redis.pw"
chmod 0644 "$WORK/redis.pw"
printf 'state:\n  store: redis\n  redis:\n    port: 1\n    password_file: %s\n' \
    "$WORK/redis.pw" >"$WORK/redis.yaml"
refused run "$WORK/redis.yaml" \
    "redis.yaml:5: state: key 'redis.password_file': a password file, and every user can read .*redis.pw (mode 0644)" \
    hunter2redis

# 3. an action's AWS credentials file
printf '[default]\naws_access_key_id = AKIDX\naws_secret_access_key = hunter2aws\n' \
    >"$WORK/aws.creds"
chmod 0644 "$WORK/aws.creds"
printf 'rules:\n  - name: CPUBottleneck\n    actions:\n      - type: stop_training\n        credentials_file: %s\n' \
    "$WORK/aws.creds" >"$WORK/aws.yaml"
refused run "$WORK/aws.yaml" \
    "aws.yaml:5: rule 'CPUBottleneck' action 1: key 'credentials_file': every user can read .*aws.creds (mode 0644)" \
    hunter2aws
