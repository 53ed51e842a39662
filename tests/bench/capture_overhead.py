#!/usr/bin/env python3
"""The hook's per-step cost of listening for capture requests (control.py)
while none is pending, and the control thread's own CPU while idle.

    PYTHONPATH=build/hooks/python capture_overhead.py BOOTSTRAP [--steps N]

Needs a broker (`trainwatch broker`). One Hook with capture_dir (the
control consumer subscribed and idle); hook.step() timed in alternating
rounds with the hook's control attached and detached (the same hook, the
same sender: the difference is the per-step flag check). Then the control
thread's CPU time (/proc/self/task/<tid>/stat) over an idle period.
Then the whole process's CPU over the same idle period, listening and
with a hook that does not listen. Prints per-step medians in ns, the
check alone, and the idle CPU.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import trainwatch


def thread_cpu_s(tid):
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    hz = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / hz  # utime + stime


def process_cpu_s():
    t = os.times()
    return t.user + t.system


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--idle-only", choices=("listen", "plain"))
    a = ap.parse_args()
    if a.idle_only:
        with tempfile.TemporaryDirectory() as d:
            hook = trainwatch.Hook(
                job="bench-idle", brokers=a.bootstrap, flush_interval=1.0,
                handle_sigterm=False,
                capture_dir=d if a.idle_only == "listen" else None)
            if hook._control is not None:
                hook._control.ready.wait(60)
            hook.step()
            time.sleep(2)
            p0 = process_cpu_s()
            time.sleep(a.idle)
            print(f"idle_cpu_s {process_cpu_s() - p0:.3f}")
            hook.close()
        return
    with tempfile.TemporaryDirectory() as d:
        hook = trainwatch.Hook(job="bench-capture", brokers=a.bootstrap,
                               capture_dir=d, max_queue=10 ** 7,
                               flush_interval=1.0, handle_sigterm=False)
        ctl = hook._control
        assert ctl is not None and ctl.ready.wait(60), "control not ready"
        on, off = [], []
        for r in range(a.rounds):
            for attached, out in ((True, on), (False, off)):
                hook._control = ctl if attached else None
                t0 = time.perf_counter_ns()
                for _ in range(a.steps):
                    hook.step()
                out.append((time.perf_counter_ns() - t0) / a.steps)
        hook._control = ctl
        # the check alone, as hook._boundary does it
        n = 10 ** 6
        h = hook
        t0 = time.perf_counter_ns()
        for _ in range(n):
            c = h._control
            if c is not None and c.pending:
                pass
        check_ns = (time.perf_counter_ns() - t0) / n
        t0 = time.perf_counter_ns()
        for _ in range(n):
            pass
        check_ns -= (time.perf_counter_ns() - t0) / n
        tid = ctl._thread.native_id
        c0, w0 = thread_cpu_s(tid), time.monotonic()
        p0 = process_cpu_s()
        time.sleep(a.idle)
        c1, w1 = thread_cpu_s(tid), time.monotonic()
        p_with = process_cpu_s() - p0
        hook.close()
    # the idle period in fresh processes, listening or not
    idle = {}
    for mode in ("listen", "plain"):
        out = subprocess.run(
            [sys.executable, __file__, a.bootstrap, "--idle-only", mode,
             "--idle", str(a.idle)], capture_output=True, text=True,
            check=True).stdout
        idle[mode] = float(out.split()[-1])
    m_on, m_off = statistics.median(on), statistics.median(off)
    print(f"hook.step() with control idle: median {m_on:.0f} ns "
          f"(rounds {', '.join(f'{x:.0f}' for x in on)})")
    print(f"hook.step() without control:   median {m_off:.0f} ns "
          f"(rounds {', '.join(f'{x:.0f}' for x in off)})")
    print(f"difference: {m_on - m_off:+.0f} ns per step "
          f"({a.rounds} rounds x {a.steps} steps each)")
    print(f"control thread idle: {c1 - c0:.2f} s CPU in {w1 - w0:.1f} s "
          f"({100 * (c1 - c0) / (w1 - w0):.2f} % of one core; clock ticks "
          f"of 1/{os.sysconf('SC_CLK_TCK')} s)")
    print(f"the per-step check alone (attribute + flag): {check_ns:.0f} ns")
    print(f"process idle {a.idle:.0f} s after its steps (this process): "
          f"{p_with:.2f} s CPU")
    print(f"fresh process idle {a.idle:.0f} s (hook sender, librdkafka "
          f"threads): {idle['listen']:.2f} s CPU listening, "
          f"{idle['plain']:.2f} s not listening")


if __name__ == "__main__":
    main()
