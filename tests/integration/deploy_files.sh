#!/usr/bin/env bash
# deploy/: what this machine can check without a cluster, a container
# engine or the network (README "Deploying" says what is and is not run):
#  - systemd units: `systemd-analyze verify`, no warning at all;
#  - Kubernetes manifests: `kubectl kustomize` parses every object; `kubectl
#    set env --local` decodes each workload into kubectl's typed objects
#    and no field may be dropped (an unknown or misspelled field would be);
#    probes, ports, resources, security contexts and references between
#    the files (lib/deploy_check.py);
#  - every trainwatch configuration in deploy/ passes `run --check`;
#  - compose.yaml's services (KRaft Kafka, Redis with AOF, engine, agent);
#  - the Dockerfile's runtime package list (deploy/runtime-packages.sh) on
#    the built binary, and the image's healthcheck script against a real
#    HTTP server (and `run`'s own /healthz once the binary serves HTTP).
# Skips (77) when kubectl or systemd-analyze is absent.
# Usage: deploy_files.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?build dir}" && pwd)
TW="$BUILD/trainwatch"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DEPLOY=$SRC/deploy
CHECK="/usr/bin/python3 $SRC/tests/integration/lib/deploy_check.py"
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
for t in kubectl systemd-analyze; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not installed"; exit 77; }
done
export TRAINWATCH_RULES_DIR=$BUILD/rules
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# ---- systemd (the units name /usr/local/bin/trainwatch; verify checks it exists)
mkdir "$WORK/units"
sed "s|/usr/local/bin/trainwatch|$TW|g" "$DEPLOY/systemd/trainwatch.service" >"$WORK/units/trainwatch.service"
sed "s|/usr/local/bin/trainwatch|$TW|g" "$DEPLOY/systemd/trainwatch-agent@.service" \
  >"$WORK/units/trainwatch-agent@job-1.service"
systemd-analyze verify "$WORK/units/trainwatch.service" "$WORK/units/trainwatch-agent@job-1.service" \
  >"$WORK/verify.out" 2>&1 || fail "systemd-analyze verify: $(cat "$WORK/verify.out")"
[ ! -s "$WORK/verify.out" ] || fail "systemd-analyze verify warns: $(cat "$WORK/verify.out")"
echo "ok: systemd units verify cleanly"

# ---- Kubernetes, offline (no API server: `apply --dry-run=client` needs one)
mkdir "$WORK/k8s"
cp "$DEPLOY"/k8s/*.yaml "$DEPLOY"/k8s/examples/*.yaml "$WORK/k8s/"
(cd "$WORK/k8s" && printf 'resources:\n' && for f in *.yaml; do printf -- '- %s\n' "$f"; done) \
  >"$WORK/kustomization.yaml"
mv "$WORK/kustomization.yaml" "$WORK/k8s/"
kubectl kustomize "$WORK/k8s" >"$WORK/all.yaml" || fail "kubectl kustomize"
n=$(grep -c '^kind:' "$WORK/all.yaml")
[ "$n" -ge 10 ] || fail "kubectl kustomize: only $n objects"
# The sidecar example uses native sidecars (initContainers' restartPolicy,
# Kubernetes 1.29+): a kubectl older than that drops the field, so it
# decodes that file only when it knows it (Debian 12's is 1.20).
KMINOR=$(kubectl version --client -o json 2>/dev/null |
  python3 -c 'import json,sys,re; print(int(re.sub(r"\D.*", "", json.load(sys.stdin)["clientVersion"]["minor"])))' 2>/dev/null || echo 0)
WORKLOADS="engine.yaml agent-daemonset.yaml"
if [ "$KMINOR" -ge 29 ]; then
  WORKLOADS="$WORKLOADS training-job-sidecar.yaml"
else
  echo "note: kubectl 1.$KMINOR predates native sidecars (1.29): training-job-sidecar.yaml not decoded"
fi
for f in $WORKLOADS; do
  # one document per workload, decoded by kubectl into its typed object
  python3 -c '
import sys, yaml
for i, d in enumerate(yaml.safe_load_all(open(sys.argv[1]))):
    if d and d["kind"] in ("Deployment", "DaemonSet", "Job"):
        open(sys.argv[2], "w").write(yaml.safe_dump(d))' "$WORK/k8s/$f" "$WORK/w.yaml"
  kubectl set env --local -f "$WORK/w.yaml" TW_DECODE_CHECK=1 -o json >"$WORK/w.json" 2>"$WORK/w.err" ||
    fail "kubectl cannot decode the workload in $f: $(cat "$WORK/w.err")"
  $CHECK decoded "$WORK/w.yaml" "$WORK/w.json" || fail "$f: fields dropped by kubectl"
  [ "$f" = engine.yaml ] && cp "$WORK/w.yaml" "$WORK/engine-w.yaml"
done
# the decode check itself catches a misspelled field (the engine has probes)
grep -q 'readinessProbe:' "$WORK/engine-w.yaml" || fail "the engine workload has no readinessProbe"
sed 's/readinessProbe:/readinesProbe:/' "$WORK/engine-w.yaml" >"$WORK/typo.yaml"
kubectl set env --local -f "$WORK/typo.yaml" TW_DECODE_CHECK=1 -o json >"$WORK/typo.json"
if $CHECK decoded "$WORK/typo.yaml" "$WORK/typo.json" 2>/dev/null; then
  fail "a misspelled field went unnoticed"
fi
$CHECK k8s "$DEPLOY" || fail "manifests"
echo "ok: Kubernetes manifests parse, decode without dropped fields, and hang together ($n objects)"

# ---- every trainwatch configuration in deploy/ passes run --check
mkdir "$WORK/cfg" "$WORK/results"
$CHECK configs "$DEPLOY" "$WORK/cfg" >/dev/null || fail "configs in the manifests"
cp "$DEPLOY/compose/engine.yaml" "$WORK/cfg/compose-engine.yaml"
cp "$DEPLOY/trainwatch.yaml" "$WORK/cfg/trainwatch.yaml"
has_http=0
grep -q '^| `http.port`' <<<"$("$TW" config --markdown)" && has_http=1
for f in "$WORK"/cfg/*.yaml; do
  if [ $has_http = 0 ]; then # this binary predates the http: section
    python3 -c '
import sys, yaml
d = yaml.safe_load(open(sys.argv[1])); d.pop("http", None)
open(sys.argv[1], "w").write(yaml.safe_dump(d))' "$f"
  fi
  # the folder the containers mount, here a scratch one (check: it must exist)
  sed -i "s|/var/lib/trainwatch/results|$WORK/results|" "$f"
  chmod 0600 "$f"
  REDIS_PASSWORD=x TW_HTTP_TOKEN=x "$TW" run --check --config "$f" --brokers 127.0.0.1:1 \
    >"$WORK/check.out" 2>&1 || fail "run --check $(basename "$f"): $(cat "$WORK/check.out")"
  grep -q "is valid" "$WORK/check.out" || fail "run --check $(basename "$f"): $(cat "$WORK/check.out")"
done
echo "ok: every configuration passes run --check$([ $has_http = 1 ] || echo ' (http: sections left out: this binary has none)')"

# ---- compose.yaml (no compose tool here: static checks only)
$CHECK compose "$DEPLOY" || fail "compose.yaml"
echo "ok: compose.yaml has KRaft Kafka, Redis with AOF, the engine and an agent"

# ---- Dockerfile: stages, user, healthcheck; its runtime package list
grep -qE '^FROM \$\{DEBIAN_IMAGE\} AS build$' "$DEPLOY/Dockerfile" &&
  grep -qE '^FROM \$\{DEBIAN_IMAGE\}-slim AS runtime$' "$DEPLOY/Dockerfile" &&
  grep -qE '^ARG DEBIAN_IMAGE=debian:12$' "$DEPLOY/Dockerfile" || fail "Dockerfile stages"
grep -qE '^USER 10001:10001$' "$DEPLOY/Dockerfile" || fail "Dockerfile: not a non-root user"
grep -qE '^HEALTHCHECK .*' "$DEPLOY/Dockerfile" && grep -q '"/healthz"' "$DEPLOY/Dockerfile" ||
  fail "Dockerfile: no HEALTHCHECK on /healthz"
grep '^COPY ' "$DEPLOY/Dockerfile" | grep -v -- '--from=' | awk '$2 != "." {print $2}' |
  while read -r p; do [ -e "$SRC/$p" ] || fail "Dockerfile copies missing $p"; done
"$DEPLOY/runtime-packages.sh" "$TW" >"$WORK/pkgs" || fail "runtime-packages.sh"
for p in librdkafka1 libhiredis0.14 libcurl4 libyaml-0-2 libjansson4 libsimdjson14 libc6; do
  grep -qx "$p" "$WORK/pkgs" || fail "runtime packages lack $p: $(tr '\n' ' ' <"$WORK/pkgs")"
done
grep -q -- '-dev$' "$WORK/pkgs" && fail "a -dev package in the runtime list"
echo "ok: Dockerfile checked statically; runtime packages: $(wc -l <"$WORK/pkgs") ($(tr '\n' ' ' <"$WORK/pkgs"))"

# ---- the image's healthcheck script, against a real HTTP server
mkdir "$WORK/www" && echo ok >"$WORK/www/healthz"
port=$(free_port)
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$WORK/www" >/dev/null 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do TW_HTTP_PORT=$port "$DEPLOY/healthcheck.sh" /healthz 2>/dev/null && break; sleep 0.1; done
TW_HTTP_PORT=$port "$DEPLOY/healthcheck.sh" /healthz || fail "healthcheck: 200 not seen as healthy"
! TW_HTTP_PORT=$port "$DEPLOY/healthcheck.sh" /missing 2>/dev/null || fail "healthcheck: 404 seen as healthy"
! TW_HTTP_PORT=$(free_port) "$DEPLOY/healthcheck.sh" /healthz 2>/dev/null || fail "healthcheck: closed port seen as healthy"
echo "ok: healthcheck.sh: 200 healthy, 404 and a closed port unhealthy"
if [ $has_http = 1 ]; then
  . "$SRC/tests/integration/lib/broker.sh"
  tw_broker_start
  PIDS+=("$BROKER_PID")
  port=$(free_port)
  printf 'http:\n  enabled: true\n  port: %s\n' "$port" >"$WORK/http.yaml"
  "$TW" run --config "$WORK/http.yaml" --brokers "$BOOTSTRAP" -q >"$WORK/run.out" 2>&1 &
  PIDS+=($!)
  ok=0
  for _ in $(seq 100); do TW_HTTP_PORT=$port "$DEPLOY/healthcheck.sh" /healthz 2>/dev/null && { ok=1; break; }; sleep 0.1; done
  [ $ok = 1 ] || fail "healthcheck against run's /healthz: $(cat "$WORK/run.out")"
  echo "ok: healthcheck.sh against trainwatch run's /healthz"
fi
