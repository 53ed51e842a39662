#!/usr/bin/env python3
"""Helpers for the `trainwatch run` integration tests.

  results.py same EVAL_JSON RESULTS_JSON
      exit 0 when the daemon's results file has exactly the rule results
      of `trainwatch eval --json` (the "rules" array compared as raw text,
      byte for byte) and the same first/latest timestamps and scan count.
  results.py alerts SCHEMA FILE
      FILE holds one alert JSON per line (kcat -f '%s\\n'); validates each
      against SCHEMA with python3-jsonschema and prints a summary as
      key=value pairs: alerts, ids (distinct), and per job the rules whose
      final status is IssuesFound ("final_issues.JOB=Rule,Rule").
"""
import json
import sys


def rules_text(path):
    text = open(path, encoding="utf-8").read()
    key = '"rules": '
    i = text.index(key) + len(key)
    _, end = json.JSONDecoder().raw_decode(text, i)
    return text[i:end], json.loads(text)


def same(eval_path, results_path):
    a, ea = rules_text(eval_path)
    b, eb = rules_text(results_path)
    ok = True
    for k in ("job", "first_timestamp_us", "latest_timestamp_us", "scans"):
        if ea[k] != eb[k]:
            print(f"{results_path}: {k} {eb[k]!r}, eval says {ea[k]!r}")
            ok = False
    if a != b:
        ok = False
        for ra, rb in zip(ea["rules"], eb["rules"]):
            if ra != rb:
                print(f"{results_path}: rule {ra['name']} differs:\n"
                      f"  eval:   {json.dumps(ra)[:400]}\n"
                      f"  stream: {json.dumps(rb)[:400]}")
        if len(ea["rules"]) != len(eb["rules"]):
            print(f"{results_path}: {len(eb['rules'])} rules, eval "
                  f"{len(ea['rules'])}")
        if ea["rules"] == eb["rules"]:
            # equal as JSON, not as text (-0.0 and 0.0, escapes): show where
            at = next(i for i, (x, y) in enumerate(zip(a + "\0", b + "\0"))
                      if x != y)
            print(f"{results_path}: rules text differs at {at}:\n"
                  f"  eval:   {a[max(0, at - 160):at + 80]!r}\n"
                  f"  stream: {b[max(0, at - 160):at + 80]!r}")
    return 0 if ok else 1


def alerts(schema_path, path):
    import jsonschema
    schema = json.load(open(schema_path, encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)
    n, ids, final_issues = 0, set(), {}
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.strip()
        if not line:
            continue
        doc = json.loads(line)
        errors = sorted(v.iter_errors(doc), key=str)
        if errors:
            print(f"{path}:{lineno}: invalid alert: {errors[0].message} "
                  f"at {list(errors[0].absolute_path)}")
            return 1
        n += 1
        ids.add(doc["id"])
        if doc["final"] and doc["status"] == "IssuesFound":
            final_issues.setdefault(doc["job"], []).append(doc["rule"])
    print(f"alerts={n} ids={len(ids)}")
    for job, rules in sorted(final_issues.items()):
        print(f"final_issues.{job}={','.join(sorted(rules))}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        sys.exit(same(sys.argv[2], sys.argv[3]))
    if len(sys.argv) == 4 and sys.argv[1] == "alerts":
        sys.exit(alerts(sys.argv[2], sys.argv[3]))
    print(__doc__)
    sys.exit(2)
