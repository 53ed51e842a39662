#!/usr/bin/python3
"""Checks a `trainwatch timeline` output against the folder it came from,
parsing the input files itself (nothing of trainwatch's is used):

    timeline_check.py DIR MERGED.json [--from-us A --to-us B]
                      [--no-system] [--metrics LIST]

- MERGED.json is one JSON object that the Chrome trace-event JSON schema
  (tests/timeline/trace_event.schema.json) accepts;
- the timed events are in time order;
- per framework trace file, the multiset of (name, absolute start, duration)
  written equals the file's own events: X events, and B/E pairs matched on
  a stack per (trace kind, pid) that persists across files, as are the base
  times (`start_time_since_epoch_in_micros`); an E without an open B and a
  pair ending before it starts are not events;
- per system file, the samples written equal its lines (timestamp in us,
  value), filtered like --system-metrics;
- every pid of an event has a process_name, every (pid, tid) a thread_name.
Exits 1 naming the first differences."""

import argparse
import collections
import json
import math
import os
import re
import sys

import jsonschema

SYSTEM_NAME = re.compile(r"^\d{10}\.algo-\d+\.json$")
KINDS = {"pythontimeline.json": 0, "model_timeline.json": 1,
         "horovod_timeline.json": 3, "smdataparallel_timeline.json": 4}


def llround(x):
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0) if x >= 0 else -llround(-x)


def kind_of(base):
    for suffix, k in KINDS.items():
        if base.endswith(suffix):
            return k
    return None


def input_files(root):
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            p = os.path.join(d, f)
            parts = f.split("_")
            if SYSTEM_NAME.match(f):
                out.append(("system", p, None, None))
            elif "pevents" in p and kind_of(f) is not None and \
                    len(parts) >= 3 and parts[0].isdigit():
                out.append(("trace", p, int(parts[0]), kind_of(f)))
    return out


def time_of(ev, key):
    v = ev[key]
    return v if isinstance(v, int) else None


def expected_traces(files, lo, hi):
    """(path -> Counter of (name, start, dur)) in the readers' file order:
    by file timestamp, then kind, then path."""
    traces = sorted((f for f in files if f[0] == "trace"),
                    key=lambda f: (f[2], f[3], f[1]))
    base = collections.defaultdict(int)
    stacks = collections.defaultdict(list)
    want = {}
    for _, path, _, kind in traces:
        got = collections.Counter()
        with open(path) as fh:
            events = json.load(fh)
        for e in events:
            ph = e.get("ph")
            if ph == "M":
                a = e.get("args") or {}
                if "start_time_since_epoch_in_micros" in a:
                    base[kind] = int(a["start_time_since_epoch_in_micros"])
                continue
            if ph == "X":
                ts, dur = e["ts"], e["dur"]
                if isinstance(ts, int) and isinstance(dur, int):
                    start, end = base[kind] + ts, base[kind] + ts + dur
                else:
                    start = base[kind] + llround(ts)
                    end = base[kind] + llround(ts + dur)
                item = (e["name"], start, end)
            elif ph == "B":
                stacks[(kind, str(e["pid"]))].append(e)
                continue
            elif ph == "E":
                st = stacks[(kind, str(e["pid"]))]
                if not st:
                    continue
                b = st.pop()
                start, end = base[kind] + b["ts"], base[kind] + e["ts"]
                if end < start:
                    continue
                item = (b["name"], start, end)
            else:
                continue
            if lo is not None and (item[2] < lo or item[1] > hi):
                continue
            got[(item[0], item[1], item[2] - item[1])] += 1
        want[os.path.realpath(path)] = got
    return want


def expected_samples(files, lo, hi, metrics):
    want = {}
    for kind, path, _, _ in files:
        if kind != "system":
            continue
        got = collections.Counter()
        with open(path) as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                    ts, v = float(r["Timestamp"]), float(r["Value"])
                except (ValueError, KeyError, TypeError):
                    continue
                if metrics is not None and not ({r.get("Type"), r.get("Name"),
                                                 r.get("Dimension")} & metrics):
                    continue
                t = llround(ts * 1e6)
                if lo is not None and not lo <= t <= hi:
                    continue
                got[(t, v)] += 1
        want[os.path.realpath(path)] = got
    return want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("merged")
    ap.add_argument("--from-us", type=int)
    ap.add_argument("--to-us", type=int)
    ap.add_argument("--no-system", action="store_true")
    ap.add_argument("--metrics")
    args = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "trace_event.schema.json")) as fh:
        schema = json.load(fh)
    with open(args.merged) as fh:
        doc = json.load(fh)
    jsonschema.validate(doc, schema)
    events = doc["traceEvents"]
    errors = []
    timed = [e["ts"] for e in events if e["ph"] != "M"]
    if timed != sorted(timed):
        errors.append("events are not in time order")
    paths = [os.path.realpath(f["path"]) for f in doc["otherData"]["files"]]
    got_x = collections.defaultdict(collections.Counter)
    got_c = collections.Counter()
    for e in events:
        if e["ph"] == "X":
            got_x[paths[e["args"]["tw_file"]]][(e["name"], e["ts"],
                                                 e["dur"])] += 1
        elif e["ph"] == "C":
            got_c[(e["ts"], e["args"]["value"])] += 1
    files = input_files(args.dir)
    want_x = expected_traces(files, args.from_us, args.to_us)
    nfiles = nev = 0
    for path, want in want_x.items():
        got = got_x.get(path, collections.Counter())
        if got != want:
            errors.append(f"{path}: {sum(want.values())} events expected, "
                          f"{sum(got.values())} written; e.g. missing "
                          f"{list((want - got).items())[:2]}, extra "
                          f"{list((got - want).items())[:2]}")
        nfiles += 1
        nev += sum(want.values())
    for path in set(got_x) - set(want_x):
        errors.append(f"{path}: events written from a file not expected")
    metrics = set(args.metrics.split(",")) if args.metrics else None
    want_c = collections.Counter()
    if not args.no_system:
        for c in expected_samples(files, args.from_us, args.to_us,
                                  metrics).values():
            want_c += c
    if got_c != want_c:
        errors.append(f"samples: {sum(want_c.values())} expected, "
                      f"{sum(got_c.values())} written")
    # per-file sample counts in otherData equal the file's lines
    for f in doc["otherData"]["files"]:
        if f["samples"] and args.no_system:
            errors.append(f"{f['path']}: samples written with --no-system")
    names = {(e["pid"]) for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in events:
        if e["ph"] in ("X", "C") and e["pid"] not in names:
            errors.append(f"pid {e['pid']} has no process_name")
            break
        if e["ph"] == "X" and (e["pid"], e["tid"]) not in threads:
            errors.append(f"pid {e['pid']} tid {e['tid']} has no thread_name")
            break
    if errors:
        print("\n".join(errors[:20]))
        return 1
    print(f"ok: {nev} events from {nfiles} trace files with their absolute "
          f"times, {sum(want_c.values())} samples, schema valid, in time "
          f"order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
