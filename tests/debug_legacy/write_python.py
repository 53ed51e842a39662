"""Writes a debug-output folder with trainwatch's own writer
(hooks/python/trainwatch/debug_writer.py) from numpy arrays, and beside it
OUT_DIR.npz: every array written, keyed "<worker>/<step>/<name>", and
OUT_DIR.modes.json: {step: [mode, mode step]}, for compare.py --written
and check_written.py.

Four global steps (TRAIN 0, 1, EVAL 0, TRAIN 2) of weights, gradients, a
ReLU output with dead nodes and a loss scalar, in float32, float64,
float16, int32, int64, uint8 and bool; NaN and +-Inf at step 3; a
parameter repeated in one step (the last write wins). With --int8 an int8
tensor too (the reference's reader misreads int8 as uint8, so the
comparison with it leaves it out); with --payload-crc the records carry
the payload's CRC as footer instead of the reference's constant.

With --workers N, N workers (worker_0 ...) write into the same folder,
each its own values, as ranks of one job do.

Usage: write_python.py [--int8] [--payload-crc] [--workers N] OUT_DIR
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "hooks", "python"))
from trainwatch.debug_writer import DebugWriter  # noqa: E402


def write_worker(out, rank, workers, steps, int8, crc, saved):
    worker = f"worker_{rank}"
    rng = np.random.default_rng(7 + rank)
    w = DebugWriter(out, worker=worker, num_workers=workers,
                    payload_crc=crc)
    weight = rng.standard_normal((4, 3)).astype(np.float32)
    for step, mode, mode_step in steps:
        w.begin_step(step, mode=mode, mode_step=mode_step)
        tensors = {
            "Net_fc1.weight": weight.copy(),
            "Net_fc1.bias": rng.standard_normal(4).astype(np.float64),
            "relu_output_0": np.maximum(
                rng.standard_normal((5, 4)), 0).astype(np.float16)
            * np.array([0, 1, 1, 1], dtype=np.float16),
            "Net_input_0": rng.integers(-5, 5, (2, 3)).astype(np.int32),
            "labels_output_0": rng.integers(0, 3, 6).astype(np.int64),
            "image_output_0": rng.integers(0, 255, (2, 2)).astype(np.uint8),
            "mask_output_0": rng.integers(0, 2, 5).astype(np.bool_),
            "CrossEntropyLoss_output_0": np.float32(2.0 / (step + 1)),
        }
        if mode == "TRAIN":
            tensors["gradient/Net_fc1.weight"] = (
                rng.standard_normal((4, 3)).astype(np.float32))
        if int8:
            tensors["Net_emb.weight"] = rng.integers(
                -128, 127, (2, 2)).astype(np.int8)
        if step == 3:
            tensors["gradient/Net_fc1.weight"][0, 0] = np.nan
            tensors["gradient/Net_fc1.weight"][1, 1] = np.inf
            tensors["gradient/Net_fc1.weight"][2, 2] = -np.inf
            tensors["CrossEntropyLoss_output_0"] = np.float32(np.nan)
        # Gradient accumulation writes a name twice: the last one counts.
        w.write_tensor("Net_fc1.weight", weight * 0, ["weights"])
        for name, value in tensors.items():
            coll = ("losses" if "Loss" in name else "gradients"
                    if name.startswith("gradient/") else "weights"
                    if name.endswith("weight") else "others")
            w.write_tensor(name, value, [coll])
            saved[f"{worker}/{step}/{name}"] = np.asarray(value)
        w.end_step()
        weight -= 0.1 * np.float32(step + 1)
    w.close()


def main(argv):
    int8 = "--int8" in argv
    crc = "--payload-crc" in argv
    workers = 1
    argv = list(argv)
    if "--workers" in argv:
        i = argv.index("--workers")
        workers = int(argv[i + 1])
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 1:
        sys.exit(__doc__)
    out = args[0]
    saved = {}
    steps = [(0, "TRAIN", 0), (1, "TRAIN", 1), (2, "EVAL", 0),
             (3, "TRAIN", 2)]
    for rank in range(workers):
        write_worker(out, rank, workers, steps, int8, crc, saved)
    np.savez(out + ".npz", **saved)
    with open(out + ".modes.json", "w") as f:
        json.dump({s: [m, k] for s, m, k in steps}, f)


if __name__ == "__main__":
    main(sys.argv[1:])
