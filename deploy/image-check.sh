#!/usr/bin/env bash
# image-check.sh BUILD_DIR [BASE_IMAGE] - builds deploy/Dockerfile with
# buildah and runs the engine inside the image against a broker and a Redis
# on this host:
#  - the image runs as user 10001 and keeps its HEALTHCHECK (docker format);
#  - `trainwatch --version`, `rules list` and `run --check` of the image's
#    own configuration (refused without REDIS_PASSWORD, exit 2);
#  - `run` inside the image with HTTP on: the image's healthcheck script
#    gets 200 from /healthz and /readyz; a generated job replayed into it
#    gives a results file equal to `eval` on the host.
# Needs buildah, network access to a Debian mirror (the Dockerfile's
# apt-get), and a Debian 12 base image named BASE_IMAGE (default debian:12;
# BASE_IMAGE-slim must exist too). Without a registry, make one from the
# Debian archive: mmdebstrap --variant=apt bookworm deb12.tar &&
# podman import deb12.tar localhost/debian:12 && podman tag
# localhost/debian:12 localhost/debian:12-slim. Uses buildah's chroot
# isolation (no OCI runtime, the host's network), so it also works where
# containers cannot get their own cgroups or namespaces. Not part of
# scripts/test.sh: it downloads packages and takes minutes.
set -u
BUILD=${1:?usage: deploy/image-check.sh BUILD_DIR [BASE_IMAGE]}
BASE=${2:-debian:12}
TW=$BUILD/trainwatch
ROOT=$(cd "$(dirname "$0")/.." && pwd)
IMAGE=localhost/trainwatch:check
command -v buildah >/dev/null || { echo "image-check: buildah is not installed" >&2; exit 77; }
WORK=$(mktemp -d /tmp/tw-image.XXXXXX)
CTR= RUN_PID= BROKER_PID= REDIS_PID=
cleanup() {
    for p in $RUN_PID $BROKER_PID $REDIS_PID; do kill "$p" 2>/dev/null; done
    [ -n "$CTR" ] && buildah rm "$CTR" >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
in_image() { buildah run --isolation chroot "$@"; }

echo "image-check: building $IMAGE from $BASE (minutes)"
git -C "$ROOT" archive --format=tar HEAD | (mkdir -p "$WORK/src" && tar -x -C "$WORK/src")
(cd "$WORK/src" && buildah bud --isolation chroot --format docker \
    --ulimit "nofile=$(ulimit -n):$(ulimit -n)" --build-arg "DEBIAN_IMAGE=$BASE" \
    -f deploy/Dockerfile -t "$IMAGE" . >"$WORK/build.log" 2>&1) ||
    { tail -n 30 "$WORK/build.log" >&2; fail "image build"; }
[ "$(buildah inspect --format '{{.OCIv1.Config.User}}' "$IMAGE")" = 10001:10001 ] ||
    fail "image user is not 10001"
buildah inspect --format '{{.Docker.Config.Healthcheck.Test}}' "$IMAGE" | grep -q healthz ||
    fail "image has no HEALTHCHECK on /healthz"
CTR=$(buildah from "$IMAGE") || fail "buildah from"
echo "ok: built, user 10001, HEALTHCHECK kept; $(buildah images --format '{{.Size}}' "$IMAGE") image"
in_image "$CTR" -- trainwatch --version || fail "--version in the image"
[ "$(in_image "$CTR" -- trainwatch rules list | grep -c '^[A-Z]')" -ge 12 ] ||
    fail "rules list in the image"
in_image "$CTR" -- trainwatch run --config /etc/trainwatch/trainwatch.yaml --check \
    >"$WORK/check.out" 2>&1 && fail "run --check passed without REDIS_PASSWORD"
grep -q REDIS_PASSWORD "$WORK/check.out" || fail "run --check: $(cat "$WORK/check.out")"
echo "ok: --version, rules list, run --check refuses the default configuration without REDIS_PASSWORD"

# the engine inside the image, against a broker and Redis on this host
RP=$(free_port) HP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >"$WORK/redis.log" 2>&1 &
REDIS_PID=$!
"$TW" broker >"$WORK/broker.out" 2>"$WORK/broker.err" &
BROKER_PID=$!
for _ in $(seq 50); do grep -q '^bootstrap=' "$WORK/broker.out" && break; sleep 0.2; done
BOOT=$(sed -n 's/^bootstrap=//p' "$WORK/broker.out")
[ -n "$BOOT" ] || fail "broker did not start"
mkdir -p "$WORK/data/res" && chmod 777 "$WORK/data/res"
cat >"$WORK/data/engine.yaml" <<YAML
kafka: {brokers: "$BOOT", group: image-check}
engine: {results_dir: /data/res, progress_interval: 0}
state: {store: redis, redis: {host: 127.0.0.1, port: $RP}}
http: {enabled: true, listen: 127.0.0.1, port: $HP}
YAML
chmod 644 "$WORK/data/engine.yaml"
in_image -v "$WORK/data:/data" "$CTR" -- trainwatch run --config /data/engine.yaml \
    >"$WORK/run.out" 2>"$WORK/run.err" &
RUN_PID=$!
ready=
for _ in $(seq 60); do
    if in_image --env "TW_HTTP_PORT=$HP" "$CTR" -- /opt/trainwatch/bin/healthcheck /readyz 2>/dev/null; then
        ready=1 && break
    fi
    sleep 0.5
done
[ -n "$ready" ] || { tail -n 20 "$WORK/run.err" >&2; fail "/readyz never answered 200"; }
in_image --env "TW_HTTP_PORT=$HP" "$CTR" -- /opt/trainwatch/bin/healthcheck /healthz ||
    fail "/healthz"
echo "ok: run inside the image; its healthcheck gets 200 from /healthz and /readyz"
"$TW" synth "$WORK/job-img" --preset cpu_bottleneck --nodes 2 --duration 10m --seed 3 >/dev/null 2>&1 ||
    fail "synth"
"$TW" eval "$WORK/job-img" --json --quiet >"$WORK/eval.json" || fail "eval"
"$TW" replay "$WORK/job-img" --brokers "$BOOT" --group image-check -q || fail "replay"
for _ in $(seq 60); do [ -f "$WORK/data/res/job-img.json" ] && break; sleep 0.5; done
python3 "$ROOT/tests/integration/lib/results.py" same "$WORK/eval.json" "$WORK/data/res/job-img.json" ||
    fail "results of the engine in the image differ from eval"
echo "PASS image-check: a job replayed into the engine inside the image equals eval"
