"""The reductions `trainwatch debug-dump` derives from a full tensor
(engine/io/debug_reduce.h), computed independently with numpy in float64:
what the reference-read values must give."""
import numpy as np


def is_parameter(name):
    return (not name.startswith("gradient/") and "_input_" not in name
            and "_output_" not in name)


def is_relu_output(name):
    return "relu_output" in name or "ReLU_output" in name


def derived(name, x, prev=None, threshold_inactivity=1.0):
    """x: the tensor (numpy); prev: the previous saved values or None."""
    x64 = np.asarray(x, dtype=np.float64)
    if x64.ndim == 0:
        return {"value": float(x64)}
    flat = x64.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        out = {
            "abs_mean": float(np.mean(np.abs(flat))),
            "nan_count": float(np.count_nonzero(np.isnan(flat))),
            "inf_count": float(np.count_nonzero(np.isinf(flat))),
            "l2": float(np.sqrt(np.sum(flat * flat))),
            "variance": float(np.var(flat)),
            "zero_fraction": float(np.count_nonzero(flat == 0) / flat.size),
        }
        if prev is not None and is_parameter(name) and prev.size == flat.size:
            d = flat - np.asarray(prev, dtype=np.float64).reshape(-1)
            out["update_l2"] = float(np.sqrt(np.sum(d * d)))
    if is_relu_output(name) and x64.shape[0] > 0:
        nodes = x64.reshape(x64.shape[0], -1)
        active = 100.0 * np.count_nonzero(nodes > 0, axis=0) / nodes.shape[0]
        out["dead_fraction"] = float(np.mean(active < threshold_inactivity))
    return out


def same(a, b, rel=1e-9, abs_tol=1e-12):
    """Equal within rel/abs, NaN equal to NaN, infinities exactly."""
    a, b = float(a), float(b)
    if np.isnan(a) or np.isnan(b):
        return np.isnan(a) and np.isnan(b)
    if np.isinf(a) or np.isinf(b):
        return a == b
    return abs(a - b) <= max(abs_tol, rel * max(abs(a), abs(b)))
