"""Tiny data-parallel training on CPU (torch.distributed, gloo, forked
ranks) with the trainwatch hook, for the Progress and StalledTrainingRule
tests (tests/integration/progress.sh). Each rank: explicit hook.step(),
forward, backward, a short sleep standing in for compute, the gradient
all_reduce inside hook.section("allreduce"), the optimizer step.

Faults: --hang-rank R --hang-step K: rank R sleeps before the all_reduce
of step K until killed (prints hang_us=...); --ckpt-step K --ckpt-sleep S:
every rank spends S s in hook.section("checkpoint") after step K;
--eval-every N --eval-steps M: an evaluation pass (mode eval) every N
steps; --stall-step K --stall-sleep S: every rank sleeps S s inside step K,
from a barrier (prints stall_us=...). Prints one summary line per rank."""
import argparse
import os
import sys
import tempfile
import time


def now_us():
    return time.time_ns() // 1000


def rank_main(rank, a, init):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    from trainwatch import Hook
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=a.world)
    hook = Hook(a.job, a.brokers, rank=rank, world_size=a.world,
                host="localhost", flush_interval=0.2, handle_sigterm=False)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 16), torch.randn(32, 1)

    def train_step(k):
        hook.step()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        time.sleep(a.compute)
        if k == a.stall_step:
            # every rank starts its sleep at the same moment: on a loaded
            # machine one could reach it seconds after the other, and the
            # stall would read as one rank behind, not all stopped together
            dist.barrier()
            print(f"rank={rank} stall_us={now_us()} step={k}", flush=True)
            time.sleep(a.stall_sleep)
        if rank == a.hang_rank and k == a.hang_step:
            print(f"rank={rank} hang_us={now_us()} step={k}", flush=True)
            time.sleep(3600)  # until the test ends it
        with hook.section("allreduce"):
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()

    for k in range(a.steps):
        train_step(k)
        if a.eval_every and k % a.eval_every == a.eval_every - 1:
            hook.mode("eval")
            with torch.no_grad():
                for _ in range(a.eval_steps):
                    hook.step()
                    model(x)
                    time.sleep(a.compute)
            hook.mode("train")
        if k == a.ckpt_step:
            with hook.section("checkpoint"):
                with tempfile.TemporaryDirectory() as d:
                    torch.save(model.state_dict(), os.path.join(d, "m.pt"))
                time.sleep(a.ckpt_sleep)
    dist.barrier()
    st = hook.close()
    print(f"rank={rank} done steps={a.steps} dropped={st.get('dropped', 0)}",
          flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True)
    p.add_argument("--brokers", required=True)
    p.add_argument("--world", type=int, default=3)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--compute", type=float, default=0.02)
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=-1)
    p.add_argument("--ckpt-step", type=int, default=-1)
    p.add_argument("--ckpt-sleep", type=float, default=0)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--eval-steps", type=int, default=5)
    p.add_argument("--stall-step", type=int, default=-1)
    p.add_argument("--stall-sleep", type=float, default=0)
    a = p.parse_args()
    import torch  # noqa: F401 (imported once, before the ranks fork)
    import torch.multiprocessing as mp
    fd, path = tempfile.mkstemp(prefix="tw-ddp-")
    os.close(fd)
    os.unlink(path)  # the file store creates it
    try:
        # fork: the ranks share the parent's imported torch (a spawned rank
        # imports it again, seconds each on a loaded machine)
        mp.start_processes(rank_main, args=(a, "file://" + path),
                           nprocs=a.world, start_method="fork")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
