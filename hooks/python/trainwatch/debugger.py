"""The debugging side of Hook.watch(): which tensors are saved at a step,
under which name (the managed service's PyTorch names, DEBUG_RULES.md
5.3), and the record published for each (TensorRecord of
schemas/metrics.fbs, built by wire_batch.py).

A record is the tuple
    (name, collections, step, mode, mode_step, wall_us, dtype, shape,
     numel, ops, values, raw, prev_step)
values: the reductions as a float64 vector still on the tensor's device
(tensor_reductions.reduce), read on the sending thread; raw: the whole
tensor flattened (small tensors of save_raw_tensor collections only) or
None. The heartbeat is ("heartbeat", (), step, mode, mode_step, wall_us,
"", (), 0, (), None, None, -1), one per step whatever is saved.

Per step: parameters when the step starts (the values its forward uses,
as the service saved them), module inputs/outputs in their forward
hooks, gradients in the parameters' gradient hooks, losses when
recorded. Only modules whose tensor names can match an included
collection get a forward hook, and parameters get gradient hooks only
when a collection can match gradients, so the steps that save nothing
cost one set lookup per hooked call.
"""
import time

import torch

from .tensor_reductions import reduce

HEARTBEAT = "heartbeat"
GRADIENT_OPS = ("abs_mean", "nan_count", "inf_count")
WEIGHT_OPS = ("l2", "update_l2", "nan_count", "inf_count", "variance")
RELU_OUTPUT_OPS = ("dead_fraction", "zero_fraction", "nan_count",
                   "inf_count")
RELU_INPUT_OPS = ("variance", "nan_count", "inf_count")
OTHER_OPS = ("nan_count", "inf_count")
# CheckInputImages: per-channel sums of at most this many channels
MAX_IMAGE_CHANNELS = 64


def _now_us():
    return time.time_ns() // 1000


def _flatten(x, out):
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            _flatten(v, out)
    return out


def _dtype_name(t):
    return str(t.dtype).replace("torch.", "")


class Debugger:
    def __init__(self, config, put, stats, writer=None):
        self.config = config
        self._writer = writer      # DebugWriter: the legacy folder, or None
        self._writer_open = False
        self._warned_writer = False
        self._put = put            # Sender.tensor
        self._stats = stats        # SenderStats: tensors, raw_cut
        self._colls = list(config.collections.values())
        self._by_name = config.collections
        self._active = ()          # collections saving at this step
        self._active_key = ()
        self._step = -1            # global step
        self._mode = "TRAIN"
        self._mode_step = 0
        self._counters = {}        # "<name>_output_" -> next index
        self._prev = {}            # param name -> (value copy, step)
        self._cache = {}           # (active names, tensor name) -> colls
        self._params = []          # (name, parameter) of watched models
        self._models = []
        self._warned_raw = False
        self._warned_channels = False

    # ---- selection ---------------------------------------------------------
    def _collections_for(self, name, relu=None):
        """The active collections that hold tensor `name` (relu: "input" /
        "output" for a torch.nn.ReLU module's tensors)."""
        key = (self._active_key, name, relu)
        hit = self._cache.get(key)
        if hit is None:
            hit = tuple(c for c in self._active if c.matches(name) or (
                relu is not None and c.relu_by_type == relu))
            if len(self._cache) > 100000:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _could_match(self, names, relu):
        for c in self._colls:
            if relu is not None and c.relu_by_type is not None:
                return True
            if any(c.matches(n) for n in names):
                return True
        return False

    # ---- step lifecycle ----------------------------------------------------
    def step_begin(self, mode, mode_step, wall_us):
        """A step starts: heartbeat, the collections this step saves, and
        the parameters' values."""
        self._step += 1
        self._mode = mode
        self._mode_step = mode_step
        self._counters.clear()
        self._active = tuple(c for c in self._colls
                             if c.saves(mode, mode_step))
        self._active_key = tuple(c.name for c in self._active)
        self._put((HEARTBEAT, (), self._step, mode, mode_step, wall_us, "",
                   (), 0, (), None, None, -1))
        if self._writer is not None:
            if self._writer_open:
                self._writer.end_step()
            self._writer.begin_step(self._step, mode, mode_step)
            self._writer_open = True
        if self._active:
            for name, p in self._params:
                colls = self._collections_for(name)
                if colls:
                    self._save(name, p, colls, "param")

    @property
    def saving(self):
        return bool(self._active)

    # ---- registration ------------------------------------------------------
    def watch(self, model):
        """Names the model's modules and parameters and hooks those that
        can be saved. Returns the handles."""
        if any(m is model for m in self._models):
            return []  # watched already: its tensors come once
        self._models.append(model)
        root = type(model).__name__
        for c in self._colls:
            if c.root_input:  # input_image: the model's input batch
                c.tensor_names.add(f"{root}_input_0")
        self._cache.clear()
        handles = []
        for path, p in model.named_parameters():
            name = f"{root}_{path}"
            self._params.append((name, p))
            if p.requires_grad and self._could_match([f"gradient/{name}"],
                                                     None):
                handles.append(p.register_hook(self._grad_hook(
                    f"gradient/{name}")))
        for path, module in model.named_modules():
            mname = root if path == "" else path
            relu = isinstance(module, torch.nn.ReLU)
            probe = [f"{mname}_input_0", f"{mname}_output_0"]
            if self._could_match(probe, "x" if relu else None):
                handles.append(module.register_forward_hook(
                    self._module_hook(mname, relu)))
        return handles

    def watch_loss(self, module):
        """A loss module: its output is <LossClass>_output_0 (collection
        losses), its inputs <LossClass>_input_<i>."""
        return [module.register_forward_hook(
            self._module_hook(type(module).__name__, False))]

    def _grad_hook(self, name):
        def on_grad(grad):
            if self._active:
                colls = self._collections_for(name)
                if colls:
                    self._save(name, grad, colls, "gradient")
            return None
        return on_grad

    def _module_hook(self, mname, relu):
        def on_forward(module, inputs, output):
            if not self._active:
                return
            for kind, tensors in (("input", _flatten(inputs, [])),
                                  ("output", _flatten(output, []))):
                prefix = f"{mname}_{kind}_"
                for t in tensors:
                    i = self._counters.get(prefix, 0)
                    self._counters[prefix] = i + 1
                    name = f"{prefix}{i}"
                    colls = self._collections_for(
                        name, kind if relu else None)
                    if colls:
                        self._save(name, t, colls,
                                   f"relu_{kind}" if relu else "other")
        return on_forward

    # ---- explicit tensors --------------------------------------------------
    def record_loss(self, loss, name="loss"):
        prefix = f"{name}_output_"
        i = self._counters.get(prefix, 0)
        self._counters[prefix] = i + 1
        tname = f"{prefix}{i}"
        colls = self._collections_for(tname)
        if colls:
            self._save(tname, loss, colls, "other")

    def save_tensor(self, name, value, collections):
        """A tensor the script names (labels, predictions): added to
        those of `collections` the configuration includes (a name it
        does not include is ignored); saved when one of them saves."""
        for cname in collections:
            c = self._by_name.get(cname)
            if c is not None and name not in c.tensor_names:
                c.tensor_names.add(name)
                self._cache.clear()
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value)
        colls = self._collections_for(name)
        if colls:
            self._save(name, value, colls, "other")

    # ---- one record --------------------------------------------------------
    def _channel_ops(self, name, colls, t):
        """channel_sum/<c> for each channel c along the axis of the first
        collection with a channel, channel_count, channel_axis; () when
        none has one, or (with one warning) the tensor has no such axis or
        more than MAX_IMAGE_CHANNELS channels."""
        axis = next((c.channel for c in colls if c.channel is not None),
                    None)
        if axis is None:
            return (), None
        n = t.shape[axis] if t.dim() > axis else 0
        if not 1 <= n <= MAX_IMAGE_CHANNELS:
            if not self._warned_channels:
                self._warned_channels = True
                import logging
                logging.getLogger("trainwatch").warning(
                    "trainwatch: %s of shape %s has no channel axis %d of "
                    "1 to %d channels: no channel sums are sent "
                    "(CheckInputImages does not evaluate it)", name,
                    tuple(t.shape), axis, MAX_IMAGE_CHANNELS)
            return (), None
        return tuple(f"channel_sum/{c}" for c in range(n)) + (
            "channel_count", "channel_axis"), axis

    def _ops(self, name, colls, kind, numel):
        if any(c.scalar for c in colls):
            ops = ["value"]
        elif kind == "gradient":
            ops = list(GRADIENT_OPS)
            if self._mode_step < self.config.quantile_steps:
                ops += ["p5", "p95"]
        elif kind == "param":
            ops = list(WEIGHT_OPS)
            if name not in self._prev:
                ops.remove("update_l2")
        elif kind == "relu_output":
            ops = list(RELU_OUTPUT_OPS)
        elif kind == "relu_input":
            ops = list(RELU_INPUT_OPS)
        else:
            ops = list(OTHER_OPS)
        for c in colls:
            if not c.scalar:
                ops += [r for r in c.reductions if r not in ops]
        return ops

    def _save(self, name, t, colls, kind):
        numel = t.numel()
        if numel == 0:
            return  # empty tensors are never written (5.7)
        ops = self._ops(name, colls, kind, numel)
        channel_ops, axis = self._channel_ops(name, colls, t)
        ops += [op for op in channel_ops if op not in ops]
        prev_step = -1
        prev = None
        if kind == "param":
            hit = self._prev.get(name)
            if hit is not None:
                prev, prev_step = hit
        values = reduce(t, ops, prev, self.config.relu_threshold_inactivity,
                        channel_axis=axis)
        if kind == "param":
            self._prev[name] = (t.detach().clone(), self._step)
        raw = None
        if any(c.save_raw_tensor for c in colls):
            if numel <= self.config.raw_tensor_max_elements:
                raw = t.detach().reshape(-1).to(torch.float64)
                if raw.data_ptr() == t.data_ptr():
                    raw = raw.clone()  # float64 already: keep this value
            else:
                self._stats.raw_cut += 1
                if not self._warned_raw:
                    self._warned_raw = True
                    import logging
                    logging.getLogger("trainwatch").warning(
                        "trainwatch: %s has %d elements, over "
                        "raw_tensor_max_elements %d: only its reductions "
                        "are sent (counted in raw_cut)", name, numel,
                        self.config.raw_tensor_max_elements)
        if self._writer is not None and self._writer_open:
            # the whole tensor, as the reference's hook saves it by default
            # (only with container_local_output_path: a host copy)
            full = t.detach()
            if full.dtype == torch.bfloat16:
                full = full.float()
            try:
                self._writer.write_tensor(name, full.cpu().numpy(),
                                          tuple(c.name for c in colls),
                                          wall_time=time.time())
            except ValueError as e:  # a dtype the layout cannot hold
                if not self._warned_writer:
                    self._warned_writer = True
                    import logging
                    logging.getLogger("trainwatch").warning(
                        "trainwatch: %s not written to the debug output "
                        "folder: %s", name, e)
        self._put((name, tuple(c.name for c in colls), self._step,
                   self._mode, self._mode_step, _now_us(), _dtype_name(t),
                   tuple(t.shape), numel, tuple(ops), values, raw,
                   prev_step))

    def close(self):
        """Finishes the legacy folder (its last step, collections file and
        end marker) when one is written."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._writer_open = False
