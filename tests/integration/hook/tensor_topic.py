"""Reads a job's TensorRecords back from trainwatch.metrics (the hook
tests): every partition from the beginning, decoded with the generated
FlatBuffers readers, until the job's JOB_END marker. No torch import, so
drivers of training subprocesses start fast."""
import time
import uuid

MODE_NAMES = {1: "TRAIN", 2: "EVAL", 3: "PREDICT", 4: "GLOBAL"}


def consume(bootstrap, job, timeout=60):
    """Every TensorRecord of `job` on trainwatch.metrics, decoded, once
    its JOB_END marker has been read; and the bytes of its messages."""
    recs, nbytes = consume_jobs(bootstrap, [job], timeout)
    return recs[job], nbytes[job]


def consume_jobs(bootstrap, jobs, timeout=60):
    """consume() for several jobs in one pass: ({job: records},
    {job: bytes})."""
    import confluent_kafka
    from trainwatch.wire.Batch import Batch
    c = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "t-" + uuid.uuid4().hex,
        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    # every partition from the start, without a group join (seconds)
    md = c.list_topics("trainwatch.metrics", timeout=10)
    c.assign([confluent_kafka.TopicPartition(
        "trainwatch.metrics", p, confluent_kafka.OFFSET_BEGINNING)
        for p in md.topics["trainwatch.metrics"].partitions])
    keys = {j.encode(): j for j in jobs}
    recs = {j: [] for j in jobs}
    nbytes = {j: 0 for j in jobs}
    ended = set()
    deadline = time.monotonic() + timeout
    try:
        while len(ended) < len(jobs) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error() or m.key() not in keys:
                continue
            job = keys[m.key()]
            out = recs[job]
            buf = m.value()
            nbytes[job] += len(buf)
            b = Batch.GetRootAs(buf, 0)
            for k in range(b.MarkersLength()):
                if b.Markers(k).Kind() == 2:  # JobEnd
                    ended.add(job)
            for k in range(b.TensorsLength()):
                t = b.Tensors(k)
                out.append({
                    "name": t.Name().decode(), "step": t.Step(),
                    "mode": MODE_NAMES.get(t.Mode()),
                    "mode_step": t.ModeStep(), "wall_us": t.WallUs(),
                    "dtype": (t.Dtype() or b"").decode(),
                    "shape": [t.Shape(i) for i in range(t.ShapeLength())],
                    "numel": t.Numel(), "prev_step": t.PrevStep(),
                    "collections": [t.Collections(i).decode() for i in
                                    range(t.CollectionsLength())],
                    "red": {t.Reductions(i).Op().decode():
                            t.Reductions(i).Value()
                            for i in range(t.ReductionsLength())},
                    "raw": None if t.RawIsNone() else
                    [t.Raw(i) for i in range(t.RawLength())]})
    finally:
        c.close()
    if len(ended) < len(jobs):
        raise AssertionError(f"no JOB_END for {set(jobs) - ended} within "
                             f"{timeout} s")
    return recs, nbytes
