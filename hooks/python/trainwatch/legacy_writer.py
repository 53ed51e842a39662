"""The legacy on-disk layout of a training job's framework data (the
`profiler-output` folder that `trainwatch eval` reads; RULES.md 1.1), written
beside the stream when the hook is given a local folder:

  framework/pevents/<YYYYMMDDHH>/<end_us>_<rank>-<host>_pythontimeline.json
  framework/pevents/<YYYYMMDDHH>/<end_us>_<rank>-<host>_model_timeline.json
      JSON arrays of Chrome trace events: a process_name metadata event
      with start_time_since_epoch_in_micros (the file's time base), one
      process_name per phase binding a trace pid to it, then X events
      (ts relative to the base, dur, args). The folder is the UTC hour of
      <end_us>, the end of the file's last-ending event. A file is closed
      and renamed into place after 60 s, at 10 MB, or when an event ends
      in another UTC hour; until then it is written under framework/.open/
      with a name the reader ignores. The first file, written at once,
      holds no event: it is named with the job's start (the JOB_START
      time, the process start), which makes that the folder's first
      timestamp (its earliest file's, RULES.md 1.4), as the stream's is.
  framework/pytorch/cprofile/<rank>-<host>/<start_us>_<start_phase>-
      <start_step>_<end_us>_<end_phase>-<end_step>/python_stats
      one Python profile (PythonProfile) as a pstats file (marshal of
      {(file, line, function): (cc, nc, tt, ct, callers)}), readable by
      pstats.Stats; no rule reads it.
  framework/training_job_end.ts   at close: the job ended, written only
      by the last writer of the folder to close: <root>/.writers/ holds
      one file per open writer (this hook's hook-<pid>, `trainwatch agent
      --profiler-output`'s agent-<pid>); each removes its own at close and
      the one that then finds it empty writes its end marker (the agent's
      is system/training_job_end.ts; the reader takes either).

Runs on the hook's sending thread; the Sender catches its errors.
"""
import json
import marshal
import os
import time

SUFFIX = {0: "pythontimeline.json", 1: "model_timeline.json"}
ROTATE_S = 60.0
ROTATE_BYTES = 10 * 1000 * 1000


def _hour(us):
    return time.strftime("%Y%m%d%H", time.gmtime(us // 1000000))


class _TraceFile:
    """One open trace file of one source type."""

    def __init__(self, open_dir, suffix, first_start_us, first_end_us):
        self.suffix = suffix
        self.path = os.path.join(open_dir, f"{suffix}.{os.getpid()}.part")
        self.f = open(self.path, "w", encoding="utf-8")
        self.base = first_start_us
        self.hour = _hour(first_end_us)
        self.opened = time.monotonic()
        self.end_us = 0
        self.size = 0
        self.phases = {}
        self._write({"name": "process_name", "ph": "M", "pid": 0,
                     "args": {"start_time_since_epoch_in_micros": self.base}},
                    first=True)

    def _write(self, obj, first=False):
        text = ("[\n" if first else ",\n") + json.dumps(
            obj, separators=(",", ":"))
        self.f.write(text)
        self.size += len(text)

    def event(self, name, phase, start_us, end_us, args):
        pid = self.phases.get(phase)
        if pid is None:
            pid = self.phases[phase] = len(self.phases) + 1
            self._write({"name": "process_name", "ph": "M", "pid": pid,
                         "args": {"name": phase}})
        ev = {"name": name, "ph": "X", "pid": pid, "ts": start_us - self.base,
              "dur": end_us - start_us}
        if args is not None:
            ev["args"] = args
        self._write(ev)
        self.end_us = max(self.end_us, end_us)

    def due(self, end_us):
        return (self.size >= ROTATE_BYTES or _hour(end_us) != self.hour or
                time.monotonic() - self.opened >= ROTATE_S)

    def close(self, root, ident):
        """Closes it and renames it into framework/pevents; False when it
        held no event (removed)."""
        self.f.write("\n]\n")
        self.f.close()
        if self.end_us == 0:
            os.unlink(self.path)
            return False
        folder = os.path.join(root, "framework", "pevents", _hour(self.end_us))
        os.makedirs(folder, exist_ok=True)
        os.replace(self.path, os.path.join(
            folder, f"{self.end_us}_{ident}_{self.suffix}"))
        return True


class LegacyWriter:
    def __init__(self, root, ident, start_us):
        self.root = root
        self.ident = ident.replace("_", "-")
        self._open_dir = os.path.join(root, "framework", ".open")
        os.makedirs(self._open_dir, exist_ok=True)
        self._files = {}
        writers = os.path.join(root, ".writers")
        os.makedirs(writers, exist_ok=True)
        self._claim = os.path.join(writers, f"hook-{os.getpid()}")
        open(self._claim, "w", encoding="utf-8").close()
        self.files = 0      # trace files written
        self.profiles = 0   # python_stats files written
        # the opening file: no event, named with the job's start
        f = _TraceFile(self._open_dir, SUFFIX[0], start_us, start_us)
        f.end_us = start_us
        f.close(root, self.ident)
        self.files += 1

    def events(self, events):
        for name, phase, start_us, end_us, _pid, args, source in events:
            suffix = SUFFIX.get(source)
            if suffix is None:
                continue
            f = self._files.get(suffix)
            if f is not None and f.due(end_us):
                self._close(suffix)
                f = None
            if f is None:
                f = self._files[suffix] = _TraceFile(
                    self._open_dir, suffix, start_us, end_us)
            f.event(name, phase, start_us, end_us, args)

    def rotate(self):
        """Closes the files that are due by age (called each round)."""
        now = time.monotonic()
        for suffix, f in list(self._files.items()):
            if now - f.opened >= ROTATE_S:
                self._close(suffix)

    def _close(self, suffix):
        if self._files.pop(suffix).close(self.root, self.ident):
            self.files += 1

    def profile(self, p):
        stats = {}
        for f in p["functions"]:
            callers = {(c["file"], c["line"], c["function"]):
                       (c["total_calls"], c["primitive_calls"],
                        c["total_time"], c["cumulative_time"])
                       for c in f["callers"]}
            stats[(f["file"], f["line"], f["function"])] = (
                f["primitive_calls"], f["total_calls"], f["total_time"],
                f["cumulative_time"], callers)
        name = (f"{p['start_us']}_{p['start_phase']}-{p['start_step']}_"
                f"{p['end_us']}_{p['end_phase']}-{p['end_step']}")
        folder = os.path.join(self.root, "framework", "pytorch", "cprofile",
                              self.ident, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "python_stats"), "wb") as out:
            marshal.dump(stats, out)
        # the name has no mode (a step number counts within its mode):
        # `trainwatch pystats` reads it from here
        with open(os.path.join(folder, "mode"), "w", encoding="utf-8") as out:
            out.write(p["mode"] + "\n")
        self.profiles += 1

    def close(self, end_us):
        """Closes every file and writes the end-of-job marker."""
        for suffix in list(self._files):
            self._close(suffix)
        try:
            os.rmdir(self._open_dir)
        except OSError:
            pass
        # leave first, then look: of two writers closing at once, at least
        # one finds the folder empty
        os.unlink(self._claim)
        writers = os.path.dirname(self._claim)
        if os.listdir(writers):
            return
        try:
            os.rmdir(writers)
        except OSError:
            pass
        with open(os.path.join(self.root, "framework", "training_job_end.ts"),
                  "w", encoding="utf-8") as out:
            out.write(f"{end_us / 1e6:.6f}\n")
