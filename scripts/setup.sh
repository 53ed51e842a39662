#!/usr/bin/env bash
# Installs every build, test and demo dependency of trainwatch from Debian's
# archive. Idempotent: does nothing when everything is present. Needs root
# (or sudo) only when something is missing.
set -euo pipefail

PKGS=(
  build-essential cmake pkg-config git
  librdkafka-dev libhiredis-dev libcurl4-openssl-dev libcmocka-dev
  flatbuffers-compiler libflatbuffers-dev libyaml-dev libjansson-dev
  libmicrohttpd-dev libsimdjson-dev zlib1g-dev libzstd-dev libssl-dev libpcre2-dev
  prometheus prometheus-alertmanager curl
  chromium
  redis-server kcat python3 python3-aiosmtpd python3-jsonschema valgrind strace
  clang-format clang
  python3-torch python3-confluent-kafka python3-flatbuffers python3-setuptools
  python3-pandas python3-numpy
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
# Debian starts a system redis-server on 6379; trainwatch's tests start their
# own on free ports and never use it.
echo "setup: done"
