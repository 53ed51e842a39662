"""The legacy debug-output folder (the layout the reference's debugging
hook writes and `trainwatch debug-dump` reads; DEBUG_RULES.md 6), written
from numpy arrays, so a run evaluated live can also be kept and evaluated
offline:

  collections/000000000/<worker>_collections.json   at close
  index/<step // 1000, 9 digits>/<step, 12 digits>_<worker>.json
  events/<step, 12 digits>/<step, 12 digits>_<worker>.tfevents
  training_job_end.ts                               at close (empty)

An event file is a sequence of records: the payload length (u64 LE), the
masked CRC32C of those 8 bytes, the payload (one serialized Event protobuf
holding one tensor), and a 4-byte footer: the constant the reference's
debug writer puts there (it does not checksum the payload), or, with
payload_crc=True, the masked CRC32C of the payload. Every file is written
under a .tmp name and renamed when complete, so a reader never sees half a
file. The index entry of a tensor gives the offset and the length of its
whole framed record.

    w = DebugWriter("/tmp/run1")
    w.begin_step(0, mode="TRAIN")
    w.write_tensor("gradient/Net_fc1.weight", g, collections=["gradients"])
    w.write_tensor("CrossEntropyLoss_output_0", np.float32(loss),
                   collections=["losses"])
    w.end_step()
    w.close()

Standalone (numpy only): the hook may call it at each saved step.
"""
import json
import os
import struct
import time

import numpy as np

MODES = {"TRAIN": 1, "EVAL": 2, "PREDICT": 3, "GLOBAL": 4}

# numpy dtype -> TensorProto DataType (DEBUG_RULES.md 6.6).
DTYPES = {
    np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3,
    np.dtype(np.uint8): 4, np.dtype(np.int16): 5, np.dtype(np.int8): 6,
    np.dtype(np.int64): 9, np.dtype(np.bool_): 10, np.dtype(np.uint16): 17,
    np.dtype(np.float16): 19, np.dtype(np.uint32): 22,
    np.dtype(np.uint64): 23,
}

# The footer of the reference's debug records: the masked CRC32C of the
# ten bytes "0x12345678" (it is written with write_checksum=False).
CONSTANT_FOOTER = 0x062DC0B3


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of bytes."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(v):
    out = bytearray()
    v &= (1 << 64) - 1
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number, value):
    # proto3: a default (0) value is not written.
    return _varint(number << 3) + _varint(value) if value else b""


def _event(tag, array, step, mode, mode_step, wall_time):
    dims = b"".join(
        _len_field(2, _varint_field(1, d)
                   + _len_field(2, f"{tag}_{d}".encode()))
        for d in array.shape)
    tensor = (_varint_field(1, DTYPES[array.dtype])
              + _len_field(2, dims)  # present even when empty, as theirs
              + _len_field(4, array.astype(array.dtype.newbyteorder("<"),
                                           copy=False).tobytes(order="C")))
    plugins = b"".join(
        _len_field(1, _len_field(1, name.encode())
                   + _len_field(2, str(value).encode()))
        for name, value in (("mode_step", mode_step), ("mode", MODES[mode])))
    value = (_len_field(1, tag.encode()) + _len_field(8, tensor)
             + _len_field(9, plugins))
    return (struct.pack("<Bd", 0x09, wall_time) + _varint_field(2, step)
            + _len_field(5, _len_field(1, value)))


def frame(payload, payload_crc=False):
    """One event-file record around a serialized Event."""
    head = struct.pack("<Q", len(payload))
    foot = masked_crc32c(payload) if payload_crc else CONSTANT_FOOTER
    return (head + struct.pack("<I", masked_crc32c(head)) + payload
            + struct.pack("<I", foot))


def _write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _save_config(interval):
    mode = {"save_interval": interval, "save_steps": [], "start_step": 0,
            "end_step": None}
    return {m: dict(mode) for m in ("TRAIN", "EVAL", "PREDICT", "GLOBAL")}


class DebugWriter:
    """Writes one worker's files of a debug-output folder; the workers of
    one job share out_dir. Refused when this worker already closed a run
    there."""

    def __init__(self, out_dir, worker="worker_0", num_workers=1,
                 payload_crc=False, save_interval=1):
        if os.path.exists(os.path.join(
                out_dir, "collections", "000000000",
                f"{worker}_collections.json")):
            raise ValueError(f"{out_dir}: {worker} already wrote a run "
                             "there")
        self.out_dir = out_dir
        self.worker = worker
        self.num_workers = num_workers
        self.payload_crc = payload_crc
        self.save_interval = save_interval
        self.collections = {}  # name -> set of tensor names
        self._step = None

    def begin_step(self, step, mode="TRAIN", mode_step=None):
        """Starts global step `step` (mode step = step unless given)."""
        if self._step is not None:
            raise ValueError(f"step {self._step[0]} is still open")
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} is not one of {sorted(MODES)}")
        if step < 0 or (mode_step is not None and mode_step < 0):
            raise ValueError("steps are non-negative")
        self._step = (int(step), mode,
                      int(step if mode_step is None else mode_step))
        self._records = bytearray()
        self._entries = []

    def write_tensor(self, name, value, collections=(), wall_time=None):
        """Adds one tensor (a numpy array or scalar) to the open step."""
        if self._step is None:
            raise ValueError("write_tensor outside begin_step/end_step")
        array = np.asarray(value)
        if array.dtype not in DTYPES:
            raise ValueError(f"{name}: dtype {array.dtype} cannot be saved")
        if array.size == 0:
            return  # the reference never writes empty tensors
        step, mode, mode_step = self._step
        record = frame(_event(name, array, step, mode, mode_step,
                              time.time() if wall_time is None
                              else wall_time), self.payload_crc)
        self._entries.append({"tensorname": name,
                              "start_idx": len(self._records),
                              "length": len(record)})
        self._records += record
        for c in collections:
            self.collections.setdefault(c, set()).add(name)

    def end_step(self):
        """Writes the open step's event file, then its index file."""
        if self._step is None:
            raise ValueError("end_step without begin_step")
        step, mode, mode_step = self._step
        self._step = None
        if not self._entries:
            return
        event_name = f"events/{step:012d}/{step:012d}_{self.worker}.tfevents"
        _write_atomic(os.path.join(self.out_dir, event_name),
                      bytes(self._records))
        index = {"meta": {"mode": mode, "mode_step": mode_step,
                          "event_file_name": event_name},
                 "tensor_payload": self._entries, "shape_payload": []}
        _write_atomic(os.path.join(
            self.out_dir, f"index/{step // 1000:09d}/"
            f"{step:012d}_{self.worker}.json"),
            json.dumps(index).encode())

    def close(self):
        """Writes the collections file and the end-of-job marker."""
        if self._step is not None:
            self.end_step()
        colls = {}
        for name in sorted(self.collections):
            colls[name] = {
                "name": name, "include_regex": [],
                "tensor_names": sorted(self.collections[name]),
                "reduction_config": {"save_raw_tensor": True,
                                     "reductions": "", "save_shape": False},
                "save_config": _save_config(self.save_interval),
                "save_histogram": False}
        doc = {"collections": colls,
               "_meta": {"num_workers": self.num_workers}}
        _write_atomic(os.path.join(
            self.out_dir, f"collections/000000000/{self.worker}"
            "_collections.json"), json.dumps(doc).encode())
        _write_atomic(os.path.join(self.out_dir, "training_job_end.ts"), b"")
