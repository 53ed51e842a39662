"""The hook's local stop channel: the engine's `stop_file` action
(engine/actions/action_local.c) creates a file (written aside and
renamed, holding job=, rule=, finding= lines); the hook looks for it at
step boundaries, at most once per `poll_interval` (100 ms), so a step
costs a clock read and, ten times a second, one stat().

`{job}` in the path becomes the job id with '/' replaced by '_', as the
action writes it. A file older than the hook (mtime before the hook's
creation, 2 s of file-time slack) is left from an earlier run: ignored,
with one warning. A file whose job= line names another job is ignored
too.
"""
import logging
import os
import time

log = logging.getLogger("trainwatch")
STALE_SLACK_NS = 2 * 10**9


class StopTraining(SystemExit):
    """Raised at the step boundary after the stop file appeared and the
    hook flushed and closed. A SystemExit: `except Exception` in the
    training loop does not swallow it; uncaught, Python exits with status
    1, printing the message (no traceback). Catch it to checkpoint.
    `rule` and `finding` come from the file."""

    def __init__(self, message, path, rule="", finding=""):
        super().__init__(message)
        self.path = path
        self.rule = rule
        self.finding = finding


def stop_path(template, job):
    return template.replace("{job}", (job or "").replace("/", "_"))


class StopChannel:
    def __init__(self, template, job, poll_interval=0.1):
        self.path = stop_path(template, job)
        self._job = job
        self._interval = poll_interval
        self._next = 0.0
        self._created_ns = time.time_ns()
        self._ignored = None  # mtime of a file already ignored
        self.request = None   # {"job", "rule", "finding"} once seen

    def poll(self):
        """The stop request once the file is there (a dict of its lines),
        else None. Cheap between polls."""
        if self.request is not None:
            return self.request
        now = time.monotonic()
        if now < self._next:
            return None
        self._next = now + self._interval
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        if st.st_mtime_ns == self._ignored:
            return None
        if st.st_mtime_ns < self._created_ns - STALE_SLACK_NS:
            self._ignored = st.st_mtime_ns
            log.warning("trainwatch: stop file %s predates this process: "
                        "ignored (remove it)", self.path)
            return None
        fields = {}
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    k, _, v = line.rstrip("\n").partition("=")
                    fields[k] = v
        except OSError:
            pass
        if fields.get("job") not in (None, self._job):
            self._ignored = st.st_mtime_ns
            log.warning("trainwatch: stop file %s is for job %s, not %s: "
                        "ignored", self.path, fields["job"], self._job)
            return None
        self.request = fields
        return fields
