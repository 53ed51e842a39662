#!/usr/bin/python3
"""Differential harness: trainwatch's `reference` semantics against the
reference implementation (tests/diff/README.md).

For every job of the matrix: `trainwatch synth` writes a folder,
`trainwatch eval --semantics reference --json` and the reference runner
(run_reference.py --modes report) evaluate it, and compare.py compares
every ProfilerReport sub-rule cell by cell. Prints each job's counts and
every difference, then the totals (jobs, cells compared, cells equal,
differences, reference crashes). Exit status 1 when a cell differs.

Needs the reference (TW_REF_MIRROR, see ../shared/reference/README.md);
not part of CI's required run.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

HOUR_EDGE = "1700006340"  # 60 s before the hour 2023-11-14T23:00:00Z
PRESETS = [
    "healthy",
    "low_gpu",
    "gpu_fluctuation",
    "cpu_bottleneck",
    "io_bottleneck",
    "gpu_memory_growth",
    "small_batch",
    "step_outliers",
    "load_imbalance",
    "slow_init",
    "dataloader",
    "straggler",
]

# Shapes: extra synth options (docs/synth.md, "Shapes for differential
# testing"). Each is run on a short job so that the reference takes seconds.
SHAPES = {
    "plain": [],
    "ranks2_shared_pids": ["--ranks-per-node", "2", "--pids", "shared"],
    "ranks2_per_rank_pids": ["--ranks-per-node", "2", "--pids", "per-rank"],
    "long_steps_rotating": ["--step-ms", "4300", "--rotate-s", "23"],
    "eval_interleaved": ["--eval-every", "7"],
    "hour_boundary": ["--start", HOUR_EDGE],
    "aligned_samples": ["--aligned-samples"],
    "missing_gpu_series": ["--missing-gpu-series"],
    "detailed_profiling": ["--detailed-steps", "250"],
    "horovod": ["--horovod"],
    "horovod_rotating": ["--horovod", "--step-ms", "4300", "--rotate-s", "23"],
    "everything": [
        "--ranks-per-node", "2", "--step-ms", "2900", "--rotate-s", "13",
        "--eval-every", "5", "--start", HOUR_EDGE, "--aligned-samples",
        "--detailed-steps", "40",
    ],
}


def matrix(quick):
    """(name, synth args) for every job."""
    jobs = []
    seeds = [1] if quick else [1, 2]
    # Every preset at its default length (its rule passes patience).
    for p in PRESETS:
        for seed in seeds:
            nodes = "4" if p == "straggler" else "1"
            args = ["--preset", p, "--seed", str(seed), "--nodes", nodes]
            if p == "slow_init":
                args += ["--duration", "1500"]  # init 24 min: MaxInit scans
            jobs.append(("%s-s%d" % (p, seed), args,
                         ("report", "standalone")))
    # Every shape on short jobs of several presets and node counts.
    shape_presets = ["healthy", "step_outliers", "dataloader", "low_gpu"]
    for shape, extra in SHAPES.items():
        if shape == "plain":
            continue
        for i, p in enumerate(shape_presets):
            if quick and i > 1:
                break
            for nodes in ([2] if quick else [1, 3]):
                seed = 10 + i * 7 + nodes
                args = ["--preset", p, "--seed", str(seed), "--nodes",
                        str(nodes), "--duration", "300"] + extra
                # Both modes where events span the scan boundaries most.
                modes = ("report", "standalone") if shape in (
                    "long_steps_rotating", "everything",
                    "detailed_profiling", "horovod_rotating") else ("report",)
                jobs.append(("%s-%s-n%d-s%d" % (shape, p, nodes, seed), args,
                             modes))
    return jobs


GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
RULE_KEYS = ("status", "windows", "RuleTriggered", "Violations", "Datapoints",
             "triggered_intervals", "RuleParameters", "Details")


def golden_trim(ref_json):
    """The reference's output without paths and timings: what is committed."""
    pr = ref_json["ProfilerReport"]
    return {
        "reference": {k: ref_json["reference"][k] for k in ("repo", "rev",
                                                          "commit")},
        "first_timestamp_us": ref_json["first_timestamp_us"],
        "latest_timestamp_us": ref_json["latest_timestamp_us"],
        "ProfilerReport": {
            "status": pr["status"],
            "windows": pr["windows"],
            "rules": {n: {k: e.get(k) for k in RULE_KEYS}
                      for n, e in pr["rules"].items()},
        },
    }


def write_golden(results):
    """golden/<job>.json for each job of golden/jobs.json (-> results)."""
    for res in results:
        if "error" in res or res["crashes"]:
            sys.exit("run_diff: golden job %s failed or crashed the "
                     "reference; pick another" % res["name"])
        with open(res["ref_json"]) as f:
            trimmed = golden_trim(json.load(f))
        with open(os.path.join(GOLDEN_DIR, res["name"] + ".json"), "w") as f:
            json.dump(trimmed, f, indent=1, sort_keys=True)
            f.write("\n")


def crash_cause(ref_json):
    """Which sub-rules fired in the window where ProfilerReport crashed."""
    pr = ref_json.get("ProfilerReport") or {}
    w = pr.get("windows")
    fired = sorted(n for n, e in (pr.get("rules") or {}).items()
                   if any(t[0] == (w or 0) - 1
                          for t in e.get("triggered_intervals") or []))
    return "window %s, sub-rules that fired in it: %s" % (
        (w or 0) - 1, ", ".join(fired) or "none")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, **kw)


def standalone(tw, ref_runner, d):
    """Every rule on its own in both: (cells, equal, diffs, crashes)."""
    cfg = d + ".standalone.yaml"
    with open(cfg, "w") as f:
        f.write("semantics: reference\nrules:\n")
        for rule in compare.STANDALONE:
            f.write("  - name: %s\n" % rule)
    trig = d + ".standalone.triggered"
    r = run([tw, "eval", d, "--rules", cfg, "--json", "--triggered", trig])
    if r.returncode not in (0, 1):
        raise RuntimeError("eval standalone rc %d: %s" % (r.returncode,
                                                         r.stderr[-500:]))
    tw_json = json.loads(r.stdout)
    triggered = compare.read_triggered(trig)
    out = d + ".ref-standalone.json"
    run(["/usr/bin/python3", ref_runner, d, "--modes", "standalone",
         "-o", out])
    with open(out) as f:
        ref_json = json.load(f)
    rc, crashes = compare.ref_standalone_cells(ref_json, windows=True)
    n, same, diffs = compare.compare(
        compare.tw_cells(tw_json, True, triggered), rc)
    diffs = [("standalone/" + d[0],) + tuple(d[1:]) for d in diffs]
    crashes = {"standalone/" + k: v for k, v in crashes.items()}
    return n, same, diffs, crashes


def one_job(tw, ref_runner, work, name, args, modes=("report",)):
    d = os.path.join(work, name)
    r = run([tw, "synth", d] + args)
    if r.returncode != 0:
        return {"name": name, "error": "synth: " + r.stderr.strip()}
    t0 = time.time()
    trig = d + ".triggered"
    r = run([tw, "eval", d, "--semantics", "reference", "--json",
             "--triggered", trig])
    t_tw = time.time() - t0
    if r.returncode not in (0, 1):
        return {"name": name, "error": "eval rc %d: %s" % (r.returncode,
                                                           r.stderr[-500:])}
    tw_json = json.loads(r.stdout)
    out = d + ".ref.json"
    t0 = time.time()
    r = run(["/usr/bin/python3", ref_runner, d, "--modes", "report",
             "-o", out])
    t_ref = time.time() - t0
    if r.returncode != 0 and not os.path.exists(out):
        return {"name": name, "error": "reference: " + r.stderr[-500:]}
    with open(out) as f:
        ref_json = json.load(f)
    rc, crashes = compare.ref_cells(ref_json, windows=True)
    if "ProfilerReport" in crashes:
        crashes["ProfilerReport"] += "; " + crash_cause(ref_json)
    n, same, diffs = compare.compare(
        compare.tw_cells(tw_json, triggered=compare.read_triggered(trig)), rc)
    if "standalone" in modes:
        t0 = time.time()
        try:
            sn, ss, sd, sc = standalone(tw, ref_runner, d)
        except (RuntimeError, OSError, ValueError) as e:
            return {"name": name, "error": "standalone: %s" % e}
        t_ref += time.time() - t0
        n, same, diffs = n + sn, same + ss, diffs + sd
        crashes.update(sc)
    shutil.rmtree(d, ignore_errors=True)
    return {"name": name, "args": args, "cells": n, "equal": same,
            "diffs": diffs, "crashes": crashes, "tw_s": t_tw, "ref_s": t_ref,
            "ref_json": out}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build"))
    ap.add_argument("--reference",
                    default=os.path.join(root, "..", "shared", "reference",
                                         "run_reference.py"))
    ap.add_argument("--quick", action="store_true",
                    help="one seed, fewer shape jobs")
    ap.add_argument("--only", help="run jobs whose name contains this")
    ap.add_argument("-j", type=int, default=2, help="jobs in parallel")
    ap.add_argument("--json", help="write the per-job results here")
    ap.add_argument("--write-golden", action="store_true",
                    help="run the jobs of golden/jobs.json and write the "
                    "reference's outputs next to it")
    ap.add_argument("--work", help="folder for the generated jobs "
                    "(default: a temporary one, removed)")
    a = ap.parse_args()
    if not os.environ.get("TW_REF_MIRROR"):
        sys.exit("run_diff: set TW_REF_MIRROR (../shared/reference/README.md)")
    sys.stdout.reconfigure(line_buffering=True)
    tw = os.path.join(a.build, "trainwatch")
    if a.write_golden:
        with open(os.path.join(GOLDEN_DIR, "jobs.json")) as f:
            jobs = list(json.load(f).items())
    else:
        jobs = matrix(a.quick)
    jobs = [j for j in jobs if not a.only or a.only in j[0]]
    work = a.work or tempfile.mkdtemp(prefix="tw-diff-")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    tot_cells = tot_eq = 0
    crashes = []
    errors = []
    results = []
    ex = ThreadPoolExecutor(max_workers=a.j)
    # Printed as the jobs finish (in matrix order), so a long run shows
    # its progress.
    for res in ex.map(lambda j: one_job(tw, a.reference, work, *j), jobs):
        results.append(res)
        if "error" in res:
            errors.append(res)
            print("%-45s ERROR %s" % (res["name"], res["error"]))
            continue
        tot_cells += res["cells"]
        tot_eq += res["equal"]
        print("%-45s cells %5d equal %5d  (eval %.1f s, reference %.1f s)" %
              (res["name"], res["cells"], res["equal"], res["tw_s"],
               res["ref_s"]))
        for rule, key, tv, rv in res["diffs"]:
            print("    DIFF %s %s: trainwatch %s, reference %s" %
                  (rule, key, tv, rv))
        for rule, why in res["crashes"].items():
            crashes.append((res["name"], rule, why))
            print("    REFERENCE CRASH %s: %s" % (rule, why))
    ex.shutdown()
    ndiff = tot_cells - tot_eq
    print("\njobs %d (errors %d), cells compared %d, cells equal %d, "
          "differences %d, reference crashes %d, %.0f s" %
          (len(results), len(errors), tot_cells, tot_eq, ndiff, len(crashes),
           time.time() - t0))
    if a.write_golden:
        write_golden(results)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if ndiff or errors else 0)


if __name__ == "__main__":
    main()
