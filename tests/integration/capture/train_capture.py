#!/usr/bin/env python3
"""A tiny real PyTorch CPU training loop with the trainwatch hook listening
for capture requests, for tests/integration/capture.sh and
tests/bench/capture_overhead.py.

    train_capture.py --job J --brokers B [--rank R --world-size W]
        [--capture-dir DIR] [--step-ms 10] [--slow-every 15
        --slow-factor 6] [--max-steps N] [--max-seconds S]
        [--stop-file F] [--hang-at STEP --hang-seconds S]
        [--gil-hang-at STEP --gil-hang-seconds S]

One explicit hook.step() per iteration of a small MLP (SGD), each step
holding the CPU about --step-ms (a spin without tensor operations). It runs until --max-steps, --max-seconds
or --stop-file exists. --hang-at sleeps in the loop (the main thread hung
in Python, GIL released); --gil-hang-at calls libc sleep() through
ctypes.PyDLL, which keeps the GIL (a hang in C code holding it). Prints
`ready` once the control consumer has its partitions, `hanging` /
`gil-hanging` before a hang, and a summary line at the end.
"""
import argparse
import ctypes
import logging
import os
import time

import torch

import trainwatch


def hang_here(seconds):
    """The frame the stack dump must show (a hung training thread)."""
    time.sleep(seconds)


def gil_hang_here(seconds):
    """libc sleep() through PyDLL: the GIL stays held."""
    ctypes.PyDLL(None).sleep(int(seconds))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world-size", type=int, default=1)
    ap.add_argument("--capture-dir")
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--slow-every", type=int, default=0)
    ap.add_argument("--slow-factor", type=float, default=6.0)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--max-seconds", type=float, default=60.0)
    ap.add_argument("--stop-file")
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--hang-seconds", type=float, default=0.0)
    ap.add_argument("--gil-hang-at", type=int, default=-1)
    ap.add_argument("--gil-hang-seconds", type=float, default=0.0)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers, rank=a.rank,
                           world_size=a.world_size, host="algo-1",
                           flush_interval=0.2, capture_dir=a.capture_dir)
    ctl = hook._control
    if ctl is not None:
        if not ctl.ready.wait(60):
            print("control: no partitions after 60 s", flush=True)
        else:
            print("ready", flush=True)
    start = time.monotonic()
    steps = 0
    while steps < a.max_steps and time.monotonic() - start < a.max_seconds:
        if a.stop_file and steps % 10 == 0 and os.path.exists(a.stop_file):
            break
        hook.step()
        if steps == a.hang_at:
            print("hanging", flush=True)
            hang_here(a.hang_seconds)
        if steps == a.gil_hang_at:
            print("gil-hanging", flush=True)
            gil_hang_here(a.gil_hang_seconds)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        slow = a.slow_every and steps % a.slow_every == a.slow_every - 1
        # a CPU spin without tensor ops: a profiled step then holds the
        # model's few dozen operators, not thousands of spin ops
        end = time.perf_counter() + a.step_ms * (
            a.slow_factor if slow else 1.0) / 1000.0
        while time.perf_counter() < end:
            pass
        steps += 1
    summary = hook.close() or {}
    print(f"train: steps={steps} seconds={time.monotonic() - start:.3f} "
          f"requests={ctl.requests if ctl else 0} "
          f"duplicates={ctl.duplicates if ctl else 0} "
          f"dropped={summary.get('dropped')}", flush=True)


if __name__ == "__main__":
    main()
