#!/usr/bin/env python3
"""Two ranks (torch.distributed, gloo, CPU, torch.multiprocessing) with
the trainwatch hook listening for capture requests; after --hang-at
steps, rank --hung-rank sleeps before its all_reduce (until --hang-seconds
pass), so the other rank waits inside all_reduce.

    collective_hang.py --job J --brokers B --capture-dir DIR --port P
        [--hang-at 20] [--hung-rank 1] [--hang-seconds 30]

Prints `ready R` per rank once its control consumer has partitions and
`hanging` when the hung rank starts sleeping.
"""
import argparse
import logging
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def sleep_before_all_reduce(seconds):
    """The hung rank's frame: stuck before the collective."""
    time.sleep(seconds)


def rank_main(rank, a):
    import trainwatch
    logging.basicConfig(level=logging.WARNING)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(a.port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers, rank=rank,
                           world_size=2, host="algo-1", flush_interval=0.2,
                           capture_dir=a.capture_dir, handle_sigterm=False)
    # the group join can take long on a loaded machine (an ASan broker
    # beside other tests): wait for it rather than race the request
    t0 = time.monotonic()
    if hook._control is not None and hook._control.ready.wait(150):
        print(f"ready {rank} after {time.monotonic() - t0:.1f} s", flush=True)
    else:
        print(f"not ready {rank} after {time.monotonic() - t0:.1f} s",
              flush=True)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    for step in range(a.hang_at + 1):
        hook.step()
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if step == a.hang_at and rank == a.hung_rank:
            print("hanging", flush=True)
            sleep_before_all_reduce(a.hang_seconds)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        time.sleep(0.01)
    hook.close()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--capture-dir", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--hang-at", type=int, default=20)
    ap.add_argument("--hung-rank", type=int, default=1)
    ap.add_argument("--hang-seconds", type=float, default=30.0)
    a = ap.parse_args()
    mp.spawn(rank_main, args=(a,), nprocs=2, join=True)


if __name__ == "__main__":
    main()
