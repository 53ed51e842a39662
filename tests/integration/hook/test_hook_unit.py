#!/usr/bin/env python3
"""Unit tests of the Python hook that need no broker: ProfilerConfig
validation (the shared case table tests/data/profiler_config_cases.json),
the wire encoding read back with the generated readers, node ids, the
no-op hook, and that a failing hook never raises into training.
Run: PYTHONPATH=build/hooks/python python3 -m unittest <this file>."""
import json
import logging
import os
import sys
import unittest

import trainwatch
from trainwatch import identity, wire_batch
from trainwatch.profiler_config import ConfigError, ProfilerConfig
from trainwatch.wire.Batch import Batch

SRC = os.environ.get("TW_SOURCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
CASES = os.path.join(SRC, "tests", "data", "profiler_config_cases.json")


class ProfilerConfigCases(unittest.TestCase):
    def test_case_table(self):
        with open(CASES, encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        self.assertGreater(len(cases), 20)
        for c in cases:
            with self.subTest(c["name"]):
                if "error" in c:
                    with self.assertRaises(ConfigError) as cm:
                        ProfilerConfig.from_dict(c["config"])
                    self.assertEqual(list(cm.exception.fields), c["error"])
                    for f in c["error"]:
                        self.assertIn(f, str(cm.exception))
                else:
                    cfg = ProfilerConfig.from_dict(c["config"])
                    self.assertEqual(cfg.to_dict(), c["resolved"])
                    # the JSON form reads back to the same configuration
                    again = ProfilerConfig.from_dict(cfg.to_dict())
                    self.assertEqual(again.to_dict(), c["resolved"])

    def test_keyword_api(self):
        fp = trainwatch.FrameworkProfile(
            start_step=3, num_steps=2,
            python_profiling_config=trainwatch.PythonProfilingConfig(
                start_step=10))
        cfg = trainwatch.ProfilerConfig(system_monitor_interval_millis=100,
                                        framework_profile_params=fp)
        d = cfg.to_dict()["framework_profile_params"]
        self.assertEqual(d["detailed_profiling_config"],
                         {"start_step": 3, "num_steps": 2})
        self.assertEqual(d["python_profiling_config"]["start_step"], 10)
        dl = fp.dataloader_profiling_config
        self.assertTrue(dl.in_range(fp, 4, 0))
        self.assertFalse(dl.in_range(fp, 5, 0))
        with self.assertRaises(ConfigError) as cm:
            trainwatch.FrameworkProfile(start_step=1, start_unix_time=5)
        self.assertIn("start_step", str(cm.exception))
        self.assertIn("start_unix_time", str(cm.exception))
        with self.assertRaises(ConfigError):
            trainwatch.FrameworkProfile(detailed_profiling_config={})
        with self.assertRaises(ConfigError):
            trainwatch.Hook(profiler_config={"system_monitor_interval_millis":
                                             500})


class Wire(unittest.TestCase):
    def test_round_trip(self):
        events = [
            ("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", 100, 250, 7,
             {"pid": 7, "step_num": "3"}, 0),
            ("GetNext", "DataLoaderIter", 90, 99, 7,
             {"pin_memory": False, "num_workers": 2, "x": 0.5, "n": None,
              "j": [1, 2]}, 0),
            ("Net", "Forward-SubModuleInternal", 100, 120, 7, None, 0),
            ("Empty", "P", 1, 2, 7, {}, 1),
        ]
        buf = wire_batch.encode_batch("job/1", "algo-1-0", 42, events)
        self.assertTrue(Batch.BatchBufferHasIdentifier(buf, 0))
        b = Batch.GetRootAs(buf, 0)
        # version is stored, not left to the schema default
        self.assertNotEqual(b._tab.Offset(4), 0)
        self.assertEqual(b.Version(), 1)
        self.assertEqual((b.Job(), b.Node(), b.Seq()),
                         (b"job/1", b"algo-1-0", 42))
        self.assertEqual(b.EventsLength(), 4)
        e = b.Events(0)
        self.assertEqual((e.Name(), e.StartUs(), e.EndUs(), e.Pid(),
                          e.Mode()), (b"Step:ModeKeys.EVAL", 100, 250, 7, 2))
        self.assertTrue(e.HasArgs())
        args = {e.Args(i).Key(): (e.Args(i).Value(), e.Args(i).Kind())
                for i in range(e.ArgsLength())}
        self.assertEqual(args[b"step_num"], (b"3", 0))
        self.assertEqual(args[b"pid"], (b"7", 1))
        e = b.Events(1)
        args = {e.Args(i).Key(): (e.Args(i).Value(), e.Args(i).Kind())
                for i in range(e.ArgsLength())}
        self.assertEqual(args, {b"pin_memory": (b"false", 2),
                                b"num_workers": (b"2", 1),
                                b"x": (b"0.5", 1), b"n": (b"null", 3),
                                b"j": (b"[1,2]", 4)})
        self.assertFalse(b.Events(2).HasArgs())
        self.assertEqual(b.Events(2).Mode(), 0)
        self.assertTrue(b.Events(3).HasArgs())
        self.assertEqual(b.Events(3).ArgsLength(), 0)
        self.assertEqual(b.Events(3).Source(), 1)

    def test_marker(self):
        buf = wire_batch.encode_batch(
            "j", "n", 1, (), [(wire_batch.MARKER_JOB_START, 5, 500,
                               '{"a":1}')])
        b = Batch.GetRootAs(buf, 0)
        self.assertEqual(b.EventsLength(), 0)
        m = b.Markers(0)
        self.assertEqual((m.Kind(), m.TimeUs(), m.SamplingIntervalMs(),
                          m.ProfilerConfig()), (1, 5, 500, b'{"a":1}'))


class Identity(unittest.TestCase):
    def test_node_ids(self):
        self.assertEqual(identity.node_id_for(0, "algo-1"), "algo-1-0")
        self.assertEqual(identity.node_id_for(3, "algo-12"), "algo-12-3")
        self.assertEqual(identity.node_id_for(1, "gpu-host"), "1-gpu-host")

    def test_env(self):
        old = dict(os.environ)
        try:
            os.environ.update(RANK="5", LOCAL_RANK="1", WORLD_SIZE="8")
            i = identity.Identity(host="algo-2")
            self.assertEqual((i.rank, i.local_rank, i.world_size, i.node),
                             (5, 1, 8, "algo-2-5"))
            i = identity.Identity(rank=2, host="h", node="custom")
            self.assertEqual((i.rank, i.node), (2, "custom"))
        finally:
            os.environ.clear()
            os.environ.update(old)

    def test_process_start(self):
        import time
        now = time.time_ns() // 1000
        start = identity.process_start_us()
        self.assertLessEqual(start, now)
        self.assertGreater(start, now - 3600 * 10**6)


class NoOpAndSafety(unittest.TestCase):
    def test_no_broker_is_no_op(self):
        os.environ.pop("TRAINWATCH_BROKERS", None)
        os.environ.pop("TRAINWATCH_JOB", None)
        h = trainwatch.Hook()
        self.assertFalse(h.enabled)
        h.step()
        h.mode("eval")
        h.watch(None)
        self.assertIsNone(h.close())

    def test_error_never_reaches_training(self):
        # an unreachable broker: the hook starts; then its queue breaks
        h = trainwatch.Hook(job="j", brokers="127.0.0.1:1",
                            close_timeout=0.5, handle_sigterm=False)
        self.assertTrue(h.enabled)

        def boom(ev):
            raise RuntimeError("broken queue")
        h._sender.put = boom
        logging.disable(logging.CRITICAL)
        try:
            h.step()
            h.step()  # the first error disabled the hook; nothing raised
        finally:
            logging.disable(logging.NOTSET)
        self.assertFalse(h.enabled)
        h.step()
        s = h.close()
        # JOB_START and JOB_END (still sent by a disabled hook) wait for
        # a broker that never comes
        self.assertEqual(s["undelivered"], 2)


class TorchSteps(unittest.TestCase):
    """Step counting and modes on a real torch model, events captured in
    place of the queue (no broker needed)."""

    def setUp(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3-torch missing")
        self.torch = torch
        self.hook = trainwatch.Hook(job="j", brokers="127.0.0.1:1",
                                    close_timeout=0.2, handle_sigterm=False)
        self.events = []
        self.hook._sender.put = self.events.append
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(4, 4),
                                         torch.nn.ReLU(),
                                         torch.nn.Linear(4, 1))

    def tearDown(self):
        logging.disable(logging.CRITICAL)
        self.hook.close()
        logging.disable(logging.NOTSET)

    def steps(self):
        return [(e[0], e[5]["step_num"], e[2], e[3]) for e in self.events
                if e[0].startswith("Step:")]

    def train_step(self):
        self.model(self.torch.randn(2, 4)).sum().backward()

    def test_auto_steps_and_modes(self):
        self.hook.watch(self.model)
        for _ in range(3):
            self.train_step()
        self.model.eval()
        with self.torch.no_grad():
            for _ in range(2):
                self.model(self.torch.randn(2, 4))
        self.model.train()
        self.train_step()
        self.hook.close()
        got = [(n, s) for n, s, _, _ in self.steps()]
        self.assertEqual(got, [
            ("Step:ModeKeys.TRAIN", "0"), ("Step:ModeKeys.TRAIN", "1"),
            ("Step:ModeKeys.TRAIN", "2"), ("Step:ModeKeys.EVAL", "0"),
            ("Step:ModeKeys.EVAL", "1"), ("Step:ModeKeys.TRAIN", "3")])
        for _, _, start, end in self.steps():
            self.assertLessEqual(start, end)
        phases = [e[1] for e in self.events]
        self.assertEqual(phases.count("Forward-SubModuleInternal"), 6)
        # backward only for the 4 training steps (eval ran under no_grad)
        self.assertEqual(phases.count("Backward-SubModuleInternal"), 4)
        for e in self.events:
            if e[1] == "Backward-SubModuleInternal":
                self.assertLessEqual(e[2], e[3])

    def test_explicit_steps_and_mode(self):
        self.hook.watch(self.model)
        self.hook.step()
        self.train_step()
        self.train_step()  # forwards no longer start steps
        self.hook.step()
        self.train_step()
        self.hook.mode("predict")
        self.model.eval()   # the explicit mode is kept
        self.hook.step()
        self.model(self.torch.randn(2, 4))
        self.hook.mode("bogus")  # ignored with a warning
        self.hook.close()
        got = [(n, s) for n, s, _, _ in self.steps()]
        self.assertEqual(got, [
            ("Step:ModeKeys.TRAIN", "0"), ("Step:ModeKeys.TRAIN", "1"),
            ("Step:ModeKeys.PREDICT", "0")])

    def test_optimizer_and_lr_scheduler(self):
        opt = self.torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.hook.watch(self.model, optimizer=opt)
        self.hook.watch(optimizer=opt)  # once
        sched = self.torch.optim.lr_scheduler.StepLR(opt, step_size=1,
                                                     gamma=0.5)
        for _ in range(2):
            opt.zero_grad()
            self.train_step()
            opt.step()
            sched.step()
        self.assertAlmostEqual(opt.param_groups[0]["lr"], 0.025)
        last_opt = self.hook._last_activity
        self.hook.close()
        # the last step ends where its optimizer step ended
        self.assertEqual(self.steps()[-1][3], last_opt)
        self.assertEqual(len(self.steps()), 2)

    def test_dataloader_watched_once(self):
        from torch.utils.data import DataLoader, TensorDataset
        data = TensorDataset(self.torch.randn(8, 4))
        loader = DataLoader(data, batch_size=2, num_workers=0)
        self.hook.watch(dataloader=loader)
        self.hook.watch(dataloader=loader)
        n = sum(1 for _ in loader)
        self.assertEqual(n, 4)
        names = [e[0] for e in self.events]
        self.assertEqual(names.count("GetNext"), 4)
        self.assertEqual(names.count("DataLoaderIterInitialize"), 1)
        init = [e for e in self.events if e[0] == "DataLoaderIterInitialize"]
        self.assertEqual(init[0][5]["num_workers"], 0)
        self.assertIs(init[0][5]["pin_memory"], False)


class SenderErrors(unittest.TestCase):
    def test_unencodable_event_is_dropped_and_counted(self):
        h = trainwatch.Hook(job="j", brokers="127.0.0.1:1",
                            close_timeout=0.3, handle_sigterm=False)
        logging.disable(logging.CRITICAL)
        try:
            h._emit("bad", "P", 1, 2, {"x": object()})
            h._emit("good", "P", 1, 2, None)
            s = h.close()
        finally:
            logging.disable(logging.NOTSET)
        # the bad event's batch was dropped before it got a sequence
        # number; JOB_START and JOB_END still wait for the broker
        self.assertEqual(s["errors"], 1)
        self.assertEqual(s["dropped"], 2)
        self.assertEqual(s["undelivered"], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
