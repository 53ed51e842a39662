#!/usr/bin/env python3
"""Writes the generated part of corpus.json (the labelled runs' specs;
corpus.py generates their events) and keeps its real runs. Run once;
the output is committed, so the corpus does not change with this file
unless it is run again."""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))


def spec(rnd, name, fault_factor=None, wide=None, noisy=False):
    step_s = rnd.choice([0.05, 0.1, 0.3, 1.0, 3.0])
    short = step_s < 0.5
    sigma = rnd.uniform(0.04, 0.12) if short else rnd.uniform(0.02, 0.05)
    if noisy:
        sigma *= 1.6
    ranks = rnd.choice([2, 3, 4, 8])
    # the fault's detection budget max(30 s, 10 steps), with margin after it
    budget = max(int(30 / step_s), 10)
    onset = rnd.randint(120, 120 + min(400, 4 * budget))
    steps = onset + 3 * budget + 40
    s = {"name": name, "kind": "generated", "seed": rnd.randrange(1 << 30),
         "ranks": ranks, "steps": steps, "step_s": step_s,
         "sigma": round(sigma, 4), "sync": rnd.random() < 0.5,
         "eval_every": rnd.randint(150, 400), "eval_steps": 20,
         "ckpt_every": rnd.randint(100, 300),
         "ckpt_s": round(step_s * rnd.uniform(5, 20), 3),
         "ckpt_inside": rnd.random() < 0.5, "fault": None}
    if fault_factor:
        s["fault"] = {"rank": rnd.randrange(ranks), "factor": fault_factor,
                      "onset": onset}
    if wide:
        s["job_wide"] = {"factor": wide, "onset": onset}
    return s


def main():
    """make_corpus.py [--seed S --out PATH]: the committed corpus is seed
    2026 into corpus.json; another seed gives a fresh (held-out) corpus."""
    import sys
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) \
        if "--seed" in sys.argv else 2026
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv \
        else os.path.join(HERE, "corpus.json")
    rnd = random.Random(seed)
    runs = []
    for f in (1.1, 1.2, 1.5, 2.0):
        for i in range(10):
            runs.append(spec(rnd, f"gen-slow{f}-{i}", fault_factor=f))
    for i in range(24):
        runs.append(spec(rnd, f"gen-healthy-{i}"))
    for i in range(8):
        runs.append(spec(rnd, f"gen-healthy-noisy-{i}", noisy=True))
    for i in range(6):
        runs.append(spec(rnd, f"gen-jobwide-{i}",
                         wide=round(rnd.uniform(1.3, 1.6), 2)))
    path = out
    real = []
    if os.path.exists(path):
        real = [r for r in json.load(open(path))["runs"]
                if r["kind"] == "real"]
    with open(path, "w") as f:
        json.dump({"runs": runs + real}, f, indent=1)
        f.write("\n")
    print(f"{len(runs)} generated, {len(real)} real runs")


if __name__ == "__main__":
    main()
