#!/usr/bin/env python3
"""A real PyTorch training script with the hook's stop channel: a small
MLP, steps padded to --step-ms (--slow-ms from step --slow-from on), the
hook counting steps by the model's forwards. Prints "step N START_US" (flushed) as each step begins. It does
not catch StopTraining: the process ends as an uncaught one ends it."""
import argparse
import sys
import time

import torch

import trainwatch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--step-ms", type=float, default=20)
    ap.add_argument("--slow-from", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    crit = torch.nn.CrossEntropyLoss()
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers,
                           debugger_config=trainwatch.DebuggerHookConfig(),
                           stop_file=a.stop_file, flush_interval=0.2)
    hook.watch(model, optimizer=opt, loss=crit)
    x = torch.randn(32, 16)
    y = torch.randint(0, 4, (32,))
    for i in range(a.steps):
        t0 = time.monotonic()
        print(f"step {i} {time.time_ns() // 1000}", flush=True)
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        ms = a.slow_ms if 0 <= a.slow_from <= i else a.step_ms
        left = ms / 1000 - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
    print("finished without a stop", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
