"""Writes a debug-output folder with the reference's own PyTorch hook
(smdebug, imported by ref_env) on a tiny CPU model:

  - TRAIN steps 0..4 and an EVAL pass of 2 steps after train step 2, every
    step saved (save_interval 1); with --small (the committed golden
    folder) TRAIN steps 0..3 with the NaN at step 2, one EVAL step after
    train step 0, and save_interval 2 (update_l2 spans two steps);
  - collections: losses, weights and gradients as full tensors; biases as
    stored reductions only (max, mean, variance, abs mean, l2 norm); the
    ReLU outputs (`.*relu_output`);
  - a dead ReLU: a branch whose `dead_relu` follows a layer with bias -50,
    so its outputs are all 0 (dead_fraction 1) and its layers get zero
    gradients, beside a live branch that learns;
  - a NaN: train step 3's batch holds a NaN, so its loss and gradients are
    NaN, and so are the weights from step 4 on.

With --case lr0 (issue 20 case b) the same model trains with a learning
rate of 0 for 6 steps and no NaN: no parameter changes. With --case
sigmoid (case d) a 10-layer sigmoid network trains 3 steps, saving
gradients and losses: the first layer's gradients are orders of magnitude
smaller than the last's.

Usage: write_reference.py [--small] [--case lr0|sigmoid] OUT_DIR
       (OUT_DIR must not exist)
       write_reference.py --all OUT_ROOT: OUT_ROOT/{ref,small,lr0,sigmoid}
       in one process (one torch import)
"""
import sys

import ref_env

ref_env.import_reference()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import smdebug.pytorch as smd  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 4)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(4, 1)
        self.fc3 = nn.Linear(3, 2)
        self.dead_relu = nn.ReLU()
        self.fc4 = nn.Linear(2, 1)
        with torch.no_grad():
            self.fc3.bias.fill_(-50.0)

    def forward(self, x):
        return (self.fc2(self.relu(self.fc1(x)))
                + self.fc4(self.dead_relu(self.fc3(x))))


class Deep(nn.Module):
    def __init__(self, depth=10, width=8):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.Sigmoid()]
        self.layers = nn.Sequential(*layers)
        self.out = nn.Linear(width, 1)

    def forward(self, x):
        return self.out(self.layers(x))


def sigmoid_case(out_dir):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Deep()
    hook = smd.Hook(out_dir=out_dir,
                    save_config=smd.SaveConfig(save_interval=1),
                    include_collections=["losses", "gradients"])
    hook.register_module(net)
    loss_fn = nn.MSELoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    hook.set_mode(smd.modes.TRAIN)
    for _ in range(3):
        opt.zero_grad()
        loss_fn(net(torch.randn(16, 8)), torch.randn(16, 1)).backward()
        opt.step()
    hook.close()


def main(out_dir, small, case="default"):
    if case == "sigmoid":
        return sigmoid_case(out_dir)
    steps, nan_step, eval_after, interval = ((4, 2, 0, 2) if small
                                             else (5, 3, 2, 1))
    lr = 0.1
    if case == "lr0":
        steps, nan_step, eval_after, interval, lr = 6, -1, -1, 1, 0.0
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Net()
    hook = smd.Hook(out_dir=out_dir,
                    save_config=smd.SaveConfig(save_interval=interval),
                    include_collections=["losses", "weights", "gradients",
                                         "biases", "relu_output"])
    hook.get_collection("relu_output").include(".*relu_output")
    hook.get_collection("biases").reduction_config = smd.ReductionConfig(
        reductions=["max", "mean", "variance"], abs_reductions=["mean"],
        norms=["l2"])
    hook.register_module(net)
    loss_fn = nn.MSELoss()
    hook.register_loss(loss_fn)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    for step in range(steps):
        hook.set_mode(smd.modes.TRAIN)
        x, y = torch.randn(4, 3), torch.randn(4, 1)
        if step == nan_step:
            x[0, 0] = float("nan")
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()
        if step == eval_after:
            hook.set_mode(smd.modes.EVAL)
            with torch.no_grad():
                for _ in range(1 if small else 2):
                    loss_fn(net(torch.randn(4, 3)), torch.randn(4, 1))
    hook.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--all":
        for sub, small, case in (("ref", False, "default"),
                                 ("small", True, "default"),
                                 ("lr0", False, "lr0"),
                                 ("sigmoid", False, "sigmoid")):
            main(f"{args[1]}/{sub}", small, case)
        sys.exit(0)
    small = "--small" in args
    args = [a for a in args if a != "--small"]
    case = "default"
    if "--case" in args:
        i = args.index("--case")
        case = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1 or case not in ("default", "lr0", "sigmoid"):
        sys.exit(__doc__)
    main(args[0], small, case)
