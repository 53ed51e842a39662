#!/usr/bin/env python3
"""The stop channel end to end: stop_train.py runs; after its 30th step
this driver creates the stop file as the engine's stop_file action does
(written aside, renamed; job=, rule=, finding= lines). The script must
end by StopTraining: exit status 1, the message naming the rule on
stderr and no traceback, no step begun more than one step after the
hook's first poll past the file (100 ms), and the hook's JOB_END on the
topic (it flushed and closed first). A stale file (older than the
script) is ignored. Needs TW_BOOTSTRAP and STOP_WORK."""
import math
import os
import subprocess
import sys
import time
import uuid

from tensor_topic import consume

BOOTSTRAP = os.environ.get("TW_BOOTSTRAP")

POLL_S = 0.1
STEP_MS = 20.0


def write_stop(path, job):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"job={job}\nrule=ExplodingTensor\nfinding=NaN in "
                "gradient/Net_0.weight\n")
    os.rename(tmp, path)


def main():
    work = os.environ["STOP_WORK"]
    job = "stop-" + uuid.uuid4().hex[:8]
    template = os.path.join(work, "{job}.stop")
    path = template.replace("{job}", job)
    # a stale file from an earlier run: ignored (mtime an hour back)
    write_stop(path, job)
    old = time.time() - 3600
    os.utime(path, (old, old))
    p = subprocess.Popen(
        [sys.executable, os.path.join(os.path.dirname(__file__),
                                      "stop_train.py"),
         "--job", job, "--brokers", BOOTSTRAP, "--stop-file", template,
         "--step-ms", str(STEP_MS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    starts = []
    created_us = None
    for line in p.stdout:
        if not line.startswith("step "):
            continue
        _, n, us = line.split()
        starts.append((int(n), int(us)))
        if int(n) == 30 and created_us is None:
            os.unlink(path)
            created_us = time.time_ns() // 1000
            write_stop(path, job)
    rc = p.wait(timeout=60)
    exit_us = time.time_ns() // 1000
    err = p.stderr.read()
    assert created_us is not None, "the script never reached step 30"
    assert rc == 1, f"exit status {rc}: {err[-2000:]}"
    assert "training stopped by rule ExplodingTensor" in err, err[-2000:]
    assert "NaN in gradient/Net_0.weight" in err, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert "predates this process" in err, "stale file not reported"
    after = [n for n, us in starts if us > created_us]
    last = starts[-1][0]
    # steps begun after the file: those within one poll interval, plus
    # the one whose boundary saw it (printed, then its forward raised)
    allowed = math.ceil(POLL_S * 1000 / STEP_MS) + 1
    assert len(after) <= allowed, (
        f"{len(after)} steps began after the stop file (allowed "
        f"{allowed})")
    assert last < 100, f"ran to step {last}"
    recs, _ = consume(BOOTSTRAP, job)  # raises without JOB_END
    hb = [r["step"] for r in recs if r["name"] == "heartbeat"]
    # every step that ran has its heartbeat; the one that raised has none
    assert hb == list(range(last)), (hb[-5:], last)
    print(f"stop channel: file at step 30, {len(after)} step(s) began "
          f"after it (allowed {allowed}), last step {last}, exit "
          f"{(exit_us - created_us) / 1000:.0f} ms after the file, "
          f"status {rc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
