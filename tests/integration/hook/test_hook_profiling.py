#!/usr/bin/env python3
"""Unit tests of the hook's profiling inside the ProfilerConfig's ranges
(trainwatch/profiling.py) on a real torch model, events and profiles
captured in place of the sending queue (no broker needed): detailed
torch.profiler events only in the detailed range, DataLoader iterator
details by metrics_regex, cProfile statistics per step interval with their
phases, feature ranges over the FrameworkProfile's, time ranges, and the
PythonProfile wire table read back with the generated readers.
Run: PYTHONPATH=build/hooks/python python3 -m unittest <this file>."""
import logging
import time
import unittest

import trainwatch
from trainwatch import wire_batch
from trainwatch.profiling import function_stats
from trainwatch.wire.Batch import Batch

try:
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError:  # pragma: no cover
    torch = None


def config(**fp):
    return trainwatch.ProfilerConfig(
        framework_profile_params=trainwatch.FrameworkProfile(**fp))


@unittest.skipIf(torch is None, "python3-torch missing")
class Ranges(unittest.TestCase):
    def make(self, cfg):
        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.hook = trainwatch.Hook(job="j", brokers="127.0.0.1:1",
                                    profiler_config=cfg, close_timeout=0.2,
                                    handle_sigterm=False)
        self.events, self.profiles = [], []
        s = self.hook._sender
        s.put = self.events.append
        s.profile = self.profiles.append
        s._sources.clear()  # the detailed events: drained here instead
        if self.hook._profiling is not None:
            self.hook._profiling._publish = (
                lambda pending: self.profiles.append(pending()))
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 8),
                                         torch.nn.ReLU(),
                                         torch.nn.Linear(8, 1))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.loader = DataLoader(TensorDataset(torch.randn(16, 4)),
                                 batch_size=2, num_workers=0)
        self.hook.watch(self.model, optimizer=self.opt,
                        dataloader=self.loader)

    def train(self):
        for (x,) in self.loader:
            self.opt.zero_grad()
            self.model(x).sum().backward()
            self.opt.step()
        logging.disable(logging.CRITICAL)
        try:
            self.hook.close()
        finally:
            logging.disable(logging.NOTSET)
        if self.hook._profiling is not None:
            self.events += self.hook._profiling.drain_detailed()

    def steps(self):
        return {int(e[5]["step_num"]): (e[2], e[3]) for e in self.events
                if e[0] == "Step:ModeKeys.TRAIN"}

    def test_no_framework_profile_no_profiling(self):
        self.make(trainwatch.ProfilerConfig())
        self.assertIsNone(self.hook._profiling)
        self.train()
        phases = {e[1] for e in self.events}
        self.assertNotIn("cpu_functions", phases)
        self.assertNotIn("DataLoaderIterDetail", phases)
        self.assertEqual(self.profiles, [])

    def test_feature_ranges(self):
        # detailed 2, dataloader 1 (regex: _next_data only), Python 3-4;
        # the FrameworkProfile's own range (6-7) is overridden by all three
        self.make(config(
            start_step=6, num_steps=2,
            detailed_profiling_config=trainwatch.DetailedProfilingConfig(
                start_step=2, num_steps=1),
            dataloader_profiling_config=trainwatch.DataloaderProfilingConfig(
                start_step=1, num_steps=1, metrics_regex="_next_data$"),
            python_profiling_config=trainwatch.PythonProfilingConfig(
                start_step=3, num_steps=2, cprofile_timer="cpu_time")))
        self.train()
        steps = self.steps()
        self.assertEqual(len(steps), 8)
        det = [e for e in self.events if e[1] == "cpu_functions"]
        self.assertTrue(det)
        s2, e2 = steps[2]
        for e in det:
            self.assertEqual(e[6], wire_batch.SOURCE_MODEL_TIMELINE)
            self.assertLessEqual(e[2], e[3])
            # inside step 2, give or take the anchor's latency
            self.assertGreaterEqual(e[2], s2 - 1000)
            self.assertLessEqual(e[3], e2 + 1000)
        names = {e[0] for e in det}
        self.assertIn("aten::linear", names)
        self.assertIn("aten::relu", names)
        detail = [e for e in self.events if e[1] == "DataLoaderIterDetail"]
        self.assertEqual([e[0] for e in detail],
                         ["_SingleProcessDataLoaderIter._next_data"])
        s1, e1 = steps[1]
        self.assertTrue(s1 <= detail[0][2] <= detail[0][3] <= e1)
        got = [(p["start_phase"], p["start_step"], p["end_phase"],
                p["end_step"]) for p in self.profiles]
        self.assertEqual(got, [
            ("STEP_START", 3, "FORWARD_PASS_END", 3),
            ("FORWARD_PASS_END", 3, "STEP_END", 3),
            ("STEP_START", 4, "FORWARD_PASS_END", 4),
            ("FORWARD_PASS_END", 4, "STEP_END", 4)])
        for p in self.profiles:
            self.assertEqual((p["profiler"], p["timer"], p["mode"]),
                             ("cprofile", "cpu_time", "TRAIN"))
            self.assertLessEqual(p["start_us"], p["end_us"])
            self.assertTrue(p["functions"])
        fwd = {f["function"] for f in self.profiles[0]["functions"]}
        self.assertIn("forward", fwd)  # nn.Module forwards
        bwd = {f["function"] for f in self.profiles[1]["functions"]}
        self.assertIn("backward", bwd)  # Tensor.backward

    def test_framework_range_and_start(self):
        # the FrameworkProfile's range 0-1 for all three: Python profiling
        # begins at the hook's start (START, step 0)
        self.make(config(start_step=0, num_steps=2))
        self.train()
        got = [(p["start_phase"], p["start_step"], p["end_phase"],
                p["end_step"]) for p in self.profiles]
        self.assertEqual(got[0], ("START", 0, "STEP_START", 0))
        self.assertEqual(got[-1], ("FORWARD_PASS_END", 1, "STEP_END", 1))
        self.assertEqual(len(got), 5)
        s0, _ = self.steps()[0]
        _, e1 = self.steps()[1]
        det = [e for e in self.events if e[1] == "cpu_functions"]
        self.assertTrue(det)
        self.assertTrue(all(s0 - 1000 <= e[2] and e[3] <= e1 + 1000
                            for e in det))
        detail = [e for e in self.events if e[1] == "DataLoaderIterDetail"]
        # the default regex .* takes every method of the iterator
        self.assertIn("_SingleProcessDataLoaderIter._next_index",
                      {e[0] for e in detail})

    def test_time_range(self):
        now = time.time()
        self.make(config(start_unix_time=now - 10, duration=3600))
        self.train()
        # every step is in the range: 8 steps x 2 intervals (+ START)
        self.assertEqual(len(self.profiles), 17)
        self.assertTrue(any(e[1] == "cpu_functions" for e in self.events))

    def test_time_range_in_the_past(self):
        self.make(config(start_unix_time=1000, duration=1))
        self.train()
        self.assertEqual(self.profiles, [])
        self.assertFalse(any(e[1] == "cpu_functions" for e in self.events))

    def test_pyinstrument_is_not_run(self):
        logging.disable(logging.CRITICAL)
        try:
            self.make(config(
                start_step=0, num_steps=2,
                python_profiling_config=trainwatch.PythonProfilingConfig(
                    python_profiler="pyinstrument")))
        finally:
            logging.disable(logging.NOTSET)
        self.train()
        self.assertEqual(self.profiles, [])
        # the other features still run
        self.assertTrue(any(e[1] == "cpu_functions" for e in self.events))

    def test_detailed_cap(self):
        from trainwatch import profiling
        old = profiling.MAX_DETAILED_EVENTS
        profiling.MAX_DETAILED_EVENTS = 5
        try:
            self.make(config(start_step=1, num_steps=1))
            self.train()
        finally:
            profiling.MAX_DETAILED_EVENTS = old
        det = [e for e in self.events if e[1] == "cpu_functions"]
        self.assertEqual(len(det), 5)
        self.assertGreater(self.hook._profiling.detailed_cut, 0)


class Fork(unittest.TestCase):
    def test_forked_child_drops_cprofile(self):
        import os
        import sys
        h = trainwatch.Hook(job="j", brokers="127.0.0.1:1",
                            profiler_config=config(start_step=0, num_steps=2),
                            close_timeout=0.2, handle_sigterm=False)
        h._sender.profile = lambda p: None
        try:
            self.assertIsNotNone(sys.getprofile())  # the START interval
            pid = os.fork()
            if pid == 0:  # a DataLoader worker, say
                os._exit(0 if sys.getprofile() is None else 3)
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
            self.assertIsNotNone(sys.getprofile())  # the parent goes on
        finally:
            logging.disable(logging.CRITICAL)
            h.close()
            logging.disable(logging.NOTSET)
        self.assertIsNone(sys.getprofile())


class Stats(unittest.TestCase):
    def test_function_stats_and_wire(self):
        import cProfile

        def leaf(n):
            return sum(range(n))

        def mid():
            return leaf(10) + leaf(20)

        prof = cProfile.Profile()
        prof.enable()
        mid()
        prof.disable()
        prof.create_stats()
        fns, cut = function_stats(prof.stats, max_functions=1000)
        self.assertEqual(cut, 0)
        by = {f["function"]: f for f in fns}
        self.assertEqual(by["leaf"]["total_calls"], 2)
        self.assertEqual(by["leaf"]["primitive_calls"], 2)
        self.assertEqual([c["function"] for c in by["leaf"]["callers"]],
                         ["mid"])
        self.assertEqual(by["leaf"]["callers"][0]["total_calls"], 2)
        self.assertGreaterEqual(by["mid"]["cumulative_time"],
                                by["leaf"]["cumulative_time"])
        fns2, cut2 = function_stats(prof.stats, max_functions=1)
        self.assertEqual((len(fns2), cut2), (1, len(fns) - 1))

        p = {"profiler": "cprofile", "timer": "total_time", "mode": "EVAL",
             "start_step": 9, "end_step": 9, "start_phase": "STEP_START",
             "end_phase": "FORWARD_PASS_END", "start_us": 100, "end_us": 200,
             "pid": 7, "functions": fns, "functions_cut": 3}
        buf = wire_batch.encode_batch("j", "algo-1-0", 5, profiles=[p])
        b = Batch.GetRootAs(buf, 0)
        self.assertEqual((b.EventsLength(), b.PythonProfilesLength()), (0, 1))
        r = b.PythonProfiles(0)
        self.assertEqual(
            (r.Profiler(), r.Timer(), r.Mode(), r.StartStep(), r.EndStep(),
             r.StartPhase(), r.EndPhase(), r.StartUs(), r.EndUs(), r.Pid(),
             r.FunctionsCut()),
            (b"cprofile", b"total_time", 2, 9, 9, b"STEP_START",
             b"FORWARD_PASS_END", 100, 200, 7, 3))
        self.assertEqual(r.FunctionsLength(), len(fns))
        got = {}
        for i in range(r.FunctionsLength()):
            f = r.Functions(i)
            got[f.Function().decode()] = f
        leaf_f = got["leaf"]
        self.assertEqual((leaf_f.TotalCalls(), leaf_f.PrimitiveCalls(),
                          leaf_f.Line(), leaf_f.File().decode()),
                         (2, 2, by["leaf"]["line"], by["leaf"]["file"]))
        self.assertAlmostEqual(leaf_f.CumulativeTime(),
                               by["leaf"]["cumulative_time"])
        self.assertEqual(leaf_f.CallersLength(), 1)
        self.assertEqual(leaf_f.Callers(0).Function(), b"mid")


if __name__ == "__main__":
    unittest.main()
