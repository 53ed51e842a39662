#!/usr/bin/env python3
"""Checks the findings of `trainwatch eval --json` against what a synth
preset planted, recomputed here from the generated files (not from the
engine's report).

  findings_check.py PRESET JOB_DIR EVAL_JSON

Exit 0 when every check holds; otherwise prints what differs and exits 1.
"""
import glob
import json
import os
import statistics
import sys

FAIL = []


def check(cond, what):
    if not cond:
        FAIL.append(what)


LATEST = [None]  # the job's latest timestamp (s): later data is not judged


def system_samples(job):
    out = []
    for path in sorted(glob.glob(os.path.join(job, "system", "**", "*.json"),
                                 recursive=True)):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    out.append(json.loads(line))
    out.sort(key=lambda s: s["Timestamp"])
    return [s for s in out if s["Timestamp"] <= LATEST[0]]


def train_steps(job):
    """(node, absolute start µs, duration µs) of every TRAIN step event."""
    steps = []
    for path in glob.glob(os.path.join(job, "framework", "**", "*.json"),
                          recursive=True):
        node = os.path.basename(path).split("_")[1]  # "0-algo-1"
        node = node.split("-", 1)[1] + "-" + node.split("-", 1)[0]
        events = json.load(open(path, encoding="utf-8"))
        base = None
        for e in events:
            if e.get("name") == "process_name" and "start_time_since_epoch_in_micros" in e.get("args", {}):
                base = e["args"]["start_time_since_epoch_in_micros"]
        for e in events:
            if e.get("name") == "Step:ModeKeys.TRAIN" and e.get("ph") == "X":
                steps.append((node, base + e["ts"], e["dur"]))
    steps.sort(key=lambda s: s[1])
    return [s for s in steps if s[1] <= LATEST[0] * 1e6]


def rule(results, name):
    for r in results["rules"]:
        if r["name"] == name and "parent" in r:
            return r
    for r in results["rules"]:
        if r["name"] == name:
            return r
    raise SystemExit("FAIL: no rule %s in the results" % name)


def finding(results, name):
    r = rule(results, name)
    check(r["status"] == "IssuesFound", "%s: status %s" % (name, r["status"]))
    f = r.get("finding")
    if f is None:
        raise SystemExit("FAIL: %s has no finding" % name)
    for k in ("summary", "recommendation", "parameters"):
        check(len(f[k]) > 20, "%s: %s too short: %r" % (name, k, f[k]))
    check(len(f["magnitude"]["text"]) > 20, "%s: magnitude text" % name)
    return r, f


def near(a, b, tol):
    return abs(a - b) <= tol


def bottleneck(job, res, name, dimension, high):
    r, f = finding(res, name)
    check(f["nodes"]["listed"] == ["algo-1"] and f["nodes"]["count"] == 1,
          "%s nodes %s" % (name, f["nodes"]))
    # planted: GPU < 10 while a core's metric > high in the same round
    rounds = {}
    for s in system_samples(job):
        key = round(s["Timestamp"], 1)  # a round's samples are ms apart
        g = rounds.setdefault(key, {"gpu": None, "high": False})
        if s.get("Dimension") == "GPUUtilization":
            g["gpu"] = s["Value"]
        elif s.get("Dimension") == dimension and s["Value"] > high:
            g["high"] = True
    bad = sorted(t for t, g in rounds.items()
                 if g["gpu"] is not None and g["gpu"] < 10 and g["high"])
    check(len(bad) > 0, "%s: nothing planted?" % name)
    tr = f["time_range"]
    check(near(tr["first_us"] / 1e6, bad[0], 0.2),
          "%s first %s vs planted %s" % (name, tr["first_us"], bad[0]))
    check(near(tr["last_us"] / 1e6, bad[-1], 0.2),
          "%s last %s vs planted %s" % (name, tr["last_us"], bad[-1]))
    m = f["magnitude"]
    ratio = 100.0 * r["violations"] / r["datapoints"]
    check(near(m["value"], ratio, 1e-6) and m["limit"] == 50 and
          m["unit"] == "%", "%s magnitude %s (ratio %s)" % (name, m, ratio))
    # ~75 % of the rounds are planted bottlenecks
    check(60 < m["value"] < 90, "%s ratio %s not ~75 %%" % (name, m["value"]))


def gpu_series(job, dimension, node=None):
    return [s for s in system_samples(job) if s.get("Dimension") == dimension
            and (node is None or s["NodeId"] == node)]


def low_gpu(job, res, listed, under):
    r, f = finding(res, "LowGPUUtilization")
    check(f["nodes"]["listed"] == listed,
          "LowGPU nodes %s, want %s" % (f["nodes"], listed))
    util = gpu_series(job, "GPUUtilization", listed[0].split("/")[0])
    p95 = sorted(s["Value"] for s in util[-500:])
    m = f["magnitude"]
    if under:
        check(m["value"] < 70 and m["limit"] == 70, "LowGPU p95 %s" % m)
        check("under-used" in f["summary"], "LowGPU summary %r" % f["summary"])
        # planted from the start: found once the patience is reached
        patience_window(job, res, "LowGPU", f["time_range"], listed[0])
    else:
        check(m["value"] > 70, "LowGPU p95 %s" % m)
        check("fluctuated" in f["summary"], "LowGPU summary %r" % f["summary"])
    # the rule waits for > 1000 samples of a GPU: nothing before that
    t1001 = util[1000]["Timestamp"]
    tr = f["time_range"]
    check(tr["first_us"] / 1e6 >= t1001 - 60,
          "LowGPU first %s before sample 1001 at %s" % (tr["first_us"], t1001))
    check(tr["first_us"] <= tr["last_us"] <= res["latest_timestamp_us"] + 60e6,
          "LowGPU range %s" % tr)
    check(near(m["value"], p95[int(0.95 * (len(p95) - 1))], 2.0),
          "LowGPU p95 %s vs the files' %s" % (m["value"],
                                               p95[int(0.95 * (len(p95) - 1))]))


def gpu_memory_growth(job, res):
    r, f = finding(res, "GPUMemoryIncrease")
    check(f["nodes"]["listed"] == ["algo-1/gpu0"], "GMI nodes %s" % f["nodes"])
    mem = gpu_series(job, "GPUMemoryUtilization")
    jumps = [b["Timestamp"] for a, b in zip(mem, mem[1:])
             if b["Value"] - a["Value"] > 20]
    check(len(jumps) >= 2, "GMI: planted jumps not found")
    tr = f["time_range"]
    # a jump raises the newest window's mean over the one before it for
    # 2 x window (10) samples of 0.5 s
    check(jumps[0] <= tr["first_us"] / 1e6 <= jumps[0] + 2 * 10 * 0.5 + 1,
          "GMI first %s vs the first jump %s" % (tr["first_us"], jumps[0]))
    check(jumps[-1] <= tr["last_us"] / 1e6 <= jumps[-1] + 2 * 10 * 0.5 + 1,
          "GMI last %s vs the last jump %s" % (tr["last_us"], jumps[-1]))
    m = f["magnitude"]
    check(m["value"] > 5 and m["limit"] == 5, "GMI magnitude %s" % m)


def patience_window(job, res, name, tr, where):
    """A problem planted from the start is found in the scan (60 s) that
    holds the GPU's 1001st sample (patience 1000): the time is that scan's
    start or end, as the rule knows it; and it lasts to the end."""
    node, gpu = where.split("/")
    t1001 = [s for s in gpu_series(job, "GPUUtilization", node)
             if s["Name"] == gpu][1000]["Timestamp"]
    check(t1001 - 60 <= tr["first_us"] / 1e6 <= t1001 + 60,
          "%s first %s, sample 1001 at %s" % (name, tr["first_us"], t1001))
    check(res["latest_timestamp_us"] - 60e6 <= tr["last_us"] <=
          res["latest_timestamp_us"] + 60e6,
          "%s last %s, job's latest %s" % (name, tr["last_us"],
                                           res["latest_timestamp_us"]))


def small_batch(job, res, listed, planted_from_start=True):
    r, f = finding(res, "BatchSize")
    check(f["nodes"]["listed"] == listed, "BatchSize nodes %s" % f["nodes"])
    m = f["magnitude"]
    check(m["value"] < 70 and m["limit"] == 70, "BatchSize %s" % m)
    tr = f["time_range"]
    check(res["first_timestamp_us"] < tr["first_us"] <= tr["last_us"],
          "BatchSize range %s" % tr)
    if planted_from_start:
        patience_window(job, res, "BatchSize", tr, listed[0])


def step_outliers(job, res):
    r, f = finding(res, "StepOutlier")
    steps = train_steps(job)
    med = statistics.median(d for _, _, d in steps)
    slow = [(n, t) for n, t, d in steps if d > 4 * med]
    # an event that spans a scan boundary (60 s scans from the job's first
    # timestamp) is delivered to, and counted by, both scans (RULES.md
    # §3.6 quirk 5)
    f0 = res["first_timestamp_us"]
    twice = sum(1 for _, t, d in steps if d > 4 * med and
                (t - f0) // 60000000 != (t + d - f0) // 60000000)
    check(len(slow) > 10, "StepOutlier: planted outliers not found")
    nodes = sorted({n for n, _ in slow})
    check(sorted(f["nodes"]["listed"]) == nodes,
          "StepOutlier nodes %s, planted on %s" % (f["nodes"], nodes))
    tr = f["time_range"]
    check(tr["first_us"] == slow[0][1],
          "StepOutlier first %s, first planted outlier starts %s" %
          (tr["first_us"], slow[0][1]))
    check(tr["last_us"] == slow[-1][1],
          "StepOutlier last %s, last planted outlier starts %s" %
          (tr["last_us"], slow[-1][1]))
    m = f["magnitude"]
    check(4 < m["value"] < 8, "StepOutlier: %sx the median (planted 6x)" %
          m["value"])
    check(("%d steps above" % (len(slow) + twice)) in m["text"],
          "StepOutlier magnitude %r, %d planted (+%d counted twice)" %
          (m["text"], len(slow), twice))


def load_imbalance(job, res):
    r, f = finding(res, "LoadBalancing")
    check(f["nodes"]["listed"][0] == "algo-1/gpu0",
          "LoadBalancing: the busy gpu0 first, got %s" % f["nodes"])
    check(set(f["nodes"]["listed"]) ==
          {"algo-1/gpu0", "algo-1/gpu1", "algo-1/gpu2", "algo-1/gpu3"},
          "LoadBalancing nodes %s" % f["nodes"])
    m = f["magnitude"]
    check(m["value"] > 0.2 and m["limit"] == 0.2, "LoadBalancing %s" % m)
    patience_window(job, res, "LoadBalancing", f["time_range"],
                    "algo-1/gpu0")


def slow_init(job, res):
    r, f = finding(res, "MaxInitializationTime")
    first_step = train_steps(job)[0][1]
    tr = f["time_range"]
    check(tr["first_us"] == res["first_timestamp_us"],
          "MaxInit first %s, job start %s" % (tr["first_us"],
                                              res["first_timestamp_us"]))
    check(tr["last_us"] == first_step,
          "MaxInit last %s, first TRAIN step %s" % (tr["last_us"], first_step))
    m = f["magnitude"]
    want = (first_step - res["first_timestamp_us"]) / 1e6
    check(near(m["value"], want, 1e-6) and m["limit"] == 1200 and
          m["unit"] == "s", "MaxInit magnitude %s, want %s s" % (m, want))
    check(1400 <= want <= 1500, "MaxInit: planted 1440 s, got %s" % want)
    check("24m" in m["text"], "MaxInit text %r" % m["text"])


def dataloader(job, res):
    r, f = finding(res, "Dataloader")
    check(f["nodes"]["listed"] == ["algo-1"], "Dataloader nodes %s" % f["nodes"])
    m = f["magnitude"]
    check(m["value"] == 1 and near(m["limit"], 16 * 0.7, 1e-9),
          "Dataloader magnitude %s (planted: 1 loader, 16 cores)" % m)
    check("num_workers 0" in m["text"] and "pin_memory false" in m["text"],
          "Dataloader text %r" % m["text"])
    check("Too few" in f["summary"], "Dataloader summary %r" % f["summary"])
    # planted from the first to the last second: every scan's window
    tr = f["time_range"]
    check(tr["first_us"] == res["first_timestamp_us"],
          "Dataloader first %s, job start %s" % (tr["first_us"],
                                                 res["first_timestamp_us"]))
    check(res["latest_timestamp_us"] - 60e6 <= tr["last_us"] <=
          res["latest_timestamp_us"] + 60e6,
          "Dataloader last %s, job's latest %s" % (tr["last_us"],
                                                   res["latest_timestamp_us"]))


def main():
    preset, job, path = sys.argv[1:4]
    res = json.load(open(path, encoding="utf-8"))
    LATEST[0] = res["latest_timestamp_us"] / 1e6
    if preset == "cpu_bottleneck":
        bottleneck(job, res, "CPUBottleneck", "CPUUtilization", 90)
        low_gpu(job, res, ["algo-1/gpu0"], under=False)
    elif preset == "io_bottleneck":
        bottleneck(job, res, "IOBottleneck", "I/OWaitPercentage", 50)
    elif preset == "low_gpu":
        low_gpu(job, res, ["algo-1/gpu0"], under=True)
    elif preset == "gpu_fluctuation":
        low_gpu(job, res, ["algo-1/gpu0"], under=False)
    elif preset == "gpu_memory_growth":
        gpu_memory_growth(job, res)
    elif preset == "small_batch":
        small_batch(job, res, ["algo-1/gpu0"])
    elif preset == "step_outliers":
        step_outliers(job, res)
    elif preset == "load_imbalance":
        load_imbalance(job, res)
        small_batch(job, res, ["algo-1/gpu1", "algo-1/gpu2", "algo-1/gpu3"])
    elif preset == "slow_init":
        slow_init(job, res)
    elif preset == "dataloader":
        dataloader(job, res)
    elif preset == "straggler":
        low_gpu(job, res, ["algo-2/gpu0"], under=True)
        small_batch(job, res, ["algo-2/gpu0"])
    else:
        raise SystemExit("unknown preset %s" % preset)
    for what in FAIL:
        print("FAIL: %s: %s" % (preset, what), file=sys.stderr)
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
