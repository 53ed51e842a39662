"""The debugging configuration of a training job: DebuggerHookConfig and
CollectionConfig, with the managed service's PyTorch collections and save
rules (DEBUG_RULES.md 5.4-5.7), validated at construction like
ProfilerConfig (ConfigError naming the key).

Parameters arrive as the SDK sends them (strings, "100", "0,5,9") or as
Python values. Save keys: save_interval, save_steps, start_step,
end_step, each also prefixed train., eval., predict. or global. for one
mode. Unprefixed keys give the base, a prefixed key overrides its mode;
a collection's keys override the hook's per mode.

Save rule (5.6), per mode and its own step counter k:
    save <=> k in save_steps or (start_step <= k < end_step (no end: any)
                                 and k % save_interval == 0)
The interval is anchored at 0, end_step is exclusive, save_steps ignore
the range. Gradients are never saved in EVAL or PREDICT.
"""
import numbers
import re

from .profiler_config import ConfigError

MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")
SAVE_KEYS = ("save_interval", "save_steps", "start_step", "end_step")
MODE_PREFIXES = {"train.": "TRAIN", "eval.": "EVAL", "predict.": "PREDICT",
                 "global.": "GLOBAL"}
DEFAULT_SAVE_INTERVAL = 500

# PyTorch's built-in collections (DEBUG_RULES.md 5.4; Python re.search).
# relu_output / relu_input also take every torch.nn.ReLU module's output /
# input by module type, whatever its name (5.3: names such as features.1
# never match the regex).
BUILTIN_REGEXES = {
    "losses": ["[Ll]oss_(?!input).*output"],
    "weights": ["^(?!gradient).*weight"],
    "biases": ["^(?!gradient).*bias"],
    "gradients": ["^gradient"],
    "relu_output": [".*relu_output"],
    "relu_input": [".*relu_input"],
    "input_image": [],
    "default": [],
    "all": [],
}
SCALAR_COLLECTIONS = ("losses", "metrics", "sm_metrics")

# CheckInputImages (DEBUG_RULES.md 4.8): the collection input_image
# publishes per-channel sums along `channel` (default 1, NCHW). Its
# reference default regex is MXNet's and matches no PyTorch name, so with
# that regex (or none) it also takes each watched model's root input,
# <RootClass>_input_0 (5.3).
IMAGE_COLLECTION = "input_image"
IMAGE_DEFAULT_CHANNEL = 1
MAX_CHANNEL_AXIS = 7  # CheckInputImages' `channel` range
MXNET_INPUT_REGEX = ".*hybridsequential0_input_0"
NOT_IN_EVAL = ("gradients", "optimizer_variables")

# The reference's reduction strings (5.7): the op name published for each.
_PLAIN = ("min", "max", "mean", "std", "variance", "sum", "prod")
REDUCTIONS = {}
for _r in _PLAIN:
    REDUCTIONS[_r] = _r
    REDUCTIONS["abs_" + _r] = "abs_" + _r
for _n in ("l1", "l2"):
    REDUCTIONS[_n + "_norm"] = _n
    REDUCTIONS["abs_" + _n + "_norm"] = "abs_" + _n
del _r, _n

_COLLECTION_KEYS = set(SAVE_KEYS) | {"include_regex", "reductions",
                                     "save_raw_tensor", "save_histogram",
                                     "channel"}
_HOOK_KEYS = set(SAVE_KEYS) | {"include_regex", "reductions", "save_all",
                               "include_workers", "export_tensorboard",
                               "tensorboard_dir"}


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _int(where, v, lo):
    """An integer >= lo from an int or its decimal text."""
    if isinstance(v, str) and re.fullmatch(r"\s*[+-]?\d+\s*", v):
        v = int(v)
    if not _is_int(v) or v < lo:
        raise ConfigError(f"{where} must be an integer >= {lo}, not {v!r}",
                          [where])
    return int(v)


def _csv(v):
    if isinstance(v, str):
        return [x.strip() for x in v.split(",") if x.strip()]
    if isinstance(v, (list, tuple)):
        return list(v)
    return None


def _bool(where, v):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    raise ConfigError(f"{where} must be true or false, not {v!r}", [where])


def _regexes(where, v):
    items = _csv(v)
    if items is None or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{where} must be a regular expression or a list "
                          f"of them (CSV), not {v!r}", [where])
    for x in items:
        try:
            re.compile(x)
        except re.error as e:
            raise ConfigError(f"{where}: {x!r} is not a regular expression: "
                              f"{e}", [where]) from None
    return items


def _reductions(where, v):
    items = _csv(v)
    if items is None or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{where} must be a CSV of reductions, not {v!r}",
                          [where])
    out = []
    for x in items:
        op = REDUCTIONS.get(x.lower())
        if op is None:
            hint = ""
            if x.lower() in ("l1", "l2", "abs_l1", "abs_l2"):
                hint = f" (a norm takes the _norm suffix: {x.lower()}_norm)"
            raise ConfigError(f"{where}: unknown reduction {x!r}{hint}; one "
                              f"of {', '.join(sorted(REDUCTIONS))}", [where])
        if op not in out:
            out.append(op)
    return out


class SaveConfigMode:
    """The save rule of one mode."""

    __slots__ = ("save_interval", "save_steps", "start_step", "end_step")

    def __init__(self, save_interval=DEFAULT_SAVE_INTERVAL, save_steps=(),
                 start_step=0, end_step=None):
        self.save_interval = save_interval
        self.save_steps = frozenset(save_steps)
        self.start_step = start_step
        self.end_step = end_step

    def should_save(self, k):
        if k in self.save_steps:
            return True
        if k < self.start_step or (self.end_step is not None
                                   and k >= self.end_step):
            return False
        return k % self.save_interval == 0

    def to_dict(self):
        d = {"save_interval": self.save_interval,
             "start_step": self.start_step}
        if self.save_steps:
            d["save_steps"] = sorted(self.save_steps)
        if self.end_step is not None:
            d["end_step"] = self.end_step
        return d


def _save_values(where, params):
    """{mode or None: {key: value}} of the save keys in params, validated;
    None holds the unprefixed keys."""
    out = {}
    for key, v in params.items():
        mode, base = None, key
        for prefix, m in MODE_PREFIXES.items():
            if key.startswith(prefix):
                mode, base = m, key[len(prefix):]
                break
        if base not in SAVE_KEYS:
            continue
        w = f"{where}.{key}"
        if base == "save_interval":
            val = _int(w, v, 1)
        elif base == "start_step":
            val = _int(w, v, 0)
        elif base == "end_step":
            val = None if v is None else _int(w, v, 0)
        else:
            steps = _csv(v) if not _is_int(v) else [v]
            if steps is None:
                raise ConfigError(f"{w} must be a list of steps (or CSV), "
                                  f"not {v!r}", [w])
            val = [_int(w, s, 0) for s in steps]
        out.setdefault(mode, {})[base] = val
    return out


def _resolve(layers):
    """{mode: SaveConfigMode} from save-value layers (lowest priority
    first), each from _save_values."""
    res = {}
    for m in MODES:
        d = {}
        for layer in layers:
            d.update(layer.get(None, {}))
            d.update(layer.get(m, {}))
        res[m] = SaveConfigMode(**d)
    return res


def _check_keys(where, params, allowed):
    if not isinstance(params, dict):
        raise ConfigError(f"{where} must be a mapping, not {params!r}",
                          [where])
    for key in params:
        base = key
        for prefix in MODE_PREFIXES:
            if isinstance(key, str) and key.startswith(prefix):
                base = key[len(prefix):]
                break
        if not isinstance(key, str) or base not in allowed or (
                base != key and base not in SAVE_KEYS):
            raise ConfigError(f"{where}: unknown key {key!r}; keys: "
                              f"{', '.join(sorted(allowed))} (save keys "
                              "also prefixed train./eval./predict./global.)",
                              [f"{where}.{key}"])


class CollectionConfig:
    """A collection to save: CollectionConfig("gradients",
    {"save_interval": "100"}) as in the SDK. parameters: include_regex
    (CSV, added to a built-in collection's regexes), reductions (CSV of
    min max mean std variance sum prod l1_norm l2_norm and abs_ forms),
    save_raw_tensor (true: the whole tensor too, only when it has at most
    DebuggerHookConfig.raw_tensor_max_elements elements), save_histogram
    (accepted, ignored), channel (trainwatch's: publish per-channel sums
    along this axis, for CheckInputImages; the collection input_image
    has 1), and the save keys."""

    def __init__(self, name, parameters=None):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"CollectionConfig name must be a non-empty "
                              f"string, not {name!r}", ["name"])
        where = f"collection_configs[{name}]"
        params = dict(parameters or {})
        _check_keys(where, params, _COLLECTION_KEYS)
        self.name = name
        self.parameters = params
        self.include_regex = _regexes(f"{where}.include_regex",
                                      params["include_regex"]) \
            if "include_regex" in params else []
        self.reductions = _reductions(f"{where}.reductions",
                                      params["reductions"]) \
            if "reductions" in params else []
        self.save_raw_tensor = _bool(f"{where}.save_raw_tensor",
                                     params["save_raw_tensor"]) \
            if "save_raw_tensor" in params else False
        if "save_histogram" in params:
            _bool(f"{where}.save_histogram", params["save_histogram"])
        self.channel = _int(f"{where}.channel", params["channel"], 0) \
            if "channel" in params else None
        if self.channel is not None and self.channel > MAX_CHANNEL_AXIS:
            raise ConfigError(f"{where}.channel must be an axis in [0, "
                              f"{MAX_CHANNEL_AXIS}], not {self.channel}",
                              [f"{where}.channel"])
        self.save_values = _save_values(where, params)

    def __repr__(self):
        return f"CollectionConfig({self.name!r}, {self.parameters!r})"


class Collection:
    """A resolved collection: its regexes, save rule per mode, reductions
    and raw flag."""

    def __init__(self, name, regexes, save, reductions, save_raw_tensor,
                 relu_by_type=None, channel=None):
        self.name = name
        self.regexes = [re.compile(r) for r in regexes]
        self.save = save
        self.reductions = reductions
        self.save_raw_tensor = save_raw_tensor
        self.relu_by_type = relu_by_type  # "input" / "output" / None
        self.scalar = name in SCALAR_COLLECTIONS
        self.tensor_names = set()  # names added by hook.save_tensor
        # the axis of per-channel sums (CheckInputImages); None: none
        self.channel = channel
        # takes each watched model's <RootClass>_input_0 (Debugger.watch)
        self.root_input = name == IMAGE_COLLECTION and all(
            r in ("", MXNET_INPUT_REGEX) for r in regexes)

    def matches(self, name):
        return name in self.tensor_names or any(
            r.search(name) for r in self.regexes)

    def saves(self, mode, k):
        if mode in ("EVAL", "PREDICT") and self.name in NOT_IN_EVAL:
            return False
        return self.save[mode].should_save(k)

    def to_dict(self):
        d = {"include_regex": [r.pattern for r in self.regexes],
             "save_config": {m: s.to_dict() for m, s in self.save.items()}}
        if self.reductions:
            d["reductions"] = list(self.reductions)
        if self.save_raw_tensor:
            d["save_raw_tensor"] = True
        if self.channel is not None:
            d["channel"] = self.channel
        return d


class DebuggerHookConfig:
    """What the hook saves for the debugging rules, as the SDK's
    DebuggerHookConfig(hook_parameters=..., collection_configs=[...]).

    hook_parameters: save_all, include_regex (CSV: collection "default"),
    reductions (for collections without their own), the save keys (the
    base of every collection), include_workers, export_tensorboard,
    tensorboard_dir (accepted; trainwatch writes no TensorBoard files).
    container_local_output_path: also write every saved tensor, whole,
    there in the legacy debug-output layout (debug_writer.py).
    The collection "losses" is always saved. trainwatch's own settings:
    quantile_steps (gradients carry p5/p95 while their mode step is
    below it; PoorWeightInitialization's `steps`, default 10),
    relu_threshold_inactivity (percent of the batch a node must be
    active for, default 1.0, DeadRelu's threshold_inactivity),
    raw_tensor_max_elements (cap on raw tensors, default 4096)."""

    def __init__(self, hook_parameters=None, collection_configs=None, *,
                 quantile_steps=10, relu_threshold_inactivity=1.0,
                 raw_tensor_max_elements=4096, s3_output_path=None,
                 container_local_output_path=None):
        hp = dict(hook_parameters or {})
        _check_keys("hook_parameters", hp, _HOOK_KEYS)
        self.hook_parameters = hp
        self.save_all = _bool("hook_parameters.save_all", hp["save_all"]) \
            if "save_all" in hp else False
        self.include_regex = _regexes("hook_parameters.include_regex",
                                      hp["include_regex"]) \
            if "include_regex" in hp else []
        self.reductions = _reductions("hook_parameters.reductions",
                                      hp["reductions"]) \
            if "reductions" in hp else []
        if "include_workers" in hp and hp["include_workers"] not in (
                "one", "all"):
            raise ConfigError("hook_parameters.include_workers must be one "
                              f"or all, not {hp['include_workers']!r}",
                              ["hook_parameters.include_workers"])
        self.hook_save = _save_values("hook_parameters", hp)
        configs = list(collection_configs or [])
        for c in configs:
            if not isinstance(c, CollectionConfig):
                raise ConfigError("collection_configs must hold "
                                  f"CollectionConfig objects, not {c!r}",
                                  ["collection_configs"])
        self.collection_configs = configs
        self.quantile_steps = _int("quantile_steps", quantile_steps, 0)
        if not (isinstance(relu_threshold_inactivity, numbers.Real)
                and not isinstance(relu_threshold_inactivity, bool)
                and 0 <= relu_threshold_inactivity <= 100):
            raise ConfigError("relu_threshold_inactivity must be a percent "
                              f"in [0, 100], not "
                              f"{relu_threshold_inactivity!r}",
                              ["relu_threshold_inactivity"])
        self.relu_threshold_inactivity = float(relu_threshold_inactivity)
        self.raw_tensor_max_elements = _int("raw_tensor_max_elements",
                                            raw_tensor_max_elements, 0)
        self.s3_output_path = s3_output_path
        self.container_local_output_path = container_local_output_path
        self.collections = self._build()

    def _build(self):
        """The included collections by name (5.4): losses always, every
        configured one, default with include_regex, all with save_all.
        Two configs of one name: the later one's save and reduction
        settings win and its regexes are added (as the service does)."""
        merged = {}
        for c in self.collection_configs:
            m = merged.setdefault(c.name, {"regex": [], "save": [],
                                           "reductions": None, "raw": None,
                                           "channel": None})
            m["regex"] += [r for r in c.include_regex if r not in m["regex"]]
            m["save"].append(c.save_values)
            if "reductions" in c.parameters:
                m["reductions"] = c.reductions
            if "save_raw_tensor" in c.parameters:
                m["raw"] = c.save_raw_tensor
            if c.channel is not None:
                m["channel"] = c.channel
        names = ["losses"] + [n for n in merged if n != "losses"]
        if self.include_regex and "default" not in names:
            names.append("default")
        if self.save_all and "all" not in names:
            names.append("all")
        out = {}
        for n in names:
            m = merged.get(n, {"regex": [], "save": [], "reductions": None,
                               "raw": None, "channel": None})
            regex = list(BUILTIN_REGEXES.get(n, [])) + m["regex"]
            if n == "default":
                regex += self.include_regex
            if n == "all":
                regex.append(".*")
            save = _resolve([self.hook_save] + m["save"])
            red = m["reductions"] if m["reductions"] is not None \
                else self.reductions
            if n in SCALAR_COLLECTIONS:
                red = []  # scalars: the value, never reductions (5.4)
            relu = {"relu_output": "output", "relu_input": "input"}.get(n)
            channel = m["channel"]
            if channel is None and n == IMAGE_COLLECTION:
                channel = IMAGE_DEFAULT_CHANNEL
            out[n] = Collection(n, regex, save, red, bool(m["raw"]), relu,
                                channel)
        return out

    @classmethod
    def from_json(cls, obj):
        """From the JSON the managed service gives the training container
        (DEBUG_RULES.md 5.5): {"LocalPath", "HookParameters": {...},
        "CollectionConfigurations": [{"CollectionName",
        "CollectionParameters"}]}, a dict or its text."""
        if isinstance(obj, (str, bytes)):
            import json
            try:
                obj = json.loads(obj)
            except ValueError as e:
                raise ConfigError(f"debugger JSON is not JSON: {e}",
                                  ["json"]) from None
        if not isinstance(obj, dict):
            raise ConfigError(f"debugger JSON must be an object, not "
                              f"{obj!r}", ["json"])
        colls = obj.get("CollectionConfigurations") or []
        if not isinstance(colls, list):
            raise ConfigError("CollectionConfigurations must be a list",
                              ["CollectionConfigurations"])
        configs = []
        for i, c in enumerate(colls):
            if not isinstance(c, dict) or "CollectionName" not in c:
                raise ConfigError(f"CollectionConfigurations[{i}] needs a "
                                  "CollectionName",
                                  [f"CollectionConfigurations[{i}]"])
            configs.append(CollectionConfig(c["CollectionName"],
                                            c.get("CollectionParameters")))
        return cls(hook_parameters=obj.get("HookParameters"),
                   collection_configs=configs,
                   container_local_output_path=obj.get("LocalPath"))

    @classmethod
    def from_json_file(cls, path=None):
        """from_json of a file: `path`, else $SMDEBUG_CONFIG_FILE_PATH,
        else /opt/ml/input/config/debughookconfig.json (as the service's
        hook looks for it)."""
        import os
        path = path or os.environ.get("SMDEBUG_CONFIG_FILE_PATH") or \
            "/opt/ml/input/config/debughookconfig.json"
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ConfigError(f"cannot read debugger JSON {path}: "
                              f"{e.strerror}", ["path"]) from None
        return cls.from_json(text)

    def to_json(self):
        """The same layout back (what the SDK sends); parameters as given."""
        d = {"HookParameters": dict(self.hook_parameters),
             "CollectionConfigurations": [
                 {"CollectionName": c.name,
                  "CollectionParameters": dict(c.parameters)}
                 for c in self.collection_configs]}
        if self.container_local_output_path:
            d["LocalPath"] = self.container_local_output_path
        return d

    def to_dict(self):
        return {"collections": {n: c.to_dict()
                                for n, c in self.collections.items()},
                "quantile_steps": self.quantile_steps,
                "relu_threshold_inactivity": self.relu_threshold_inactivity,
                "raw_tensor_max_elements": self.raw_tensor_max_elements}
