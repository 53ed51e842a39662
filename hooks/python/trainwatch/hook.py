"""trainwatch.Hook: the training-side hook. It records, in the training
process, the framework events the rules read (RULES.md 1.3) and streams
them to trainwatch's metrics topic:

  Step:ModeKeys.TRAIN|EVAL|PREDICT|GLOBAL   one per step, args.step_num
  Forward-SubModuleInternal / Backward-SubModuleInternal   per step
  DataLoaderIterInitialize, DataLoaderIter (GetNext waits),
  DataLoaderWorker (fetches in the worker processes)        dataloader
  JOB_START (process start time, the profiler configuration), JOB_END
  within the ProfilerConfig's ranges (profiling.py): torch.profiler
  operator events (cpu_functions), DataLoader iterator details, and
  cProfile function statistics per step interval (PythonProfile)

With profiler_output (or TRAINWATCH_PROFILER_OUTPUT) the same is also
written in the legacy profiler-output layout there (legacy_writer.py), for
`trainwatch eval`.

Steps: by default a step starts at each forward of the watched model (as
the managed service's hook counted them) and the mode follows
model.train()/model.eval(). An explicit hook.step() (call it at the start
of each step) or hook.mode() turns the automatic counting off.

With debugger_config (a DebuggerHookConfig) it also publishes, per saved
step, the reductions of the tensors of the debugging collections and a
heartbeat every step (debugger.py, TensorRecord). With stop_file (or
TRAINWATCH_STOP_FILE) it polls the file the engine's stop_file action
creates and, at the next step boundary, flushes, closes and raises
StopTraining (stop_channel.py).

Nothing here ever raises into the training loop once constructed (but
StopTraining, asked for): the first internal error is logged with its
traceback and the hook goes quiet (configuration errors at construction
do raise ConfigError). Without
brokers (argument or TRAINWATCH_BROKERS) or a job id (argument or
TRAINWATCH_JOB), or when confluent_kafka or the generated wire code is
missing, the hook is a no-op.
"""
import atexit
import functools
import json
import logging
import os
import signal
import threading
import time
import weakref

from .identity import Identity, node_id_for, process_start_us
from .debugger_config import DebuggerHookConfig
from .profiler_config import ConfigError, ProfilerConfig
from .stop_channel import StopChannel, StopTraining

log = logging.getLogger("trainwatch")

MODES = ("TRAIN", "EVAL", "PREDICT", "GLOBAL")
PHASE_FORWARD = "Forward-SubModuleInternal"
PHASE_BACKWARD = "Backward-SubModuleInternal"


def _now_us():
    return time.time_ns() // 1000


def _guarded(method):
    """Runs a hook callback; its first exception is logged once and the
    hook goes quiet. Training never sees it."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if not self._active:
            return None
        try:
            return method(self, *args, **kwargs)
        except Exception:  # the hook must never break training
            self._active = False
            log.exception("trainwatch: hook error; the hook is disabled "
                          "for the rest of this process")
            return None
    return run


class Hook:
    def __init__(self, job=None, brokers=None, profiler_config=None, *,
                 rank=None, local_rank=None, world_size=None, host=None,
                 node=None, topic="trainwatch.metrics", flush_interval=1.0,
                 max_queue=100000, close_timeout=10.0, kafka_config=None,
                 handle_sigterm=True, profiler_output=None,
                 debugger_config=None, stop_file=None,
                 capture_dir=None, control_topic="trainwatch.control"):
        if profiler_config is None:
            profiler_config = ProfilerConfig()
        if not isinstance(profiler_config, ProfilerConfig):
            raise ConfigError("profiler_config must be a ProfilerConfig, "
                              f"not {profiler_config!r}", ["profiler_config"])
        self.profiler_config = profiler_config
        if debugger_config is not None and not isinstance(
                debugger_config, DebuggerHookConfig):
            raise ConfigError("debugger_config must be a DebuggerHookConfig,"
                              f" not {debugger_config!r}",
                              ["debugger_config"])
        self.debugger_config = debugger_config
        self._debugger = None
        self.identity = Identity(rank, local_rank, world_size, host, node)
        self.job = job if job is not None else os.environ.get(
            "TRAINWATCH_JOB")
        self.brokers = brokers if brokers is not None else os.environ.get(
            "TRAINWATCH_BROKERS")
        self.profiler_output = (
            profiler_output if profiler_output is not None
            else os.environ.get("TRAINWATCH_PROFILER_OUTPUT"))
        self._pid = os.getpid()
        self._active = False
        self._closed = False
        # reentrant: SIGTERM may arrive while close() runs on this thread
        self._close_lock = threading.RLock()
        self._close_timeout = close_timeout
        self._sender = None
        self._mode = "TRAIN"
        self._mode_steps = {m: 0 for m in MODES}
        self._auto_steps = True
        self._auto_mode = True
        self._step_start = None
        self._last_activity = None
        self._model = None
        self._model_name = ""
        self._fwd_start = None
        self._bwd_start = None
        self._bwd_end = None
        self._handles = []
        self._worker_queues = []
        self._profiling = None
        self._control = None  # control.py: captures on the engine's request
        self.summary = None
        stop_file = stop_file if stop_file is not None else os.environ.get(
            "TRAINWATCH_STOP_FILE")
        self._stop = None
        if stop_file:
            self._stop = StopChannel(stop_file, self.job)
        if not self.job or not self.brokers:
            log.info("trainwatch: no %s configured: the hook does nothing",
                     "job id" if not self.job else "brokers")
            return
        try:
            self._start(topic, flush_interval, max_queue, kafka_config or {})
        except ConfigError:
            raise
        except ImportError as e:
            log.warning("trainwatch: cannot start the hook (%s): it does "
                        "nothing. It needs python3-confluent-kafka, "
                        "python3-flatbuffers and the generated wire code: "
                        "build the repository and use build/hooks/python, "
                        "or pip install ./hooks/python", e)
            self._sender = None
            return
        except Exception as e:  # bad Kafka setting
            log.warning("trainwatch: cannot start the hook (%s): it does "
                        "nothing", e)
            self._sender = None
            return
        self._active = True
        self._start_control(capture_dir, control_topic, kafka_config or {})
        if self._profiling is not None:
            self._profiling.start(self._mode, _now_us())
        atexit.register(_close_at_exit, weakref.ref(self))
        if handle_sigterm:
            _install_sigterm(self)

    # ---- set-up ----------------------------------------------------------
    def _start(self, topic, flush_interval, max_queue, kafka_config):
        import confluent_kafka  # noqa: F401 (a missing client: no-op hook)

        from .sender import Sender
        from .profiling import Profiling
        from .wire_batch import MARKER_JOB_START, SOURCE_MODEL_TIMELINE
        conf = {
            "bootstrap.servers": self.brokers,
            "client.id": f"trainwatch-hook-{self.identity.node}",
            # batches wait for the broker as long as the process lives
            "message.timeout.ms": 0,
            "enable.idempotence": True,
            "queue.buffering.max.messages": 10000,
            "queue.buffering.max.kbytes": 65536,
            "linger.ms": 20,
            "log_level": 2,
        }
        conf.update(kafka_config)
        holder = {}
        conf["error_cb"] = lambda err: holder["s"].on_error(err)
        producer = confluent_kafka.Producer(conf)
        start_us = process_start_us()  # JOB_START's time: the job's start
        legacy = None
        if self.profiler_output:
            from .legacy_writer import LegacyWriter
            ident = self.identity.node if self.identity.node != node_id_for(
                self.identity.rank, self.identity.host) else \
                f"{self.identity.rank}-{self.identity.host}"
            try:
                legacy = LegacyWriter(self.profiler_output, ident,
                                      start_us)
            except OSError as e:  # the stream still goes
                log.warning("trainwatch: cannot write profiler-output "
                            "folder %s (%s): streaming only",
                            self.profiler_output, e)
        self._sender = Sender(producer, topic, self.job, self.identity.node,
                              max_queue=max_queue,
                              flush_interval=flush_interval, legacy=legacy)
        holder["s"] = self._sender
        config = self.profiler_config.to_dict()
        self._sender.marker(
            (MARKER_JOB_START, start_us,
             self.profiler_config.system_monitor_interval_millis,
             json.dumps(config, separators=(",", ":"))))
        prof = Profiling(self.profiler_config, self._pid,
                         self._sender.profile, SOURCE_MODEL_TIMELINE)
        if prof.active:
            self._profiling = prof
            self._sender.add_source(prof.drain_detailed, "dropped")
        if self.debugger_config is not None:
            from .debugger import Debugger
            writer = None
            out_dir = self.debugger_config.container_local_output_path
            if out_dir:
                # the managed service's local debug output: the legacy
                # folder layout (debug_writer.py), so the same run can be
                # evaluated offline (`trainwatch eval DIR`) too
                from .debug_writer import DebugWriter
                writer = DebugWriter(
                    out_dir, worker=f"worker_{self.identity.rank}",
                    num_workers=self.identity.world_size)
            self._debugger = Debugger(self.debugger_config,
                                      self._sender.tensor,
                                      self._sender.stats, writer)

    def _start_control(self, capture_dir, topic, kafka_config):
        """With capture_dir (or TRAINWATCH_CAPTURE_DIR): listen for the
        engine's capture requests (control.py)."""
        capture_dir = capture_dir or os.environ.get("TRAINWATCH_CAPTURE_DIR")
        if not capture_dir:
            return
        from .control import Control
        try:
            self._control = Control(self.job, self.identity, self.brokers,
                                    topic=topic, capture_dir=capture_dir,
                                    kafka_config=kafka_config)
        except Exception as e:  # training goes on without captures
            log.warning("trainwatch: no capture requests (%s)", e)

    @property
    def enabled(self):
        """True while the hook records and sends."""
        return self._active

    def stats(self):
        """Counters of the sending side (events, dropped, batches,
        delivered, failed, bytes, worker_dropped) and the steps per mode."""
        d = self._sender.stats.as_dict() if self._sender else {}
        d["steps"] = dict(self._mode_steps)
        p = self._profiling
        if p is not None:
            d["detailed_events"] = p.detailed_events
            d["detailed_cut"] = p.detailed_cut
        return d

    # ---- events ----------------------------------------------------------
    def _emit(self, name, phase, start_us, end_us, args=None, source=0):
        self._sender.put((name, phase, start_us, end_us, self._pid, args,
                          source))

    def _end_step(self, end_us):
        """Ends the open step (if any) at end_us, with its backward pass."""
        if self._bwd_start is not None:
            end = self._bwd_end if self._bwd_end is not None else end_us
            self._emit(self._model_name, PHASE_BACKWARD, self._bwd_start,
                       max(end, self._bwd_start))
            self._bwd_start = self._bwd_end = None
        if self._step_start is None:
            return
        name = "Step:ModeKeys." + self._mode
        n = self._mode_steps[self._mode]
        if self._profiling is not None:
            self._profiling.step_end(self._mode, n, _now_us())
        self._emit(name, name, self._step_start, max(end_us, self._step_start),
                   {"pid": self._pid, "step_num": str(n)})
        self._mode_steps[self._mode] = n + 1
        self._step_start = None

    def _boundary(self, now):
        """Ends the open step at now and starts the next; returns the new
        step's start time."""
        self._end_step(now)
        c = self._control
        if c is not None and c.pending:  # one flag while no capture
            c.on_step(self._mode_steps[self._mode])
        now = self._begin_step(now)
        self._last_activity = now
        return now

    def _begin_step(self, now):
        """Starts a step; returns its start: after the profilers' own
        start/stop work, which belongs to no step. Where the stop file
        has appeared: closes the hook and raises StopTraining instead."""
        if self._stop is not None and self._stop.poll() is not None:
            self._stop_training()
        if self._profiling is not None:
            self._profiling.step_start(self._mode,
                                       self._mode_steps[self._mode], now)
            now = _now_us()
        self._step_start = now
        if self._debugger is not None:
            self._debugger.step_begin(self._mode,
                                      self._mode_steps[self._mode], now)
        return now

    def _stop_training(self):
        req = self._stop.request
        rule = req.get("rule", "")
        finding = req.get("finding", "")
        log.warning("trainwatch: stop file %s (rule %s): stopping before "
                    "step %d of %s", self._stop.path, rule or "?",
                    self._mode_steps[self._mode], self._mode.lower())
        self.close()
        raise StopTraining(
            f"trainwatch: training stopped by rule {rule or '?'} through "
            f"{self._stop.path}" + (f": {finding}" if finding else ""),
            self._stop.path, rule, finding)

    @property
    def stop_requested(self):
        """The stop file's fields (job, rule, finding) once it was seen,
        else None."""
        return self._stop.request if self._stop is not None else None

    @_guarded
    def step(self):
        """Marks the start of a step (and the end of the previous one)."""
        self._auto_steps = False
        self._boundary(_now_us())

    @_guarded
    def mode(self, mode):
        """Switches to mode train|eval|predict|global (ends the open step;
        the next step counts in the new mode). Turns off following
        model.train()/model.eval()."""
        m = str(mode).upper()
        if m.startswith("MODEKEYS."):
            m = m[9:]
        if m not in MODES:
            log.warning("trainwatch: unknown mode %r ignored (one of %s)",
                        mode, ", ".join(x.lower() for x in MODES))
            return
        self._auto_mode = False
        self._switch(m, _now_us())

    def _switch(self, m, now):
        if m == self._mode:
            return
        self._end_step(now)
        self._mode = m

    def section(self, name):
        """`with hook.section("checkpoint"):` marks a section of this rank
        for the Progress rule (sections.py has the naming convention)."""
        from .sections import section
        return section(self, name)

    # ---- torch -----------------------------------------------------------
    @_guarded
    def watch(self, model=None, optimizer=None, dataloader=None, loss=None):
        """Records forward/backward of `model` (and counts steps by its
        forwards unless step() is used), and the waits and worker fetches
        of `dataloader` (a torch.utils.data.DataLoader; may be a list).
        With a debugger_config: hooks the model's modules and parameters
        for the debugging collections, and `loss` (a loss module such as
        torch.nn.CrossEntropyLoss(): its output is
        <LossClass>_output_0)."""
        from . import torch_watch
        if model is not None:
            self._model = model
            self._model_name = type(model).__name__
            self._handles += torch_watch.watch_module(self, model)
            if self._debugger is not None:
                self._handles += self._debugger.watch(model)
        if loss is not None and self._debugger is not None:
            self._handles += self._debugger.watch_loss(loss)
        if optimizer is not None:
            self._handles += torch_watch.watch_optimizer(self, optimizer)
        if dataloader is not None:
            loaders = dataloader if isinstance(dataloader,
                                               (list, tuple)) else [dataloader]
            for loader in loaders:
                w = torch_watch.watch_dataloader(self, loader,
                                                 self._sender.stats)
                if w is not None:
                    self._worker_queues.append(w)
                    self._sender.add_source(w.drain)

    @_guarded
    def record_loss(self, loss, name="loss"):
        """A loss computed without a loss module (a functional loss):
        saved as <name>_output_<i> (collection losses) when the step saves
        losses. Call it each step, after the forward."""
        if self._debugger is not None:
            self._debugger.record_loss(loss, name)

    def register_module(self, model):
        """The managed service's name for watch(model)."""
        self.watch(model)

    @_guarded
    def register_loss(self, loss_module):
        """The managed service's name for watch(loss=loss_module)."""
        if self._debugger is not None:
            self._handles += self._debugger.watch_loss(loss_module)

    def record_tensor_value(self, tensor_name, tensor_value):
        """The managed service's name for record_loss(value, name): saved
        as <tensor_name>_output_<i> in whatever collection matches it."""
        self.record_loss(tensor_value, tensor_name)

    @_guarded
    def save_tensor(self, name, value, collections=("default",)):
        """A tensor the script names (labels, predictions), added to
        `collections` (names or one name): saved when the step saves one
        of them; raw values too for a save_raw_tensor collection, up to
        raw_tensor_max_elements."""
        if self._debugger is not None:
            if isinstance(collections, str):
                collections = (collections,)
            self._debugger.save_tensor(name, value, collections)

    @_guarded
    def _on_forward_pre(self, training):
        now = _now_us()
        if self._auto_mode:
            want = "TRAIN" if training else "EVAL"
            if want != self._mode:
                self._switch(want, now)
        if self._auto_steps:
            now = self._boundary(now)
        elif self._step_start is None:
            now = self._begin_step(now)
        self._fwd_start = now

    @_guarded
    def _on_forward_post(self, output_requires_grad):
        now = _now_us()
        if self._fwd_start is not None:
            self._emit(self._model_name, PHASE_FORWARD, self._fwd_start, now)
            self._fwd_start = None
            if self._profiling is not None:
                self._profiling.forward_end(
                    self._mode, self._mode_steps[self._mode], now)
        self._last_activity = now

    @_guarded
    def _on_backward_tick(self):
        now = _now_us()
        if self._bwd_start is None:
            self._bwd_start = now
        self._bwd_end = now
        self._last_activity = now

    @_guarded
    def _on_optimizer_step(self):
        self._last_activity = _now_us()

    def _loader_detail(self):
        """The Profiling object while a dataloader range is on, else None
        (read by the iterator-method wrappers of torch_watch)."""
        p = self._profiling
        return p if p is not None and p.loader_on and self._active else None

    @_guarded
    def _wrap_loader_iter(self, it, args):
        from . import torch_watch
        torch_watch.wrap_iter_methods(self, it, self._profiling.loader_regex,
                                      args)

    @_guarded
    def _on_dataloader(self, name, phase, start_us, end_us, args):
        self._emit(name, phase, start_us, end_us, args)
        self._last_activity = end_us

    # ---- end ---------------------------------------------------------------
    def close(self):
        """Ends the open step, sends JOB_END and waits (close_timeout at
        most) for the broker. Idempotent; also runs at interpreter exit
        and on SIGTERM. Returns the stats."""
        if os.getpid() != self._pid:  # a forked child (dataloader worker)
            return None
        with self._close_lock:
            if self._closed:
                return self.summary
            self._closed = True
            if self._sender is None:
                return None
            try:
                if self._active:
                    end = self._last_activity or _now_us()
                    self._end_step(end)
                    if self._profiling is not None:
                        self._profiling.close(
                            self._mode,
                            max(0, self._mode_steps[self._mode] - 1),
                            _now_us())
            except Exception:
                log.exception("trainwatch: error ending the last step")
            self._active = False
            if self._debugger is not None:
                try:
                    self._debugger.close()
                except Exception:
                    log.exception("trainwatch: error closing the debug "
                                  "output folder")
            if self._control is not None:
                self._control.close()
            for h in self._handles:
                try:
                    h.remove()
                except Exception:
                    pass
            from .wire_batch import MARKER_JOB_END
            end = (MARKER_JOB_END, _now_us(),
                   self.profiler_config.system_monitor_interval_millis, None)
            try:
                undelivered = self._sender.close(self._close_timeout, end)
            except Exception:
                log.exception("trainwatch: error closing the producer")
                undelivered = -1
            self.summary = self.stats()
            self.summary["undelivered"] = undelivered
            level = logging.WARNING if (
                self.summary["dropped"] or undelivered or
                self.summary["failed"] or self.summary["errors"] or
                self.summary["worker_dropped"]) else logging.INFO
            log.log(level, "trainwatch: job %s node %s closed: %s", self.job,
                    self.identity.node,
                    " ".join(f"{k}={v}" for k, v in self.summary.items()
                             if k != "steps"))
            return self.summary

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _close_at_exit(ref):
    hook = ref()
    if hook is not None:
        hook.close()


def _install_sigterm(hook):
    """On SIGTERM: close the hook (JOB_END, flush), then what the signal
    would have done: the previous handler, or the default (terminate). Only
    from the main thread, where Python allows handlers."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):
        return
    ref = weakref.ref(hook)

    def on_sigterm(signum, frame):
        h = ref()
        if h is not None:
            h.close()
        if callable(previous):
            return previous(signum, frame)
        if previous == signal.SIG_IGN:
            return None
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return None

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except (ValueError, OSError):
        pass
