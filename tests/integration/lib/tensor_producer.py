#!/usr/bin/env python3
"""Publishes synthetic debugging-tensor batches (schemas/metrics.fbs
TensorRecord) the way the PyTorch hook does: one Batch per saved step,
keyed by the job id, on the metrics topic, then a JOB_END marker. A
stand-in for the real hook in the engine's integration tests: the lead
replaces it with the PyTorch publisher (only `publish` is called).

  tensor_producer.py BOOTSTRAP JOB SCENARIO [--steps N] [--fault-step K]
                     [--from A] [--to B]

--from/--to send only steps [A, B) (the JOB_END marker only when B is the
last step), so a test can stop the engine between two parts.

SCENARIO (the fault starts at mode step K, default steps // 2):
  healthy     the loss falls, gradients and weight updates are normal
  nan         the loss (and one gradient) turn NaN from step K on
  flat        the loss and the weights stop changing from step K on
              (a learning rate of 0)
  vanishing   one gradient's mean |g| drops to 1e-9 from step K on
  deadrelu    90 % of a ReLU layer's nodes die from step K on
  overfit     steps k % 10 >= 8 are an evaluation pass (EVAL mode, loss
              only, as the hook saves no gradients there); from step K on
              the validation loss is 60 % above the training loss

Prints one line: job, steps sent, the fault step and bytes per step.
"""
import argparse
import math
import sys
import time

import flatbuffers
from confluent_kafka import Producer

from trainwatch.wire import (Batch, Marker, MarkerKind, Mode, TensorRecord,
                             TensorReduction)

T0_US = 1_700_000_000_000_000
STEP_US = 100_000  # 10 steps per second of event time


def tensor(b, name, colls, step, wall_us, reductions, numel=1, shape=(),
           prev_step=-1, mode=Mode.Mode.Train, mode_step=None):
    """One TensorRecord offset (strings and vectors made first)."""
    name_o = b.CreateString(name)
    coll_o = [b.CreateString(c) for c in colls]
    TensorRecord.TensorRecordStartCollectionsVector(b, len(coll_o))
    for c in reversed(coll_o):
        b.PrependUOffsetTRelative(c)
    colls_v = b.EndVector()
    red_o = []
    for op, v in reductions:
        op_o = b.CreateString(op)
        TensorReduction.TensorReductionStart(b)
        TensorReduction.TensorReductionAddOp(b, op_o)
        TensorReduction.TensorReductionAddValue(b, v)
        red_o.append(TensorReduction.TensorReductionEnd(b))
    TensorRecord.TensorRecordStartReductionsVector(b, len(red_o))
    for r in reversed(red_o):
        b.PrependUOffsetTRelative(r)
    red_v = b.EndVector()
    shape_v = None
    if shape:
        TensorRecord.TensorRecordStartShapeVector(b, len(shape))
        for d in reversed(shape):
            b.PrependInt64(d)
        shape_v = b.EndVector()
    dtype_o = b.CreateString("float32")
    TensorRecord.TensorRecordStart(b)
    TensorRecord.TensorRecordAddName(b, name_o)
    TensorRecord.TensorRecordAddCollections(b, colls_v)
    TensorRecord.TensorRecordAddStep(b, step)
    TensorRecord.TensorRecordAddMode(b, mode)
    TensorRecord.TensorRecordAddModeStep(b, step if mode_step is None
                                         else mode_step)
    TensorRecord.TensorRecordAddWallUs(b, wall_us)
    TensorRecord.TensorRecordAddDtype(b, dtype_o)
    if shape_v is not None:
        TensorRecord.TensorRecordAddShape(b, shape_v)
    TensorRecord.TensorRecordAddNumel(b, numel)
    TensorRecord.TensorRecordAddReductions(b, red_v)
    TensorRecord.TensorRecordAddPrevStep(b, prev_step)
    return TensorRecord.TensorRecordEnd(b)


def batch(job, node, seq, tensors_fn=None, marker_us=None):
    b = flatbuffers.Builder(1024)
    recs = tensors_fn(b) if tensors_fn else []
    tv = None
    if recs:
        Batch.BatchStartTensorsVector(b, len(recs))
        for r in reversed(recs):
            b.PrependUOffsetTRelative(r)
        tv = b.EndVector()
    mv = None
    if marker_us is not None:
        Marker.MarkerStart(b)
        Marker.MarkerAddKind(b, MarkerKind.MarkerKind.JobEnd)
        Marker.MarkerAddTimeUs(b, marker_us)
        m = Marker.MarkerEnd(b)
        Batch.BatchStartMarkersVector(b, 1)
        b.PrependUOffsetTRelative(m)
        mv = b.EndVector()
    job_o, node_o = b.CreateString(job), b.CreateString(node)
    Batch.BatchStart(b)
    Batch.BatchAddVersion(b, 1)
    Batch.BatchAddJob(b, job_o)
    Batch.BatchAddNode(b, node_o)
    Batch.BatchAddSeq(b, seq)
    if tv is not None:
        Batch.BatchAddTensors(b, tv)
    if mv is not None:
        Batch.BatchAddMarkers(b, mv)
    b.Finish(Batch.BatchEnd(b), file_identifier=b"TWM1")
    return bytes(b.Output())


def step_tensors(scenario, k, fault):
    """(name, collections, reductions, numel, shape, prev_step) at step k."""
    bad = k >= fault
    loss = 2.0 * math.exp(-0.05 * k)
    if scenario == "flat" and bad:
        loss = 2.0 * math.exp(-0.05 * fault)
    if scenario == "nan" and bad:
        loss = float("nan")
    g1 = 1e-9 if scenario == "vanishing" and bad else 0.01 * (1 + 0.1 * k % 3)
    g1_nan = 12.0 if scenario == "nan" and bad else 0.0
    upd = 0.0 if scenario == "flat" and bad else 0.05
    dead = 0.9 if scenario == "deadrelu" and bad else 0.1
    out = [("CrossEntropyLoss_output_0", ["losses"], [("value", loss)], 1, (),
            -1),
           ("gradient/Net_fc1.weight", ["gradients"],
            [("abs_mean", g1), ("nan_count", g1_nan), ("inf_count", 0.0)],
            512, (16, 32), -1),
           ("gradient/Net_fc2.weight", ["gradients"],
            [("abs_mean", 0.02), ("nan_count", 0.0), ("inf_count", 0.0)],
            160, (10, 16), -1),
           ("Net_fc1.weight", ["weights"],
            [("l2", 4.0), ("update_l2", upd if k > 0 else 0.0),
             ("variance", 0.03)], 512, (16, 32), k - 1),
           ("relu_output_0", ["relu_output"],
            [("dead_fraction", dead), ("zero_fraction", dead)], 2048,
            (64, 32), -1)]
    if k == 0:  # no update before the first publication
        out[3] = ("Net_fc1.weight", ["weights"],
                  [("l2", 4.0), ("variance", 0.03)], 512, (16, 32), -1)
    return out


def publish(bootstrap, job, scenario, steps, fault, topic="trainwatch.metrics",
            node="worker_0", first=0, last=None):
    last = steps if last is None else last
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    total = 0
    fault_ms = 0
    ntensors = 0
    for k in range(first, last):
        wall = T0_US + k * STEP_US
        evaluating = scenario == "overfit" and k % 10 >= 8
        mode = Mode.Mode.Eval if evaluating else Mode.Mode.Train
        # mode steps count within their mode (2 EVAL steps per 10)
        mstep = (k // 10) * 2 + k % 10 - 8 if evaluating else \
            (k - 2 * (k // 10) if scenario == "overfit" else k)

        def recs(b, k=k, wall=wall, mode=mode, mstep=mstep):
            if mode == Mode.Mode.Eval:
                ratio = 1.6 if k >= fault else 1.05
                loss = 2.0 * math.exp(-0.05 * k) * ratio
                out = [tensor(b, "CrossEntropyLoss_output_0", ["losses"], k,
                              wall, [("value", loss)], mode=mode,
                              mode_step=mstep)]
            else:
                out = [tensor(b, n, c, k, wall, r, numel, shape, prev,
                              mode=mode, mode_step=mstep)
                       for n, c, r, numel, shape, prev in
                       step_tensors(scenario, k, fault)]
            out.append(tensor(b, "heartbeat", [], k, wall, [], mode=mode,
                              mode_step=mstep))
            return out

        ntensors += 2 if evaluating else 6
        msg = batch(job, node, k + 1, recs)
        total += len(msg)
        if k == fault:
            fault_ms = int(time.time() * 1000)
        p.produce(topic, key=job, value=msg)
        p.poll(0)
    if last == steps:
        p.produce(topic, key=job,
                  value=batch(job, node, steps + 1,
                              marker_us=T0_US + steps * STEP_US))
    if p.flush(30) != 0:
        raise SystemExit(f"{job}: messages left unsent")
    print(f"job={job} steps={last - first} fault_step={fault} "
          f"bytes_per_step={total // max(1, last - first)} "
          f"fault_published_ms={fault_ms} tensors={ntensors}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("job")
    ap.add_argument("scenario",
                    choices=["healthy", "nan", "flat", "vanishing",
                             "deadrelu", "overfit"])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--fault-step", type=int, default=None)
    ap.add_argument("--from", dest="first", type=int, default=0)
    ap.add_argument("--to", dest="last", type=int, default=None)
    a = ap.parse_args()
    fault = a.fault_step if a.fault_step is not None else a.steps // 2
    if a.scenario == "healthy":
        fault = a.steps + 1
    publish(a.bootstrap, a.job, a.scenario, a.steps, fault, first=a.first,
            last=a.last)


if __name__ == "__main__":
    main()
