#!/usr/bin/env python3
"""Reads metric batches (kcat -f '%k\\t%S\\n%s' framing is awkward for
binary, so: a file of <4-byte big-endian length><bytes> records, as
`kcat -f '%R%s'` writes them) and prints one JSON line per batch with the
fields the tests check. Uses the generated FlatBuffers readers."""
import json
import struct
import sys

from trainwatch.wire.Batch import Batch


def batches(path):
    data = open(path, "rb").read()
    i = 0
    while i + 4 <= len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        yield data[i + 4:i + 4 + n]
        i += 4 + n


def main():
    for buf in batches(sys.argv[1]):
        if not Batch.BatchBufferHasIdentifier(buf, 0):
            print(json.dumps({"error": "bad identifier"}))
            continue
        b = Batch.GetRootAs(buf, 0)
        evs = []
        for k in range(b.EventsLength()):
            e = b.Events(k)
            args = {}
            for m in range(e.ArgsLength()):
                a = e.Args(m)
                args[a.Key().decode()] = [a.Value().decode(), a.Kind()]
            evs.append({"name": e.Name().decode(), "phase": e.Phase().decode(),
                        "start": e.StartUs(), "end": e.EndUs(),
                        "pid": e.Pid(), "mode": e.Mode(),
                        "has_args": e.HasArgs(), "args": args})
        mks = []
        for k in range(b.MarkersLength()):
            m = b.Markers(k)
            cfg = m.ProfilerConfig()
            mks.append({"kind": m.Kind(), "time": m.TimeUs(),
                        "interval": m.SamplingIntervalMs(),
                        "config": json.loads(cfg) if cfg else None})
        print(json.dumps({"version": b.Version(), "job": b.Job().decode(),
                          "node": b.Node().decode(), "seq": b.Seq(),
                          "events": evs, "markers": mks}))


if __name__ == "__main__":
    main()
