#!/bin/bash
# healthcheck.sh PATH: exit 0 when GET PATH on 127.0.0.1:$TW_HTTP_PORT
# answers 200 within 2 s. Bash's /dev/tcp: the slim image carries no HTTP
# client. Used by the image's HEALTHCHECK (/healthz).
set -u
port=${TW_HTTP_PORT:-9468}
path=${1:-/healthz}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$path" >&3
IFS= read -r -t 2 status <&3 || exit 1
case "$status" in
  "HTTP/1."[01]" 200"*) exit 0 ;;
  *) echo "healthcheck: $path: ${status:-no answer}" >&2; exit 1 ;;
esac
