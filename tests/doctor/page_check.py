#!/usr/bin/env python3
"""The doctor's pages in a real browser: headless Chromium loads each page with networking off.

Usage: page_check.py PAGES_DIR [DOCTOR_TESTS]

Checks the pages in PAGES_DIR: those the case doctor.pages_of_every_kind_of_pipeline wrote there
(a page and its JSON for each kind of pipeline) with PINFEED_DOCTOR_PAGES=PAGES_DIR, which CTest
runs first (a fixture; the case times pipelines, so it runs alone, and the browser beside other
tests). Given DOCTOR_TESTS, it runs that case itself first. For each page:
  - `--dump-dom` in a network namespace of its own (`unshare -n`; where that is refused, Chromium's
    own proxy and resolver are pointed nowhere): the DOM must show the verdict of the page's JSON,
    every chart with data (each titled and described for screen readers, with its table of numbers),
    the bottleneck's stages drawn as such, and the tuner's path;
  - the browser's log must hold no console message (the page has no script, so any message is a
    blocked fetch or an error);
  - screenshots at 1280x800 and 390x844, which must have those sizes and show more than a blank page,
    and a print to PDF, which must give a page or more.
First it checks itself: a page that fetches an image and one whose chart has no data must fail.
Exits 77 (skipped) when Chromium is not installed, naming the package.
"""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SIZES = [(1280, 800), (390, 844)]


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def network_off():
    """The command prefix that runs the browser without a network, and how."""
    try:
        if subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=10).returncode == 0:
            return ["unshare", "-n"], [], "a network namespace of its own (unshare -n)"
    except (OSError, subprocess.TimeoutExpired):
        pass
    flags = ["--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-bypass-list=<-loopback>"]
    return [], flags, "unshare -n refused: Chromium's proxy and resolver pointed nowhere"


def browse(browser, prefix, flags, page, extra):
    profile = tempfile.mkdtemp(prefix="pinfeed-page-")
    cmd = prefix + [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
                    "--enable-logging=stderr", "--v=0", "--user-data-dir=" + profile]
    cmd += flags + extra + ["file://" + os.path.abspath(page)]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", "Chromium did not finish within 120 s")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


class Dom(html.parser.HTMLParser):
    """What the checks read of a page: its charts, their data, the verdict, the highlighted stages."""

    def __init__(self):
        super().__init__()
        self.stack = []
        self.charts = []          # dicts: id, points, data, title, desc, rows
        self.figure = None
        self.text_of = None       # (element kind, sink) while reading an element's text
        self.verdict = ""
        self.bottleneck_stages = set()
        self.verdict_bottleneck = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        self.stack.append(tag)
        if tag == "figure" and "chart-figure" in classes:
            self.figure = {"id": a.get("id"), "points": None, "data": 0, "drawn": 0, "title": "", "desc": "", "rows": 0}
            self.charts.append(self.figure)
        if tag == "svg" and "chart" in classes and self.figure is not None:
            self.figure["points"] = int(a.get("data-points", "0"))
            self.figure["labelled"] = a.get("role") == "img" and bool(a.get("aria-labelledby"))
        if "datum" in classes and self.figure is not None:
            self.figure["data"] += 1
            # Drawn with a size: a bar wider than nothing, a path with more than its empty "M0 0" (a
            # series of zeros says so in words instead: handle_data counts that).
            if (tag == "rect" and float(a.get("width", "0")) > 0) or (tag == "path" and a.get("d", "M0 0") != "M0 0"):
                self.figure["drawn"] += 1
            if "bottleneck" in classes and a.get("data-stage"):
                self.bottleneck_stages.add(a["data-stage"])
        if tag in ("title", "desc") and self.figure is not None and self.stack[-2:-1] == ["svg"]:
            self.text_of = tag
        if tag == "tr" and self.figure is not None and "tbody" in self.stack:
            self.figure["rows"] += 1
        if tag == "p" and a.get("id") == "verdict-text":
            self.text_of = "verdict"
        if tag == "section" and a.get("id") == "verdict":
            self.verdict_bottleneck = (a.get("data-bottleneck") or "").split()

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass
        if tag == "figure":
            self.figure = None
        if tag in ("title", "desc", "p"):
            self.text_of = None

    def handle_data(self, data):
        if self.figure is not None and "every value is 0" in data:
            self.figure["drawn"] += 1
        if self.text_of == "verdict":
            self.verdict += data
        elif self.text_of in ("title", "desc") and self.figure is not None:
            self.figure[self.text_of] += data


def png_check(path, size):
    """None when `path` is a PNG of `size` with more than a few colours, else what is wrong."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "not a PNG"
    at, idat, head = 8, b"", None
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + n
    w, h, depth, colour = head[0], head[1], head[2], head[3]
    if (w, h) != size:
        return "%dx%d, not %dx%d" % (w, h, size[0], size[1])
    if depth != 8 or colour not in (2, 6):
        return "an unexpected PNG format (depth %d, colour type %d)" % (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw, stride, prev, colours = zlib.decompress(idat), w * bpp, bytearray(w * bpp), set()
    for y in range(h):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 255
        if y % 8 == 0:
            colours.update(bytes(line[i:i + 3]) for i in range(0, stride, bpp * 4))
        prev = line
    return None if len(colours) > 16 else "only %d colours: a blank page" % len(colours)


def check_page(browser, prefix, flags, page, expect, shots):
    """Problems with `page` (a list of strings); `expect` is its JSON report, or None."""
    problems = []
    p = browse(browser, prefix, flags, page, ["--dump-dom"])
    if p.returncode != 0:
        return ["Chromium exited %d: %s" % (p.returncode, p.stderr[-500:])]
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    problems += ["console: " + line for line in console]
    source = open(page, encoding="utf-8").read()
    if "Content-Security-Policy" not in source or "<script" in source:
        problems.append("the page has no Content-Security-Policy, or a script")
    bad_numbers = re.findall(r'\b(?:x|y|x1|x2|y1|y2|cx|cy|width|height|d)="[^"]*(?:nan|inf)[^"]*"', source, re.IGNORECASE)
    if bad_numbers:
        problems.append("NaN or infinity in the drawing: %s" % bad_numbers[:3])
    dom = Dom()
    dom.feed(p.stdout)
    if not dom.charts:
        problems.append("no chart")
    for c in dom.charts:
        if not c["points"] or c["data"] == 0 or not c["drawn"]:
            problems.append("chart %s has no data (data-points %s, %d drawn, %d with a size)" %
                            (c["id"], c["points"], c["data"], c["drawn"]))
        if not c.get("labelled") or not c["title"].strip() or not c["desc"].strip():
            problems.append("chart %s has no title or description for a screen reader" % c["id"])
        if c["rows"] == 0:
            problems.append("chart %s has no table of numbers" % c["id"])
    if expect is not None:
        if dom.verdict.strip() != expect["verdict"]:
            problems.append("verdict %r, the JSON says %r" % (dom.verdict.strip(), expect["verdict"]))
        if set(expect["bottleneck"]) != dom.bottleneck_stages or dom.verdict_bottleneck != expect["bottleneck"]:
            problems.append("highlighted stages %s (verdict %s), the JSON names %s" %
                            (sorted(dom.bottleneck_stages), dom.verdict_bottleneck, expect["bottleneck"]))
        ids = {c["id"] for c in dom.charts}
        want = {"chart-ladder", "chart-stages", "chart-wait-l0"}
        if expect.get("tuning", {}).get("path"):
            want.add("chart-tuner")
        if any(m["ran"] and m["id"] not in ("L0", "L4", "L5") for m in expect["modes"]):
            want.add("chart-wait-best")
        if any(s["measured"] for s in expect["suggestions"] + expect["no_gain"]):
            want.add("chart-trials")
        if expect["transforms"]:
            want.add("chart-transforms")
        if want - ids:
            problems.append("missing charts: %s" % sorted(want - ids))
    if shots:  # printed: a PDF of one page or more (the print styles apply)
        pdf = os.path.splitext(page)[0] + ".pdf"
        s = browse(browser, prefix, flags, page, ["--print-to-pdf=" + pdf, "--no-pdf-header-footer"])
        data = open(pdf, "rb").read() if os.path.exists(pdf) else b""
        if not data.startswith(b"%PDF") or data.count(b"/Type /Page") - data.count(b"/Type /Pages") < 1:
            problems.append("printing gave no PDF page: %s" % s.stderr[-300:])
    for w, h in shots:
        png = os.path.splitext(page)[0] + "-%dx%d.png" % (w, h)
        s = browse(browser, prefix, flags, page, ["--screenshot=" + png, "--window-size=%d,%d" % (w, h)])
        if s.returncode != 0 or not os.path.exists(png):
            problems.append("no screenshot at %dx%d: %s" % (w, h, s.stderr[-300:]))
            continue
        why = png_check(png, (w, h))
        if why:
            problems.append("screenshot %dx%d: %s" % (w, h, why))
    return problems


def self_check(browser, prefix, flags, work):
    """The checks must fail a page that fetches and one with an empty chart."""
    fetching = os.path.join(work, "self-fetch.html")
    with open(fetching, "w") as f:
        f.write('<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src '
                "'none'\"></head><body><img src=\"http://192.0.2.1/x.png\"><figure class=\"chart-figure\" id=\"c\">"
                '<svg class="chart" role="img" aria-labelledby="t" data-points="1"><title>t</title><desc>d</desc>'
                '<rect class="datum" width="1" height="1"/></svg><table><tbody><tr><td>1</td></tr></tbody></table>'
                "</figure></body></html>")
    empty = os.path.join(work, "self-empty.html")
    with open(empty, "w") as f:
        f.write('<!DOCTYPE html><html><body><figure class="chart-figure" id="c"><svg class="chart" role="img" '
                'aria-labelledby="t" data-points="0"><title>t</title><desc>d</desc></svg></figure></body></html>')
    a = check_page(browser, prefix, flags, fetching, None, [])
    b = check_page(browser, prefix, flags, empty, None, [])
    ok = any(x.startswith("console: ") for x in a) and any("has no data" in x for x in b)
    return ok, a, b


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        return 2
    out, tests = sys.argv[1], (sys.argv[2] if len(sys.argv) == 3 else None)
    browser = chromium()
    if browser is None:
        print("SKIP: Chromium is not installed (Debian: chromium; scripts/install-test-env.sh installs it)")
        return 77
    prefix, flags, how = network_off()
    print("browser %s, networking off: %s" % (browser, how))
    selfdir = tempfile.mkdtemp(prefix="pinfeed-page-self-")
    ok, a, b = self_check(browser, prefix, flags, selfdir)
    shutil.rmtree(selfdir, ignore_errors=True)
    if not ok:
        print("FAIL: the checks passed a page they must fail:\n  fetching: %s\n  empty chart: %s" % (a, b))
        return 1
    if tests is not None:
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env = dict(os.environ, PINFEED_DOCTOR_PAGES=out)
        r = subprocess.run([tests, "-tc=doctor.pages_of_every_kind_of_pipeline"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print("FAIL: the pages' case failed:\n" + r.stdout[-4000:] + r.stderr[-2000:])
            return 1
    if not os.path.isdir(out):
        print("FAIL: no pages in %s (the case doctor.pages_of_every_kind_of_pipeline writes them)" % out)
        return 1
    pages = sorted(f for f in os.listdir(out) if f.endswith(".html") and not f.startswith("self-"))
    kinds = {"synthetic", "jpeg-folder", "tar-shards", "own-source"}
    if not kinds <= {os.path.splitext(p)[0] for p in pages}:
        print("FAIL: pages %s, want at least %s" % (pages, sorted(kinds)))
        return 1
    failed = 0
    for page in pages:
        path = os.path.join(out, page)
        with open(os.path.splitext(path)[0] + ".json") as f:
            expect = json.load(f)
        problems = check_page(browser, prefix, flags, path, expect, SIZES)
        print("%s %s%s" % ("ok  " if not problems else "FAIL", page, "".join("\n    " + p for p in problems)))
        failed += bool(problems)
    print("%d of %d pages failed" % (failed, len(pages)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
