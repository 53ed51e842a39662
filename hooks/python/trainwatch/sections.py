"""Sections of a training run, published as framework events so that the
engine's Progress rule can time each one (rules/progress.c).

Naming convention (what the engine reads):

  Section:<name>:begin   zero-length event when the section is entered
  Section:<name>         the whole section, start to end, when it is left

both with args {"section": <name>, "step_num": <the step it follows>}.
While a rank's newest event is a begin, the rank is inside that section.

Built-in sections need no marking: initialization (the hook's start to
the first event), training step and evaluation (steps of mode TRAIN /
EVAL; their interval runs end to end, so the time between steps belongs
to them). User-marked ones:

    with hook.section("checkpoint"):      # budgeted: checkpoint_budget
        torch.save(model.state_dict(), path)
    with hook.section("allreduce"):       # the ranks inside wait for
        dist.all_reduce(t)                # those that never came

A name starting with "checkpoint" gets the Progress rule's checkpoint
budget; any other is timed like steps (learned from its past durations).
Wrapping collectives in a section lets the rule tell the ranks that wait
from the rank they wait for.
"""
import contextlib
import time

PREFIX = "Section:"
BEGIN = ":begin"


def _now_us():
    return time.time_ns() // 1000


@contextlib.contextmanager
def section(hook, name):
    """Marks the `with` body as section `name` of the hook's rank. Never
    raises into the training loop: a hook that is off or failed makes it
    a plain block."""
    name = str(name)
    start = _now_us()
    on = getattr(hook, "enabled", False)
    if on:
        _publish(hook, PREFIX + name + BEGIN, start, start, name)
    try:
        yield
    finally:
        if on:
            _publish(hook, PREFIX + name, start, max(_now_us(), start), name)


def _publish(hook, event, start_us, end_us, name):
    try:
        steps = hook._mode_steps.get(hook._mode, 0)
        hook._emit(event, event, start_us, end_us,
                   {"section": name, "step_num": str(steps)})
    except Exception:  # the hook's own errors are its business, not training's
        pass
