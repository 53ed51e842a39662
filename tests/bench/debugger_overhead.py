#!/usr/bin/env python3
"""Training-thread cost of the hook's debugging side, timed in a loop
(thread CPU time over many calls, so the timer's cost is amortized): the
callbacks of a step that saves nothing (step start with the heartbeat,
the loss module's forward hook) and of a step that saves (the same plus
the reductions of the saved tensors), on the model of hook_overhead.py
(Linear 32x64, ReLU, Linear 64x1; MSELoss). From these, the cost per
step of a configuration saving every N steps is unsaved + (saved -
unsaved) / N. The tensor records go to a plain list (no Kafka): the
encoding runs on the sending thread, measured by hook_overhead.py.

    PYTHONPATH=build/hooks/python /usr/bin/python3 tests/bench/debugger_overhead.py [--calls 3000]

Not run by ctest (a figure)."""
import argparse
import time

import torch

import trainwatch
from trainwatch.debugger import Debugger
from trainwatch.sender import SenderStats


def setup(collections):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                              torch.nn.Linear(64, 1))
    loss = torch.nn.MSELoss()
    cfg = trainwatch.DebuggerHookConfig(hook_parameters={
        "save_interval": "1"}, collection_configs=[
        trainwatch.CollectionConfig(n, {"save_interval": "1"})
        for n in collections])
    out = []
    d = Debugger(cfg, out.append, SenderStats())
    d.watch(net)
    d.watch_loss(loss)
    x, y = torch.randn(16, 32), torch.randn(16, 1)
    value = loss(net(x), y)
    value.backward()
    grads = [(f"gradient/Sequential_{n}", p.grad) for n, p in
             net.named_parameters()]
    return d, out, grads, loss, (net(x), y), value


def per_step(collections, saved, calls):
    """us per step; collections beside losses, all saved at every step
    (saved) or none (the config's collections emptied: the hooks return
    at once). Gradient hooks are called when gradients are configured."""
    d, out, grads, loss, inputs, value = setup(collections)
    hooks = [d._grad_hook(n) for n, _ in grads] \
        if "gradients" in collections else []
    loss_hook = d._module_hook("MSELoss", False)
    mode = "TRAIN"
    if not saved:
        d.config.collections.clear()
        d._colls = []
    for i in range(2 + calls):
        if i == 2:
            t0 = time.thread_time()
        d.step_begin(mode, 11 + i, 0)  # past quantile_steps: no p5/p95
        loss_hook(loss, inputs, value)
        for h, (_, g) in zip(hooks, grads):
            h(g)
        out.clear()
    return (time.thread_time() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=3000)
    a = ap.parse_args()
    torch.set_num_threads(1)
    gw = ("gradients", "weights")
    u_default = per_step((), False, a.calls)
    s_losses = per_step((), True, a.calls)
    u_gw = per_step(gw, False, a.calls)
    s_gw = per_step(gw, True, a.calls)
    print(f"default: unsaved_step_us={u_default:.1f} "
          f"saved_step_us={s_losses:.1f} (the loss); "
          f"gradients+weights: unsaved_step_us={u_gw:.1f} "
          f"saved_step_us={s_gw:.1f} (4 gradients, 2 weights, the loss)")
    print(f"per step: default (losses every 500) "
          f"{u_default + (s_losses - u_default) / 500:.2f} us; "
          f"gradients+weights every 100 (losses every 500) "
          f"{u_gw + (s_gw - s_losses) / 100 + (s_losses - u_default) / 500:.2f}"
          f" us")


if __name__ == "__main__":
    main()
