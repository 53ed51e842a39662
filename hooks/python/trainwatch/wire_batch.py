"""Encodes one metric batch (schemas/metrics.fbs) with the code `flatc
--python` generates from the schema (the package trainwatch.wire, made at
build time by hooks/python/CMakeLists.txt or setup.py). Nothing here
knows the binary layout; it only calls the generated builders.

An event is the tuple the hook records:
    (name, phase, start_us, end_us, pid, args, source)
args is None (the event had no args) or a dict; source a SourceType value.
A marker is (kind, time_us, sampling_interval_ms, profiler_config_json).
A Python profile is the dict profiling.Profiling publishes (the fields of
PythonProfile; functions a list of FunctionStats dicts with callers).
A tensor is the record tuple debugger.py describes (TensorRecord); its
reductions and raw values may be torch tensors, read here (.tolist()).
"""
import json

import flatbuffers

from .wire import (Arg, ArgKind, Batch, FrameworkEvent, FunctionCaller,
                   FunctionStats, Marker, MarkerKind, Mode, PythonProfile,
                   SourceType, TensorRecord, TensorReduction)

WIRE_VERSION = 1
FILE_IDENTIFIER = b"TWM1"

SOURCE_PYTHON_TIMELINE = SourceType.SourceType.PythonTimeline
SOURCE_MODEL_TIMELINE = SourceType.SourceType.ModelTimeline
MARKER_JOB_START = MarkerKind.MarkerKind.JobStart
MARKER_JOB_END = MarkerKind.MarkerKind.JobEnd

_MODE_NAMES = {"TRAIN": Mode.Mode.Train, "EVAL": Mode.Mode.Eval,
               "PREDICT": Mode.Mode.Predict, "GLOBAL": Mode.Mode.Global}

_MODES = {
    "Step:ModeKeys.TRAIN": Mode.Mode.Train,
    "Step:ModeKeys.EVAL": Mode.Mode.Eval,
    "Step:ModeKeys.PREDICT": Mode.Mode.Predict,
    "Step:ModeKeys.GLOBAL": Mode.Mode.Global,
}


def _arg_value(v):
    """(text, ArgKind) of one argument value, as the trace reader would
    have decoded it from JSON."""
    if isinstance(v, str):
        return v, ArgKind.ArgKind.String
    if isinstance(v, bool):
        return ("true" if v else "false"), ArgKind.ArgKind.Bool
    if v is None:
        return "null", ArgKind.ArgKind.Null
    if isinstance(v, int):
        return str(v), ArgKind.ArgKind.Number
    if isinstance(v, float):
        return json.dumps(v), ArgKind.ArgKind.Number
    return json.dumps(v, separators=(",", ":")), ArgKind.ArgKind.Json


class _Shared:
    """What one batch writes once and references again: strings, Arg
    tables (same key and value), and whole args vectors (the same args
    dict object, as the hook passes for every GetNext of a loader)."""

    def __init__(self, b):
        self.b = b
        self.strings = {}
        self.arg_tables = {}
        self.arg_vectors = {}  # id(dict) -> (dict, offset); dict kept alive

    def string(self, text):
        off = self.strings.get(text)
        if off is None:
            off = self.b.CreateString(text)
            self.strings[text] = off
        return off

    def arg(self, k, v):
        text, kind = _arg_value(v)
        key = (k, text, kind)
        off = self.arg_tables.get(key)
        if off is None:
            b = self.b
            k_off, v_off = self.string(str(k)), self.string(text)
            Arg.Start(b)
            Arg.AddKey(b, k_off)
            Arg.AddValue(b, v_off)
            Arg.AddKind(b, kind)
            off = Arg.End(b)
            self.arg_tables[key] = off
        return off

    def args(self, args):
        hit = self.arg_vectors.get(id(args))
        if hit is not None and hit[0] is args:
            return hit[1]
        b = self.b
        offs = [self.arg(k, v) for k, v in args.items()]
        FrameworkEvent.StartArgsVector(b, len(offs))
        for off in reversed(offs):
            b.PrependUOffsetTRelative(off)
        vec = b.EndVector()
        self.arg_vectors[id(args)] = (args, vec)
        return vec


def _event(b, shared, ev):
    name, phase, start_us, end_us, pid, args, source = ev
    name_off, phase_off = shared.string(name), shared.string(phase)
    args_off = shared.args(args) if args is not None else None
    FrameworkEvent.Start(b)
    FrameworkEvent.AddName(b, name_off)
    FrameworkEvent.AddPhase(b, phase_off)
    FrameworkEvent.AddStartUs(b, start_us)
    FrameworkEvent.AddEndUs(b, end_us)
    FrameworkEvent.AddPid(b, pid)
    if source:
        FrameworkEvent.AddSource(b, source)
    mode = _MODES.get(name)
    if mode is not None:
        FrameworkEvent.AddMode(b, mode)
    if args_off is not None:
        FrameworkEvent.AddArgs(b, args_off)
        FrameworkEvent.AddHasArgs(b, True)
    return FrameworkEvent.End(b)


def _marker(b, m):
    kind, time_us, interval_ms, config_json = m
    cfg_off = b.CreateString(config_json) if config_json else None
    Marker.Start(b)
    Marker.AddKind(b, kind)
    Marker.AddTimeUs(b, time_us)
    Marker.AddSamplingIntervalMs(b, interval_ms)
    if cfg_off is not None:
        Marker.AddProfilerConfig(b, cfg_off)
    return Marker.End(b)


def _function(b, shared, f, callers_off):
    fn_off, file_off = shared.string(f["function"]), shared.string(f["file"])
    if callers_off is None:
        FunctionCaller.Start(b)
        FunctionCaller.AddFunction(b, fn_off)
        FunctionCaller.AddFile(b, file_off)
        FunctionCaller.AddLine(b, f["line"])
        FunctionCaller.AddPrimitiveCalls(b, f["primitive_calls"])
        FunctionCaller.AddTotalCalls(b, f["total_calls"])
        FunctionCaller.AddTotalTime(b, f["total_time"])
        FunctionCaller.AddCumulativeTime(b, f["cumulative_time"])
        return FunctionCaller.End(b)
    FunctionStats.Start(b)
    FunctionStats.AddFunction(b, fn_off)
    FunctionStats.AddFile(b, file_off)
    FunctionStats.AddLine(b, f["line"])
    FunctionStats.AddPrimitiveCalls(b, f["primitive_calls"])
    FunctionStats.AddTotalCalls(b, f["total_calls"])
    FunctionStats.AddTotalTime(b, f["total_time"])
    FunctionStats.AddCumulativeTime(b, f["cumulative_time"])
    FunctionStats.AddCallers(b, callers_off)
    return FunctionStats.End(b)


def _vector(b, start_vector, offs):
    start_vector(b, len(offs))
    for off in reversed(offs):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _profile(b, shared, p):
    fn_offs = []
    for f in p["functions"]:
        callers = [_function(b, shared, c, None) for c in f["callers"]]
        callers_off = _vector(b, FunctionStats.StartCallersVector, callers)
        fn_offs.append(_function(b, shared, f, callers_off))
    fns_off = _vector(b, PythonProfile.StartFunctionsVector, fn_offs)
    prof_off, timer_off = shared.string(p["profiler"]), shared.string(
        p["timer"])
    sp_off, ep_off = shared.string(p["start_phase"]), shared.string(
        p["end_phase"])
    PythonProfile.Start(b)
    PythonProfile.AddProfiler(b, prof_off)
    PythonProfile.AddTimer(b, timer_off)
    PythonProfile.AddMode(b, _MODE_NAMES.get(p["mode"], Mode.Mode.None_))
    PythonProfile.AddStartStep(b, p["start_step"])
    PythonProfile.AddEndStep(b, p["end_step"])
    PythonProfile.AddStartPhase(b, sp_off)
    PythonProfile.AddEndPhase(b, ep_off)
    PythonProfile.AddStartUs(b, p["start_us"])
    PythonProfile.AddEndUs(b, p["end_us"])
    PythonProfile.AddPid(b, p["pid"])
    PythonProfile.AddFunctions(b, fns_off)
    PythonProfile.AddFunctionsCut(b, p["functions_cut"])
    return PythonProfile.End(b)


def _floats(v):
    if v is None:
        return None
    return v.tolist() if hasattr(v, "tolist") else list(v)


def _tensor(b, shared, rec):
    (name, colls, step, mode, mode_step, wall_us, dtype, shape, numel, ops,
     values, raw, prev_step) = rec
    vals = _floats(values) or []
    if len(vals) != len(ops):
        raise ValueError(f"tensor {name}: {len(ops)} reductions but "
                         f"{len(vals)} values")
    red_offs = []
    for op, v in zip(ops, vals):
        op_off = shared.string(op)
        TensorReduction.Start(b)
        TensorReduction.AddOp(b, op_off)
        TensorReduction.AddValue(b, v)
        red_offs.append(TensorReduction.End(b))
    red_vec = (_vector(b, TensorRecord.StartReductionsVector, red_offs)
               if red_offs else None)
    coll_vec = (_vector(b, TensorRecord.StartCollectionsVector,
                        [shared.string(c) for c in colls]) if colls else None)
    shape_vec = None
    if shape:
        TensorRecord.StartShapeVector(b, len(shape))
        for d in reversed(shape):
            b.PrependInt64(d)
        shape_vec = b.EndVector()
    raw_vec = None
    if raw is not None and hasattr(raw, "numpy"):
        # a torch tensor: one copy through numpy, not a Python loop
        raw_vec = b.CreateNumpyVector(
            raw.detach().cpu().reshape(-1).numpy().astype("<f8"))
    elif raw is not None:
        raw_vals = _floats(raw)
        TensorRecord.StartRawVector(b, len(raw_vals))
        for v in reversed(raw_vals):
            b.PrependFloat64(v)
        raw_vec = b.EndVector()
    name_off = shared.string(name)
    dtype_off = shared.string(dtype) if dtype else None
    TensorRecord.Start(b)
    TensorRecord.AddName(b, name_off)
    if coll_vec is not None:
        TensorRecord.AddCollections(b, coll_vec)
    TensorRecord.AddStep(b, step)
    TensorRecord.AddMode(b, _MODE_NAMES.get(mode, Mode.Mode.None_))
    TensorRecord.AddModeStep(b, mode_step)
    TensorRecord.AddWallUs(b, wall_us)
    if dtype_off is not None:
        TensorRecord.AddDtype(b, dtype_off)
    if shape_vec is not None:
        TensorRecord.AddShape(b, shape_vec)
    TensorRecord.AddNumel(b, numel)
    if red_vec is not None:
        TensorRecord.AddReductions(b, red_vec)
    if raw_vec is not None:
        TensorRecord.AddRaw(b, raw_vec)
    TensorRecord.AddPrevStep(b, prev_step)
    return TensorRecord.End(b)


def encode_batch(job, node, seq, events=(), markers=(), file_ts_us=0,
                 profiles=(), tensors=()):
    """The bytes of one Batch. file_ts_us 0 = unknown (the engine then
    orders the batch by its newest event's end)."""
    b = flatbuffers.Builder(1024 + 160 * len(events))
    shared = _Shared(b)
    ev_offs = [_event(b, shared, ev) for ev in events]
    mk_offs = [_marker(b, m) for m in markers]
    pr_offs = [_profile(b, shared, p) for p in profiles]
    tn_offs = [_tensor(b, shared, t) for t in tensors]
    job_off = b.CreateString(job)
    node_off = b.CreateString(node)
    ev_vec = mk_vec = None
    if ev_offs:
        Batch.StartEventsVector(b, len(ev_offs))
        for off in reversed(ev_offs):
            b.PrependUOffsetTRelative(off)
        ev_vec = b.EndVector()
    if mk_offs:
        Batch.StartMarkersVector(b, len(mk_offs))
        for off in reversed(mk_offs):
            b.PrependUOffsetTRelative(off)
        mk_vec = b.EndVector()
    pr_vec = (_vector(b, Batch.StartPythonProfilesVector, pr_offs)
              if pr_offs else None)
    tn_vec = (_vector(b, Batch.StartTensorsVector, tn_offs)
              if tn_offs else None)
    Batch.Start(b)
    # the schema asks writers to store the version explicitly
    b.ForceDefaults(True)
    Batch.AddVersion(b, WIRE_VERSION)
    b.ForceDefaults(False)
    Batch.AddJob(b, job_off)
    Batch.AddNode(b, node_off)
    Batch.AddSeq(b, seq)
    Batch.AddFileTsUs(b, file_ts_us)
    if ev_vec is not None:
        Batch.AddEvents(b, ev_vec)
    if mk_vec is not None:
        Batch.AddMarkers(b, mk_vec)
    if pr_vec is not None:
        Batch.AddPythonProfiles(b, pr_vec)
    if tn_vec is not None:
        Batch.AddTensors(b, tn_vec)
    b.Finish(Batch.End(b), file_identifier=FILE_IDENTIFIER)
    return bytes(b.Output())
