#!/usr/bin/env python3
"""Real PyTorch CPU training with the hook's debugging side, one scenario
per pathology of issue 20's "Must show" (a)-(g), for the end-to-end tests
(hook -> broker -> `trainwatch run` with the debugging rules):

  healthy    an MLP learning a fixed batch: loss falls, weights move
  lr0        learning rate 0: loss and weights unchanged (LossNotDecreasing,
             UnchangedTensor)
  noparams   the optimizer holds none of the model's parameters (same)
  explode    learning rate 1e3: NaN within a few steps (ExplodingTensor)
  sigmoid    10 Linear+Sigmoid layers: first layers' gradients < 1e-7
             (VanishingGradient)
  deadrelu   a ReLU after a Linear whose bias is -50: every node dead
             (DeadRelu)
  stall      step --stall-at sleeps --stall-s seconds (StalledTrainingRule)
  overfit    8 training samples, a wide model, an evaluation pass of other
             samples every --eval-every steps (Overfit)

Collections: losses (train every step, eval every step), gradients,
weights, biases, relu_output, every --save-interval steps (default 1).
Prints "step N START_US" as each training step begins (flushed) and, at
the end, "fault_step=N" (the step the pathology begins: 0 for most, the
first non-finite loss for explode, --stall-at for stall) and the hook's
counters. run(argv) does the same in-process (the tests call it).
"""
import argparse
import sys
import time

import torch

import trainwatch

SCENARIOS = ("healthy", "lr0", "noparams", "explode", "sigmoid", "deadrelu",
             "stall", "overfit")


class Net(torch.nn.Module):
    """Linear - ReLU - Linear, or deep sigmoid layers."""

    def __init__(self, scenario, width):
        super().__init__()
        if scenario == "sigmoid":
            layers = []
            for _ in range(10):
                layers += [torch.nn.Linear(16, 16), torch.nn.Sigmoid()]
            self.body = torch.nn.Sequential(*layers)
            self.fc2 = torch.nn.Linear(16, 4)
        else:
            self.body = torch.nn.Linear(16, width)
            self.fc2 = torch.nn.Linear(width, 4)
        self.relu = torch.nn.ReLU()
        if scenario == "deadrelu":
            with torch.no_grad():
                self.body.bias.fill_(-50.0)

    def forward(self, x):
        return self.fc2(self.relu(self.body(x)))


def parse(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--scenario", choices=SCENARIOS, default="healthy")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-interval", type=int, default=1)
    ap.add_argument("--stop-file")
    ap.add_argument("--stall-at", type=int, default=10)
    ap.add_argument("--stall-s", type=float, default=2.0)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-steps", type=int, default=2)
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--step-ms", type=float, default=0,
                    help="sleep this long in every training step (a step "
                         "as long as a real one: the stop channel's test)")
    ap.add_argument("--local-output",
                    help="also write the legacy debug-output folder there "
                         "(container_local_output_path)")
    return ap.parse_args(argv)


def run(argv):
    a = parse(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    s = a.scenario
    model = Net(s, 256 if s == "overfit" else 32)
    crit = torch.nn.CrossEntropyLoss()
    lr = {"lr0": 0.0, "explode": 1e3}.get(s, 0.1)
    params = [torch.zeros(1, requires_grad=True)] if s == "noparams" \
        else model.parameters()
    opt = torch.optim.SGD(params, lr=lr)
    every = str(a.save_interval)
    cfg = trainwatch.DebuggerHookConfig(
        hook_parameters={"save_interval": every, "eval.save_interval": "1"},
        collection_configs=[trainwatch.CollectionConfig(n) for n in (
            "gradients", "weights", "biases", "relu_output")],
        container_local_output_path=a.local_output)
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers, debugger_config=cfg,
                           stop_file=a.stop_file, flush_interval=0.2)
    hook.watch(model, optimizer=opt, loss=crit)
    g = torch.Generator().manual_seed(1)
    n_train = 8 if s == "overfit" else 64
    x = torch.randn(n_train, 16, generator=g)
    y = torch.randint(0, 4, (n_train,), generator=g)
    xe = torch.randn(64, 16, generator=g)
    ye = torch.randint(0, 4, (64,), generator=g)
    fault = {"explode": None, "stall": a.stall_at}.get(s, 0)
    if s == "healthy":
        fault = -1
    for i in range(a.steps):
        if not a.quiet:
            print(f"step {i} {time.time_ns() // 1000}", flush=True)
        if s == "stall" and i == a.stall_at:
            time.sleep(a.stall_s)
        if a.step_ms > 0:
            time.sleep(a.step_ms / 1000)
        model.train()
        loss = crit(model(x), y)
        if fault is None and not torch.isfinite(loss):
            fault = i
        opt.zero_grad()
        loss.backward()
        opt.step()
        if s == "overfit" and (i + 1) % a.eval_every == 0:
            model.eval()
            with torch.no_grad():
                for _ in range(a.eval_steps):
                    crit(model(xe), ye)
    stats = hook.close()
    if not a.quiet:
        print(f"fault_step={fault if fault is not None else -1} " +
              " ".join(f"{k}={v}" for k, v in stats.items()
                       if k != "steps"), flush=True)
    return fault, stats


if __name__ == "__main__":
    run(sys.argv[1:])
    sys.exit(0)
