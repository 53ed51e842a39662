"""The hook's sending side: a bounded in-memory queue that the training
thread appends to without blocking, and one background thread that groups
the queued events into batches, numbers them and hands them to a Kafka
producer (confluent_kafka, over librdkafka).

Never hurts training: appending is a length check and a deque append; a
full queue drops the event and counts it (one warning, then only the
count). The thread catches everything. Sequence numbers are assigned only
to batches librdkafka has accepted into its own queue, so events dropped
here never leave a gap; messages librdkafka holds wait for the broker for
as long as it takes (message.timeout.ms 0): a broker down at start or
mid-run delays them, and the ones already numbered are never lost while
the process lives. While librdkafka's queue is full the thread keeps the
encoded batch and retries; new events then pile up here and are dropped.
"""
import collections
import logging
import threading
import time

from .wire_batch import encode_batch

log = logging.getLogger("trainwatch")


class _Marker:
    __slots__ = ("marker",)

    def __init__(self, m):
        self.marker = m


class _Profile:
    __slots__ = ("profile",)

    def __init__(self, p):
        self.profile = p


class _Tensor:
    __slots__ = ("rec",)

    def __init__(self, rec):
        self.rec = rec


def _tensor_bytes(rec):
    """A generous estimate of a tensor record's encoded size."""
    raw = rec[11]
    return (200 + 24 * len(rec[9]) + 8 * len(rec[7]) + 40 * len(rec[1]) +
            (8 * len(raw) if raw is not None else 0))


class SenderStats:
    __slots__ = ("events", "dropped", "batches", "delivered", "failed",
                 "bytes", "worker_dropped", "errors", "sender_cpu_s",
                 "profiles", "tensors", "raw_cut")

    def __init__(self):
        self.events = 0          # events accepted into the queue
        self.dropped = 0         # events dropped: queue full
        self.batches = 0         # batches handed to the producer
        self.delivered = 0       # batches the broker acknowledged
        self.failed = 0          # batches the producer gave up on
        self.bytes = 0
        self.worker_dropped = 0  # dataloader worker events dropped there
        self.errors = 0          # errors of the sending thread
        self.sender_cpu_s = 0.0  # CPU time of the sending thread
        self.profiles = 0        # Python profiles queued (PythonProfile)
        self.tensors = 0         # tensor records queued (TensorRecord)
        self.raw_cut = 0         # raw tensors left out: over the size cap

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


class Sender:
    def __init__(self, producer, topic, job, node, *, max_queue=100000,
                 max_batch_events=4000, flush_interval=1.0, legacy=None,
                 max_batch_bytes=256 * 1024):
        self._producer = producer
        self._topic = topic
        self._job = job
        self._node = node
        self._cap = max_queue
        self._max_batch = max_batch_events
        # tensor records vary in size (raw values up to the cap): a batch
        # stops at this estimate, well under Kafka's 1 MB message limit
        self._max_bytes = max_batch_bytes
        self._interval = flush_interval
        self._queue = collections.deque()
        self._sources = []
        self._next_seq = 1
        self._pending = None      # encoded bytes librdkafka refused (full)
        self._end_marker = None   # JOB_END, sent last by close()
        self._end_sent = None     # the same, once queued
        self._legacy = legacy     # a LegacyWriter, or None
        self._wake = threading.Event()
        self._stop = False
        self._broker_down = False
        self._warned_drop = False
        self.stats = SenderStats()
        self._thread = threading.Thread(target=self._run,
                                        name="trainwatch-sender", daemon=True)
        self._thread.start()

    # ---- training thread side (must stay cheap and never raise) ----------
    def put(self, ev):
        if len(self._queue) >= self._cap:
            self.stats.dropped += 1
            if not self._warned_drop:
                self._warned_drop = True
                log.warning("trainwatch: event queue full (%d events): "
                            "dropping events; the count is reported at "
                            "close", self._cap)
            return
        self._queue.append(ev)
        self.stats.events += 1

    def marker(self, m):
        """Markers go in the same queue (so in order with the events) but
        are never dropped, and each goes out in a batch of its own."""
        self._queue.append(_Marker(m))
        self._wake.set()

    def profile(self, p):
        """A Python profile (a PythonProfile dict, or a callable returning
        one, called on this thread): in the same queue, under
        the same cap (a drop counts in dropped), in a batch of its own."""
        if len(self._queue) >= self._cap:
            self.stats.dropped += 1
            return
        self._queue.append(_Profile(p))
        self.stats.profiles += 1

    def tensor(self, rec):
        """A debugging tensor record (debugger.py), in the same queue
        under the same cap (a drop counts in dropped); sent in batches
        with the events (Batch.tensors)."""
        if len(self._queue) >= self._cap:
            self.stats.dropped += 1
            return
        self._queue.append(_Tensor(rec))
        self.stats.tensors += 1

    def add_source(self, fn, drop_counter="worker_dropped"):
        """fn() -> list of events, called by the sending thread each round
        (e.g. the dataloader workers' queue); events the full queue refuses
        count in the stats' drop_counter."""
        self._sources.append((fn, drop_counter))

    # ---- sending thread --------------------------------------------------
    def _error_once(self, what):
        """Logs the first error with its traceback; later ones are only
        counted (errors)."""
        self.stats.errors += 1
        if self.stats.errors == 1:
            log.exception("trainwatch: %s; later errors are only counted",
                          what)

    def on_error(self, err):
        """librdkafka error callback (runs in poll(), on this thread)."""
        if not self._broker_down and "down" in str(err).lower():
            self._broker_down = True
            log.warning("trainwatch: Kafka %s: events wait for the broker "
                        "(queued in memory, bounded)", err)

    def _on_delivery(self, err, msg):
        if err is None:
            self.stats.delivered += 1
            if self._broker_down:
                self._broker_down = False
                log.warning("trainwatch: Kafka reachable again: sending")
        else:
            self.stats.failed += 1
            log.warning("trainwatch: batch lost: %s", err)

    def _produce(self, data):
        """True when librdkafka took it (or it is unrecoverable); False when
        its queue is full (try again later)."""
        try:
            self._producer.produce(self._topic, value=data, key=self._job,
                                   on_delivery=self._on_delivery)
        except BufferError:
            return False
        self.stats.batches += 1
        self.stats.bytes += len(data)
        return True

    def _write_legacy(self, events=(), profiles=(), end_us=None):
        """The same items into the legacy folder; its first error is logged
        and ends the folder's writing (the stream goes on)."""
        if self._legacy is None:
            return
        try:
            if events:
                self._legacy.events(events)
            for p in profiles:
                self._legacy.profile(p)
            if end_us is not None:
                self._legacy.close(end_us)
            else:
                self._legacy.rotate()
        except Exception:
            self._legacy = None
            self._error_once("cannot write the profiler-output folder (no "
                             "more is written there)")

    def _send(self, events, markers, profiles=(), tensors=()):
        self._write_legacy(events, profiles)
        try:
            data = encode_batch(self._job, self._node, self._next_seq,
                                events, markers, profiles=profiles,
                                tensors=tensors)
        except Exception:  # e.g. an argument value JSON cannot hold
            self.stats.dropped += len(events) + len(tensors)
            self._error_once("cannot encode a batch (its events are "
                             "dropped and counted)")
            return True
        self._next_seq += 1
        if not self._produce(data):
            self._pending = data
            return False
        return True

    def _pull_sources(self):
        for fn, counter in self._sources:
            for ev in fn():
                if len(self._queue) >= self._cap:
                    setattr(self.stats, counter,
                            getattr(self.stats, counter) + 1)
                else:
                    self._queue.append(ev)

    def _drain(self):
        """Sends what is queued. False when the producer is full: the rest
        waits for the next round."""
        q = self._queue
        while q or self._pending is not None:
            if self._pending is not None:
                if not self._produce(self._pending):
                    return False
                self._pending = None
                continue
            events = []
            tensors = []
            est = 0
            while q and len(events) + len(tensors) < self._max_batch \
                    and est < self._max_bytes:
                cls = q[0].__class__
                if cls in (_Marker, _Profile):
                    break
                if cls is _Tensor:
                    rec = q.popleft().rec
                    tensors.append(rec)
                    est += _tensor_bytes(rec)
                else:
                    events.append(q.popleft())
                    est += 100
            if events or tensors:
                self._send(events, (), tensors=tensors)
            elif q and q[0].__class__ is _Profile:
                p = q.popleft().profile
                if callable(p):  # built here, off the training thread
                    try:
                        p = p()
                    except Exception:
                        self._error_once("cannot read a Python profile (it "
                                         "is dropped)")
                        continue
                self._send((), (), (p,))
            elif q:
                m = q.popleft().marker
                if m is self._end_sent:
                    self._write_legacy(end_us=m[1])
                self._send((), (m,))
        return True

    def _run(self):
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            stop = self._stop
            try:
                self._write_legacy()  # closes the files due by age
                self._pull_sources()
                if stop and self._end_marker is not None:
                    # last: after everything the sources still had
                    self._end_sent = self._end_marker
                    self._queue.append(_Marker(self._end_marker))
                    self._end_marker = None
                self._drain()
                self._producer.poll(0)
            except Exception:  # never let the thread die silently
                self._error_once("sending thread error (events of this "
                                 "round may be lost)")
            self.stats.sender_cpu_s = round(time.thread_time(), 4)
            if stop:
                return

    def close(self, timeout, end_marker=None):
        """Sends everything queued and then end_marker, and waits up to
        `timeout` seconds for the broker. Returns the number of batches not
        delivered."""
        self._end_marker = end_marker
        self._stop = True
        self._wake.set()
        deadline = time.monotonic() + timeout
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if not self._thread.is_alive() and self._end_marker is not None:
            self._end_sent = self._end_marker
            self._queue.append(_Marker(self._end_marker))
            self._end_marker = None
        # whatever the full producer refused: keep trying until the deadline
        while (self._pending is not None or self._queue) \
                and time.monotonic() < deadline:
            self._drain()
            self._producer.poll(0.05)
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        if self._pending is not None:
            left += 1
        return left
