#!/usr/bin/env python3
"""A small real data-parallel PyTorch job on CPU for the FailSlow tests and
corpus: N ranks (torch.distributed, gloo, processes forked from this one),
each with the trainwatch hook (rank r is node algo-1-r), training a tiny
MLP: forward, backward, an all_reduce of the gradients, SGD. A GPU's kernel
time is emulated by a sleep of --step-ms in the forward pass (so several
ranks on a few loaded cores measure the job, not CPU contention). Every
--eval-every steps an evaluation pass (--eval-steps forwards under
model.eval()), every --ckpt-every steps rank 0 saves a checkpoint and
sleeps --ckpt-sleep (a larger save) while the others wait at a barrier.

--slow-rank R --slow-factor F: from TRAIN step --slow-from on (random in
[--slow-min, --slow-max] with --seed when not given), rank R's forward
pass also sleeps (F - 1) x its median step time so far: its steps take
about F x as long, and every other rank waits for it in the all_reduce.

    train_ddp.py --job J --brokers B --ranks 3 --steps 400 [--slow-rank 1
        --slow-factor 1.2] [--profiler-output DIR]

Prints one line: `ddp: job=J ranks=N steps=S slow_rank=R slow_factor=F
slow_from=K slow_onset_us=T loop_end_us=E` (slow_rank -1: healthy;
slow_onset_us: wall time at the start of step K's forward on rank R).
"""
import argparse
import os
import random
import socket
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


class Net(torch.nn.Module):
    def __init__(self, dim, step_s):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, 64)
        self.fc2 = torch.nn.Linear(64, 1)
        self.step_s = step_s
        self.extra_s = 0.0  # the slow rank's added time

    def forward(self, x):
        time.sleep(self.step_s + self.extra_s)
        return self.fc2(torch.relu(self.fc1(x)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, a, port, slow_from, result):
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=a.ranks)
    import trainwatch
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers, rank=rank,
                           world_size=a.ranks, host="algo-1",
                           flush_interval=0.2,
                           profiler_output=a.profiler_output)
    dim = 16
    model = Net(dim, a.step_ms / 1000.0)
    hook.watch(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.MSELoss()
    x = torch.randn(32, dim)
    y = x.sum(dim=1, keepdim=True)
    ckpt = os.path.join(tempfile.gettempdir(),
                        f"tw-ddp-{os.getpid()}.pt")
    steps = []
    onset_us = 0
    dist.barrier()
    t_prev = time.monotonic()
    for k in range(a.steps):
        if a.eval_every and k and k % a.eval_every == 0:
            model.eval()
            with torch.no_grad():
                for _ in range(a.eval_steps):
                    model(x)
            model.train()
        if a.ckpt_every and k and k % a.ckpt_every == 0:
            if rank == 0:
                torch.save(model.state_dict(), ckpt)
                time.sleep(a.ckpt_sleep)
            dist.barrier()
        if rank == a.slow_rank and k == slow_from:
            model.extra_s = (a.slow_factor - 1.0) * statistics.median(
                steps[-100:])
            onset_us = time.time_ns() // 1000
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(flat)
        flat /= a.ranks
        i = 0
        for p in model.parameters():
            n = p.numel()
            p.grad.copy_(flat[i:i + n].view_as(p))
            i += n
        opt.step()
        now = time.monotonic()
        steps.append(now - t_prev)
        t_prev = now
    end_us = time.time_ns() // 1000
    dist.barrier()
    hook.close()
    if os.path.exists(ckpt):
        os.unlink(ckpt)
    result[rank] = (onset_us, end_us)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--ranks", type=int, default=3)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--step-ms", type=float, default=40.0)
    ap.add_argument("--eval-every", type=int, default=150)
    ap.add_argument("--eval-steps", type=int, default=10)
    ap.add_argument("--ckpt-every", type=int, default=120)
    ap.add_argument("--ckpt-sleep", type=float, default=0.5)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-factor", type=float, default=1.2)
    ap.add_argument("--slow-from", type=int)
    ap.add_argument("--slow-min", type=int, default=100)
    ap.add_argument("--slow-max", type=int, default=200)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--profiler-output")
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    slow_from = a.slow_from if a.slow_from is not None else rnd.randint(
        a.slow_min, a.slow_max)
    if a.slow_rank < 0:
        slow_from = -1
    port = free_port()
    with mp.Manager() as m:
        result = m.dict()
        mp.start_processes(worker, args=(a, port, slow_from, result),
                           nprocs=a.ranks, start_method="fork")
        onset = result[a.slow_rank][0] if a.slow_rank >= 0 else 0
        end = max(v[1] for v in result.values())
    print(f"ddp: job={a.job} ranks={a.ranks} steps={a.steps} "
          f"slow_rank={a.slow_rank} slow_factor={a.slow_factor} "
          f"slow_from={slow_from} slow_onset_us={onset} loop_end_us={end}",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
