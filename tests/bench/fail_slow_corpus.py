#!/usr/bin/env python3
"""fail_slow_corpus.py - runs the FailSlow rule over the labelled
change-detection corpus (tests/failslow/corpus.json, corpus.py) through
`trainwatch eval`, and prints what it found against the labels: runs,
injected faults, precision, recall, median and p95 detection delay, the
onset error, and per run one line. A benchmark, not a timed test.

    tests/bench/fail_slow_corpus.py [BUILD_DIR] [--only SUBSTR] [--json]
        [--corpus FILE]   (another corpus.json, e.g. make_corpus.py --seed
                           S --out FILE: a held-out one)

A fault counts as detected when the faulty rank is named fail-slow; every
other rank named fail-slow (in a healthy run, or besides the faulty rank)
is a false positive. Detection delay: from the true onset (the start of the
first slow step) to the end of the step that confirmed the shift, in
seconds and in steps (the first slow step to the confirming one,
both counted); it is within the goal max(30 s, 10 steps) when either
bound holds. Onset error: the rule's onset step minus
the true one.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "failslow"))
import corpus  # noqa: E402

RULES = """tick: 60s
rules:
  - name: FailSlow
"""


def pct(v, q):
    if not v:
        return float("nan")
    v = sorted(v)
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def evaluate(tw, run, work):
    events, onset_us = corpus.events_of(run)
    folder = os.path.join(work, run["name"])
    corpus.write_folder(events, folder)
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w") as f:
        f.write(RULES)
    out = subprocess.run([tw, "eval", folder, "--rules", rules, "--json",
                          "--quiet"], capture_output=True, text=True,
                         check=True).stdout
    r = [x for x in json.loads(out)["rules"] if x["name"] == "FailSlow"][0]
    return r, onset_us


def main():
    opts = {}
    args = []
    it = iter(sys.argv[1:])
    for a in it:
        if a in ("--only", "--corpus"):
            opts[a] = next(it)
        elif not a.startswith("--"):
            args.append(a)
    build = args[0] if args else os.path.join(ROOT, "build")
    only = opts.get("--only")
    tw = os.path.join(build, "trainwatch")
    os.environ.setdefault("TRAINWATCH_RULES_DIR", os.path.join(build, "rules"))
    runs = [r for r in corpus.load(opts.get("--corpus"))
            if not only or only in r["name"]]
    tp = fp = faults = in_goal = 0
    delays_s, delays_steps, onset_err, lines = [], [], [], []
    by_factor = {}
    with tempfile.TemporaryDirectory(prefix="tw-failslow-") as work:
        for run in runs:
            r, onset_us = evaluate(tw, run, work)
            ranks = r["report"]["Details"]["ranks"]
            named = {int(k.rsplit("-", 1)[1]): v for k, v in ranks.items()
                     if v["verdict"] == "fail-slow"}
            fault = run.get("fault")
            want = fault["rank"] if fault else None
            fp += sum(1 for k in named if k != want)
            note = ""
            if fault:
                faults += 1
                key = fault["factor"]
                by_factor.setdefault(key, [0, 0])[1] += 1
                if want in named:
                    tp += 1
                    by_factor[key][0] += 1
                    d = named[want]
                    delay = (d["detected_us"] - corpus.EPOCH_US - onset_us) / 1e6
                    # steps from the first slow one to the confirming one
                    steps = d["detected_step"] - fault["onset"] + 1
                    ok = delay <= 30.0 or steps <= 10
                    in_goal += ok
                    delays_s.append(delay)
                    delays_steps.append(steps)
                    onset_err.append(d["onset_step"] - fault["onset"])
                    note = (f"found: onset step {d['onset_step']} (true "
                            f"{fault['onset']}), delay {delay:.1f} s = "
                            f"{steps:.0f} steps{'' if ok else ' LATE'}"
                            f", slowdown {d['slowdown']:.2f}")
                else:
                    note = "MISSED"
            extra = [k for k in named if k != want]
            if extra:
                note += f" FALSE POSITIVE ranks {extra}"
            if not fault and not extra:
                note = "nothing (right)"
            lines.append(f"  {run['name']:<24} {run['kind']:<9} "
                         f"ranks {run.get('ranks', '?'):>2} "
                         f"{'sync' if run.get('sync') else '    '} {note}")
    prec = tp / (tp + fp) if tp + fp else 1.0
    rec = tp / faults if faults else 1.0
    print("FailSlow over the change-detection corpus (tests/failslow):")
    print("\n".join(lines))
    print(f"runs {len(runs)}, injected faults {faults}, detected {tp}, "
          f"false positives {fp}")
    print(f"precision {prec:.3f}, recall {rec:.3f}")
    for k in sorted(by_factor):
        print(f"  recall at {k}x: {by_factor[k][0]}/{by_factor[k][1]}")
    print(f"detection delay: median {pct(delays_s, .5):.1f} s "
          f"({pct(delays_steps, .5):.0f} steps), p95 {pct(delays_s, .95):.1f} s "
          f"({pct(delays_steps, .95):.0f} steps); within max(30 s, 10 steps): "
          f"{in_goal}/{tp}")
    abs_err = [abs(e) for e in onset_err]
    print(f"onset error (steps, rule - true): median {pct(onset_err, .5):.0f}, "
          f"median |error| {pct(abs_err, .5):.0f}, p95 |error| "
          f"{pct(abs_err, .95):.0f}")
    if "--json" in sys.argv:
        print(json.dumps({"runs": len(runs), "faults": faults, "tp": tp,
                          "fp": fp, "precision": prec, "recall": rec}))


if __name__ == "__main__":
    main()
