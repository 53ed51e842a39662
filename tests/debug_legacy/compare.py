"""Reads a debug-output folder with the reference's own reader (smdebug's
trial, imported by ref_env) and with `trainwatch debug-dump`, and checks
that they agree on every tensor:

  - the same (worker, step, name) records, with the same mode, mode step,
    shape and dtype;
  - every value equal (bit for bit as float64; NaN equal to NaN);
  - every derived reduction equal to numpy's float64 computation on the
    reference-read values (expected.py; rel 1e-9), and abs_mean and
    variance also to the reference's own numpy reductions (mean of |x|,
    var; computed there in the tensor's own dtype, so rel 1e-5 for
    float32 and 2e-3 for float16);
  - every reduction the writer stored equal to the reference's
    reduction_value.

With --written FILE.npz (write_python.py's record of what it wrote), the
reference-read values must also equal what was written. With
--pathologies CASE, the planted faults of write_reference.py --case CASE
must show: default: a NaN loss and NaN gradients from the NaN step on,
dead_fraction 1 on dead_relu_output_0, update_l2 0 on the dead branch's
weights; lr0: update_l2 0 on every parameter; sigmoid: the first layer's
gradient abs_mean under 1e-3 of the last layer's at every step. With
--bytes, every record is also encoded again by trainwatch's writer
(hooks/python/trainwatch/debug_writer.py) from what the reference's
protobuf module decodes, and must equal the file's bytes. With
--save-reading FILE, what the reference read is written as JSON, which
check_golden.py compares without the reference.

Usage: compare.py TRAINWATCH FOLDER [--written FILE.npz]
                  [--pathologies default|lr0|sigmoid] [--bytes]
                  [--save-reading FILE]
Exit status 1 on any difference.
"""
import glob
import json
import os
import subprocess
import sys

import numpy as np

import expected
import ref_env

HERE = os.path.dirname(os.path.abspath(__file__))
DTYPE_NAMES = {np.dtype(t).name for t in (
    np.float32, np.float64, np.float16, np.int32, np.int64, np.int16,
    np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)}


def dump(trainwatch, folder):
    """debug-dump's records keyed by (worker, step, name)."""
    out = subprocess.run(
        [trainwatch, "debug-dump", "--json", "--raw-max", "100000000",
         folder], check=True, capture_output=True, text=True).stdout
    recs = {}
    for line in out.splitlines():
        r = json.loads(line)
        recs[(r["worker"], r["step"], r["name"])] = r
    return recs


def reference_reading(folder):
    """What the reference's trial reads, one entry per (step, worker,
    name) in that order: mode, mode_step, the value (or None when only
    reductions were saved), the stored reductions, and the reference's own
    numpy abs_mean and variance of the value."""
    ref_env.import_reference()
    from smdebug.exceptions import TensorUnavailableForStep
    from smdebug.trials import create_trial

    trial = create_trial(folder)
    keys = []
    for name in trial.tensor_names():
        t = trial.tensor(name)
        for step in t.steps():
            for worker in t.workers(step):
                keys.append((step, worker, name))
    reading = []
    for step, worker, name in sorted(keys):
        t = trial.tensor(name)
        mode, mode_step = trial.mode_modestep(step)
        try:
            value = np.asarray(t.value(step, worker=worker))
        except TensorUnavailableForStep:
            value = None
        entry = {"worker": worker, "step": step, "name": name,
                 "mode": mode.name, "mode_step": mode_step, "value": value,
                 "stored": {}, "reference_numpy": {}}
        if value is not None and value.ndim > 0:
            with np.errstate(invalid="ignore", over="ignore"):
                for op, (red, absflag) in (("abs_mean", ("mean", True)),
                                           ("variance", ("variance", False))):
                    entry["reference_numpy"][op] = float(t.reduction_value(
                        step, red, worker=worker, abs=absflag))
        for (red, absflag), v in t.reduction_values(step,
                                                    worker=worker).items():
            op = ("abs_" if absflag else "") + red
            if value is None:  # else computed by the reference from it
                entry["stored"][op] = float(np.asarray(v))
        reading.append(entry)
    return reading


def _num(v):
    return v if np.isfinite(v) else repr(float(v))


def save_reading(reading, path):
    out = []
    for e in reading:
        e = dict(e)
        v = e.pop("value")
        if v is not None:
            e["dtype"] = v.dtype.name
            e["shape"] = list(v.shape)
            e["values"] = [_num(x) for x in
                           v.astype(np.float64).reshape(-1).tolist()]
        e["stored"] = {k: _num(x) for k, x in e["stored"].items()}
        e["reference_numpy"] = {k: _num(x)
                                for k, x in e["reference_numpy"].items()}
        out.append(e)
    with open(path, "w") as f:
        json.dump(out, f, indent=0, sort_keys=True)
        f.write("\n")


def load_reading(path):
    with open(path) as f:
        raw = json.load(f)
    reading = []
    for e in raw:
        value = None
        if "values" in e:
            value = np.array([float(x) for x in e.pop("values")],
                             dtype=np.float64).reshape(e["shape"]).astype(
                                 np.dtype(e["dtype"]))
        e["value"] = value
        e["stored"] = {k: float(x) for k, x in e["stored"].items()}
        e["reference_numpy"] = {k: float(x)
                                for k, x in e["reference_numpy"].items()}
        reading.append(e)
    return reading


def compare(reading, recs, differ, written=None):
    counts = {"tensors": 0, "values": 0, "reductions": 0, "stored": 0,
              "reference_numpy": 0}
    prev = {}
    seen = set()
    for e in reading:
        worker, step, name = e["worker"], e["step"], e["name"]
        key = (worker, step, name)
        seen.add(key)
        rec = recs.get(key)
        if rec is None:
            differ(f"{key}: the reference has it, debug-dump does not")
            continue
        counts["tensors"] += 1
        if rec["mode"] != e["mode"] or rec["mode_step"] != e["mode_step"]:
            differ(f"{key}: mode {rec['mode']}:{rec['mode_step']} vs "
                   f"{e['mode']}:{e['mode_step']}")
        value = e["value"]
        got = rec["reductions"]
        want = {}
        if value is not None:
            if value.dtype.name in DTYPE_NAMES and \
                    rec["dtype"] != value.dtype.name:
                differ(f"{key}: dtype {rec['dtype']} vs {value.dtype.name}")
            if list(value.shape) != rec["shape"]:
                differ(f"{key}: shape {rec['shape']} vs {list(value.shape)}")
            raw = np.asarray(rec.get("raw", []), dtype=np.float64)
            ref = value.astype(np.float64).reshape(-1)
            if raw.shape != ref.shape or not np.array_equal(
                    raw, ref, equal_nan=True):
                differ(f"{key}: values differ")
            counts["values"] += ref.size
            if written is not None:
                w = written[f"{worker}/{step}/{name}"]
                if not np.array_equal(w.astype(np.float64).reshape(-1), ref,
                                      equal_nan=True):
                    differ(f"{key}: the reference reads other values than "
                           "were written")
            p = prev.get((worker, name))
            want = expected.derived(name, value,
                                    p if value.ndim > 0 else None)
            if value.ndim > 0:
                prev[(worker, name)] = value.astype(np.float64)
                if "update_l2" in got and rec["prev_step"] < 0:
                    differ(f"{key}: update_l2 without prev_step")
            rel = 2e-3 if value.dtype == np.float16 else 1e-5
            for op, r in e["reference_numpy"].items():
                counts["reference_numpy"] += 1
                if not expected.same(got.get(op), r, rel=rel, abs_tol=1e-7):
                    differ(f"{key}: {op} {got.get(op)} vs the reference's "
                           f"numpy {r}")
        for op, v in e["stored"].items():
            counts["stored"] += 1
            want[op] = v
            if op not in got or not expected.same(got[op], v, 0, 0):
                differ(f"{key}: stored {op} {got.get(op)} vs {v}")
        if set(got) != set(want):
            differ(f"{key}: reductions {sorted(got)} vs {sorted(want)}")
        for op, v in want.items():
            counts["reductions"] += 1
            if op in got and not expected.same(got[op], v):
                differ(f"{key}: {op} {got[op]} vs {v}")
    for key in recs:
        if key not in seen:
            differ(f"{key}: debug-dump has it, the reference does not")
    return counts


def check_bytes(folder, differ):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "hooks", "python"))
    from smdebug.core.tfevent.proto.event_pb2 import Event
    from trainwatch import debug_writer as dw

    modes = {v: k for k, v in dw.MODES.items()}
    numpy_of = {v: k for k, v in dw.DTYPES.items()}
    same = 0
    for ix in sorted(glob.glob(os.path.join(folder, "index", "*", "*.json"))):
        with open(ix) as f:
            index = json.load(f)
        with open(os.path.join(folder, index["meta"]["event_file_name"]),
                  "rb") as f:
            data = f.read()
        for e in index["tensor_payload"]:
            rec = data[e["start_idx"]:e["start_idx"] + e["length"]]
            ev = Event()
            ev.ParseFromString(rec[12:-4])
            v = ev.summary.value[0]
            plugin = {p.plugin_name: p.content
                      for p in v.metadata.plugin_data}
            arr = np.frombuffer(
                v.tensor.tensor_content,
                dtype=numpy_of[v.tensor.dtype].newbyteorder("<")).reshape(
                    [d.size for d in v.tensor.tensor_shape.dim])
            mine = dw.frame(dw._event(v.tag, arr, ev.step,
                                      modes[int(plugin["mode"])],
                                      int(plugin["mode_step"]),
                                      ev.wall_time))
            if mine == rec:
                same += 1
            else:
                differ(f"{ix}: {v.tag}: trainwatch's writer encodes it "
                       "otherwise")
    return same


def check_lr0(recs, differ):
    """Case b: a learning rate of 0 moves no parameter."""
    moved = [k for k, r in recs.items() if r["prev_step"] >= 0
             and r["reductions"].get("update_l2", 0.0) != 0.0]
    checked = sum(1 for r in recs.values() if r["prev_step"] >= 0)
    if moved or checked == 0:
        differ(f"pathology lr0: {len(moved)} parameter records moved, "
               f"{checked} checked")
    return {"unchanged_parameter_records": checked}


def check_sigmoid(recs, differ):
    """Case d: gradients vanish towards the input of a deep sigmoid net."""
    ratios = []
    for step in sorted({s for (w, s, n) in recs}):
        first = recs.get(("worker_0", step, "gradient/Deep_layers.0.weight"))
        last = recs.get(("worker_0", step, "gradient/Deep_out.weight"))
        if first is None or last is None:
            differ(f"pathology sigmoid: step {step} lacks a gradient")
            continue
        ratios.append(first["reductions"]["abs_mean"]
                      / last["reductions"]["abs_mean"])
    if not ratios or max(ratios) > 1e-3:
        differ(f"pathology sigmoid: first/last gradient abs_mean {ratios}")
    return {"first_over_last_gradient_abs_mean": max(ratios or [0])}


def check_pathologies(recs, differ):
    nan_steps = sorted(s for (w, s, n), r in recs.items()
                       if n.endswith("Loss_output_0")
                       and np.isnan(r["reductions"]["value"]))
    if not nan_steps:
        differ("pathology: no NaN loss")
        return {}
    first = nan_steps[0]
    grads = [r for (w, s, n), r in recs.items()
             if s == first and n.startswith("gradient/")]
    if not grads or any(r["reductions"]["nan_count"] == 0 for r in grads):
        differ(f"pathology: gradients at step {first} are not all NaN")
    dead = [r for (w, s, n), r in recs.items() if n == "dead_relu_output_0"]
    if not dead or any(r["reductions"]["dead_fraction"] != 1.0
                       for r in dead):
        differ("pathology: dead_relu_output_0 is not dead at every step")
    frozen = [r for (w, s, n), r in recs.items()
              if n == "Net_fc3.weight" and s < first and r["prev_step"] >= 0]
    if not frozen or any(r["reductions"]["update_l2"] != 0.0
                         for r in frozen):
        differ("pathology: the dead branch's weight moved before the NaN")
    return {"nan_loss_first_step": first, "dead_relu_records": len(dead),
            "frozen_weight_records": len(frozen)}


def option(argv, name):
    if name not in argv:
        return None
    i = argv.index(name)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


def main(argv):
    argv = list(argv)
    written = option(argv, "--written")
    save = option(argv, "--save-reading")
    case = option(argv, "--pathologies")
    args = [a for a in argv if not a.startswith("--")]
    if len(args) != 2:
        sys.exit(__doc__)
    trainwatch, folder = args
    diffs = []

    def differ(what):
        if len(diffs) < 50:
            print("DIFF", what)
        diffs.append(what)

    reading = reference_reading(folder)
    if save:
        save_reading(reading, save)
    counts = compare(reading, dump(trainwatch, folder), differ,
                     dict(np.load(written)) if written else None)
    if case is not None:
        check = {"default": check_pathologies, "lr0": check_lr0,
                 "sigmoid": check_sigmoid}[case]
        counts.update(check(dump(trainwatch, folder), differ))
    if "--bytes" in argv:
        counts["byte_identical_records"] = check_bytes(folder, differ)
    print(json.dumps({"folder": folder, **counts,
                      "differences": len(diffs)}))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
