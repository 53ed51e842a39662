#!/usr/bin/env python3
"""hook.section(): the events the Progress rule reads (sections.py), on a
hook whose sending side is replaced by a list, and the no-op hook.
Run: PYTHONPATH=build/hooks/python python3 -m unittest test_sections."""
import unittest

import trainwatch


class Recorded(trainwatch.Hook):
    """A Hook that keeps its events instead of sending them."""

    def __init__(self):
        super().__init__(job=None, brokers=None)  # no-op: nothing starts
        self.events = []
        self._active = True
        self._mode_steps["TRAIN"] = 7

    def _emit(self, name, phase, start_us, end_us, args=None, source=0):
        self.events.append((name, start_us, end_us, args))


class Sections(unittest.TestCase):
    def test_begin_and_span(self):
        h = Recorded()
        with h.section("checkpoint"):
            self.assertEqual(len(h.events), 1)  # the begin, on entry
        (b, bs, be, ba), (s, ss, se, sa) = h.events
        self.assertEqual(b, "Section:checkpoint:begin")
        self.assertEqual(bs, be)
        self.assertEqual(s, "Section:checkpoint")
        self.assertEqual(ss, bs)
        self.assertGreaterEqual(se, ss)
        self.assertEqual(ba, {"section": "checkpoint", "step_num": "7"})
        self.assertEqual(sa, ba)

    def test_exception_still_closes(self):
        h = Recorded()
        with self.assertRaises(ValueError):
            with h.section("allreduce"):
                raise ValueError("training's own error passes through")
        self.assertEqual([e[0] for e in h.events],
                         ["Section:allreduce:begin", "Section:allreduce"])

    def test_noop_hook(self):
        h = trainwatch.Hook(job=None, brokers=None)
        with h.section("checkpoint"):
            pass  # a plain block: nothing to send, nothing raised


if __name__ == "__main__":
    unittest.main()
