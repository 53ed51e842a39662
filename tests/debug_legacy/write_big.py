"""A large debug-output folder for measuring `trainwatch debug-dump`'s
throughput (not a test): STEPS steps of two weights and their gradients of
N float32 elements each, a 256x1000 ReLU output and a loss, written with
trainwatch's writer. STEPS=20, N=1000000 gives 325 MB.

Usage: write_big.py OUT_DIR STEPS N
    /usr/bin/time -f "%e s %M KB" build/trainwatch debug-dump --json OUT_DIR >/dev/null
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "hooks", "python"))
from trainwatch.debug_writer import DebugWriter  # noqa: E402


def main(out, steps, n):
    rng = np.random.default_rng(1)
    w = DebugWriter(out)
    weights = {f"Net_layer{i}.weight":
               rng.standard_normal(n).astype(np.float32).reshape(-1, 1000)
               for i in range(2)}
    for step in range(steps):
        w.begin_step(step)
        for name, v in weights.items():
            v -= 0.01
            w.write_tensor(name, v, ["weights"])
            w.write_tensor("gradient/" + name, rng.standard_normal(
                v.shape).astype(np.float32), ["gradients"])
        w.write_tensor("relu_output_0", np.maximum(
            rng.standard_normal((256, 1000)), 0).astype(np.float32), ["relu"])
        w.write_tensor("loss_output_0", np.float32(1.0 / (step + 1)),
                       ["losses"])
        w.end_step()
    w.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
