#!/usr/bin/env python3
"""Checks the live stop (hook_debugger.sh): stop_live_check.py OUT ERR
STOP_FILE RC STEP_MS SLOW_FROM. The script (stop_train.py) must have
ended by StopTraining (status 1, the rule in the message) and begun no
more steps after the engine wrote the stop file than one poll interval
(100 ms) of its steps plus the one that raised. Prints the figures."""
import math
import os
import sys


def main():
    out, err, stop, rc, step_ms, slow_from = sys.argv[1:7]
    starts = [(int(n), int(us)) for _, n, us in
              (line.split() for line in open(out) if line.startswith("step "))]
    text = open(err).read()
    assert int(rc) == 1, f"exit status {rc}: {text[-1500:]}"
    assert "training stopped by rule StepOutlier" in text, text[-1500:]
    assert "Traceback" not in text, text[-1500:]
    file_us = os.stat(stop).st_mtime_ns // 1000
    after = [n for n, us in starts if us > file_us]
    allowed = math.ceil(100 / float(step_ms)) + 1
    assert len(after) <= allowed, (after, allowed)
    last_n, last_us = starts[-1]
    assert last_n < 2000, "never stopped"
    print(f"live stop: slow steps from {slow_from}, stop file written at "
          f"step {max([n for n, us in starts if us <= file_us], default=-1)}"
          f", {len(after)} step(s) began after it (allowed {allowed}), the "
          f"script raised at step {last_n}, "
          f"{(last_us - file_us) / 1000:.0f} ms after the file")


if __name__ == "__main__":
    main()
