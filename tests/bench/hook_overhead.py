#!/usr/bin/env python3
"""Overhead of the Python hook on real PyTorch CPU training.

One process trains two identical copies of a small MLP (same seed, same
data, each with its own real DataLoader with 2 workers) in alternating
blocks of steps: copy A watched by the hook (default settings: flush
every 1 s), copy B not. The difference of the median time per step of
A's and B's blocks is what the hook's callbacks cost the training loop;
the sending thread's own CPU time is reported apart (it runs beside the
loop, on another core when there is one).

    PYTHONPATH=build/hooks/python /usr/bin/python3 tests/bench/hook_overhead.py \\
        --brokers HOST:PORT [--blocks 40] [--block-steps 25] [--step-ms 10]

--brokers: a running `trainwatch broker`. Not run by ctest (a figure)."""
import argparse
import copy
import statistics
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainwatch


def busy(ms):
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1000.0
    a = torch.ones(64, 64)
    while time.perf_counter() < end:
        a = torch.tanh(a @ a * 0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--block-steps", type=int, default=25)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x = torch.randn(4096, 32)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True))
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 1))
    copies = []
    for _ in range(2):
        m = copy.deepcopy(net)
        loader = DataLoader(data, batch_size=16, shuffle=False,
                            num_workers=a.workers, persistent_workers=True)
        copies.append([m, torch.optim.SGD(m.parameters(), lr=0.01), loader,
                       None])
    hook = trainwatch.Hook(job=f"overhead-{int(time.time())}",
                           brokers=a.brokers)
    hook.watch(copies[0][0], optimizer=copies[0][1], dataloader=copies[0][2])
    loss_fn = torch.nn.MSELoss()

    def batch(c):
        while True:
            if c[3] is None:
                c[3] = iter(c[2])
            try:
                return next(c[3])
            except StopIteration:
                c[3] = None

    times = ([], [])
    for blk in range(2 * a.blocks):
        k = blk % 2
        c = copies[k]
        t0 = time.perf_counter()
        for _ in range(a.block_steps):
            xb, yb = batch(c)
            c[1].zero_grad()
            loss_fn(c[0](xb), yb).backward()
            c[1].step()
            busy(a.step_ms)
        times[k].append((time.perf_counter() - t0) / a.block_steps * 1000)
    s = hook.close()
    steps = a.blocks * a.block_steps
    mw, mo = statistics.median(times[0]), statistics.median(times[1])
    diffs = [w - o for w, o in zip(times[0], times[1])]
    md = statistics.median(diffs)
    print(f"steps_per_copy={steps} step_ms_without={mo:.3f} "
          f"step_ms_with={mw:.3f} median_block_diff_us={1000 * md:.1f} "
          f"overhead_pct={100 * md / mo:.2f} events={s['events']} "
          f"sender_cpu_ms_per_step={1000 * s['sender_cpu_s'] / steps:.3f} "
          f"dropped={s['dropped']} undelivered={s['undelivered']}")


if __name__ == "__main__":
    main()
