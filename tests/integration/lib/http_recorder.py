#!/usr/bin/env python3
"""http_recorder.py - a loopback HTTP server for the action tests.

Records every request as one JSON line (written on arrival, before any
delay): arrival time, index, method, path, headers (lower-case names), body,
and checks: `sigv4_ok` (the AWS SigV4 signature recomputed with
--aws-secret) and `hmac_ok` (X-Trainwatch-Signature with --hmac-secret).
Answers with the --status sequence (the last one repeats), after --delay
seconds for the first --delay-count requests. SageMaker.ListTrainingJobs is
answered with the --list-jobs names (all InProgress).

Usage: http_recorder.py --port-file F --log F [--status 500,500,200]
       [--delay S --delay-count N] [--aws-secret S] [--hmac-secret S]
       [--list-jobs a,b]
"""
import argparse
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sigv4_ok(method, path, headers, body, secret):
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return False
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    scope = parts["Credential"].split("/", 1)[1]
    date, region, service, _ = scope.split("/")
    signed = parts["SignedHeaders"].split(";")
    canon_headers = "".join(
        "%s:%s\n" % (h, " ".join(headers.get(h, "").split())) for h in signed)
    path_only, _, query = path.partition("?")
    creq = "\n".join([method, path_only, query, canon_headers, parts["SignedHeaders"],
                      hashlib.sha256(body).hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", headers.get("x-amz-date", ""), scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    return hmac.compare_digest(want, parts.get("Signature", ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--status", default="200")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--delay-count", type=int, default=0)
    ap.add_argument("--aws-secret")
    ap.add_argument("--hmac-secret")
    ap.add_argument("--list-jobs", default="")
    args = ap.parse_args()
    statuses = [int(s) for s in args.status.split(",")]
    lock = threading.Lock()
    state = {"n": 0}
    log = open(args.log, "a", buffering=1)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            with lock:
                n = state["n"]
                state["n"] += 1
                rec = {"t": time.time(), "n": n, "method": self.command,
                       "path": self.path, "headers": headers,
                       "body": body.decode("utf-8", "replace")}
                if args.aws_secret:
                    rec["sigv4_ok"] = sigv4_ok(self.command, self.path, headers,
                                               body, args.aws_secret)
                if args.hmac_secret:
                    want = "sha256=" + hmac.new(args.hmac_secret.encode(), body,
                                                hashlib.sha256).hexdigest()
                    rec["hmac_ok"] = hmac.compare_digest(
                        want, headers.get("x-trainwatch-signature", ""))
                log.write(json.dumps(rec) + "\n")
            if n < args.delay_count:
                time.sleep(args.delay)
            status = statuses[min(n, len(statuses) - 1)]
            if headers.get("x-amz-target") == "SageMaker.ListTrainingJobs":
                names = [s for s in args.list_jobs.split(",") if s]
                out = json.dumps({"TrainingJobSummaries": [
                    {"TrainingJobName": s, "TrainingJobStatus": "InProgress"}
                    for s in names]}).encode()
            else:
                out = json.dumps({"status": status}).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except OSError:
                pass  # the client gave up (timeout test)

        do_PUT = do_POST
        do_GET = do_POST

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
