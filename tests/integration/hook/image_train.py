#!/usr/bin/env python3
"""Real PyTorch CPU training of a tiny CNN on images, with the hook's
collection input_image, for CheckInputImages' end-to-end test:

  raw         images in [0, 1] (uniform: every channel's mean ~0.5), as
              ToTensor() gives them without Normalize: CheckInputImages
              fires once threshold_samples (500) images were seen
  normalized  the same images through Normalize(0.5, 0.289) (mean ~0,
              std ~1): no finding
  none        raw images, but no input_image collection (the baseline of
              the bytes-per-step figure)

The rule and its collection come from trainwatch.rule_configs as a
notebook of the managed service would write them
(Rule.sagemaker(rule_configs.check_input_images())), the collection saved
every --save-interval steps; its tensor is the model's input,
Net_input_0 (the hook adds the root input to input_image, whose
reference regex is MXNet's). Prints "step N START_US" as each step begins
and, at the end, the hook's counters (bytes= among them).
"""
import argparse
import sys
import time

import torch

import trainwatch
from trainwatch import Rule, rule_configs


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(2)
        self.fc = torch.nn.Linear(16, 2)

    def forward(self, x):
        return self.fc(self.pool(torch.relu(self.conv(x))).flatten(1))


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True)
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--inputs", choices=("raw", "normalized", "none"),
                    default="raw")
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--save-interval", type=int, default=1)
    ap.add_argument("--local-output")
    ap.add_argument("--rules-yaml", help="write the rules section here")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rules = [Rule.sagemaker(rule_configs.check_input_images())]
    if a.rules_yaml:
        rule_configs.write_rules_yaml(a.rules_yaml, rules)
    every = {"save_interval": str(a.save_interval)}
    extra = [] if a.inputs == "none" else [
        trainwatch.CollectionConfig("input_image", every)]
    cfg = rule_configs.hook_config(
        rules if a.inputs != "none" else [], collection_configs=extra,
        container_local_output_path=a.local_output)
    hook = trainwatch.Hook(job=a.job, brokers=a.brokers, debugger_config=cfg,
                           flush_interval=0.2)
    model = Net()
    crit = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hook.watch(model, optimizer=opt, loss=crit)
    g = torch.Generator().manual_seed(1)
    for i in range(a.steps):
        print(f"step {i} {time.time_ns() // 1000}", flush=True)
        x = torch.rand(a.batch, 3, 8, 8, generator=g)
        if a.inputs == "normalized":
            x = (x - 0.5) / 0.289
        y = (x[:, 0].mean((1, 2)) > x[:, 1].mean((1, 2))).long()
        loss = crit(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats = hook.close()
    print(" ".join(f"{k}={v}" for k, v in stats.items() if k != "steps"),
          flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
