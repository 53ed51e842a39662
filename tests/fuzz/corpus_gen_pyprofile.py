"""Writes the Python-profile seeds of fuzz_wire's corpus (wire batches
carrying PythonProfile tables, as the training hook encodes them, and
broken variants). Run by hand when the schema changes:
    PYTHONPATH=build/hooks/python /usr/bin/python3 tests/fuzz/corpus_gen_pyprofile.py \
        tests/fuzz/corpus/wire
"""
import math
import os
import sys

from trainwatch.wire_batch import encode_batch


def function(name, file, line, cc, nc, tt, ct, callers=()):
    return {"function": name, "file": file, "line": line,
            "primitive_calls": cc, "total_calls": nc, "total_time": tt,
            "cumulative_time": ct, "callers": list(callers)}


def profile(mode, start_phase, end_phase, step, t0, **kw):
    caller = function("train", "train.py", 40, 3, 3, 0.001, 0.05)
    p = {"profiler": "cprofile", "timer": "total_time", "mode": mode,
         "start_step": step, "end_step": step, "start_phase": start_phase,
         "end_phase": end_phase, "start_us": t0, "end_us": t0 + 2500,
         "pid": 4242, "functions_cut": 1,
         "functions": [
             function("fib", "work.py", 2, 4, 9756, 0.03, 0.038, [caller]),
             function("<built-in method builtins.abs>", "~", 0, 2000, 2000,
                      0.0001, 0.0001, [caller]),
             function("<lambda>", "work.py", 7, 500, 500, 0.0, 0.0)]}
    p.update(kw)
    return p


def main(out):
    t0 = 1700000000000000
    good = encode_batch("job-1", "0-host", 7, profiles=[
        profile("TRAIN", "STEP_START", "FORWARD_PASS_END", 3, t0),
        profile("EVAL", "FORWARD_PASS_END", "STEP_END", 1, t0 + 9000)])
    seeds = {
        "pyprofile.twm": good,
        "pyprofile.start.twm": encode_batch("job-1", "0-host", 1, profiles=[
            profile("TRAIN", "START", "STEP_START", 0, t0)]),
        "pyprofile.nan.twm": encode_batch("job-1", "0-host", 2, profiles=[
            profile("TRAIN", "STEP_START", "STEP_END", 1, t0, functions=[
                function("f", "x.py", 1, 1, 1, math.nan, 0.1)])]),
        "pyprofile.calls.twm": encode_batch("job-1", "0-host", 3, profiles=[
            profile("TRAIN", "STEP_START", "STEP_END", 1, t0, functions=[
                function("f", "x.py", 1, 5, 2, 0.1, 0.1)])]),
        "pyprofile.nul.twm": encode_batch("job-1", "0-host", 5, profiles=[
            profile("TRAIN", "STEP_START", "STEP_END", 1, t0, functions=[
                function("\0f", "x.py", 1, 1, 1, 0.1, 0.1)])]),
        "pyprofile.backwards.twm": encode_batch("job-1", "0-host", 4,
                                                profiles=[profile(
                                                    "TRAIN", "STEP_START",
                                                    "STEP_END", 1, t0,
                                                    end_us=t0 - 1)]),
    }
    for cut in (40, 160, 400):
        seeds["pyprofile.cut%d.twm" % cut] = good[:cut]
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print("wrote %d seeds to %s" % (len(seeds), out))


if __name__ == "__main__":
    main(sys.argv[1])
