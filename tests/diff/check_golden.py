#!/usr/bin/python3
"""Golden-file test: trainwatch's `reference` semantics against outputs the
reference implementation produced (tests/diff/golden/, written by
run_diff.py --write-golden). Needs only the build, not the reference.

For every job of golden/jobs.json: `trainwatch synth` regenerates the
folder from its fixed options, `trainwatch eval --semantics reference
--json` evaluates it, and every ProfilerReport sub-rule cell is compared
with golden/<job>.json. Prints the counts and each difference; exit 1 on
any difference. Usage: check_golden.py BUILD_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import compare  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_golden.py BUILD_DIR")
    tw = os.path.join(sys.argv[1], "trainwatch")
    gdir = os.path.join(HERE, "golden")
    with open(os.path.join(gdir, "jobs.json")) as f:
        jobs = json.load(f)
    if not jobs:
        sys.exit("FAIL: golden/jobs.json lists no job")
    total = same = 0
    failed = []
    with tempfile.TemporaryDirectory(prefix="tw-golden-") as work:
        for name, args in jobs.items():
            d = os.path.join(work, name)
            subprocess.run([tw, "synth", d] + args, check=True,
                           stderr=subprocess.DEVNULL)
            trig = d + ".triggered"
            r = subprocess.run(
                [tw, "eval", d, "--semantics", "reference", "--json",
                 "--triggered", trig],
                stdout=subprocess.PIPE, text=True)
            if r.returncode not in (0, 1):
                failed.append(name)
                print("%s: eval exited %d" % (name, r.returncode))
                continue
            with open(os.path.join(gdir, name + ".json")) as f:
                ref = json.load(f)
            rc, crashes = compare.ref_cells(ref, windows=True)
            if crashes or not rc:
                sys.exit("FAIL: golden %s holds a reference crash or no rule"
                         % name)
            n, eq, diffs = compare.compare(compare.tw_cells(
                json.loads(r.stdout), triggered=compare.read_triggered(trig)),
                rc)
            total += n
            same += eq
            print("%-40s cells %5d equal %5d" % (name, n, eq))
            for rule, key, a, b in diffs:
                print("    DIFF %s %s: trainwatch %s, reference %s"
                      % (rule, key, a, b))
            if diffs:
                failed.append(name)
    print("golden: jobs %d, cells compared %d, cells equal %d"
          % (len(jobs), total, same))
    if failed:
        sys.exit("FAIL: %d job(s) differ from the reference: %s"
                 % (len(failed), " ".join(failed)))


if __name__ == "__main__":
    main()
