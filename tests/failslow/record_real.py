#!/usr/bin/env python3
"""Records real PyTorch runs into the FailSlow corpus: runs train_ddp.py
(gloo, several ranks, the trainwatch hook) with a `trainwatch broker`
beside it, reads the hook's legacy profiler-output folder (its trace
files: every TRAIN/EVAL step and forward pass of each rank), and writes
them as tests/failslow/real/<name>.csv (corpus.py's format), with the run
and its label added to corpus.json (an entry of that name is replaced).

    record_real.py BUILD_DIR NAME --ranks 3 --steps 400 [--slow-rank 1
        --slow-factor 1.2 --seed S] [train_ddp.py options]

Times in the CSV are from the earliest event of the run; the label's
onset_us is the slow rank's onset (train_ddp.py's slow_onset_us) on the
same scale.
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = {"Step:ModeKeys.TRAIN": "T", "Step:ModeKeys.EVAL": "E",
         "Forward-SubModuleInternal": "F"}


def read_folder(root):
    """(rank, kind, step, start_us, dur_us) of every step and forward
    event in the hook's trace files, absolute times."""
    out = []
    for path in glob.glob(os.path.join(root, "framework", "pevents", "*",
                                       "*_pythontimeline.json")):
        rank = int(re.match(r"\d+_(\d+)-", os.path.basename(path)).group(1))
        with open(path) as f:
            events = json.load(f)
        base, phase = 0, {}
        for e in events:
            if e.get("ph") == "M" and e.get("name") == "process_name":
                args = e.get("args", {})
                if "start_time_since_epoch_in_micros" in args:
                    base = args["start_time_since_epoch_in_micros"]
                elif "name" in args:
                    phase[e["pid"]] = args["name"]
        for e in events:
            if e.get("ph") != "X":
                continue
            kind = KINDS.get(phase.get(e["pid"], ""))
            if kind is None:
                continue
            step = int(e.get("args", {}).get("step_num", -1))
            out.append((rank, kind, step, base + e["ts"], e["dur"]))
    out.sort(key=lambda x: (x[0], x[3], x[1] != "T"))
    return out


def main():
    build, name = sys.argv[1], sys.argv[2]
    train_args = sys.argv[3:]
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "hooks", "python"))
    with tempfile.TemporaryDirectory(prefix="tw-record-") as work:
        boot = os.path.join(work, "bootstrap")
        broker = subprocess.Popen([os.path.join(build, "trainwatch"),
                                   "broker", "--bootstrap-file", boot],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if os.path.exists(boot) and os.path.getsize(boot):
                    break
                subprocess.run(["sleep", "0.1"])
            brokers = open(boot).read().strip()
            po = os.path.join(work, "po")
            line = subprocess.run(
                [sys.executable, os.path.join(HERE, "train_ddp.py"),
                 "--job", name, "--brokers", brokers,
                 "--profiler-output", po] + train_args,
                env=env, capture_output=True, text=True,
                check=True).stdout.strip().splitlines()[-1]
        finally:
            broker.terminate()
            broker.wait()
        info = dict(kv.split("=", 1) for kv in line.split()[1:])
        events = read_folder(po)
    t0 = min(e[3] for e in events)
    os.makedirs(os.path.join(HERE, "real"), exist_ok=True)
    rel = os.path.join("real", f"{name}.csv")
    with open(os.path.join(HERE, rel), "w") as f:
        f.write(f"# {line}\n# rank,kind,step,start_us,dur_us (from the "
                f"run's first event)\n")
        for r, k, s, start, dur in events:
            f.write(f"{r},{k},{s},{start - t0},{dur}\n")
    fault = None
    if int(info["slow_rank"]) >= 0:
        fault = {"rank": int(info["slow_rank"]),
                 "factor": float(info["slow_factor"]),
                 "onset": int(info["slow_from"]),
                 "onset_us": int(info["slow_onset_us"]) - t0}
    entry = {"name": name, "kind": "real", "file": rel,
             "ranks": int(info["ranks"]), "sync": True, "fault": fault}
    path = os.path.join(HERE, "corpus.json")
    with open(path) as f:
        corpus = json.load(f)
    corpus["runs"] = [r for r in corpus["runs"] if r["name"] != name]
    corpus["runs"].append(entry)
    with open(path, "w") as f:
        json.dump(corpus, f, indent=1)
        f.write("\n")
    print(f"{name}: {len(events)} events, {line}")


if __name__ == "__main__":
    main()
