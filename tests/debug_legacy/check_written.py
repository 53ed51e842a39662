"""Reads a folder written by write_python.py with `trainwatch debug-dump`
and checks it against what was written (OUT_DIR.npz, OUT_DIR.modes.json):
every record present with its mode and mode step, every value equal, every
derived reduction equal to numpy's float64 computation (expected.py).
Needs no reference.

Usage: check_written.py TRAINWATCH OUT_DIR
"""
import json
import sys

import numpy as np

import compare


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__)
    trainwatch, folder = argv
    written = dict(np.load(folder + ".npz"))
    with open(folder + ".modes.json") as f:
        modes = json.load(f)
    reading = []
    for key in sorted(written, key=lambda k: (int(k.split("/", 2)[1]),
                                              k.split("/", 2)[0],
                                              k.split("/", 2)[2])):
        worker, step, name = key.split("/", 2)
        mode, mode_step = modes[step]
        reading.append({"worker": worker, "step": int(step),
                        "name": name, "mode": mode, "mode_step": mode_step,
                        "value": written[key], "stored": {},
                        "reference_numpy": {}})
    diffs = []

    def differ(what):
        if len(diffs) < 50:
            print("DIFF", what)
        diffs.append(what)

    counts = compare.compare(reading, compare.dump(trainwatch, folder),
                             differ)
    print(json.dumps({"folder": folder, **counts,
                      "differences": len(diffs)}))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
