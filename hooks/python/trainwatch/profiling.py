"""The profiling the ProfilerConfig asks for, inside its ranges:

  detailed    torch.profiler around the steps of the detailed range: each
              operator event becomes a framework event of phase
              `cpu_functions` (`gpu_functions-dev:<n>` for a device kernel,
              when a build records them), source ModelTimeline, name = the
              operator (`aten::addmm`), as the service's detailed profiling
              wrote them (RULES.md 1.3).
  dataloader  in the dataloader range, the DataLoader iterator's own
              methods (`<IteratorClass>.<method>`) whose name matches
              metrics_regex, phase `DataLoaderIterDetail` (torch_watch).
  python      cProfile around each step of the Python range, cut at
              STEP_START, FORWARD_PASS_END and STEP_END (START / END at the
              hook's start and close), each interval published as function
              statistics (a PythonProfile, schemas/metrics.fbs).

Nothing runs without a FrameworkProfile (ProfilerConfig's default): then the
per-step cost is one attribute test. Ranges count in the step numbers of
the current mode (the step_num the Step events carry). Everything here runs
on the training thread inside Hook callbacks, which catch its errors.
"""
import collections
import cProfile
import logging
import os
import re
import sys
import time
import weakref

log = logging.getLogger("trainwatch")

PHASE_CPU = "cpu_functions"
MAX_DETAILED_EVENTS = 50000      # per detailed window; the rest are counted
MAX_PROFILE_FUNCTIONS = 5000     # per Python profile, by cumulative time
MAX_CALLERS = 50                 # per function, by cumulative time

_TIMERS = {
    "total_time": None,  # cProfile's own wall-clock timer
    "cpu_time": time.process_time,
    "off_cpu_time": lambda: time.perf_counter() - time.process_time(),
}


def _now_us():
    return time.time_ns() // 1000


class _Window:
    """A resolved range: steps [first, end) or wall time [t0, t1) (us)."""

    __slots__ = ("first", "end", "t0", "t1")

    def __init__(self, resolved):
        self.first = self.end = self.t0 = self.t1 = None
        if "start_step" in resolved:
            self.first = resolved["start_step"]
            self.end = self.first + resolved["num_steps"]
        else:
            self.t0 = int(resolved.get("start_unix_time", 0) * 1e6)
            d = resolved.get("duration")
            self.t1 = self.t0 + int(d * 1e6) if d is not None else None

    def contains(self, step, now_us):
        if self.first is not None:
            return self.first <= step < self.end
        return now_us >= self.t0 and (self.t1 is None or now_us < self.t1)


def function_stats(stats, max_functions=MAX_PROFILE_FUNCTIONS,
                   max_callers=MAX_CALLERS):
    """pstats' dict {(file, line, fn): (cc, nc, tt, ct, callers)} as a list
    of dicts (the most cumulative time first, at most max_functions), and
    how many were cut."""
    items = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)
    cut = max(0, len(items) - max_functions)
    out = []
    for (file, line, fn), (cc, nc, tt, ct, callers) in items[:max_functions]:
        cs = sorted(callers.items(), key=lambda kv: kv[1][3], reverse=True)
        out.append({
            "function": fn, "file": file, "line": line,
            "primitive_calls": cc, "total_calls": nc,
            "total_time": tt, "cumulative_time": ct,
            # callers' values are (nc, cc, tt, ct) in cProfile
            "callers": [{"function": cfn, "file": cfile, "line": cline,
                         "primitive_calls": v[1], "total_calls": v[0],
                         "total_time": v[2], "cumulative_time": v[3]}
                        for (cfile, cline, cfn), v in cs[:max_callers]],
        })
    return out, cut


class _PendingProfile:
    """A stopped cProfile and its interval; calling it builds the
    PythonProfile dict (on the sending thread: the statistics of a step
    cost more than the step's own Python work)."""

    __slots__ = ("prof", "meta")

    def __init__(self, prof, meta):
        self.prof = prof
        self.meta = meta

    def __call__(self):
        self.prof.create_stats()
        d = dict(self.meta)
        d["functions"], d["functions_cut"] = function_stats(self.prof.stats)
        return d


class Profiling:
    """Per-process profiling state of one Hook. `publish(pending)` queues
    a callable that returns a PythonProfile dict; drain_detailed() (on the
    sending thread) returns the detailed events."""

    def __init__(self, config, pid, publish, source_model_timeline):
        self.active = False
        fp = config.framework_profile_params
        if fp is None:
            return
        self._pid = pid
        self._publish = publish
        self._source = source_model_timeline
        self._detailed = _Window(fp.detailed_profiling_config.resolved(fp))
        self._loader = _Window(fp.dataloader_profiling_config.resolved(fp))
        self._python = _Window(fp.python_profiling_config.resolved(fp))
        pc = fp.python_profiling_config
        self._timer_name = pc.cprofile_timer
        self._python_on = True
        if pc.python_profiler != "cprofile":
            # not installed on Debian 12 and not implemented: said once
            log.warning("trainwatch: python_profiler %s is not supported "
                        "(only cprofile): no Python profiling",
                        pc.python_profiler)
            self._python_on = False
        self.loader_on = False   # read by the dataloader wrappers
        self.loader_regex = re.compile(
            fp.dataloader_profiling_config.metrics_regex)
        self._torch_prof = None
        self._torch_anchor = 0
        self._stopped = collections.deque()  # (stopped profiler, anchor)
        self._cprof = None
        self._seg = None         # (phase, step, mode, start_us)
        self.detailed_events = 0
        self.detailed_cut = 0
        self.profiles = 0
        self.active = True
        # a DataLoader worker forked while cProfile runs would inherit it
        # for its whole life: the child drops it
        forked = weakref.WeakMethod(self._forked)
        os.register_at_fork(
            after_in_child=lambda: forked() is not None and forked()())

    def _forked(self):
        if self._cprof is not None:
            sys.setprofile(None)
            self._cprof = None
            self._python_on = False
            self.active = False

    # ---- the hook's step points --------------------------------------------
    def start(self, mode, now_us):
        """At the hook's start: a Python range holding step 0 (or now)
        profiles the initialization, START to STEP_START of step 0."""
        if self._python_on and self._python.contains(0, now_us):
            self._open("START", 0, mode, now_us)

    def step_start(self, mode, step, now_us):
        self.loader_on = self._loader.contains(step, now_us)
        want = self._detailed.contains(step, now_us)
        if not want and self._torch_prof is not None:
            self._torch_stop()
        # cProfile after stopping torch's profiler, before starting it:
        # neither's own work lands in the other's interval
        self._cut("STEP_START", step, mode, now_us,
                  self._python_on and self._python.contains(step, now_us))
        if want and self._torch_prof is None:
            self._torch_start()

    def forward_end(self, mode, step, now_us):
        if self._cprof is not None:
            self._cut("FORWARD_PASS_END", step, mode, now_us, True)

    def step_end(self, mode, step, now_us):
        if self._cprof is not None:
            self._cut("STEP_END", step, mode, now_us, False)

    def close(self, mode, step, now_us):
        self.loader_on = False
        if self._cprof is not None:
            self._cut("END", step, mode, now_us, False)
        if self._torch_prof is not None:
            self._torch_stop()

    # ---- Python (cProfile) -----------------------------------------------
    def _open(self, phase, step, mode, now_us):
        if sys.getprofile() is not None:
            log.warning("trainwatch: another Python profiler is active: "
                        "no Python profiling by the hook")
            self._python_on = False
            return
        timer = _TIMERS[self._timer_name]
        self._cprof = cProfile.Profile(timer) if timer else cProfile.Profile()
        self._seg = (phase, step, mode, now_us)
        self._cprof.enable()

    def _cut(self, phase, step, mode, now_us, reopen):
        """Ends the open interval at (phase, step), publishes it, and opens
        the next one from there when reopen."""
        prof = self._cprof
        if prof is not None:
            prof.disable()
            self._cprof = None
            s_phase, s_step, s_mode, s_us = self._seg
            self._publish(_PendingProfile(prof, {
                "profiler": "cprofile", "timer": self._timer_name,
                "mode": s_mode, "start_step": s_step, "end_step": step,
                "start_phase": s_phase, "end_phase": phase,
                "start_us": s_us, "end_us": now_us, "pid": self._pid}))
            self.profiles += 1
        if reopen:
            self._open(phase, step, mode, now_us)

    # ---- detailed (torch.profiler) -----------------------------------------
    def _torch_start(self):
        import torch
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        prof = torch.profiler.profile(activities=acts)
        # the events' times count from the profiler's start: anchored to
        # the wall clock just before it (error: the start's own latency)
        self._torch_anchor = _now_us()
        prof.__enter__()
        self._torch_prof = prof

    def _torch_stop(self):
        """Stops torch's profiler; its events are read on the sending
        thread (drain_detailed): building them costs far more than a step."""
        prof, self._torch_prof = self._torch_prof, None
        prof.__exit__(None, None, None)
        self._stopped.append((prof, self._torch_anchor))

    def drain_detailed(self):
        """The framework events of the stopped torch.profiler windows (a
        source of the sending thread, Sender.add_source)."""
        out = []
        while self._stopped:
            prof, base = self._stopped.popleft()
            n = 0
            for e in prof.events():
                if n == MAX_DETAILED_EVENTS:
                    self.detailed_cut += 1
                    continue
                tr = e.time_range
                dev = getattr(e, "device_type", None)
                phase = PHASE_CPU
                if dev is not None and getattr(dev, "name", "CPU") != "CPU":
                    phase = "gpu_functions-dev:%d" % getattr(
                        e, "device_index", 0)
                out.append((e.name, phase, base + int(tr.start),
                            base + int(tr.end), self._pid, None,
                            self._source))
                n += 1
            self.detailed_events += n
        return out
