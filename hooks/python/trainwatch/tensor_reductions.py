"""Reductions of one tensor for the debugging rules (DEBUG_RULES.md 8.2),
computed on the tensor's own device in float64: the requested reductions
are stacked into one small vector, so the host later copies that vector
(a few doubles), never the tensor. The vector is returned still on the
device; the sending thread reads it (so a GPU step never waits here).

Definitions (trainwatch's, DEBUG_RULES.md 8.3 item 5): variance and std
are the population forms (ddof 0); norms are over the flattened tensor;
dead_fraction is the fraction (0..1) of nodes (positions other than the
batch axis 0) active, x > 0, in fewer than `threshold_inactivity` percent
of the batch; zero_fraction the fraction of elements equal to 0; p5/p95
torch.quantile's linear interpolation (above 2**24 elements, where
torch.quantile refuses, the nearest rank by kthvalue); "value" the mean
(the value itself for a scalar); channel_sum/<c> the sum of channel c
along `channel_axis` (CheckInputImages), channel_count the elements per
channel, channel_axis that axis.
"""
import torch

QUANTILE_MAX = 1 << 24


def _quantiles(flat):
    n = flat.numel()
    if n <= QUANTILE_MAX:
        q = torch.tensor([0.05, 0.95], dtype=flat.dtype, device=flat.device)
        return torch.quantile(flat, q)
    lo = max(1, min(n, int(round(0.05 * (n - 1))) + 1))
    hi = max(1, min(n, int(round(0.95 * (n - 1))) + 1))
    return torch.stack([flat.kthvalue(lo).values, flat.kthvalue(hi).values])


def _dead_fraction(y, threshold_inactivity):
    if y.dim() == 0:
        y = y.reshape(1, 1)
    z = y.reshape(y.shape[0], -1)
    active_pct = (z > 0).to(torch.float64).mean(0) * 100.0
    return (active_pct < threshold_inactivity).to(torch.float64).mean()


def reduce(x, ops, prev=None, threshold_inactivity=1.0, channel_axis=None):
    """x's reductions named by ops, as one float64 vector on x's device
    (p5 and p95 are one element each). prev: the tensor's previously
    published value, for update_l2. channel_axis: the axis of the
    channel_* ops."""
    with torch.no_grad():
        if len(ops) == 1 and ops[0] == "value" and x.numel() == 1:
            return x.detach().reshape(1).to(torch.float64)  # a loss
        y = x.detach().to(torch.float64)
        flat = y.reshape(-1)
        parts = []
        a = None
        quant = None
        csum = None
        for op in ops:
            base = op
            src = flat
            if op.startswith("abs_") and op != "abs_mean":
                if a is None:
                    a = flat.abs()
                src, base = a, op[4:]
            if op == "value" or base == "mean":
                v = src.mean()
            elif op == "abs_mean":
                if a is None:
                    a = flat.abs()
                v = a.mean()
            elif op == "nan_count":
                v = torch.isnan(flat).sum(dtype=torch.float64)
            elif op == "inf_count":
                v = torch.isinf(flat).sum(dtype=torch.float64)
            elif base == "l2":
                v = torch.linalg.vector_norm(src, 2)
            elif base == "l1":
                v = torch.linalg.vector_norm(src, 1)
            elif op == "update_l2":
                v = torch.linalg.vector_norm(
                    flat - prev.detach().reshape(-1).to(torch.float64), 2)
            elif base == "variance":
                v = src.var(unbiased=False)
            elif base == "std":
                v = src.std(unbiased=False)
            elif base == "sum":
                v = src.sum()
            elif base == "prod":
                v = src.prod()
            elif base == "min":
                v = src.min()
            elif base == "max":
                v = src.max()
            elif op == "zero_fraction":
                v = (flat == 0).sum(dtype=torch.float64) / flat.numel()
            elif op == "dead_fraction":
                v = _dead_fraction(y, threshold_inactivity)
            elif op.startswith("channel_sum/"):
                if csum is None:  # every channel in one reduction
                    dims = [d for d in range(y.dim()) if d != channel_axis]
                    csum = y.sum(dim=dims) if dims else y
                v = csum[int(op[len("channel_sum/"):])]
            elif op == "channel_count":
                # a fill on the device: no host-to-device copy
                v = flat.new_full((), float(flat.numel() //
                                            y.shape[channel_axis]))
            elif op == "channel_axis":
                v = flat.new_full((), float(channel_axis))
            elif op in ("p5", "p95"):
                if quant is None:
                    quant = _quantiles(flat)
                v = quant[0] if op == "p5" else quant[1]
            else:
                raise ValueError(f"unknown reduction {op!r}")
            parts.append(v)
        # one op for the vector: every part is 0-d
        return torch.stack(parts) if parts else flat.new_zeros(0)
