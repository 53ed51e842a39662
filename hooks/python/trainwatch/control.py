"""trainwatch.control: diagnostics captured on the engine's request.

When a rule with a `capture` action fires, the engine publishes a request
on the control topic (`trainwatch.control`, key = the job id, one JSON
object per message). This module listens for it on a background thread
with a Kafka consumer of its own and, when the request names this rank
(or all ranks):

  stacks  every thread's Python stack, taken on the background thread
          (sys._current_frames), so a training thread stuck in Python or
          in a call that releases the GIL (sleep, I/O, a collective
          waiting in C++) still answers;
  trace   a torch.profiler trace of the next N steps (or T seconds),
          started and stopped at step boundaries by the training thread
          itself, which checks one flag per step (`pending`), then
          written by the background thread (export_chrome_trace).

Files: <capture_dir>/<job>/<rule>-<alert id>/rank-<R>.stacks.txt and
rank-<R>.pt.trace.json (`trainwatch eval`, `trainwatch timeline` and
Perfetto read it; `timeline` on the folder merges all ranks). Then it
publishes an answer on the control topic:
  {"type": "capture_ack", "request_id", "job", "rank", "world_size",
   "node", "host", "status": "captured"|"partial"|"failed", "trace",
   "stacks", "steps": [first, last], "error"}
A request id seen before is ignored (one capture per id).

A training thread that holds the GIL inside C code (a C extension loop
that never releases it) stops every Python thread, this one included, so
no answer can be sent. For that case the background thread re-arms
faulthandler.dump_traceback_later(gil_watchdog) while it runs; when it
has not run for gil_watchdog seconds, faulthandler's own C thread (it
needs no GIL) writes every thread's stack to
<capture_dir>/<job>/rank-<R>.gil-hang.txt. The engine then records the
rank as unreachable, and the file says where it hung. faulthandler has
one such timer per process: gil_watchdog=0 (or TRAINWATCH_GIL_WATCHDOG=0)
leaves it to the user; the default is 60 s.

No work on the training thread while no request is pending: the
consumer, the JSON parsing and the files are all on the background
thread; the training thread reads one attribute per step.
"""
import faulthandler
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import traceback

log = logging.getLogger("trainwatch")

_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def _safe(name):
    """A file-name-safe form of a job, rule or id (no '/', no '..')."""
    s = _SAFE.sub("_", str(name))[:120]
    return s if s not in ("", ".", "..") else "_"


def format_stacks(main_ident=None):
    """Every thread's Python stack as text, innermost call last."""
    names = {t.ident: t for t in threading.enumerate()}
    out = [f"# Python stacks of pid {os.getpid()} at "
           f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"]
    frames = sys._current_frames()
    me = threading.get_ident()
    for ident, frame in sorted(frames.items(),
                               key=lambda kv: kv[0] != main_ident):
        t = names.get(ident)
        label = t.name if t is not None else "?"
        notes = []
        if ident == main_ident:
            notes.append("training thread")
        if ident == me:
            notes.append("this capture")
        if t is not None and t.daemon:
            notes.append("daemon")
        note = f" ({', '.join(notes)})" if notes else ""
        out.append(f"\nThread {label} ident {ident}{note}:\n")
        out.extend(traceback.format_stack(frame))
    return "".join(out)


class _Capture:
    """One request being served (background thread, plus the training
    thread's step calls while `trace` is wanted)."""

    def __init__(self, req, folder, rank):
        self.req = req
        self.folder = folder
        self.rank = rank
        self.steps = int(req.get("steps") or 0)
        self.seconds = float(req.get("seconds") or 0.0)
        self.prof = None       # torch.profiler.profile while recording
        self.started_at = None
        self.first_step = None
        self.last_step = None
        self.counted = 0
        self.stop_now = False  # set at the answer's deadline
        self.done = threading.Event()  # the profiler has stopped
        self.error = None


class Control:
    def __init__(self, job, identity, brokers, *,
                 topic="trainwatch.control", capture_dir=None,
                 kafka_config=None, gil_watchdog=None):
        import confluent_kafka

        self.job = job
        self.identity = identity
        self.topic = topic
        self.capture_dir = capture_dir or os.environ.get(
            "TRAINWATCH_CAPTURE_DIR") or "trainwatch-captures"
        if gil_watchdog is None:
            gil_watchdog = os.environ.get("TRAINWATCH_GIL_WATCHDOG", 60.0)
        self.gil_watchdog = float(gil_watchdog or 0)
        # read by the training thread once per step; set here
        self.pending = False
        self.requests = 0      # requests for this rank, served
        self.duplicates = 0    # request ids seen before
        self.ready = threading.Event()  # the consumer has its partitions
        self._key = job.encode()
        self._seen = set()
        self._cap = None       # the _Capture whose trace is wanted
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._main_ident = threading.main_thread().ident
        self._watch_file = None
        self._watch_armed = 0.0
        base = {"bootstrap.servers": brokers, "log_level": 2}
        base.update(kafka_config or {})
        self._producer = confluent_kafka.Producer(
            dict(base, **{"client.id": f"trainwatch-control-{identity.node}",
                          "linger.ms": 0}))
        cconf = dict(base, **{
            # a group of its own: every rank sees every request
            "group.id": f"trainwatch-hook-{_safe(job)}-"
                        f"{_safe(identity.node)}-{os.getpid()}-"
                        f"{time.time_ns()}",
            "auto.offset.reset": "latest",
            "enable.auto.commit": False,
            "client.id": f"trainwatch-control-{identity.node}",
        })
        self._consumer = confluent_kafka.Consumer(cconf)
        self._consumer.subscribe([topic], on_assign=self._on_assign)
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="trainwatch-control")
        self._thread.start()

    # ---- background thread ------------------------------------------------
    def _on_assign(self, consumer, partitions):
        self.ready.set()

    def _arm_watchdog(self):
        if self.gil_watchdog <= 0:
            return
        now = time.monotonic()
        if now - self._watch_armed < self.gil_watchdog / 4:
            return
        if self._watch_file is None:
            d = os.path.join(self.capture_dir, _safe(self.job))
            os.makedirs(d, exist_ok=True)
            self._watch_file = open(os.path.join(
                d, f"rank-{self.identity.rank}.gil-hang.txt"), "w")
        faulthandler.dump_traceback_later(self.gil_watchdog, repeat=False,
                                          file=self._watch_file, exit=False)
        self._watch_armed = now

    def _run(self):
        try:
            while not self._stop.is_set():
                try:
                    self._arm_watchdog()
                except OSError as e:
                    log.warning("trainwatch: control: GIL watchdog off (%s)",
                                e)
                    self.gil_watchdog = 0
                m = self._consumer.poll(0.5)
                if m is None or m.error() is not None:
                    continue
                if m.key() != self._key:
                    continue  # another job's
                self._on_message(m.value())
        except Exception:  # never into training
            log.exception("trainwatch: control thread stopped")
        finally:
            if self.gil_watchdog > 0:
                faulthandler.cancel_dump_traceback_later()

    def _on_message(self, value):
        try:
            req = json.loads(value)
        except ValueError:
            log.warning("trainwatch: control: a message that is not JSON")
            return
        if not isinstance(req, dict) or \
                req.get("type") != "capture_request" or \
                req.get("job") != self.job:
            return
        ranks = req.get("ranks", "all")
        if ranks != "all" and (not isinstance(ranks, list) or
                               self.identity.rank not in ranks):
            return
        rid = str(req.get("request_id") or "")
        if not rid:
            return
        if rid in self._seen:
            self.duplicates += 1
            log.info("trainwatch: control: request %s seen before: "
                     "ignored", rid)
            return
        self._seen.add(rid)
        self.requests += 1
        threading.Thread(target=self._serve, args=(req,), daemon=True,
                         name="trainwatch-capture").start()

    def _serve(self, req):
        """Stacks now, the trace when the training thread has recorded it
        (or the answer's deadline), then the answer."""
        rid = str(req["request_id"])
        folder = os.path.join(
            self.capture_dir, _safe(self.job),
            f"{_safe(req.get('rule') or 'rule')}-"
            f"{_safe(req.get('alert_id') or rid)}")
        rank = self.identity.rank
        what = req.get("what") or ["trace", "stacks"]
        ack = {"type": "capture_ack", "request_id": rid, "job": self.job,
               "rank": rank, "world_size": self.identity.world_size,
               "node": self.identity.node, "host": socket.gethostname(),
               "trace": None, "stacks": None, "error": None}
        errors = []
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            errors.append(f"cannot create {folder}: {e}")
            what = []
        cap = None
        if "trace" in what:
            cap = _Capture(req, folder, rank)
            with self._lock:
                if self._cap is not None:
                    errors.append("trace: another capture is recording")
                    cap = None
                else:
                    self._cap = cap
                    self.pending = True
        if "stacks" in what:
            path = os.path.join(folder, f"rank-{rank}.stacks.txt")
            try:
                text = format_stacks(self._main_ident)
                with open(path + ".tmp", "w") as f:
                    f.write(text)
                os.replace(path + ".tmp", path)
                ack["stacks"] = os.path.abspath(path)
            except OSError as e:
                errors.append(f"stacks: {e}")
        if cap is not None:
            self._finish_trace(cap, req, ack, errors)
        ack["error"] = "; ".join(errors) or None
        wanted = ("trace" in what) + ("stacks" in what)
        got = (ack["trace"] is not None) + (ack["stacks"] is not None)
        ack["status"] = ("captured" if got and got == wanted and not errors
                         else "partial" if got else "failed")
        self._answer(ack)

    def _finish_trace(self, cap, req, ack, errors):
        # the answer must reach the engine before its `wait` ends
        # recording stops at 60 % of it: stopping the profiler (it parses
        # what it recorded) and the export take the rest
        wait = float(req.get("wait_s") or 120.0)
        budget = max(1.0, wait * 0.6)
        if not cap.done.wait(budget):
            with self._lock:
                started = cap.prof is not None or cap.done.is_set()
                if not started:  # no step boundary came: give up
                    self._cap = None
                    self.pending = False
                else:  # recording: stop at the next step boundary
                    cap.stop_now = True
            if not started:
                errors.append(f"trace: no step boundary within {budget:.0f} "
                              "s (the training thread is busy or hung; see "
                              "the stacks)")
                return
            if not cap.done.wait(max(3.0, wait * 0.3)):
                errors.append("trace: still recording at the deadline (the "
                              "profiler stops at the next step boundary)")
                return
        if cap.error is not None:
            errors.append(f"trace: {cap.error}")
            return
        path = os.path.join(cap.folder, f"rank-{cap.rank}.pt.trace.json")
        try:
            cap.prof.export_chrome_trace(path + ".tmp")
            os.replace(path + ".tmp", path)
            ack["trace"] = os.path.abspath(path)
            ack["steps"] = [cap.first_step, cap.last_step]
        except Exception as e:  # torch's own errors
            errors.append(f"trace: export failed: {e}")
        cap.prof = None

    def _answer(self, ack):
        try:
            self._producer.produce(self.topic, key=self._key,
                                   value=json.dumps(ack).encode())
            left = self._producer.flush(10.0)
            if left:
                log.warning("trainwatch: control: answer to %s not "
                            "delivered", ack["request_id"])
        except Exception as e:
            log.warning("trainwatch: control: cannot answer %s: %s",
                        ack["request_id"], e)
        log.info("trainwatch: capture %s: %s (trace %s, stacks %s)%s",
                 ack["request_id"], ack["status"], ack["trace"],
                 ack["stacks"], f": {ack['error']}" if ack["error"] else "")

    # ---- training thread --------------------------------------------------
    def on_step(self, step_num):
        """At a step boundary, only while `pending`: starts the profiler
        before the step step_num, or stops it after enough steps."""
        with self._lock:
            cap = self._cap
            if cap is None:
                self.pending = False
                return
            try:
                if cap.prof is None:
                    import torch.profiler
                    prof = torch.profiler.profile(
                        activities=[torch.profiler.ProfilerActivity.CPU])
                    prof.__enter__()
                    cap.prof = prof
                    cap.started_at = time.monotonic()
                    cap.first_step = step_num
                    return
                cap.counted += 1
                cap.last_step = step_num - 1
                if cap.stop_now:  # the answer's deadline: stop short
                    pass
                elif cap.seconds > 0:
                    if time.monotonic() - cap.started_at < cap.seconds:
                        return
                elif cap.counted < max(1, cap.steps):
                    return
                cap.prof.__exit__(None, None, None)
            except Exception as e:  # profiler busy, torch missing, ...
                cap.error = f"{type(e).__name__}: {e}"
                cap.prof = None
            self._cap = None
            self.pending = False
            cap.done.set()

    # ---- end ----------------------------------------------------------------
    def close(self, timeout=5.0):
        self._stop.set()
        self._thread.join(timeout)
        with self._lock:
            cap = self._cap
            self._cap = None
            self.pending = False
        if cap is not None and cap.prof is not None:
            try:
                cap.prof.__exit__(None, None, None)
            except Exception:
                cap.error = "the job ended while recording"
            cap.done.set()
        try:
            self._consumer.close()
        except Exception:
            pass
        self._producer.flush(timeout)
        if self._watch_file is not None:
            self._watch_file.close()
            self._watch_file = None
