"""Checks `trainwatch debug-dump` on the committed reference-written
folder golden/ref_small (write_reference.py --small) without the
reference: its output must equal golden/ref_small.jsonl line for line, and
agree with what the reference's reader read from that folder
(golden/ref_small.reference.json, written by compare.py --save-reading)
as compare.py checks it, planted pathologies included.

Usage: check_golden.py TRAINWATCH
"""
import json
import os
import subprocess
import sys

import compare

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    trainwatch = argv[0]
    folder = os.path.join(HERE, "golden", "ref_small")
    diffs = []

    def differ(what):
        if len(diffs) < 50:
            print("DIFF", what)
        diffs.append(what)

    out = subprocess.run([trainwatch, "debug-dump", "--json", folder],
                         check=True, capture_output=True, text=True).stdout
    with open(os.path.join(HERE, "golden", "ref_small.jsonl")) as f:
        want = f.read()
    got_lines, want_lines = out.splitlines(), want.splitlines()
    if len(got_lines) != len(want_lines):
        differ(f"{len(got_lines)} lines, golden has {len(want_lines)}")
    for i, (g, w) in enumerate(zip(got_lines, want_lines)):
        if g != w:
            differ(f"line {i + 1}: {g}\n  golden: {w}")
    reading = compare.load_reading(
        os.path.join(HERE, "golden", "ref_small.reference.json"))
    recs = compare.dump(trainwatch, folder)
    counts = compare.compare(reading, recs, differ)
    counts.update(compare.check_pathologies(recs, differ))
    print(json.dumps({"golden_lines": len(want_lines), **counts,
                      "differences": len(diffs)}))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
