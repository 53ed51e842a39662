#!/usr/bin/python3
"""An independent computation of `trainwatch stats --json` with pandas and
numpy, from the raw files of a profiler-output folder (its own parsing of the
system JSON lines and the Chrome-trace framework files; nothing of
trainwatch's is used), following the definitions in README.md ("Job
statistics").

    stats_reference.py DIR [--by training_phase|framework_metric|process]
                           [--by-step A:B] [--time T1:T2] [--per-phase]
                           [--ranges 90:100,10:90,0:10] [--compare OUT.json]

Prints the same JSON object as the C command (sections job, phases, steps,
utilization, usage). With --compare it loads the C command's output and
exits 1 naming every number that differs (exact comparison: the same
doubles, not "close")."""

import argparse
import json
import math
import os
import re
import sys

import numpy as np
import pandas as pd

SYSTEM_NAME = re.compile(r"^\d{10}\.algo-\d+\.json$")
SUFFIXES = ("pythontimeline.json", "model_timeline.json",
            "horovod_timeline.json", "smdataparallel_timeline.json")


def llround(x):
    """C's llround (half away from zero) of a double."""
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0) if x >= 0 else -llround(-x)


def framework_node(name):
    """<x>-algo<y> -> algo<y>-<x>, as the agent-file listing names nodes."""
    i = name.find("-algo")
    if i > 0:
        return name[i + 1:] + "-" + name[:i]
    return name


def walk(root):
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            yield os.path.join(d, f)


def read_system(root):
    rows = []
    for path in walk(root):
        if not SYSTEM_NAME.match(os.path.basename(path)):
            continue
        with open(path) as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                    ts = float(r["Timestamp"])
                    value = float(r["Value"])
                except (ValueError, KeyError, TypeError):
                    continue
                t = r.get("Type") or ""
                metric = (r.get("Dimension") or "") if t in ("cpu", "gpu") \
                    else (r.get("Name") or "")
                rows.append((t, metric, r.get("NodeId") or "",
                             llround(ts * 1e6), value, r.get("Name") or ""))
    return pd.DataFrame(rows, columns=["type", "metric", "node", "ts_us",
                                       "value", "device"])


def read_framework(root):
    rows = []
    for path in walk(root):
        base = os.path.basename(path)
        parts = base.split("_")
        if "pevents" not in path or not base.endswith(SUFFIXES) or \
                len(parts) < 3 or not parts[0].isdigit():
            continue
        node = framework_node(parts[1])
        with open(path) as fh:
            events = json.load(fh)
        base_us, phase_of_pid = 0, {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                args = e.get("args") or {}
                if "start_time_since_epoch_in_micros" in args:
                    base_us = int(args["start_time_since_epoch_in_micros"])
                elif "name" in args:
                    phase_of_pid[e["pid"]] = args["name"]
                continue
            if e.get("ph") != "X":
                continue
            start = base_us + int(e["ts"])
            end = start + int(e["dur"])
            step = None
            args = e.get("args") or {}
            if "step_num" in args:
                try:
                    step = int(str(args["step_num"]))
                except ValueError:
                    step = None
            rows.append((e["name"], phase_of_pid.get(e["pid"], "Unknown"),
                         node, start, end, step))
    df = pd.DataFrame(rows, columns=["name", "phase", "node", "start_us",
                                     "end_us", "step"])
    df["is_step"] = df["name"].str.startswith("Step:ModeKeys.")
    df["train"] = df["name"].isin(["Step:ModeKeys.TRAIN",
                                   "Step:ModeKeys.GLOBAL"])
    return df


def summary(values):
    v = np.sort(np.asarray(values, dtype=np.float64))
    q = np.quantile(v, [0.5, 0.95, 0.99])
    return {"count": int(len(v)), "mean": float(np.mean(v)),
            "min": float(v[0]), "max": float(v[-1]), "p50": float(q[0]),
            "p95": float(q[1]), "p99": float(q[2])}


def compute(args):
    sysdf = read_system(args.dir)
    fw = read_framework(args.dir)
    out = {}
    sel = None
    if args.time:
        a, b = args.time.split(":")
        sel = (llround(float(a) * 1e6), llround(float(b) * 1e6))
    if args.by_step:
        a, b = (int(x) for x in args.by_step.split(":"))
        st = fw[fw["train"] & fw["step"].notna() & (fw["step"] >= a) &
                (fw["step"] <= b)]
        lo, hi = int(st["start_us"].min()), int(st["end_us"].max())
        sel = (max(lo, sel[0]), min(hi, sel[1])) if sel else (lo, hi)
    steps_all = fw[fw["is_step"]]
    if sel:
        sysdf = sysdf[(sysdf["ts_us"] >= sel[0]) & (sysdf["ts_us"] <= sel[1])]
        fw = fw[(fw["start_us"] >= sel[0]) & (fw["end_us"] <= sel[1])]
        out["selection"] = {"from_us": sel[0], "to_us": sel[1]}
    else:
        out["selection"] = None

    # job
    if len(sysdf):
        start, end = int(sysdf["ts_us"].min()), int(sysdf["ts_us"].max())
    else:
        start, end = int(fw["start_us"].min()), int(fw["end_us"].max())
    job = {"start_us": start, "end_us": end, "duration_us": end - start}
    tr = fw[fw["train"]]
    loop_start, loop_end = int(tr["start_us"].min()), int(fw["end_us"].max())
    dur = end - start
    job.update({
        "training_loop_start_us": loop_start,
        "training_loop_end_us": loop_end,
        "training_loop_duration_us": loop_end - loop_start,
        "initialization_us": loop_start - start,
        "finalization_us": end - loop_end,
        "initialization_pct": (loop_start - start) / dur * 100.0,
        "training_loop_pct": (loop_end - loop_start) / dur * 100.0,
        "finalization_pct": (end - loop_end) / dur * 100.0})
    out["job"] = job

    # training-phase intervals per framework node
    phases = []
    st = fw[fw["is_step"]].copy()
    st["nb"] = st["node"].map(lambda s: s.encode())
    st["mb"] = st["name"].map(lambda s: s.encode())
    st = st.sort_values(["nb", "start_us", "end_us", "mb"], kind="stable")
    for node, g in st.groupby("nb", sort=True):
        run_id = (g["name"] != g["name"].shift()).cumsum()
        runs = g.groupby(run_id, sort=False).agg(
            name=("name", "first"), start=("start_us", "min"),
            end=("end_us", "max"))
        nd = node.decode()
        prev = None

        def add(a, b, name):
            if b >= a:
                phases.append({"node": nd, "phase": name, "start_us": int(a),
                               "end_us": int(b)})
        for r in runs.itertuples():
            if prev is None:
                add(start, r.start - 1, "Before " + r.name)
            else:
                lo_, hi_ = sorted([prev[0], r.name], key=str.encode)
                add(prev[1] + 1, r.start - 1, f"Between {lo_} and {hi_}")
            add(r.start, r.end, r.name)
            prev = (r.name, r.end)
        add(prev[1] + 1, end, "After " + prev[0])
    out["phases"] = phases

    # step durations
    by = args.by
    if by == "training_phase":
        d = fw[fw["is_step"]].copy()
        d["group"] = d["name"]
        d["duration"] = d["end_us"] - d["start_us"]
    else:
        d = fw.copy()
        # events without step_num: the latest TRAIN/GLOBAL step of the node
        # that started at or before them, if they start before it ends
        tsteps = steps_all[steps_all["train"] & steps_all["step"].notna()]
        per_node = {n: g.sort_values(["start_us", "step"])
                    for n, g in tsteps.groupby("node")}

        def step_of(row):
            if row.step is not None and not pd.isna(row.step):
                return row.step
            if row.is_step:
                return None
            g = per_node.get(row.node)
            if g is None:
                return None
            i = np.searchsorted(g["start_us"].values, row.start_us,
                                side="right")
            if i == 0 or row.start_us > g["end_us"].values[i - 1]:
                return None
            return g["step"].values[i - 1]
        d["step2"] = [step_of(r) for r in d.itertuples()]
        d = d[d["step2"].notna()]
        d["group"] = d["name"] if by == "framework_metric" else d["phase"]
        d = d.groupby(["group", "node", "step2"]).agg(
            start_us=("start_us", "min"), end_us=("end_us", "max")
        ).reset_index()
        d["duration"] = d["end_us"] - d["start_us"]
    groups = []
    for gname in sorted(d["group"].unique(), key=str.encode):
        row = {"group": gname}
        row.update(summary(d[d["group"] == gname]["duration"].values))
        groups.append(row)
    out["steps"] = {"by": by, "groups": groups}

    # utilization, overall and per phase name
    util = []
    for (t, m, n), g in sysdf.groupby(["type", "metric", "node"]):
        row = {"resource": t, "metric": m, "node": n, "phase": None}
        row.update(summary(g["value"].values))
        util.append(row)
    if args.per_phase:
        fnodes = sorted({p["node"] for p in phases}, key=str.encode)

        def phase_name(node, ts):
            f = next((x for x in fnodes if x == node or
                      x.startswith(node + "-")), None)
            if f is None:
                return None
            for p in phases:  # in time order; the first that holds ts
                if p["node"] == f and p["start_us"] <= ts <= p["end_us"]:
                    return p["phase"]
            return None
        s2 = sysdf.copy()
        s2["ph"] = [phase_name(n, t) for n, t in
                    zip(s2["node"].values, s2["ts_us"].values)]
        s2 = s2[s2["ph"].notna()]
        for (t, m, n, ph), g in s2.groupby(["type", "metric", "node", "ph"]):
            row = {"resource": t, "metric": m, "node": n, "phase": ph}
            row.update(summary(g["value"].values))
            util.append(row)
    util.sort(key=lambda r: (r["resource"].encode(), r["metric"].encode(),
                             r["node"].encode(), r["phase"] is not None,
                             (r["phase"] or "").encode()))
    out["utilization"] = util

    # device usage buckets
    ranges = [(90.0, 100.0), (10.0, 90.0), (0.0, 10.0)]
    if args.ranges:
        ranges = [tuple(float(x) for x in r.split(":"))
                  for r in args.ranges.split(",")]
    rows = []
    u = sysdf[sysdf["metric"].isin(["CPUUtilization", "GPUUtilization"])]
    for (m, n), g in sorted(u.groupby(["metric", "node"]),
                            key=lambda kv: (kv[0][0].encode(),
                                            kv[0][1].encode())):
        counts = [0] * len(ranges)
        for v in g["value"].values:
            for i, (a, b) in enumerate(ranges):
                if a <= v <= b:
                    counts[i] += 1
                    break
        rows.append({"metric": m, "node": n, "samples": int(len(g)),
                     "counts": counts})
    out["usage"] = {"ranges": [list(r) for r in ranges], "rows": rows}
    out["gpu_heatmap"] = heatmap(sysdf)
    return out


def heatmap(sysdf):
    """Mean GPUUtilization per (node, GPU) in at most 120 columns whose
    width is a whole number of seconds (README "Job statistics")."""
    g = sysdf[(sysdf["type"] == "gpu") & (sysdf["metric"] == "GPUUtilization")]
    if not len(g):
        return None
    lo, hi = int(g["ts_us"].min()), int(g["ts_us"].max())
    per_col = (hi - lo) // 120 + 1
    width = max(1000000, -(-per_col // 1000000) * 1000000)
    ncols = (hi - lo) // width + 1
    g = g.assign(col=(g["ts_us"] - lo) // width)
    rows = []
    for (node, dev), d in sorted(g.groupby(["node", "device"]),
                                 key=lambda kv: (kv[0][0].encode(),
                                                 kv[0][1].encode())):
        mean = [None] * ncols
        for col, cd in d.groupby("col"):
            mean[int(col)] = float(np.mean(np.sort(cd["value"].values)))
        rows.append({"node": node, "gpu": dev, "mean": mean})
    return {"start_us": lo, "bucket_us": width, "columns": int(ncols),
            "rows": rows}


def diff(a, b, path, errors):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                errors.append(f"{path}.{k}: only in "
                              f"{'reference' if k in a else 'trainwatch'}")
            else:
                diff(a[k], b[k], f"{path}.{k}", errors)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            errors.append(f"{path}: {len(a)} items (reference) vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", errors)
    elif a != b or type(a) is bool or type(b) is bool:
        if not (a == b and type(a) is type(b)):
            errors.append(f"{path}: reference {a!r} vs trainwatch {b!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--by", default="training_phase")
    ap.add_argument("--by-step")
    ap.add_argument("--time")
    ap.add_argument("--per-phase", action="store_true")
    ap.add_argument("--ranges")
    ap.add_argument("--compare")
    args = ap.parse_args()
    ref = compute(args)
    if not args.compare:
        json.dump(ref, sys.stdout)
        print()
        return 0
    with open(args.compare) as fh:
        got = json.load(fh)
    got.pop("input", None)
    errors = []
    diff(ref, got, "$", errors)
    def leaves(x):
        if isinstance(x, dict):
            return sum(leaves(v) for v in x.values())
        if isinstance(x, list):
            return sum(leaves(v) for v in x)
        return 1 if isinstance(x, (int, float)) else 0
    numbers = leaves(ref)
    if errors:
        print(f"{len(errors)} difference(s):", *errors[:40], sep="\n  ")
        return 1
    print(f"identical: {len(ref['utilization'])} utilization rows, "
          f"{len(ref['steps']['groups'])} step groups, "
          f"{len(ref['phases'])} phases, {len(ref['usage']['rows'])} usage "
          f"rows ({numbers} numbers compared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
