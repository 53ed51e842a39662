"""The profiling configuration of a training job, validated as the managed
service validates it (ProfilerConfig / FrameworkProfile and the three
per-feature configs).

The validated configuration travels in the hook's JOB_START marker as JSON
(to_dict()); from_dict() reads that JSON form back with the same checks, so
the case table in tests/data/profiler_config_cases.json drives both.

Ranges: a feature config's own range (steps or time) takes priority over the
FrameworkProfile's; without either it uses its default steps (detailed 5,
dataloader 7, Python 9..11). A step range and a time range in one config
are an error naming both fields.
"""
import numbers
import re

SYSTEM_INTERVALS_MS = (100, 200, 500, 1000, 5000, 60000)
PYTHON_PROFILERS = ("cprofile", "pyinstrument")
CPROFILE_TIMERS = ("total_time", "cpu_time", "off_cpu_time")


class ConfigError(ValueError):
    """A configuration that the service would refuse. `fields` names the
    offending fields (dotted paths)."""

    def __init__(self, message, fields):
        super().__init__(message)
        self.fields = tuple(fields)


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _check_range(where, start_step, num_steps, start_unix_time, duration):
    """Validates one range's four fields; returns nothing, raises ConfigError."""
    if start_step is not None and not (_is_int(start_step) and start_step >= 0):
        raise ConfigError(f"{where}.start_step must be an integer >= 0, "
                          f"not {start_step!r}", [f"{where}.start_step"])
    if num_steps is not None and not (_is_int(num_steps) and num_steps >= 1):
        raise ConfigError(f"{where}.num_steps must be an integer >= 1, "
                          f"not {num_steps!r}", [f"{where}.num_steps"])
    if start_unix_time is not None and not (
            _is_number(start_unix_time) and start_unix_time >= 0):
        raise ConfigError(f"{where}.start_unix_time must be seconds since the "
                          f"epoch (>= 0), not {start_unix_time!r}",
                          [f"{where}.start_unix_time"])
    if duration is not None and not (_is_number(duration) and duration > 0):
        raise ConfigError(f"{where}.duration must be seconds > 0, "
                          f"not {duration!r}", [f"{where}.duration"])
    step = [n for n, v in (("start_step", start_step), ("num_steps", num_steps))
            if v is not None]
    time = [n for n, v in (("start_unix_time", start_unix_time),
                           ("duration", duration)) if v is not None]
    if step and time:
        a, b = f"{where}.{step[0]}", f"{where}.{time[0]}"
        raise ConfigError(f"{a} and {b} cannot both be set: a range is "
                          f"either steps or time", [a, b])


class _Range:
    """A step range or a time range; None fields are unset."""

    kind = "range"
    default_start_step = None
    default_num_steps = None

    def __init__(self, start_step=None, num_steps=None, start_unix_time=None,
                 duration=None):
        _check_range(self.kind, start_step, num_steps, start_unix_time,
                     duration)
        self.start_step = start_step
        self.num_steps = num_steps
        self.start_unix_time = start_unix_time
        self.duration = duration

    def has_range(self):
        return any(v is not None for v in (self.start_step, self.num_steps,
                                           self.start_unix_time,
                                           self.duration))

    def _range_dict(self):
        return {k: v for k, v in (("start_step", self.start_step),
                                  ("num_steps", self.num_steps),
                                  ("start_unix_time", self.start_unix_time),
                                  ("duration", self.duration))
                if v is not None}

    def resolved(self, parent):
        """The effective range as a dict: own range, else the
        FrameworkProfile's (parent, may be None), else the defaults."""
        src = self if self.has_range() else (
            parent if parent is not None and parent.has_range() else None)
        if src is None:
            return {"start_step": self.default_start_step,
                    "num_steps": self.default_num_steps}
        d = src._range_dict()
        if "start_unix_time" in d or "duration" in d:
            return d
        d.setdefault("start_step", self.default_start_step
                     if self.default_start_step is not None else 0)
        d.setdefault("num_steps", self.default_num_steps
                     if self.default_num_steps is not None else 1)
        return d

    def in_range(self, parent, step, now_s):
        """Whether step (per-mode step number) / time now_s falls in it."""
        r = self.resolved(parent)
        if "start_step" in r:
            return r["start_step"] <= step < r["start_step"] + r["num_steps"]
        start = r.get("start_unix_time", 0)
        if now_s < start:
            return False
        return "duration" not in r or now_s < start + r["duration"]


class DetailedProfilingConfig(_Range):
    kind = "detailed_profiling_config"
    default_start_step = 5
    default_num_steps = 1

    def to_dict(self, parent=None):
        return self.resolved(parent)


class DataloaderProfilingConfig(_Range):
    kind = "dataloader_profiling_config"
    default_start_step = 7
    default_num_steps = 1

    def __init__(self, start_step=None, num_steps=None, start_unix_time=None,
                 duration=None, metrics_regex=".*"):
        super().__init__(start_step, num_steps, start_unix_time, duration)
        if not isinstance(metrics_regex, str):
            raise ConfigError(f"{self.kind}.metrics_regex must be a string, "
                              f"not {metrics_regex!r}",
                              [f"{self.kind}.metrics_regex"])
        try:
            re.compile(metrics_regex)
        except re.error as e:
            raise ConfigError(f"{self.kind}.metrics_regex {metrics_regex!r} "
                              f"is not a regular expression: {e}",
                              [f"{self.kind}.metrics_regex"]) from None
        self.metrics_regex = metrics_regex

    def to_dict(self, parent=None):
        d = self.resolved(parent)
        d["metrics_regex"] = self.metrics_regex
        return d


class PythonProfilingConfig(_Range):
    kind = "python_profiling_config"
    default_start_step = 9
    default_num_steps = 3

    def __init__(self, start_step=None, num_steps=None, start_unix_time=None,
                 duration=None, python_profiler="cprofile",
                 cprofile_timer="total_time"):
        super().__init__(start_step, num_steps, start_unix_time, duration)
        p = str(python_profiler).lower() if isinstance(
            python_profiler, str) else python_profiler
        if p not in PYTHON_PROFILERS:
            raise ConfigError(f"{self.kind}.python_profiler must be one of "
                              f"{', '.join(PYTHON_PROFILERS)}, not "
                              f"{python_profiler!r}",
                              [f"{self.kind}.python_profiler"])
        t = str(cprofile_timer).lower() if isinstance(
            cprofile_timer, str) else cprofile_timer
        if t not in CPROFILE_TIMERS:
            raise ConfigError(f"{self.kind}.cprofile_timer must be one of "
                              f"{', '.join(CPROFILE_TIMERS)}, not "
                              f"{cprofile_timer!r}",
                              [f"{self.kind}.cprofile_timer"])
        self.python_profiler = p
        self.cprofile_timer = t

    def to_dict(self, parent=None):
        d = self.resolved(parent)
        d["python_profiler"] = self.python_profiler
        if self.python_profiler == "cprofile":
            d["cprofile_timer"] = self.cprofile_timer
        return d


class FrameworkProfile(_Range):
    """Framework profiling: a range (steps or time) that applies to every
    feature config without its own, and the three feature configs."""

    kind = "framework_profile_params"

    def __init__(self, start_step=None, num_steps=None, start_unix_time=None,
                 duration=None, detailed_profiling_config=None,
                 dataloader_profiling_config=None,
                 python_profiling_config=None):
        super().__init__(start_step, num_steps, start_unix_time, duration)
        for name, value, cls in (
                ("detailed_profiling_config", detailed_profiling_config,
                 DetailedProfilingConfig),
                ("dataloader_profiling_config", dataloader_profiling_config,
                 DataloaderProfilingConfig),
                ("python_profiling_config", python_profiling_config,
                 PythonProfilingConfig)):
            if value is None:
                value = cls()
            elif not isinstance(value, cls):
                raise ConfigError(f"{self.kind}.{name} must be a "
                                  f"{cls.__name__}, not {value!r}",
                                  [f"{self.kind}.{name}"])
            setattr(self, name, value)

    def to_dict(self):
        d = self._range_dict()
        d["detailed_profiling_config"] = \
            self.detailed_profiling_config.to_dict(self)
        d["dataloader_profiling_config"] = \
            self.dataloader_profiling_config.to_dict(self)
        d["python_profiling_config"] = \
            self.python_profiling_config.to_dict(self)
        return d


class ProfilerConfig:
    """system_monitor_interval_millis: one of 100, 200, 500, 1000, 5000,
    60000. framework_profile_params: a FrameworkProfile, or None for no
    framework profiling beyond the hook's step/phase events."""

    def __init__(self, system_monitor_interval_millis=500,
                 framework_profile_params=None):
        v = system_monitor_interval_millis
        if not (_is_int(v) and v in SYSTEM_INTERVALS_MS):
            raise ConfigError(
                "system_monitor_interval_millis must be one of "
                f"{', '.join(map(str, SYSTEM_INTERVALS_MS))}, not {v!r}",
                ["system_monitor_interval_millis"])
        if framework_profile_params is not None and not isinstance(
                framework_profile_params, FrameworkProfile):
            raise ConfigError("framework_profile_params must be a "
                              f"FrameworkProfile, not "
                              f"{framework_profile_params!r}",
                              ["framework_profile_params"])
        self.system_monitor_interval_millis = v
        self.framework_profile_params = framework_profile_params

    def to_dict(self):
        d = {"system_monitor_interval_millis":
             self.system_monitor_interval_millis}
        if self.framework_profile_params is not None:
            d["framework_profile_params"] = \
                self.framework_profile_params.to_dict()
        return d

    @classmethod
    def from_dict(cls, d):
        """Builds and validates a ProfilerConfig from its JSON form (the
        keyword names as keys); an unknown key is an error naming it."""
        def take(where, obj, allowed):
            if not isinstance(obj, dict):
                raise ConfigError(f"{where} must be an object, not {obj!r}",
                                  [where])
            for k in obj:
                if k not in allowed:
                    path = f"{where}.{k}" if where else k
                    raise ConfigError(f"unknown key {path}", [path])
            return dict(obj)

        top = take("", d, ("system_monitor_interval_millis",
                           "framework_profile_params"))
        fp = top.get("framework_profile_params")
        if fp is not None:
            rng = ("start_step", "num_steps", "start_unix_time", "duration")
            fp = take("framework_profile_params", fp, rng + (
                "detailed_profiling_config", "dataloader_profiling_config",
                "python_profiling_config"))
            subs = (("detailed_profiling_config", DetailedProfilingConfig, ()),
                    ("dataloader_profiling_config", DataloaderProfilingConfig,
                     ("metrics_regex",)),
                    ("python_profiling_config", PythonProfilingConfig,
                     ("python_profiler", "cprofile_timer")))
            for name, sub_cls, extra in subs:
                if fp.get(name) is not None:
                    fp[name] = sub_cls(**take(name, fp[name], rng + extra))
            top["framework_profile_params"] = FrameworkProfile(**fp)
        return cls(**top)
