#!/usr/bin/python3
"""Checks a `trainwatch report` page as Chromium rendered it.

usage: report_check.py DOM.html CHROMIUM_LOG [--expect-chart TITLE ...]

DOM.html is `chromium --headless --dump-dom` of the page (the DOM after
parsing and layout), CHROMIUM_LOG its stderr with --enable-logging. Fails
(exit 1, one line per problem) when: a section is missing; an <svg
class="chart"> has no drawn shape; a src/href/url()/@import names anything
but a relative path or a fragment (a request leaving the page); the CSP meta
tag that forbids every fetch is absent; the log holds a console message
(Chromium logs each as "CONSOLE(" or ":CONSOLE(") or a CSP violation.
"""
import re
import sys
from html.parser import HTMLParser

SECTIONS = ["summary", "system-usage", "framework-metrics", "operators",
            "rules-summary", "findings", "rule-timeline", "step-durations",
            "gpu-utilization", "gpu-heatmap", "workload", "dataloading", "batch-size",
            "bottlenecks", "gpu-memory", "timeline"]
SHAPES = {"path", "rect", "circle", "line", "polyline", "polygon"}
SVG_NS = "http://www.w3.org/2000/svg"


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.sections = []
        self.charts = []  # [title, shapes]
        self.in_chart = 0
        self.urls = []
        self.csp = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "id" in a:
            self.sections.append(a["id"])
        if tag == "svg" and "chart" in (a.get("class") or "").split():
            self.charts.append([a.get("aria-label", "?"), 0])
            self.in_chart += 1
        elif self.in_chart and tag in SHAPES:
            self.charts[-1][1] += 1
        if tag == "meta" and (a.get("http-equiv") or "").lower() == \
                "content-security-policy":
            self.csp = a.get("content", "")
        for k in ("src", "href", "action", "data", "poster", "srcset"):
            if k in a:
                self.urls.append((tag, k, a[k]))
        if "style" in a:
            self.urls += [(tag, "style", u) for u in
                          re.findall(r"url\(([^)]*)\)", a["style"])]

    def handle_endtag(self, tag):
        if tag == "svg" and self.in_chart:
            self.in_chart -= 1

    def handle_data(self, data):
        for u in re.findall(r"url\(([^)]*)\)|@import\s+([^;]+)", data):
            self.urls.append(("text", "url", u[0] or u[1]))


def external(u):
    u = u.strip().strip("'\"")
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//", u))


def main():
    dom, log = sys.argv[1], sys.argv[2]
    expect = sys.argv[sys.argv.index("--expect-chart") + 1:] \
        if "--expect-chart" in sys.argv else []
    p = Page()
    p.feed(open(dom, encoding="utf-8").read())
    problems = []
    for s in SECTIONS:
        if s not in p.sections:
            problems.append("section %s missing" % s)
    if p.sections[:len(SECTIONS)] != SECTIONS:
        problems.append("sections out of order: %s" % p.sections)
    for title, shapes in p.charts:
        if shapes == 0:
            problems.append("chart '%s' draws nothing" % title)
    titles = [t for t, _ in p.charts]
    for e in expect:
        if not any(t.startswith(e) for t in titles):
            problems.append("chart '%s' absent (charts: %s)" % (e, titles))
    for tag, k, u in p.urls:
        if external(u):
            problems.append("external reference %s %s=%s" % (tag, k, u))
    if p.csp is None or "default-src 'none'" not in p.csp:
        problems.append("no CSP meta tag with default-src 'none'")
    for line in open(log, encoding="utf-8", errors="replace"):
        if "CONSOLE" in line or "Content Security Policy" in line \
                or "net::ERR" in line:
            problems.append("chromium: " + line.strip())
    if problems:
        print("\n".join(problems))
        return 1
    print("%d sections, %d charts, all drawn, no external reference, "
          "no console message" % (len(p.sections), len(p.charts)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
