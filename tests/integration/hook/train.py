#!/usr/bin/env python3
"""A small real PyTorch CPU training job with the trainwatch hook, for the
hook's integration tests and its overhead benchmark.

    train.py --job J --brokers B [--epochs 2] [--batches 160] [--workers 2]
             [--slow-every N --slow-factor 6] [--getitem-sleep S]
             [--init-sleep S] [--no-hook] [--explicit-steps]
             [--profiler-config JSON] [--profiler-output DIR]

A two-layer MLP on a synthetic regression set (fixed seed), a real
torch.utils.data.DataLoader with worker processes, SGD. Each step also
holds the CPU for --step-ms (a matrix product loop) so step times are
well above scheduling noise on a loaded machine. --slow-every N makes
every Nth step --slow-factor times longer (the StepOutlier pathology).
Prints one line `train: steps=... seconds=... hook=k=v ...` at the end.
"""
import argparse
import json
import logging
import time

T0 = time.monotonic()

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Synthetic(Dataset):
    def __init__(self, n, dim, getitem_sleep):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, dim, generator=g)
        self.y = self.x.sum(dim=1, keepdim=True)
        self.sleep = getitem_sleep

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.sleep:
            time.sleep(self.sleep)
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, 64)
        self.fc2 = torch.nn.Linear(64, 1)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def busy(ms):
    """Holds the CPU for about ms milliseconds of real tensor work."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1000.0
    a = torch.ones(64, 64)
    while time.perf_counter() < end:
        a = torch.tanh(a @ a * 0.01)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job")
    ap.add_argument("--brokers")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=80)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--slow-every", type=int, default=0)
    ap.add_argument("--slow-factor", type=float, default=6.0)
    ap.add_argument("--getitem-sleep", type=float, default=0.0)
    ap.add_argument("--init-sleep", type=float, default=0.0)
    ap.add_argument("--eval-batches", type=int, default=0)
    ap.add_argument("--no-hook", action="store_true")
    ap.add_argument("--explicit-steps", action="store_true")
    ap.add_argument("--flush-interval", type=float, default=0.2)
    ap.add_argument("--max-queue", type=int, default=100000)
    ap.add_argument("--close-timeout", type=float, default=15.0)
    ap.add_argument("--profiler-config", help="ProfilerConfig as JSON")
    ap.add_argument("--profiler-output",
                    help="also write the legacy profiler-output folder here")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--detectable-after", type=int, default=11,
                    help="slow steps that make the pathology detectable "
                    "(StepOutlier: n_outliers + 1)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    dim = 32
    data = Synthetic(a.batches * a.batch_size, dim, a.getitem_sleep)
    loader = DataLoader(data, batch_size=a.batch_size, shuffle=True,
                        num_workers=a.workers,
                        persistent_workers=a.workers > 0)
    model = Net(dim)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()

    hook = None
    if not a.no_hook:
        import trainwatch
        config = None
        if a.profiler_config:
            config = trainwatch.ProfilerConfig.from_dict(
                json.loads(a.profiler_config))
        hook = trainwatch.Hook(job=a.job, brokers=a.brokers,
                               profiler_config=config,
                               profiler_output=a.profiler_output,
                               flush_interval=a.flush_interval,
                               max_queue=a.max_queue,
                               close_timeout=a.close_timeout)
        hook.watch(model, optimizer=opt, dataloader=loader)
    if a.init_sleep:
        time.sleep(a.init_sleep)

    steps = 0
    slow_seen = 0
    slow_onset_us = slow_detectable_us = 0
    start = time.monotonic()
    for _ in range(a.epochs):
        model.train()
        for x, y in loader:
            if hook is not None and a.explicit_steps:
                hook.step()
            steps += 1
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            slow = a.slow_every and steps % a.slow_every == 0
            if slow and slow_seen == 0:
                slow_onset_us = time.time_ns() // 1000
            busy(a.step_ms * (a.slow_factor if slow else 1.0))
            if slow:
                slow_seen += 1
                if slow_seen == a.detectable_after:
                    slow_detectable_us = time.time_ns() // 1000
        if a.eval_batches:
            model.eval()
            with torch.no_grad():
                for i, (x, y) in enumerate(loader):
                    if i >= a.eval_batches:
                        break
                    model(x)
    seconds = time.monotonic() - start
    loop_end_us = time.time_ns() // 1000
    summary = hook.close() if hook is not None else None
    extra = ""
    if summary:
        extra = " " + " ".join(f"{k}={v}" for k, v in summary.items()
                               if k != "steps")
    print(f"train: steps={steps} seconds={seconds:.3f} "
          f"step_ms={1000 * seconds / max(steps, 1):.3f} "
          f"startup={start - T0:.2f} slow_steps={slow_seen} "
          f"slow_onset_us={slow_onset_us} "
          f"slow_detectable_us={slow_detectable_us} "
          f"loop_end_us={loop_end_us}{extra}", flush=True)


if __name__ == "__main__":
    main()
