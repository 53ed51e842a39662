#!/usr/bin/env python3
"""Overhead of the Python hook on real PyTorch CPU training.

One process trains two identical copies of a small MLP (same seed, same
data, each with its own real DataLoader with 2 workers) in alternating
blocks of steps: copy A watched by the hook (default settings: flush
every 1 s), copy B not. Each step does a fixed amount of tensor work
(calibrated to --step-ms). The difference between the fastest block of
A and the fastest block of B (other load on the machine only ever adds
time, so the fastest block is each copy's closest estimate), in CPU time
of the training thread and in wall time, is what the hook's callbacks
cost the loop;
the sending thread's own CPU time is reported apart (it encodes and
hands batches to librdkafka beside the loop, on another core when there
is one).

    PYTHONPATH=build/hooks/python /usr/bin/python3 tests/bench/hook_overhead.py \\
        --brokers HOST:PORT [--blocks 40] [--block-steps 25] [--step-ms 10]
        [--profiler-config JSON] [--debugger-config JSON]

--profiler-config: the hook's ProfilerConfig (JSON, from_dict form);
default ProfilerConfig() (no framework profiling).
--debugger-config: a DebuggerHookConfig as JSON, {"hook_parameters":
{...}, "collection_configs": [[name, {params}], ...]} ({} = the default:
losses every 500 steps); the loss module is watched too. Then
tensor_records=, bytes_per_step= (everything the job sent to Kafka,
events included) and debugger_cpu_us_per_step= (training-thread CPU time
inside the debugging side's callbacks: step start with the heartbeat and
the parameters, module and gradient hooks, reductions; timed around each
call, the timer's own cost included: two thread_time() calls per
timed callback, ~2.5 us each on a VM where it is a system call) are
printed as well.

--brokers: a running `trainwatch broker`. Not run by ctest (a figure)."""
import argparse
import copy
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import trainwatch


def work(iters):
    """A fixed amount of tensor work (the same CPU time in every step)."""
    a = torch.ones(64, 64)
    for _ in range(iters):
        a = torch.tanh(a @ a * 0.01)


def calibrate(ms):
    """Iterations of work() that take about ms milliseconds here."""
    n = 200
    t0 = time.thread_time()
    work(n)
    per = (time.thread_time() - t0) / n
    return max(1, int(ms / 1000.0 / per))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--blocks", type=int, default=40)
    ap.add_argument("--block-steps", type=int, default=25)
    ap.add_argument("--step-ms", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--profiler-config")
    ap.add_argument("--debugger-config")
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
                       None, torch.nn.MSELoss()])
    config = None
    if a.profiler_config:
        import json
        config = trainwatch.ProfilerConfig.from_dict(
            json.loads(a.profiler_config))
    debugger = None
    if a.debugger_config is not None:
        import json
        d = json.loads(a.debugger_config)
        debugger = trainwatch.DebuggerHookConfig(
            hook_parameters=d.get("hook_parameters"),
            collection_configs=[trainwatch.CollectionConfig(n, p) for n, p
                                in d.get("collection_configs", [])])
    spent = [0.0]
    if debugger is not None:
        from trainwatch.debugger import Debugger

        def timed(f):
            def run(*x, **k):
                t0 = time.thread_time()
                try:
                    return f(*x, **k)
                finally:
                    spent[0] += time.thread_time() - t0
            return run
        Debugger.step_begin = timed(Debugger.step_begin)
        grad_hook, module_hook = Debugger._grad_hook, Debugger._module_hook
        Debugger._grad_hook = lambda self, n: timed(grad_hook(self, n))
        Debugger._module_hook = lambda self, n, r: timed(
            module_hook(self, n, r))
    hook = trainwatch.Hook(job=f"overhead-{int(time.time())}",
                           brokers=a.brokers, profiler_config=config,
                           debugger_config=debugger)
    hook.watch(copies[0][0], optimizer=copies[0][1], dataloader=copies[0][2],
               loss=copies[0][4] if debugger is not None else None)

    def batch(c):
        while True:
            if c[3] is None:
                c[3] = iter(c[2])
            try:
                return next(c[3])
            except StopIteration:
                c[3] = None

    iters = calibrate(a.step_ms)
    wall, cpu = ([], []), ([], [])
    for blk in range(2 * a.blocks):
        k = blk % 2
        c = copies[k]
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(a.block_steps):
            xb, yb = batch(c)
            c[1].zero_grad()
            c[4](c[0](xb), yb).backward()
            c[1].step()
            work(iters)
        wall[k].append((time.perf_counter() - t0) / a.block_steps * 1000)
        cpu[k].append((time.thread_time() - c0) / a.block_steps * 1000)
    s = hook.close()
    steps = a.blocks * a.block_steps

    def diff(x):
        # other load only ever adds time: the fastest block of each copy
        # is its closest estimate
        return min(x[1]), min(x[0]) - min(x[1])

    cpu_o, cpu_d = diff(cpu)
    wall_o, wall_d = diff(wall)
    # CPU time of the training thread is what the callbacks cost; wall
    # time also moves with whatever else runs on the machine
    print(f"steps_per_copy={steps} step_cpu_ms={cpu_o:.3f} "
          f"hook_cpu_us_per_step={1000 * cpu_d:.1f} "
          f"hook_cpu_pct={100 * cpu_d / cpu_o:.2f} "
          f"step_wall_ms={wall_o:.3f} wall_diff_us={1000 * wall_d:.1f} "
          f"sender_cpu_us_per_step={1e6 * s['sender_cpu_s'] / steps:.1f} "
          f"events={s['events']} dropped={s['dropped']} "
          f"undelivered={s['undelivered']} tensor_records={s['tensors']} "
          f"bytes_per_step={s['bytes'] / steps:.1f} "
          f"debugger_cpu_us_per_step={1e6 * spent[0] / steps:.1f}")


if __name__ == "__main__":
    main()
