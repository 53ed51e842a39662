"""The PyTorch side of Hook.watch(): module hooks for forward and backward,
and a DataLoader wrapper for its waits (GetNext, in the training process)
and its workers' fetches (in the worker processes, passed back through a
multiprocessing queue that the hook's sending thread drains)."""
import multiprocessing
import os
import queue
import time
import types

import torch

PHASE_ITER = "DataLoaderIter"
PHASE_ITER_INIT = "DataLoaderIterInitialize"
PHASE_WORKER = "DataLoaderWorker"
PHASE_ITER_DETAIL = "DataLoaderIterDetail"
# the iterator methods a dataloader range may time (torch 1.13's
# _SingleProcessDataLoaderIter / _MultiProcessingDataLoaderIter)
ITER_METHODS = ("_next_index", "_next_data", "_get_data", "_try_get_data",
                "_process_data")
WORKER_QUEUE_CAP = 10000


def _now_us():
    return time.time_ns() // 1000


def _first_grad_tensor(out):
    if isinstance(out, torch.Tensor):
        return out if out.requires_grad else None
    if isinstance(out, (list, tuple)):
        for o in out:
            t = _first_grad_tensor(o)
            if t is not None:
                return t
    if isinstance(out, dict):
        for o in out.values():
            t = _first_grad_tensor(o)
            if t is not None:
                return t
    return None


def _engine_callback():
    """torch's hook for "run this when the current backward pass ends"
    (what DistributedDataParallel uses); None where it is missing."""
    engine = getattr(torch.autograd.Variable, "_execution_engine", None)
    return getattr(engine, "queue_callback", None)


def watch_module(hook, model):
    """Forward of the root module (its pre- and post-hooks); backward from
    the gradient of its output (the start) to the end of the backward pass
    (autograd's end-of-pass callback; without it, the last parameter
    gradient). Two Python calls per backward whatever the parameter count.
    Returns the handles to remove."""
    handles = []
    queue_callback = _engine_callback()

    def pre(module, inputs):
        hook._on_forward_pre(module.training)

    def post(module, inputs, output):
        t = _first_grad_tensor(output) if torch.is_grad_enabled() else None
        hook._on_forward_post(t is not None)
        if t is not None:
            t.register_hook(grad_start)

    def grad_start(grad):
        hook._on_backward_tick()
        if queue_callback is not None:
            try:
                queue_callback(hook._on_backward_tick)
            except RuntimeError:  # not inside a backward pass
                pass

    def grad_tick(grad):
        hook._on_backward_tick()

    handles.append(model.register_forward_pre_hook(pre))
    handles.append(model.register_forward_hook(post))
    if queue_callback is None:
        for p in model.parameters():
            if p.requires_grad:
                handles.append(p.register_hook(grad_tick))
    return handles


def watch_optimizer(hook, optimizer):
    """Notes the end of each optimizer.step() (the last step of a run ends
    there rather than at close()). torch 1.13 has no optimizer step hooks
    (2.0 does), so the instance's step becomes a bound method that calls
    the original: LR schedulers, which wrap optimizer.step through its
    __func__ and __self__, keep working. Nothing to remove."""
    if getattr(optimizer.step, "_trainwatch", False):
        return []
    original = optimizer.step

    def step(self, *args, **kwargs):
        out = original(*args, **kwargs)
        hook._on_optimizer_step()
        return out

    step._trainwatch = True
    optimizer.step = types.MethodType(step, optimizer)
    return []


class _TimedIterator:
    """Wraps a DataLoader iterator: each next() is a GetNext wait."""

    def __init__(self, hook, it, args):
        self._hook = hook
        self._it = it
        self._args = args

    def __iter__(self):
        return self

    def __next__(self):
        start = _now_us()
        item = next(self._it)
        self._hook._on_dataloader("GetNext", PHASE_ITER, start, _now_us(),
                                  self._args)
        return item

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)


def wrap_iter_methods(hook, it, regex, args):
    """Times the iterator's own methods whose `<Class>.<method>` matches
    regex, while hook's dataloader range is on (an attribute test per call
    outside it). Instance attributes: only this iterator is changed."""
    cls = type(it).__name__
    for meth in ITER_METHODS:
        name = f"{cls}.{meth}"
        orig = getattr(it, meth, None)
        if orig is None or not regex.search(name):
            continue

        def timed(*a, _orig=orig, _name=name, **kw):
            if hook._loader_detail() is None:
                return _orig(*a, **kw)
            start = _now_us()
            try:
                return _orig(*a, **kw)
            finally:
                hook._on_dataloader(_name, PHASE_ITER_DETAIL, start,
                                    _now_us(), args)
        setattr(it, meth, timed)


class _WorkerInit:
    """worker_init_fn of a watched DataLoader: times each batch fetch of
    the worker process and passes it back. Picklable (spawn contexts)."""

    def __init__(self, events, previous):
        self.events = events
        self.previous = previous

    def __call__(self, worker_id):
        try:
            self.events.cancel_join_thread()  # never block a worker's exit
            _time_fetches(self.events, worker_id)
        except Exception:
            pass
        if self.previous is not None:
            self.previous(worker_id)


def _time_fetches(events, worker_id):
    from torch.utils.data._utils import fetch
    pid = os.getpid()
    dropped = [0]

    def timed(orig):
        def run(self, possibly_batched_index):
            start = _now_us()
            data = orig(self, possibly_batched_index)
            try:
                events.put_nowait((start, _now_us(), pid, worker_id,
                                   dropped[0]))
            except queue.Full:
                dropped[0] += 1
            except Exception:
                pass
            return data
        return run

    for cls in (fetch._MapDatasetFetcher, fetch._IterableDatasetFetcher):
        if not getattr(cls.fetch, "_trainwatch", False):
            cls.fetch = timed(cls.fetch)
            cls.fetch._trainwatch = True


class WorkerEvents:
    """The workers' side channel: a bounded multiprocessing queue of fetch
    times. drain() runs on the hook's sending thread."""

    def __init__(self, ctx, stats):
        self.queue = ctx.Queue(WORKER_QUEUE_CAP)
        self._stats = stats
        self._dropped = {}  # worker pid -> drops it reported so far

    def drain(self, limit=100000):
        out = []
        while len(out) < limit:
            try:
                start, end, pid, worker_id, dropped = self.queue.get_nowait()
            except (queue.Empty, OSError, EOFError, ValueError):
                break
            out.append(("WorkerFetch", PHASE_WORKER, start, end, pid,
                        {"pid": pid, "worker_id": worker_id}, 0))
            seen = self._dropped.get(pid, 0)
            if dropped > seen:
                self._stats.worker_dropped += dropped - seen
                self._dropped[pid] = dropped
        return out


def watch_dataloader(hook, loader, stats):
    """Makes `loader` report its iterator creation and GetNext waits, and
    its workers' fetches. Returns the workers' WorkerEvents (None without
    workers)."""
    if getattr(type(loader), "_trainwatch_watched", False):
        return None  # watched already: its events come once
    args = {"pid": os.getpid(), "num_workers": loader.num_workers,
            "pin_memory": bool(loader.pin_memory)}
    base = type(loader)

    def __iter__(self):
        start = _now_us()
        it = base.__iter__(self)
        hook._on_dataloader(PHASE_ITER_INIT, PHASE_ITER_INIT, start,
                            _now_us(), args)
        if hook._profiling is not None:
            hook._wrap_loader_iter(it, args)
        return _TimedIterator(hook, it, args)

    loader.__class__ = type("Watched" + base.__name__, (base,),
                            {"__iter__": __iter__,
                             "_trainwatch_watched": True})
    if loader.num_workers <= 0:
        return None
    ctx = loader.multiprocessing_context
    if ctx is None:
        ctx = multiprocessing.get_context()
    elif isinstance(ctx, str):
        ctx = multiprocessing.get_context(ctx)
    events = WorkerEvents(ctx, stats)
    loader.worker_init_fn = _WorkerInit(events.queue, loader.worker_init_fn)
    return events
