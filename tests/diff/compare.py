"""Cell-by-cell comparison of `trainwatch eval --semantics reference --json`
with the reference runner's output (../shared/reference/run_reference.py,
report mode). Shared by the differential harness (run_diff.py) and the
golden-file test (check_golden.py).

A cell is one compared value of one sub-rule of ProfilerReport: status,
Datapoints, Violations, RuleTriggered, the triggered windows (each scan
whose check held, as [index, start_us, end_us]: `eval --triggered` against
the runner's triggered_intervals; their number when no such file is
given), and every numeric leaf of the report's Details (the reference runner rounds
floats to 6 decimals and summarises CPU/IOBottleneck's per-timestamp map, so
trainwatch's side is normalised the same way here).
"""

import json
import math

REL_TOL = 1e-6
ABS_TOL = 1.5e-6  # the reference side is rounded to 6 decimals


def _num(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    return round(f, 6)


NONFINITE = "nonfinite"


def numbers_only(obj, nulls=False):
    """The runner's numbers_only: numeric leaves and all-numeric lists.
    nulls: trainwatch writes non-finite report values as null (strict JSON,
    README "nonfinite_nulls"); such a null stands for NaN or +-inf."""
    if obj is None and nulls:
        return NONFINITE
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            r = numbers_only(v, nulls)
            if r is not None:
                out[k] = r
        return out
    if isinstance(obj, list):
        if all(isinstance(x, (int, float)) for x in obj):
            return [_num(x) for x in obj]
        return None
    if isinstance(obj, (int, float)):
        return _num(obj)
    if isinstance(obj, str) and obj in ("nan", "inf", "-inf", "NaN"):
        return obj.lower()
    return None


def tw_details(rule, details, nulls=False):
    d = dict(details or {})
    if rule in ("CPUBottleneck", "IOBottleneck") and isinstance(
        d.get("bottlenecks"), dict
    ):
        b = d.pop("bottlenecks")
        keys = sorted(float(k) for k in b)
        d["bottlenecks_summary"] = {
            "count": len(b),
            "GPUs_sum": sum(v.get("GPUs", 0) for v in b.values()),
            "CPUs_sum": sum(v.get("CPUs", 0) for v in b.values()),
            "first_timestamp": keys[0] if keys else None,
            "last_timestamp": keys[-1] if keys else None,
        }
    return numbers_only(d, nulls)


def flatten(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(v, prefix + "." + str(k), out)
    elif isinstance(obj, list):
        out[prefix + ".len"] = len(obj)
        for i, v in enumerate(obj):
            flatten(v, "%s[%d]" % (prefix, i), out)
    else:
        out[prefix] = obj


def equal(a, b):
    if isinstance(a, list) or isinstance(b, list):
        return a == b
    if a == NONFINITE or b == NONFINITE:
        return {a, b} <= {NONFINITE, "nan", "inf", "-inf"}
    if a is None or b is None or isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def read_triggered(path):
    """{(parent, rule): [[scan, start_us, end_us], ...]} from the JSON lines
    of `trainwatch eval --triggered FILE`."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                t = json.loads(line)
                out.setdefault((t["parent"], t["rule"]), []).append(
                    [t["scan"], t["start_us"], t["end_us"]])
    return out


def tw_rule_cells(rule, triggered=None):
    """Cells of one trainwatch sub-rule (an entry of eval --json's rules);
    triggered: read_triggered()'s map, or None to compare counts only."""
    rep = rule.get("report") or {}
    cells = {
        "status": rule.get("status"),
        "Datapoints": rep.get("Datapoints", rule.get("datapoints")),
        "Violations": rep.get("Violations", rule.get("violations")),
        "RuleTriggered": rep.get("RuleTriggered", rule.get("rule_triggered")),
        "triggered_windows": rule.get("conditions_met"),
    }
    if triggered is not None:
        cells["triggered_windows"] = triggered.get(
            (rule.get("parent"), rule["name"]), [])
    nulls = bool(rule.get("nonfinite_nulls"))
    flatten(tw_details(rule["name"], rep.get("Details"), nulls), "Details",
            cells)
    return cells


def ref_rule_cells(entry, windows=False):
    """Cells of one reference sub-rule (ProfilerReport.rules[name]);
    windows: the triggered windows themselves, not their number."""
    got = [list(t) for t in entry.get("triggered_intervals") or []]
    cells = {
        "status": entry.get("status"),
        "Datapoints": entry.get("Datapoints"),
        "Violations": entry.get("Violations"),
        "RuleTriggered": entry.get("RuleTriggered"),
        "triggered_windows": got if windows else len(got),
    }
    flatten(entry.get("Details") or {}, "Details", cells)
    return cells


STANDALONE = [
    "LowGPUUtilization", "CPUBottleneck", "IOBottleneck", "GPUMemoryIncrease",
    "BatchSize", "StepOutlier", "LoadBalancing", "MaxInitializationTime",
    "Dataloader", "OverallSystemUsage", "OverallFrameworkMetrics",
]


def tw_cells(tw_json, standalone=False, triggered=None):
    """{rule: cells} for ProfilerReport's sub-rules in trainwatch's output,
    or (standalone) for the rules run each on its own."""
    want = None if standalone else "ProfilerReport"
    return {
        r["name"]: tw_rule_cells(r, triggered)
        for r in tw_json.get("rules", [])
        if r.get("parent") == want and r["name"] != "ProfilerReport"
    }


def ref_standalone_cells(ref_json, windows=False):
    """({rule: cells}, {rule: crash}) from the runner's standalone mode
    (each rule in its own process with its own trial)."""
    cells, crashes = {}, {}
    for name, e in (ref_json.get("rules") or {}).items():
        if e.get("status") == "Error":
            tail = e.get("traceback_tail") or []
            crashes[name] = "%s in window %s (%s)" % (
                e.get("error"), e.get("windows"),
                " | ".join(str(x).strip() for x in tail[-4:-2]))
            continue
        cells[name] = ref_rule_cells(e, windows)
    return cells, crashes


def ref_cells(ref_json, windows=False):
    """({rule: cells}, {rule: crash text}) from the reference's output."""
    pr = ref_json.get("ProfilerReport") or {}
    cells, crashes = {}, {}
    if pr.get("status") == "Error":
        # The report crashed (in some window): its sub-rules' numbers are
        # those of a stopped run, which trainwatch never reproduces.
        tail = pr.get("traceback_tail") or []
        crashes["ProfilerReport"] = "%s in window %s (%s)" % (
            pr.get("error"), pr.get("windows"),
            " | ".join(str(x).strip() for x in tail[-4:-2]))
        return {}, crashes
    for name, e in (pr.get("rules") or {}).items():
        if e.get("status") == "Error":
            tail = e.get("traceback_tail") or ""
            if isinstance(tail, list):
                tail = " | ".join(tail[-3:])
            crashes[name] = "%s (%s)" % (e.get("error"), str(tail)[-300:])
            continue
        cells[name] = ref_rule_cells(e, windows)
    return cells, crashes


def compare(tw, ref):
    """Compares {rule: cells} maps. Returns (cells, equal, differences),
    each difference a (rule, cell, trainwatch value, reference value)."""
    n = same = 0
    diffs = []
    for rule, rc in sorted(ref.items()):
        tc = tw.get(rule)
        if tc is None:
            n += 1
            diffs.append((rule, "(rule)", None, "present"))
            continue
        for key in sorted(set(rc) | set(tc)):
            n += 1
            a, b = tc.get(key), rc.get(key)
            if equal(a, b):
                same += 1
            else:
                diffs.append((rule, key, a, b))
    return n, same, diffs
