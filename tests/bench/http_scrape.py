#!/usr/bin/python3
"""http_scrape.py - does serving /metrics slow the engine, and how fast is
/metrics while the engine works at full speed? Prints figures; asserts
nothing.

    tests/bench/http_scrape.py [--tw build/trainwatch] [--scrapers N]
                               [--nodes N] [--duration 20m]

A generated job (system metrics only, 100 ms sampling) is replayed at full
speed (replay's flow control only) into `trainwatch run` (ProfilerReport,
http: enabled, refresh 250ms) twice, each time with a fresh broker and
engine: once with nobody requesting anything, once with N threads each
requesting /metrics back to back for the whole replay. Per pass:
samples/s = the job's samples / (results file written - replay started),
and for the scraped pass the /metrics request latency percentiles (client
side: connect, request, whole body) and requests/s. The engine's own
trainwatch_http_snapshot_max_seconds and
trainwatch_http_publish_wait_max_seconds (what the consuming thread spent
rendering and publishing, and waiting for the lock) are read at the end.
"""
import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    sys.exit("bench: timed out waiting for " + what)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))] if xs else float("nan")


def one_pass(tw, job_dir, work, scrapers):
    boot = os.path.join(work, "bootstrap")
    if os.path.exists(boot):
        os.unlink(boot)
    broker = subprocess.Popen([tw, "broker", "--bootstrap-file", boot],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    eng = None
    try:
        wait(lambda: os.path.exists(boot) and os.path.getsize(boot) > 0, 10, "broker")
        brokers = open(boot).read().strip()
        res = tempfile.mkdtemp(dir=work)
        port = free_port()
        cfg = os.path.join(work, "run.yaml")
        with open(cfg, "w") as f:
            f.write("kafka: {group: bench}\n"
                    "engine: {results_dir: %s, progress_interval: 0}\n"
                    "http: {enabled: true, port: %d, refresh: 250ms}\n" % (res, port))
        err = open(os.path.join(work, "run.err"), "w")
        eng = subprocess.Popen([tw, "run", "--config", cfg, "--brokers", brokers],
                               stdout=subprocess.PIPE, stderr=err, text=True)
        url = "http://127.0.0.1:%d" % port

        def ready():
            try:
                return urllib.request.urlopen(url + "/readyz", timeout=1).status == 200
            except Exception:
                return False
        wait(ready, 60, "/readyz")
        lat, stop = [], threading.Event()
        lock = threading.Lock()

        def scrape():
            mine = []
            while not stop.is_set():
                t0 = time.perf_counter()
                body = urllib.request.urlopen(url + "/metrics", timeout=10).read()
                mine.append(time.perf_counter() - t0)
                assert body.startswith(b"# HELP")
            with lock:
                lat.extend(mine)
        threads = [threading.Thread(target=scrape) for _ in range(scrapers)]
        t0 = time.time()
        for t in threads:
            t.start()
        rep = subprocess.run([tw, "replay", job_dir, "--brokers", brokers,
                              "--group", "bench", "-q"],
                             capture_output=True, text=True, timeout=600)
        if rep.returncode != 0:
            sys.exit("bench: replay failed: " + rep.stderr)
        name = os.path.basename(job_dir) + ".json"
        wait(lambda: os.path.exists(os.path.join(res, name)), 600, "results")
        elapsed = time.time() - t0
        stop.set()
        for t in threads:
            t.join()
        metrics = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
        eng.terminate()
        out, _ = eng.communicate(timeout=60)
        samples = int(re.search(r" samples=(\d+)", out).group(1))
        gauges = {k: float(v) for k, v in re.findall(
            r"^(trainwatch_http_(?:snapshot|publish_wait)_max_seconds) (\S+)$",
            metrics, re.M)}
        return samples, elapsed, lat, gauges
    finally:
        if eng is not None and eng.poll() is None:
            eng.kill()
            eng.wait()
        broker.terminate()
        broker.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tw", default="build/trainwatch")
    ap.add_argument("--scrapers", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--duration", default="20m")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tw-bench-http.")
    try:
        job = os.path.join(work, "bench-job")
        subprocess.run([a.tw, "synth", job, "--preset", "healthy", "--nodes",
                        str(a.nodes), "--duration", a.duration, "--interval-ms",
                        "100", "--no-framework"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("job: %s nodes, %s at 100 ms, system metrics only" % (a.nodes, a.duration))
        for n in (0, a.scrapers):
            samples, el, lat, g = one_pass(a.tw, job, work, n)
            line = "scrapers=%d samples=%d seconds=%.2f samples_per_s=%.0f" % (
                n, samples, el, samples / el)
            if lat:
                line += (" requests=%d requests_per_s=%.0f metrics_p50_ms=%.2f "
                         "metrics_p99_ms=%.2f metrics_max_ms=%.2f" % (
                             len(lat), len(lat) / el, 1e3 * pct(lat, 50),
                             1e3 * pct(lat, 99), 1e3 * max(lat)))
            line += " engine_snapshot_max_ms=%.3f engine_publish_wait_max_us=%.1f" % (
                1e3 * g.get("trainwatch_http_snapshot_max_seconds", float("nan")),
                1e6 * g.get("trainwatch_http_publish_wait_max_seconds", float("nan")))
            print(line, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
