# http.sh - sourced by the HTTP endpoint tests.

# tw_free_port: a free loopback TCP port.
tw_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# tw_http_code [CURL ARGS...] URL: the HTTP status code ("000": no answer).
tw_http_code() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"
}

# tw_http_is CODE [CURL ARGS...] URL: succeeds when the status is CODE
# (for wait_for, which must run the request each time).
tw_http_is() {
    local want=$1; shift
    [ "$(tw_http_code "$@")" = "$want" ]
}
