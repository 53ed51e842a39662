#!/usr/bin/env python3
"""The FailSlow change-detection corpus: labelled step-event streams of
multi-rank training runs, and how to turn one into a `profiler-output`
folder that `trainwatch eval` reads.

Two kinds of runs, both listed with their labels in corpus.json:

  generated  a seed and a few knobs; generate() rebuilds the run exactly
             (Python's random.Random, stable across versions). The model:
             each rank's compute per step is its base time times a
             log-normal noise (sigma from the knobs, larger for short
             steps), plus rare heavy-tail spikes (1 % of steps, 1.5-4x);
             the first steps of the job are slower (warm-up, 3x decaying);
             an evaluation pass (EVAL steps, 0.4x) every `eval_every`
             steps; a checkpoint save every `ckpt_every` steps, either a
             pause between two steps or inside one step (as the hook's
             automatic step counting sees it). `sync`: synchronous data
             parallelism: all ranks start each step together and it lasts
             the slowest rank's compute plus an all-reduce, so every rank's
             step time shifts with the slow one; each rank's forward pass
             (0.35 of its own compute) is recorded. Not `sync`: ranks run
             independently, without forward events. A fault multiplies one
             rank's compute by `factor` from step `onset` on; `job_wide`
             multiplies every rank's (an input-pipeline slowdown: not a
             fail-slow of any rank).
  real       a CSV recorded from a real PyTorch run (record_real.py:
             torch.distributed with gloo on CPU, several ranks, the
             trainwatch hook's events), one line per event:
             rank,kind,step,start_us,dur_us (kind T: TRAIN step, E: EVAL
             step, F: forward), times from the run's start.

Labels: `fault` {rank, factor, onset (step), onset_us (from the start)} or
null for a healthy run.
"""
import csv
import json
import math
import os
import random
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EPOCH_US = 1700000000 * 10**6  # the runs' start: 2023-11-14T22:13:20Z


def load(path=None):
    with open(path or os.path.join(HERE, "corpus.json")) as f:
        return json.load(f)["runs"]


def generate(spec):
    """Events of a generated run: a list of (rank, kind, step, start_us,
    dur_us), and the fault's onset time (us from the start) or None."""
    rnd = random.Random(spec["seed"])
    n, steps, base = spec["ranks"], spec["steps"], spec["step_s"]
    sigma = spec["sigma"]
    fault = spec.get("fault")
    wide = spec.get("job_wide")
    sync = spec.get("sync", False)
    speed = [1.0 + 0.03 * rnd.random() for _ in range(n)]  # rank spread
    events, onset_us = [], None
    t = [2_000_000] * n  # each rank's clock (us): starts after 2 s of init

    def compute(r, k):
        c = base * speed[r] * math.exp(rnd.gauss(0.0, sigma))
        if rnd.random() < 0.01:
            c *= 1.5 + 2.5 * rnd.random()
        if k < 12:
            c *= 1.0 + 2.0 * (12 - k) / 12
        if fault and r == fault["rank"] and k >= fault["onset"]:
            c *= fault["factor"]
        if wide and k >= wide["onset"]:
            c *= wide["factor"]
        return c

    for k in range(steps):
        if k and spec.get("eval_every") and k % spec["eval_every"] == 0:
            for r in range(n):
                for e in range(spec.get("eval_steps", 20)):
                    d = int(0.4 * base * math.exp(rnd.gauss(0, sigma)) * 1e6)
                    events.append((r, "E", e, t[r], d))
                    t[r] += d
            if sync:
                t = [max(t)] * n
        ckpt = spec.get("ckpt_every") and k and k % spec["ckpt_every"] == 0
        pause = int(spec.get("ckpt_s", 10 * base) * 1e6) if ckpt else 0
        inside = ckpt and spec.get("ckpt_inside", False)
        if ckpt and not inside:
            t = [x + pause for x in t]
        comp = [compute(r, k) for r in range(n)]
        if fault and k == fault["onset"]:
            onset_us = t[fault["rank"]]
        if sync:
            comm = 0.1 * base * math.exp(rnd.gauss(0, sigma))
            dur = max(comp) + comm
            for r in range(n):
                d = int((dur + (pause / 1e6 if inside else 0)) * 1e6)
                events.append((r, "T", k, t[r], d))
                events.append((r, "F", k, t[r], int(0.35 * comp[r] * 1e6)))
                t[r] += d
        else:
            for r in range(n):
                d = int((comp[r] + (pause / 1e6 if inside else 0)) * 1e6)
                events.append((r, "T", k, t[r], d))
                t[r] += d
    return events, onset_us


def read_real(path):
    """Events of a recorded real run (same tuples as generate())."""
    out = []
    with open(path) as f:
        for row in csv.reader(f):
            if not row or row[0].startswith("#"):
                continue
            out.append((int(row[0]), row[1], int(row[2]), int(row[3]),
                        int(row[4])))
    return out


def events_of(run):
    """(events, true onset us or None) of a corpus entry."""
    if run["kind"] == "generated":
        ev, onset = generate(run)
        return ev, onset
    ev = read_real(os.path.join(HERE, run["file"]))
    f = run.get("fault")
    return ev, (f["onset_us"] if f else None)


PHASES = {"T": "Step:ModeKeys.TRAIN", "E": "Step:ModeKeys.EVAL",
          "F": "Forward-SubModuleInternal"}


def write_folder(events, out):
    """Writes the events as pythontimeline trace files, one per rank and
    minute of event ends (node id algo-1-<rank>; a file is named by its
    newest event's end, as the hook's legacy writer names them) in
    out/framework/pevents/<hour>/, and the system files (write_system)."""
    chunks = {}
    for e in events:
        minute = (e[3] + e[4]) // 60_000_000
        chunks.setdefault((e[0], minute), []).append(e)
    for (r, _), evs in sorted(chunks.items()):
        head = [{"name": "process_name", "ph": "M", "pid": 0,
                 "args": {"start_time_since_epoch_in_micros": EPOCH_US}}]
        pids = {}
        body = []
        for _, kind, step, start, dur in evs:
            ph = PHASES[kind]
            if ph not in pids:
                pids[ph] = len(pids) + 1
                head.append({"name": "process_name", "ph": "M",
                             "pid": pids[ph], "args": {"name": ph}})
            ev = {"name": ph if kind != "F" else "Net", "ph": "X",
                  "pid": pids[ph], "ts": start, "dur": dur}
            if kind != "F":
                ev["args"] = {"pid": 1000 + r, "step_num": str(step)}
            body.append(ev)
        end = EPOCH_US + max(s + d for _, _, _, s, d in evs)
        hour = time.strftime("%Y%m%d%H", time.gmtime(end // 10**6))
        d = os.path.join(out, "framework", "pevents", hour)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{end}_{r}-algo-1_pythontimeline.json"),
                  "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(x, separators=(",", ":"))
                                       for x in head + body) + "\n]\n")
    write_system(out, max(s + d for _, _, _, s, d in events))


def write_system(out, span_us):
    """The job's span for eval (it ends with its newest system file, named
    by its first sample, and its last, partial scan is not evaluated): one
    CPU sample of node algo-1 every 5 s, a file per minute, up to 2 min
    after the last event (a 60 s scan holding it is complete), and the end
    marker."""
    start = EPOCH_US // 10**6
    end = start + span_us // 10**6 + 120
    for first in range(start, end + 1, 60):
        d = os.path.join(out, "system", "incremental",
                         time.strftime("%Y%m%d%H", time.gmtime(first)))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"{first}.algo-1.json"), "w") as f:
            for t in range(first, min(first + 60, end + 1), 5):
                f.write(json.dumps({"Type": "cpu", "Name": "cpu0",
                                    "Dimension": "CPUUtilization",
                                    "Value": 50, "NodeId": "algo-1",
                                    "Timestamp": float(t)}) + "\n")
    with open(os.path.join(out, "system", "training_job_end.ts"), "w") as f:
        f.write(f"{end}\n")


if __name__ == "__main__":
    import sys
    runs = {r["name"]: r for r in load()}
    ev, onset = events_of(runs[sys.argv[1]])
    write_folder(ev, sys.argv[2])
    print(f"{len(ev)} events, onset_us {onset}")
